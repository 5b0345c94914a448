"""A measurement of the aux layers a drafter was trained on: candidate id sets scored on the target.

Plain data (no torch): :mod:`eagle3_forensics.probe.aux_trained` fills it, the checks read it. Each
candidate (HF ``hidden_states`` indices) carries its teacher-forced simulated acceptance length over all
prompts and per prompt. Whether another set beats a candidate *materially* is decided from the
measurement's own spread: the per-prompt differences to the best set are paired (same prompts, same
target text), and the mean difference must exceed ``t * sd / sqrt(P)`` — Student's t at 95 %
(two-sided) with ``P - 1`` degrees of freedom. With one prompt there is no spread, so nothing is
material; a set that differs nowhere is never material.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: Student's t, 97.5 % quantile, by degrees of freedom (above 30: the normal 1.96)
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def t975(df: int) -> float:
    """Student's t 97.5 % quantile for ``df`` degrees of freedom (interpolated coarsely above 10)."""
    if df <= 0:
        return math.inf
    if df in _T975:
        return _T975[df]
    return 2.09 if df <= 20 else 2.04 if df <= 30 else 1.96


#: the source of a candidate tried only as a neighbour of another set
NEIGHBOUR = "neighbour"


def beats(a: AuxCandidate, b: AuxCandidate) -> bool:
    """``a`` accepts more than ``b`` beyond the noise of their paired per-prompt differences."""
    diffs = [x - y for x, y in zip(a.per_prompt, b.per_prompt, strict=True)]
    p = len(diffs)
    if p < 2:
        return False
    mean = sum(diffs) / p
    return mean > 0 and mean > _noise(diffs)


def _noise(diffs: list[float]) -> float:
    p = len(diffs)
    if p < 2:
        return math.inf
    mean = sum(diffs) / p
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (p - 1))
    return t975(p - 1) * sd / math.sqrt(p)


@dataclass(frozen=True)
class AuxCandidate:
    """One id set (HF index), why it was tried, and its score."""

    ids: tuple[int, ...]
    sources: tuple[str, ...]  # e.g. "config", "vllm captures", "NVIDIA ModelOpt default", "neighbour"
    score: float  # simulated acceptance length over every prompt's slots
    per_prompt: tuple[float, ...]

    @property
    def prior(self) -> int:
        """How much a tie favours this set: the config's ids, then an engine's or trainer's, then a neighbour."""
        if "config" in self.sources:
            return 0
        return 1 if any(s != NEIGHBOUR for s in self.sources) else 2

    @property
    def support(self) -> int:
        """How many engines and trainers would use this set (the consensus a tie goes to)."""
        return sum(s != NEIGHBOUR for s in self.sources)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ids_hf": list(self.ids),
            "sources": list(self.sources),
            "simulated_acceptance_length": self.score,
            "per_prompt": list(self.per_prompt),
        }


@dataclass(frozen=True)
class MeasuredAux:
    """Candidate aux-id sets scored by teacher-forced acceptance on the target (best first)."""

    candidates: tuple[AuxCandidate, ...]
    prompts: int
    positions: int
    k: int
    seconds: float
    how: str

    @property
    def top(self) -> AuxCandidate:
        """The highest-scoring set."""
        return self.candidates[0]

    @property
    def best(self) -> AuxCandidate:
        """The set reported as trained on: of the sets the top one does not beat beyond the noise, the
        config's ids, else an engine's or trainer's set, else the highest-scoring neighbour."""
        tied = [c for c in self.candidates if not beats(self.top, c)]
        return min(tied, key=lambda c: (c.prior, -c.support, -c.score))

    def find(self, ids: list[int] | tuple[int, ...] | None) -> AuxCandidate | None:
        if ids is None:
            return None
        return next((c for c in self.candidates if c.ids == tuple(ids)), None)

    def gap(self, ids: list[int] | tuple[int, ...] | None) -> float | None:
        """How much the best set beats ``ids`` (simulated acceptance length), ``None`` when not scored."""
        c = self.find(ids)
        return None if c is None else self.best.score - c.score

    def noise(self, ids: list[int] | tuple[int, ...] | None) -> float | None:
        """``t * sd / sqrt(P)`` of the per-prompt differences between the best set and ``ids``."""
        c = self.find(ids)
        if c is None:
            return None
        return _noise([b - x for b, x in zip(self.best.per_prompt, c.per_prompt, strict=True)])

    def material(self, ids: list[int] | tuple[int, ...] | None) -> bool:
        """True when the best set beats ``ids`` beyond the measurement's noise."""
        c = self.find(ids)
        return c is not None and beats(self.best, c)

    def summary(self, ids: list[int] | tuple[int, ...] | None) -> str:
        """'trained on (measured) [..]: 3.31 vs 3.07 for [..] (noise ±0.05, 4 prompts)'."""
        c = self.find(ids)
        head = f"trained on (measured) HF {list(self.best.ids)}: {self.best.score:.3f}"
        if c is None or c.ids == self.best.ids:
            return head + f" ({self.how})"
        noise = self.noise(ids)
        spread = "no spread with one prompt" if noise is None or math.isinf(noise) else f"noise ±{noise:.3f}"
        return head + f" vs {c.score:.3f} for HF {list(c.ids)} ({spread}; {self.how})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "best_ids_hf": list(self.best.ids),
            "candidates": [c.to_dict() for c in self.candidates],
            "prompts": self.prompts,
            "positions": self.positions,
            "k": self.k,
            "seconds": round(self.seconds, 3),
            "how": self.how,
        }


__all__ = ["NEIGHBOUR", "AuxCandidate", "MeasuredAux", "beats", "t975"]
