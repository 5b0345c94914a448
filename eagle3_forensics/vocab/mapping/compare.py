"""Provenance of a map: :func:`selected_ids` (the target ids it selects, decoded per its
classification), :func:`mapping_fingerprint` and :func:`compare_mappings`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    pass
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.vocab.mapping.classify import as_numpy, classify_mapping, t2d_size, usable_t2d

# -- which ids a map selects, fingerprints and comparison ------------------------------------------

#: decoding ``d2t`` per its classification: absolute ids, offsets applied twice, or offsets
_DECODE = {"absolute": 0, "double_offset": 2}


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
    v = (
        draft_vocab_size
        if draft_vocab_size is not None
        else (None if d2t is None else int(as_numpy(d2t).size))
    )
    if usable_t2d(t2d, v):
        return np.flatnonzero(as_numpy(t2d).astype(bool)).astype(np.int64), "t2d"
    res = classify_mapping(d2t, t2d, target_vocab_size, draft_vocab_size)
    if res.kind == "full_vocab" and res.target_vocab_size is not None:
        return np.arange(res.target_vocab_size, dtype=np.int64), "full vocabulary"
    if d2t is None or res.kind in ("missing", "invalid_d2t", "inconsistent_sizes", "identity_default"):
        raise UnusableInputError(f"cannot tell which target ids this map selects: {res.meaning}")
    d = as_numpy(d2t).astype(np.int64).reshape(-1)
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
    sel = np.sort(as_numpy(selected).astype("<i8").reshape(-1))
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
    # draft ids whose target id, as every engine reads the stored d2t (i + d2t[i]), differs between
    # the two maps (None: one has no d2t, or the draft sizes differ)
    read_differ: int | None = None

    @property
    def same_map(self) -> bool:
        """The same selection and, where both store a d2t, the same target id for every draft id as
        the engines read it: a map with the right t2d but a wrong d2t is not the same map."""
        return self.identical and not self.read_differ

    def headline(self, digits: int = 3) -> str:
        """One true sentence about the two maps (the Jaccard index to ``digits`` decimals, as the
        tables show it): the same map; the same selection but another d2t; or how much they overlap."""
        a, b = self.labels
        if self.same_map and self.read_differ is None:
            return (
                "the same selection (the d2t tensors are not compared: one map has none, or the sizes differ)"
            )
        if self.same_map:
            return "the same selection, and the engines read the same target id for every draft id"
        if self.identical:
            v = self.draft_vocab_sizes[0]
            return (
                f"the same selection (from {self.sources[0]} / {self.sources[1]}), but the stored d2t differ: "
                f"engines read another target id for {self.read_differ} of {v} draft ids ({a}: {self.kinds[0]}, "
                f"{b}: {self.kinds[1]})"
            )
        return (
            f"different selections: Jaccard {self.jaccard:.{digits}f}, {self.common} ids in common, "
            f"{self.only_a.shape[0]} only in {a}, {self.only_b.shape[0]} only in {b}"
        )

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
            "read_differ": self.read_differ,
            "same_map": self.same_map,
            "common": self.common,
            "jaccard": round(self.jaccard, 6),
            "only_in_a": {"count": int(self.only_a.shape[0]), "ids": self.only_a[:limit].tolist()},
            "only_in_b": {"count": int(self.only_b.shape[0]), "ids": self.only_b[:limit].tolist()},
        }


def _map_parts(m: Any) -> tuple[Any, Any, int | None, int | None, str]:
    if isinstance(m, tuple):
        d2t, t2d = m
        big_v = t2d_size(t2d)
        return d2t, t2d, big_v, None if d2t is None else int(as_numpy(d2t).size), "map"
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
        sizes.append(big_v if big_v is not None else t2d_size(t2d))
    common = np.intersect1d(sels[0], sels[1], assume_unique=True)
    d2t_equal = None
    read_differ = None
    if parts[0][0] is not None and parts[1][0] is not None:
        da, db = as_numpy(parts[0][0]).astype(np.int64), as_numpy(parts[1][0]).astype(np.int64)
        d2t_equal = bool(da.shape == db.shape and np.array_equal(da, db))
        if da.shape == db.shape and da.ndim == 1:
            # the engines' reading is i + d2t[i] for both maps, so the difference of the stored tensors
            # is the difference of the target ids they produce
            read_differ = int(np.count_nonzero(da != db))
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
        read_differ=read_differ,
    )
