"""Notebook runs: run configs, papermill execution, the regression gate, history and trends, shards, bundles, reports, result records."""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "run": "runner",
    "load_config": "runner",
    "merge_runs": "shard",
    "read_history": "history",
    "record_diagnosis": "record",
    "record_acceptance": "record",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
