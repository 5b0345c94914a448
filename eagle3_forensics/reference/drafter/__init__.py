"""A clean-room EAGLE-3 drafter in plain PyTorch, and a loader for every drafter format.

One concern per module (every name importable from here, resolved lazily):

* :mod:`.model` — :class:`Eagle3Drafter` and its parts, :class:`DrafterSpec`, initialisation;
* :mod:`.views` — :class:`DrafterView`: how the writer or one engine reads a checkpoint, from the
  engines' rule tables only; the target side a loader needs;
* :mod:`.loader` — :func:`load_drafter`, a drafter as its writer meant it or as an engine loads it;
* :mod:`.export` — :func:`export_tensors`, a drafter in a trainer's key layout.
"""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "export_tensors": "export",
    "load_drafter": "loader",
    "FRESH_INIT_SEED": "model",
    "TRAIN_INIT_STD": "model",
    "UNFILLED_STD": "model",
    "DrafterSpec": "model",
    "RMSNorm": "model",
    "Rotary": "model",
    "Attention": "model",
    "MLP": "model",
    "DecoderLayer": "model",
    "DraftCache": "model",
    "Eagle3Drafter": "model",
    "fresh_init": "model",
    "fill_unfilled": "model",
    "resolve_device": "model",
    "default_dtype": "model",
    "REFERENCE": "views",
    "VIEW_NAMES": "views",
    "TargetSide": "views",
    "TargetFiles": "views",
    "target_files": "views",
    "DrafterView": "views",
    "canonical_name": "views",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
