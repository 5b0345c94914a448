"""Token-id files: ``load_token_ids(path) -> (input_ids, loss_mask)`` and their streaming reader.

Accepted files (the trainers' preprocessed data, or an export of it):

* ``.safetensors`` with a tensor ``input_ids`` (1-D or 2-D) and optionally ``loss_mask`` of the same shape;
* ``.pt`` / ``.pth`` holding a dict with those keys (``torch.load(..., weights_only=True)``: a pickle that
  needs arbitrary globals is refused and never executed), or a bare ``input_ids`` tensor;
* ``.npy`` holding ``input_ids`` alone (``allow_pickle=False``); ``.npz`` with ``input_ids`` and optional
  ``loss_mask``.

:func:`iter_token_chunks` streams the same files a block of rows at a time (memory-mapped
``.npy``/``.pt``, sliced ``.safetensors``), for inputs larger than memory. Every problem is an
:class:`~eagle3_forensics.errors.UnusableInputError` with a one-line reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open

from eagle3_forensics.errors import UnusableInputError, error_line
from eagle3_forensics.io.checkpoint import safe_torch_load
from eagle3_forensics.vocab.mapping.build import VocabMapping, build_vocab_mapping

IDS_KEY = "input_ids"
MASK_KEY = "loss_mask"
SUFFIXES = (".safetensors", ".pt", ".pth", ".npy", ".npz")


def _as_array(value: Any, what: str, path: Path) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            value = value.float()
        arr = value.numpy()
    elif isinstance(value, np.ndarray):
        arr = value
    elif isinstance(value, list):
        try:
            arr = np.asarray(value)
        except ValueError as exc:  # ragged lists
            raise UnusableInputError(
                f"{what} in {path} is not rectangular: {error_line(exc)}", path=str(path)
            ) from None
    else:
        raise UnusableInputError(
            f"{what} in {path} is a {type(value).__name__}, expected a tensor or array", path=str(path)
        )
    if arr.ndim not in (1, 2):
        raise UnusableInputError(
            f"{what} in {path} has shape {list(arr.shape)}; expected 1-D or 2-D", path=str(path)
        )
    return arr


def _check(ids: np.ndarray, mask: np.ndarray | None, path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    if not (np.issubdtype(ids.dtype, np.integer) or ids.dtype == np.bool_):
        if np.issubdtype(ids.dtype, np.floating) and ids.size and np.all(np.mod(ids, 1) == 0):
            ids = ids.astype(np.int64)
        else:
            raise UnusableInputError(
                f"{IDS_KEY} in {path} has dtype {ids.dtype}; expected integers", path=str(path)
            )
    ids = ids.astype(np.int64, copy=False)
    if ids.size == 0:
        raise UnusableInputError(f"{IDS_KEY} in {path} is empty", path=str(path))
    if mask is not None:
        if mask.shape != ids.shape:
            raise UnusableInputError(
                f"{MASK_KEY} in {path} has shape {list(mask.shape)}, {IDS_KEY} has {list(ids.shape)}",
                path=str(path),
            )
        mask = mask.astype(bool)
    return ids, mask


def _from_mapping(obj: dict[str, Any], path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    if IDS_KEY not in obj:
        keys = ", ".join(sorted(map(str, obj))[:10]) or "none"
        raise UnusableInputError(f"{path} has no {IDS_KEY!r} (keys: {keys})", path=str(path))
    ids = _as_array(obj[IDS_KEY], IDS_KEY, path)
    mask = _as_array(obj[MASK_KEY], MASK_KEY, path) if obj.get(MASK_KEY) is not None else None
    return _check(ids, mask, path)


def load_token_ids(path: str | Path) -> tuple[np.ndarray, np.ndarray | None]:
    """``(input_ids, loss_mask)`` as int64 / bool arrays of equal shape (``loss_mask`` may be ``None``)."""
    p = Path(path)
    if not p.is_file():
        raise UnusableInputError(f"token-id file not found: {p}", path=str(p))
    suffix = p.suffix.lower()
    if suffix == ".safetensors":
        try:
            with safe_open(str(p), framework="pt") as fh:
                names = set(fh.keys())
                obj: dict[str, Any] = {k: fh.get_tensor(k) for k in (IDS_KEY, MASK_KEY) if k in names}
                if not obj:
                    obj = dict.fromkeys(names)  # for the error message only
        except Exception as exc:
            raise UnusableInputError(
                f"unreadable safetensors file {p}: {error_line(exc)}", path=str(p)
            ) from None
        return _from_mapping(obj, p)
    if suffix in (".pt", ".pth"):
        loaded = safe_torch_load(p)
        if isinstance(loaded, torch.Tensor):
            return _check(_as_array(loaded, IDS_KEY, p), None, p)
        if not isinstance(loaded, dict):
            raise UnusableInputError(
                f"{p} holds a {type(loaded).__name__}, expected a dict with {IDS_KEY!r}", path=str(p)
            )
        return _from_mapping(loaded, p)
    if suffix in (".npy", ".npz"):
        try:
            loaded_np = np.load(str(p), allow_pickle=False, mmap_mode="r")  # .npy stays on disk until read
        except Exception as exc:
            raise UnusableInputError(f"unreadable NumPy file {p}: {error_line(exc)}", path=str(p)) from None
        if isinstance(loaded_np, np.ndarray):
            return _check(_as_array(loaded_np, IDS_KEY, p), None, p)
        try:  # an .npz reads its members only now: a damaged archive fails here
            with loaded_np as archive:
                members = {k: archive[k] for k in archive.files}
        except Exception as exc:
            raise UnusableInputError(f"unreadable NumPy file {p}: {error_line(exc)}", path=str(p)) from None
        return _from_mapping(members, p)
    raise UnusableInputError(
        f"unsupported token-id file {p}: expected one of {', '.join(SUFFIXES)}", path=str(p)
    )


# -- streaming token-id files ------------------------------------------------------------------------

#: ids per streamed chunk (rows are never split across chunks)
CHUNK_TOKENS = 1 << 22


_ST_DTYPES = {
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U64": "<u8",
    "U32": "<u4",
    "U16": "<u2",
    "U8": "u1",
    "BOOL": "?",
    "F32": "<f4",
    "F64": "<f8",
    "F16": "<f2",
}


def _safetensors_memmap(p: Path, name: str, *, required: bool = True) -> np.ndarray | None:
    """A read-only memory map of one tensor of a safetensors file (header parsed here, data never read)."""
    try:
        with p.open("rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            if n <= 0 or n > 100_000_000:
                raise ValueError("bad header length")
            header = json.loads(fh.read(n))
        info = header.get(name)
        if info is None:
            if required:
                keys = ", ".join(sorted(k for k in header if k != "__metadata__")[:10]) or "none"
                raise UnusableInputError(f"{p} has no {name!r} (keys: {keys})", path=str(p))
            return None
        dtype = _ST_DTYPES.get(info["dtype"])
        if dtype is None:
            raise UnusableInputError(
                f"{name} in {p} has dtype {info['dtype']}; expected integers", path=str(p)
            )
        start, end = (int(x) for x in info["data_offsets"])
        shape = tuple(int(d) for d in info["shape"])
        count = int(np.prod(shape)) if shape else 1
        if end - start != count * np.dtype(dtype).itemsize or 8 + n + end > p.stat().st_size:
            raise ValueError(f"{name}: data offsets do not match its shape")
        if count == 0:
            return np.zeros(shape, dtype=dtype)
        return np.memmap(p, dtype=dtype, mode="r", offset=8 + n + start, shape=shape)
    except UnusableInputError:
        raise
    except Exception as exc:
        raise UnusableInputError(f"unreadable safetensors file {p}: {error_line(exc)}", path=str(p)) from None


def _open_streams(p: Path) -> tuple[Any, Any | None, tuple[int, ...], str]:
    """``(ids_source, mask_source, shape, dtype)`` where the sources can be sliced by rows lazily."""
    suffix = p.suffix.lower()
    if suffix == ".npy":
        try:
            arr = np.load(str(p), allow_pickle=False, mmap_mode="r")
        except Exception as exc:
            raise UnusableInputError(f"unreadable NumPy file {p}: {error_line(exc)}", path=str(p)) from None
        return arr, None, tuple(arr.shape), str(arr.dtype)
    if suffix == ".safetensors":
        ids_mm = _safetensors_memmap(p, IDS_KEY)
        assert ids_mm is not None  # required=True raises instead
        mask_mm = _safetensors_memmap(p, MASK_KEY, required=False)
        return ids_mm, mask_mm, tuple(ids_mm.shape), str(ids_mm.dtype)
    # .pt (memory-mapped when zip-based) and .npz: load_token_ids already reads them lazily enough
    ids_arr, mask_arr = load_token_ids(p)
    return ids_arr, mask_arr, tuple(ids_arr.shape), str(ids_arr.dtype)


def iter_token_chunks(
    path: str | Path, *, chunk_tokens: int = CHUNK_TOKENS
) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
    """Stream ``(input_ids, loss_mask | None)`` chunks of whole rows from a token-id file.

    A 2-D file yields ``[rows, length]`` blocks; a 1-D file (one row) is yielded whole as a lazy
    (memory-mapped) view that :func:`eagle3_forensics.vocab.mapping.build_vocab_mapping` splits itself,
    so the row structure the ``first_row`` tie-break needs is preserved either way.
    """
    p = Path(path)
    if not p.is_file():
        raise UnusableInputError(f"token-id file not found: {p}", path=str(p))
    ids_src, mask_src, shape, dtype = _open_streams(p)
    if len(shape) not in (1, 2):
        raise UnusableInputError(
            f"{IDS_KEY} in {p} has shape {list(shape)}; expected 1-D or 2-D", path=str(p)
        )
    if not any(dtype.lower().startswith(k) for k in ("int", "uint", "i", "u")) or dtype.lower() == "bool":
        raise UnusableInputError(f"{IDS_KEY} in {p} has dtype {dtype}; expected integers", path=str(p))
    if int(np.prod(shape)) == 0:
        raise UnusableInputError(f"{IDS_KEY} in {p} is empty", path=str(p))
    if mask_src is not None and tuple(mask_src.shape) != shape:
        raise UnusableInputError(
            f"{MASK_KEY} in {p} has shape {list(mask_src.shape)}, {IDS_KEY} has {list(shape)}", path=str(p)
        )
    if len(shape) == 1:  # one row: the counter splits it into blocks lazily
        yield ids_src, mask_src
        return
    rows, length = shape
    step = max(1, chunk_tokens // max(length, 1))
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        yield ids_src[r0:r1], None if mask_src is None else mask_src[r0:r1]


def token_file_size(path: str | Path) -> int | None:
    """Number of ids in a token-id file from its header alone (``None`` when that needs a full read)."""
    p = Path(path)
    try:
        if p.suffix.lower() == ".npy":
            return int(np.prod(np.load(str(p), allow_pickle=False, mmap_mode="r").shape))
        if p.suffix.lower() == ".safetensors":
            with safe_open(str(p), framework="numpy") as fh:
                return int(np.prod(fh.get_slice(IDS_KEY).get_shape()))
    except Exception:
        return None
    return None


def build_vocab_mapping_from_file(
    path: str | Path,
    draft_vocab_size: int,
    target_vocab_size: int,
    tie_break: str = "id",
    *,
    progress: bool | None = None,
    warn: bool = True,
) -> VocabMapping:
    """:func:`~eagle3_forensics.vocab.mapping.build_vocab_mapping` over a token-id file, streamed."""
    # a callable, so that a tie-break can re-read the one block it needs instead of tracking every id
    return build_vocab_mapping(
        lambda: iter_token_chunks(path),
        draft_vocab_size,
        target_vocab_size,
        tie_break=tie_break,
        progress=progress,
        total_tokens=token_file_size(path),
        warn=warn,
    )
