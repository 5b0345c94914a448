"""The shape of an engine release table.

Everything the tool knows about how one *release range* of an engine loads an EAGLE-3
drafter is data in an :class:`EngineRules` instance, decoded from the ``loader`` section of the
release's record (``engines/records/``, :mod:`.releases`). Every table names the package, the
version range it covers and the files it was read from (``package==version path``).

The simulator (:mod:`eagle3_forensics.engines.simulate`) and the checks interpret these tables;
they hold no per-engine ``if``s. What differs between engines or releases is a field here.

Conventions:

- Condition strings (``when``) are ``&``-joined tokens from :data:`CONDITION_TOKENS`, each
  optionally negated with ``!``; they are validated when a table is built.
- Key patterns are regular expressions, compiled when a table is built.
- Aux-layer ids are compared in the Hugging Face ``hidden_states`` index (the input of decoder
  layer ``i``; SGLang's internal capture id is the same number).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from eagle3_forensics.engines.proof import Citation, Proof


class Fill(StrEnum):
    """How an engine fills one of its parameters."""

    CHECKPOINT = "checkpoint"  # must come from the checkpoint, else it stays at initialisation
    TARGET = "target"  # the engine copies it from the target, overwriting any checkpoint tensor
    TARGET_IF_ABSENT = "target_if_absent"  # checkpoint tensor if present, else the target's
    DEFAULT_IF_ABSENT = "default_if_absent"  # checkpoint tensor if present, else an engine default (zeros)
    # Built but never read by the forward pass: leaving it unfilled is harmless (e.g. vLLM's
    # hidden_norm in layers >= 1, SGLang's input_layernorm in layers >= 1).
    UNUSED = "unused"
    # Copied from the verifier only when the freshly allocated memory happens to be NaN
    # (speculators under Transformers 5): nondeterministic when absent.
    VERIFIER_IF_NAN = "verifier_if_nan"


class UnknownKeys(StrEnum):
    """What an engine does with a checkpoint tensor it has no parameter for."""

    DROP = "drop"  # silently ignored
    REJECT = "reject"  # load fails with an exception
    WARN = "warn"  # ignored with a warning in the log


class Prefix(StrEnum):
    """How the engine prefixes checkpoint names before looking them up."""

    NAME_THEN_MODEL = "name_then_model"  # try ``name``, then ``model.`` + name (SGLang Llama class)
    MODEL_UNLESS_LM_HEAD = "model_unless_lm_head"  # ``model.`` + name unless "lm_head" is in it (vLLM)
    MODEL_UNLESS_LEADING_LM_HEAD = "model_unless_leading_lm_head"  # unless it starts with lm_head.
    AS_IS = "as_is"  # the name must match exactly (EAGLE, speculators)


class Layers(StrEnum):
    """Which decoder layers a ``{layer}`` parameter exists in."""

    ALL = "all"
    FIRST = "first"
    REST = "rest"  # layers 1..n-1


class ConfigStyle(StrEnum):
    FLAT = "flat"  # EAGLE / SpecForge: a Llama config with drafter fields
    SPECULATORS = "speculators"  # speculators: transformer_layer_config + speculators_config


class Level(StrEnum):
    """A config level a field is read from (the same strings as :mod:`eagle3_forensics.io.config`)."""

    TOP = "top"
    EAGLE = "eagle_config"
    EAGLE_CONFIG = "eagle_config"  # alias of EAGLE


class AuxConvert(StrEnum):
    """How a release turns the aux-layer ids it reads into captured layers (HF index)."""

    AS_IS = "as_is"  # the ids are HF indices (vLLM, speculators)
    PLUS_ONE = "plus_one"  # every id + 1 (SGLang Llama, Qwen, ... target classes)
    PLUS_ONE_IF_FIRST_IS_ONE = "plus_one_if_first_is_one"  # +1 only when ids[0] == 1, else as given
    AS_IS_IF_MAX_IS_N = "as_is_if_max_is_n"  # as given when max(ids) == N, else +1 (gpt-oss)
    UNTOUCHED = "untouched"  # handed untouched to an external model (SGLang MindSpore)
    LAUNCH_OPTION = "launch_option"  # never from the drafter: a launch option (TensorRT-LLM)
    HARD_CODED = "hard_coded"  # fixed in the engine's target code (EAGLE reference)


class FcCount(StrEnum):
    """Where a drafter class reads the number of aux states ``fc`` takes (first present wins, else 3)."""

    NUM_AUX_LAYERS = "num_aux_layers"  # top-level attribute
    NUM_AUX_HIDDEN_STATES = "num_aux_hidden_states"  # top-level attribute
    NESTED_IDS = "eagle_config.eagle_aux_hidden_state_layer_ids"  # len()
    TOP_IDS = "eagle_aux_hidden_state_layer_ids"  # len()
    LAUNCH_OPTION = "launch_option"  # len(eagle3_layers_to_capture) (TensorRT-LLM)


class FcWidth(StrEnum):
    """The width of one aux state as the class sizes ``fc``."""

    TARGET_HIDDEN_SIZE = "target_hidden_size"  # target_hidden_size when the key exists, else hidden_size
    HIDDEN_SIZE = "hidden_size"  # hidden_size always (speculators ignores target_hidden_size)


class MissingDraftVocab(StrEnum):
    """What a class does when ``draft_vocab_size`` is absent (or null: see ``null_draft_vocab``)."""

    BUILD_ERROR = "build_error"  # AttributeError while building the model (loud)
    TARGET_HEAD = "target_head"  # borrows the target's lm_head, ignoring a trained draft head
    VOCAB_SIZE = "vocab_size"  # assumes draft_vocab_size = vocab_size
    DEFAULT_32000 = "default_32000"  # a fixed default (speculators' converter)


class D2tEncoding(StrEnum):
    OFFSETS = "offsets"  # target = i + d2t[i]
    ABSOLUTE = "absolute"  # target = d2t[i]


class OverLimit(StrEnum):
    """What happens to decoder layers beyond ``max_layers``."""

    BUILD_ERROR = "build_error"  # the constructor raises (loud)
    DROPPED = "dropped"  # only ``max_layers`` layers are built; the rest are ignored


class NormOutputMeaning(StrEnum):
    POST_NORM_RECURRENCE = "post_norm_recurrence"  # the post-norm state is fed to the next step


class AuxDisabled(StrEnum):
    """What ``eagle_config.use_aux_hidden_state: false`` does in a release."""

    NOT_READ = "not_read"  # the key is ignored: aux states are captured as usual
    FC_SKIPPED = "fc_skipped"  # no aux capture; fc is built and loaded but skipped at run time (SGLang)
    FC_NOT_BUILT = "fc_not_built"  # no aux capture; fc is not built and fc.* keys are dropped (vLLM)


# Every token a ``when`` may use: exactly the keys of
# :func:`eagle3_forensics.engines.simulate.conditions` (tests/unit/test_engines.py keeps them equal).
CONDITION_TOKENS: dict[str, str] = {
    "bias": "the config says bias: true",
    "attention_bias": "the config says attention_bias: true",
    "o_proj_bias": "attention_bias or bias (the Llama attention's o_proj bias)",
    "hidden_differs": "target_hidden_size is set and differs from hidden_size",
    "has_target_hidden_size": "target_hidden_size is set",
    "tied": "the engine honours tie_word_embeddings and it is true",
    "has_draft_vocab_size": "draft_vocab_size is set (not null)",
    "draft_vocab_size_null": "draft_vocab_size is present with the value null",
    "reduced_vocab": "the class's draft vocabulary is smaller than vocab_size",
    "vocab_differs": "the class's draft vocabulary differs from vocab_size (smaller or larger)",
    "norm_before_fc": "the engine acts on norm_before_fc and it is true",
    "fc_norm": "the engine acts on fc_norm and it is true",
    "qwen3": "the decoder's model_type is qwen3 (q_norm / k_norm)",
    "has_embed": "the checkpoint has an embed_tokens tensor",
    "has_d2t": "the checkpoint has a d2t tensor",
    "aux_enabled": "use_aux_hidden_state is not false (where the release reads it)",
    "multi_layer": "num_hidden_layers > 1",
}


def when_tokens(when: str) -> list[tuple[str, bool]]:
    """``(token, negated)`` for each ``&``-joined term of a condition string."""
    out = []
    for term in filter(None, (t.strip() for t in when.split("&"))):
        out.append((term.lstrip("!").strip(), term.startswith("!")))
    return out


def _check_when(when: str, where: str) -> tuple[tuple[str, bool], ...]:
    tokens = when_tokens(when)
    for name, _ in tokens:
        if name not in CONDITION_TOKENS:
            raise ValueError(
                f"{where}: unknown condition token {name!r} in when={when!r}; known: {', '.join(CONDITION_TOKENS)}"
            )
    return tuple(tokens)


@dataclass(frozen=True)
class ParamRule:
    """One engine parameter. ``{layer}`` expands over decoder layers, ``{j}`` over aux states."""

    name: str
    when: str = ""
    filled_by: Fill = Fill.CHECKPOINT
    layers: Layers = Layers.ALL
    tokens: tuple[tuple[str, bool], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "filled_by", Fill(self.filled_by))
        object.__setattr__(self, "layers", Layers(self.layers))
        object.__setattr__(self, "tokens", _check_when(self.when, f"param {self.name}"))


@dataclass(frozen=True)
class KeyRule:
    """A regex over checkpoint names, active when ``when`` holds (compiled at construction).

    ``count`` follows :func:`re.sub`: 0 replaces every match (a substring ``str.replace``), 1 the first.
    """

    pattern: str
    target: str = ""  # replacement (renames, fusions) or parameter name (consumed keys)
    when: str = ""
    note: str = ""
    count: int = 1
    regex: re.Pattern[str] = field(default=re.compile(""), init=False, repr=False, compare=False)
    tokens: tuple[tuple[str, bool], ...] = field(default=(), init=False, repr=False, compare=False)
    # the alternatives of a fusion rule's one group (``\.(q_proj|k_proj|v_proj)`` -> q_proj, k_proj,
    # v_proj): the shards of the stacked parameter, each loaded into its slice
    parts: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            compiled = re.compile(self.pattern)
            compiled.sub(self.target, "")  # parses the replacement: a bad group reference fails here
        except re.error as exc:
            raise ValueError(f"key rule {self.pattern!r} -> {self.target!r}: {exc}") from None
        object.__setattr__(self, "regex", compiled)
        group = re.fullmatch(r"[^()|]*\(([\w|]+)\)[^()|]*", self.pattern)
        if group is not None and "|" in group.group(1):
            object.__setattr__(self, "parts", tuple(group.group(1).split("|")))
        object.__setattr__(self, "tokens", _check_when(self.when, f"key rule {self.pattern}"))


@dataclass(frozen=True)
class RequiredTensor:
    """A checkpoint tensor the load cannot do without when ``when`` holds: absent, the load fails
    loudly (speculators: ``load_verifier_weights`` masks the verifier's lm_head with ``t2d``).

    ``finding`` is the finding code diagnose reports for it; ``note`` says what the engine does.
    """

    pattern: str
    when: str = ""
    note: str = ""
    finding: str = "KEYS_REJECTED_BY_ENGINE"
    fix: str = ""
    # the failure depends on uninitialised memory: it happens unless that memory holds a valid value
    by_chance: bool = False
    regex: re.Pattern[str] = field(default=re.compile(""), init=False, repr=False, compare=False)
    tokens: tuple[tuple[str, bool], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "regex", re.compile(self.pattern))
        except re.error as exc:
            raise ValueError(f"required tensor {self.pattern!r}: {exc}") from None
        object.__setattr__(self, "tokens", _check_when(self.when, f"required tensor {self.pattern}"))


@dataclass(frozen=True)
class PairFuse:
    """Two checkpoint keys concatenated into one parameter, only when both arrive.

    Models SGLang's MLA drafter: a key containing ``first`` or ``second`` (substring) is cached;
    its partner is the same name with ``first``/``second`` swapped; when both are in the
    checkpoint they are fused into the name with ``first`` replaced by ``target``. An unpaired
    key (or one whose "partner" can never exist, like a pre-fused key) is dropped silently.
    """

    first: str
    second: str
    target: str
    note: str = ""


@dataclass(frozen=True)
class AuxSource:
    """A config level the release reads aux-layer ids from (``runners``: only under these runners)."""

    level: Level
    runners: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "level", Level(self.level))


@dataclass(frozen=True)
class Runner:
    """One execution path of a release that reads the config differently (vLLM's V1/V2 model runners)."""

    name: str
    when: str  # when the engine takes this path, in words
    default: bool = False  # the path a plain GPU deployment takes


# (a, b, c) -> N*a//b + c, in HF-index convention
AuxTerm = tuple[int, int, int]

# [2, N//2, N-3] in HF-index convention: the default of every engine (same physical tensors).
HF_DEFAULT_AUX: tuple[AuxTerm, ...] = ((0, 1, 2), (1, 2, 0), (1, 1, -3))


def default_ids(terms: Sequence[AuxTerm], n: int) -> list[int]:
    return [n * a // b + c for a, b, c in terms]


def default_text(terms: Sequence[AuxTerm]) -> str:
    def term(a: int, b: int, c: int) -> str:
        base = "" if a == 0 else ("N" if b == 1 else f"N//{b}")
        if not base:
            return str(c)
        return base + (f"{c:+d}" if c else "")

    return "[" + ", ".join(term(*t) for t in terms) + "]"


@dataclass(frozen=True)
class AuxRule:
    """How a release captures aux states for one target class.

    ``default_hf`` is used when the drafter names no ids (``None``: decided outside the engine).
    ``captures_final``: an id equal to N is captured (at the final norm); otherwise ids >= N are
    never captured. ``option`` / ``option_offset``: for :attr:`AuxConvert.LAUNCH_OPTION`, the
    launch option and how its values map to HF indices (HF = value + offset).
    """

    convert: AuxConvert
    default_hf: tuple[AuxTerm, ...] | None = HF_DEFAULT_AUX
    source: str = ""
    captures_final: bool = False
    option: str | None = None
    option_offset: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "convert", AuxConvert(self.convert))

    def default(self, n: int) -> list[int] | None:
        return None if self.default_hf is None else default_ids(self.default_hf, n)

    def default_text(self) -> str:
        return "decided outside the engine" if self.default_hf is None else default_text(self.default_hf)

    @property
    def reads_drafter(self) -> bool:
        return self.convert not in (AuxConvert.LAUNCH_OPTION, AuxConvert.HARD_CODED)

    def capture(self, ids: Sequence[int] | None, n: int) -> list[int] | None:
        """The layers captured (HF index) for the ids the release read (``None``: none read)."""
        if not ids or not self.reads_drafter:
            return self.default(n)
        ids = [int(i) for i in ids]
        if self.convert in (AuxConvert.AS_IS, AuxConvert.UNTOUCHED):
            return ids
        if self.convert is AuxConvert.PLUS_ONE:
            return [i + 1 for i in ids]
        if self.convert is AuxConvert.PLUS_ONE_IF_FIRST_IS_ONE:
            return [i + 1 for i in ids] if ids[0] == 1 else ids
        if self.convert is AuxConvert.AS_IS_IF_MAX_IS_N:
            return ids if max(ids) == n else [i + 1 for i in ids]
        raise AssertionError(self.convert)

    def describe(self) -> str:
        return {
            AuxConvert.AS_IS: "ids used as given (HF index)",
            AuxConvert.PLUS_ONE: "every id + 1",
            AuxConvert.PLUS_ONE_IF_FIRST_IS_ONE: "+1 only when the first id is 1, else as given",
            AuxConvert.AS_IS_IF_MAX_IS_N: "as given when max(id) == N, else every id + 1",
            AuxConvert.UNTOUCHED: "ids handed untouched to an external model",
            AuxConvert.LAUNCH_OPTION: f"taken from the launch option {self.option}, never from the drafter",
            AuxConvert.HARD_CODED: "hard-coded in the engine",
        }[self.convert] + f"; default {self.default_text()}"

    def stored_for(self, hf_ids: Sequence[int], n: int | None) -> list[int] | None:
        """Ids to write in the config so this rule captures ``hf_ids`` (``None``: not expressible)."""
        if not self.reads_drafter:
            return None
        hf = [int(i) for i in hf_ids]
        for cand in (hf, [i - 1 for i in hf]):
            if min(cand) < 0:
                continue
            if self.convert is AuxConvert.AS_IS_IF_MAX_IS_N and n is None:
                if cand is hf:
                    continue  # as-is needs max == N, unknown without the target
                return cand
            if self.capture(cand, n if n is not None else 0) == hf:
                return cand
        return None

    def option_value(self, hf_ids: Sequence[int]) -> list[int]:
        """The launch-option value that captures ``hf_ids`` (sorted: the option is a set)."""
        return sorted(i - self.option_offset for i in hf_ids)


@dataclass(frozen=True)
class ArchAux:
    """The aux rule of the target classes registered under ``architectures``.

    ``source``: ``file.py:line`` of the defining ``set_eagle3_layers_to_capture``; ``since``: the
    first release inside the table's range that has it, when later than the range's first.
    """

    architectures: tuple[str, ...]
    rule: AuxRule
    defining_class: str = ""
    since: tuple[tuple[str, str], ...] = ()  # (architecture, first release) pairs


class ShimMode(StrEnum):
    """How an engine's speculators-config shim copies one top-level field into its own config."""

    ALWAYS = "always"  # config_dict.get(name, default): written even when absent
    IF_NOT_NONE = "if_not_none"  # `if config_dict.get(name) is not None`
    IF_TRUTHY = "if_truthy"  # `if config_dict.get(name)`


@dataclass(frozen=True)
class ShimField:
    name: str
    mode: ShimMode = ShimMode.ALWAYS
    default: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", ShimMode(self.mode))


@dataclass(frozen=True)
class SpeculatorsShim:
    """How an engine that does not read speculators configs natively converts one (vLLM's
    ``transformers_utils/configs/speculators``): the decoder's ``transformer_layer_config`` becomes
    the config, then these top-level fields are copied in; every other top-level field (e.g.
    ``num_aux_hidden_states``, ``bias``, ``use_aux_hidden_state``) is lost.
    """

    fields: tuple[ShimField, ...]
    source: str = ""

    def __post_init__(self) -> None:
        for f in self.fields:
            if not isinstance(f, ShimField):
                raise ValueError(f"speculators shim field {f!r} is not a ShimField")

    def carried(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def default_of(self, name: str) -> Any:
        return next((f.default for f in self.fields if f.name == name and f.mode is ShimMode.ALWAYS), None)

    def apply(self, raw: dict[str, Any], layer_key: str = "transformer_layer_config") -> dict[str, Any]:
        """The config the engine builds from the speculators config ``raw``."""
        layer = raw.get(layer_key)
        out: dict[str, Any] = dict(layer) if isinstance(layer, dict) else {}
        for f in self.fields:
            value = raw.get(f.name, f.default if f.mode is ShimMode.ALWAYS else None)
            if (
                f.mode is ShimMode.ALWAYS
                or (f.mode is ShimMode.IF_NOT_NONE and value is not None)
                or (f.mode is ShimMode.IF_TRUTHY and value)
            ):
                out[f.name] = value
        return out


@dataclass(frozen=True)
class NormFlag:
    """A normalisation variant a class implements, and the config levels it is read from (in order)."""

    flag: str
    levels: tuple[Level, ...] = (Level.TOP,)
    aliases: tuple[str, ...] = ()  # legacy spellings read at the same levels (SGLang use_aux_norm)

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", tuple(Level(lv) for lv in self.levels))


@dataclass(frozen=True)
class ClassChoice:
    """A drafter class a release picks for configs matching ``architectures`` / ``model_types``.

    Empty tuples match anything; ``styles`` limits the choice to config layouts (a speculators
    config is mapped by its layer ``model_type``, a flat one by ``architectures[0]``). ``rules`` is
    the table of that class, written as the release's main table plus differences.
    """

    rules: EngineRules
    architectures: tuple[str, ...] = ()
    model_types: tuple[str, ...] = ()
    styles: frozenset[ConfigStyle] = frozenset({ConfigStyle.FLAT, ConfigStyle.SPECULATORS})


# -- versions -------------------------------------------------------------------------------------

_VERSION = re.compile(
    r"^v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre>a|b|rc)(?P<pre_n>\d+))?"
    r"(?:[-_.]?post(?P<post>\d+))?"
    r"(?:[-_.]?dev(?P<dev>\d+))?"
    r"(?:\+[A-Za-z0-9.]+)?$"
)


def version_key(version: str) -> tuple[Any, ...]:
    """A sort key for a PEP 440-style version (``1.2.0.post1``, ``1.2.0rc2``, ``1.2.0+cpu``).

    Raises ``ValueError`` when ``version`` is not a version.
    """
    m = _VERSION.match(version.strip())
    if m is None:
        raise ValueError(f"not a version: {version!r}")
    release = tuple(int(p) for p in m["release"].split("."))
    release = release + (0,) * (6 - len(release))
    if m["dev"] is not None and m["pre"] is None and m["post"] is None:
        pre: tuple[int, ...] = (-1, int(m["dev"]))
    elif m["pre"] is not None:
        pre = ({"a": 0, "b": 1, "rc": 2}[m["pre"]], int(m["pre_n"]))
    else:
        pre = (3, 0)
    post = int(m["post"]) if m["post"] is not None else -1
    return (release, pre, post)


# -- the table ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineRules:
    """One engine release range, read from ``sources``. See the module docstring."""

    # -- identity ------------------------------------------------------------------------
    name: str  # engine name on the command line: sglang, vllm, eagle, speculators, tensorrt_llm
    display: str
    package: str  # what was read: a PyPI package, or a repository when no wheel exists
    first: str  # first release covered
    last: str  # last release covered (the newest table: the newest release read)
    sources: tuple[str, ...]  # "package==version path[:line]" of every file the table was read from
    drafter_class: str  # the class this table describes
    classes: tuple[ClassChoice, ...] = ()  # other classes the release picks by config
    # reached only through a conversion the user runs first (this command); judged only when named
    via_conversion: str | None = None
    pinned: bool = True  # False: read at a repository commit, not a released version (see notes)
    requested: str | None = None  # the version the user asked for, when it lies inside the range

    # -- config ----------------------------------------------------------------------------
    config_styles: frozenset[ConfigStyle] = frozenset({ConfigStyle.FLAT})
    flat_architectures: tuple[str, ...] | None = None  # a flat config must name one (None: any)
    speculators_model_types: tuple[str, ...] | None = None  # transformer_layer_config model_type allowed
    flat_required_fields: tuple[str, ...] = ()  # must be present and not null
    required_keys: tuple[str, ...] = ()  # must be present (null allowed)
    null_fatal: tuple[str, ...] = ()  # present with value null -> loud build error ...
    null_fatal_when: str = ""  # ... when this condition holds (vLLM: only when it builds fc)
    # (field, condition, what happens): a null field fatal at build only under its own condition
    null_fatal_if: tuple[tuple[str, str, str], ...] = ()
    rejected_model_types: tuple[tuple[str, str], ...] = ()  # (model_type, what happens) -> loud
    # top-level fields the config parser refuses when null (speculators' pydantic `draft_vocab_size: int`)
    null_rejected: tuple[str, ...] = ()
    # pairs of norm flags the config parser refuses together (newer speculators: norm_before_fc, fc_norm)
    exclusive_flags: tuple[tuple[str, str], ...] = ()
    max_layers: int | None = None  # decoder layers the class builds (None: as configured)
    over_max: OverLimit = OverLimit.BUILD_ERROR
    config_fix: str = "Write the config layout this engine reads."

    # -- keys ------------------------------------------------------------------------------
    skip: tuple[KeyRule, ...] = ()  # names the engine ignores by design (never a problem)
    consume: tuple[KeyRule, ...] = ()  # names turned into something other than a parameter
    # names discarded before lookup even when a parameter of that name exists (reported per
    # ``unknown_keys``): speculators' converter, which loads into a one-layer legacy model
    drop: tuple[KeyRule, ...] = ()
    renames: tuple[KeyRule, ...] = ()
    fuse: tuple[KeyRule, ...] = ()
    pair_fuse: tuple[PairFuse, ...] = ()
    prefix: Prefix = Prefix.AS_IS
    unknown_keys: UnknownKeys = UnknownKeys.DROP
    # Unknown keys with these suffixes are ignored (not rejected) when their module exists (vLLM: .bias)
    ignored_suffixes: tuple[str, ...] = ()
    params: tuple[ParamRule, ...] = ()
    # tensors whose absence makes the load fail (not attributable to one key)
    required_tensors: tuple[RequiredTensor, ...] = ()
    # the loader compares every shape it loads (from_pretrained without ignore_mismatched_sizes):
    # lm_head / d2t / t2d against the vocabulary sizes the config gives, too
    vocab_shapes_checked: bool = False

    # -- semantics -------------------------------------------------------------------------
    d2t_encoding: D2tEncoding = D2tEncoding.OFFSETS
    missing_d2t: str = "identity"
    aux_sources: tuple[AuxSource, ...] = ()  # tried in order; none present -> default
    aux_rules: tuple[ArchAux, ...] = ()  # per target architecture
    aux_rule_default: AuxRule = AuxRule(AuxConvert.AS_IS)  # assumed for targets not in aux_rules
    runners: tuple[Runner, ...] = ()
    use_aux_hidden_state: AuxDisabled = AuxDisabled.NOT_READ
    fc_count_from: tuple[FcCount, ...] = ()  # first present wins; none -> 3
    fc_width: FcWidth = FcWidth.TARGET_HIDDEN_SIZE
    # where the draft-input buffer width is read from (None: the same as fc)
    buffer_count_from: tuple[FcCount, ...] | None = None
    norm_flags: tuple[NormFlag, ...] = ()
    norm_output_meaning: NormOutputMeaning | None = None
    # assumed when a speculators config lacks norm_before_residual (None: the flag is not read)
    speculators_norm_before_residual_default: bool | None = None
    # how a speculators config is converted before the class reads it (None: read as written)
    speculators_shim: SpeculatorsShim | None = None
    honours_tie_word_embeddings: bool = False
    missing_draft_vocab_size: MissingDraftVocab = MissingDraftVocab.VOCAB_SIZE
    null_draft_vocab_size: MissingDraftVocab = MissingDraftVocab.VOCAB_SIZE
    reads_rope_parameters: bool = True  # Transformers-5 rope_parameters honoured
    final_norm_before_head: bool = True  # logits always come from norm(hidden) (SpecForge can skip it)
    # the parameter that normalises the input of decoder layers >= 1 (newer SGLang: hidden_norm,
    # fused with the residual; vLLM / speculators: input_layernorm)
    rest_layer_input_norm: str = "input_layernorm"
    notes: tuple[str, ...] = ()
    proof: Proof = Proof.READ  # RAN: the loader tier runs this release's own loader (engines/proof.py)
    citations: tuple[Citation, ...] = ()  # sha256 of the cited wheel files (make engine-drift)

    def __post_init__(self) -> None:
        try:
            self._validate()
        except (ValueError, TypeError) as exc:
            raise ValueError(f"EngineRules {self.name!r} {self.first}: {exc}") from None

    def _validate(self) -> None:
        if self.pinned and version_key(self.first) > version_key(self.last):
            raise ValueError(f"first {self.first} is after last {self.last}")
        for attr, enum in (
            ("prefix", Prefix),
            ("unknown_keys", UnknownKeys),
            ("d2t_encoding", D2tEncoding),
            ("over_max", OverLimit),
            ("use_aux_hidden_state", AuxDisabled),
            ("fc_width", FcWidth),
            ("missing_draft_vocab_size", MissingDraftVocab),
            ("null_draft_vocab_size", MissingDraftVocab),
        ):
            object.__setattr__(self, attr, enum(getattr(self, attr)))
        object.__setattr__(self, "config_styles", frozenset(ConfigStyle(s) for s in self.config_styles))
        object.__setattr__(self, "fc_count_from", tuple(FcCount(s) for s in self.fc_count_from))
        if self.buffer_count_from is not None:
            object.__setattr__(self, "buffer_count_from", tuple(FcCount(s) for s in self.buffer_count_from))
        if self.norm_output_meaning is not None:
            object.__setattr__(self, "norm_output_meaning", NormOutputMeaning(self.norm_output_meaning))
        for spec in self.norm_flags:
            if not isinstance(spec, NormFlag) or spec.flag not in SUPPORTED_NORM_FLAGS:
                raise ValueError(f"norm flag {spec!r} is not a NormFlag of {', '.join(SUPPORTED_NORM_FLAGS)}")
        _check_when(self.null_fatal_when, "null_fatal_when")
        for item in self.null_fatal_if:
            if len(item) != 3:
                raise ValueError(f"null_fatal_if {item!r} is not (field, condition, what happens)")
            _check_when(item[1], f"null_fatal_if {item[0]}")
        for pair in self.exclusive_flags:
            if len(pair) != 2 or not set(pair) <= set(SUPPORTED_NORM_FLAGS):
                raise ValueError(
                    f"exclusive_flags {pair!r} is not a pair of {', '.join(SUPPORTED_NORM_FLAGS)}"
                )
        for req in self.required_tensors:
            if not isinstance(req, RequiredTensor):
                raise ValueError(f"required tensor {req!r} is not a RequiredTensor")
        if self.speculators_shim is not None:
            if not isinstance(self.speculators_shim, SpeculatorsShim):
                raise ValueError(f"speculators_shim {self.speculators_shim!r} is not a SpeculatorsShim")
            shim_nbr = self.speculators_shim.default_of("norm_before_residual")
            if shim_nbr is not None and shim_nbr != self.speculators_norm_before_residual_default:
                raise ValueError(
                    "speculators_norm_before_residual_default disagrees with the shim's default "
                    f"({self.speculators_norm_before_residual_default} vs {shim_nbr})"
                )
        runner_names = {r.name for r in self.runners}
        for src in self.aux_sources:
            unknown = set(src.runners) - runner_names
            if unknown:
                raise ValueError(f"aux source names unknown runners {sorted(unknown)}")
        seen: set[str] = set()
        for group in self.aux_rules:
            dup = seen & set(group.architectures)
            if dup:
                raise ValueError(f"architectures listed twice: {sorted(dup)}")
            seen |= set(group.architectures)

    # -- identity ------------------------------------------------------------------------
    @property
    def versions(self) -> str:
        return self.first if self.first == self.last else f"{self.first}–{self.last}"

    @property
    def release(self) -> str:
        """The release label: ``sglang 1.1.0``, ``sglang 1.2.0–1.2.3``, ``eagle @cb7e0841 (...)``."""
        if not self.pinned:
            return f"{self.name} {self.package}@{self.versions} (not a release)"
        return f"{self.name} {self.versions}"

    @property
    def revision(self) -> str:
        """What the table describes, for evidence and reports (release, class, first source)."""
        return f"{self.release}: {self.drafter_class} ({self.sources[0] if self.sources else 'no source'})"

    def covers(self, version: str) -> bool:
        if not self.pinned:
            return False
        key = version_key(version)
        return version_key(self.first) <= key <= version_key(self.last)

    # -- classes ---------------------------------------------------------------------------
    def for_config(self, style: str, architectures: Sequence[str], model_type: Any) -> EngineRules:
        """The table of the drafter class this release builds for a config (self when no choice matches)."""
        for choice in self.classes:
            if style not in choice.styles:
                continue
            if choice.architectures and not any(a in choice.architectures for a in architectures[:1]):
                continue
            if choice.model_types and model_type not in choice.model_types:
                continue
            # The class table keeps its own loader fields; what the release decides (the range, aux
            # capture, runners) comes from the release.
            return replace(choice.rules, **{f: getattr(self, f) for f in RELEASE_FIELDS})
        return self

    # -- aux -------------------------------------------------------------------------------
    def aux_rule_for(self, architecture: str | None) -> AuxRule:
        """The aux conversion for a target class (``architectures[0]`` of the target config)."""
        rule = self.aux_rule_known(architecture)
        return rule if rule is not None else self.aux_rule_default

    def aux_rule_known(self, architecture: str | None) -> AuxRule | None:
        """The rule listed for ``architecture``, or ``None`` when the table does not list it."""
        if architecture is None:
            return None
        for group in self.aux_rules:
            if architecture in group.architectures:
                return group.rule
        return None

    def aux_architectures(self) -> dict[str, AuxRule]:
        """Every listed target architecture and its rule."""
        return {a: g.rule for g in self.aux_rules for a in g.architectures}

    def aux_default(self, num_target_layers: int) -> list[int]:
        """The default aux ids (HF index) for a target of the default class with ``N`` layers."""
        return self.aux_rule_default.default(num_target_layers) or []

    def aux_default_text(self) -> str:
        return self.aux_rule_default.default_text()

    # -- flags -----------------------------------------------------------------------------
    @property
    def implemented_flags(self) -> frozenset[str]:
        return frozenset(f.flag for f in self.norm_flags)

    def norm_flag(self, flag: str) -> NormFlag | None:
        return next((f for f in self.norm_flags if f.flag == flag), None)

    def param_rule(self, name: str) -> ParamRule | None:
        return next((p for p in self.params if p.name == name), None)


# Fields a release decides for every drafter class it builds (copied into a ClassChoice's table).
RELEASE_FIELDS: tuple[str, ...] = (
    "first",
    "last",
    "pinned",
    "requested",
    "aux_sources",
    "aux_rules",
    "aux_rule_default",
    "runners",
    "use_aux_hidden_state",
    "buffer_count_from",
    "speculators_shim",
    "rejected_model_types",  # the release's MTP rewrite of draft model_types (config/speculative.py)
    "proof",
    "citations",
)


SUPPORTED_NORM_FLAGS = ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")
