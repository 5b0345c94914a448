"""Small, deterministic trainers for the demo world (CPU, single thread, seeded).

* :func:`train_causal_lm` — next-token training of a Hugging Face causal LM on token batches.
* :func:`greedy_continue` — batched greedy continuation with a KV cache (the drafter's data is the
  target's own output, so teacher forcing matches live drafting).
* :func:`aux_features` — target aux hidden states (HF index convention, see
  :mod:`eagle3_forensics.reference.target`) and greedy labels for whole sequences.
* :func:`train_drafter` — EAGLE-3 training-time test: ``ttt_steps`` teacher-forced draft steps per
  position, cross-entropy against the target's greedy token mapped into the draft vocabulary,
  step ``j`` weighted ``0.8**j`` (EAGLE), positions whose target token is outside the draft
  vocabulary masked out.

Determinism: callers wrap these in :func:`deterministic`, which fixes the thread count to one,
turns on ``torch.use_deterministic_algorithms`` and restores both afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from eagle3_forensics.reference.drafter.model import Eagle3Drafter


@contextlib.contextmanager
def deterministic(seed: int) -> Iterator[None]:
    """One CPU thread, deterministic kernels and a seeded global RNG for the duration."""
    threads = torch.get_num_threads()
    was_det = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was_det)
        torch.set_num_threads(threads)


def _schedule(step: int, steps: int, warmup: int) -> float:
    """Linear warm-up, then linear decay to 10 %."""
    return min(1.0, (step + 1) / warmup) * max(0.1, 1.0 - step / steps)


@dataclass
class TrainLog:
    losses: list[float]

    @property
    def final_loss(self) -> float:
        tail = self.losses[-10:]
        return sum(tail) / len(tail) if tail else float("nan")


def _optimizer_step(
    loss: torch.Tensor,
    params: Iterator[nn.Parameter] | Sequence[nn.Parameter],
    opt: torch.optim.Optimizer,
    sched: torch.optim.lr_scheduler.LRScheduler,
    losses: list[float],
) -> None:
    """Backward, clip to norm 1, step, reset, advance the schedule; record the loss."""
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    sched.step()
    losses.append(float(loss.detach()))


def _log_progress(
    log: Callable[[str], None] | None, what: str, step: int, steps: int, losses: list[float]
) -> None:
    if log is not None and (step % 25 == 0 or step == steps - 1):
        log(f"{what} step {step:4d}/{steps}  loss {losses[-1]:.3f}")


def train_causal_lm(
    model: nn.Module,
    batches: Callable[[int], torch.Tensor],
    steps: int,
    *,
    lr: float = 3e-3,
    warmup: int = 20,
    log: Callable[[str], None] | None = None,
) -> TrainLog:
    """Next-token training; ``batches(step)`` returns a ``[B, T]`` long tensor."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _schedule(s, steps, warmup))
    model.train()
    losses: list[float] = []
    for step in range(steps):
        x = batches(step)
        logits = model(input_ids=x).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        _optimizer_step(loss, model.parameters(), opt, sched, losses)
        _log_progress(log, "target", step, steps, losses)
    model.eval()
    return TrainLog(losses)


@torch.inference_mode()
def greedy_continue(model: nn.Module, prompts: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy continuation of equal-length prompts ``[B, P]`` -> ``[B, P + new_tokens]``."""
    from transformers import DynamicCache  # optional: transformers (the models extra)

    cache = DynamicCache(config=model.config)  # type: ignore[arg-type]
    out = model(input_ids=prompts, cache=cache, use_cache=True)
    nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    seq = [prompts, nxt]
    for _ in range(new_tokens - 1):
        out = model(input_ids=nxt, cache=cache, use_cache=True)
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        seq.append(nxt)
    return torch.cat(seq, dim=1)


@torch.inference_mode()
def aux_features(
    model: nn.Module, seqs: torch.Tensor, aux_ids: Sequence[int], batch: int = 32
) -> tuple[torch.Tensor, torch.Tensor]:
    """(aux ``[N, T, k*H]`` at HF indices ``aux_ids`` (each ``< num_layers``), greedy labels ``[N, T]``).

    ``output_hidden_states[i]`` for ``i < num_layers`` is the input of decoder layer ``i``, the
    same tensor :class:`~eagle3_forensics.reference.target.TargetModel` captures with hooks.
    """
    n_layers = int(getattr(model, "config").num_hidden_layers)  # noqa: B009 - nn.Module has no typed config
    if any(not 0 <= i < n_layers for i in aux_ids):
        raise ValueError(f"aux ids {list(aux_ids)} must lie in 0..{n_layers - 1} here")
    feats, labels = [], []
    for lo in range(0, seqs.shape[0], batch):
        out = model(input_ids=seqs[lo : lo + batch], output_hidden_states=True)
        feats.append(torch.cat([out.hidden_states[i] for i in aux_ids], dim=-1))
        labels.append(out.logits.argmax(-1))
    return torch.cat(feats), torch.cat(labels)


def train_drafter(
    drafter: Eagle3Drafter,
    seqs: torch.Tensor,
    aux: torch.Tensor,
    labels: torch.Tensor,
    steps: int,
    *,
    batch: int = 16,
    ttt_steps: int = 3,
    lr: float = 3e-3,
    warmup: int = 20,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
    loss_mask: torch.Tensor | None = None,
) -> TrainLog:
    """Train ``drafter`` in place (its ``embed_tokens`` stays frozen).

    ``seqs`` ``[N, T]`` are token sequences, ``aux`` ``[N, T, k*H]`` the target features of each
    position, ``labels[n, p]`` the target's greedy token after position ``p``. Slot ``t`` is fed
    feature ``t`` and token ``t+1`` (step ``j``: token ``t+1+j``) and must predict ``labels[t+1+j]``.
    ``loss_mask`` ``[N, T]`` (1 on the tokens a trainer learns, e.g. the assistant responses) keeps
    only the predictions of those tokens, as the trainers' loss mask does; none: every position.
    """
    g = torch.Generator().manual_seed(seed)
    drafter.embed_tokens.weight.requires_grad_(False)
    params = [p for n, p in drafter.named_parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _schedule(s, steps, warmup))
    # target id -> draft index (or -1 when the draft vocabulary does not hold it)
    to_draft = torch.full((drafter.spec.vocab_size,), -1, dtype=torch.long)
    to_draft[drafter.target_ids()] = torch.arange(drafter.spec.draft_vocab_size)
    n, t_len = seqs.shape
    s = t_len - 1
    # learned[n, p]: is the token predicted after position p (token p+1) one the trainer learns?
    learned = torch.ones(n, t_len, dtype=torch.bool)
    if loss_mask is not None:
        learned[:, :-1] = loss_mask[:, 1:].bool()
        learned[:, -1] = False
    drafter.train()
    losses: list[float] = []
    for step in range(steps):
        idx = torch.randint(0, n, (batch,), generator=g)
        x, f, lab = seqs[idx], aux[idx, :s], labels[idx]
        step_tokens = []
        for j in range(ttt_steps):
            toks = torch.zeros(batch, s, dtype=torch.long)
            toks[:, : s - j] = x[:, 1 + j :]
            step_tokens.append(toks)
        outs = drafter.ttt_forward(f, step_tokens)
        loss = torch.zeros(())
        for j, out in enumerate(outs):
            tgt = torch.full((batch, s), -1, dtype=torch.long)
            tgt[:, : s - j] = torch.where(learned[idx, 1 + j :], to_draft[lab[:, 1 + j :]], -1)
            logits = drafter.logits(out)
            loss = loss + (0.8**j) * F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=-1
            )
        _optimizer_step(loss, params, opt, sched, losses)
        _log_progress(log, "drafter", step, steps, losses)
    drafter.eval()
    return TrainLog(losses)


@torch.inference_mode()
def heldout_accuracy(
    drafter: Eagle3Drafter,
    seqs: torch.Tensor,
    aux: torch.Tensor,
    labels: torch.Tensor,
    ttt_steps: int = 3,
    start: int = 0,
) -> list[float]:
    """Unconditional teacher-forced top-1 accuracy per step (slots ``>= start``), for the docs."""
    n, t_len = seqs.shape
    s = t_len - 1
    step_tokens = []
    for j in range(ttt_steps):
        toks = torch.zeros(n, s, dtype=torch.long)
        toks[:, : s - j] = seqs[:, 1 + j :]
        step_tokens.append(toks)
    outs = drafter.ttt_forward(aux[:, :s], step_tokens)
    tmap = drafter.target_ids()
    accs = []
    last = s - ttt_steps + 1
    for j, out in enumerate(outs):
        pred = tmap[drafter.logits(out[:, start:last]).argmax(-1)]
        accs.append(float((pred == labels[:, start + 1 + j : last + 1 + j]).float().mean()))
    return accs
