"""``audit-data``: checks on a data-prep output (hidden-state dumps and the vocabulary map) before training.

The audit runs in two halves so that it can be split over machines:

* :func:`scan_data` reads the samples (one at a time) and returns an :class:`AuditScan`: plain,
  mergeable counts and example lists, plus the facts every shard computes identically (the map
  files' verdicts and selections, the drafter's and target's sizes). ``shard=(I, N)`` reads every
  N-th file of the sorted list.
* :func:`merge_scans` adds scans of all shards; :func:`finish_audit` turns a (merged) scan into
  findings. A merged scan is the scan a single run makes, so the findings are the same to the last
  digit.

Codes (``findings.CATALOGUE``, ``docs/findings.md``): ``DATA_UNREADABLE`` (exit 2),
``DATA_NOT_EAGLE3``, ``DATA_LAYOUT_BROKEN``, ``DATA_LOSS_MASK_EMPTY``, ``DATA_LOSS_MASK_SUSPICIOUS``,
``DATA_HIDDEN_NONFINITE``, ``DATA_AUX_WIDTH_MISMATCH``, ``DATA_SEQ_TOO_LONG``,
``DATA_TARGET_MISMATCH``, ``DATA_VOCAB_MAP_NOT_FROM_DATA``, ``DATA_COVERAGE_LOW``,
``DATA_DUPLICATE_SAMPLES``; the map files also get the ``D2T_*``/``T2D_*`` identity verdicts of
:func:`eagle3_forensics.vocab.mapping.classify_mapping`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eagle3_forensics.checks.vocab_map import _fix_for
from eagle3_forensics.errors import BadArgumentsError, ExitCode, UnusableInputError
from eagle3_forensics.findings import Finding, Severity, count_by_severity, sort_findings
from eagle3_forensics.io.checkpoint import safe_torch_load
from eagle3_forensics.io.drafter import read_drafter
from eagle3_forensics.io.dumps.bounded import cap_from_configs
from eagle3_forensics.io.dumps.layouts import LAYOUTS
from eagle3_forensics.io.dumps.read import MAX_LIST, DumpSet, Item, Sample, open_dumps
from eagle3_forensics.io.shard import parse_pair
from eagle3_forensics.io.target import open_target
from eagle3_forensics.vocab.inputs import (
    _token_text,
    load_mapping,
    load_tokenizer,
    read_chat_template,
    read_tokenizer_config,
    render_chat,
)
from eagle3_forensics.vocab.mapping import TokenCounts, classify_mapping, select_draft_vocab

DATA_CODES: tuple[str, ...] = (
    "DATA_UNREADABLE",
    "DATA_NOT_EAGLE3",
    "DATA_LAYOUT_BROKEN",
    "DATA_LOSS_MASK_EMPTY",
    "DATA_LOSS_MASK_SUSPICIOUS",
    "DATA_HIDDEN_NONFINITE",
    "DATA_AUX_WIDTH_MISMATCH",
    "DATA_SEQ_TOO_LONG",
    "DATA_TARGET_MISMATCH",
    "DATA_VOCAB_MAP_NOT_FROM_DATA",
    "DATA_COVERAGE_LOW",
    "DATA_DUPLICATE_SAMPLES",
)
SCAN_SCHEMA = "eagle3-forensics/audit-data-partial/1"
POS_BITS = 32  # first_seen key: item index << 32 | position
COVERAGE_WARN = 0.90  # below: a drafter can accept at most this share of the trained tokens
COVERAGE_ERROR = 0.50
COVERAGE_GAP = 0.02  # a map leaving this much coverage on the table that a map from the data would get
MASKED_SHARE_SUSPICIOUS = 0.98  # nearly every token trained: prompts are in the loss
TIE_BREAKS_AUDITED: tuple[tuple[str, str, str], ...] = (
    # label, vocab.mapping tie_break, which first-occurrence table it needs
    ("speculators (id)", "id", ""),
    ("SpecForge dataset order (first_row by file number)", "first_row", "first_num"),
    ("SpecForge dump order (first_row by sorted path)", "first_row", "first_lex"),
    ("EAGLE (first_seen)", "first_seen", "first_pos"),
)


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
        return cls(int(d["count"]), [list(x) for x in d["items"]])

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


# ---------------------------------------------------------------------------------------------
# what every shard computes identically: maps, drafter, target
# ---------------------------------------------------------------------------------------------


def _map_findings(m: Any) -> list[Finding]:
    """The ``D2T_*``/``T2D_*`` identity verdicts on one map file (every engine reads offsets)."""
    res = m.classify()
    ev = {"map": str(m.path), **res.evidence()}
    out: list[Finding] = []
    if res.t2d_problems and m.t2d is not None:
        cosmetic = all("expected bool" in p for p in res.t2d_problems)
        out.append(
            Finding(
                "T2D_INVALID",
                Severity.WARNING if cosmetic else Severity.ERROR,
                f"{m.label}: t2d is not a valid draft-vocabulary mask: " + "; ".join(res.t2d_problems) + ".",
                evidence={**ev, "problems": res.t2d_problems},
                fix="Rebuild t2d from a verified d2t (t2d[d2t + arange(v)] = True) or from the data "
                "(eagle3-forensics vocab build).",
            )
        )
    if res.consistent:
        return out
    code = {
        "absolute": "D2T_ABSOLUTE",
        "double_offset": "D2T_DOUBLE_OFFSET",
        "missing": "D2T_MISSING",
        "identity_default": "D2T_MISSING",
        "permuted": "D2T_T2D_MISMATCH",
        "partial_corruption": "D2T_T2D_MISMATCH",
    }.get(res.kind, "D2T_INVALID")
    if code == "D2T_MISSING" and m.d2t is None and m.t2d is not None:
        lead = "no d2t beside t2d"
    else:
        lead = f"d2t {res.meaning}"
    if code == "D2T_T2D_MISMATCH":
        at = res.first_bad_index
        lead = (
            f"nonzero(t2d) != d2t + arange(v): d2t selects other target ids than the t2d beside it from "
            f"draft id {at} on (built from other data, or a stale file)"
            if res.kind == "partial_corruption"
            else "d2t holds the t2d selection in another order"
        )
    out.append(Finding(code, Severity.ERROR, f"{m.label}: {lead}.", evidence=ev, fix=_fix_for(res.kind)))
    return out


def _selections(m: Any) -> list[dict[str, Any]]:
    """The selection(s) a map stands for: from t2d, and from d2t when it decodes to other ids."""
    out: list[dict[str, Any]] = []
    t2d_sel = None
    if m.t2d is not None and m.t2d.dim() == 1:
        arr = m.t2d.numpy()
        if arr.dtype == np.bool_ or np.isin(np.unique(arr[: 1 << 20]), [0, 1]).all():
            t2d_sel = np.flatnonzero(arr.astype(bool)).astype(np.int64)
            out.append({"of": "t2d", "selected": t2d_sel.tolist()})
    if m.d2t is not None and m.d2t.dim() == 1 and not m.d2t.is_floating_point():
        d = m.d2t.numpy().astype(np.int64)
        res = classify_mapping(m.d2t, None, m.target_vocab_size, None)
        step = {"absolute": 0, "double_offset": 2}.get(res.kind, 1)
        sel = np.sort(d + step * np.arange(d.shape[0], dtype=np.int64))
        how = {0: "d2t (decoded as absolute ids)", 2: "d2t (decoded as double offsets)"}.get(step, "d2t")
        if t2d_sel is None or not np.array_equal(sel, t2d_sel):
            out.append({"of": how, "selected": sel.tolist()})
    return out


def _find_maps(root: Path, explicit: str | Path | None) -> list[Path]:
    if explicit is not None:
        return [Path(explicit)]
    found: list[Path] = []
    base = root if root.is_dir() else root.parent
    dirs = sorted({p.parent for p in base.rglob("*.npy") if p.name in ("d2t.npy", "t2d.npy")})
    found.extend(dirs)
    for p in sorted(base.rglob("*.pt")):
        if p.parent.name == "vocab_mapping" or p.name == "cache.pt":
            found.append(p)
    return found


def _token_freq(root: Path) -> dict[str, Any] | None:
    base = root if root.is_dir() else root.parent
    files = sorted(base.rglob("token_freq.pt"))
    if not files:
        return None
    f = files[0]
    try:
        obj = safe_torch_load(f)
    except UnusableInputError as exc:
        return {"path": str(f), "error": str(exc)}
    if not isinstance(obj, dict) or not all(
        isinstance(k, int) and isinstance(v, int) and not isinstance(v, bool) for k, v in obj.items()
    ):
        return {"path": str(f), "error": "not a plain {token id: count} dict"}
    return {"path": str(f), "counts": {int(k): int(v) for k, v in sorted(obj.items())}}


_MARK_USER, _MARK_ASSISTANT = "QQXQQ", "ZZYZZ"  # placeholders no tokenizer merges with a template's markup


def _assistant_marker(target: str | Path | None) -> dict[str, Any] | None:
    """The token ids that open an assistant turn after a user turn, from the target's chat template:
    the text a rendered ``[user, assistant]`` chat holds between the two contents. ``None`` when the
    target has no tokenizer or template, or the boundary is not a stable token sequence."""
    if target is None or not (Path(target) / "tokenizer.json").is_file():
        return None
    try:
        template = read_chat_template(target)
        if template is None:
            return None
        cfg = read_tokenizer_config(target)
        special = {k: _token_text(cfg.get(k)) for k in ("bos_token", "eos_token", "unk_token", "pad_token")}
        chat = [{"role": "user", "content": _MARK_USER}, {"role": "assistant", "content": _MARK_ASSISTANT}]
        text = render_chat(template, chat, special)
        i, j = text.find(_MARK_USER), text.find(_MARK_ASSISTANT)
        if i < 0 or j <= i:
            return None
        between = text[i + len(_MARK_USER) : j]
        if not between.strip():
            return None
        ids = [int(x) for x in load_tokenizer(target).encode(between, add_special_tokens=False).ids]
    except (UnusableInputError, OSError, ValueError, TypeError, AttributeError):
        return None
    return {"text": between, "ids": ids} if ids else None


def _occurrences(ids: np.ndarray, marker: Sequence[int]) -> np.ndarray:
    """Start positions of ``marker`` as a contiguous run in ``ids``."""
    m = len(marker)
    if m == 0 or ids.shape[0] < m:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(ids[: ids.shape[0] - m + 1] == marker[0])
    for k in range(1, m):
        starts = starts[ids[starts + k] == marker[k]]
    return starts


def _drafter_facts(path: str | Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    d = read_drafter(path)
    fc = d.shape("fc.weight")
    maxpos = d.cfg.get("max_position_embeddings")
    return {
        "path": str(path),
        "fc_in": int(fc[1]) if fc and len(fc) == 2 else None,
        "hidden_size": d.cfg.get("hidden_size"),
        "target_hidden_size": d.cfg.get("target_hidden_size"),
        "max_position_embeddings": maxpos if isinstance(maxpos, int) else None,
        "vocab_size": d.target_vocab_size,
        "draft_vocab_size": d.draft_vocab_size,
    }


def _target_facts(path: str | Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    t = open_target(path)
    return {
        "path": str(path),
        "hidden_size": t.hidden_size,
        "vocab_size": t.vocab_size,
        "num_hidden_layers": t.num_hidden_layers,
        "max_position_embeddings": t.max_position_embeddings,
    }


# ---------------------------------------------------------------------------------------------
# the scan
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
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AuditScan:
        try:
            s = cls(dict(d["settings"]), [[int(a), int(b)] for a, b in d["shards"]])
            for name in cls._SUMS:
                setattr(s, name, int(d[name]))
            s.max_len = int(d["max_len"])
            s.layouts = {str(k): int(v) for k, v in d["layouts"].items()}
            s.dtypes = {str(k): int(v) for k, v in d["dtypes"].items()}
            s.layout_first = {str(k): list(v) for k, v in d["layout_first"].items()}
            for name in ("hidden_sizes", "aux_widths", "counts", "first_lex", "first_num", "first_pos"):
                setattr(s, name, _int_keys(d[name]))
            for name in cls._EXAMPLES:
                setattr(s, name, Examples.from_dict(d[name]))
            s.hashes = [[str(h), int(i), str(src)] for h, i, src in d["hashes"]]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UnusableInputError(
                f"not an audit-data partial result ({type(exc).__name__}: {exc})"
            ) from None
        return s


def _sample_settings(
    ds: DumpSet,
    fmt: str,
    max_samples: int | None,
    map_path: str | Path | None,
    drafter: str | Path | None,
    target: str | Path | None,
) -> dict[str, Any]:
    dfacts = _drafter_facts(drafter)
    tfacts = _target_facts(target)
    maps: list[dict[str, Any]] = []
    map_errors: list[dict[str, str]] = []
    for p in _find_maps(ds.root, map_path):
        try:
            m = load_mapping(p, target)
        except UnusableInputError as exc:
            if map_path is not None:
                raise
            map_errors.append({"path": str(p), "reason": str(exc)})
            continue
        maps.append(
            {
                "path": str(p),
                "label": m.label if p.is_dir() else p.name,
                "source": m.source,
                "target_vocab_size": m.target_vocab_size,
                "draft_vocab_size": m.draft_vocab_size,
                "findings": [f.to_dict() for f in _map_findings(m)],
                "selections": _selections(m),
            }
        )
    if not maps and drafter is not None:
        try:
            m = load_mapping(drafter, target)
            if m.d2t is not None or m.t2d is not None:
                maps.append(
                    {
                        "path": str(drafter),
                        "label": "drafter",
                        "source": m.source,
                        "target_vocab_size": m.target_vocab_size,
                        "draft_vocab_size": m.draft_vocab_size,
                        "findings": [],  # diagnose judges the drafter's own map
                        "selections": _selections(m),
                        "role": "drafter",
                    }
                )
        except UnusableInputError:
            pass
    vocab = (tfacts or {}).get("vocab_size") or (dfacts or {}).get("vocab_size")
    if vocab is None:
        vocab = next((mp["target_vocab_size"] for mp in maps if mp["target_vocab_size"]), None)
    maxpos = (dfacts or {}).get("max_position_embeddings") or (tfacts or {}).get("max_position_embeddings")
    return {
        "dir": str(ds.root),
        "format": fmt,
        "family": ds.family,
        "max_samples": max_samples,
        "total_files": len(ds.select(max_samples)),
        "max_positions": maxpos,
        "max_positions_from": "drafter"
        if (dfacts or {}).get("max_position_embeddings")
        else ("target" if maxpos else None),
        "vocab_size": vocab,
        "drafter": dfacts,
        "target": tfacts,
        "maps": maps,
        "map_errors": map_errors,
        "token_freq": _token_freq(ds.root),
        "assistant_marker": _assistant_marker(target),
    }


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"I/N"`` -> ``(I, N)`` with ``0 <= I < N``: the one convention (:mod:`eagle3_forensics.io.shard`)."""
    return parse_pair(text)


def scan_data(
    path: str | Path,
    *,
    map_path: str | Path | None = None,
    drafter: str | Path | None = None,
    target: str | Path | None = None,
    fmt: str = "auto",
    max_samples: int | None = None,
    shard: tuple[int, int] | None = None,
    progress: bool = False,
    max_sample_bytes: int | None = None,
) -> AuditScan:
    """Read the samples under ``path`` (this shard's share) into an :class:`AuditScan`."""
    if max_samples is not None and max_samples < 1:
        raise BadArgumentsError("--max-samples must be at least 1")
    hint = None
    if target is not None:
        hint = (_target_facts(target) or {}).get("hidden_size")
    cap = max_sample_bytes if max_sample_bytes is not None else cap_from_configs(drafter, target)
    ds = open_dumps(path, fmt, hidden_size_hint=hint, max_sample_bytes=cap)
    # as JSON gives it back, so a partial read from disk carries exactly these settings
    settings = json.loads(json.dumps(_sample_settings(ds, fmt, max_samples, map_path, drafter, target)))
    items = ds.select(max_samples, shard)
    scan = AuditScan(settings, [list(shard) if shard else [0, 1]])
    scan.files = len(items)
    bar = _bar(progress, len(items), "audit-data")
    try:
        for got in ds.iter_samples(items):
            if isinstance(got, tuple):
                scan.unreadable.add(got[0], got[1])
            else:
                scan.add(got)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return scan


def _bar(on: bool, total: int, desc: str) -> Any:
    if not on:
        return None
    from tqdm import tqdm  # heavy: tqdm

    return tqdm(total=total, desc=desc, unit="sample", leave=False, dynamic_ncols=True)


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


# ---------------------------------------------------------------------------------------------
# findings
# ---------------------------------------------------------------------------------------------


@dataclass
class DataAudit:
    """The verdict on one data-prep output."""

    scan: AuditScan
    findings: list[Finding]
    summary: dict[str, Any]

    @property
    def unusable(self) -> bool:
        return any(f.code == "DATA_UNREADABLE" for f in self.findings) or self.scan.read == 0

    @property
    def unusable_reason(self) -> str | None:
        """Why the data cannot be audited (exit 2), or ``None``."""
        if not self.unusable:
            return None
        first = next((f for f in self.findings if f.code == "DATA_UNREADABLE"), None)
        return first.message if first else "no sample could be read"

    @property
    def exit_code(self) -> int:
        if self.unusable:
            return int(ExitCode.UNUSABLE)
        return (
            int(ExitCode.FINDINGS)
            if any(f.severity is Severity.ERROR for f in self.findings)
            else int(ExitCode.OK)
        )

    def to_dict(self) -> dict[str, Any]:
        s = self.scan.settings
        return {
            "dir": s["dir"],
            "format": s["format"],
            "summary": self.summary,
            "counts": count_by_severity(self.findings),
            "findings": [f.to_dict() for f in self.findings],
        }


def _threshold(counts: np.ndarray, v: int) -> int:
    """The v-th largest count (0 when fewer than v ids were seen)."""
    seen = counts[counts > 0]
    if seen.shape[0] < v:
        return 0
    return int(np.partition(seen, seen.shape[0] - v)[seen.shape[0] - v])


def _dense(table: dict[int, int], size: int, fill: int) -> np.ndarray:
    arr = np.full(size, fill, dtype=np.int64)
    for key, v in table.items():
        k = int(key)
        if 0 <= k < size:
            arr[k] = v
    return arr


def _expected(scan: AuditScan, counts: np.ndarray, v: int) -> list[tuple[str, np.ndarray]]:
    """The selection each trainer would have made from these samples' counts."""
    size = counts.shape[0]
    unseen = np.iinfo(np.int64).max
    firsts = {
        "first_lex": _dense(scan.first_lex, size, unseen),
        "first_num": _dense(scan.first_num, size, unseen),
        "first_pos": _dense(scan.first_pos, size, unseen),
    }
    out = []
    for label, tie, table in TIE_BREAKS_AUDITED:
        tc = TokenCounts(
            counts,
            scan.tokens,
            scan.read,
            first_pos=firsts["first_pos"] if table == "first_pos" else None,
            first_row=firsts[table] if table in ("first_lex", "first_num") else None,
        )
        out.append((label, select_draft_vocab(tc, v, tie, warn=False).selected))
    return out


def _vocab_findings(scan: AuditScan, complete: bool) -> tuple[list[Finding], list[dict[str, Any]]]:
    s = scan.settings
    findings: list[Finding] = []
    report: list[dict[str, Any]] = []
    if not scan.counts:
        return findings, report
    size = max(
        [int(s["vocab_size"] or 0), max(scan.counts) + 1]
        + [int(mp["target_vocab_size"] or 0) for mp in s["maps"]]
    )
    counts = _dense(scan.counts, size, 0)
    total = int(counts.sum())
    tf = s.get("token_freq") or {}
    tf_counts = _dense(tf["counts"], size, 0) if "counts" in tf else None
    for mp in s["maps"]:
        for sel_d in mp["selections"]:
            sel = np.asarray(sel_d["selected"], dtype=np.int64)
            sel = sel[(sel >= 0) & (sel < size)]
            v = int(sel.shape[0])
            if v == 0 or v > size:
                continue
            label = f"{mp['label']} {sel_d['of']}"
            expected = _expected(scan, counts, v)
            exact = [name for name, e in expected if np.array_equal(e, sel)]
            best_name, best = max(expected, key=lambda x: np.intersect1d(x[1], sel).shape[0])
            overlap = int(np.intersect1d(best, sel).shape[0])
            cov = float(counts[sel].sum() / total) if total else 0.0
            opt = float(counts[best].sum() / total) if total else 0.0
            entry: dict[str, Any] = {
                "map": mp["path"],
                "selection": label,
                "draft_vocab_size": v,
                "matches": exact,
                "overlap": overlap,
                "coverage": round(cov, 6),
                "best_coverage": round(opt, 6),
            }
            if tf_counts is not None:
                tf_best = select_top(tf_counts, v)
                entry["token_freq_matches_data"] = bool(np.array_equal(tf_counts, counts))
                entry["map_matches_token_freq"] = bool(np.array_equal(tf_best, sel))
            report.append(entry)
            # -- coverage ------------------------------------------------------------------------
            if total and (cov < COVERAGE_WARN or cov < opt - COVERAGE_GAP):
                sev = Severity.ERROR if cov < COVERAGE_ERROR else Severity.WARNING
                sel_mask = np.zeros(size, dtype=bool)
                sel_mask[sel] = True
                missed = np.flatnonzero(~sel_mask & (counts > 0))
                top = missed[np.argsort(-counts[missed], kind="stable")][:10]
                findings.append(
                    Finding(
                        "DATA_COVERAGE_LOW",
                        sev,
                        f"{label}: the draft vocabulary covers {cov:.1%} of these samples' trained tokens "
                        f"(a map from these samples would cover {opt:.1%}); the drafter can never propose the rest.",
                        evidence={
                            "map": mp["path"],
                            "selection": sel_d["of"],
                            "coverage": round(cov, 6),
                            "best_coverage": round(opt, 6),
                            "counted_tokens": total,
                            "most_frequent_uncovered": [{"id": int(i), "count": int(counts[i])} for i in top],
                        },
                        fix="Build the map from the training data itself (eagle3-forensics vocab build, or the "
                        "trainer's own vocab step on these samples), or raise draft_vocab_size.",
                    )
                )
            if exact or mp.get("role") == "drafter":
                continue  # a drafter's map may come from other data than the samples audited
            # -- not the top-v of these samples, beyond ties? ---------------------------------------
            c_star = _threshold(counts, v)
            sel_mask = np.zeros(size, dtype=bool)
            sel_mask[sel] = True
            margin = max(1, math.ceil(0.01 * c_star))
            missing = np.flatnonzero(~sel_mask & (counts > c_star))
            rare = np.flatnonzero(sel_mask & (counts > 0) & (counts < c_star))
            bad_pad: np.ndarray = np.zeros(0, dtype=np.int64)
            if c_star == 0 and not missing.size:
                n_seen = int((counts[sel] > 0).sum())
                free = np.flatnonzero(counts[: max(v, 1)] == 0)  # padding takes the smallest unseen ids < v
                pads = free[: v - n_seen]
                sel_unseen = sel[counts[sel] == 0]
                bad_pad = np.setdiff1d(sel_unseen, pads)
            if not missing.size and not rare.size and not bad_pad.size:
                continue  # the same selection up to ties: nothing to report
            # Error when the difference costs coverage (frequent ids left out); ids never seen in these
            # samples picked instead of the trainers' padding prove other data but cost nothing here.
            clear = bool((counts[missing] > c_star + margin).any()) or (
                bool(missing.size) and overlap < 0.99 * v
            )
            sev = Severity.ERROR if clear and complete else Severity.WARNING
            per_tie = []
            for name, e in expected:
                per_tie.append(
                    {
                        "tie_break": name,
                        "overlap": int(np.intersect1d(e, sel).shape[0]),
                        "only_in_map": np.setdiff1d(sel, e)[:10].tolist(),
                        "only_in_data_top": np.setdiff1d(e, sel)[:10].tolist(),
                    }
                )
            top_missing = missing[np.argsort(-counts[missing], kind="stable")][:10]
            ev: dict[str, Any] = {
                "map": mp["path"],
                "selection": sel_d["of"],
                "draft_vocab_size": v,
                "overlap": overlap,
                "overlap_fraction": round(overlap / v, 6),
                "best_matching_tie_break": best_name,
                "threshold_count": c_star,
                "frequent_ids_missing": [{"id": int(i), "count": int(counts[i])} for i in top_missing],
                "selected_ids_rarer_than_threshold": rare[:10].tolist(),
                "selected_unseen_ids_not_padding": bad_pad[:10].tolist(),
                "per_tie_break": per_tie,
                "samples_read": scan.read,
                "complete": complete,
            }
            if tf_counts is not None:
                ev["map_matches_token_freq"] = entry.get("map_matches_token_freq")
                ev["token_freq_matches_data"] = entry.get("token_freq_matches_data")
            first = per_tie[[n for n, _ in expected].index(best_name)]
            findings.append(
                Finding(
                    "DATA_VOCAB_MAP_NOT_FROM_DATA",
                    sev,
                    f"{label} is not the top-{v} of these samples' loss-masked token counts beyond ties: "
                    f"{overlap}/{v} ids agree under the best-matching tie-break ({best_name}); first ids only "
                    f"in the map {first['only_in_map'][:5]}, only in the data's top-{v} {first['only_in_data_top'][:5]}"
                    + ("" if complete else " (only part of the data was read)")
                    + ".",
                    evidence=ev,
                    fix="Rebuild d2t/t2d from these samples with the trainer's own tie-break (eagle3-forensics "
                    "vocab build --tie-break id|first_row|first_seen), delete stale caches (SpecForge "
                    "vocab_mapping/*.pt, speculators d2t.npy/t2d.npy, EAGLE cache.pt) and retrain the head.",
                )
            )
    return findings, report


def select_top(counts: np.ndarray, v: int) -> np.ndarray:
    """speculators' selection from ``token_freq.pt`` counts (tie-break: smallest id, padded)."""
    if not counts.any():
        return np.zeros(0, dtype=np.int64)
    return select_draft_vocab(counts, v, "id", warn=False).selected


def _duplicates(scan: AuditScan) -> list[list[list[Any]]]:
    groups: dict[str, list[list[Any]]] = {}
    for h, i, src in scan.hashes:
        groups.setdefault(h, []).append([i, src])
    return [g for g in groups.values() if len(g) > 1]


def finish_audit(scan: AuditScan) -> DataAudit:
    """Findings and summary of a (merged) scan."""
    s = scan.settings
    complete = s["max_samples"] is None
    f: list[Finding] = []
    for mp in s["maps"]:
        f.extend(Finding.from_dict(x) for x in mp["findings"])
    if scan.unreadable.count:
        f.append(
            Finding(
                "DATA_UNREADABLE",
                Severity.ERROR,
                f"{scan.unreadable.count} of {scan.files} dump files cannot be used: "
                f"{scan.unreadable.items[0][1]}: {scan.unreadable.items[0][2]}",
                evidence=scan.unreadable.evidence(),
                fix="Regenerate these files (a truncated write, a wrong writer, or a pickle that needs code "
                "to load: never unpickle it outside a trusted environment); trainers crash on them or skip "
                "them silently.",
            )
        )
    for err in s.get("map_errors") or []:
        f.append(
            Finding(
                "DATA_UNREADABLE",
                Severity.ERROR,
                f"vocabulary map {err['path']} cannot be read: {err['reason']}",
                evidence={"count": 1, "examples": [{"file": err["path"], "detail": err["reason"]}]},
                fix="Regenerate the map from the data (eagle3-forensics vocab build).",
            )
        )
    broken = {k: n for k, n in scan.layouts.items() if LAYOUTS[k].broken}
    if broken:
        name = sorted(broken)[0]
        lay = LAYOUTS[name]
        f.append(
            Finding(
                "DATA_LAYOUT_BROKEN",
                Severity.ERROR,
                f"{sum(broken.values())} files were written by {lay.trainer} {lay.versions}: {lay.problem}.",
                evidence={
                    "layouts": {
                        k: {"files": n, "first": scan.layout_first.get(k), **LAYOUTS[k].to_dict()}
                        for k, n in broken.items()
                    },
                },
                fix="Regenerate the dumps with a current writer (SpecForge from 2025-11-13 on writes "
                "hidden_state = last layer and aux_hidden_state = the k captured layers).",
            )
        )
    not3 = {k: n for k, n in scan.layouts.items() if not LAYOUTS[k].eagle3 and not LAYOUTS[k].broken}
    if not3:
        name = sorted(not3)[0]
        lay = LAYOUTS[name]
        f.append(
            Finding(
                "DATA_NOT_EAGLE3",
                Severity.ERROR,
                f"{sum(not3.values())} files are {lay.trainer} {name} data: {lay.problem}. The other checks "
                "still ran on their tokens and masks.",
                evidence={
                    "layouts": {
                        k: {"files": n, "first": scan.layout_first.get(k), **LAYOUTS[k].to_dict()}
                        for k, n in not3.items()
                    }
                },
                fix="Generate EAGLE-3 data (SpecForge prepare_hidden_states.py with aux states, or speculators "
                "data_generation_offline.py); EAGLE-3 itself trains online from the target.",
            )
        )
    if scan.mask_empty.count:
        sev = Severity.ERROR if scan.mask_empty.count == scan.read - scan.no_mask else Severity.WARNING
        f.append(
            Finding(
                "DATA_LOSS_MASK_EMPTY",
                sev,
                f"{scan.mask_empty.count} of {scan.read} samples have an all-zero loss mask: nothing to learn, "
                "compute spent for nothing (the chat template's assistant markers were probably not matched).",
                evidence=scan.mask_empty.evidence(),
                fix="Check the chat template / assistant-header regex of the data prep against these samples; "
                "drop unsupervised rows (speculators does since 2026-08).",
            )
        )
    masked_share = scan.masked / max(1, scan.tokens) if scan.read - scan.no_mask > 0 else 0.0
    suspicious = scan.mask_whole.count + scan.mask_first.count + scan.mask_off_turns.count
    if suspicious or (scan.read - scan.no_mask > 1 and masked_share > MASKED_SHARE_SUSPICIOUS):
        marker = s.get("assistant_marker") or {}
        off = (
            f"; {scan.mask_off_turns.count} samples have assistant turns (after {marker.get('text')!r}, the "
            "target's chat template) none of which is in the mask"
            if scan.mask_off_turns.count
            else ""
        )
        f.append(
            Finding(
                "DATA_LOSS_MASK_SUSPICIOUS",
                Severity.WARNING,
                f"loss masks look wrong: {scan.mask_whole.count} samples are masked over the whole sequence and "
                f"{scan.mask_first.count} more from the first token on ({masked_share:.1%} of all tokens are "
                f"trained){off}; the loss is not on the assistant turns.",
                evidence={
                    "whole_sequence": scan.mask_whole.evidence(),
                    "from_first_token": scan.mask_first.evidence(),
                    "off_assistant_turns": scan.mask_off_turns.evidence(),
                    "assistant_marker": marker.get("text"),
                    "masked_share": round(masked_share, 6),
                },
                fix="Mask only the assistant spans (the trainers' regex on the chat template); check that the "
                "template used at data prep is the target's.",
            )
        )
    if scan.nonfinite.count:
        f.append(
            Finding(
                "DATA_HIDDEN_NONFINITE",
                Severity.ERROR,
                f"{scan.nonfinite.count} samples hold NaN/Inf hidden states (SpecForge skips NaN at write time "
                "but not Inf; speculators checks only with --validate-outputs).",
                evidence=scan.nonfinite.evidence(),
                fix="Regenerate these samples (fp16 overflow is the usual cause: capture in bf16/fp32) or drop them.",
            )
        )
    f.extend(_width_findings(scan))
    if scan.too_long.count:
        f.append(
            Finding(
                "DATA_SEQ_TOO_LONG",
                Severity.WARNING,
                f"{scan.too_long.count} samples are longer than the {s['max_positions_from']}'s "
                f"max_position_embeddings {s['max_positions']} (longest {scan.max_len}).",
                evidence={**scan.too_long.evidence(), "limit": s["max_positions"], "longest": scan.max_len},
                fix="Truncate to the drafter's context (the trainers' max_length) or raise its "
                "max_position_embeddings with matching RoPE settings.",
            )
        )
    f.extend(_target_findings(scan))
    vf, vreport = _vocab_findings(scan, complete)
    f.extend(vf)
    dups = _duplicates(scan)
    if dups:
        n = sum(len(g) - 1 for g in dups)
        f.append(
            Finding(
                "DATA_DUPLICATE_SAMPLES",
                Severity.WARNING,
                f"{n} samples repeat another one exactly (same input_ids and loss mask) in {len(dups)} groups; "
                "rows that share only a prefix (one row per assistant turn) are not counted.",
                evidence={"groups": len(dups), "duplicates": n, "examples": dups[:MAX_LIST]},
                fix="Deduplicate before training: repeated rows overweight their tokens (SpecForge's data-parallel "
                "sampler padding can write the same row twice).",
            )
        )
    findings = sort_findings(f)
    summary = {
        "files": s["total_files"],
        "samples_read": scan.read,
        "unreadable": scan.unreadable.count,
        "bytes": scan.bytes,
        "tokens": scan.tokens,
        "masked_tokens": scan.masked,
        "samples_without_mask": scan.no_mask,
        "padded_samples": scan.padded_samples,
        "pad_positions_trimmed": scan.pad_trimmed,
        "longest": scan.max_len,
        "layouts": scan.layouts,
        "dtypes": scan.dtypes,
        "hidden_sizes": {str(k): v for k, v in scan.hidden_sizes.items()},
        "aux_widths": {str(k): v for k, v in scan.aux_widths.items()},
        "distinct_ids": len(scan.counts),
        "maps": [{"path": m["path"], "label": m["label"], "source": m["source"]} for m in s["maps"]],
        "vocab": vreport,
        "token_freq": None if not s.get("token_freq") else s["token_freq"]["path"],
        "drafter": s["drafter"],
        "target": s["target"],
        "complete": complete,
    }
    return DataAudit(scan, findings, summary)


def _width_findings(scan: AuditScan) -> list[Finding]:
    s = scan.settings
    out: list[Finding] = []
    problems: list[str] = []
    ev: dict[str, Any] = {
        "aux_widths": {str(k): v for k, v in scan.aux_widths.items()},
        "hidden_sizes": {str(k): v for k, v in scan.hidden_sizes.items()},
    }
    if scan.aux_odd.count:
        problems.append(
            f"{scan.aux_odd.count} samples have an aux width that is not a multiple of their hidden size"
        )
        ev["not_a_multiple"] = scan.aux_odd.evidence()
    if len(scan.aux_widths) > 1:
        problems.append(f"aux widths differ between samples: {sorted(scan.aux_widths)}")
    d = s.get("drafter") or {}
    if d.get("fc_in") and scan.aux_widths:
        bad = sorted(w for w in scan.aux_widths if w != d["fc_in"])
        if bad:
            problems.append(f"the drafter's fc takes {d['fc_in']}-wide inputs, the dumps hold {bad}")
            ev["drafter_fc_in"] = d["fc_in"]
    t = s.get("target") or {}
    if t.get("hidden_size") and scan.aux_widths:
        h = t["hidden_size"]
        bad = sorted(w for w in scan.aux_widths if w % h)
        if bad:
            problems.append(f"aux widths {bad} are not k x the target's hidden size {h}")
            ev["target_hidden_size"] = h
    if problems:
        out.append(
            Finding(
                "DATA_AUX_WIDTH_MISMATCH",
                Severity.ERROR,
                "aux hidden states do not fit: " + "; ".join(problems) + ".",
                evidence=ev,
                fix="Capture the same k layers of the target the drafter is built for (fc input = k x target "
                "hidden size), in every sample.",
            )
        )
    return out


def _target_findings(scan: AuditScan) -> list[Finding]:
    s = scan.settings
    t = s.get("target") or {}
    problems: list[str] = []
    ev: dict[str, Any] = {}
    if t.get("hidden_size") and scan.hidden_sizes:
        bad = sorted(h for h in scan.hidden_sizes if h != t["hidden_size"])
        if bad:
            problems.append(f"dumped hidden size {bad} != the target's {t['hidden_size']}")
            ev["hidden_sizes"] = {str(k): v for k, v in scan.hidden_sizes.items()}
            ev["target_hidden_size"] = t["hidden_size"]
    if scan.out_of_vocab.count:
        problems.append(
            f"{scan.out_of_vocab.count} samples hold token ids outside the vocabulary {s['vocab_size']}"
        )
        ev["ids_out_of_range"] = scan.out_of_vocab.evidence()
    for mp in s["maps"]:
        if t.get("vocab_size") and mp["target_vocab_size"] and mp["target_vocab_size"] != t["vocab_size"]:
            problems.append(
                f"map {mp['label']} is for vocabulary {mp['target_vocab_size']}, the target has {t['vocab_size']}"
            )
            ev.setdefault("maps", []).append(
                {"map": mp["path"], "target_vocab_size": mp["target_vocab_size"]}
            )
    if not problems:
        return []
    return [
        Finding(
            "DATA_TARGET_MISMATCH",
            Severity.ERROR,
            "the data does not fit the target: " + "; ".join(problems) + ".",
            evidence={**ev, "target": t.get("path")},
            fix="Audit against the target the data was generated from; regenerate the dumps or the map for "
            "this target.",
        )
    ]


def audit_data(
    path: str | Path,
    *,
    map_path: str | Path | None = None,
    drafter: str | Path | None = None,
    target: str | Path | None = None,
    fmt: str = "auto",
    max_samples: int | None = None,
    progress: bool = False,
    on_scan: Callable[[AuditScan], None] | None = None,
) -> DataAudit:
    """Scan every sample under ``path`` and judge the data (the one-machine run)."""
    scan = scan_data(
        path,
        map_path=map_path,
        drafter=drafter,
        target=target,
        fmt=fmt,
        max_samples=max_samples,
        progress=progress,
    )
    if on_scan is not None:
        on_scan(scan)
    return finish_audit(scan)


__all__ = [
    "DATA_CODES",
    "SCAN_SCHEMA",
    "AuditScan",
    "DataAudit",
    "audit_data",
    "check_shards",
    "finish_audit",
    "merge_scans",
    "parse_shard",
    "scan_data",
]
