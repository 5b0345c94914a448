"""The shape of an engine rule table.

Everything the tool knows about how an engine loads an EAGLE-3 drafter is data in an
:class:`EngineRules` instance (one module per engine, each naming the engine revision it
describes). The simulator and the checks interpret these tables; they hold no per-engine
``if``s. A new engine release is a table edit.

Condition strings (``when``) are ``&``-joined tokens, each optionally negated with ``!``;
the tokens are computed from the config and keys by :func:`eagle3_forensics.engines.simulate.conditions`.
"""

from __future__ import annotations

from dataclasses import dataclass

# How an engine fills one of its parameters.
FROM_CHECKPOINT = "checkpoint"  # must come from the checkpoint, else it stays at initialisation
FROM_TARGET = "target"  # the engine copies it from the target, overwriting any checkpoint tensor
TARGET_IF_ABSENT = "target_if_absent"  # checkpoint tensor if present, else the target's
DEFAULT_IF_ABSENT = "default_if_absent"  # checkpoint tensor if present, else an engine default (zeros)

# What an engine does with a checkpoint tensor it has no parameter for.
DROP = "drop"  # silently ignored
REJECT = "reject"  # load fails with an exception
WARN = "warn"  # ignored with a warning in the log

# How the engine prefixes checkpoint names before looking them up.
NAME_THEN_MODEL = "name_then_model"  # try ``name``, then ``model.`` + name (SGLang)
MODEL_EXCEPT_LM_HEAD = "model_except_lm_head"  # ``model.`` + name unless it is the lm_head (vLLM)
AS_IS = "as_is"  # the name must match exactly (EAGLE, speculators)


@dataclass(frozen=True)
class ParamRule:
    """One engine parameter. ``{layer}`` expands over decoder layers, ``{j}`` over aux states."""

    name: str
    when: str = ""
    filled_by: str = FROM_CHECKPOINT
    first_layer_only: bool = False


@dataclass(frozen=True)
class KeyRule:
    """A regex over checkpoint names, active when ``when`` holds."""

    pattern: str
    target: str = ""  # replacement (renames, fusions) or parameter name (consumed keys)
    when: str = ""
    note: str = ""


@dataclass(frozen=True)
class AuxSource:
    """A config field an engine reads aux-layer ids from, and how it converts them.

    ``hf_offset`` is added to each stored id to get the Hugging Face ``hidden_states``
    index (the input of decoder layer ``i``): 0 for vLLM/speculators ids, +1 for the
    output-of-layer ids of SGLang's nested ``eagle_config`` / SpecForge / TRT-LLM.
    """

    level: str  # "top" or "eagle_config"
    hf_offset: int


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
    prefix: str
    unknown_keys: str
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


SUPPORTED_NORM_FLAGS = ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")

# [2, N//2, N-3] in HF-index convention: the default of every engine (same physical tensors).
HF_DEFAULT_AUX: tuple[tuple[int, int, int], ...] = ((0, 1, 2), (1, 2, 0), (1, 1, -3))
