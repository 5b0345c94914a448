"""Find the dump files under a directory, decide their layout, and read one normalised sample at a time.

:func:`open_dumps` lists the candidate files (sorted by relative path, so ``--shard I/N`` is
deterministic), decides the layout family from the file names and the first readable file, and
returns a :class:`DumpSet`. :meth:`DumpSet.read` reads one item into a :class:`Sample`:
``input_ids``/``loss_mask`` ``[T]``, the last hidden state ``[T, H]`` and the aux states
``[T, k*H]`` whatever the writer called them, with SpecForge's trailing pad trimmed. A file that
cannot be used raises :class:`SampleError` (one line, for the report); the caller decides whether
that skips the sample or stops the run. Pickles are only ever read with ``weights_only=True``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open

from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.io.checkpoint import safe_torch_load, safe_torch_load_bytes
from eagle3_forensics.io.dumps.arrow_dataset import ArrowError, ArrowStream
from eagle3_forensics.io.dumps.bounded import (
    GZIP_ERRORS,
    SampleTooLargeError,
    check_size,
    gunzip_capped,
    gzip_declared_size,
    layout_cap,
)
from eagle3_forensics.io.dumps.layouts import FORMATS, LAYOUTS, DumpLayout

_HS_FILE = re.compile(r"^hs_(\d+)\.safetensors$")
_PT_FILE = re.compile(r"^data_(\d+)\.pt$")
_CKPT_FILE = re.compile(r"^(?:data_)?(\d+)?.*\.ckpt(?:\.gz)?$")
_ROWS_DIR = re.compile(r"^rows_(\d+)-(\d+)$")
_NUMBER = re.compile(r"(\d+)")
#: files that sit beside dumps but are maps or caches, never samples
_NOT_SAMPLES = {"vocab_mapping.pt", "token_freq.pt", "cache.pt"}
MAX_LIST = 20  # examples kept per problem in reports
LEARN_FROM = 5  # samples tried, spread over the dataset, to learn the cap when no config gives it


class SampleError(Exception):
    """This file cannot be used as a sample; the message is one line for the report."""


@dataclass(frozen=True)
class Item:
    """One sample on disk: its place in the sorted list, its file, and the writer's own index."""

    index: int  # position in the sorted file list (what --shard splits)
    rel: str  # path relative to the dump root (POSIX)
    path: Path
    number: int | None  # the writer's index (data_<i>, hs_<i>): the dataset order


@dataclass
class Sample:
    """One sample, normalised: what every check and the offline probe work on."""

    item: Item
    layout: str
    input_ids: torch.Tensor  # int64 [T]
    loss_mask: torch.Tensor  # bool [T]
    last_hidden: torch.Tensor | None  # [T, H]
    aux_hidden: torch.Tensor | None  # [T, k*H]
    trimmed: int = 0  # trailing pad positions removed (SpecForge padded rows)
    nbytes: int = 0  # bytes on disk
    notes: list[str] = field(default_factory=list)

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def hidden_size(self) -> int | None:
        return None if self.last_hidden is None else int(self.last_hidden.shape[-1])

    @property
    def aux_width(self) -> int | None:
        return None if self.aux_hidden is None else int(self.aux_hidden.shape[-1])

    @property
    def num_aux(self) -> int | None:
        h, w = self.hidden_size, self.aux_width
        return w // h if h and w and w % h == 0 else None

    @property
    def dtype(self) -> str | None:
        t = self.last_hidden if self.last_hidden is not None else self.aux_hidden
        return None if t is None else str(t.dtype).replace("torch.", "")

    def nonfinite(self) -> int:
        """NaN/Inf entries in the hidden states."""
        n = 0
        for t in (self.last_hidden, self.aux_hidden):
            if t is not None and t.is_floating_point():
                # in blocks: isfinite over a whole bf16 [T, 3H] took ~4.5x the sample in temporaries
                flat = t.reshape(-1)  # a view when contiguous, as loaded samples are
                for i in range(0, flat.numel(), 1 << 22):
                    block = flat[i : i + (1 << 22)]
                    n += block.numel() - int(torch.isfinite(block).sum())
        return n


def _natural(rel: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in _NUMBER.split(rel)]


def _number(name: str) -> int | None:
    m = re.search(r"(\d+)", name)
    return int(m.group(1)) if m else None


def _tensor(obj: Any, what: str) -> torch.Tensor:
    if not isinstance(obj, torch.Tensor):
        raise SampleError(f"{what} is a {type(obj).__name__}, not a tensor")
    return obj


def _squeeze_batch(t: torch.Tensor, what: str) -> torch.Tensor:
    """``[1, T, W]`` -> ``[T, W]``; ``[T, W]`` stays."""
    if t.dim() == 3 and t.shape[0] == 1:
        return t[0]
    if t.dim() == 2:
        return t
    raise SampleError(f"{what} has shape {list(t.shape)}, expected [T, W] or [1, T, W]")


def _ids_mask(obj: dict[str, Any], ids_key: str = "input_ids") -> tuple[torch.Tensor, torch.Tensor]:
    ids = _tensor(obj.get(ids_key), ids_key).reshape(-1) if ids_key in obj else None
    if ids is None:
        raise SampleError(f"no {ids_key!r}")
    if ids.is_floating_point() or ids.dtype == torch.bool or ids.is_complex():
        raise SampleError(f"{ids_key} has dtype {ids.dtype}, expected integers")
    if "loss_mask" not in obj:
        raise SampleError("no 'loss_mask'")
    mask = _tensor(obj["loss_mask"], "loss_mask").reshape(-1)
    if mask.shape[0] != ids.shape[0]:
        raise SampleError(
            f"loss_mask has {mask.shape[0]} entries, input_ids {ids.shape[0]} (mismatched lengths)"
        )
    if mask.is_floating_point() and not bool(torch.isfinite(mask).all()):
        raise SampleError("loss_mask holds NaN/Inf")
    return ids.to(torch.int64), mask != 0


def _trim_pad(ids: torch.Tensor, mask: torch.Tensor) -> int:
    """Length of the trailing run of (id 0, mask 0): SpecForge's right padding."""
    pad = (ids == 0) & ~mask
    if ids.shape[0] == 0 or not bool(pad[-1]):
        return 0
    keep = torch.nonzero(~pad).flatten()
    return int(ids.shape[0] - (int(keep[-1]) + 1 if keep.numel() else 0))


def _check_len(t: torch.Tensor, n: int, what: str) -> None:
    if int(t.shape[0]) != n:
        raise SampleError(f"{what} covers {int(t.shape[0])} positions, input_ids {n} (mismatched lengths)")


class DumpSet:
    """The dump files under one root, in a deterministic order, with their layout family."""

    def __init__(
        self,
        root: Path,
        family: str,
        items: list[Item],
        *,
        ignored: int = 0,
        hidden_size_hint: int | None = None,
        arrow: list[ArrowStream] | None = None,
        arrow_dir: Path | None = None,
        fmt: str = "auto",
        max_sample_bytes: int | None = None,
    ) -> None:
        self.root = root
        # the most one sample may occupy (decompressed); larger ones are skipped. Given, or from the
        # hinted width; else learned from the layout of a few samples on the first read
        self._cap: int | None = max_sample_bytes
        self.cap_source = "given" if max_sample_bytes is not None else "config"
        if max_sample_bytes is None and hidden_size_hint:
            self._cap = layout_cap(hidden_size_hint)
        self.fmt = fmt
        self.family = family  # "ckpt" | "speculators" | "speculators-v0.4"
        self.items = items
        self.ignored = ignored
        self.hidden_size_hint = hidden_size_hint
        self._arrow = arrow or []
        self.arrow_dir = arrow_dir
        self._arrow_starts = np.cumsum([0] + [s.num_rows for s in self._arrow])
        self.layouts_seen: dict[str, int] = {}
        self.first_error: str | None = None

    @property
    def max_sample_bytes(self) -> int:
        """The cap on one sample's decompressed size (learned from the data when nothing set it)."""
        if self._cap is None:
            self._cap = self._learn_cap()
        return self._cap

    def _learn_cap(self) -> int:
        """:func:`layout_cap` of the widths the first readable of a few samples holds.

        Candidates are spread over the dataset and tried smallest declared size first (a gzip
        trailer, else the file size); each is read under its own declared size, so a file that lies
        about its size fails at once. Nothing learned: the large-target default, still streamed.
        """
        fallback = layout_cap(None)
        self.cap_source = "default (no config, no readable sample)"
        n, k = len(self.items), min(len(self.items), LEARN_FROM)
        picks = sorted({round(i * (n - 1) / (k - 1)) for i in range(k)}) if k > 1 else list(range(k))
        declared = [(_declared(self.items[i].path), self.items[i]) for i in picks]
        for size, item in sorted((d for d in declared if d[0] is not None), key=lambda d: d[0] or 0):
            self._cap = min(int(size or 0), fallback)
            try:
                sample = self._parse(item)
            except SampleError:
                continue
            width = (sample.hidden_size or 0) + (sample.aux_width or 0)
            if width:
                self.cap_source = f"the layout of {item.rel} ({width} values per position)"
                return layout_cap(width, 1)
        return fallback

    # -- selection -------------------------------------------------------------------------------
    def select(self, max_samples: int | None = None, shard: tuple[int, int] | None = None) -> list[Item]:
        """The first ``max_samples`` items, then every N-th from ``I`` (``shard=(I, N)``)."""
        items = self.items[:max_samples] if max_samples is not None else self.items
        if shard is not None:
            i, n = shard
            items = [it for it in items if it.index % n == i]
        return items

    @property
    def total_bytes(self) -> int:
        return sum(_size(it.path) for it in self.items)

    def describe(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "family": self.family,
            "files": len(self.items),
            "ignored_files": self.ignored,
            "arrow_dataset": None if self.arrow_dir is None else str(self.arrow_dir),
            "arrow_rows": int(self._arrow_starts[-1]) if self._arrow else None,
            "max_sample_bytes": self._cap,
            "cap_from": self.cap_source,
        }

    # -- reading -----------------------------------------------------------------------------------
    def read(self, item: Item) -> Sample:
        """Read and normalise one item; :class:`SampleError` when it cannot be used (the first
        such reason is kept in :attr:`first_error`)."""
        try:
            return self._read(item)
        except SampleError as exc:
            if self.first_error is None:
                self.first_error = f"{item.rel}: {exc}"
            raise

    def _read(self, item: Item) -> Sample:
        if self._cap is None:  # learn the cap before the first sample
            self._cap = self._learn_cap()
        sample = self._parse(item)
        if not admitted(self.fmt, sample.layout):
            raise SampleError(f"a {sample.layout} file, not one --format {self.fmt} reads")
        sample.nbytes = _size(item.path)
        self.layouts_seen[sample.layout] = self.layouts_seen.get(sample.layout, 0) + 1
        return sample

    def _parse(self, item: Item) -> Sample:
        """One item under the current cap; every failure as :class:`SampleError`."""
        cap = self._cap if self._cap is not None else layout_cap(None)
        try:
            if not item.path.name.endswith(".gz"):
                check_size(item.path, cap)  # mmapped or read whole: bound it first
            sample = self._read_hs(item) if self.family == "speculators" else self._read_pickle(item, cap)
        except SampleError:
            raise
        except SampleTooLargeError as exc:
            raise SampleError(str(exc)) from None
        except UnusableInputError as exc:  # refused pickle, truncated zip, ...
            raise SampleError(str(exc)) from None
        except (RuntimeError, ValueError, TypeError, KeyError, IndexError, OSError, EOFError) as exc:
            raise SampleError(f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from None
        return sample

    def iter_samples(self, items: Sequence[Item]) -> Iterator[Sample | tuple[Item, str]]:
        """Each item as a :class:`Sample`, or ``(item, reason)`` when it cannot be used."""
        for it in items:
            try:
                yield self.read(it)
            except SampleError as exc:
                yield it, str(exc)

    def _load(self, path: Path, cap: int) -> Any:
        if path.name.endswith(".gz"):
            try:
                raw = gunzip_capped(path, cap)  # a stream, never past the cap
            except GZIP_ERRORS as exc:
                raise SampleError(f"bad gzip stream: {' '.join(str(exc).split())[:120]}") from None
            return safe_torch_load_bytes(raw, path.name)
        return safe_torch_load(path)

    def _read_pickle(self, item: Item, cap: int) -> Sample:
        obj = self._load(item.path, cap)
        if not isinstance(obj, dict):
            raise SampleError(f"holds a {type(obj).__name__}, expected a dict of tensors")
        if self.family == "speculators-v0.4":
            return self._from_v04(item, obj)
        return self._from_ckpt(item, obj)

    def _from_v04(self, item: Item, obj: dict[str, Any]) -> Sample:
        hs = obj.get("hidden_states")
        if not isinstance(hs, (list, tuple)):
            raise SampleError(
                "'hidden_states' is not a list (speculators v0.3/v0.4 store one tensor per layer)"
            )
        if len(hs) < 2:
            raise SampleError(f"'hidden_states' has {len(hs)} entries; need the aux layers plus the last one")
        ids, mask = _ids_mask(obj)
        states = [
            _squeeze_batch(_tensor(t, f"hidden_states[{i}]"), f"hidden_states[{i}]") for i, t in enumerate(hs)
        ]
        for i, t in enumerate(states):
            _check_len(t, ids.shape[0], f"hidden_states[{i}]")
        widths = {int(t.shape[-1]) for t in states}
        if len(widths) != 1:
            raise SampleError(f"hidden_states entries have different widths {sorted(widths)}")
        return Sample(item, "speculators-v0.4", ids, mask, states[-1], torch.cat(states[:-1], dim=-1))

    def _from_ckpt(self, item: Item, obj: dict[str, Any]) -> Sample:
        keys = set(obj)
        if "hidden_states" in keys and "aux_hidden_state" not in keys:
            if isinstance(obj["hidden_states"], (list, tuple)):
                raise SampleError("'hidden_states' is a list: a speculators v0.3/v0.4 file among .ckpt dumps")
            ids, mask = _ids_mask(obj)
            return Sample(item, "specforge-dflash", ids, mask, None, None)
        if "target" in keys:  # speculators research: hidden_state = aux, target = last (post-norm)
            ids, mask = _ids_mask(obj)
            aux = _squeeze_batch(_tensor(obj.get("hidden_state"), "hidden_state"), "hidden_state")
            last = _squeeze_batch(_tensor(obj["target"], "target"), "target")
            _check_len(aux, ids.shape[0], "hidden_state")
            _check_len(last, ids.shape[0], "target")
            return Sample(item, "speculators-research", ids, mask, last, aux)
        if "hidden_state" not in keys:
            shown = ", ".join(sorted(map(str, keys))[:8]) or "none"
            raise SampleError(f"no hidden states (keys: {shown})")
        ids, mask = _ids_mask(obj)
        raw = _tensor(obj["hidden_state"], "hidden_state")
        if "aux_hidden_state" in keys:
            last = _squeeze_batch(raw, "hidden_state")
            aux = _squeeze_batch(_tensor(obj["aux_hidden_state"], "aux_hidden_state"), "aux_hidden_state")
            h, w = int(last.shape[-1]), int(aux.shape[-1])
            if h > w and w % h:  # [T, V] logits where the last state should be
                return Sample(
                    item, "specforge-2025-11-10", ids, mask, None, None, notes=[f"hidden_state width {h}"]
                )
            _check_len(aux, int(last.shape[0]), "aux_hidden_state")
            trimmed = 0
            if int(last.shape[0]) != ids.shape[0]:
                raise SampleError(
                    f"hidden_state covers {int(last.shape[0])} positions, input_ids {ids.shape[0]} (mismatched lengths)"
                )
            trimmed = _trim_pad(ids, mask)
            if trimmed:
                keep = ids.shape[0] - trimmed
                ids, mask, last, aux = ids[:keep], mask[:keep], last[:keep], aux[:keep]
            layout = "specforge-v0.1" if _group_width(item) == 5000 else "specforge"
            return Sample(item, layout, ids, mask, last, aux, trimmed=trimmed)
        # no aux: EAGLE-1/2 ge_data ([T, H]), SpecForge without aux ([1, T, H]) or the 2025-11-09 writer
        if raw.dim() == 2:
            _check_len(raw, ids.shape[0], "hidden_state")
            return Sample(item, "eagle-ge-data", ids, mask, raw, None)
        last = _squeeze_batch(raw, "hidden_state")
        h = int(last.shape[-1])
        hint = self.hidden_size_hint
        if int(last.shape[0]) != ids.shape[0] or (hint is not None and h != hint and h % hint == 0):
            return Sample(
                item, "specforge-2025-11-09", ids, mask, None, None, notes=[f"hidden_state width {h}"]
            )
        return Sample(item, "specforge-no-aux", ids, mask, last, None)

    def _arrow_row(self, n: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        if not self._arrow:
            return None
        total = int(self._arrow_starts[-1])
        if not 0 <= n < total:
            raise SampleError(f"no Arrow row {n} for this file (the dataset has {total} rows)")
        s = int(np.searchsorted(self._arrow_starts, n, side="right")) - 1
        stream, row = self._arrow[s], n - int(self._arrow_starts[s])
        try:
            ids = stream.value("input_ids", row)
            mask = stream.value("loss_mask", row) if "loss_mask" in stream.column_names else None
        except (ArrowError, KeyError) as exc:
            raise SampleError(f"Arrow row {n}: {exc}") from None
        if not isinstance(ids, np.ndarray):
            raise SampleError(f"Arrow row {n}: input_ids is not a list of integers")
        ids_t = torch.from_numpy(np.array(ids, dtype=np.int64))
        if mask is None:
            return ids_t, torch.ones(ids_t.shape[0], dtype=torch.bool)
        if not isinstance(mask, np.ndarray) or mask.shape[0] != ids_t.shape[0]:
            raise SampleError(f"Arrow row {n}: loss_mask length differs from input_ids (mismatched lengths)")
        return ids_t, torch.from_numpy(np.array(mask) != 0)

    def _read_hs(self, item: Item) -> Sample:
        try:
            with safe_open(str(item.path), framework="pt") as fh:
                keys = set(fh.keys())
                if "hidden_states" not in keys or "token_ids" not in keys:
                    raise SampleError(f"keys {sorted(keys)[:6]}, expected token_ids and hidden_states")
                tok = fh.get_tensor("token_ids").reshape(-1).to(torch.int64)
                hs = fh.get_tensor("hidden_states")
        except SampleError:
            raise
        except Exception as exc:  # safetensors raises its own error types for truncated headers/data
            raise SampleError(f"unreadable safetensors file: {' '.join(str(exc).split())[:160]}") from None
        t = int(tok.shape[0])
        if hs.dim() != 3:
            raise SampleError(f"hidden_states has shape {list(hs.shape)}, expected [T, k+1, H]")
        notes = []
        if int(hs.shape[0]) == t:
            pass
        elif int(hs.shape[1]) == t:  # an older vLLM connector stacked layers first
            hs = hs.transpose(0, 1)
            notes.append("hidden_states stored layer-major [k+1, T, H] (older vLLM connector)")
        else:
            raise SampleError(
                f"hidden_states {list(hs.shape)} does not match {t} token_ids (mismatched lengths)"
            )
        if int(hs.shape[1]) < 2:
            raise SampleError("hidden_states holds one layer; need the aux layers plus the last one")
        row = self._arrow_row(item.number if item.number is not None else item.index)
        if row is None:
            ids, mask = tok, torch.ones(t, dtype=torch.bool)
            notes.append("no Arrow dataset found: no loss mask, every position counts")
        else:
            ids, mask = row
            if ids.shape[0] != t or not torch.equal(ids, tok):
                raise SampleError(
                    "token_ids differ from the Arrow row's input_ids (the trainer skips such a sample)"
                )
        k1, h = int(hs.shape[1]), int(hs.shape[2])
        aux = hs[:, :-1].reshape(t, (k1 - 1) * h)
        return Sample(item, "speculators", ids, mask, hs[:, -1], aux, notes=notes)


def _declared(path: Path) -> int | None:
    """The size a file declares before it is read: a gzip trailer's, else its size on disk."""
    return gzip_declared_size(path) if path.name.endswith(".gz") else _size(path) or None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _group_width(item: Item) -> int | None:
    for part in Path(item.rel).parts[:-1]:
        m = _ROWS_DIR.match(part)
        if m:
            return int(m.group(2)) - int(m.group(1))
    return None


def _walk(root: Path) -> list[Path]:
    out = []
    for p in root.rglob("*"):
        rel = p.relative_to(root).parts
        if any(part.startswith(".") for part in rel):
            continue
        if p.is_file():
            out.append(p)
    return out


def _find_arrow(root: Path, hs_dirs: set[Path]) -> tuple[Path | None, list[Path]]:
    """The HF ``save_to_disk`` directory beside the hidden states: ``state.json`` or ``data-*.arrow``."""
    candidates = [root, *sorted(hs_dirs), *sorted({d.parent for d in hs_dirs})]
    for d in candidates:
        state = d / "state.json"
        if state.is_file():
            try:
                files = [d / str(f["filename"]) for f in json.loads(state.read_text())["_data_files"]]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise UnusableInputError(
                    f"unreadable Arrow dataset state {state}: {exc}", path=str(state)
                ) from None
            return d, files
        arrows = sorted(d.glob("data-*.arrow"), key=lambda p: _natural(p.name))
        if arrows:
            return d, arrows
    return None, []


def open_dumps(
    root: str | Path,
    fmt: str = "auto",
    *,
    hidden_size_hint: int | None = None,
    max_sample_bytes: int | None = None,
) -> DumpSet:
    """The dump files under ``root`` (recursively), sorted by relative path, with their layout family.

    ``fmt``: ``auto``, ``specforge``, ``speculators`` or ``eagle`` (which writers' files to take).
    ``hidden_size_hint`` (the target's or drafter's hidden size) tells SpecForge's 2025-11-09
    files (a ``k*H``-wide ``hidden_state``) from EAGLE-1/2-style ones. ``max_sample_bytes`` caps
    what one sample may occupy (default: :func:`~eagle3_forensics.io.dumps.bounded.layout_cap` of
    the hint); a larger sample is skipped unread.
    Raises :class:`UnusableInputError` when there is nothing to read.
    """
    if fmt not in FORMATS:
        raise BadArgumentsError(f"unknown --format {fmt!r}; choose from {', '.join(FORMATS)}")
    p = Path(root)
    if not p.exists():
        raise UnusableInputError(f"dump directory not found: {p}", path=str(p))
    base = p if p.is_dir() else p.parent
    files = _walk(p) if p.is_dir() else [p]
    hs = [f for f in files if _HS_FILE.match(f.name)]
    pt = [f for f in files if _PT_FILE.match(f.name)]
    ckpt = [f for f in files if f.name.endswith((".ckpt", ".ckpt.gz")) and f.name not in _NOT_SAMPLES]
    want_spec = fmt in ("auto", "speculators")
    chosen: list[Path]
    family: str
    arrow: list[ArrowStream] = []
    arrow_dir: Path | None = None
    if hs and want_spec:
        family, chosen = "speculators", hs
        arrow_dir, arrow_files = _find_arrow(base, {f.parent for f in hs})
        for f in arrow_files:
            try:
                arrow.append(ArrowStream(f))
            except ArrowError as exc:
                for s in arrow:
                    s.close()
                raise UnusableInputError(f"unreadable Arrow dataset file {f}: {exc}", path=str(f)) from None
        for s in arrow:
            if "input_ids" not in s.column_names:
                raise UnusableInputError(
                    f"Arrow dataset {s.path} has no input_ids column (columns: {', '.join(s.column_names)})",
                    path=str(s.path),
                )
    elif pt and want_spec:
        family, chosen = "speculators-v0.4", pt
    elif ckpt:
        family, chosen = "ckpt", ckpt
    else:
        looked = {
            "auto": "hs_<i>.safetensors, data_<i>.pt, *.ckpt, *.ckpt.gz",
            "speculators": "hs_<i>.safetensors, data_<i>.pt, */data_<n>.ckpt",
            "specforge": "rows_*/data_<i>.ckpt[.gz]",
            "eagle": "*/data_<n>.ckpt",
        }[fmt]
        raise UnusableInputError(f"no dump files under {p} (looked for {looked})", path=str(p))
    rels = sorted(((f.relative_to(base).as_posix(), f) for f in chosen), key=lambda x: x[0])
    items = [Item(i, rel, f, _number(f.name)) for i, (rel, f) in enumerate(rels)]
    ignored = len(hs) + len(pt) + len(ckpt) - len(items)
    return DumpSet(
        base,
        family,
        items,
        ignored=ignored,
        hidden_size_hint=hidden_size_hint,
        arrow=arrow,
        arrow_dir=arrow_dir,
        fmt=fmt,
        max_sample_bytes=max_sample_bytes,
    )


def admitted(fmt: str, layout: str) -> bool:
    """Whether ``--format fmt`` takes files of ``layout``."""
    return layout in FORMATS.get(fmt, ())


def layout_of(name: str) -> DumpLayout:
    return LAYOUTS[name]


__all__ = ["DumpSet", "Item", "Sample", "SampleError", "admitted", "layout_of", "open_dumps"]
