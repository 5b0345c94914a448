"""``repair``'s confirm step: the live acceptance of the source and of the repaired copy, under the engine.

A repair is judged by what the engine will run: the source as the engine loads it, against the copy as
the engine loads it, on the same prompts and the same target continuations (greedy, CPU fp32 by
default, so the figures repeat exactly). A copy that accepts less than the source is refused by the
caller — a fix never lowers acceptance. A source the engine cannot build at all has no "before": any
copy the engine can run is then no worse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.probe.aux_trained import DEFAULT_PROMPTS
from eagle3_forensics.probe.core import load_target, probe, read_prompts

#: acceptance lengths closer than this are equal (the last float digits of a deterministic CPU probe)
EQUAL = 1e-9


@dataclass(frozen=True)
class RepairConfirmation:
    """Live acceptance length under ``engine`` before (the source) and after (the copy)."""

    engine: str
    before: float | None  # None: the engine cannot build the source
    after: float
    prompts: int
    max_new_tokens: int
    k: int
    note: str = ""

    @property
    def lowered(self) -> bool:
        return self.before is not None and self.after < self.before - EQUAL

    @property
    def how(self) -> str:
        return (
            f"live probe under {self.engine}'s view, {self.prompts} prompts × {self.max_new_tokens} new tokens, "
            f"K={self.k}"
        )

    def line(self) -> str:
        before = "not loadable" if self.before is None else f"{self.before:.3f}"
        return f"acceptance length before {before}, after {self.after:.3f} ({self.how}){self.note}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "acceptance_length_before": self.before,
            "acceptance_length_after": self.after,
            "lowered": self.lowered,
            "how": self.how,
        }


def confirm_repair(
    src: str | Path,
    dest: str | Path,
    engine: str,
    target: str | Path,
    prompts: str | Path | Sequence[str] | None = None,
    *,
    max_prompts: int = 4,
    max_new_tokens: int = 24,
    k: int = 3,
    device: str = "cpu",
) -> RepairConfirmation:
    """Probe ``src`` and ``dest`` under ``engine`` on the same prompts (the target loaded once)."""
    if prompts is None:
        texts: list[str] = list(DEFAULT_PROMPTS)
    else:
        texts = read_prompts(prompts) if isinstance(prompts, (str, Path)) else list(prompts)
    texts = texts[: max(1, int(max_prompts))]
    tm = load_target(target, device)
    kw: dict[str, Any] = {"k": k, "max_new_tokens": max_new_tokens, "teacher_forced": False, "sweep": False}
    note = ""
    try:
        before = probe(src, tm, texts, engine=engine, device=device, **kw)
    except UnusableInputError as exc:
        after = probe(dest, tm, texts, engine=engine, device=device, **kw)
        note = f"; the source cannot be built as {engine} loads it: {' '.join(str(exc).split())}"
        return RepairConfirmation(engine, None, after.acceptance_length, len(texts), max_new_tokens, k, note)
    after = probe(dest, tm, texts, engine=engine, device=device, greedy=before.greedy, **kw)
    return RepairConfirmation(
        engine, before.acceptance_length, after.acceptance_length, len(texts), max_new_tokens, k, note
    )


__all__ = ["EQUAL", "RepairConfirmation", "confirm_repair"]
