"""The one shard convention of every command: ``I/N`` (or ``POOL:I/N`` for ``run``), 0-based.

Schedulers count from 0 (Slurm array tasks with ``--array=0-N``, Kubernetes Indexed Jobs'
``JOB_COMPLETION_INDEX``), so ``--shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT`` works as
written for ``run``, ``probe-offline`` and ``audit-data`` alike. ``I == N`` is the 1-based form
older releases of ``run`` took; it is refused by name (exit 2) rather than silently read as
another slice. Low in the layers so the CLI and the runner share this one parser.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from eagle3_forensics.errors import BadArgumentsError, UnusableInputError

CONVENTION = "shards count from 0: I/N with 0 ≤ I < N (e.g. $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)"
_SHARD = re.compile(r"^(?:([A-Za-z0-9_-]+):)?(\d+)/(\d+)$")


@dataclass(frozen=True)
class Shard:
    """Slice ``index`` (from 0) of ``count``, of the jobs of ``pool`` (``None``: of everything)."""

    index: int
    count: int
    pool: str | None = None

    def __str__(self) -> str:
        return f"{self.pool + ':' if self.pool else ''}{self.index}/{self.count}"

    def to_dict(self) -> dict[str, Any]:
        return {"pool": self.pool, "index": self.index, "count": self.count}


def parse_shard(text: str, *, pools: bool = False) -> Shard:
    """``I/N`` (with ``pools``: also ``POOL:I/N``) with ``0 ≤ I < N``; anything else exit 2 naming the convention."""
    m = _SHARD.match(str(text).strip())
    if not m or (m.group(1) and not pools):
        form = "I/N or POOL:I/N, e.g. 1/3 or gpu:0/2" if pools else "I/N, e.g. 3/8"
        raise BadArgumentsError(f"--shard {text!r}: expected {form}; {CONVENTION}")
    index, count = int(m.group(2)), int(m.group(3))
    if count < 1:
        raise BadArgumentsError(f"--shard {text}: N must be at least 1; {CONVENTION}")
    if index == count:
        raise BadArgumentsError(
            f"--shard {text}: I = N is the old 1-based form; {CONVENTION} (here: {index - 1}/{count})"
        )
    if not 0 <= index < count:
        raise BadArgumentsError(f"--shard {text}: I is past N; {CONVENTION}")
    return Shard(index, count, m.group(1))


def parse_pair(text: str | None) -> tuple[int, int] | None:
    """``probe-offline``/``audit-data``'s ``--shard``: ``(I, N)`` or ``None`` when not given."""
    if text is None:
        return None
    s = parse_shard(text)
    return s.index, s.count


class MissingShardsError(UnusableInputError):
    """Parts that leave shards out; ``missing`` lists each with the command line that makes it
    (``None`` when the parts do not say how they were made)."""

    def __init__(self, message: str, missing: list[dict[str, str | None]]) -> None:
        super().__init__(message)
        self.missing = missing


def rerun_command(argv: Sequence[str] | None, have: Shard, want: Shard) -> str | None:
    """The command line of shard ``want``, from ``argv`` (the command line that made shard ``have``).

    ``--shard`` gets ``want``; in ``--out`` the last number equal to ``have``'s index becomes
    ``want``'s (``parts/night/gpu-1`` -> ``gpu-2``). ``None`` when ``argv`` is unknown or its
    ``--out`` does not name the shard (writing two shards to one place would lose one).
    """
    if not argv:
        return None
    args = [str(a) for a in argv]
    out_ok = False
    for i, a in enumerate(args):
        for flag, fix in (("--shard", lambda _v: str(want)), ("--out", lambda v: _renumber(v, have, want))):
            if a == flag and i + 1 < len(args):
                new = fix(args[i + 1])
                if new is None:
                    return None
                args[i + 1] = new
                out_ok |= flag == "--out"
            elif a.startswith(flag + "="):
                new = fix(a.split("=", 1)[1])
                if new is None:
                    return None
                args[i] = f"{flag}={new}"
                out_ok |= flag == "--out"
    return shlex.join(args) if out_ok else None


def _renumber(path: str, have: Shard, want: Shard) -> str | None:
    hits = list(re.finditer(rf"(?<!\d){have.index}(?!\d)", path))
    if not hits:
        return None
    m = hits[-1]
    return path[: m.start()] + str(want.index) + path[m.end() :]


def missing_shards(
    made: Iterable[tuple[Shard, Sequence[str] | None]], count: int, what: str = "shard"
) -> list[dict[str, str | None]]:
    """The shards of ``0..count-1`` (of the pool of ``made``) no part covers, each with a command that
    makes it (from the first part whose command line is known)."""
    parts = list(made)
    have = {s.index for s, _ in parts}
    pool = parts[0][0].pool if parts else None
    model = next(((s, a) for s, a in parts if a), None)
    out: list[dict[str, str | None]] = []
    for i in range(count):
        if i in have:
            continue
        want = Shard(i, count, pool)
        cmd = rerun_command(model[1], model[0], want) if model else None
        out.append({what: str(want), "command": cmd})
    return out


__all__ = [
    "CONVENTION",
    "MissingShardsError",
    "Shard",
    "missing_shards",
    "parse_pair",
    "parse_shard",
    "rerun_command",
]
