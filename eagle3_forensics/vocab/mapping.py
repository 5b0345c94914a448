"""Draft↔target vocabulary maths: classify, reconstruct, convert and build ``d2t``/``t2d``.

Every trainer (EAGLE, SpecForge, speculators) selects the draft vocabulary as target ids
sorted ascending, so with ``sel = nonzero(t2d)``::

    d2t[i] = sel[i] - i          (offsets; every engine computes target = i + d2t[i])
    nonzero(t2d) == d2t + arange(v)

The classification decides from that full identity and the alternatives it rules in or
out, never from how a few entries look: ``d2t[:20] == 0`` is exactly right whenever the
first selected ids are 0..19.

This is the one vocabulary module (``diagnose``'s vocab check, ``repair``, the CLI and the
notebooks all call it):

* :func:`classify_mapping` and :func:`check_t2d` - the verdict and its evidence;
* :func:`d2t_from_t2d`, :func:`t2d_from_d2t`, :func:`absolute_to_offsets`,
  :func:`offsets_to_absolute`, :func:`undo_double_offset` - reconstruction and conversion;
  :func:`suggest_d2t_fix` picks and verifies the right one for a classification;
* :func:`build_vocab_mapping` (= :func:`count_token_ids` + :func:`select_draft_vocab`) - the
  trainers' map from token counts, one streaming ``bincount`` pass, tie-breaks of all three
  trainers (:data:`TIE_BREAKS`);
* :func:`selected_ids`, :func:`mapping_fingerprint`, :func:`compare_mappings` - provenance;
* :func:`check_lm_head_rows` - ``lm_head[i]`` against ``target_lm_head[target(i)]``.

File inputs (token ids, JSONL corpora, maps on disk) live in :mod:`eagle3_forensics.vocab.inputs`.
"""

from __future__ import annotations

import functools
import hashlib
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import zip_longest
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

from eagle3_forensics.errors import BadArgumentsError, UnusableInputError

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


def _torch() -> ModuleType:
    """torch, imported on first use: classification is numpy-only, so ``diagnose`` never loads torch;
    the functions that return tensors (conversions, built maps, the lm_head check) import it."""
    import torch  # heavy: torch (only the tensor-returning functions ask)

    return torch


def _is_tensor(x: Any) -> bool:
    """``x`` is a torch tensor (without importing torch: if it is not loaded, ``x`` cannot be one)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _np(x: Any) -> np.ndarray:
    if _is_tensor(x):
        torch, x = _torch(), x.detach().cpu()
        if x.dtype.is_floating_point and x.dtype not in (torch.float16, torch.float32, torch.float64):
            x = x.float()  # bfloat16 / float8 maps: NumPy has no such dtype; the checks call them invalid
        return np.asarray(x.numpy())
    return np.asarray(x)


def _t2d_size(t2d: Any | None) -> int | None:
    """The target vocabulary size a ``t2d`` states: its length when it is 1-D (else it states none;
    ``check_t2d`` reports its shape)."""
    if t2d is None:
        return None
    arr = _np(t2d)
    return int(arr.shape[0]) if arr.ndim == 1 else None


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
        out: dict[str, Any] = {
            "kind": self.kind,
            "target_vocab_size": self.target_vocab_size,
            "draft_vocab_size": self.draft_vocab_size,
        }
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
    big_v = target_vocab_size if target_vocab_size is not None else _t2d_size(t2d)
    v = draft_vocab_size if draft_vocab_size is not None else (None if d2t is None else int(_np(d2t).size))
    res = VocabClassification("unverified_offsets", big_v, v)
    if t2d is not None:
        res.t2d_problems = check_t2d(t2d, big_v, v)

    if d2t is None:
        res.kind = "full_vocab" if (v is not None and big_v is not None and v >= big_v) else "missing"
        return res

    arr = _np(d2t)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer) or arr.size == 0:
        res.kind = "invalid_d2t"
        res.d2t_problems.append(
            f"d2t has shape {list(arr.shape)} and dtype {arr.dtype}; expected 1-D integers, at least one"
        )
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
        p.startswith("t2d has shape") or "values other than" in p for p in res.t2d_problems
    )
    sel = np.flatnonzero(_np(t2d).astype(bool)).astype(np.int64) if t2d_usable else None
    if sel is not None and sel.shape[0] != n:
        # A selection of the wrong size cannot be compared index by index. d2t already matches the
        # draft vocabulary size here, so t2d is the odd one out (check_t2d reports it): judge d2t alone.
        res.notes.append(f"t2d selects {sel.shape[0]} ids but d2t has {n} entries")
        sel = None

    if sel is not None:
        return _classify_against_selection(res, d, ar, sel, big_v)
    return _classify_alone(res, d, ar, targets, big_v)


def _classify_against_selection(
    res: VocabClassification, d: np.ndarray, ar: np.ndarray, sel: np.ndarray, big_v: int | None
) -> VocabClassification:
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


def _classify_alone(
    res: VocabClassification, d: np.ndarray, ar: np.ndarray, targets: np.ndarray, big_v: int | None
) -> VocabClassification:
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
            res.notes.append(
                "d2t is strictly increasing, as absolute ids would be; t2d is needed to rule it out"
            )
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
    return _torch().from_numpy(sel - np.arange(sel.shape[0], dtype=np.int64))


def t2d_from_d2t(d2t: Any, target_vocab_size: int) -> torch.Tensor:
    """The ``t2d`` mask selected by an offsets ``d2t``."""
    d = _np(d2t).astype(np.int64)
    targets = d + np.arange(d.shape[0], dtype=np.int64)
    if targets.size and (targets.min() < 0 or targets.max() >= target_vocab_size):
        raise UnusableInputError("d2t maps outside the target vocabulary; it is not an offsets encoding")
    mask = np.zeros(target_vocab_size, dtype=bool)
    mask[targets] = True
    return _torch().from_numpy(mask)


def absolute_to_offsets(d2t_absolute: Any) -> torch.Tensor:
    d = _np(d2t_absolute).astype(np.int64)
    return _torch().from_numpy(d - np.arange(d.shape[0], dtype=np.int64))


def offsets_to_absolute(d2t_offsets: Any) -> torch.Tensor:
    d = _np(d2t_offsets).astype(np.int64)
    return _torch().from_numpy(d + np.arange(d.shape[0], dtype=np.int64))


def undo_double_offset(d2t_double: Any) -> torch.Tensor:
    """Offsets from a ``d2t`` that had the absolute→offset conversion applied twice."""
    return offsets_to_absolute(d2t_double)


# -- building a map from token counts ---------------------------------------------------------
#
# One streaming pass: the ids are read block by block (about ``block_tokens`` at a time, whole rows
# per block), each block is counted with one ``np.bincount`` and added into a ``[V]`` total. With a
# loss mask the block is counted over the combined key ``2 * id + mask`` (odd bins are the counted
# ids), which costs one vectorised shift-and-add instead of a boolean-mask gather. The range check
# rides on the same block while it is in cache. Tie-break bookkeeping (first position, first row)
# only touches ids seen for the first time in a block, so it stays near the cost of counting.

TIE_BREAKS: dict[str, str] = {
    "id": "ties by smallest target id (speculators: sort by (-count, id))",
    "first_seen": "ties by first occurrence in the token stream (EAGLE: Counter over tokens, most_common)",
    "first_row": "ties by first row containing the id, then by id (SpecForge: per-row unique + Counter.update)",
}
#: tokens per counting block: large enough to amortise the ``O(V)`` work per block, small enough for cache
BLOCK_TOKENS = 1 << 20
#: inputs at least this long show a progress bar when ``progress`` is left at ``None``
PROGRESS_MIN_TOKENS = 1 << 27
_UNSEEN = np.iinfo(np.int64).max


class VocabPaddingWarning(UserWarning):
    """Fewer distinct ids were counted than the draft vocabulary holds; the map was padded."""


def padding_note(distinct: int, draft_vocab_size: int, padded: int) -> str:
    """The one line that says a map was padded (the :class:`VocabPaddingWarning` text)."""
    return (
        f"only {distinct} distinct token ids were counted, fewer than draft_vocab_size "
        f"{draft_vocab_size}: padded with the {padded} smallest unused ids (as the trainers do)"
    )


@dataclass
class TokenCounts:
    """Counted occurrences per target id, plus what the trainers' tie-breaks need."""

    counts: np.ndarray  # int64 [V]
    tokens: int  # ids read (masked or not)
    rows: int  # rows read (a 1-D array is one row)
    first_pos: np.ndarray | None = None  # int64 [V]: first counted position in the stream (unseen: int64 max)
    first_row: np.ndarray | None = None  # int64 [V]: first row with a counted occurrence
    # Deferred tie-break bookkeeping (re-readable inputs): the block where each id is first counted;
    # the exact order inside one block is recovered by re-reading that block only (``rescan``).
    track: str | None = None
    first_group: np.ndarray | None = field(default=None, repr=False)  # int64 [V] (unseen: int64 max)
    single_row_groups: frozenset[int] = frozenset()  # groups whose ids all start in the same row
    rescan: Callable[[int, np.ndarray], np.ndarray] | None = field(default=None, repr=False)

    def tie_order(self, tie_break: str, ids: np.ndarray, need: int) -> np.ndarray:
        """The first ``need`` of ``ids`` (ascending, all tied on count) in ``tie_break`` order."""
        exact = self.first_pos if tie_break == "first_seen" else self.first_row
        if exact is not None:
            return ids[np.argsort(exact[ids], kind="stable")][:need]  # stable: then by id
        if self.first_group is None or self.track != tie_break or self.rescan is None:
            raise BadArgumentsError(f"tie_break {tie_break!r} needs counts made with track={tie_break!r}")
        groups = self.first_group[ids]
        order = np.argsort(groups, kind="stable")
        ids, groups = ids[order], groups[order]
        boundary = int(groups[need - 1])
        before = ids[groups < boundary]
        at = ids[groups == boundary]  # ascending ids
        if tie_break == "first_seen" or boundary not in self.single_row_groups:
            at = at[np.argsort(self.rescan(boundary, at), kind="stable")]
        return np.concatenate([before, at[: need - before.shape[0]]])

    @property
    def counted(self) -> int:
        return int(self.counts.sum())

    @property
    def distinct(self) -> int:
        return int(np.count_nonzero(self.counts))


@dataclass
class VocabMapping:
    d2t: torch.Tensor  # int64 [v], offsets
    t2d: torch.Tensor  # bool [V]
    counts: np.ndarray  # int64 [V], counted occurrences
    padded: int  # ids added because fewer than v distinct ids were seen
    tie_break: str = "id"
    tokens: int = 0  # ids read, masked or not

    @property
    def selected(self) -> np.ndarray:
        return np.flatnonzero(self.t2d.numpy())

    @property
    def target_vocab_size(self) -> int:
        return int(self.t2d.shape[0])

    @property
    def draft_vocab_size(self) -> int:
        return int(self.d2t.shape[0])

    @property
    def counted(self) -> int:
        return int(self.counts.sum())

    @property
    def coverage(self) -> float:
        """Share of the counted tokens whose id is in the draft vocabulary."""
        total = self.counted
        return float(self.counts[self.selected].sum() / total) if total else 0.0

    @property
    def fingerprint(self) -> str:
        return mapping_fingerprint(self.target_vocab_size, self.selected)

    @property
    def padding_note(self) -> str:
        """Why the map holds ids that were never counted (``""`` when it holds none)."""
        if not self.padded:
            return ""
        return padding_note(int(np.count_nonzero(self.counts)), self.draft_vocab_size, self.padded)

    def summary(self) -> dict[str, Any]:
        return {
            "target_vocab_size": self.target_vocab_size,
            "draft_vocab_size": self.draft_vocab_size,
            "tie_break": self.tie_break,
            "tokens": self.tokens,
            "counted_tokens": self.counted,
            "distinct_ids": int(np.count_nonzero(self.counts)),
            "padded": self.padded,
            "coverage": round(self.coverage, 6),
            "fingerprint": self.fingerprint,
        }


def _as_array(x: Any, what: str) -> np.ndarray:
    if _is_tensor(x):
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        return np.asarray(x.numpy())
    arr = np.asarray(x)
    if arr.dtype == object:
        raise UnusableInputError(f"{what} is ragged or not numeric; pass one array per row instead")
    return arr


def _is_array_like(x: Any) -> bool:
    return isinstance(x, np.ndarray) or _is_tensor(x)


def _is_pair(x: Any) -> bool:
    return (
        isinstance(x, tuple)
        and len(x) == 2
        and not isinstance(x[0], (int, np.integer))
        and (x[1] is None or not isinstance(x[1], (int, np.integer, bool, np.bool_)))
    )


def _chunk_pairs(token_ids: Any, loss_mask: Any) -> Iterator[tuple[Any, Any]]:
    """Normalise the accepted input forms to a stream of ``(ids, mask | None)`` chunks.

    A single array (``np.ndarray``, ``torch.Tensor`` or a list of ints / of equal-length lists) is
    one chunk; a tuple, a generator or a list of arrays is a sequence of chunks, with ``loss_mask``
    the same kind of sequence, or its items may be ``(ids, mask)`` pairs.
    """
    single = _is_array_like(token_ids) or (
        isinstance(token_ids, list)
        and not (token_ids and (_is_array_like(token_ids[0]) or _is_pair(token_ids[0])))
    )
    if single:
        if loss_mask is not None and not (_is_array_like(loss_mask) or isinstance(loss_mask, list)):
            raise UnusableInputError("loss_mask chunks do not match token_id chunks")
        yield token_ids, loss_mask
        return
    if isinstance(token_ids, (str, bytes)):
        raise BadArgumentsError(
            "token_ids must be an array or a sequence of arrays, not a string "
            "(use eagle3_forensics.vocab.inputs for files)"
        )
    if loss_mask is None:
        for item in token_ids:
            yield (item if _is_pair(item) else (item, None))
        return
    if _is_array_like(loss_mask):
        raise UnusableInputError("loss_mask chunks do not match token_id chunks")
    sentinel = object()
    for ids, mask in zip_longest(token_ids, loss_mask, fillvalue=sentinel):
        if ids is sentinel or mask is sentinel:
            raise UnusableInputError("loss_mask chunks do not match token_id chunks")
        yield ids, mask


@dataclass
class _Block:
    ids: np.ndarray  # 1-D integer
    mask: np.ndarray | None  # 1-D bool
    row_starts: np.ndarray  # block-relative row starts, always beginning with 0
    first_row: int  # global index of the row holding position 0 (it may have begun in an earlier block)
    row_len: int = 0  # length of every row in the block when they are all equal (0: ragged)
    part: int = 0  # piece index when the block is a piece of one over-long row (0 otherwise)

    def rows_at(self, pos: np.ndarray) -> np.ndarray | int:
        """Global row index of block positions ``pos``."""
        if self.row_starts.shape[0] == 1:
            return self.first_row
        if self.row_len:
            return self.first_row + pos // self.row_len
        return self.first_row + np.searchsorted(self.row_starts, pos, side="right") - 1


def _rows_of(ids: np.ndarray, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """View a chunk as ``[rows, length]`` (a 1-D chunk is one row); no data is copied."""
    if ids.size and not (np.issubdtype(ids.dtype, np.integer) and ids.dtype != np.bool_):
        raise UnusableInputError(f"token ids must be integers, got dtype {ids.dtype}")
    if ids.ndim == 0:
        raise UnusableInputError("token ids must be 1-D or 2-D, got a scalar")
    if mask is not None:
        if mask.size != ids.size or (mask.ndim > 1 and ids.ndim > 1 and mask.shape != ids.shape):
            raise UnusableInputError(
                f"loss_mask has shape {list(mask.shape)} ({mask.size} entries), "
                f"token ids have shape {list(ids.shape)} ({ids.size} entries)"
            )
        if mask.dtype != np.bool_ and not np.issubdtype(mask.dtype, np.number):
            raise UnusableInputError(f"loss_mask must be boolean or numeric, got dtype {mask.dtype}")
    length = max(int(ids.shape[-1]), 1)
    rows = ids.reshape(-1, length) if ids.size else ids.reshape(0, length)
    return rows, (None if mask is None else mask.reshape(rows.shape))


def _flat(part: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(part).reshape(-1)


def _flat_mask(part: np.ndarray | None) -> np.ndarray | None:
    if part is None:
        return None
    flat = _flat(part)
    return flat if flat.dtype == np.bool_ else flat == 1  # the trainers count loss_mask == 1


def _iter_blocks(pairs: Iterable[tuple[Any, Any]], block_tokens: int) -> Iterator[_Block]:
    """Blocks of about ``block_tokens`` ids made of whole rows (a single over-long row is split).

    Only one block is materialised at a time, so memory-mapped inputs stream from disk.
    """
    pend_ids: list[np.ndarray] = []
    pend_mask: list[np.ndarray | None] = []
    pend_starts: list[int] = []
    pend = {"n": 0, "row": 0, "len": 0}
    row = 0  # global index of the next row to start

    def flush() -> _Block:
        ids = pend_ids[0] if len(pend_ids) == 1 else np.concatenate(pend_ids)
        mask = None
        if any(m is not None for m in pend_mask):
            masks = [
                np.ones(a.shape[0], dtype=bool) if m is None else m
                for a, m in zip(pend_ids, pend_mask, strict=True)
            ]
            mask = masks[0] if len(masks) == 1 else np.concatenate(masks)
        block = _Block(ids, mask, np.asarray(pend_starts, dtype=np.int64), pend["row"], max(pend["len"], 0))
        pend_ids.clear()
        pend_mask.clear()
        pend_starts.clear()
        pend["n"] = 0
        return block

    for raw_ids, raw_mask in pairs:
        ids = _as_array(raw_ids, "token ids")
        mask = None if raw_mask is None else _as_array(raw_mask, "loss_mask")
        rows, masks = _rows_of(ids, mask)
        n_rows, length = rows.shape
        if rows.size == 0:
            row += n_rows
            continue
        if length > block_tokens:  # long rows (e.g. a flat 1-D corpus): split each one
            if pend["n"]:
                yield flush()
            for r in range(n_rows):
                for k, s in enumerate(range(0, length, block_tokens)):
                    yield _Block(
                        _flat(rows[r, s : s + block_tokens]),
                        None if masks is None else _flat_mask(masks[r, s : s + block_tokens]),
                        np.zeros(1, dtype=np.int64),
                        row,
                        0,
                        k,
                    )
                row += 1
            continue
        per_block = max(1, block_tokens // length)
        for r0 in range(0, n_rows, per_block):
            r1 = min(n_rows, r0 + per_block)
            flat = _flat(rows[r0:r1])
            if not pend["n"]:
                pend["row"] = row
                pend["len"] = length
            elif pend["len"] != length:
                pend["len"] = -1  # ragged
            pend_starts.extend(range(pend["n"], pend["n"] + flat.shape[0], length))
            pend_ids.append(flat)
            pend_mask.append(None if masks is None else _flat_mask(masks[r0:r1]))
            pend["n"] += flat.shape[0]
            row += r1 - r0
            if pend["n"] + length > block_tokens:  # another row of this length would not fit
                yield flush()
    if pend["n"]:
        yield flush()


def _out_of_range(ids: np.ndarray, target_vocab_size: int) -> UnusableInputError:
    lo, hi = int(ids.min()), int(ids.max())
    return UnusableInputError(f"token ids must lie in [0, {target_vocab_size}); found {lo}..{hi}")


def _total_tokens(token_ids: Any) -> int | None:
    if _is_array_like(token_ids):
        return int(np.prod(tuple(token_ids.shape)))
    if isinstance(token_ids, (tuple, list)) and all(_is_array_like(c) for c in token_ids):
        return sum(int(np.prod(tuple(c.shape))) for c in token_ids)
    return None


def _reopener(token_ids: Any, loss_mask: Any) -> Callable[[], Iterator[tuple[Any, Any]]] | None:
    """How to read the same input again (``None`` for one-shot iterators)."""
    if callable(token_ids) and not _is_array_like(token_ids):
        return lambda: _chunk_pairs(token_ids(), loss_mask)
    rereadable = (_is_array_like(token_ids) or isinstance(token_ids, (list, tuple))) and (
        loss_mask is None or _is_array_like(loss_mask) or isinstance(loss_mask, (list, tuple))
    )
    return (lambda: _chunk_pairs(token_ids, loss_mask)) if rereadable else None


def _rescan_block(
    reopen: Callable[[], Iterator[tuple[Any, Any]]],
    block_tokens: int,
    track: str,
    target_vocab_size: int,
    index: int,
    ids: np.ndarray,
) -> np.ndarray:
    """Exact first position (``first_seen``) or row (``first_row``) of ``ids`` inside block ``index``."""
    for i, block in enumerate(_iter_blocks(reopen(), block_tokens)):
        if i < index:
            continue
        slot = np.full(target_vocab_size, -1, dtype=np.int64)
        slot[ids] = np.arange(ids.shape[0])
        hit = slot[block.ids] >= 0
        if block.mask is not None:
            hit &= block.mask
        pos = np.flatnonzero(hit)
        keys = np.full(ids.shape[0], _UNSEEN, dtype=np.int64)
        where = block.rows_at(pos) if track == "first_row" else pos
        np.minimum.at(keys, slot[block.ids[pos]], where)
        return keys
    raise UnusableInputError(
        "the input changed between two reads"
    )  # pragma: no cover - reopen gives the same data


def count_token_ids(
    token_ids: Any,
    target_vocab_size: int,
    loss_mask: Any | None = None,
    *,
    track: str | None = None,
    progress: bool | None = None,
    block_tokens: int = BLOCK_TOKENS,
    total_tokens: int | None = None,
) -> TokenCounts:
    """Count target ids (where ``loss_mask == 1``) in one streaming pass.

    ``token_ids``: a 1-D or 2-D array/tensor/list (a 1-D array is one row); an iterable of such
    chunks (``loss_mask`` then an iterable of matching masks, or the items ``(ids, mask)`` pairs);
    or a zero-argument callable returning such an iterable (re-readable streams, e.g.
    ``lambda: iter_token_chunks(path)``). ``track``: ``"first_seen"`` or ``"first_row"`` records
    what that tie-break needs: for re-readable inputs only the block where each id first occurs
    (ties inside one block are settled later by re-reading that block alone), for one-shot
    iterators the exact position or row. ``progress``: a tqdm bar (``None``: only for inputs of at
    least :data:`PROGRESS_MIN_TOKENS` ids; ``total_tokens`` sizes it for streamed inputs). Raises
    ``UnusableInputError`` on ids outside ``[0, V)``, non-integer ids and masks of another shape.
    """
    if not isinstance(target_vocab_size, (int, np.integer)) or target_vocab_size <= 0:
        raise BadArgumentsError(f"target_vocab_size must be a positive integer, got {target_vocab_size!r}")
    if track not in (None, "first_seen", "first_row"):
        raise BadArgumentsError("track must be None, 'first_seen' or 'first_row'")
    big_v = int(target_vocab_size)
    counts = np.zeros(big_v, dtype=np.int64)
    reopen = _reopener(token_ids, loss_mask) if track else None
    pairs = (
        reopen()
        if reopen is not None
        else _chunk_pairs(
            token_ids() if callable(token_ids) and not _is_array_like(token_ids) else token_ids, loss_mask
        )
    )
    deferred = reopen is not None
    first = np.full(big_v, _UNSEEN, dtype=np.int64) if track else None  # exact keys, or groups when deferred
    seen = np.zeros(big_v, dtype=bool) if track else None
    single_row: set[int] = set()
    keybuf = np.empty(0, dtype=np.int64)
    newkey = np.empty(0, dtype=bool)
    hitbuf = np.empty(0, dtype=bool)
    offset = 0
    rows_seen = 0
    total = total_tokens if total_tokens is not None else _total_tokens(token_ids)
    show = progress if progress is not None else (total is not None and total >= PROGRESS_MIN_TOKENS)
    bar = None
    if show:
        from tqdm.auto import tqdm  # heavy: tqdm

        bar = tqdm(total=total, unit="tok", unit_scale=True, desc="counting token ids", leave=False)
    try:
        for index, block in enumerate(_iter_blocks(pairs, block_tokens)):
            ids, mask = block.ids, block.mask
            n = ids.shape[0]
            if mask is None:
                key, width = ids, big_v
            else:
                if keybuf.shape[0] < n:
                    keybuf = np.empty(max(n, block_tokens), dtype=np.int64)
                key = keybuf[:n]
                np.left_shift(ids, 1, out=key, casting="unsafe")
                np.add(key, mask, out=key, casting="unsafe")
                width = 2 * big_v
            # negative ids wrap to huge unsigned values: one max() checks both ends
            top = (
                int(key.view(np.dtype(f"u{key.dtype.itemsize}")).max())
                if np.issubdtype(key.dtype, np.signedinteger)
                else int(key.max())
            )
            if top >= width:
                raise _out_of_range(ids, big_v)
            binned = np.bincount(key, minlength=width)
            block_counts = binned if mask is None else binned[1::2]
            counts += block_counts
            if first is not None and seen is not None:
                new = (block_counts > 0) & ~seen
                if new.any():  # only ids never counted before
                    seen |= new
                    if deferred:  # the block (group) is enough for now
                        group = index - block.part if track == "first_row" else index
                        first[new] = group
                        if track == "first_row" and block.row_starts.shape[0] == 1:
                            single_row.add(group)
                    else:  # one-shot input: their exact first position / row now
                        if mask is None:
                            table = new
                        else:  # look up the combined key (still in cache): odd keys are the counted ids
                            if newkey.shape[0] != width:
                                newkey = np.zeros(width, dtype=bool)
                            newkey[1::2] = new
                            table = newkey
                        if hitbuf.shape[0] < n:
                            hitbuf = np.empty(max(n, block_tokens), dtype=bool)
                        hit = np.take(table, key, mode="wrap", out=hitbuf[:n])  # keys are in range (checked)
                        pos = np.flatnonzero(hit)
                        where = block.rows_at(pos) if track == "first_row" else offset + pos
                        np.minimum.at(first, ids[pos], where)
            offset += n
            rows_seen = max(rows_seen, block.first_row + block.row_starts.shape[0])
            if bar is not None:
                bar.update(n)
    finally:
        if bar is not None:
            bar.close()
    if deferred and track is not None and reopen is not None:
        rescan = functools.partial(_rescan_block, reopen, block_tokens, track, big_v)
        return TokenCounts(
            counts,
            offset,
            rows_seen,
            track=track,
            first_group=first,
            single_row_groups=frozenset(single_row),
            rescan=rescan,
        )
    return TokenCounts(
        counts,
        offset,
        rows_seen,
        first if track == "first_seen" else None,
        first if track == "first_row" else None,
        track=track,
    )


def select_draft_vocab(
    counts: TokenCounts | np.ndarray,
    draft_vocab_size: int,
    tie_break: str = "id",
    *,
    warn: bool = True,
) -> VocabMapping:
    """Top ``draft_vocab_size`` ids by count (ties per ``tie_break``), padded, sorted, as offsets."""
    if tie_break not in TIE_BREAKS:
        raise BadArgumentsError(f"tie_break must be one of {', '.join(repr(k) for k in TIE_BREAKS)}")
    tc = counts if isinstance(counts, TokenCounts) else TokenCounts(np.asarray(counts, dtype=np.int64), 0, 0)
    c = tc.counts
    big_v = int(c.shape[0])
    if not 0 < draft_vocab_size <= big_v:
        raise BadArgumentsError(
            f"draft_vocab_size {draft_vocab_size} must be in 1..{big_v} (the target vocabulary size)"
        )
    if c.sum() == 0:
        raise UnusableInputError("no counted tokens (empty corpus or an all-zero loss mask)")
    seen = np.flatnonzero(c)
    if seen.shape[0] <= draft_vocab_size:
        chosen = seen
    else:  # everything above the v-th largest count, then the tied ids in tie-break order
        cs = c[seen]
        threshold = np.partition(cs, seen.shape[0] - draft_vocab_size)[seen.shape[0] - draft_vocab_size]
        above = seen[cs > threshold]
        tied = seen[cs == threshold]  # ascending ids
        need = draft_vocab_size - above.shape[0]
        if tie_break != "id" and 0 < need < tied.shape[0]:
            tied = tc.tie_order(tie_break, tied, need)
        chosen = np.concatenate([above, tied[:need]])
    padded = draft_vocab_size - chosen.shape[0]
    if padded:
        used = np.zeros(big_v, dtype=bool)
        used[chosen] = True
        chosen = np.concatenate([chosen, np.flatnonzero(~used)[:padded]])
        if warn:
            warnings.warn(
                padding_note(int(seen.shape[0]), draft_vocab_size, padded),
                VocabPaddingWarning,
                stacklevel=3,
            )
    sel = np.sort(chosen)
    t2d = np.zeros(big_v, dtype=bool)
    t2d[sel] = True
    d2t = sel - np.arange(draft_vocab_size, dtype=np.int64)
    torch = _torch()
    return VocabMapping(torch.from_numpy(d2t), torch.from_numpy(t2d), c, int(padded), tie_break, tc.tokens)


def build_vocab_mapping(
    token_ids: Any | Iterable[Any],
    draft_vocab_size: int,
    target_vocab_size: int,
    loss_mask: Any | Iterable[Any] | None = None,
    tie_break: str = "id",
    *,
    progress: bool | None = None,
    block_tokens: int = BLOCK_TOKENS,
    total_tokens: int | None = None,
    warn: bool = True,
) -> VocabMapping:
    """Build ``d2t``/``t2d`` from token counts exactly the way the trainers do.

    Counts ids where ``loss_mask == 1`` (all ids without a mask) in one streaming pass (see
    :func:`count_token_ids` for the accepted input forms); orders by ``(-count, tie)`` with the tie
    broken per ``tie_break`` (:data:`TIE_BREAKS`: ``"id"`` speculators, ``"first_seen"`` EAGLE,
    ``"first_row"`` SpecForge); pads with the smallest unused ids when fewer than
    ``draft_vocab_size`` distinct ids were seen (with a :class:`VocabPaddingWarning` unless ``warn``
    is false, e.g. where a table shows ``padded``); sorts the
    selection ascending; encodes offsets ``d2t[i] = sel[i] - i``.
    """
    if tie_break not in TIE_BREAKS:
        raise BadArgumentsError(f"tie_break must be one of {', '.join(repr(k) for k in TIE_BREAKS)}")
    if not isinstance(target_vocab_size, (int, np.integer)) or target_vocab_size <= 0:
        raise BadArgumentsError(f"target_vocab_size must be a positive integer, got {target_vocab_size!r}")
    if not isinstance(draft_vocab_size, (int, np.integer)) or not 0 < draft_vocab_size <= target_vocab_size:
        raise BadArgumentsError(
            f"draft_vocab_size {draft_vocab_size} must be in 1..{target_vocab_size} "
            "(the target vocabulary size)"
        )
    tc = count_token_ids(
        token_ids,
        target_vocab_size,
        loss_mask,
        track=None if tie_break == "id" else tie_break,
        progress=progress,
        block_tokens=block_tokens,
        total_tokens=total_tokens,
    )
    return select_draft_vocab(tc, int(draft_vocab_size), tie_break, warn=warn)


# -- which ids a map selects, fingerprints and comparison ------------------------------------------

#: decoding ``d2t`` per its classification: absolute ids, offsets applied twice, or offsets
_DECODE = {"absolute": 0, "double_offset": 2}


def _usable_t2d(t2d: Any, draft_vocab_size: int | None) -> bool:
    if t2d is None:
        return False
    problems = check_t2d(t2d, None, draft_vocab_size)
    return not any("expected bool" not in p for p in problems)


def selected_ids(
    d2t: Any | None,
    t2d: Any | None,
    target_vocab_size: int | None = None,
    draft_vocab_size: int | None = None,
) -> tuple[np.ndarray, str]:
    """The ascending target ids a map selects and where they were read from.

    ``nonzero(t2d)`` when ``t2d`` is a valid mask of the draft size (the set the head was trained
    against); otherwise ``d2t`` decoded per its classification (absolute ids, offsets applied
    twice, or offsets). Raises ``UnusableInputError`` when neither tells.
    """
    v = draft_vocab_size if draft_vocab_size is not None else (None if d2t is None else int(_np(d2t).size))
    if _usable_t2d(t2d, v):
        return np.flatnonzero(_np(t2d).astype(bool)).astype(np.int64), "t2d"
    res = classify_mapping(d2t, t2d, target_vocab_size, draft_vocab_size)
    if res.kind == "full_vocab" and res.target_vocab_size is not None:
        return np.arange(res.target_vocab_size, dtype=np.int64), "full vocabulary"
    if d2t is None or res.kind in ("missing", "invalid_d2t", "inconsistent_sizes", "identity_default"):
        raise UnusableInputError(f"cannot tell which target ids this map selects: {res.meaning}")
    d = _np(d2t).astype(np.int64).reshape(-1)
    k = _DECODE.get(res.kind, 1)
    sel = d + k * np.arange(d.shape[0], dtype=np.int64)
    how = {0: "d2t decoded as absolute ids", 2: "d2t decoded as double offsets"}.get(
        k, "d2t decoded as offsets"
    )
    return np.sort(sel), how


def mapping_fingerprint(target_vocab_size: int, selected: Any) -> str:
    """``sha256`` over ``V``, ``v`` and the ascending selected ids, for provenance records.

    Recipe (reproducible anywhere): ``sha256(f"eagle3-vocab-map/v1 V={V} v={v}\\n".encode() +
    sorted_ids.astype("<i8").tobytes())``, written ``"sha256:<hex>"``.
    """
    sel = np.sort(_np(selected).astype("<i8").reshape(-1))
    h = hashlib.sha256(f"eagle3-vocab-map/v1 V={int(target_vocab_size)} v={sel.shape[0]}\n".encode())
    h.update(sel.tobytes())
    return "sha256:" + h.hexdigest()


@dataclass
class MappingComparison:
    """Two vocabulary maps side by side: sizes, overlap of the selected sets, fingerprints."""

    labels: tuple[str, str]
    target_vocab_sizes: tuple[int | None, int | None]
    draft_vocab_sizes: tuple[int, int]
    sources: tuple[str, str]  # where each selection was read from
    kinds: tuple[str, str]  # classify_mapping kind of each
    common: int
    only_a: np.ndarray
    only_b: np.ndarray
    fingerprints: tuple[str, str]
    d2t_equal: bool | None  # the stored d2t tensors are identical (None: one has none)

    @property
    def jaccard(self) -> float:
        union = self.common + self.only_a.shape[0] + self.only_b.shape[0]
        return self.common / union if union else 1.0

    @property
    def identical(self) -> bool:
        return self.fingerprints[0] == self.fingerprints[1]

    def to_dict(self, limit: int = 50) -> dict[str, Any]:
        return {
            "a": {
                "label": self.labels[0],
                "target_vocab_size": self.target_vocab_sizes[0],
                "draft_vocab_size": self.draft_vocab_sizes[0],
                "selection_from": self.sources[0],
                "kind": self.kinds[0],
                "fingerprint": self.fingerprints[0],
            },
            "b": {
                "label": self.labels[1],
                "target_vocab_size": self.target_vocab_sizes[1],
                "draft_vocab_size": self.draft_vocab_sizes[1],
                "selection_from": self.sources[1],
                "kind": self.kinds[1],
                "fingerprint": self.fingerprints[1],
            },
            "identical": self.identical,
            "d2t_equal": self.d2t_equal,
            "common": self.common,
            "jaccard": round(self.jaccard, 6),
            "only_in_a": {"count": int(self.only_a.shape[0]), "ids": self.only_a[:limit].tolist()},
            "only_in_b": {"count": int(self.only_b.shape[0]), "ids": self.only_b[:limit].tolist()},
        }


def _map_parts(m: Any) -> tuple[Any, Any, int | None, int | None, str]:
    if isinstance(m, tuple):
        d2t, t2d = m
        big_v = _t2d_size(t2d)
        return d2t, t2d, big_v, None if d2t is None else int(_np(d2t).size), "map"
    big_v = getattr(m, "target_vocab_size", None)
    v = getattr(m, "draft_vocab_size", None)
    return m.d2t, m.t2d, big_v, v, str(getattr(m, "label", type(m).__name__))


def compare_mappings(a: Any, b: Any, labels: tuple[str, str] | None = None) -> MappingComparison:
    """Compare two maps: anything with ``d2t``/``t2d`` attributes (a :class:`VocabMapping`, a
    loaded checkpoint map) or a ``(d2t, t2d)`` tuple."""
    parts = [_map_parts(m) for m in (a, b)]
    sels, sources, kinds, sizes = [], [], [], []
    for d2t, t2d, big_v, v, _label in parts:
        sel, src = selected_ids(d2t, t2d, big_v, v)
        sels.append(sel)
        sources.append(src)
        kinds.append(classify_mapping(d2t, t2d, big_v, v).kind)
        sizes.append(big_v if big_v is not None else _t2d_size(t2d))
    common = np.intersect1d(sels[0], sels[1], assume_unique=True)
    d2t_equal = None
    if parts[0][0] is not None and parts[1][0] is not None:
        da, db = _np(parts[0][0]).astype(np.int64), _np(parts[1][0]).astype(np.int64)
        d2t_equal = bool(da.shape == db.shape and np.array_equal(da, db))
    fps = tuple(
        mapping_fingerprint(sz if sz is not None else 0, s) for sz, s in zip(sizes, sels, strict=True)
    )
    return MappingComparison(
        labels=labels or (parts[0][4], parts[1][4]),
        target_vocab_sizes=(sizes[0], sizes[1]),
        draft_vocab_sizes=(int(sels[0].shape[0]), int(sels[1].shape[0])),
        sources=(sources[0], sources[1]),
        kinds=(kinds[0], kinds[1]),
        common=int(common.shape[0]),
        only_a=np.setdiff1d(sels[0], sels[1], assume_unique=True),
        only_b=np.setdiff1d(sels[1], sels[0], assume_unique=True),
        fingerprints=(fps[0], fps[1]),
        d2t_equal=d2t_equal,
    )


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
        keep = None if d2t is None else _torch().from_numpy(_np(d2t).astype(np.int64))
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
    t2d_ok = _usable_t2d(t2d, v) and (v is None or int(_np(t2d).astype(bool).sum()) == v)
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


# -- lm_head rows: a frozen head pins the map down -------------------------------------------------


@dataclass
class LmHeadRowCheck:
    """Draft ``lm_head[i]`` against target ``lm_head[target(i)]`` under each candidate map.

    ``method == "exact"``: some candidate matches every row exactly (speculators >= 0.5 freezes
    the draft head as a copy of the target rows), which proves that candidate is the map the
    head was built with. Otherwise ``"cosine (heuristic)"``: mean row cosine per candidate
    against a baseline of mismatched rows; a clear winner is evidence, not proof.
    """

    method: str
    hypotheses: dict[str, dict[str, Any]]
    baseline_cosine: float | None
    best: str | None
    d2t_confirmed: (
        bool | None
    )  # what engines use (d2t as offsets; identity without d2t) is the best candidate

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "best": self.best,
            "d2t_confirmed": self.d2t_confirmed,
            "baseline_cosine": None if self.baseline_cosine is None else round(self.baseline_cosine, 6),
            "hypotheses": self.hypotheses,
        }


def check_lm_head_rows(
    draft_lm_head: Any,
    target_lm_head: Any,
    d2t: Any | None,
    t2d: Any | None = None,
) -> LmHeadRowCheck:
    """Compare draft head rows with the target head rows each candidate map points at."""
    torch = _torch()
    dh = (
        draft_lm_head
        if isinstance(draft_lm_head, torch.Tensor)
        else torch.as_tensor(np.asarray(draft_lm_head))
    )
    th = (
        target_lm_head
        if isinstance(target_lm_head, torch.Tensor)
        else torch.as_tensor(np.asarray(target_lm_head))
    )
    if dh.ndim != 2 or th.ndim != 2 or dh.shape[1] != th.shape[1]:
        raise UnusableInputError(
            f"lm_head shapes {list(dh.shape)} and {list(th.shape)} do not share a hidden size"
        )
    v, big_v = int(dh.shape[0]), int(th.shape[0])
    ar = np.arange(v, dtype=np.int64)
    cands: dict[str, np.ndarray] = {}
    if d2t is not None and _np(d2t).size == v:
        d = _np(d2t).astype(np.int64).reshape(-1)
        cands.update({"offsets": d + ar, "absolute": d, "double_offset": d + 2 * ar})
    if t2d is not None and _usable_t2d(t2d, v) and int(_np(t2d).astype(bool).sum()) == v:
        cands["t2d"] = np.flatnonzero(_np(t2d).astype(bool))
    cands["identity"] = ar.copy()
    dn = torch.nn.functional.normalize(dh.float(), dim=1)
    hyps: dict[str, dict[str, Any]] = {}
    for name, idx in cands.items():
        if idx.min() < 0 or idx.max() >= big_v:
            hyps[name] = {"in_range": False}
            continue
        rows = th[torch.from_numpy(idx)]
        same = (rows.to(dh.dtype) == dh).all(dim=1).numpy()
        cos = (dn * torch.nn.functional.normalize(rows.float(), dim=1)).sum(dim=1).numpy()
        bad = np.flatnonzero(~same)
        hyps[name] = {
            "in_range": True,
            "exact_fraction": round(float(same.mean()), 6),
            "first_mismatch": int(bad[0]) if bad.size else None,
            "mean_cosine": round(float(cos.mean()), 6),
        }
    base_idx = np.roll(next((c for c in cands.values() if c.min() >= 0 and c.max() < big_v), ar), 1)
    base_rows = th[torch.from_numpy(base_idx)]
    baseline = float((dn * torch.nn.functional.normalize(base_rows.float(), dim=1)).sum(dim=1).mean())
    valid = {k: h for k, h in hyps.items() if h.get("in_range")}
    exact = [k for k, h in valid.items() if h["exact_fraction"] == 1.0]
    if exact:
        best: str | None = "offsets" if "offsets" in exact else exact[0]
        method = "exact"
    else:
        best = max(valid, key=lambda k: valid[k]["mean_cosine"]) if valid else None
        method = "cosine (heuristic)"
        if best is not None and valid[best]["mean_cosine"] <= baseline + 0.1:
            best = None  # no candidate stands out from mismatched rows
    confirmed = None
    engine = (
        "offsets" if "offsets" in hyps else "identity"
    )  # without d2t, engines propose target id = draft id
    if best is not None:
        if engine not in valid:
            confirmed = False  # the engines' reading points outside the target vocabulary
        else:
            confirmed = (
                valid[engine].get("exact_fraction") == 1.0
                if method == "exact"
                else valid[engine]["mean_cosine"] >= valid[best]["mean_cosine"] - 1e-6
            )
    return LmHeadRowCheck(method, hyps, baseline, best, confirmed)
