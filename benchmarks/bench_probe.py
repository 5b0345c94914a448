"""Benchmark: live EAGLE-3 speculative decoding versus plain greedy decoding of the same target.

Not a timed test: it prints a side-by-side table (tokens/s of each, the ratio, acceptance length,
lossless) and PASS/FAIL against the issue's targets, and exits 1 when one is missed.

Both decoders run in one process on the same device, prompts and target, interleaved per prompt
and per round (greedy, then speculative) so that both see the same machine load; the first pass
through both models is an untimed warm-up. Plain greedy decoding is one target forward per
token against a KV cache; speculative decoding is one target forward per K+1 candidate tokens
(K drafts from the drafter's own KV cache). Every round checks that the speculative output equals
the greedy output token for token (lossless).

Targets (CPU, demo pair, K=3): speculative / greedy >= 1.3x, lossless on every prompt.

Threads: ``--threads 1`` (the default here) because the demo models are tiny: with several
threads OpenMP synchronisation costs more than the matrix products, and on a busy small machine
a descheduled worker stalls every op. Pass ``--threads 0`` to keep torch's default.

Usage::

    .venv/bin/python benchmarks/bench_probe.py [--drafter data/demo/drafters/healthy] [--target data/demo/target]
        [--prompts data/demo/prompts.jsonl] [--k 3] [--max-new-tokens 64] [--rounds 3] [--device cpu]
        [--threads 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eagle3_forensics.probe.core import _warm_up, read_prompts  # noqa: E402
from eagle3_forensics.probe.decode import GreedyRun, LiveRun, greedy_decode, speculative_decode  # noqa: E402
from eagle3_forensics.probe.proposers import Eagle3Proposer  # noqa: E402
from eagle3_forensics.reference.drafter.loader import load_drafter  # noqa: E402
from eagle3_forensics.reference.target import TargetModel  # noqa: E402

SPEEDUP_TARGET = 1.3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drafter", default=str(ROOT / "data/demo/drafters/healthy"))
    ap.add_argument("--target", default=str(ROOT / "data/demo/target"))
    ap.add_argument("--prompts", default=str(ROOT / "data/demo/prompts.jsonl"))
    ap.add_argument("--engine", default="reference")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    tm = TargetModel(args.target, device=args.device)
    drafter = load_drafter(args.drafter, tm, args.engine, device=tm.device, dtype=tm.dtype)
    prompts = [tm.encode(p) for p in read_prompts(args.prompts)]
    _warm_up(tm, drafter, prompts[0])

    spec_tps, greedy_tps, ratios, lossless = [], [], [], True
    run = LiveRun(args.k)
    for _ in range(args.rounds):
        g, s = GreedyRun(), LiveRun(args.k)
        for prompt in prompts:
            ref = greedy_decode(tm, prompt, args.max_new_tokens, g)
            out = speculative_decode(
                tm, Eagle3Proposer(drafter, tm.vocab_size), prompt, args.k, args.max_new_tokens, s
            )
            lossless &= out == ref
        spec_tps.append(s.new_tokens / s.seconds)
        greedy_tps.append(g.new_tokens / g.seconds)
        ratios.append(spec_tps[-1] / greedy_tps[-1])
        run.num_drafts += s.num_drafts
        run.accepted += s.accepted
    al = 1 + run.accepted / run.num_drafts
    result = {
        "device": str(tm.device),
        "dtype": str(tm.dtype).replace("torch.", ""),
        "threads": torch.get_num_threads(),
        "k": args.k,
        "prompts": len(prompts),
        "max_new_tokens": args.max_new_tokens,
        "rounds": args.rounds,
        "greedy_tokens_per_s": statistics.median(greedy_tps),
        "spec_tokens_per_s": statistics.median(spec_tps),
        "speedup": statistics.median(ratios),
        "speedup_per_round": ratios,
        "acceptance_length": al,
        "lossless": lossless,
    }
    ok_speed = result["speedup"] >= SPEEDUP_TARGET or tm.device.type != "cpu"
    if args.json:
        print(json.dumps({**result, "pass": bool(ok_speed and lossless)}, indent=2))
    else:
        print(f"target {args.target}  drafter {args.drafter} ({args.engine} view)")
        print(
            f"device {result['device']} ({result['dtype']}), threads {result['threads']}, K={args.k}, "
            f"{len(prompts)} prompts x {args.max_new_tokens} new tokens, {args.rounds} rounds (medians)"
        )
        print()
        print(f"{'decoder':<28}{'tokens/s':>12}")
        print(f"{'plain greedy (1 tok/fwd)':<28}{result['greedy_tokens_per_s']:>12.1f}")
        print(f"{'EAGLE-3 speculative':<28}{result['spec_tokens_per_s']:>12.1f}")
        print(
            f"{'ratio (spec / greedy)':<28}{result['speedup']:>11.2f}x   per round: "
            + ", ".join(f"{r:.2f}" for r in ratios)
        )
        print(f"{'acceptance length':<28}{al:>12.3f}")
        print()
        print(
            f"[{'PASS' if ok_speed else 'FAIL'}] speedup >= {SPEEDUP_TARGET}x on the CPU "
            f"({result['speedup']:.2f}x)"
        )
        print(
            f"[{'PASS' if lossless else 'FAIL'}] lossless (speculative output == greedy output, every prompt, "
            "every round)"
        )
    return 0 if ok_speed and lossless else 1


if __name__ == "__main__":
    raise SystemExit(main())
