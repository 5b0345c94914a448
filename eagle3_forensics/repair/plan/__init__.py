"""``repair_plan``: the plan for an engine-ready copy of a drafter, computed and checked in memory.

One concern per module (every name importable from here, resolved lazily):

* :mod:`.planner` — :func:`repair_plan`: diagnose, refuse what no conversion fixes, plan, check the
  planned drafter in memory with every diagnose check;
* :mod:`.result` — :class:`RepairPlan`, :class:`Step`, :class:`Refusal` and the in-memory planned drafter;
* :mod:`.state` — :class:`PlanState`, the plan being built, and the step/refusal recorders;
* :mod:`.config`, :mod:`.vocab`, :mod:`.tensors` — one function per concern over a ``PlanState``
  (the config, the vocabulary map, the tensors), called in order by :func:`repair_plan`.
"""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "repair_plan": "planner",
    "RECORD_FILE": "result",
    "RepairArgumentError": "result",
    "Step": "result",
    "Refusal": "result",
    "RepairPlan": "result",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
