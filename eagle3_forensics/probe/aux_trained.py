"""Measure the aux layers a drafter was trained on: candidate id sets scored by teacher-forced acceptance.

The candidates (HF ``hidden_states`` index): the config's ids as their writer meant them, what each
engine release captures for this drafter on this target, each trainer's default for the target
(:data:`eagle3_forensics.checks.trainers.TRAINERS`), and a small neighbourhood of the config's ids (or,
when it records none, of the first engine's fallback): each id ±1 alone and the whole set ±1. Sets of
the wrong width (fc's number of aux states) or outside ``[0, N]`` are dropped; at most
:data:`MAX_CANDIDATES` are scored.

Cost: one greedy continuation and one target forward per prompt, capturing only the layers some
candidate uses (the union, ≤ 3 × candidates states of ``T × H``); then one drafter pass per candidate and
prompt (the drafter is one decoder layer). On the demo target that is about a second; on a large target
it is ``max_prompts`` prefills plus ``max_prompts × max_new_tokens`` decode steps, the same as the probe.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from eagle3_forensics.checks.aux_layers import config_trained_ids, trainer_default
from eagle3_forensics.checks.aux_measured import NEIGHBOUR, AuxCandidate, MeasuredAux
from eagle3_forensics.checks.context import Context
from eagle3_forensics.checks.trainers import TRAINERS
from eagle3_forensics.engines import resolve_engines
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.io.checkpoint import open_checkpoint
from eagle3_forensics.io.target import open_target
from eagle3_forensics.probe.core import SMALL_MODEL_PARAMS, load_target, read_prompts
from eagle3_forensics.probe.teacher_forced import (
    TeacherForcedData,
    teacher_forced_data,
    teacher_forced_estimate,
)
from eagle3_forensics.reference.drafter.loader import load_drafter

if TYPE_CHECKING:
    from eagle3_forensics.reference.drafter.model import Eagle3Drafter

#: the most candidate sets scored (config, engines and trainers first, then the neighbourhood)
MAX_CANDIDATES = 16
#: prompts and target tokens the measurement uses by default: up to 16 prompts sharing a budget of 512
#: target tokens (32 to 128 per prompt). 16 × 32 separates the demo's right set from a one-layer-off set
#: by 3x its noise, 4 × 128 by 3x too (docs/findings.md, AUX_LAYER_IDS_NOT_TRAINED)
MEASURE_PROMPTS = 16
MEASURE_BUDGET = 512
MEASURE_TOKENS = (32, 128)
#: prompts used when the caller gives none (short, generic; any tokenizer encodes them)
DEFAULT_PROMPTS: tuple[str, ...] = (
    "The quick brown fox jumps over the lazy dog.",
    "Write a short story about a robot who learns to paint.",
    "Explain how a hash table works, step by step.",
    "List three reasons why the sky appears blue.",
)


def _width(ctx: Context) -> int:
    """How many aux states fc fuses (3 when its shape says nothing)."""
    fc = ctx.shape("fc.weight")
    ht = ctx.cfg.target_hidden_size or ctx.cfg.hidden_size
    if fc and ht and len(fc) == 2 and fc[1] % ht == 0 and fc[1] // ht >= 1:
        return int(fc[1] // ht)
    return 3


def candidate_sets(ctx: Context) -> dict[tuple[int, ...], list[str]]:
    """Candidate id sets (HF index) and why each is tried, in priority order (capped)."""
    n = ctx.target_layers
    if n is None:
        return {}
    width = _width(ctx)
    out: dict[tuple[int, ...], list[str]] = {}

    def add(ids: Sequence[int] | None, why: str) -> None:
        if not ids or len(ids) != width or len(set(ids)) != width or not all(0 <= i <= n for i in ids):
            return
        if len(out) >= MAX_CANDIDATES and tuple(ids) not in out:
            return
        out.setdefault(tuple(int(i) for i in ids), []).append(why)

    config, _ = config_trained_ids(ctx)
    add(config, "config")
    fallbacks = []
    for rules in ctx.engines:
        captured = ctx.aux(rules.name).captured
        add(captured, f"{rules.name} captures")
        fallbacks.append(captured)
    for t in TRAINERS.values():
        add(t.default(n) if t.default is not None else trainer_default(ctx), f"{t.display} default")
    base = config or next((f for f in fallbacks if f), None)
    if base:
        for j in range(len(base)):
            for d in (-1, 1):
                add([i + d if m == j else i for m, i in enumerate(base)], NEIGHBOUR)
        for d in (-1, 1):
            add([i + d for i in base], NEIGHBOUR)
    return out


def measure_trained_aux(
    checkpoint: str | Path,
    target: str | Path,
    prompts: str | Path | Sequence[str] | None = None,
    *,
    max_prompts: int = MEASURE_PROMPTS,
    max_new_tokens: int | None = None,
    k: int = 3,
    device: str = "cpu",
) -> MeasuredAux:
    """Score every candidate set on ``target`` over the first ``max_prompts`` prompts (best first).

    ``max_new_tokens`` per prompt defaults to :data:`MEASURE_BUDGET` shared by the prompts, within
    :data:`MEASURE_TOKENS`.

    Unusable input (a drafter the reference cannot build, a target without a tokenizer, prompts too
    short to score) raises :class:`UnusableInputError`."""
    t0 = time.perf_counter()
    ctx = Context(open_checkpoint(checkpoint), open_target(target), releases=resolve_engines("all"))
    cands = candidate_sets(ctx)
    if not cands:
        raise UnusableInputError("no candidate aux-layer set fits this drafter and target")
    if prompts is None:
        texts: list[str] = list(DEFAULT_PROMPTS)
    else:
        texts = read_prompts(prompts) if isinstance(prompts, (str, Path)) else list(prompts)
    texts = texts[: max(1, int(max_prompts))]
    if max_new_tokens is None:
        low, high = MEASURE_TOKENS
        max_new_tokens = min(high, max(low, MEASURE_BUDGET // len(texts)))
    tm = load_target(target, device)
    model = load_drafter(checkpoint, tm, "reference", device=tm.device, dtype=tm.dtype)
    prompt_ids = [tm.encode(t) for t in texts]
    before = torch.get_num_threads()
    if str(tm.device) == "cpu" and sum(p.numel() for p in tm.model.parameters()) < SMALL_MODEL_PARAMS:
        torch.set_num_threads(1)  # as the probe: thread synchronisation costs more than tiny products
    try:
        conts = [tm.greedy(p, max_new_tokens) for p in prompt_ids]
        data = teacher_forced_data(tm, prompt_ids, conts, {i for ids in cands for i in ids})
        scored, positions, keep = _score(model, data, cands, k)
    finally:
        torch.set_num_threads(before)
    how = (
        f"teacher-forced simulated acceptance length, {len(keep)} prompts × {max_new_tokens} target tokens, "
        f"K={k}, {len(cands)} candidate sets"
    )
    return MeasuredAux(tuple(scored), len(keep), positions, k, time.perf_counter() - t0, how)


def _score(
    model: Eagle3Drafter, data: TeacherForcedData, cands: dict[tuple[int, ...], list[str]], k: int
) -> tuple[list[AuxCandidate], int, list[int]]:
    """Every candidate scored over all prompts and per prompt, best first (ties keep the candidates' order)."""
    # a prompt whose continuation is shorter than K has no slots: left out for every candidate alike
    keep = [
        s
        for s, (seq, start) in enumerate(zip(data.sequences, data.starts, strict=True))
        if len(seq) - k > start
    ]
    if not keep:
        raise UnusableInputError("no teacher-forced positions: use longer continuations (max_new_tokens > K)")
    parts = [
        TeacherForcedData([data.sequences[s]], [data.starts[s]], [data.hidden[s]], [data.labels[s]])
        for s in keep
    ]
    scored, positions = [], 0
    for rank, (ids, why) in enumerate(cands.items()):
        pooled = teacher_forced_estimate(model, data, k, list(ids))
        positions = pooled.positions
        per = tuple(
            teacher_forced_estimate(model, p, k, list(ids)).simulated_acceptance_length for p in parts
        )
        scored.append((rank, AuxCandidate(ids, tuple(why), pooled.simulated_acceptance_length, per)))
    scored.sort(key=lambda rc: (-rc[1].score, rc[0]))  # ties: the config's ids, then the engines' first
    return [c for _, c in scored], positions, keep


__all__ = [
    "DEFAULT_PROMPTS",
    "MAX_CANDIDATES",
    "MEASURE_BUDGET",
    "MEASURE_PROMPTS",
    "MEASURE_TOKENS",
    "candidate_sets",
    "measure_trained_aux",
]
