"""Engine-ready copies of a drafter: policy (a leaf table), plan, execute."""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "repair": "core",
    "repair_plan": "core",
    "RepairPlan": "core",
    "RepairResult": "core",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
