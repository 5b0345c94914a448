"""The run index's first table as data: one row per drafter, the answer a teammate reads first.

Per drafter: the verdict per engine (00's diagnosis), notebook 06's first cause in words with its
cost, the acceptance length of the view that is served beside the reference drafter's in the same
notebook, the gate, and the drafter's pages. Every acceptance length carries the view it was
measured in (:func:`view_of`), because 00 and 04 probe the trained view, 06 the engine's view and
05 the training dumps offline: 3.310 from 00 says nothing about an engine that drops the weights.

A verdict is never shown as healthy beside an acceptance length below
:data:`LOW_ACCEPTANCE_LENGTH` (:func:`shown_verdict`): the static checks then found nothing, but
the drafter does not pay for itself. :mod:`eagle3_forensics.views.run_index` renders the rows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle3_forensics.probe.why_next import estimated_drop

#: Below this acceptance length (K=3) a drafter costs more than it saves. Calibration: in the demo's
#: 35 live probes (make report, CPU, fp32, K=3) every run at or below 1.51 measured a speed-up
#: against greedy decoding under 1 (0.61-0.99), every run from 2.6 one above 1 (1.37-2.07);
#: docs/runs.md "The index". A verdict beside a lower figure is not shown as healthy.
LOW_ACCEPTANCE_LENGTH = 1.5
#: the drafter the others are compared with (the demo's; a run without one shows no reference)
REFERENCE_DRAFTER = "healthy"
WHY_NOTEBOOK = "06_why_low_acceptance"
#: the settings two acceptance lengths must share to be compared
_COMPARABLE = ("prompts", "max_new_tokens", "max_prompts", "k", "device")


@dataclass(frozen=True)
class Acceptance:
    """One acceptance length and where it comes from."""

    value: float
    view: str  # "engine view (vllm)", "trained view", "offline (training dumps)"
    notebook: str
    settings: str  # "4 prompts × 24 tokens, K=3"


@dataclass(frozen=True)
class Cause:
    """06's first-ranked cause: what it is in words, its codes and its cost."""

    category: str
    explanation: str
    codes: tuple[str, ...]
    severity: str
    cost: str  # "−2.299 acceptance length (measured)", "17.7 % of positions ≈ −0.405 acceptance length (estimated)", ""
    fix: str


@dataclass(frozen=True)
class DrafterRow:
    drafter: str
    verdicts: dict[str, str]  # engine -> shown verdict (see shown_verdict)
    cause: Cause | None
    cause_note: str  # "no cause found", "06 not run", "06 failed: ..."
    acceptance: Acceptance | None
    reference: Acceptance | None
    reference_comparable: bool
    gate: str  # "pass", "fail", "not gated"
    links: list[tuple[str, str]] = field(default_factory=list)  # (notebook, html file)

    @property
    def low(self) -> bool:
        return self.acceptance is not None and self.acceptance.value < LOW_ACCEPTANCE_LENGTH


def view_of(run: Mapping[str, Any]) -> str:
    """Which view a run's acceptance length belongs to."""
    if str(run.get("notebook", "")).startswith("05"):
        return "offline (training dumps)"
    engine = (run.get("metrics") or {}).get("engine") or (run.get("parameters") or {}).get("engine")
    if engine in (None, "reference", "all"):
        return "trained view"
    return f"engine view ({engine})"


def acceptance_of(run: Mapping[str, Any]) -> Acceptance | None:
    """The run's acceptance length with its view and settings, or ``None`` when it measured none."""
    m = run.get("metrics") or {}
    al = m.get("acceptance_length")
    if not isinstance(al, int | float) or isinstance(al, bool):
        return None
    parts = []
    if m.get("prompts") is not None:
        parts.append(f"{m['prompts']} prompts")
    if m.get("max_new_tokens") is not None:
        parts.append(f"× {m['max_new_tokens']} tokens")
    settings = " ".join(parts) + (f", K={m['k']}" if m.get("k") is not None else "")
    return Acceptance(float(al), view_of(run), str(run.get("notebook")), settings.strip(", "))


def shown_verdict(verdict: str | None, acceptance: float | None) -> str | None:
    """``verdict``, except that *healthy* beside an acceptance length below
    :data:`LOW_ACCEPTANCE_LENGTH` becomes *loads fine, accepts little*: the checks found nothing,
    the probe found the drafter useless."""
    if verdict == "healthy" and acceptance is not None and acceptance < LOW_ACCEPTANCE_LENGTH:
        return "loads fine, accepts little"
    return verdict


def _records(out: Path | None, run: Mapping[str, Any]) -> dict[str, Any]:
    """A run's record sidecar (``{}`` when missing or unreadable: the row then says less)."""
    if out is None or not run.get("record"):
        return {}
    try:
        data = json.loads((out / str(run["record"])).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _cost(cost: Any, trained: Any = None) -> str:
    """06's cost in acceptance length; a data cause's share of positions with its estimate in
    acceptance length beside it when 06 recorded the trained view's (as 06's own cards show it)."""
    if not isinstance(cost, dict):
        return ""
    basis = str(cost.get("basis") or "")
    drop, share = cost.get("acceptance_length_drop"), cost.get("share_of_positions")
    if isinstance(drop, int | float):
        return f"−{float(drop):.3f} acceptance length ({basis})" if basis else f"−{float(drop):.3f}"
    if isinstance(share, int | float):
        est = estimated_drop(float(share), float(trained)) if isinstance(trained, int | float) else None
        approx = "" if est is None else f" ≈ −{est:.3f} acceptance length"
        text = f"{100 * float(share):.1f} % of positions{approx}"
        return f"{text} ({basis})" if basis else text
    return ""


def first_cause(records: Mapping[str, Any]) -> Cause | None:
    """06's first-ranked cause from its record, or ``None`` (no cause found)."""
    ranking = records.get("causes")
    causes = ranking.get("causes") if isinstance(ranking, dict) else None
    if not causes or not isinstance(causes[0], dict):
        return None
    c = causes[0]
    return Cause(
        category=str(c.get("category") or ""),
        explanation=str(c.get("explanation") or ""),
        codes=tuple(str(x) for x in c.get("codes") or []),
        severity=str(c.get("severity") or ""),
        cost=_cost(c.get("cost"), records.get("trained_acceptance_length")),
        fix=str(c.get("fix") or ""),
    )


def _verdicts(runs: Sequence[Mapping[str, Any]], out: Path | None) -> dict[str, str]:
    """Per engine, the diagnosis verdict of the drafter's first notebook that recorded one (00, 01)."""
    for r in runs:
        v = _records(out, r).get("verdicts")
        if isinstance(v, dict) and v:
            return {str(k): str(x) for k, x in v.items()}
    for r in runs:
        if r.get("verdict"):
            return {"all engines": str(r["verdict"])}
    return {}


def _headline(runs: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The run whose acceptance length the drafter row shows: 06's (the engine served), else the
    first engine-view figure, else any."""
    measured = [r for r in runs if acceptance_of(r) is not None]
    for pick in (
        [r for r in measured if r.get("notebook") == WHY_NOTEBOOK],
        [r for r in measured if view_of(r).startswith("engine view")],
        measured,
    ):
        if pick:
            return pick[0]
    return None


def _comparable(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    pa, pb = a.get("parameters") or {}, b.get("parameters") or {}
    return (
        all(pa.get(k) == pb.get(k) for k in _COMPARABLE)
        and view_of(a).split(" (")[0] == view_of(b).split(" (")[0]
    )


def _gate(runs: Sequence[Mapping[str, Any]]) -> str:
    statuses = {(r.get("gate") or {}).get("status", "not gated") for r in runs}
    return "fail" if "fail" in statuses else "pass" if "pass" in statuses else "not gated"


def drafter_rows(summary: Mapping[str, Any], out: str | Path | None = None) -> list[DrafterRow]:
    """One row per drafter of a run summary, in the summary's order; ``out`` is the run's output
    directory, where the record sidecars are (06's causes, 00's verdicts per engine)."""
    where = None if out is None else Path(out)
    runs: list[Mapping[str, Any]] = list(summary.get("runs") or [])
    names = list(dict.fromkeys([*(summary.get("drafters") or []), *(str(r.get("drafter")) for r in runs)]))
    by: dict[str, list[Mapping[str, Any]]] = {n: [r for r in runs if r.get("drafter") == n] for n in names}
    ref_runs = by.get(REFERENCE_DRAFTER, [])
    rows = []
    for name in names:
        mine = by[name]
        head = _headline(mine)
        acc = None if head is None else acceptance_of(head)
        ref_run = None
        if head is not None and name != REFERENCE_DRAFTER:
            ref_run = next((r for r in ref_runs if r.get("notebook") == head.get("notebook")), None)
        why = next((r for r in mine if r.get("notebook") == WHY_NOTEBOOK), None)
        cause = None if why is None or why.get("status") != "ok" else first_cause(_records(where, why))
        if why is None:
            note = "06 not run"
        elif why.get("status") != "ok":
            note = f"06 failed: {why.get('error') or 'unknown error'}"
        else:
            note = "" if cause is not None else "no cause found"
        low = None if acc is None else acc.value
        rows.append(
            DrafterRow(
                drafter=name,
                verdicts={e: shown_verdict(v, low) or v for e, v in _verdicts(mine, where).items()},
                cause=cause,
                cause_note=note,
                acceptance=acc,
                reference=None if ref_run is None else acceptance_of(ref_run),
                reference_comparable=ref_run is not None and head is not None and _comparable(head, ref_run),
                gate=_gate(mine),
                links=[(str(r.get("notebook")), str(r["html"])) for r in mine if r.get("html")],
            )
        )
    return rows


__all__ = [
    "LOW_ACCEPTANCE_LENGTH",
    "REFERENCE_DRAFTER",
    "Acceptance",
    "Cause",
    "DrafterRow",
    "acceptance_of",
    "drafter_rows",
    "first_cause",
    "shown_verdict",
    "view_of",
]
