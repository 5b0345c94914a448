"""Bounded reading of dump samples whose sizes someone else wrote.

A SpecForge ``data_<i>.ckpt.gz`` of 8 MB can expand to 8 GiB; reading it whole (compressed bytes,
expansion, torch's copy) took 16.6 GB of RSS. Here a sample is decompressed as a stream and given
up as soon as it passes a cap, and an uncompressed sample larger than the cap is never opened.

The cap comes from the layout, not from a small constant: what one sample of the declared widths
can occupy at a sane maximum length (hidden size × states × tokens × 4 bytes, plus the token ids
and slack). Kimi-K2.5 (hidden 7168, 3 aux states + the last) at 4096 tokens in bf16 is about
235 MB, legitimately; the cap from its config (262144 positions) is 3.5 GiB. ``--max-sample-bytes`` overrides it.
With no config to read (``audit-data`` without ``--target`` or a drafter), the cap comes from the
layout of the other samples of the same dataset (``DumpSet`` learns it from a few of them).

A gzip stream is decompressed once while it stays small (up to :data:`HOLD` bytes held); past
that the chunks are dropped and the rest is only counted, so a sample over the cap is skipped
without ever being held, and one under it is decompressed a second time into a buffer of its
exact size.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Any

from eagle3_forensics.errors import UnusableInputError

MAX_TOKENS = 32768  # a sane maximum sample length: beyond what EAGLE-3 trainers dump per sample
STATE_BYTES = 4  # fp32, the widest dtype a trainer dumps (bf16/fp16 take half)
DEFAULT_STATES = 4  # EAGLE-3: three aux layers plus the last hidden state
FALLBACK_HIDDEN = 8192  # no config to read: a large target's width
SLACK = 16 << 20  # pickle framing, masks, small tensors
CHUNK = 1 << 20
HOLD = 64 << 20  # decompressed bytes held on the first pass; a larger stream is counted, then reread


class SampleTooLargeError(ValueError):
    """A sample that would pass the cap (never read in full)."""


def layout_cap(hidden_size: int | None, states: int | None = None, max_tokens: int | None = None) -> int:
    """Bytes one sample of this layout can occupy: ``hidden × states × tokens × 4`` plus ids and slack."""
    h = hidden_size if hidden_size and hidden_size > 0 else FALLBACK_HIDDEN
    s = states if states and states > 0 else DEFAULT_STATES
    t = min(max_tokens, MAX_TOKENS) if max_tokens and max_tokens > 0 else MAX_TOKENS
    return h * s * t * STATE_BYTES + t * 8 * 3 + SLACK  # ids, mask, loss mask as int64 at worst


def cap_from_configs(*dirs: str | Path | None) -> int:
    """:func:`layout_cap` from the widest hidden size, aux-layer count and max length that the
    ``config.json`` of the given drafter/target directories declare (unreadable ones are skipped)."""
    cap = declared_cap(*dirs)
    return layout_cap(None) if cap is None else cap


def declared_cap(*dirs: str | Path | None) -> int | None:
    """:func:`cap_from_configs`, or None when no readable config declares a hidden size (then the
    caller learns the cap from the data: ``open_dumps(max_sample_bytes=None)``)."""
    hidden: list[int] = []
    states: list[int] = []
    tokens: list[int] = []
    for d in dirs:
        cfg = _config(d)
        if cfg is None:
            continue
        for node in (cfg, cfg.get("transformer_layer_config"), cfg.get("text_config")):
            if not isinstance(node, dict):
                continue
            for key in ("target_hidden_size", "hidden_size"):
                if _int(node.get(key)):
                    hidden.append(int(node[key]))
            if _int(node.get("max_position_embeddings")):
                tokens.append(int(node["max_position_embeddings"]))
        eagle = cfg.get("eagle_config")
        aux = (eagle if isinstance(eagle, dict) else cfg).get("eagle_aux_hidden_state_layer_ids")
        if isinstance(aux, list) and aux:
            states.append(len(aux) + 1)
    if not hidden:
        return None
    return layout_cap(max(hidden), max(states, default=None), max(tokens, default=None))


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 < v < 1 << 40


def _config(d: str | Path | None) -> dict[str, Any] | None:
    if d is None:
        return None
    from eagle3_forensics.io.checkpoint import read_json  # heavy: numpy, safetensors

    p = Path(d)
    f = p / "config.json" if p.is_dir() else p
    try:
        cfg = read_json(f, "config") if f.is_file() and f.stat().st_size < 1 << 24 else None
    except (UnusableInputError, OSError):
        return None
    return cfg if isinstance(cfg, dict) else None


def check_size(path: Path, cap: int) -> int:
    """The size of an uncompressed sample file; :class:`SampleTooLargeError` when over ``cap``."""
    size = path.stat().st_size
    if size > cap:
        raise SampleTooLargeError(_over(size, cap, "holds"))
    return size


def gunzip_capped(path: Path, cap: int) -> bytes | bytearray:
    """The decompressed contents of ``path``, read as a stream and given up past ``cap`` bytes.

    Up to :data:`HOLD` bytes are held while reading; a longer stream is only counted (its chunks
    dropped) and, when it ends within the cap, decompressed again into one buffer of its size. So
    a sample over the cap costs a chunk of memory, never the expansion, and a legitimate large
    one costs its size once. :class:`SampleTooLargeError` past the cap, ``OSError``/``EOFError``
    for a bad stream.
    """
    chunks: list[bytes] = []
    total = 0
    held = True
    with gzip.open(path, "rb") as fh:
        while True:
            chunk = fh.read(min(CHUNK, cap + 1 - total))
            if not chunk:
                break
            total += len(chunk)
            if total > cap:
                chunks.clear()
                raise SampleTooLargeError(_over(total, cap, "expands to", at_least=True))
            if held and total <= HOLD:
                chunks.append(chunk)
            elif held:
                chunks.clear()  # too long to hold on a first pass: count the rest
                held = False
    if held:
        data = b"".join(chunks)
        chunks.clear()
        return data
    return _gunzip_exact(path, total)


def _gunzip_exact(path: Path, size: int) -> bytearray:
    """The second pass: ``size`` decompressed bytes (counted on the first) into one buffer."""
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    with gzip.open(path, "rb") as fh:
        while got < size:
            n = fh.readinto(view[got : got + CHUNK])
            if not n:
                raise EOFError("the gzip stream changed between two reads")
            got += n
    return buf


def gzip_declared_size(path: Path) -> int | None:
    """The size a gzip trailer declares (ISIZE, modulo 4 GiB): written by the writer, so only an
    ordering hint, checked by the capped read."""
    try:
        with path.open("rb") as fh:
            fh.seek(-4, 2)
            return int.from_bytes(fh.read(4), "little")
    except OSError:
        return None


def _over(size: int, cap: int, verb: str, *, at_least: bool = False) -> str:
    what = f"more than {_human(cap)}" if at_least else f"{_human(size)}, more than {_human(cap)}"
    return (
        f"sample {verb} {what}: over the cap one sample of this layout can occupy "
        f"({'skipped: counted as a stream, never held' if at_least else 'skipped unread'}; "
        "--max-sample-bytes raises the cap)"
    )


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


GZIP_ERRORS = (OSError, EOFError, gzip.BadGzipFile, zlib.error)

__all__ = [
    "GZIP_ERRORS",
    "MAX_TOKENS",
    "SampleTooLargeError",
    "cap_from_configs",
    "check_size",
    "declared_cap",
    "gunzip_capped",
    "gzip_declared_size",
    "layout_cap",
]
