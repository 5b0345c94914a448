"""The demo's low-acceptance variants (issue 22): drafters that load fine and still accept little.

Every one shares the healthy drafter's recipe and draft vocabulary, so what differs is the one
cause it is named after:

* ``healthy`` — target-regenerated conversations rendered in thinking mode (the serving mode);
* ``foreign_data`` — the same conversations with responses another sampler wrote (another
  successor map and its plan): the data was not the target's;
* ``no_thinking`` — target-regenerated, but rendered and answered with thinking off: served with
  thinking, the drafter meets reasoning spans it never saw;
* ``short_trained`` — the healthy conversations cut to :attr:`Budget.short_len` tokens (a quarter of
  the serving length): probed on long prompts, it drafts at positions it never trained on;
* ``vocab_no_think_end`` — the healthy weights with a draft vocabulary that lacks ``</think>``
  (the next unused id takes its slot): it can never propose the end of the reasoning span.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from eagle3_forensics.demo.chat_data import ChatSet, foreign, regenerated

NEW_VARIANTS: tuple[str, ...] = ("foreign_data", "no_thinking", "short_trained", "vocab_no_think_end")


@dataclass
class ChatTrainSets:
    healthy: ChatSet
    held: ChatSet
    foreign_data: ChatSet
    no_thinking: ChatSet
    short_trained: ChatSet


def other_successor(n: int, rng: random.Random) -> tuple[int, ...]:
    """Another sampler's successor map: a different cycle through the same facts."""
    order = list(range(n))
    rng.shuffle(order)
    succ = [0] * n
    for i, f in enumerate(order):
        succ[f] = order[(i + 1) % n]
    return tuple(succ)


def build_sets(
    model: Any,
    fast: Any,
    world: Any,
    rngs: Callable[[int], random.Random],
    responses: Callable[..., list[str]],
    budget: Any,
    *,
    stop: int,
    p_follow: float,
    log: Callable[[str], None],
) -> ChatTrainSets:
    """The training sets; ``rngs(stream)`` gives an independent seeded stream per purpose."""
    common = {"length": budget.seq_len, "p_follow": p_follow}
    healthy = regenerated(
        model, fast, world, rngs(60), mode="thinking", n=budget.drafter_seqs, stop=stop, **common
    )
    log(f"healthy data: {healthy.ids.shape[0]} regenerated thinking-mode conversations")
    held = regenerated(
        model,
        fast,
        world,
        rngs(61),
        mode="thinking",
        n=max(2, budget.drafter_seqs // 12),
        stop=stop,
        **common,
    )
    other = other_successor(len(world.facts), rngs(62))
    foreign_set = foreign(
        fast,
        world,
        rngs(63),
        lambda turns, mode: responses(world, turns, mode, other),
        n=budget.drafter_seqs,
        **common,
    )
    no_think = regenerated(
        model, fast, world, rngs(64), mode="non_thinking", n=budget.drafter_seqs, stop=stop, **common
    )
    log("foreign and non-thinking data written")
    # every set also holds the same plain-text rows (the target's greedy continuation of corpus
    # prefixes, loss on the continuation): the demo target serves plain completions too
    plain = plain_rows(model, fast, world, rngs(65), n=budget.drafter_seqs // 2, length=budget.seq_len)
    healthy, foreign_set, no_think = (s.plus(plain) for s in (healthy, foreign_set, no_think))
    return ChatTrainSets(healthy, held, foreign_set, no_think, healthy.cut(budget.short_len))


PLAIN_PROMPT_LEN = 16


def plain_rows(model: Any, fast: Any, world: Any, rng: random.Random, *, n: int, length: int) -> ChatSet:
    """``n`` greedy continuations of ``PLAIN_PROMPT_LEN``-token corpus prefixes to ``length`` tokens."""
    from eagle3_forensics.reference.train import greedy_continue  # heavy: torch, transformers

    rows = [fast(world.document(rng, 4))["input_ids"][:PLAIN_PROMPT_LEN] for _ in range(n)]
    seqs = greedy_continue(model, torch.tensor(rows), length - PLAIN_PROMPT_LEN)
    mask = torch.ones_like(seqs)
    mask[:, :PLAIN_PROMPT_LEN] = 0
    return ChatSet(seqs, mask, "plain")


def without_token(
    healthy: dict[str, torch.Tensor], token: int, lm_head_rows: torch.Tensor
) -> dict[str, torch.Tensor]:
    """The healthy tensors with ``token`` dropped from the draft vocabulary: the smallest unused id
    takes the slot (its ``lm_head`` row from the target's, as the trainers initialise it)."""
    t2d = healthy["t2d"].clone()
    if not bool(t2d[token]):
        raise RuntimeError(f"token {token} is not in the healthy draft vocabulary")
    old_sel = torch.nonzero(t2d).flatten()
    t2d[token] = False
    t2d[int(torch.nonzero(~t2d).flatten()[torch.nonzero(~t2d).flatten() != token][0])] = True
    sel = torch.nonzero(t2d).flatten()
    row_of = {int(t): i for i, t in enumerate(old_sel)}
    head = healthy["lm_head.weight"]
    rows = [head[row_of[int(t)]] if int(t) in row_of else lm_head_rows[int(t)].to(head.dtype) for t in sel]
    out = {k: v.clone() for k, v in healthy.items()}
    out["lm_head.weight"] = torch.stack(rows).contiguous()
    out["t2d"] = t2d
    out["d2t"] = (sel - torch.arange(sel.numel())).to(torch.int64)
    return out
