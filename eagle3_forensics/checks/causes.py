"""Why is acceptance low? Rank the causes the other checks found, by what each one costs.

Every source reports :class:`~eagle3_forensics.findings.Finding` objects: ``diagnose`` (checkpoint and
engine), ``audit-data`` (data provenance, template and mode, trained lengths), the probes (vocabulary,
per-segment and per-length acceptance) and the server checks (launch and verification settings).
:func:`rank_causes` groups them into causes, attaches what each costs and orders them:

1. the cost block of the issue-22 contract, ``evidence["cost"] = {acceptance_length_drop,
   share_of_positions, basis: measured|estimated, how}``, measured before estimated, the larger
   drop (then the larger share of positions) first;
2. then severity (errors before warnings).

Checkpoint and engine findings share one measured cost, 00's: the acceptance length of the live probe
under the engine's view of the checkpoint against the trained view (:class:`EngineGap`); the aux-layer
codes also get the teacher-forced aux sweep's gain (:class:`AuxGain`). Info findings are never causes,
nor are codes that do not lower acceptance (duplicates, a server that did not answer). A warning whose
every cost is below :data:`MIN_DROP` is not a cause here ("never cry wolf"); an error always is. A
healthy drafter gives an empty ranking plus the list of what was not checked.

Domain data only: :mod:`eagle3_forensics.views.causes` renders it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eagle3_forensics.findings import CATALOGUE, CHECK_CATALOGUE, DATA_CATALOGUE, Finding, Severity

#: the smallest acceptance-length drop (bonus token included) counted as a cost; below the baseline
#: gate's tolerance (0.1) so a real drop is never hidden, above the last-digit noise of a CPU probe
MIN_DROP = 0.05

CHECKPOINT = "checkpoint and engine"
DATA = "data provenance"
TEMPLATE = "template and mode"
LENGTH = "length"
VOCABULARY = "vocabulary"
SERVER = "server settings"

#: the categories in the order notebook 06 explains them (ties in cost keep this order)
CATEGORIES: tuple[str, ...] = (CHECKPOINT, DATA, TEMPLATE, LENGTH, VOCABULARY, SERVER)

#: codes that can lower acceptance, by category. Every other audit-data code (``DATA_CATALOGUE``)
#: is a data-provenance cause; a code neither listed nor a static check of the checkpoint is
#: reported beside the ranking, never ranked: it does not cost acceptance by itself.
_BY_CATEGORY: dict[str, tuple[str, ...]] = {
    TEMPLATE: ("DATA_TEMPLATE_MISMATCH",),
    LENGTH: ("CONTEXT_BEYOND_TRAINING", "CONTEXT_TOO_SHORT", "DATA_SEQ_TOO_LONG", "LAUNCH_CONTEXT_SHRUNK"),
    VOCABULARY: ("VOCAB_SPECIAL_TOKENS_MISSING", "DATA_COVERAGE_LOW"),
    SERVER: (
        "VERIFY_MODE_LOSSY",
        "COMPARE_SETTINGS_DIFFER",
        "LAUNCH_NOT_EAGLE3",
        "LAUNCH_TREE_DRAFTING",
        "LAUNCH_SETTINGS_DISAGREE",
        "LAUNCH_ALGORITHM_MISMATCH",
        "LAUNCH_DRAFT_PATH_MISSING",
        "LAUNCH_DRAFT_PATH_OTHER",
        "LAUNCH_SPEC_PARAMS_INCONSISTENT",
        "LAUNCH_CAPTURE_LAYERS_MISMATCH",
        "LAUNCH_FAILS_AT_STARTUP",
        "LAUNCH_DRAFT_WINDOW_MISSING",
    ),
    CHECKPOINT: ("AUX_LAYERS_DIFFER", "DRAFTER_DIAGNOSED_BROKEN", "ENGINE_GAP"),
}
#: never causes: the measurement or the input failed (said under "not checked"), or no acceptance cost
NOT_CAUSES: frozenset[str] = frozenset(
    {
        "CHECKPOINT_UNREADABLE",
        "DATA_UNREADABLE",
        "DATA_DUPLICATE_SAMPLES",
        "DATA_TRAINED_LENGTH",
        "SERVER_UNREACHABLE",
        "SERVER_TIMEOUT",
        "SERVER_HTTP_ERROR",
        "SERVER_BAD_RESPONSE",
        "NO_SPEC_DECODING",
        "COUNTERS_WENT_BACKWARDS",
        "NO_DRAFTS",
        "COUNTERS_INCONSISTENT",
        "COUNTERS_IMPOSSIBLE",
        "LAUNCH_SETTINGS_UNKNOWN",
        "DRAFTER_NOT_READABLE",
        "TARGET_CLASS_UNKNOWN",
    }
)
_STATIC_PREFIXES = ("CONFIG_", "KEYS_", "PARAMS_", "D2T_", "T2D_", "AUX_", "NORM_", "ROPE_", "WEIGHTS_")
#: the checkpoint codes the aux sweep's gain measures
AUX_CODES: frozenset[str] = frozenset(
    {
        "AUX_LAYER_IDS_CONVENTION_SHIFT",
        "AUX_LAYER_IDS_INVALID",
        "AUX_LAYER_IDS_NOT_TRAINED",
        "AUX_LAYER_IDS_NOT_RECORDED",
        "AUX_LAYER_IDS_IGNORED_BY_ENGINE",
        "AUX_LAYERS_DIFFER",
    }
)

EXPLANATIONS: dict[str, str] = {
    CHECKPOINT: "The engine does not run the drafter as it was trained (00's verdict).",
    DATA: "The drafter learnt from data that is not what the target produces when serving.",
    TEMPLATE: "The drafter was trained on another chat rendering (template or thinking mode) than it serves.",
    LENGTH: "Requests run longer than the drafter was trained or configured for.",
    VOCABULARY: "The draft vocabulary lacks tokens the target emits, so those positions are never accepted.",
    SERVER: "The server's speculative or verification settings differ from what acceptance assumes.",
}


#: where the leading code says more than its category's explanation
CODE_EXPLANATIONS: dict[str, str] = {
    "AUX_LAYER_IDS_NOT_TRAINED": "The config's aux-layer ids are not the layers the drafter was trained on (measured "
    "on the target).",
    "AUX_LAYER_IDS_NOT_RECORDED": "The config records no aux-layer ids and the engine's fallback is not the layers "
    "the drafter was trained on.",
}


def category(code: str) -> str | None:
    """The cause category of a finding code, or ``None`` when the code never costs acceptance."""
    if code in NOT_CAUSES:
        return None
    for cat, codes in _BY_CATEGORY.items():
        if code in codes:
            return cat
    if code in DATA_CATALOGUE:
        return DATA
    if code in CHECK_CATALOGUE or code.startswith(_STATIC_PREFIXES):
        return CHECKPOINT
    return None


@dataclass(frozen=True)
class Cost:
    """The contract's cost block: what a cause costs in acceptance length and/or positions."""

    acceptance_length_drop: float | None
    share_of_positions: float | None
    basis: str  # "measured" | "estimated"
    how: str

    @classmethod
    def from_evidence(cls, evidence: Mapping[str, Any]) -> Cost | None:
        """The ``cost`` block of a finding's evidence, or ``None`` when absent or malformed."""
        raw = evidence.get("cost")
        if not isinstance(raw, Mapping):
            return None
        basis = raw.get("basis")
        if basis not in ("measured", "estimated"):
            return None
        drop, share = _number(raw.get("acceptance_length_drop")), _number(raw.get("share_of_positions"))
        if drop is None and share is None:
            return None
        return cls(drop, share, str(basis), str(raw.get("how") or ""))

    @property
    def significant(self) -> bool:
        """Large enough to call a cause: a drop of at least :data:`MIN_DROP`, or (no drop given) a
        share of positions whose loss would cost that much."""
        if self.acceptance_length_drop is not None:
            return self.acceptance_length_drop >= MIN_DROP
        return self.share_of_positions is not None and self.share_of_positions > 0.0

    def sort_key(self) -> tuple[int, float, float]:
        return (
            0 if self.basis == "measured" else 1,
            -(self.acceptance_length_drop if self.acceptance_length_drop is not None else -1.0),
            -(self.share_of_positions or 0.0),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "acceptance_length_drop": self.acceptance_length_drop,
            "share_of_positions": self.share_of_positions,
            "basis": self.basis,
            "how": self.how,
        }


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or x != x:  # NaN is not a figure
        return None
    return float(x)


@dataclass(frozen=True)
class EngineGap:
    """00's measured figures: live acceptance length under the engine's view and under the trained view."""

    engine: str
    served: float  # acceptance length under the engine's view of the checkpoint
    trained: float  # the trained view: the writer's view, or the repaired copy's when that is higher
    how: str

    @property
    def drop(self) -> float:
        return max(0.0, self.trained - self.served)

    def cost(self) -> Cost:
        return Cost(
            round(self.drop, 6), None, "measured", f"{self.how}: {self.served:.3f} vs. {self.trained:.3f}"
        )


@dataclass(frozen=True)
class AuxGain:
    """The teacher-forced aux sweep: how much the best aux-layer offset beats the ids as read."""

    best_offset: int
    gain: float  # simulated acceptance length at the best offset minus at offset 0
    how: str

    def cost(self) -> Cost | None:
        if self.best_offset == 0 or self.gain <= 0:
            return None
        return Cost(round(self.gain, 6), None, "estimated", self.how)


@dataclass
class Cause:
    """One ranked cause: its category, codes, a one-line explanation, the evidence and the cost."""

    category: str
    codes: list[str]
    severity: Severity
    explanation: str
    evidence: list[dict[str, Any]]
    cost: Cost | None
    fix: str | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def code(self) -> str:
        """The leading code (the most severe, then the catalogue's order)."""
        return self.codes[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "codes": self.codes,
            "severity": self.severity.value,
            "explanation": self.explanation,
            "evidence": self.evidence,
            "cost": None if self.cost is None else self.cost.to_dict(),
            "fix": self.fix,
        }


@dataclass
class Ranking:
    """The causes, most costly first; findings seen but not ranked; what was not checked."""

    causes: list[Cause]
    set_aside: list[tuple[Finding, str]]  # (finding, why it is not ranked as a cause)
    not_checked: list[str]
    acceptance_length: float | None = None  # the measured acceptance length, when a probe ran

    @property
    def found(self) -> bool:
        return bool(self.causes)

    @property
    def codes(self) -> list[str]:
        """The leading code of each cause, in rank order."""
        return [c.code for c in self.causes]

    def to_dict(self) -> dict[str, Any]:
        return {
            "acceptance_length": self.acceptance_length,
            "causes": [c.to_dict() for c in self.causes],
            "set_aside": [{"code": f.code, "engine": f.engine, "why": why} for f, why in self.set_aside],
            "not_checked": list(self.not_checked),
        }


def _evidence(f: Finding) -> dict[str, Any]:
    ev = {k: v for k, v in f.evidence.items() if k != "cost"}
    return {"code": f.code, "engine": f.engine, "message": f.message, **({"evidence": ev} if ev else {})}


def _best(costs: Iterable[Cost | None]) -> Cost | None:
    """Measured before estimated, significant before not, then the larger drop / share."""
    have = [c for c in costs if c is not None]
    if not have:
        return None
    return min(have, key=lambda c: (not c.significant, *c.sort_key()))


def rank_causes(
    checkpoint: Iterable[Finding] = (),
    data: Iterable[Finding] = (),
    probe: Iterable[Finding] = (),
    server: Iterable[Finding] = (),
    *,
    engine: str | None = None,
    engine_gap: EngineGap | None = None,
    aux_gain: AuxGain | None = None,
    not_checked: Sequence[str] = (),
    acceptance_length: float | None = None,
) -> Ranking:
    """Group the findings of every source into causes and rank them by cost, then severity.

    The sources: ``checkpoint`` (``diagnose``, with ``--launch`` when given), ``data`` (``audit-data``),
    ``probe`` (the in-process probes) and ``server`` (a live server). A static code the data audit
    reports (the data's own ``d2t``/``t2d`` map) is a data cause, not the checkpoint's. ``engine`` (a
    name or ``name==release``) keeps only the engine findings of the engine served; ``engine_gap`` is
    the checkpoint-and-engine cause's measured cost (an unexplained gap of at least :data:`MIN_DROP`
    becomes an ``ENGINE_GAP`` cause of its own); ``aux_gain`` the aux codes' estimate.
    """
    sourced = [(f, "checkpoint") for f in checkpoint] + [(f, "data") for f in data]
    sourced += [(f, "probe") for f in probe] + [(f, "server") for f in server]
    served = None if engine is None or engine == "all" else engine.split("==")[0].strip()
    groups: dict[tuple[str, str], list[Finding]] = {}
    set_aside: list[tuple[Finding, str]] = []
    order = {code: i for i, code in enumerate(CATALOGUE)}
    for f, source in sourced:
        if f.severity is Severity.INFO:
            continue
        if served is not None and f.engine is not None and f.engine != served:
            set_aside.append((f, f"about {f.engine}; the drafter is served on {served}"))
            continue
        cat = category(f.code)
        if cat == CHECKPOINT and source == "data" and f.code in CHECK_CATALOGUE:
            cat = DATA  # the data-prep output's own vocabulary map, not the drafter's
        if cat is None:
            set_aside.append((f, "does not lower acceptance by itself"))
            continue
        # the checkpoint's findings share one measured cost (the engine gap), so they form one cause
        key = (cat, "" if cat == CHECKPOINT else f.code)
        groups.setdefault(key, []).append(f)
    gap_cost = engine_gap.cost() if engine_gap is not None else None
    groups = _contradicted(groups, engine_gap, set_aside)
    if (
        engine_gap is not None
        and (CHECKPOINT, "") not in groups
        and gap_cost is not None
        and gap_cost.significant
    ):
        groups[(CHECKPOINT, "")] = [
            Finding(
                "ENGINE_GAP",
                Severity.WARNING,
                f"The live acceptance length under {engine_gap.engine}'s view ({engine_gap.served:.3f}) is "
                f"below the trained view's ({engine_gap.trained:.3f}) although no check explains it.",
                engine=served,
                evidence={"served": engine_gap.served, "trained": engine_gap.trained},
            )
        ]
    causes: list[Cause] = []
    for (cat, _), fs in groups.items():
        fs = sorted(fs, key=lambda f: (f.severity.rank, order.get(f.code, len(order)), f.engine or ""))
        codes = list(dict.fromkeys(f.code for f in fs))
        costs: list[Cost | None] = [Cost.from_evidence(f.evidence) for f in fs]
        if cat == CHECKPOINT:
            costs.append(gap_cost)
            if aux_gain is not None and AUX_CODES.intersection(codes):
                costs.append(aux_gain.cost())
        cost = _best(costs)
        severity = min((f.severity for f in fs), key=lambda s: s.rank)
        if severity is not Severity.ERROR and cost is not None and not cost.significant:
            for f in fs:
                set_aside.append((f, f"costs {_describe(cost)}, below {MIN_DROP} acceptance length"))
            continue
        fix = next((f.fix for f in fs if f.fix), None)
        explanation = CODE_EXPLANATIONS.get(codes[0], EXPLANATIONS[cat])
        causes.append(Cause(cat, codes, severity, explanation, [_evidence(f) for f in fs], cost, fix, fs))
    causes.sort(
        key=lambda c: (
            c.cost is None or not c.cost.significant,  # an error that costs nothing measurable goes last
            c.cost.sort_key() if c.cost is not None else (2, 0.0, 0.0),
            c.severity.rank,
            CATEGORIES.index(c.category),
        )
    )
    return Ranking(causes, set_aside, list(not_checked), acceptance_length)


#: engine-side aux codes: "the engine does not capture the trained layers" (the config's ids taken as trained)
_ENGINE_AUX = frozenset({"AUX_LAYER_IDS_IGNORED_BY_ENGINE", "AUX_LAYER_IDS_CONVENTION_SHIFT"})


def _contradicted(
    groups: dict[tuple[str, str], list[Finding]],
    gap: EngineGap | None,
    set_aside: list[tuple[Finding, str]],
) -> dict[tuple[str, str], list[Finding]]:
    """Engine-side aux findings the measurement contradicts are set aside, not ranked at no cost.

    They take the config's ids as the trained ones; when the engine's view accepts *more* than the
    checkpoint as written (by at least :data:`MIN_DROP`), the engine's layers are the better ones and the
    config's ids are what is wrong (AUX_LAYER_IDS_NOT_TRAINED, when measured)."""
    fs = groups.get((CHECKPOINT, ""))
    if gap is None or fs is None or gap.served - gap.trained < MIN_DROP:
        return groups
    keep = [f for f in fs if f.code not in _ENGINE_AUX]
    for f in fs:
        if f.code in _ENGINE_AUX:
            set_aside.append(
                (
                    f,
                    f"contradicted by the measurement: {gap.engine}'s view accepts {gap.served:.3f}, more than "
                    f"the checkpoint as written ({gap.trained:.3f}); the config's aux ids are suspect, not the "
                    "engine (measure them: diagnose --target --measure-aux)",
                )
            )
    out = {k: v for k, v in groups.items() if k != (CHECKPOINT, "")}
    if keep:
        out[(CHECKPOINT, "")] = keep
    return out


def _describe(cost: Cost) -> str:
    if cost.acceptance_length_drop is not None:
        return f"{cost.acceptance_length_drop:.3f} acceptance length ({cost.basis})"
    return f"{cost.share_of_positions:.1%} of positions ({cost.basis})"


__all__ = [
    "AUX_CODES",
    "CATEGORIES",
    "CODE_EXPLANATIONS",
    "MIN_DROP",
    "AuxGain",
    "Cause",
    "Cost",
    "EngineGap",
    "Ranking",
    "category",
    "rank_causes",
]
