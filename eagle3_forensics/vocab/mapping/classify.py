"""Classifying a ``d2t``/``t2d`` pair: :func:`classify_mapping` and :func:`check_t2d`, the verdict and its evidence.

Every trainer (EAGLE, SpecForge, speculators) selects the draft vocabulary as target ids
sorted ascending, so with ``sel = nonzero(t2d)``::

    d2t[i] = sel[i] - i          (offsets; every engine computes target = i + d2t[i])
    nonzero(t2d) == d2t + arange(v)

The classification decides from that full identity and the alternatives it rules in or
out, never from how a few entries look: ``d2t[:20] == 0`` is exactly right whenever the
first selected ids are 0..19. It computes on numpy; torch is imported only to read a tensor
that is handed in (``diagnose`` on safetensors stays torch-free).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    pass


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


def import_torch() -> ModuleType:
    """torch, imported on first use: classification is numpy-only, so ``diagnose`` never loads torch;
    the functions that return tensors (conversions, built maps, the lm_head check) import it."""
    import torch  # heavy: torch (only the tensor-returning functions ask)

    return torch


def is_tensor(x: Any) -> bool:
    """``x`` is a torch tensor (without importing torch: if it is not loaded, ``x`` cannot be one)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def as_numpy(x: Any) -> np.ndarray:
    """``x`` as a numpy array (a tensor is moved to the CPU; float types numpy lacks become float32)."""
    if is_tensor(x):
        torch, x = import_torch(), x.detach().cpu()
        if x.dtype.is_floating_point and x.dtype not in (torch.float16, torch.float32, torch.float64):
            x = x.float()  # bfloat16 / float8 maps: NumPy has no such dtype; the checks call them invalid
        return np.asarray(x.numpy())
    return np.asarray(x)


def t2d_size(t2d: Any | None) -> int | None:
    """The target vocabulary size a ``t2d`` states: its length when it is 1-D (else it states none;
    ``check_t2d`` reports its shape)."""
    if t2d is None:
        return None
    arr = as_numpy(t2d)
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
    arr = as_numpy(t2d)
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
    big_v = target_vocab_size if target_vocab_size is not None else t2d_size(t2d)
    v = (
        draft_vocab_size
        if draft_vocab_size is not None
        else (None if d2t is None else int(as_numpy(d2t).size))
    )
    res = VocabClassification("unverified_offsets", big_v, v)
    if t2d is not None:
        res.t2d_problems = check_t2d(t2d, big_v, v)

    if d2t is None:
        res.kind = "full_vocab" if (v is not None and big_v is not None and v >= big_v) else "missing"
        return res

    arr = as_numpy(d2t)
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
    sel = np.flatnonzero(as_numpy(t2d).astype(bool)).astype(np.int64) if t2d_usable else None
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


def usable_t2d(t2d: Any, draft_vocab_size: int | None) -> bool:
    """``t2d`` is a boolean mask the siblings may select from (``check_t2d`` finds nothing but its dtype)."""
    if t2d is None:
        return False
    problems = check_t2d(t2d, None, draft_vocab_size)
    return not any("expected bool" not in p for p in problems)
