"""How each engine release verifies drafts, and where a live server shows it, as data.

An acceptance figure is the drafter's only when the server verifies by exact rejection sampling
(greedy match at temperature 0) with the drafter as trained. Some releases can be told otherwise:
a synthetic or lossy acceptance rule, a quantized draft or draft head, tree drafting, draft
sampling. ``VERIFY_RELEASES[engine]`` lists :class:`VerifyRules` per release (oldest first), read
from the ``verify`` section of each release record; each :class:`VerifyKnob` names the key the
release reads, its default, what each value does to acceptance (:class:`Effect`) and whether that
applies to the greedy requests the probes send. Facts were read in the released wheels named in
``sources`` (each record's ``notes`` say what changed between releases):

- vLLM: ``SpeculativeConfig`` fields ``rejection_sample_method`` (``standard`` | ``synthetic`` |
  ``block``, later ``fly``), ``synthetic_acceptance_rates`` / ``_length``, ``draft_sample_method``
  (``greedy`` | ``probabilistic``), ``quantization`` (the draft model's; unset it follows the
  target's), ``speculative_token_tree``, later ``draft_lm_head_quantization``. A live server reports
  them only on ``/server_info?config_format=json`` (``vllm_config.speculative_config``), which exists
  only with ``VLLM_SERVER_DEV_MODE=1``; ``/metrics`` and ``/v1/models`` carry none. Without dev mode
  they are unknown unless the serving command is given (``probe-server --launch``). The CPU build
  asserts ``not SYNTHETIC_MODE`` in both rejection kernels: a CPU server started with ``synthetic``
  dies at the first verify step (run in the engine tier).
- SGLang: ``--speculative-accept-threshold-single`` / ``-acc`` (default 1.0; below it drafts are
  accepted more easily: lossy) and ``--speculative-use-block-verification`` act only on sampled
  requests (greedy batches take the greedy verify path), so they flag the server's own figures over
  its traffic, not the probe's greedy measurement. A live server reports them in ``server_args``
  (``/get_server_info``); ``SGLANG_SIMULATE_ACC_LEN`` (a simulated acceptance) is never reported.
  Its tree (``--speculative-eagle-topk`` > 1) is ``LAUNCH_TREE_DRAFTING``. Releases without a
  ``verify`` section were not read: nothing judged.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from eagle3_forensics.engines.catalog import runs
from eagle3_forensics.engines.codec import decode
from eagle3_forensics.engines.proof import Citation
from eagle3_forensics.engines.releases import EngineMap
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
        """The value as text; one that is not a short string (a list, a megabyte a server wrote) is
        clipped to ``MAX_VALUE_CHARS``."""
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            return None
        if self.shape:
            text = raw if isinstance(raw, str) else repr(raw)
            return raw if raw in ("chain", "tree") else ("chain" if is_chain(text) else "tree")
        if isinstance(raw, bool):
            return "true" if raw else "false"
        if self.numeric:
            try:
                return repr(float(raw))
            except (TypeError, ValueError, OverflowError):
                return _clip(raw)
        return _clip(raw)

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


# A vLLM token tree of MAX_DRAFT_TOKENS-scale written out is a few KiB; parsing a longer text (a server can
# write megabytes) would cost gigabytes of syntax tree (15 MB: 7 GB, 40 s).
MAX_TREE_CHARS = 100_000
MAX_VALUE_CHARS = 200


def _clip(raw: Any) -> str:
    text = raw if isinstance(raw, str) else repr(raw)[: MAX_VALUE_CHARS + 1]
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + "…"


def is_chain(tree: str) -> bool:
    """vLLM's speculative_token_tree ("[(0,), (0, 0), ...]"): a chain when every node only takes child 0.
    A text longer than ``MAX_TREE_CHARS`` is not parsed (not a chain)."""
    if len(tree) > MAX_TREE_CHARS:
        return False
    try:
        nodes = ast.literal_eval(tree)
    except (ValueError, SyntaxError, RecursionError, MemoryError, TypeError):
        return False
    return isinstance(nodes, (list, tuple)) and all(
        isinstance(n, (list, tuple)) and all(c == 0 for c in n) for n in nodes
    )


# -- the tables, from the release records ------------------------------------------------------------


def _tables(engine: str) -> tuple[VerifyRules, ...]:
    """``engine``'s verification tables from the ``verify`` sections of its records, oldest first."""
    return tuple(
        decode(
            VerifyRules,
            run.fields(),
            f"{engine} {run.first} verify",
            engine=engine,
            first=run.first,
            last=run.last,
            citations=run.citations(),
        )
        for run in runs(engine, "verify")
    )


# engine -> its verification tables (engines whose releases were not read for it have none)
VERIFY_RELEASES: EngineMap[tuple[VerifyRules, ...]] = EngineMap(_tables)

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
    "MAX_TREE_CHARS",
    "VERIFY_RELEASES",
    "Effect",
    "Value",
    "VerifyKnob",
    "VerifyRules",
    "is_chain",
    "verify_rules_for",
]
