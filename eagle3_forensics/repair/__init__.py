"""Engine-ready copies of a drafter: ``policy`` (a leaf table), ``plan``, ``execute``.
Rendering lives in :mod:`eagle3_forensics.views.repair`."""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "repair": "execute",
    "repair_overview": "execute",
    "RepairResult": "execute",
    "repair_plan": "plan.planner",
    "RepairPlan": "plan.result",
    "RepairArgumentError": "plan.result",
    "Step": "plan.result",
    "Refusal": "plan.result",
    "POLICY": "policy",
    "Policy": "policy",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
