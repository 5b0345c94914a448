"""Teacher-forced estimate and the aux-layer sweep: what acceptance a drafter *should* reach.

Over the target's own greedy continuations, each drafting slot is scored per draft step (top-1 of
the drafter against the target's greedy label). Everything a report shows is derived from plain
counts — slots, hits per step, slots where every step so far hit — in
:meth:`TeacherForced.from_counts`, so a caller that scores slots another way (e.g. from dumped
hidden states) gets the same metrics. :data:`CONVENTIONS` names the convention of every number the
probes report (``docs/reference/acceptance.md`` §2, §3).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from eagle3_forensics.errors import UnusableInputError

if TYPE_CHECKING:
    from eagle3_forensics.reference.drafter.model import Eagle3Drafter
    from eagle3_forensics.reference.target import TargetModel

SWEEP_OFFSETS = (-1, 0, 1)

CONVENTIONS: dict[str, str] = {
    "acceptance_length": "vLLM: 1 + accepted / num_drafts; includes the bonus token; in [1, K+1]. SGLang's "
    "spec_accept_length (completion_tokens / verify steps) equals it up to the prefill token.",
    "mean_accepted_drafts": "accepted / num_drafts: EAGLE's accept_length, excludes the bonus token.",
    "acceptance_rate": "vLLM draft acceptance rate: accepted / drafted; excludes the bonus token, depends on K.",
    "per_position.cumulative": "vLLM: accepted_per_pos[i] / num_drafts (draft i accepted, so 0..i-1 were too); "
    "acceptance_length = 1 + sum.",
    "per_position.conditional": "per_pos[i] / per_pos[i-1] (per_pos[-1] = num_drafts): P(draft i accepted | 0..i-1 "
    "accepted).",
    "teacher_forced.accuracy": "unconditional top-1 per draft step over teacher-forced greedy text (EAGLE/SpecForge "
    "acc_k, speculators full_acc_k).",
    "teacher_forced.conditional_accuracy": "step-k accuracy where steps < k were right (speculators cond_acc_k).",
    "teacher_forced.simulated_acceptance_length": "1 + Σ_k Π_{j≤k} cond_acc_j, truncated at K; includes the bonus "
    "token (SpecForge's simulated_acc_len excludes it and uses "
    "unconditional acc: see simulated_acceptance_length_unconditional).",
}


def _ratio(hits: int, total: int) -> float:
    """``hits / total`` in float32: the figures recorded before counts were separated were float32
    means of boolean tensors, and this keeps them bit-identical."""
    return float(np.float32(hits) / np.float32(total))


def hit_counts(correct: Sequence[torch.Tensor]) -> tuple[int, list[int], list[int]]:
    """``(slots, hits, prefix_hits)`` from per-step boolean tensors over the same slots.

    ``hits[j]``: slots where step ``j`` was right; ``prefix_hits[j]``: slots where steps ``0..j``
    all were (what a chain accepts)."""
    slots = int(correct[0].numel()) if correct else 0
    hits, prefix = [], []
    alive = torch.ones(slots, dtype=torch.bool)
    for x in correct:
        hits.append(int(x.sum()))
        alive = alive & x.bool()
        prefix.append(int(alive.sum()))
    return slots, hits, prefix


@dataclass
class TeacherForced:
    """Teacher-forced per-step accuracy over the target's own greedy text."""

    k: int
    aux_ids: list[int]
    positions: int
    accuracy: list[float]
    conditional_accuracy: list[float]
    cumulative: list[float]

    @classmethod
    def from_counts(
        cls, k: int, aux_ids: Sequence[int], positions: int, hits: Sequence[int], prefix_hits: Sequence[int]
    ) -> TeacherForced:
        """The estimate from plain counts over ``positions`` drafting slots (see :func:`hit_counts`):
        ``hits[j]`` slots where draft step ``j`` was right, ``prefix_hits[j]`` slots where steps
        ``0..j`` all were. Accuracy is ``hits / positions``; conditional accuracy is
        ``prefix_hits[j] / prefix_hits[j-1]`` (``prefix_hits[-1] = positions``); cumulative is
        ``prefix_hits / positions``."""
        if len(hits) != k or len(prefix_hits) != k:
            raise UnusableInputError(
                f"teacher-forced counts for {len(hits)}/{len(prefix_hits)} steps, expected K={k}"
            )
        if positions <= 0:
            raise UnusableInputError(
                "no teacher-forced positions: use longer continuations (--max-new-tokens > K)"
            )
        if any(not 0 <= h <= positions for h in hits) or any(
            not 0 <= b <= a for a, b in zip([positions, *prefix_hits], prefix_hits, strict=False)
        ):
            raise UnusableInputError(
                f"inconsistent teacher-forced counts: positions {positions}, hits {list(hits)}, "
                f"all-correct prefixes {list(prefix_hits)}"
            )
        acc = [_ratio(h, positions) for h in hits]
        cond, prev = [], positions
        for p in prefix_hits:
            cond.append(_ratio(p, prev) if prev else 0.0)
            prev = p
        cum = [_ratio(p, positions) for p in prefix_hits]
        return cls(k, list(aux_ids), positions, acc, cond, cum)

    @property
    def simulated_acceptance_length(self) -> float:
        total, prod = 1.0, 1.0
        for c in self.conditional_accuracy:
            prod *= c
            total += prod
        return total

    @property
    def simulated_acceptance_length_unconditional(self) -> float:
        total, prod = 1.0, 1.0
        for a in self.accuracy:
            prod *= a
            total += prod
        return total

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "aux_ids_hf": self.aux_ids,
            "positions": self.positions,
            "accuracy": self.accuracy,
            "conditional_accuracy": self.conditional_accuracy,
            "cumulative": self.cumulative,
            "simulated_acceptance_length": self.simulated_acceptance_length,
            "simulated_acceptance_length_unconditional": self.simulated_acceptance_length_unconditional,
            "convention": CONVENTIONS["teacher_forced.simulated_acceptance_length"],
        }


@dataclass
class TeacherForcedData:
    """Target pass over each teacher-forced sequence: hidden states by HF index and greedy labels."""

    sequences: list[list[int]]
    starts: list[int]  # first drafting slot (= prompt length - 1)
    hidden: list[dict[int, torch.Tensor]]
    labels: list[torch.Tensor]  # labels[s][p] = target argmax after tokens 0..p


def teacher_forced_data(
    target: TargetModel, prompts: Sequence[list[int]], continuations: Sequence[list[int]], ids: Iterable[int]
) -> TeacherForcedData:
    want = sorted(set(ids))
    seqs, starts, hidden, labels = [], [], [], []
    for prompt, cont in zip(prompts, continuations, strict=True):
        seq = [*prompt, *cont]
        step = target.forward(seq, None, want)
        seqs.append(seq)
        starts.append(len(prompt) - 1)
        hidden.append(step.hidden)
        labels.append(step.logits.argmax(-1).cpu())
    return TeacherForcedData(seqs, starts, hidden, labels)


@torch.inference_mode()
def score_sequence(
    drafter: Eagle3Drafter,
    aux: torch.Tensor,
    seq: torch.Tensor,
    slots: torch.Tensor,
    labels: torch.Tensor,
    k: int,
) -> list[torch.Tensor]:
    """Per draft step ``j``, whether the drafter's top-1 (mapped to a target id) equals
    ``labels[t+1+j]`` at each slot ``t`` of one sequence, under teacher forcing (EAGLE-3's
    training-time test). ``aux`` holds the target features ``[T, k*H]`` (feature ``t`` is paired
    with token ``t+1``); the probe (live text) and probe-offline (dumps) both score through this."""
    dev = drafter.device
    s = int(seq.shape[0]) - 1  # slots 0..T-2
    tmap = drafter.target_ids().cpu()
    steps = []
    for j in range(k):
        toks = torch.zeros(s, dtype=torch.long)
        avail = seq[1 + j :]
        toks[: avail.shape[0]] = avail[:s]
        steps.append(toks.to(dev)[None])
    outs = drafter.ttt_forward(aux[:s].to(dev)[None], steps)
    at = slots.to(dev)
    return [
        tmap[drafter.logits(out[0, at]).argmax(-1).cpu()] == labels[slots + 1 + j]
        for j, out in enumerate(outs)
    ]


@torch.inference_mode()
def teacher_forced_estimate(
    drafter: Eagle3Drafter, data: TeacherForcedData, k: int, aux_ids: Sequence[int] | None = None
) -> TeacherForced:
    """Per-step accuracy of ``drafter`` under teacher forcing (EAGLE-3's training-time test)."""
    ids = list(drafter.aux_ids if aux_ids is None else aux_ids)
    correct: list[list[torch.Tensor]] = [[] for _ in range(k)]
    for seq, start, hid, lab in zip(data.sequences, data.starts, data.hidden, data.labels, strict=True):
        last = len(seq) - k  # slot t needs labels up to position t+k
        if last <= start:
            continue
        aux = torch.cat([hid[i] for i in ids], dim=-1)
        steps = score_sequence(
            drafter, aux, torch.tensor(seq, dtype=torch.long), torch.arange(start, last), lab, k
        )
        for j, step_hits in enumerate(steps):
            correct[j].append(step_hits)
    if not correct[0]:
        raise UnusableInputError(
            "no teacher-forced positions: use longer continuations (--max-new-tokens > K)"
        )
    positions, hits, prefix_hits = hit_counts([torch.cat(x) for x in correct])
    return TeacherForced.from_counts(k, ids, positions, hits, prefix_hits)


@dataclass
class AuxSweep:
    """Teacher-forced estimate with the aux ids shifted by each offset."""

    base_ids: list[int]
    results: dict[int, TeacherForced | None]  # offset -> estimate (None: shifted ids leave the target)

    @property
    def scores(self) -> dict[int, float | None]:
        return {o: (None if r is None else r.simulated_acceptance_length) for o, r in self.results.items()}

    @property
    def best_offset(self) -> int:
        valid = {o: s for o, s in self.scores.items() if s is not None}
        return max(valid, key=lambda o: (valid[o], -abs(o)))

    @property
    def margin(self) -> float:
        """How much the best offset beats offset 0 (or, when 0 wins, the runner-up), in acceptance length."""
        valid = {o: s for o, s in self.scores.items() if s is not None}
        best = self.best_offset
        others = [s for o, s in valid.items() if o != best]
        if best != 0 and 0 in valid:
            return valid[best] - valid[0]
        return valid[best] - max(others) if others else 0.0

    def to_dict(self) -> dict[str, Any]:
        best = self.best_offset
        return {
            "base_aux_ids_hf": self.base_ids,
            "offsets": {
                str(o): {
                    "aux_ids_hf": None if r is None else r.aux_ids,
                    "simulated_acceptance_length": None if r is None else r.simulated_acceptance_length,
                    "accuracy": None if r is None else r.accuracy,
                }
                for o, r in self.results.items()
            },
            "best_offset": best,
            "best_aux_ids_hf": [i + best for i in self.base_ids],
            "margin": self.margin,
            "verdict": (
                "the aux ids as read are the best of the three"
                if best == 0
                else f"shifting the aux ids by {best:+d} (to HF {[i + best for i in self.base_ids]}) "
                f"raises the simulated acceptance length by {self.margin:.2f}"
            ),
        }


def aux_sweep(
    drafter: Eagle3Drafter,
    data: TeacherForcedData,
    k: int,
    num_layers: int,
    offsets: Sequence[int] = SWEEP_OFFSETS,
) -> AuxSweep:
    results: dict[int, TeacherForced | None] = {}
    for off in offsets:
        ids = [i + off for i in drafter.aux_ids]
        results[off] = (
            teacher_forced_estimate(drafter, data, k, ids) if all(0 <= i <= num_layers for i in ids) else None
        )
    return AuxSweep(list(drafter.aux_ids), results)
