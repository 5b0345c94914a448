"""Bounded reading of dump samples whose sizes someone else wrote.

A SpecForge ``data_<i>.ckpt.gz`` of 8 MB can expand to 8 GiB; reading it whole (compressed bytes,
expansion, torch's copy) took 16.6 GB of RSS. Here a sample is decompressed as a stream and given
up as soon as it passes a cap, and an uncompressed sample larger than the cap is never opened.

The cap comes from the layout, not from a small constant: what one sample of the declared widths
can occupy at a sane maximum length (hidden size × states × tokens × 4 bytes, plus the token ids
and slack). Kimi-K2.5 (hidden 7168, 3 aux states + the last) at 4096 tokens in bf16 is about
235 MB, legitimately; the cap from its config (262144 positions) is 3.5 GiB. ``--max-sample-bytes`` overrides it.
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
    return layout_cap(max(hidden, default=None), max(states, default=None), max(tokens, default=None))


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


def gunzip_capped(path: Path, cap: int) -> bytes:
    """The decompressed contents of ``path``, read as a stream and given up past ``cap`` bytes.

    Peak memory is about the expansion once (chunks, then one join); the compressed file is never
    held whole. :class:`SampleTooLargeError` past the cap, ``OSError``/``EOFError`` for a bad stream.
    """
    chunks: list[bytes] = []
    total = 0
    with gzip.open(path, "rb") as fh:
        while True:
            chunk = fh.read(min(CHUNK, cap + 1 - total))
            if not chunk:
                break
            total += len(chunk)
            if total > cap:
                raise SampleTooLargeError(_over(total, cap, "expands to", at_least=True))
            chunks.append(chunk)
    data = b"".join(chunks)
    chunks.clear()
    return data


def _over(size: int, cap: int, verb: str, *, at_least: bool = False) -> str:
    what = f"more than {_human(cap)}" if at_least else f"{_human(size)}, more than {_human(cap)}"
    return (
        f"sample {verb} {what}: over the cap one sample of this layout can occupy "
        "(skipped unread; --max-sample-bytes raises the cap)"
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
    "gunzip_capped",
    "layout_cap",
]
