"""Reading: checkpoints (header-first), drafter configs, key layouts and target models. The lowest layer."""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "open_checkpoint": "checkpoint",
    "Checkpoint": "checkpoint",
    "TensorInfo": "checkpoint",
    "safe_torch_load": "checkpoint",
    "DrafterConfig": "config",
    "detect_format": "layout",
    "FormatInfo": "layout",
    "open_target": "target",
    "TargetInfo": "target",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
