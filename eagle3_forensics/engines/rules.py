"""The shape of an engine rule table.

Everything the tool knows about how an engine loads an EAGLE-3 drafter is data in an
:class:`EngineRules` instance (one module per engine, each naming the engine revision it
describes). The simulator and the checks interpret these tables; they hold no per-engine
``if``s. A new engine release is a table edit.

Condition strings (``when``) are ``&``-joined tokens, each optionally negated with ``!``;
the tokens are computed from the config and keys by :func:`eagle3_forensics.engines.simulate.conditions`
and listed in :data:`CONDITION_TOKENS`. Every constant is a ``StrEnum`` member (its value is the
string the JSON output has always carried), and a table is checked when it is built: an unknown
``when`` token, a regex that does not compile or a value outside its enum raises at import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum


class FilledBy(StrEnum):
    """How an engine fills one of its parameters."""

    CHECKPOINT = "checkpoint"  # must come from the checkpoint, else it stays at initialisation
    TARGET = "target"  # the engine copies it from the target, overwriting any checkpoint tensor
    TARGET_IF_ABSENT = "target_if_absent"  # checkpoint tensor if present, else the target's
    DEFAULT_IF_ABSENT = "default_if_absent"  # checkpoint tensor if present, else an engine default (zeros)


class UnknownKeys(StrEnum):
    """What an engine does with a checkpoint tensor it has no parameter for."""

    DROP = "drop"  # silently ignored
    REJECT = "reject"  # load fails with an exception
    WARN = "warn"  # ignored with a warning in the log


class Prefix(StrEnum):
    """How the engine prefixes checkpoint names before looking them up."""

    NAME_THEN_MODEL = "name_then_model"  # try ``name``, then ``model.`` + name (SGLang)
    MODEL_EXCEPT_LM_HEAD = "model_except_lm_head"  # ``model.`` + name unless it is the lm_head (vLLM)
    AS_IS = "as_is"  # the name must match exactly (EAGLE, speculators)


class ConfigStyle(StrEnum):
    """The config layouts an engine may parse (``io.config.DrafterConfig.style``)."""

    FLAT = "flat"
    SPECULATORS = "speculators"


class AuxLevel(StrEnum):
    """Where in the config an engine reads aux-layer ids (``io.config`` levels)."""

    TOP = "top"
    EAGLE_CONFIG = "eagle_config"


class D2TEncoding(StrEnum):
    """How an engine reads ``d2t``."""

    OFFSETS = "offsets"  # target id = i + d2t[i]
    ABSOLUTE = "absolute"  # target id = d2t[i]


class MissingDraftVocabSize(StrEnum):
    """What an engine does when the config has no ``draft_vocab_size``."""

    TARGET_HEAD = "target_head"  # borrows the target's lm_head (SGLang)
    VOCAB_SIZE = "vocab_size"  # assumes the full vocabulary (vLLM, EAGLE)


class NormOutputMeaning(StrEnum):
    """What ``norm_output`` means to an engine that reads it."""

    POST_NORM_RECURRENCE = "post_norm_recurrence"


# The names the tables use (kept: each is the enum member, so comparisons and JSON see the string).
FROM_CHECKPOINT = FilledBy.CHECKPOINT
FROM_TARGET = FilledBy.TARGET
TARGET_IF_ABSENT = FilledBy.TARGET_IF_ABSENT
DEFAULT_IF_ABSENT = FilledBy.DEFAULT_IF_ABSENT
DROP = UnknownKeys.DROP
REJECT = UnknownKeys.REJECT
WARN = UnknownKeys.WARN
NAME_THEN_MODEL = Prefix.NAME_THEN_MODEL
MODEL_EXCEPT_LM_HEAD = Prefix.MODEL_EXCEPT_LM_HEAD
AS_IS = Prefix.AS_IS

SUPPORTED_NORM_FLAGS = ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")

# Every token a ``when`` may use: exactly the keys of
# :func:`eagle3_forensics.engines.simulate.conditions` (tests/unit/test_engines.py keeps them equal).
CONDITION_TOKENS: dict[str, str] = {
    "bias": "the config says bias: true",
    "hidden_differs": "target_hidden_size is set and differs from hidden_size",
    "has_target_hidden_size": "target_hidden_size is set",
    "tied": "the engine honours tie_word_embeddings and it is true",
    "has_draft_vocab_size": "draft_vocab_size is set",
    "reduced_vocab": "draft_vocab_size < vocab_size",
    "norm_before_fc": "the engine acts on norm_before_fc and it is true",
    "fc_norm": "the engine acts on fc_norm and it is true",
    "qwen3": "model_type is qwen3",
    "has_embed": "the checkpoint has an embed_tokens tensor",
}


def when_tokens(when: str) -> list[tuple[str, bool]]:
    """``(token, negated)`` for each ``&``-joined term of a condition string."""
    out = []
    for term in filter(None, (t.strip() for t in when.split("&"))):
        out.append((term.lstrip("!").strip(), term.startswith("!")))
    return out


def _check_when(when: str, where: str) -> None:
    for token, _ in when_tokens(when):
        if token not in CONDITION_TOKENS:
            raise ValueError(
                f"{where}: unknown condition {token!r} in when={when!r}; known: {', '.join(CONDITION_TOKENS)}"
            )


@dataclass(frozen=True)
class ParamRule:
    """One engine parameter. ``{layer}`` expands over decoder layers, ``{j}`` over aux states."""

    name: str
    when: str = ""
    filled_by: FilledBy = FROM_CHECKPOINT
    first_layer_only: bool = False

    def __post_init__(self) -> None:
        _check_when(self.when, f"ParamRule {self.name!r}")
        object.__setattr__(self, "filled_by", FilledBy(self.filled_by))


@dataclass(frozen=True)
class KeyRule:
    """A regex over checkpoint names, active when ``when`` holds."""

    pattern: str
    target: str = ""  # replacement (renames, fusions) or parameter name (consumed keys)
    when: str = ""
    note: str = ""
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_when(self.when, f"KeyRule {self.pattern!r}")
        try:
            regex = re.compile(self.pattern)
            regex.sub(self.target, "")  # parses the replacement template: a bad group reference fails here
        except re.error as exc:
            raise ValueError(f"KeyRule {self.pattern!r} -> {self.target!r}: {exc}") from None
        object.__setattr__(self, "regex", regex)


@dataclass(frozen=True)
class AuxSource:
    """A config field an engine reads aux-layer ids from, and how it converts them.

    ``hf_offset`` is added to each stored id to get the Hugging Face ``hidden_states``
    index (the input of decoder layer ``i``): 0 for vLLM/speculators ids, +1 for the
    output-of-layer ids of SGLang's nested ``eagle_config`` / SpecForge / TRT-LLM.
    """

    level: str  # "top" or "eagle_config" (AuxLevel)
    hf_offset: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "level", AuxLevel(self.level))


@dataclass(frozen=True)
class EngineRules:
    name: str
    display: str
    revision: str
    sources: tuple[str, ...]

    # -- config ---------------------------------------------------------------------
    config_styles: frozenset[str]  # which config layouts the engine can parse
    flat_architectures: tuple[str, ...] | None  # a flat config must name one of these (None: any)
    speculators_architectures: tuple[str, ...] | None  # architectures a speculators config may carry
    flat_required_fields: tuple[str, ...]
    max_layers: int | None  # decoder layers the engine builds (None: as many as configured)

    # -- keys -----------------------------------------------------------------------
    skip: tuple[KeyRule, ...]  # names the engine ignores by design (never a problem)
    consume: tuple[KeyRule, ...]  # names turned into something other than a parameter
    renames: tuple[KeyRule, ...]
    fuse: tuple[KeyRule, ...]
    prefix: Prefix
    unknown_keys: UnknownKeys
    params: tuple[ParamRule, ...]

    # -- semantics ------------------------------------------------------------------
    d2t_encoding: str  # "offsets": target = i + d2t[i]
    missing_d2t: str  # what a reduced-vocabulary drafter without d2t gets
    aux_sources: tuple[AuxSource, ...]  # tried in order; none present -> default
    aux_default_hf: tuple[tuple[int, int, int], ...]  # default ids in HF-index convention: N*a//b + c
    aux_count_from_ids: bool  # fc width follows the number of ids (else fixed at 3)
    norm_flags: frozenset[str]  # normalisation variants the engine implements
    norm_output_meaning: str | None  # "post_norm_recurrence" when read, None when ignored
    speculators_norm_before_residual_default: bool | None  # assumed when a speculators config lacks it
    honours_tie_word_embeddings: bool
    missing_draft_vocab_size: str  # "target_head" (SGLang) | "vocab_size" (vLLM, EAGLE)
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """A mistyped value fails when the table is built (at import), not when it is first read."""
        where = f"EngineRules {self.name!r}"
        try:
            set_ = object.__setattr__
            set_(self, "prefix", Prefix(self.prefix))
            set_(self, "unknown_keys", UnknownKeys(self.unknown_keys))
            set_(self, "config_styles", frozenset(ConfigStyle(c) for c in self.config_styles))
            set_(self, "d2t_encoding", D2TEncoding(self.d2t_encoding))
            set_(self, "missing_draft_vocab_size", MissingDraftVocabSize(self.missing_draft_vocab_size))
            if self.norm_output_meaning is not None:
                set_(self, "norm_output_meaning", NormOutputMeaning(self.norm_output_meaning))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        unknown = set(self.norm_flags) - set(SUPPORTED_NORM_FLAGS)
        if unknown:
            raise ValueError(f"{where}: unknown norm flags {sorted(unknown)}; known: {SUPPORTED_NORM_FLAGS}")
        if not self.config_styles:
            raise ValueError(f"{where}: parses no config style")
        for a, b, _ in self.aux_default_hf:
            if b <= 0 or a < 0:
                raise ValueError(f"{where}: aux_default_hf term N*{a}//{b} is not a layer index")

    def aux_default(self, num_target_layers: int) -> list[int]:
        """The engine's default aux ids (HF-index convention) for a target with ``N`` layers."""
        return [num_target_layers * a // b + c for a, b, c in self.aux_default_hf]

    def aux_default_text(self) -> str:
        def term(a: int, b: int, c: int) -> str:
            base = "" if a == 0 else ("N" if b == 1 else f"N//{b}")
            if not base:
                return str(c)
            return base + (f"{c:+d}" if c else "")

        return "[" + ", ".join(term(*t) for t in self.aux_default_hf) + "]"


# [2, N//2, N-3] in HF-index convention: the default of every engine (same physical tensors).
HF_DEFAULT_AUX: tuple[tuple[int, int, int], ...] = ((0, 1, 2), (1, 2, 0), (1, 1, -3))
