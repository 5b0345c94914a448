"""Live decoding: greedy chain speculative decoding and plain greedy decoding, with their counters.

Per cycle the proposer drafts ``K`` tokens, the target verifies them with **one** forward over
``[bonus, d_1..d_K]`` against its KV cache, the matching prefix plus the target's next token (the
bonus) is committed, and the caches are cropped back. Counters use vLLM's names where they exist.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from eagle3_forensics.probe.proposers import Proposer
    from eagle3_forensics.reference.target import TargetModel


@dataclass
class LiveRun:
    """Counters of live speculative decoding (vLLM's counter names where they exist)."""

    k: int
    num_drafts: int = 0  # verify steps that carried drafts
    drafted: int = 0  # num_draft_tokens
    accepted: int = 0  # num_accepted_tokens
    per_pos: list[int] = field(default_factory=list)  # num_accepted_tokens_per_pos
    new_tokens: int = 0
    seconds: float = 0.0
    outputs: list[list[int]] = field(default_factory=list)
    # per prompt, per verify step: (index in the output of the first draft's position, drafts accepted)
    cycles: list[list[tuple[int, int]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.per_pos:
            self.per_pos = [0] * self.k


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def speculative_decode(
    target: TargetModel, proposer: Proposer, prompt: list[int], k: int, max_new_tokens: int, run: LiveRun
) -> list[int]:
    """Greedy chain speculative decoding of one prompt; counters accumulate in ``run``."""
    aux_ids = proposer.aux_ids
    _sync(target.device)
    t0 = time.perf_counter()
    cache = target.new_cache()
    step = target.forward(prompt, cache, aux_ids)
    bonus = int(step.logits[-1].argmax())
    out = [bonus]
    proposer.start(list(prompt), step.aux, bonus)
    n = len(prompt)  # tokens in the target cache; the bonus sits at position n, not yet cached
    cycles: list[tuple[int, int]] = []
    while len(out) < max_new_tokens:
        drafts = proposer.propose(k)
        valid: list[int] = []
        for d in drafts:
            if not 0 <= d < target.vocab_size:
                break
            valid.append(d)
        step = target.forward([bonus, *valid], cache, aux_ids)
        greedy = step.logits.argmax(-1).tolist()
        n_acc = 0
        while n_acc < len(valid) and valid[n_acc] == greedy[n_acc]:
            n_acc += 1
        bonus = int(greedy[n_acc])
        committed = [*valid[:n_acc], bonus]
        target.crop(cache, n + 1 + n_acc)
        proposer.accept(committed, None if step.aux is None else step.aux[: n_acc + 1])
        n += 1 + n_acc
        cycles.append((len(out), n_acc))  # draft i of this step lands at out[len(out) + i]
        out.extend(committed)
        run.num_drafts += 1
        run.drafted += k
        run.accepted += n_acc
        for i in range(n_acc):
            run.per_pos[i] += 1
    _sync(target.device)
    run.seconds += time.perf_counter() - t0
    out = out[:max_new_tokens]
    run.new_tokens += len(out)
    run.outputs.append(out)
    run.cycles.append(cycles)
    return out


@dataclass
class GreedyRun:
    outputs: list[list[int]] = field(default_factory=list)
    seconds: float = 0.0
    new_tokens: int = 0


def greedy_decode(target: TargetModel, prompt: list[int], max_new_tokens: int, run: GreedyRun) -> list[int]:
    _sync(target.device)
    t0 = time.perf_counter()
    out = target.greedy(prompt, max_new_tokens)
    _sync(target.device)
    run.seconds += time.perf_counter() - t0
    run.new_tokens += len(out)
    run.outputs.append(out)
    return out
