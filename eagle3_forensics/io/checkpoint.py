"""Header-first reading of drafter checkpoints.

A drafter directory holds ``config.json`` and its weights as ``model.safetensors``, a sharded
``model.safetensors.index.json``, ``pytorch_model.bin`` or a sharded ``.bin`` index. Listing
tensors never reads tensor data for safetensors (``safe_open`` parses the header only); the
checks then read just the small tensors they need (``d2t``, ``t2d``, norm vectors) and bounded
slices of the big ones.

Two ways to read data. The checks read *values* as numpy (:meth:`Checkpoint.read_array`,
:meth:`Checkpoint.read_array_slice`) through safetensors' numpy API, so ``inspect`` and
``diagnose`` on safetensors never import torch; bfloat16 and 8-bit floats, which numpy lacks,
are read as raw bytes and widened to float32 (:mod:`eagle3_forensics.io.dtypes`). Repair, the
reference drafter and the vocabulary tools read *storage* as torch tensors
(:meth:`Checkpoint.read_tensor`, :meth:`Checkpoint.read_slice`).

``.bin`` files are only ever opened with ``torch.load(..., weights_only=True)``: a pickle that
needs arbitrary globals is refused and never executed.
"""

from __future__ import annotations

import io
import json
import math
import pickle
import re
import struct
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from safetensors import safe_open

from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.io.dtypes import RAW_BITS, from_bytes

if TYPE_CHECKING:
    import torch

SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
BIN_FILE = "pytorch_model.bin"
BIN_INDEX = "pytorch_model.bin.index.json"
CONFIG_FILE = "config.json"

# safetensors dtype string -> bytes per element (what the header says, without loading data).
_DTYPE_BYTES: dict[str, float] = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
    "F4": 0.5,
    "F6_E2M3": 0.75,
    "F6_E3M2": 0.75,
}
# torch dtype (spelled as ``str(dtype)``, so this module needs no torch) -> safetensors name.
_ST_BY_TORCH_NAME: dict[str, str] = {
    "torch.bool": "BOOL",
    "torch.uint8": "U8",
    "torch.int8": "I8",
    "torch.int16": "I16",
    "torch.int32": "I32",
    "torch.int64": "I64",
    "torch.float16": "F16",
    "torch.bfloat16": "BF16",
    "torch.float32": "F32",
    "torch.float64": "F64",
}


def st_dtype(dtype: torch.dtype) -> str:
    """The safetensors spelling of a torch dtype (``torch.float32`` -> ``"F32"``)."""
    name = str(dtype)
    return _ST_BY_TORCH_NAME.get(name, name.replace("torch.", "").upper())


def torch_dtype_of(st_name: str) -> torch.dtype | None:
    """The torch dtype stored under a safetensors dtype name (imports torch); ``None`` for names
    outside the common table."""
    import torch  # heavy: torch; only repair, which builds tensors, asks

    name = next((t for t, st in _ST_BY_TORCH_NAME.items() if st == st_name), None)
    return None if name is None else getattr(torch, name.removeprefix("torch."))


FLOAT_DTYPES = frozenset({"F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2"})
INT_DTYPES = frozenset({"I8", "I16", "I32", "I64", "U8", "U16", "U32", "U64"})


@dataclass(frozen=True)
class TensorInfo:
    """What the header says about one tensor: no data is read to build this."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # safetensors spelling: "F32", "BF16", "I64", "BOOL", ...
    shard: str  # file name inside the checkpoint directory
    nbytes: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "shard": self.shard,
            "bytes": self.nbytes,
        }


def _nbytes(shape: tuple[int, ...], dtype: str) -> int:
    return int(math.prod(shape) * _DTYPE_BYTES.get(dtype, 0))


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())[:300]


def read_json(path: Path, what: str) -> Any:
    """Parse a JSON file or raise :class:`UnusableInputError` with a one-line reason."""
    try:
        with path.open("rb") as fh:
            return json.loads(fh.read().decode("utf-8"))
    except FileNotFoundError:
        raise UnusableInputError(f"{what} not found: {path}", path=str(path)) from None
    except (
        ValueError,
        RecursionError,
    ) as exc:  # JSONDecodeError, UnicodeDecodeError, int digit limit, deep nesting
        raise UnusableInputError(
            f"{what} is not valid JSON: {path} ({_one_line(exc)})", path=str(path)
        ) from None
    except OSError as exc:
        raise UnusableInputError(f"cannot read {what} {path}: {_one_line(exc)}", path=str(path)) from None


def tensor_to_array(t: Any) -> np.ndarray:
    """Values of a torch tensor as numpy; dtypes numpy lacks (bfloat16, float8) widened to float32."""
    t = t.detach().cpu()
    if t.is_floating_point() and str(t.dtype) not in ("torch.float16", "torch.float32", "torch.float64"):
        t = t.float()
    return np.asarray(t.numpy())


def _leading_rows(shape: tuple[int, ...], max_elements: int) -> int | None:
    """Rows of a bounded read (``None``: read it all)."""
    if math.prod(shape) <= max_elements:
        return None
    row = math.prod(shape[1:]) or 1
    return max(1, max_elements // row)


@dataclass
class Checkpoint:
    """An opened drafter checkpoint: its raw config and its tensor table.

    Build it with :func:`open_checkpoint`. Tensor data is read lazily: values as numpy through
    :meth:`read_array` / :meth:`read_array_slice` (no torch for safetensors), stored tensors as
    torch through :meth:`read_tensor` / :meth:`read_slice`.
    """

    path: Path
    config: dict[str, Any]
    tensors: dict[str, TensorInfo]
    weight_format: str  # "safetensors" | "safetensors-sharded" | "bin" | "bin-sharded"
    _bin_state: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict, repr=False)
    _handles: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)
    _data_start: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict, repr=False)

    # -- tensor data: values as numpy (the checks) ---------------------------------------
    def has(self, name: str) -> bool:
        return name in self.tensors

    def read_array(self, name: str) -> np.ndarray:
        """Values of one tensor in full, as numpy (bfloat16/float8 widened to float32). For small tensors."""
        if self._serves_own_tensors():
            return tensor_to_array(self.read_tensor(name))
        return self._array(name, None)

    def read_array_slice(self, name: str, max_elements: int = 1 << 16) -> np.ndarray:
        """Values of at most about ``max_elements`` elements: leading rows of a matrix, a prefix of a vector."""
        if self._serves_own_tensors():
            return tensor_to_array(self.read_slice(name, max_elements))
        return self._array(name, _leading_rows(self.tensors[name].shape, max_elements))

    def _serves_own_tensors(self) -> bool:
        """A subclass that overrides the torch readers (repair's planned checkpoint) holds data no file has."""
        return type(self).read_tensor is not Checkpoint.read_tensor

    def _array(self, name: str, rows: int | None) -> np.ndarray:
        info = self.tensors[name]
        if not self.weight_format.startswith("safetensors"):
            t = self._bin_tensors(info.shard)[name]
            return tensor_to_array(t if rows is None else t[:rows])
        try:
            if info.dtype in RAW_BITS:
                return self._widened(info, rows)
            handle = self._handle(info.shard, "numpy")
            return np.asarray(handle.get_tensor(name) if rows is None else handle.get_slice(name)[:rows])
        except UnusableInputError:
            raise
        except Exception as exc:  # corrupt data region, a dtype no reader knows: report, never crash
            raise UnusableInputError(
                f"cannot read tensor {name!r} from {info.shard}: {_one_line(exc)}"
            ) from None

    def _widened(self, info: TensorInfo, rows: int | None) -> np.ndarray:
        """A dtype numpy lacks: its raw bytes from the data region, widened to float32."""
        start, header = self._header(info.shard)
        begin, end = header[info.name]["data_offsets"]
        shape = info.shape if rows is None else (min(rows, info.shape[0]), *info.shape[1:])
        size = math.prod(shape) * RAW_BITS[info.dtype].itemsize
        if begin + size > end:
            raise UnusableInputError(f"tensor {info.name!r} in {info.shard} is shorter than its shape")
        with (self.path / info.shard).open("rb") as fh:
            fh.seek(start + int(begin))
            buf = fh.read(size)
        if len(buf) != size:
            raise UnusableInputError(f"tensor {info.name!r} in {info.shard} is truncated")
        return from_bytes(buf, info.dtype, shape)

    def _header(self, shard: str) -> tuple[int, dict[str, Any]]:
        """(offset of the data region, parsed header) of a safetensors shard ``safe_open`` already validated."""
        if shard not in self._data_start:
            with (self.path / shard).open("rb") as fh:
                (n,) = struct.unpack("<Q", fh.read(8))
                if n > MAX_HEADER_BYTES:  # never trust a length someone else wrote
                    raise UnusableInputError(
                        f"{shard}: safetensors header of {n} bytes (over {MAX_HEADER_BYTES})"
                    )
                header = json.loads(fh.read(n))
            self._data_start[shard] = (8 + n, header)
        return self._data_start[shard]

    # -- tensor data: stored tensors as torch (repair, reference drafter, vocab tools) ---
    def read_tensor(self, name: str) -> torch.Tensor:
        """Read one tensor in full, in its stored dtype (imports torch). Meant for small tensors."""
        info = self.tensors[name]
        if self.weight_format.startswith("safetensors"):
            try:
                return self._handle(info.shard, "pt").get_tensor(name)
            except Exception as exc:  # corrupt data region: report, never crash
                raise UnusableInputError(
                    f"cannot read tensor {name!r} from {info.shard}: {_one_line(exc)}"
                ) from None
        return self._bin_tensors(info.shard)[name]

    def read_slice(self, name: str, max_elements: int = 1 << 16) -> torch.Tensor:
        """Stored values of at most about ``max_elements`` elements, as torch (imports torch)."""
        info = self.tensors[name]
        rows = _leading_rows(info.shape, max_elements)
        if rows is None:
            return self.read_tensor(name)
        if self.weight_format.startswith("safetensors"):
            try:
                return self._handle(info.shard, "pt").get_slice(name)[:rows]
            except Exception as exc:
                raise UnusableInputError(
                    f"cannot read tensor {name!r} from {info.shard}: {_one_line(exc)}"
                ) from None
        return self._bin_tensors(info.shard)[name][:rows]

    def _handle(self, shard: str, framework: str) -> Any:
        """One open ``safe_open`` handle per shard and framework (header parsed once, data mmapped).

        ``framework="pt"`` imports torch inside safetensors; only the torch readers ask for it.
        """
        key = (shard, framework)
        if key not in self._handles:
            self._handles[key] = safe_open(str(self.path / shard), framework=framework)
        return self._handles[key]

    def _bin_tensors(self, shard: str) -> dict[str, torch.Tensor]:
        if shard not in self._bin_state:
            self._bin_state[shard] = _load_bin(self.path / shard)
        return self._bin_state[shard]

    # -- summaries ---------------------------------------------------------------------
    @property
    def total_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors.values())

    def names(self) -> list[str]:
        return sorted(self.tensors)

    def __iter__(self) -> Iterator[TensorInfo]:
        return iter(self.tensors[n] for n in self.names())


# safetensors' own limit on the JSON header (100 MB): a length beyond it, or beyond the file, is
# refused before anything is read or allocated for it
MAX_HEADER_BYTES = 100_000_000


def _header_length(file: Path, size: int) -> str | None:
    """Why the header length a safetensors file declares cannot be right (``None``: plausible)."""
    with file.open("rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
    if n > MAX_HEADER_BYTES:
        return f"unreadable safetensors file {file}: header length {n} bytes, over the {MAX_HEADER_BYTES}-byte limit"
    if n > size - 8:
        return (
            f"safetensors file truncated: header length {n} bytes, the file holds {size - 8} after it: {file}"
        )
    return None


def _list_safetensors(path: Path, shard: str) -> dict[str, TensorInfo]:
    file = path / shard
    if not file.is_file():
        raise UnusableInputError(f"weights file missing: {file}", path=str(file))
    size = file.stat().st_size
    if size < 8:
        raise UnusableInputError(
            f"safetensors file truncated (shorter than its 8-byte header length): {file}", path=str(file)
        )
    header_len = _header_length(file, size)
    if header_len is not None:
        raise UnusableInputError(header_len, path=str(file))
    out: dict[str, TensorInfo] = {}
    try:
        with safe_open(str(file), framework="numpy") as fh:  # the header only; "pt" would import torch
            for name in fh.keys():  # noqa: SIM118 - safe_open has no __iter__
                sl = fh.get_slice(name)
                shape = tuple(int(d) for d in sl.get_shape())
                dtype = str(sl.get_dtype())
                out[name] = TensorInfo(name, shape, dtype, shard, _nbytes(shape, dtype))
    except UnusableInputError:
        raise
    except Exception as exc:  # safetensors raises SafetensorError/OSError/ValueError for bad headers
        raise UnusableInputError(
            f"unreadable safetensors file {file}: {_one_line(exc)}", path=str(file)
        ) from None
    return out


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _pickle_refusal_reason(exc: BaseException) -> str:
    """The informative part of torch's weights-only refusal (which global or opcode), without its boilerplate."""
    text = _ANSI.sub("", str(exc))
    m = re.search(
        r"WeightsUnpickler error:\s*(.*?)(?:\s*Please use `torch\.serialization|\s*Check the documentation|$)",
        text,
        re.S,
    )
    return _one_line(Exception(m.group(1) if m and m.group(1).strip() else text))[:200]


def safe_torch_load(file: Path) -> Any:
    """``torch.load`` that never executes a pickle: ``weights_only=True``, mmap when the format allows.

    The one place the package unpickles; a refused pickle becomes a one-line :class:`UnusableInputError`.
    """
    if not file.is_file():
        raise UnusableInputError(f"file missing: {file}", path=str(file))
    import torch  # heavy: torch (~1 s); only .bin input, probes, repair and training come here

    mmap = zipfile.is_zipfile(file)  # mmap needs the zip-based format (torch >= 1.6)
    try:
        with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": stderr must stay one line
            warnings.simplefilter("ignore")
            return torch.load(str(file), map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as exc:
        reason = _pickle_refusal_reason(exc)
        raise UnusableInputError(
            f"refused to unpickle {file.name}: it needs objects beyond plain tensors (never executed; "
            f"convert it to safetensors in a trusted environment): {reason}",
            path=str(file),
        ) from None
    except Exception as exc:
        raise UnusableInputError(
            f"unreadable PyTorch file {file}: {_one_line(exc)}", path=str(file)
        ) from None


def safe_torch_load_bytes(data: bytes | bytearray, name: str) -> Any:
    """:func:`safe_torch_load` for bytes already in memory (e.g. a decompressed ``.ckpt.gz``)."""
    import torch  # heavy: torch (~1 s); only .ckpt.gz dumps come here

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        reason = _pickle_refusal_reason(exc)
        raise UnusableInputError(
            f"refused to unpickle {name}: it needs objects beyond plain tensors (never executed; "
            f"convert it to safetensors in a trusted environment): {reason}",
            path=name,
        ) from None
    except Exception as exc:
        raise UnusableInputError(f"unreadable PyTorch data {name}: {_one_line(exc)}", path=name) from None


def _load_bin(file: Path) -> dict[str, torch.Tensor]:
    """Load a ``.bin`` state dict safely (see :func:`safe_torch_load`)."""
    if not file.is_file():
        raise UnusableInputError(f"weights file missing: {file}", path=str(file))
    obj = safe_torch_load(file)
    import torch  # heavy: torch (already loaded by safe_torch_load)

    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        obj = obj["state_dict"]
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise UnusableInputError(f"{file.name} does not hold a flat tensor state dict", path=str(file))
    return {str(k): v for k, v in obj.items()}


def _bin_infos(shard: str, state: dict[str, torch.Tensor]) -> dict[str, TensorInfo]:
    out = {}
    for name, t in state.items():
        dtype = st_dtype(t.dtype)
        shape = tuple(int(d) for d in t.shape)
        out[name] = TensorInfo(name, shape, dtype, shard, _nbytes(shape, dtype))
    return out


def _read_index(path: Path, index_name: str) -> dict[str, str]:
    index = read_json(path / index_name, "shard index")
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
    ):
        raise UnusableInputError(f"shard index has no valid 'weight_map': {path / index_name}")
    for shard in sorted(set(weight_map.values())):
        if Path(shard).name != shard:  # refuse paths that leave the checkpoint directory
            raise UnusableInputError(f"shard index names a file outside the checkpoint: {shard!r}")
        if not (path / shard).is_file():
            raise UnusableInputError(
                f"shard named in {index_name} is missing: {path / shard}", path=str(path / shard)
            )
    return weight_map


def _check_index_matches(weight_map: dict[str, str], infos: dict[str, TensorInfo], index_name: str) -> None:
    missing = sorted(k for k, shard in weight_map.items() if k not in infos or infos[k].shard != shard)
    if missing:
        raise UnusableInputError(
            f"{index_name} names {len(missing)} tensor(s) absent from their shard, e.g. {missing[0]!r}"
        )


MAX_CONFIG_DEPTH = 64  # real configs nest 3-4 levels; deeper ones break recursive JSON output


def _nesting_depth(value: Any) -> int:
    depth, level = 0, [value]
    while level:
        level = [
            c
            for v in level
            for c in (v.values() if isinstance(v, dict) else v if isinstance(v, list) else ())
        ]
        depth += 1
    return depth


def read_config(path: Path) -> dict[str, Any]:
    cfg = read_json(path / CONFIG_FILE, "config.json")
    if not isinstance(cfg, dict):
        raise UnusableInputError(f"config.json is not a JSON object: {path / CONFIG_FILE}")
    if _nesting_depth(cfg) > MAX_CONFIG_DEPTH:
        raise UnusableInputError(
            f"config.json nests deeper than {MAX_CONFIG_DEPTH} levels: {path / CONFIG_FILE}"
        )
    return cfg


def open_checkpoint(path: str | Path) -> Checkpoint:
    """Open a drafter directory (or a single weights file beside its ``config.json``).

    Raises :class:`UnusableInputError` for anything that cannot be analysed.
    """
    p = Path(path)
    if p.is_file():
        if p.name == CONFIG_FILE:
            p = p.parent
        else:
            return _open_single_file(p)
    if not p.exists():
        raise UnusableInputError(f"no such checkpoint: {p}", path=str(p))
    if not p.is_dir():
        raise UnusableInputError(f"not a checkpoint directory: {p}", path=str(p))
    if not any(p.iterdir()):
        raise UnusableInputError(f"checkpoint directory is empty: {p}", path=str(p))
    config = read_config(p)

    if (p / SAFETENSORS_INDEX).is_file():
        weight_map = _read_index(p, SAFETENSORS_INDEX)
        infos: dict[str, TensorInfo] = {}
        for shard in sorted(set(weight_map.values())):
            infos.update(_list_safetensors(p, shard))
        _check_index_matches(weight_map, infos, SAFETENSORS_INDEX)
        return Checkpoint(p, config, infos, "safetensors-sharded")
    if (p / SAFETENSORS_FILE).exists():
        return Checkpoint(p, config, _list_safetensors(p, SAFETENSORS_FILE), "safetensors")
    if (p / BIN_INDEX).is_file():
        weight_map = _read_index(p, BIN_INDEX)
        ck = Checkpoint(p, config, {}, "bin-sharded")
        for shard in sorted(set(weight_map.values())):
            ck.tensors.update(_bin_infos(shard, ck._bin_tensors(shard)))
        _check_index_matches(weight_map, ck.tensors, BIN_INDEX)
        return ck
    if (p / BIN_FILE).exists():
        ck = Checkpoint(p, config, {}, "bin")
        ck.tensors.update(_bin_infos(BIN_FILE, ck._bin_tensors(BIN_FILE)))
        return ck
    others = sorted(f.name for f in p.glob("*.safetensors"))
    if len(others) == 1:  # a lone, differently named safetensors file
        return Checkpoint(p, config, _list_safetensors(p, others[0]), "safetensors")
    raise UnusableInputError(
        f"no weights in {p}: expected {SAFETENSORS_FILE}, {SAFETENSORS_INDEX}, {BIN_FILE} or {BIN_INDEX}",
        path=str(p),
    )


def _open_single_file(file: Path) -> Checkpoint:
    config = read_config(file.parent)
    if file.suffix == ".safetensors":
        return Checkpoint(file.parent, config, _list_safetensors(file.parent, file.name), "safetensors")
    if file.suffix in {".bin", ".pt", ".pth"}:
        ck = Checkpoint(file.parent, config, {}, "bin")
        ck.tensors.update(_bin_infos(file.name, ck._bin_tensors(file.name)))
        return ck
    raise UnusableInputError(f"unsupported weights file: {file}", path=str(file))
