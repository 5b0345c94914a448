"""The audit's mergeable scan (:class:`AuditScan`): plain counts and example lists that add up over shards,
so a merged scan is the scan a single run makes (:func:`merge_scans`, :func:`check_shards`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.io.dumps.read import MAX_LIST, Item, Sample

SCAN_SCHEMA = "eagle3-forensics/audit-data-partial/1"
POS_BITS = 32  # first_seen key: item index << 32 | position


# ---------------------------------------------------------------------------------------------
# mergeable pieces
# ---------------------------------------------------------------------------------------------


@dataclass
class Examples:
    """A count plus the first :data:`MAX_LIST` examples by sample index: mergeable exactly."""

    count: int = 0
    items: list[list[Any]] = field(default_factory=list)  # [index, source, detail]

    def add(self, item: Item, detail: Any = None) -> None:
        self.count += 1
        if len(self.items) < MAX_LIST:
            self.items.append([item.index, item.rel, detail])

    def merged(self, other: Examples) -> Examples:
        items = sorted([*self.items, *other.items], key=lambda x: x[0])[:MAX_LIST]
        return Examples(self.count + other.count, items)

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "items": self.items}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Examples:
        """Read a partial's tally; a count that its examples cannot belong to (negative, fewer than the
        examples, or positive with none) is refused (ValueError), as the findings quote the first."""
        count = int(d["count"])
        items = [[int(i), str(src), detail] for i, src, detail in d["items"]]
        if count < 0 or len(items) > min(count, MAX_LIST) or (count and not items):
            raise ValueError(f"a tally of {count} with {len(items)} examples")
        return cls(count, items)

    def evidence(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "examples": [
                {"index": i, "file": s, **({"detail": d} if d is not None else {})} for i, s, d in self.items
            ],
        }


def _add_count(table: dict[int, int], key: int, n: int = 1) -> None:
    table[key] = table.get(key, 0) + n


def _min_into(table: dict[int, int], keys: np.ndarray, values: np.ndarray | int) -> None:
    vals = np.broadcast_to(np.asarray(values, dtype=np.int64), keys.shape)
    for k, v in zip(keys.tolist(), vals.tolist(), strict=True):
        old = table.get(k)
        if old is None or v < old:
            table[k] = v


def _merge_counts(a: dict[Any, int], b: dict[Any, int]) -> dict[Any, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return dict(sorted(out.items(), key=lambda kv: str(kv[0])))


def _merge_min(a: dict[int, int], b: dict[int, int]) -> dict[int, int]:
    out = dict(a)
    for k, v in b.items():
        if k not in out or v < out[k]:
            out[k] = v
    return dict(sorted(out.items()))


def _int_keys(d: dict[str, Any]) -> dict[int, int]:
    return {int(k): int(v) for k, v in d.items()}


def _occurrences(ids: np.ndarray, marker: Sequence[int]) -> np.ndarray:
    """Start positions of ``marker`` as a contiguous run in ``ids``."""
    m = len(marker)
    if m == 0 or ids.shape[0] < m:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(ids[: ids.shape[0] - m + 1] == marker[0])
    for k in range(1, m):
        starts = starts[ids[starts + k] == marker[k]]
    return starts


# ---------------------------------------------------------------------------------------------
# the scan: mergeable counts of every sample read
# ---------------------------------------------------------------------------------------------


@dataclass
class AuditScan:
    """Everything an audit counts over its samples (one shard or all), plus the shared facts."""

    settings: dict[str, Any]
    shards: list[list[int]]  # [[I, N], ...] this scan covers
    files: int = 0
    read: int = 0
    bytes: int = 0
    tokens: int = 0
    masked: int = 0
    no_mask: int = 0
    pad_trimmed: int = 0
    padded_samples: int = 0
    max_len: int = 0
    layouts: dict[str, int] = field(default_factory=dict)
    layout_first: dict[str, list[Any]] = field(default_factory=dict)  # layout -> [index, source]
    dtypes: dict[str, int] = field(default_factory=dict)
    hidden_sizes: dict[int, int] = field(default_factory=dict)
    aux_widths: dict[int, int] = field(default_factory=dict)
    unreadable: Examples = field(default_factory=Examples)
    mask_empty: Examples = field(default_factory=Examples)
    mask_whole: Examples = field(default_factory=Examples)
    mask_first: Examples = field(default_factory=Examples)
    mask_off_turns: Examples = field(default_factory=Examples)  # masks that miss every assistant turn
    nonfinite: Examples = field(default_factory=Examples)
    aux_odd: Examples = field(default_factory=Examples)
    too_long: Examples = field(default_factory=Examples)
    out_of_vocab: Examples = field(default_factory=Examples)
    counts: dict[int, int] = field(default_factory=dict)
    first_lex: dict[int, int] = field(default_factory=dict)
    first_num: dict[int, int] = field(default_factory=dict)
    first_pos: dict[int, int] = field(default_factory=dict)
    hashes: list[list[Any]] = field(default_factory=list)  # [digest, index, source]
    # audit-data --target (checks.data.target_scan): per-sample records, mergeable by concatenation
    lengths: dict[int, int] = field(default_factory=dict)  # sample length -> samples
    # [index, source, agree, total, expected, variance, expected_max, variance_max] (expected: the
    # agreement temperature-1 sampling from the target gives; _max: at the highest judged temperature;
    # -1, -1: no probabilities)
    agreement: list[list[Any]] = field(default_factory=list)
    renderings: list[list[Any]] = field(
        default_factory=list
    )  # [index, source, outcome, match, modes, masked, prompt_modes (None: no prompt side)]
    teacher: dict[str, Any] | None = None  # how the agreement's teacher was made (first shard's)

    _EXAMPLES = (
        "unreadable",
        "mask_empty",
        "mask_whole",
        "mask_first",
        "mask_off_turns",
        "nonfinite",
        "aux_odd",
        "too_long",
        "out_of_vocab",
    )
    _SUMS = ("files", "read", "bytes", "tokens", "masked", "no_mask", "pad_trimmed", "padded_samples")

    def add(self, sample: Sample) -> None:
        it = sample.item
        self.read += 1
        self.bytes += sample.nbytes
        n = sample.length
        self.tokens += n
        self.max_len = max(self.max_len, n)
        _add_count(self.lengths, n)
        _add_count(self.layouts, sample.layout)  # type: ignore[arg-type]
        if sample.layout not in self.layout_first:
            self.layout_first[sample.layout] = [it.index, it.rel]
        if sample.dtype:
            _add_count(self.dtypes, sample.dtype)  # type: ignore[arg-type]
        if sample.hidden_size:
            _add_count(self.hidden_sizes, sample.hidden_size)
        if sample.aux_width:
            _add_count(self.aux_widths, sample.aux_width)
            if sample.hidden_size and sample.aux_width % sample.hidden_size:
                self.aux_odd.add(it, f"aux width {sample.aux_width}, hidden size {sample.hidden_size}")
        if sample.trimmed:
            self.pad_trimmed += sample.trimmed
            self.padded_samples += 1
        ids = sample.input_ids.numpy()
        mask = sample.loss_mask.numpy()
        no_mask = any("no loss mask" in note for note in sample.notes)
        if no_mask:
            self.no_mask += 1
        else:
            m = int(mask.sum())
            self.masked += m
            if m == 0:
                self.mask_empty.add(it, f"{n} tokens")
            elif m == n and n > 1:
                self.mask_whole.add(it, f"{n} tokens")
            elif mask[0]:
                self.mask_first.add(it, f"{m} of {n} tokens")
            marker = (self.settings.get("assistant_marker") or {}).get("ids")
            if marker and m:
                starts = _occurrences(ids, marker)
                if starts.size:
                    bounds = [*(starts + len(marker)).tolist(), n]
                    ends = [*starts[1:].tolist(), n]
                    if not any(mask[a:b].any() for a, b in zip(bounds[:-1], ends, strict=True)):
                        self.mask_off_turns.add(it, f"{starts.size} assistant turns, none in the mask")
        bad = sample.nonfinite()
        if bad:
            self.nonfinite.add(it, f"{bad} non-finite values")
        limit = self.settings.get("max_positions")
        if isinstance(limit, int) and n > limit:
            self.too_long.add(it, f"{n} tokens > {limit}")
        vocab = self.settings.get("vocab_size")
        if ids.size and (int(ids.min()) < 0 or (isinstance(vocab, int) and int(ids.max()) >= vocab)):
            self.out_of_vocab.add(it, f"ids {int(ids.min())}..{int(ids.max())}")
        pos = np.arange(n) if no_mask else np.flatnonzero(mask)
        counted = ids[pos]
        keep = counted >= 0
        counted, pos = counted[keep], pos[keep]
        if counted.size:
            uniq, first_at, cnt = np.unique(counted, return_index=True, return_counts=True)
            for u, c in zip(uniq.tolist(), cnt.tolist(), strict=True):
                _add_count(self.counts, u, c)
            _min_into(self.first_lex, uniq, it.index)
            _min_into(self.first_num, uniq, it.number if it.number is not None else it.index)
            _min_into(self.first_pos, uniq, (it.index << POS_BITS) + pos[first_at])
        h = hashlib.blake2b(ids.astype("<i8").tobytes(), digest_size=8)
        h.update(np.packbits(mask.astype(bool)).tobytes())
        self.hashes.append([h.hexdigest(), it.index, it.rel])

    # -- merging and JSON ---------------------------------------------------------------------------
    def merged(self, other: AuditScan) -> AuditScan:
        if other.settings != self.settings:
            diff = sorted(
                k
                for k in set(self.settings) | set(other.settings)
                if self.settings.get(k) != other.settings.get(k)
            )
            raise BadArgumentsError(
                f"partial results come from different audits (settings differ: {', '.join(diff)})"
            )
        out = AuditScan(self.settings, sorted([*self.shards, *other.shards]))
        for name in self._SUMS:
            setattr(out, name, getattr(self, name) + getattr(other, name))
        out.max_len = max(self.max_len, other.max_len)
        for name in ("layouts", "dtypes", "hidden_sizes", "aux_widths", "counts"):
            setattr(out, name, _merge_counts(getattr(self, name), getattr(other, name)))
        out.lengths = dict(sorted(_merge_counts(self.lengths, other.lengths).items()))
        for name in ("agreement", "renderings"):
            setattr(out, name, sorted([*getattr(self, name), *getattr(other, name)], key=lambda x: x[0]))
        # the lowest shard's (it decided on the first sample of the single run), whatever the merge order
        first, second = (self, other) if min(self.shards) <= min(other.shards) else (other, self)
        out.teacher = first.teacher or second.teacher
        out.layout_first = {
            k: min(v for v in (self.layout_first.get(k), other.layout_first.get(k)) if v is not None)
            for k in sorted(set(self.layout_first) | set(other.layout_first))
        }
        for name in self._EXAMPLES:
            setattr(out, name, getattr(self, name).merged(getattr(other, name)))
        for name in ("first_lex", "first_num", "first_pos"):
            setattr(out, name, _merge_min(getattr(self, name), getattr(other, name)))
        out.hashes = sorted([*self.hashes, *other.hashes], key=lambda x: x[1])
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"settings": self.settings, "shards": self.shards, "max_len": self.max_len}
        for name in self._SUMS:
            out[name] = getattr(self, name)
        for name in ("layouts", "dtypes", "layout_first"):
            out[name] = getattr(self, name)
        for name in ("hidden_sizes", "aux_widths", "counts", "first_lex", "first_num", "first_pos"):
            out[name] = {str(k): v for k, v in sorted(getattr(self, name).items())}
        for name in self._EXAMPLES:
            out[name] = getattr(self, name).to_dict()
        out["hashes"] = self.hashes
        out["lengths"] = {str(k): v for k, v in sorted(self.lengths.items())}
        out["agreement"] = self.agreement
        out["renderings"] = self.renderings
        out["teacher"] = self.teacher
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AuditScan:
        try:
            s = cls(dict(d["settings"]), [[int(a), int(b)] for a, b in d["shards"]])
            for name in cls._SUMS:
                setattr(s, name, int(d[name]))
                if getattr(s, name) < 0:
                    raise ValueError(f"a negative {name}")
            s.max_len = int(d["max_len"])
            s.layouts = {str(k): int(v) for k, v in d["layouts"].items()}
            s.dtypes = {str(k): int(v) for k, v in d["dtypes"].items()}
            s.layout_first = {str(k): [int(i), str(src)] for k, (i, src) in d["layout_first"].items()}
            for name in ("hidden_sizes", "aux_widths", "counts", "first_lex", "first_num", "first_pos"):
                setattr(s, name, _int_keys(d[name]))
            for name in cls._EXAMPLES:
                setattr(s, name, Examples.from_dict(d[name]))
            s.hashes = [[str(h), int(i), str(src)] for h, i, src in d["hashes"]]
            # absent in partials written before audit-data --target measured them
            s.lengths = _int_keys(d.get("lengths") or {})
            if any(k < 0 or v < 0 for k, v in s.lengths.items()):
                raise ValueError("a negative sample length or count")
            s.agreement = [_agreement_row(r) for r in d.get("agreement") or []]
            s.renderings = [_rendering_row(r) for r in d.get("renderings") or []]
            t = d.get("teacher")
            s.teacher = dict(t) if isinstance(t, dict) else None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UnusableInputError(
                f"not an audit-data partial result ({type(exc).__name__}: {exc})"
            ) from None
        return s


def _agreement_row(r: Sequence[Any]) -> list[Any]:
    """One sample's agreement record; fields a partial written before them lacks are -1 (unknown)."""
    if len(r) not in (4, 6, 8):
        raise ValueError(f"an agreement record has {len(r)} fields, not 4, 6 or 8")
    rest = [float(x) for x in r[4:]] + [-1.0] * (8 - len(r))
    return [int(r[0]), str(r[1]), int(r[2]), int(r[3]), *rest]


def _rendering_row(r: Sequence[Any]) -> list[Any]:
    """One sample's rendering record; the prompt-side modes are None in partials written before them."""
    if len(r) not in (6, 7):
        raise ValueError(f"a rendering record has {len(r)} fields, not 6 or 7")
    i, src, o, m, modes, k = r[:6]
    pm = r[6] if len(r) == 7 else None
    return [
        int(i),
        str(src),
        str(o),
        bool(m),
        [str(x) for x in modes],
        int(k),
        None if pm is None else [str(x) for x in pm],
    ]


def merge_scans(scans: Sequence[AuditScan]) -> AuditScan:
    """The scan of all shards; every shard ``I/N`` must be present exactly once."""
    if not scans:
        raise BadArgumentsError("nothing to merge")
    out = scans[0]
    for s in scans[1:]:
        out = out.merged(s)
    check_shards(out.shards)
    return out


def check_shards(shards: Iterable[Sequence[int]]) -> None:
    got = sorted(tuple(int(x) for x in s) for s in shards)
    ns = {n for _, n in got}
    if len(ns) != 1:
        raise BadArgumentsError(f"partial results from different shard counts: {sorted(ns)}")
    n = ns.pop()
    want = [(i, n) for i in range(n)]
    if got != want:
        missing = sorted(set(want) - set(got))
        dup = sorted({s for s in got if got.count(s) > 1})
        what = []
        if missing:
            what.append("missing " + ", ".join(f"{i}/{n}" for i, _ in missing))
        if dup:
            what.append("duplicated " + ", ".join(f"{i}/{n}" for i, _ in dup))
        raise UnusableInputError(f"partial results do not cover shards 0..{n - 1} once: {'; '.join(what)}")
