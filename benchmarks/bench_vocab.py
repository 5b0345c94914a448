"""Benchmark: ``build_vocab_mapping`` against the trainers' counting loop and one ``np.bincount`` pass.

Not a timed test: it prints a side-by-side table and PASS/FAIL against the targets stated in the
issue, and exits 1 when a target is missed.

Data (seeded): ``--rows`` x ``--row-len`` token ids (default 20 000 x 1 000 = 20 M) drawn from a
Zipf law (exponent 1.07, like text) over ``V = 128256`` ids shuffled into the id space, and a loss
mask that hides a random prompt prefix of each row (about 40 % of the tokens), as assistant-only
training data does. ``v = 32000``.

Contenders, each on the same in-memory arrays (int64 ids ``[rows, len]``, bool mask):

(a) **trainer loop** - SpecForge's ``generate_vocab_mapping_file``: per row
    ``ids[mask == 1].unique(return_counts=True)``, ``Counter.update(dict(zip(...)))``, then
    ``most_common(v)``, sort, ``d2t = used - arange``, ``t2d`` (built from a set here; SpecForge's
    ``[i in used_tokens for i in range(V)]`` list scan would add O(V*v) on top). ``--a-repeats``
    rounds (default 3), interleaved with the others. If a
    probe on the first rows predicts more than 3 minutes, it runs on a subset of rows and is
    extrapolated linearly (the output says so), and outputs are compared on that subset.
(b) **one bincount pass** - ``np.bincount(flat_ids, weights=flat_mask, minlength=V)``: the practical
    limit, one read of the data. It produces counts only (no selection). NumPy casts the weights to
    a float64 array as large as the ids (160 MB here) on every call; (c)-(e) count block by block
    with an integer key ``2 * id + mask`` that stays in cache, which is why they can beat it.
(b0) ``np.bincount(flat_ids)`` with the mask ignored: for reference, the cost of one counting pass
    with no mask handling at all (it counts different tokens; not compared).
(c) **build_vocab_mapping(..., tie_break="first_row")** - SpecForge's exact semantics, so its
    ``d2t``/``t2d`` must equal (a)'s and its counts (b)'s.
(d) **build_vocab_mapping(..., tie_break="id")** - speculators' semantics (no tie bookkeeping).
(e) (c) streamed from a ``.safetensors`` file (memory-mapped, rows read block by block via
    ``iter_token_chunks``; page cache warm).

(b)-(e) run for ``--repeats`` rounds; medians are reported. The machine this was written on has
2 shared vCPUs: single runs vary by up to 2x with load, hence the interleaving and medians. Targets (from the issue):
(c) >= 30x faster than (a) and >= 0.5x the speed of (b), with identical output.

Usage::

    .venv/bin/python benchmarks/bench_vocab.py [--rows 20000] [--row-len 1000] [--repeats 5] [--no-stream]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from eagle3_forensics.vocab.mapping.build import build_vocab_mapping

V, v = 128256, 32000
PROBE_ROWS = 500
LIMIT_S = 180.0


def make_data(rows: int, row_len: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, V + 1) ** 1.07
    cdf = np.cumsum(p / p.sum())
    ranks = np.searchsorted(cdf, rng.random(rows * row_len)).clip(0, V - 1)
    ids = rng.permutation(V)[ranks].astype(np.int64).reshape(rows, row_len)
    prompt = rng.integers(row_len // 5, 3 * row_len // 5, size=rows)
    mask = np.arange(row_len)[None, :] >= prompt[:, None]
    return ids, mask


def trainer_loop(ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SpecForge ``generate_vocab_mapping_file`` + ``process_token_dict_to_mappings`` (t2d via a set)."""
    token_dict: Counter[int] = Counter()
    t_ids, t_mask = torch.from_numpy(ids), torch.from_numpy(mask)
    for input_ids, loss_mask in zip(t_ids, t_mask, strict=True):
        masked_ids = input_ids[loss_mask == 1]
        unique_ids, counts = masked_ids.unique(return_counts=True)
        token_dict.update(dict(zip(unique_ids.tolist(), counts.tolist(), strict=True)))
    if len(token_dict) < v:
        for token in sorted(set(range(v)) - set(token_dict)):
            token_dict[token] = 0
            if len(token_dict) >= v:
                break
    used = sorted(key for key, _ in token_dict.most_common(v))
    d2t = np.array([used[i] - i for i in range(len(used))], dtype=np.int64)
    chosen = set(used)
    t2d = np.array([i in chosen for i in range(V)], dtype=bool)
    return d2t, t2d


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--row-len", type=int, default=1_000)
    ap.add_argument("--repeats", type=int, default=5, help="rounds for (b)-(e)")
    ap.add_argument("--a-repeats", type=int, default=3, help="rounds for (a), the slow trainer loop")
    ap.add_argument("--no-stream", action="store_true", help="skip the memory-mapped .npy row")
    args = ap.parse_args(argv)

    n = args.rows * args.row_len
    print(
        f"data: {args.rows} rows x {args.row_len} = {n / 1e6:.1f} M token ids, V={V}, v={v}; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, numpy {np.__version__}, "
        f"torch {torch.__version__}"
    )
    t_gen, (ids, mask) = timed(lambda: make_data(args.rows, args.row_len))
    print(f"generated in {t_gen:.1f} s; {mask.mean():.1%} of tokens counted (loss_mask == 1)")

    # (a) the trainer loop: probe, then full or a subset
    t_probe, _ = timed(lambda: trainer_loop(ids[:PROBE_ROWS], mask[:PROBE_ROWS]))
    predicted = t_probe * args.rows / PROBE_ROWS
    rows_a = args.rows
    if predicted > LIMIT_S:
        rows_a = max(PROBE_ROWS, int(args.rows * 60.0 / predicted))  # about a minute of work
    extrapolated = rows_a < args.rows
    a_rounds = 1 if extrapolated else max(1, args.a_repeats)

    flat_ids, flat_mask = ids.reshape(-1), mask.reshape(-1)
    stream_dir = None
    contenders: dict[str, Callable[[], Any]] = {
        "(b) np.bincount(ids, weights=mask)": lambda: np.bincount(flat_ids, weights=flat_mask, minlength=V),
        "(b0) np.bincount(ids), mask ignored": lambda: np.bincount(flat_ids, minlength=V),
        "(c) build_vocab_mapping first_row": lambda: build_vocab_mapping(
            ids, v, V, loss_mask=mask, tie_break="first_row"
        ),
        "(d) build_vocab_mapping id": lambda: build_vocab_mapping(ids, v, V, loss_mask=mask, tie_break="id"),
    }
    if not args.no_stream:
        from safetensors.torch import save_file

        from eagle3_forensics.vocab.inputs.tokens import iter_token_chunks

        stream_dir = tempfile.TemporaryDirectory(prefix="bench_vocab_")
        path = Path(stream_dir.name) / "ids.safetensors"
        save_file({"input_ids": torch.from_numpy(ids), "loss_mask": torch.from_numpy(mask)}, str(path))
        contenders["(e) (c) streamed from .safetensors"] = lambda: build_vocab_mapping(
            lambda: iter_token_chunks(path), v, V, tie_break="first_row"
        )
    times: dict[str, list[float]] = {k: [] for k in contenders}
    outputs: dict[str, Any] = {}
    a_times: list[float] = []
    for r in range(max(args.repeats, a_rounds)):
        if r < a_rounds:  # (a) interleaved with the others, so machine load hits every contender alike
            dt, (a_d2t, a_t2d) = timed(lambda: trainer_loop(ids[:rows_a], mask[:rows_a]))
            a_times.append(dt)
        if r < args.repeats:
            for name, fn in contenders.items():
                dt, out = timed(fn)
                times[name].append(dt)
                outputs[name] = out
    med = {k: statistics.median(t) for k, t in times.items()}
    t_a = statistics.median(a_times)
    t_a_full = t_a * args.rows / rows_a
    if extrapolated:
        print(
            f"(a) predicted {predicted:.0f} s > {LIMIT_S:.0f} s: timed on {rows_a} rows ({t_a:.1f} s) "
            f"and EXTRAPOLATED linearly to {args.rows} rows"
        )
    t_b = med["(b) np.bincount(ids, weights=mask)"]
    t_c = med["(c) build_vocab_mapping first_row"]

    # identical output
    b_counts = outputs["(b) np.bincount(ids, weights=mask)"].astype(np.int64)
    c_map = outputs["(c) build_vocab_mapping first_row"]
    same_counts = all(
        np.array_equal(outputs[k].counts, b_counts) for k in contenders if not k.startswith("(b")
    )
    if extrapolated:
        sub = build_vocab_mapping(ids[:rows_a], v, V, loss_mask=mask[:rows_a], tie_break="first_row")
        same_a = np.array_equal(sub.d2t.numpy(), a_d2t) and np.array_equal(sub.t2d.numpy(), a_t2d)
        a_note = f"on the {rows_a}-row subset"
    else:
        same_a = np.array_equal(c_map.d2t.numpy(), a_d2t) and np.array_equal(c_map.t2d.numpy(), a_t2d)
        a_note = "on all rows"
    same_stream = "(e) (c) streamed from .safetensors" not in outputs or (
        np.array_equal(outputs["(e) (c) streamed from .safetensors"].d2t.numpy(), c_map.d2t.numpy())
        and np.array_equal(outputs["(e) (c) streamed from .safetensors"].t2d.numpy(), c_map.t2d.numpy())
    )

    rows = [("(a) trainer loop (per-row unique + Counter)", t_a_full, "extrapolated" if extrapolated else "")]
    rows += [(k, med[k], "") for k in contenders]
    print()
    print("| contender | time (s) | M ids/s | speed vs (a) | speed vs (b) |")
    print("|---|---:|---:|---:|---:|")
    for name, t, note in rows:
        print(
            f"| {name}{' (' + note + ')' if note else ''} | {t:.3f} | {n / t / 1e6:.1f} | {t_a_full / t:.1f}x "
            f"| {t_b / t:.2f}x |"
        )
    print()
    print(
        f"medians of interleaved rounds: {args.repeats} for (b)-(e), {a_rounds} for (a); "
        f"torch threads {torch.get_num_threads()}"
    )
    print(f"identical d2t/t2d, (c) vs (a) {a_note}: {same_a}")
    print(f"identical counts, every build vs (b): {same_counts}")
    if "(e) (c) streamed from .safetensors" in outputs:
        print(f"identical d2t/t2d, streamed (e) vs in-memory (c): {same_stream}")
    ok_a = t_a_full / t_c >= 30.0
    ok_b = t_b / t_c >= 0.5
    print(f"target (c) >= 30x faster than (a): {t_a_full / t_c:.1f}x {'PASS' if ok_a else 'FAIL'}")
    print(f"target (c) >= 0.5x the speed of (b): {t_b / t_c:.2f}x {'PASS' if ok_b else 'FAIL'}")
    if stream_dir is not None:
        stream_dir.cleanup()
    return 0 if (ok_a and ok_b and same_a and same_counts and same_stream) else 1


if __name__ == "__main__":
    sys.exit(main())
