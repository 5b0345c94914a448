"""A minimal reader and writer for the Arrow IPC format, for the columns speculators' datasets hold.

speculators (v0.5+) keeps ``input_ids``, ``loss_mask`` and ``seq_len`` in a Hugging Face
``Dataset.save_to_disk`` directory: ``data-*.arrow`` files in the Arrow IPC *streaming* format
(``datasets``' ``ArrowWriter`` uses ``pa.RecordBatchStreamWriter``), plus ``state.json`` naming the
files in order. Reading that needs neither ``datasets`` nor ``pyarrow`` (a 55 MB wheel for two
integer columns): the format is flatbuffer message headers in front of plain little-endian
buffers, so this module parses the headers by hand and hands out numpy views of a memory map.
Only what those datasets use is decoded — integers, floats, booleans, strings/binary, lists,
large lists, fixed-size lists and structs; other columns are skipped as long as their buffer
layout is known. Compressed bodies, dictionary-encoded columns and big-endian files are refused
with :class:`ArrowError` (the caller reports the file as unreadable).

The writer (:func:`write_stream`) produces the same streaming format for the demo's speculators
dumps; ``tests/data/arrow`` holds files written by pyarrow that the reader is tested against.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

CONTINUATION = 0xFFFFFFFF
FILE_MAGIC = b"ARROW1"
METADATA_V5 = 4

# Message header union
_SCHEMA, _DICTIONARY_BATCH, _RECORD_BATCH = 1, 2, 3
# Type union (Schema.fbs)
_NULL, _INT, _FLOAT, _BINARY, _UTF8, _BOOL = 1, 2, 3, 4, 5, 6
_LIST, _STRUCT, _FIXED_SIZE_BINARY, _FIXED_SIZE_LIST = 12, 13, 15, 16
_LARGE_BINARY, _LARGE_UTF8, _LARGE_LIST = 19, 20, 21
_DECIMAL, _DATE, _TIME, _TIMESTAMP, _INTERVAL, _DURATION, _MAP = 7, 8, 9, 10, 11, 18, 17
_TYPE_NAMES = {
    _NULL: "null",
    _INT: "int",
    _FLOAT: "float",
    _BINARY: "binary",
    _UTF8: "string",
    _BOOL: "bool",
    _LIST: "list",
    _STRUCT: "struct",
    _FIXED_SIZE_BINARY: "fixed_size_binary",
    _FIXED_SIZE_LIST: "fixed_size_list",
    _LARGE_BINARY: "large_binary",
    _LARGE_UTF8: "large_string",
    _LARGE_LIST: "large_list",
    _DECIMAL: "decimal",
    _DATE: "date",
    _TIME: "time",
    _TIMESTAMP: "timestamp",
    _INTERVAL: "interval",
    _DURATION: "duration",
    _MAP: "map",
}
# buffers each type owns in a record batch (validity bitmap included)
_BUFFERS = {
    _NULL: 0,
    _INT: 2,
    _FLOAT: 2,
    _BOOL: 2,
    _DECIMAL: 2,
    _DATE: 2,
    _TIME: 2,
    _TIMESTAMP: 2,
    _INTERVAL: 2,
    _DURATION: 2,
    _FIXED_SIZE_BINARY: 2,
    _BINARY: 3,
    _UTF8: 3,
    _LARGE_BINARY: 3,
    _LARGE_UTF8: 3,
    _LIST: 2,
    _LARGE_LIST: 2,
    _MAP: 2,
    _STRUCT: 1,
    _FIXED_SIZE_LIST: 1,
}


class ArrowError(Exception):
    """The bytes are not an Arrow IPC stream this reader understands (one line, for the user)."""


# ---------------------------------------------------------------------------------------------
# flatbuffer reading
# ---------------------------------------------------------------------------------------------


class _Table:
    """One flatbuffer table: fields by slot number."""

    __slots__ = ("buf", "pos", "vt", "vt_len")

    def __init__(self, buf: memoryview, pos: int) -> None:
        if not 0 <= pos <= len(buf) - 4:
            raise ArrowError("flatbuffer table offset out of range")
        self.buf, self.pos = buf, pos
        self.vt = pos - struct.unpack_from("<i", buf, pos)[0]
        if not 0 <= self.vt <= len(buf) - 4:
            raise ArrowError("flatbuffer vtable offset out of range")
        self.vt_len = struct.unpack_from("<H", buf, self.vt)[0]

    def _off(self, slot: int) -> int:
        at = 4 + 2 * slot
        if at + 2 > self.vt_len:
            return 0
        return int(struct.unpack_from("<H", self.buf, self.vt + at)[0])

    def scalar(self, slot: int, fmt: str, default: Any = 0) -> Any:
        off = self._off(slot)
        if not off:
            return default
        return struct.unpack_from("<" + fmt, self.buf, self.pos + off)[0]

    def _target(self, slot: int) -> int | None:
        off = self._off(slot)
        if not off:
            return None
        at = self.pos + off
        return at + int(struct.unpack_from("<I", self.buf, at)[0])

    def table(self, slot: int) -> _Table | None:
        at = self._target(slot)
        return None if at is None else _Table(self.buf, at)

    def string(self, slot: int) -> str | None:
        at = self._target(slot)
        if at is None:
            return None
        n = struct.unpack_from("<I", self.buf, at)[0]
        return bytes(self.buf[at + 4 : at + 4 + n]).decode("utf-8", "replace")

    def tables(self, slot: int) -> list[_Table]:
        at = self._target(slot)
        if at is None:
            return []
        n = struct.unpack_from("<I", self.buf, at)[0]
        out = []
        for i in range(n):
            el = at + 4 + 4 * i
            out.append(_Table(self.buf, el + int(struct.unpack_from("<I", self.buf, el)[0])))
        return out

    def structs(self, slot: int, fmt: str) -> list[tuple[Any, ...]]:
        at = self._target(slot)
        if at is None:
            return []
        n = struct.unpack_from("<I", self.buf, at)[0]
        size = struct.calcsize("<" + fmt)
        if at + 4 + n * size > len(self.buf):
            raise ArrowError("flatbuffer vector runs past the message")
        return [struct.unpack_from("<" + fmt, self.buf, at + 4 + i * size) for i in range(n)]


# ---------------------------------------------------------------------------------------------
# schema and columns
# ---------------------------------------------------------------------------------------------


@dataclass
class ArrowField:
    name: str
    type_id: int
    bit_width: int = 0  # Int
    signed: bool = True  # Int
    precision: int = 0  # FloatingPoint: 0 half, 1 single, 2 double
    list_size: int = 0  # FixedSizeList / FixedSizeBinary
    dictionary: bool = False
    children: list[ArrowField] = field(default_factory=list)

    @property
    def type_name(self) -> str:
        name = _TYPE_NAMES.get(self.type_id, f"type#{self.type_id}")
        if self.type_id == _INT:
            return f"{'' if self.signed else 'u'}int{self.bit_width}"
        if self.type_id == _FLOAT:
            return ("float16", "float32", "float64")[self.precision]
        if self.children:
            return f"{name}<{', '.join(c.type_name for c in self.children)}>"
        return name


def _field(t: _Table) -> ArrowField:
    f = ArrowField(t.string(0) or "", int(t.scalar(2, "B")))
    typ = t.table(3)
    if f.type_id == _INT and typ is not None:
        f.bit_width, f.signed = int(typ.scalar(0, "i")), bool(typ.scalar(1, "?"))
    elif f.type_id == _FLOAT and typ is not None:
        f.precision = int(typ.scalar(0, "h"))
    elif f.type_id in (_FIXED_SIZE_LIST, _FIXED_SIZE_BINARY) and typ is not None:
        f.list_size = int(typ.scalar(0, "i"))
    f.dictionary = t.table(4) is not None
    f.children = [_field(c) for c in t.tables(5)]
    return f


def _np_dtype(f: ArrowField) -> np.dtype:
    if f.type_id == _INT:
        if f.bit_width not in (8, 16, 32, 64):
            raise ArrowError(f"column {f.name!r}: integer width {f.bit_width}")
        return np.dtype(f"<{'i' if f.signed else 'u'}{f.bit_width // 8}")
    if f.type_id == _FLOAT:
        return np.dtype(("<f2", "<f4", "<f8")[f.precision])
    raise ArrowError(f"column {f.name!r} of type {f.type_name} has no numeric dtype")


@dataclass
class _Column:
    """One field of one record batch: its node and buffers (views into the file)."""

    field: ArrowField
    length: int
    null_count: int
    buffers: list[memoryview]
    children: list[_Column]

    def _values(self) -> np.ndarray:
        f = self.field
        if f.type_id == _BOOL:
            bits = np.frombuffer(self.buffers[1], dtype=np.uint8)
            return np.unpackbits(bits, bitorder="little")[: self.length].astype(bool)
        dt = _np_dtype(f)
        need = self.length * dt.itemsize
        if len(self.buffers[1]) < need:
            raise ArrowError(f"column {f.name!r}: values buffer shorter than its length")
        return np.frombuffer(self.buffers[1], dtype=dt, count=self.length)

    def _offsets(self) -> np.ndarray:
        large = self.field.type_id in (_LARGE_LIST, _LARGE_UTF8, _LARGE_BINARY)
        dt = np.dtype("<i8" if large else "<i4")
        need = (self.length + 1) * dt.itemsize
        if len(self.buffers[1]) < need:
            raise ArrowError(f"column {self.field.name!r}: offsets buffer shorter than its length")
        return np.frombuffer(self.buffers[1], dtype=dt, count=self.length + 1)

    def _null(self, row: int) -> bool:
        if not self.null_count or not len(self.buffers[0]):
            return False
        return not (self.buffers[0][row >> 3] >> (row & 7)) & 1

    def row(self, row: int) -> Any:
        """The value at ``row``: a numpy array for (large) lists of numbers/bools, a scalar, a str,
        a dict for structs; ``None`` for a null."""
        f = self.field
        if self._null(row):
            return None
        if f.type_id in (_INT, _FLOAT, _BOOL):
            return self._values()[row].item()
        if f.type_id in (_LIST, _LARGE_LIST):
            off = self._offsets()
            lo, hi = int(off[row]), int(off[row + 1])
            return self.children[0].slice(lo, hi)
        if f.type_id == _FIXED_SIZE_LIST:
            n = f.list_size
            return self.children[0].slice(row * n, (row + 1) * n)
        if f.type_id in (_UTF8, _LARGE_UTF8, _BINARY, _LARGE_BINARY):
            off = self._offsets()
            raw = bytes(self.buffers[2][int(off[row]) : int(off[row + 1])])
            return raw.decode("utf-8", "replace") if f.type_id in (_UTF8, _LARGE_UTF8) else raw
        if f.type_id == _STRUCT:
            return {c.field.name: c.row(row) for c in self.children}
        if f.type_id == _NULL:
            return None
        raise ArrowError(f"column {f.name!r}: reading type {f.type_name} is not supported")

    def slice(self, lo: int, hi: int) -> Any:
        """Rows ``lo..hi`` of a child array: a numpy array for numbers/bools, else a list."""
        if not 0 <= lo <= hi <= self.length:
            raise ArrowError(f"column {self.field.name!r}: list offsets out of range")
        if self.field.type_id in (_INT, _FLOAT, _BOOL):
            return self._values()[lo:hi]
        return [self.row(i) for i in range(lo, hi)]


@dataclass
class _Batch:
    length: int
    columns: dict[str, _Column]


def _assemble(
    f: ArrowField,
    nodes: list[tuple[int, int]],
    bufs: list[tuple[int, int]],
    body: memoryview,
    cursor: list[int],
) -> _Column:
    if f.dictionary:
        raise ArrowError(f"column {f.name!r} is dictionary-encoded (not supported)")
    if f.type_id not in _BUFFERS:
        raise ArrowError(f"column {f.name!r} has type {f.type_name}, whose layout this reader does not know")
    ni, bi = cursor
    if ni >= len(nodes):
        raise ArrowError("record batch has fewer field nodes than the schema has fields")
    length, nulls = nodes[ni]
    n_buf = _BUFFERS[f.type_id]
    if bi + n_buf > len(bufs):
        raise ArrowError("record batch has fewer buffers than the schema needs")
    views = []
    for off, size in bufs[bi : bi + n_buf]:
        if off < 0 or size < 0 or off + size > len(body):
            raise ArrowError("record batch buffer lies outside the message body")
        views.append(body[off : off + size])
    cursor[0], cursor[1] = ni + 1, bi + n_buf
    children = [_assemble(c, nodes, bufs, body, cursor) for c in f.children]
    if length < 0 or nulls < 0:
        raise ArrowError("negative length in a record batch")
    return _Column(f, int(length), int(nulls), views, children)


# ---------------------------------------------------------------------------------------------
# the stream
# ---------------------------------------------------------------------------------------------


class ArrowStream:
    """An Arrow IPC stream (or file) opened with a memory map: schema, row count, rows by index."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            with open(self.path, "rb") as fh:
                self._mm: mmap.mmap | None = (
                    mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if self.path.stat().st_size else None
                )
        except OSError as exc:
            raise ArrowError(f"cannot open {self.path.name}: {exc.strerror or exc}") from None
        self.buf = memoryview(self._mm) if self._mm is not None else memoryview(b"")
        self.fields: list[ArrowField] = []
        self.metadata: dict[str, str] = {}
        self._batches: list[_Batch] = []
        self._starts: list[int] = []
        try:
            self._parse()
        except (struct.error, ValueError, IndexError, RecursionError) as exc:  # offsets that point nowhere
            self.close()
            raise ArrowError(
                f"malformed Arrow metadata in {self.path.name}: {' '.join(str(exc).split())[:120]}"
            ) from None
        except ArrowError:
            self.close()
            raise

    def close(self) -> None:
        self._batches = []
        try:  # views handed out (rows still referenced) keep the map alive; then the GC closes it
            self.buf.release()
            if self._mm is not None:
                self._mm.close()
        except BufferError:
            pass
        self._mm = None

    def __enter__(self) -> ArrowStream:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def num_rows(self) -> int:
        return sum(b.length for b in self._batches)

    @property
    def column_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def _messages(self) -> Any:
        buf = self.buf
        pos = 8 if bytes(buf[:6]) == FILE_MAGIC else 0
        while True:
            if pos + 4 > len(buf):
                if pos == len(buf) and self.fields:
                    return  # a stream written without the end-of-stream marker
                raise ArrowError("truncated Arrow stream (no end-of-stream marker)")
            size = struct.unpack_from("<I", buf, pos)[0]
            pos += 4
            if size == CONTINUATION:
                if pos + 4 > len(buf):
                    raise ArrowError("truncated Arrow stream (message length missing)")
                size = struct.unpack_from("<i", buf, pos)[0]
                pos += 4
            if size == 0:
                return
            if size < 0 or pos + size > len(buf):
                raise ArrowError("truncated Arrow stream (message header cut off)")
            meta = buf[pos : pos + size]
            pos += size
            msg = _Table(meta, int(struct.unpack_from("<I", meta, 0)[0]))
            body_len = int(msg.scalar(3, "q"))
            if body_len < 0 or pos + body_len > len(buf):
                raise ArrowError("truncated Arrow stream (message body cut off)")
            yield msg, buf[pos : pos + body_len]
            pos += body_len

    def _parse(self) -> None:
        if not len(self.buf):
            raise ArrowError(f"{self.path.name} is empty")
        rows = 0
        for msg, body in self._messages():
            kind = int(msg.scalar(1, "B"))
            header = msg.table(2)
            if header is None:
                raise ArrowError("Arrow message without a header")
            if kind == _SCHEMA:
                if int(header.scalar(0, "h")) != 0:
                    raise ArrowError("big-endian Arrow data is not supported")
                self.fields = [_field(t) for t in header.tables(1)]
                for kv in header.tables(2):
                    self.metadata[kv.string(0) or ""] = kv.string(1) or ""
            elif kind == _RECORD_BATCH:
                if not self.fields:
                    raise ArrowError("record batch before the schema")
                if header.table(3) is not None:
                    raise ArrowError("compressed Arrow record batches are not supported")
                length = int(header.scalar(0, "q"))
                nodes = [(int(a), int(b)) for a, b in header.structs(1, "qq")]
                bufs = [(int(a), int(b)) for a, b in header.structs(2, "qq")]
                cursor = [0, 0]
                cols = {}
                for f in self.fields:  # depth-first, as the nodes and buffers are listed
                    cols[f.name] = _assemble(f, nodes, bufs, body, cursor)
                self._batches.append(_Batch(length, cols))
                self._starts.append(rows)
                rows += length
            elif kind == _DICTIONARY_BATCH:
                raise ArrowError("dictionary-encoded Arrow columns are not supported")
        if not self.fields:
            raise ArrowError(f"{self.path.name} has no Arrow schema")

    def value(self, column: str, row: int) -> Any:
        """Row ``row`` (0-based over the whole stream) of ``column``."""
        if column not in self.column_names:
            raise KeyError(column)
        if not 0 <= row < self.num_rows:
            raise IndexError(row)
        i = int(np.searchsorted(np.asarray(self._starts), row, side="right")) - 1
        batch = self._batches[i]
        try:
            return batch.columns[column].row(row - self._starts[i])
        except (struct.error, ValueError, IndexError, TypeError) as exc:
            raise ArrowError(f"column {column!r} row {row}: {' '.join(str(exc).split())[:120]}") from None


# ---------------------------------------------------------------------------------------------
# writing (the demo's speculators dumps)
# ---------------------------------------------------------------------------------------------


class _Builder:
    """Forward-only flatbuffer writer: every offset points ahead, vtables sit just before their table."""

    def __init__(self) -> None:
        self.buf = bytearray(4)  # root offset, patched by finish()

    def _pad(self, align: int, extra: int = 0) -> None:
        while (len(self.buf) + extra) % align:
            self.buf.append(0)

    def table(self, fields: Sequence[tuple[int, str, Any]]) -> int:
        """Write a table: ``fields`` are ``(slot, fmt, value)`` with ``fmt`` a struct code or ``"o"``
        (an offset to a child written by a callable ``value(builder) -> position``)."""
        n_slots = max((s for s, _, _ in fields), default=-1) + 1
        order = sorted(fields, key=lambda x: -struct.calcsize("<" + ("I" if x[1] == "o" else x[1])))
        layout: list[tuple[int, str, Any, int]] = []
        at = 4
        for slot, fmt, value in order:
            size = struct.calcsize("<" + ("I" if fmt == "o" else fmt))
            while (at + 4) % size:  # table start is 4 below an 8-aligned position
                at += 1
            layout.append((slot, fmt, value, at))
            at += size
        table_size = at + (-at) % 4
        offs = [0] * n_slots
        for slot, _, _, rel in layout:
            offs[slot] = rel
        vtable = struct.pack(f"<HH{n_slots}H", 4 + 2 * n_slots, table_size, *offs)
        self._pad(8, len(vtable) + 4)
        vt_pos = len(self.buf)
        self.buf += vtable
        pos = len(self.buf)
        assert (pos + 4) % 8 == 0
        self.buf += bytes(table_size)
        struct.pack_into("<i", self.buf, pos, pos - vt_pos)
        children = []
        for _slot, fmt, value, rel in layout:
            if fmt == "o":
                children.append((pos + rel, value))
            else:
                struct.pack_into("<" + fmt, self.buf, pos + rel, value)
        for where, make in children:
            target = make(self)
            struct.pack_into("<I", self.buf, where, target - where)
        return pos

    def string(self, text: str) -> int:
        raw = text.encode()
        self._pad(4)
        pos = len(self.buf)
        self.buf += struct.pack("<I", len(raw)) + raw + b"\0"
        return pos

    def tables(self, makers: Sequence[Any]) -> int:
        self._pad(4)
        pos = len(self.buf)
        self.buf += struct.pack("<I", len(makers)) + bytes(4 * len(makers))
        for i, make in enumerate(makers):
            where = pos + 4 + 4 * i
            target = make(self)
            struct.pack_into("<I", self.buf, where, target - where)
        return pos

    def structs(self, items: Sequence[tuple[int, int]]) -> int:
        self._pad(8, 4)
        pos = len(self.buf)
        self.buf += struct.pack("<I", len(items))
        for a, b in items:
            self.buf += struct.pack("<qq", a, b)
        return pos

    def finish(self, root: Any) -> bytes:
        target = root(self)
        struct.pack_into("<I", self.buf, 0, target)
        self._pad(8)
        return bytes(self.buf)


def _type_fields(kind: str) -> tuple[int, list[tuple[int, str, Any]]]:
    if kind in ("int64", "int32"):
        return _INT, [(0, "i", 64 if kind == "int64" else 32), (1, "?", True)]
    if kind == "bool":
        return _BOOL, []
    if kind in ("list<int64>", "list<bool>", "list<int32>"):
        return _LIST, []
    raise ValueError(f"unsupported column kind {kind!r}")


def _field_maker(name: str, kind: str) -> Any:
    type_id, type_fields = _type_fields(kind)
    child = kind[5:-1] if kind.startswith("list<") else None

    def make(b: _Builder) -> int:
        fields: list[tuple[int, str, Any]] = [
            (0, "o", lambda bb: bb.string(name)),
            (1, "?", True),
            (2, "B", type_id),
            (3, "o", lambda bb: bb.table(type_fields)),
        ]
        fields.append((5, "o", lambda bb: bb.tables([_field_maker("item", child)] if child else [])))
        return b.table(fields)

    return make


def _message(header_type: int, header: Any, body_len: int) -> bytes:
    b = _Builder()
    return b.finish(
        lambda bb: bb.table(
            [(0, "h", METADATA_V5), (1, "B", header_type), (2, "o", header), (3, "q", body_len)]
        )
    )


def _encapsulate(meta: bytes, body: bytes = b"") -> bytes:
    meta += bytes((-len(meta)) % 8)
    return struct.pack("<Ii", CONTINUATION, len(meta)) + meta + body


def _bitmap(values: np.ndarray) -> bytes:
    return np.packbits(values.astype(bool), bitorder="little").tobytes()


def write_stream(
    path: str | Path,
    columns: dict[str, tuple[str, list[Any]]],
    metadata: dict[str, str] | None = None,
) -> None:
    """Write one record batch as an Arrow IPC stream: ``columns`` maps a name to ``(kind, rows)``
    with kind ``int64``/``int32``/``bool`` (scalars) or ``list<int64>``/``list<int32>``/``list<bool>``
    (one sequence per row). No nulls. Byte-identical for identical input."""
    names = list(columns)
    n_rows = {len(rows) for _, rows in columns.values()}
    if len(n_rows) != 1:
        raise ValueError("all columns need the same number of rows")
    length = n_rows.pop()
    nodes: list[tuple[int, int]] = []
    bufs: list[tuple[int, int]] = []
    body = bytearray()

    def add(raw: bytes) -> None:
        bufs.append((len(body), len(raw)))
        body.extend(raw)
        body.extend(bytes((-len(body)) % 8))

    for name in names:
        kind, rows = columns[name]
        nodes.append((length, 0))
        add(b"")  # no validity bitmap: no nulls
        if kind.startswith("list<"):
            child = kind[5:-1]
            arrays = [np.asarray(r) for r in rows]
            off = np.zeros(length + 1, dtype="<i4")
            off[1:] = np.cumsum([a.shape[0] for a in arrays]) if arrays else []
            add(off.tobytes())
            flat = np.concatenate(arrays) if arrays else np.zeros(0)
            nodes.append((int(flat.shape[0]), 0))
            add(b"")
            add(
                _bitmap(flat)
                if child == "bool"
                else flat.astype("<i8" if child == "int64" else "<i4").tobytes()
            )
        elif kind == "bool":
            add(_bitmap(np.asarray(rows)))
        else:
            add(np.asarray(rows).astype("<i8" if kind == "int64" else "<i4").tobytes())

    meta_items = sorted((metadata or {}).items())

    def key_value(k: str, v: str) -> Any:
        return lambda b: b.table([(0, "o", lambda bb: bb.string(k)), (1, "o", lambda bb: bb.string(v))])

    def schema(b: _Builder) -> int:
        fields: list[tuple[int, str, Any]] = [
            (0, "h", 0),
            (1, "o", lambda bb: bb.tables([_field_maker(n, columns[n][0]) for n in names])),
        ]
        if meta_items:
            fields.append((2, "o", lambda bb: bb.tables([key_value(k, v) for k, v in meta_items])))
        return b.table(fields)

    def batch(b: _Builder) -> int:
        return b.table(
            [
                (0, "q", length),
                (1, "o", lambda bb: bb.structs(nodes)),
                (2, "o", lambda bb: bb.structs(bufs)),
            ]
        )

    out = _encapsulate(_message(_SCHEMA, schema, 0))
    out += _encapsulate(_message(_RECORD_BATCH, batch, len(body)), bytes(body))
    out += struct.pack("<Ii", CONTINUATION, 0)
    Path(path).write_bytes(out)


__all__ = ["ArrowError", "ArrowField", "ArrowStream", "write_stream"]
