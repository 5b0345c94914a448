"""Reconstructing and converting ``d2t``/``t2d`` (:func:`d2t_from_t2d`, :func:`t2d_from_d2t`,
:func:`absolute_to_offsets`, :func:`offsets_to_absolute`, :func:`undo_double_offset`), and
:func:`suggest_d2t_fix`, which picks and verifies the right one for a classification.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.vocab.mapping.classify import (
    CONSISTENT_KINDS,
    as_numpy,
    classify_mapping,
    import_torch,
    usable_t2d,
)

# -- reconstruction and conversion ---------------------------------------------------------------


def d2t_from_t2d(t2d: Any) -> torch.Tensor:
    """Offsets ``d2t`` implied by a ``t2d`` mask (the trainers' ascending order)."""
    sel = np.flatnonzero(as_numpy(t2d).astype(bool)).astype(np.int64)
    return import_torch().from_numpy(sel - np.arange(sel.shape[0], dtype=np.int64))


def t2d_from_d2t(d2t: Any, target_vocab_size: int) -> torch.Tensor:
    """The ``t2d`` mask selected by an offsets ``d2t``."""
    d = as_numpy(d2t).astype(np.int64)
    targets = d + np.arange(d.shape[0], dtype=np.int64)
    if targets.size and (targets.min() < 0 or targets.max() >= target_vocab_size):
        raise UnusableInputError("d2t maps outside the target vocabulary; it is not an offsets encoding")
    mask = np.zeros(target_vocab_size, dtype=bool)
    mask[targets] = True
    return import_torch().from_numpy(mask)


def absolute_to_offsets(d2t_absolute: Any) -> torch.Tensor:
    d = as_numpy(d2t_absolute).astype(np.int64)
    return import_torch().from_numpy(d - np.arange(d.shape[0], dtype=np.int64))


def offsets_to_absolute(d2t_offsets: Any) -> torch.Tensor:
    d = as_numpy(d2t_offsets).astype(np.int64)
    return import_torch().from_numpy(d + np.arange(d.shape[0], dtype=np.int64))


def undo_double_offset(d2t_double: Any) -> torch.Tensor:
    """Offsets from a ``d2t`` that had the absolute→offset conversion applied twice."""
    return offsets_to_absolute(d2t_double)


# -- the fix for each kind -----------------------------------------------------------------------


@dataclass
class D2TFix:
    """The repair a classification calls for, applied in memory and verified."""

    kind: str  # classification before
    action: str  # what to do, in words
    function: str | None  # the eagle3_forensics.vocab.mapping function that does it
    d2t: (
        torch.Tensor | None
    )  # the repaired offsets (the stored ones when nothing is needed; None: needs data)
    verified_kind: str | None  # classification after the repair

    @property
    def needed(self) -> bool:
        return self.kind not in CONSISTENT_KINDS

    @property
    def verified(self) -> bool:
        return self.verified_kind in CONSISTENT_KINDS

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "needed": self.needed,
            "action": self.action,
            "function": self.function,
            "verified_kind": self.verified_kind,
            "verified": self.verified,
        }


def suggest_d2t_fix(
    d2t: Any | None, t2d: Any | None, target_vocab_size: int | None, draft_vocab_size: int | None = None
) -> D2TFix:
    """The right repair for a map: convert absolute ids once, undo a double conversion, or
    rebuild from ``t2d``; each result is re-classified (``verified_kind``) before it is offered."""
    res = classify_mapping(d2t, t2d, target_vocab_size, draft_vocab_size)
    if res.consistent:
        keep = None if d2t is None else import_torch().from_numpy(as_numpy(d2t).astype(np.int64))
        return D2TFix(
            res.kind,
            "nothing to fix: nonzero(t2d) == d2t + arange(v) holds"
            if res.kind == "consistent_offsets"
            else f"nothing to fix ({res.meaning})",
            None,
            keep,
            res.kind,
        )
    v = res.draft_vocab_size
    t2d_ok = usable_t2d(t2d, v) and (v is None or int(as_numpy(t2d).astype(bool).sum()) == v)
    fixed: torch.Tensor | None = None
    if res.kind == "absolute" and d2t is not None:
        fixed, fn, action = (
            absolute_to_offsets(d2t),
            "absolute_to_offsets",
            "convert once: d2t = d2t - arange(v)",
        )
    elif res.kind == "double_offset" and d2t is not None:
        fixed, fn, action = (
            undo_double_offset(d2t),
            "undo_double_offset",
            "undo the second conversion: d2t = d2t + arange(v)",
        )
    elif t2d_ok:
        fixed, fn, action = (
            d2t_from_t2d(t2d),
            "d2t_from_t2d",
            "rebuild from t2d: d2t = nonzero(t2d) - arange(v)",
        )
    else:
        return D2TFix(
            res.kind,
            "no usable t2d: rebuild d2t and t2d from the training data "
            "(eagle3-forensics vocab build) with the trainer's tie-break",
            "build_vocab_mapping",
            None,
            None,
        )
    after = classify_mapping(fixed, t2d if t2d_ok else None, target_vocab_size, draft_vocab_size)
    return D2TFix(res.kind, action, fn, fixed, after.kind)
