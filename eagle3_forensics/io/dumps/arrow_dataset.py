"""The Arrow files of speculators' datasets, read (and, for the demo and the tests, written) with pyarrow.

speculators (v0.5+) keeps ``input_ids``, ``loss_mask`` and ``seq_len`` in a Hugging Face
``Dataset.save_to_disk`` directory: ``data-*.arrow`` files in the Arrow IPC *streaming* format
(``datasets``' ``ArrowWriter``), plus ``state.json`` naming the files in order. pyarrow (the
``offline`` extra) reads them, the IPC file format (``ARROW1`` magic) as well.

The files are untrusted input, so :class:`ArrowStream`

* memory-maps the file: uncompressed buffers stay views of the map, nothing is copied;
* validates every record batch in full (offsets, lengths, UTF-8) before a value is read: a mangled
  file is an :class:`ArrowError` with one line, never a crash or an out-of-bounds read;
* bounds what decoding allocates (compressed or misaligned bodies): once the batches read so far
  hold more than :data:`MAX_DECODED_BYTES` of pyarrow memory, the file is refused. The check runs
  after each batch, so one batch is decoded before it can be refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eagle3_forensics.errors import one_line
from eagle3_forensics.extras import translated

if TYPE_CHECKING:
    import pyarrow as pa

FILE_MAGIC = b"ARROW1"
#: pyarrow memory the decoded batches of one file may hold (a token-id dataset maps, it does not decode)
MAX_DECODED_BYTES = 4 << 30
_KINDS = ("int64", "int32", "bool")


class ArrowError(Exception):
    """The bytes are not an Arrow IPC stream or file that can be used (one line, for the user)."""


def _pyarrow() -> Any:
    """pyarrow, or the one-line error naming the extra that brings it (exit 2 at every surface)."""
    with translated("reading Arrow datasets", "offline"):
        import pyarrow  # noqa: ICN001  # optional: pyarrow (the offline extra)
        import pyarrow.ipc  # optional: pyarrow (a submodule pyarrow does not import itself)
    return pyarrow


def _reason(exc: BaseException) -> str:
    return one_line(exc)[:160] or type(exc).__name__


class ArrowStream:
    """An Arrow IPC stream (or file), memory-mapped and validated: schema, row count, rows by index."""

    def __init__(self, path: str | Path) -> None:
        lib = _pyarrow()
        self.path = Path(path)
        self.fields: list[pa.Field] = []
        self._names: list[str] = []
        self.metadata: dict[str, str] = {}
        self._batches: list[pa.RecordBatch] = []
        self._starts = np.zeros(0, dtype=np.int64)
        self._rows = 0
        try:
            size = self.path.stat().st_size
        except OSError as exc:
            raise ArrowError(f"cannot open {self.path.name}: {exc.strerror or exc}") from None
        if not size:
            raise ArrowError(f"{self.path.name} is empty")
        try:
            self._source = lib.memory_map(str(self.path), "r")
        except OSError as exc:
            raise ArrowError(f"cannot open {self.path.name}: {_reason(exc)}") from None
        try:
            self._read(lib)
        except ArrowError:
            self.close()
            raise
        except (lib.ArrowException, OSError, ValueError, IndexError, TypeError) as exc:
            self.close()
            raise ArrowError(f"malformed Arrow data in {self.path.name}: {_reason(exc)}") from None

    def _read(self, lib: Any) -> None:
        before = lib.total_allocated_bytes()
        if self._source.read(len(FILE_MAGIC)) == FILE_MAGIC:
            self._source.seek(0)
            file_reader = lib.ipc.open_file(self._source)
            schema = file_reader.schema
            batches = (file_reader.get_batch(i) for i in range(file_reader.num_record_batches))
        else:
            self._source.seek(0)
            stream_reader = lib.ipc.open_stream(self._source)
            schema = stream_reader.schema
            batches = iter(stream_reader)
        self.fields = list(schema)
        self._names = [f.name for f in self.fields]  # UnicodeDecodeError on a mangled name: caught
        self.metadata = {
            k.decode("utf-8", "replace"): v.decode("utf-8", "replace")
            for k, v in (schema.metadata or {}).items()
        }
        rows = [0]
        for batch in batches:
            if lib.total_allocated_bytes() - before > MAX_DECODED_BYTES:
                raise ArrowError(
                    f"{self.path.name} decodes to more than {MAX_DECODED_BYTES >> 30} GiB (refused)"
                )
            batch.validate(full=True)  # offsets and lengths in bounds before any value is read
            self._batches.append(batch)
            rows.append(rows[-1] + batch.num_rows)
        self._starts = np.asarray(rows[:-1], dtype=np.int64)
        self._rows = rows[-1]

    def close(self) -> None:
        """Drop the batches and the map (values already handed out keep their part of it alive)."""
        self._batches = []
        self._source.close()

    def __enter__(self) -> ArrowStream:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def num_rows(self) -> int:
        return self._rows if self._batches else 0

    @property
    def column_names(self) -> list[str]:
        return list(self._names)

    def value(self, column: str, row: int) -> Any:
        """Row ``row`` (0-based over the whole stream) of ``column``: a numpy array for a list of
        numbers or booleans, else the Python value (int, str, dict for a struct); ``None`` for a null."""
        if column not in self.column_names:
            raise KeyError(column)
        if not 0 <= row < self.num_rows:
            raise IndexError(row)
        i = int(np.searchsorted(self._starts, row, side="right")) - 1
        cell = self._batches[i].column(self._names.index(column))[row - int(self._starts[i])]
        try:
            if not cell.is_valid:
                return None
            values = getattr(cell, "values", None)  # list, large list, fixed-size list
            if values is not None and _numeric(values.type):
                return values.to_numpy(zero_copy_only=False)
            return cell.as_py()
        except (ValueError, TypeError, OverflowError) as exc:
            raise ArrowError(f"column {column!r} row {row}: {_reason(exc)}") from None


def _numeric(t: Any) -> bool:
    pa = _pyarrow()
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t))


def write_stream(
    path: str | Path,
    columns: dict[str, tuple[str, list[Any]]],
    metadata: dict[str, str] | None = None,
) -> None:
    """Write one record batch as an Arrow IPC stream, as ``datasets`` does: ``columns`` maps a name to
    ``(kind, rows)`` with kind ``int64``/``int32``/``bool`` (scalars) or ``list<int64>``/``list<int32>``/
    ``list<bool>`` (one sequence per row). No nulls. Byte-identical for identical input."""
    pa = _pyarrow()
    arrays = []
    for name, (kind, rows) in columns.items():
        inner = kind[5:-1] if kind.startswith("list<") and kind.endswith(">") else kind
        if inner not in _KINDS:
            raise ValueError(f"unsupported column kind {kind!r} for {name!r}")
        typ = pa.bool_() if inner == "bool" else pa.int64() if inner == "int64" else pa.int32()
        if inner != kind:
            typ = pa.list_(typ)
            rows = [np.asarray(r).astype(bool if inner == "bool" else inner) for r in rows]
        arrays.append(pa.array(rows, type=typ))
    if len({len(a) for a in arrays}) > 1:
        raise ValueError("all columns need the same number of rows")
    batch = pa.RecordBatch.from_arrays(arrays, names=list(columns))
    schema = batch.schema.with_metadata(dict(sorted((metadata or {}).items())))
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(batch.replace_schema_metadata(schema.metadata))


__all__ = ["MAX_DECODED_BYTES", "ArrowError", "ArrowStream", "write_stream"]
