"""Draft↔target vocabulary maths: classify, reconstruct, convert and build ``d2t``/``t2d``.

Every trainer (EAGLE, SpecForge, speculators) selects the draft vocabulary as target ids
sorted ascending, so with ``sel = nonzero(t2d)``::

    d2t[i] = sel[i] - i          (offsets; every engine computes target = i + d2t[i])
    nonzero(t2d) == d2t + arange(v)

The classification decides from that full identity and the alternatives it rules in or
out, never from how a few entries look: ``d2t[:20] == 0`` is exactly right whenever the
first selected ids are 0..19.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

# kind -> one-line meaning
KINDS: dict[str, str] = {
    "consistent_offsets": "offsets, consistent with t2d: target = i + d2t[i] selects exactly nonzero(t2d)",
    "unverified_offsets": "valid offsets by themselves (no t2d to confirm the set)",
    "full_vocab": "draft vocabulary equals the target vocabulary; no mapping needed",
    "absolute": "d2t holds absolute target ids instead of offsets",
    "double_offset": "the absolute→offset conversion was applied twice",
    "identity_default": "d2t is all zeros (default buffer) although the selected ids are not 0..v-1",
    "missing": "no d2t although the draft vocabulary is reduced",
    "permuted": "the right set of target ids in the wrong order",
    "partial_corruption": "d2t disagrees with t2d at some draft ids",
    "out_of_range": "d2t maps some draft ids outside the target vocabulary",
    "inconsistent_sizes": "d2t, t2d and the configured sizes disagree",
    "invalid_d2t": "d2t is not a 1-D integer tensor of distinct targets",
}
CONSISTENT_KINDS = frozenset({"consistent_offsets", "unverified_offsets", "full_vocab"})


def _np(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _runs(bad: np.ndarray, limit: int = 10) -> list[list[int]]:
    """Maximal runs ``[start, end)`` of True in a boolean vector (first ``limit``)."""
    if not bad.any():
        return []
    padded = np.concatenate([[False], bad, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    starts, ends = edges[0::2], edges[1::2]
    return [[int(s), int(e)] for s, e in zip(starts[:limit], ends[:limit], strict=True)]


@dataclass
class VocabClassification:
    """The verdict on a (``d2t``, ``t2d``, ``V``) triple, with its evidence."""

    kind: str
    target_vocab_size: int | None
    draft_vocab_size: int | None
    agreement: dict[str, float] = field(default_factory=dict)
    first_bad_index: int | None = None
    bad_runs: list[list[int]] = field(default_factory=list)
    samples: list[dict[str, int]] = field(default_factory=list)
    d2t_problems: list[str] = field(default_factory=list)
    t2d_problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return self.kind in CONSISTENT_KINDS

    @property
    def meaning(self) -> str:
        return KINDS[self.kind]

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "target_vocab_size": self.target_vocab_size,
                               "draft_vocab_size": self.draft_vocab_size}
        if self.agreement:
            out["agreement"] = {k: round(v, 6) for k, v in self.agreement.items()}
        if self.first_bad_index is not None:
            out["first_bad_index"] = self.first_bad_index
        if self.bad_runs:
            out["bad_runs"] = self.bad_runs
        if self.samples:
            out["samples"] = self.samples
        for name in ("d2t_problems", "t2d_problems", "notes"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        return out


def check_t2d(t2d: Any, target_vocab_size: int | None, draft_vocab_size: int | None) -> list[str]:
    """Problems that make ``t2d`` unusable as the reference selection (empty list: usable)."""
    arr = _np(t2d)
    problems = []
    if arr.ndim != 1:
        problems.append(f"t2d has shape {list(arr.shape)}, expected 1-D")
        return problems
    if arr.dtype != np.bool_:
        values = np.unique(arr[: 1 << 20])
        if not np.isin(values, [0, 1]).all():
            problems.append(f"t2d has dtype {arr.dtype} with values other than 0/1")
            return problems
        problems.append(f"t2d has dtype {arr.dtype}, expected bool")
    if target_vocab_size is not None and arr.shape[0] != target_vocab_size:
        problems.append(f"t2d has {arr.shape[0]} entries, vocab_size is {target_vocab_size}")
    selected = int(arr.astype(bool).sum())
    if draft_vocab_size is not None and selected != draft_vocab_size:
        if selected == arr.shape[0]:
            problems.append(f"t2d is all True ({selected} selected): an untouched default buffer")
        else:
            problems.append(f"t2d selects {selected} ids, draft_vocab_size is {draft_vocab_size}")
    if selected == 0:
        problems.append("t2d selects no ids")
    return problems


def _samples(idx: np.ndarray, stored: np.ndarray, expected: np.ndarray, n: int = 5) -> list[dict[str, int]]:
    return [{"draft_id": int(i), "stored": int(stored[i]), "expected": int(expected[i])} for i in idx[:n]]


def classify_mapping(
    d2t: Any | None,
    t2d: Any | None,
    target_vocab_size: int | None,
    draft_vocab_size: int | None = None,
) -> VocabClassification:
    """Classify a vocabulary map from first principles (see the module docstring)."""
    big_v = target_vocab_size if target_vocab_size is not None else (None if t2d is None else int(_np(t2d).shape[0]))
    v = draft_vocab_size if draft_vocab_size is not None else (None if d2t is None else int(_np(d2t).size))
    res = VocabClassification("unverified_offsets", big_v, v)
    if t2d is not None:
        res.t2d_problems = check_t2d(t2d, big_v, v)

    if d2t is None:
        res.kind = "full_vocab" if (v is not None and big_v is not None and v >= big_v) else "missing"
        return res

    arr = _np(d2t)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        res.kind = "invalid_d2t"
        res.d2t_problems.append(f"d2t has shape {list(arr.shape)} and dtype {arr.dtype}; expected 1-D integers")
        return res
    d = arr.astype(np.int64)
    n = d.shape[0]
    if v is not None and n != v:
        res.kind = "inconsistent_sizes"
        res.d2t_problems.append(f"d2t has {n} entries, draft_vocab_size is {v}")
        return res
    ar = np.arange(n, dtype=np.int64)
    targets = d + ar
    if big_v is not None and n >= big_v and not d.any():
        res.kind = "full_vocab"
        return res

    t2d_usable = t2d is not None and not any(
        p.startswith("t2d has shape") or "values other than" in p for p in res.t2d_problems)
    sel = np.flatnonzero(_np(t2d).astype(bool)).astype(np.int64) if t2d_usable else None
    if sel is not None and sel.shape[0] != n:
        # A selection of the wrong size cannot be compared index by index. d2t already matches the
        # draft vocabulary size here, so t2d is the odd one out (check_t2d reports it): judge d2t alone.
        res.notes.append(f"t2d selects {sel.shape[0]} ids but d2t has {n} entries")
        sel = None

    if sel is not None:
        return _classify_against_selection(res, d, ar, sel, big_v)
    return _classify_alone(res, d, ar, targets, big_v)


def _classify_against_selection(res: VocabClassification, d: np.ndarray, ar: np.ndarray,
                                sel: np.ndarray, big_v: int | None) -> VocabClassification:
    hyps = {"offsets": d + ar, "absolute": d, "double_offset": d + 2 * ar}
    res.agreement = {name: float(np.mean(h == sel)) if sel.size else 0.0 for name, h in hyps.items()}
    if res.agreement["offsets"] == 1.0:
        res.kind = "consistent_offsets"
        if res.t2d_problems:  # e.g. dtype: still consistent, reported separately
            res.notes.append("identity holds; t2d has only cosmetic problems")
        return res
    if res.agreement["absolute"] == 1.0:
        res.kind = "absolute"
    elif res.agreement["double_offset"] == 1.0:
        res.kind = "double_offset"
    elif not d.any():
        res.kind = "identity_default"
    elif np.array_equal(np.sort(d + ar), sel):
        res.kind = "permuted"
    elif big_v is not None and (((d + ar) < 0) | ((d + ar) >= big_v)).any():
        res.kind = "out_of_range"
    else:
        res.kind = "partial_corruption"
    bad = (d + ar) != sel
    idx = np.flatnonzero(bad)
    res.first_bad_index = int(idx[0])
    res.bad_runs = _runs(bad)
    res.samples = _samples(idx, d, sel - ar)
    return res


def _classify_alone(res: VocabClassification, d: np.ndarray, ar: np.ndarray, targets: np.ndarray,
                    big_v: int | None) -> VocabClassification:
    """Without a usable ``t2d``: decide what ``d2t`` alone proves."""
    res.notes.append("no usable t2d: decided from d2t alone")
    upper = big_v if big_v is not None else np.iinfo(np.int64).max
    in_range = (targets >= 0) & (targets < upper)
    if (d < 0).any():
        # Offsets are sel[i] - i >= 0; negatives prove a wrong encoding.
        once = d + 2 * ar
        if np.all(np.diff(once) > 0) and once[0] >= 0 and once[-1] < upper:
            res.kind = "double_offset"
        else:
            res.kind = "out_of_range"
        bad = d < 0
    elif not in_range.all():
        if np.all(np.diff(d) > 0) and d[-1] < upper:
            res.kind = "absolute"  # strictly increasing valid ids that overflow once offset: absolute
        else:
            res.kind = "out_of_range"
        bad = ~in_range
    elif not d.any() and big_v is not None and d.shape[0] < big_v:
        res.kind = "identity_default"
        res.notes.append("all zeros is only right if the draft vocabulary is exactly target ids 0..v-1")
        return res
    elif np.any(np.diff(targets) == 0):
        res.kind = "invalid_d2t"
        res.d2t_problems.append("two draft ids map to the same target id")
        bad = np.concatenate([[False], np.diff(targets) == 0])
    elif np.any(np.diff(targets) < 0):
        res.kind = "permuted"
        bad = np.concatenate([[False], np.diff(targets) < 0])
    else:
        if d.shape[0] > 1 and np.all(np.diff(d) > 0):
            res.notes.append("d2t is strictly increasing, as absolute ids would be; t2d is needed to rule it out")
        return res
    idx = np.flatnonzero(bad)
    res.first_bad_index = int(idx[0])
    res.bad_runs = _runs(bad)
    res.samples = [{"draft_id": int(i), "stored": int(d[i]), "expected": -1} for i in idx[:5]]
    return res


# -- reconstruction and conversion ---------------------------------------------------------------

def d2t_from_t2d(t2d: Any) -> torch.Tensor:
    """Offsets ``d2t`` implied by a ``t2d`` mask (the trainers' ascending order)."""
    sel = np.flatnonzero(_np(t2d).astype(bool)).astype(np.int64)
    return torch.from_numpy(sel - np.arange(sel.shape[0], dtype=np.int64))


def t2d_from_d2t(d2t: Any, target_vocab_size: int) -> torch.Tensor:
    """The ``t2d`` mask selected by an offsets ``d2t``."""
    d = _np(d2t).astype(np.int64)
    targets = d + np.arange(d.shape[0], dtype=np.int64)
    if targets.size and (targets.min() < 0 or targets.max() >= target_vocab_size):
        raise ValueError("d2t maps outside the target vocabulary; it is not an offsets encoding")
    mask = np.zeros(target_vocab_size, dtype=bool)
    mask[targets] = True
    return torch.from_numpy(mask)


def absolute_to_offsets(d2t_absolute: Any) -> torch.Tensor:
    d = _np(d2t_absolute).astype(np.int64)
    return torch.from_numpy(d - np.arange(d.shape[0], dtype=np.int64))


def offsets_to_absolute(d2t_offsets: Any) -> torch.Tensor:
    d = _np(d2t_offsets).astype(np.int64)
    return torch.from_numpy(d + np.arange(d.shape[0], dtype=np.int64))


def undo_double_offset(d2t_double: Any) -> torch.Tensor:
    """Offsets from a ``d2t`` that had the absolute→offset conversion applied twice."""
    return offsets_to_absolute(d2t_double)


# -- building a map from token counts ---------------------------------------------------------

@dataclass
class VocabMapping:
    d2t: torch.Tensor  # int64 [v], offsets
    t2d: torch.Tensor  # bool [V]
    counts: np.ndarray  # int64 [V], counted occurrences
    padded: int  # ids added because fewer than v distinct ids were seen

    @property
    def selected(self) -> np.ndarray:
        return np.flatnonzero(self.t2d.numpy())


def _count(token_ids: Any, loss_mask: Any | None, target_vocab_size: int,
           first_seen: np.ndarray | None) -> np.ndarray:
    ids = _np(token_ids).reshape(-1).astype(np.int64, copy=False)
    if ids.size and (ids.min() < 0 or ids.max() >= target_vocab_size):
        raise ValueError(f"token ids must lie in [0, {target_vocab_size}); found {ids.min()}..{ids.max()}")
    if loss_mask is not None:
        mask = _np(loss_mask)
        if mask.size != ids.size:
            raise ValueError(f"loss_mask has {mask.size} entries, token ids have {ids.size}")
        ids = ids[mask.reshape(-1).astype(bool)]
    if first_seen is not None and ids.size:
        uniq, pos = np.unique(ids, return_index=True)
        first_seen[uniq] = pos  # position among the counted ids: order is what matters
    return np.bincount(ids, minlength=target_vocab_size).astype(np.int64)


def build_vocab_mapping(
    token_ids: Any | Iterable[Any],
    draft_vocab_size: int,
    target_vocab_size: int,
    loss_mask: Any | Iterable[Any] | None = None,
    tie_break: str = "id",
) -> VocabMapping:
    """Build ``d2t``/``t2d`` from token counts the way the trainers do.

    Counts ids where ``loss_mask`` is set; orders by (-count, id) (``tie_break="id"``,
    speculators) or by (-count, first occurrence) (``"first_seen"``, EAGLE/SpecForge's
    ``Counter.most_common``); pads with the smallest unused ids when fewer than
    ``draft_vocab_size`` distinct ids were seen; sorts ascending; encodes offsets.
    """
    if tie_break not in ("id", "first_seen"):
        raise ValueError("tie_break must be 'id' or 'first_seen'")
    if not 0 < draft_vocab_size <= target_vocab_size:
        raise ValueError(f"draft_vocab_size {draft_vocab_size} must be in 1..{target_vocab_size}")
    chunks = [token_ids] if isinstance(token_ids, (np.ndarray, torch.Tensor, list)) else list(token_ids)
    if loss_mask is None:
        masks: list[Any | None] = [None] * len(chunks)
    elif isinstance(loss_mask, (np.ndarray, torch.Tensor, list)):
        masks = [loss_mask]
    else:
        masks = list(loss_mask)
    if len(masks) != len(chunks):
        raise ValueError("loss_mask chunks do not match token_id chunks")
    counts = np.zeros(target_vocab_size, dtype=np.int64)
    sentinel = np.iinfo(np.int64).max
    first = np.full(target_vocab_size, sentinel, dtype=np.int64) if tie_break == "first_seen" else None
    offset = 0
    for ids, mask in zip(chunks, masks, strict=True):
        if first is not None:
            local = np.full(target_vocab_size, sentinel, dtype=np.int64)
            counts += _count(ids, mask, target_vocab_size, local)
            seen = local < sentinel
            first[seen] = np.minimum(first[seen], local[seen] + offset)
            offset += int(_np(ids).size)
        else:
            counts += _count(ids, mask, target_vocab_size, None)
    if counts.sum() == 0:
        raise ValueError("no counted tokens (empty corpus or an all-zero loss mask)")
    seen_ids = np.flatnonzero(counts)
    if first is None:
        order = seen_ids[np.lexsort((seen_ids, -counts[seen_ids]))]
    else:
        order = seen_ids[np.lexsort((first[seen_ids], -counts[seen_ids]))]
    chosen = order[:draft_vocab_size]
    padded = draft_vocab_size - chosen.shape[0]
    if padded:
        unused = np.setdiff1d(np.arange(target_vocab_size, dtype=np.int64), chosen, assume_unique=True)
        chosen = np.concatenate([chosen, unused[:padded]])
    sel = np.sort(chosen)
    t2d = np.zeros(target_vocab_size, dtype=bool)
    t2d[sel] = True
    d2t = sel - np.arange(draft_vocab_size, dtype=np.int64)
    return VocabMapping(torch.from_numpy(d2t), torch.from_numpy(t2d), counts, int(padded))
