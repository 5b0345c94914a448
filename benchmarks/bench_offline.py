"""Benchmark: probe-offline over dumps versus the in-process probe's teacher-forced estimate, same texts.

Not a timed test: it prints a side-by-side table and PASS/FAIL against the issue's target, and
exits 1 when it is missed.

Both sides produce the same figure (the teacher-forced block over the demo prompts' greedy
continuations, 24 new tokens, K=3) in one process, interleaved per round so that both see the
same machine load, after an untimed warm-up:

* **in-process** (what ``probe`` does for its ``teacher_forced`` block): greedy decoding of the
  target to get its own continuations, one target forward over each sequence (aux states and
  greedy labels), then the drafter's teacher-forced scoring;
* **in-process, text given**: the same without the greedy decoding (target forward + scoring);
* **offline** (``probe-offline``): read each dump, the teacher from the dumped last hidden state
  (``lm_head``; final norm for speculators), the same drafter scoring. The target's body never runs.

tokens/s counts every token of the scored sequences; bytes/s is the size of the dump files read.
Target (issue 11): offline >= 5x the in-process estimate.

Usage::

    .venv/bin/python benchmarks/bench_offline.py [--rounds 5] [--layout specforge|speculators] [--device cpu] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eagle3_forensics.io.dumps import ScanOptions  # noqa: E402
from eagle3_forensics.probe.core import read_prompts  # noqa: E402
from eagle3_forensics.probe.offline.scan import scan_offline  # noqa: E402
from eagle3_forensics.probe.teacher_forced import teacher_forced_data, teacher_forced_estimate  # noqa: E402
from eagle3_forensics.reference.drafter.loader import load_drafter  # noqa: E402
from eagle3_forensics.reference.target import TargetModel  # noqa: E402

RATIO_TARGET = 5.0


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    demo = ROOT / "data" / "demo"
    ap.add_argument("--drafter", default=str(demo / "drafters" / "healthy"))
    ap.add_argument("--target", default=str(demo / "target"))
    ap.add_argument("--prompts", default=str(demo / "prompts.jsonl"))
    ap.add_argument("--layout", default="specforge", choices=["specforge", "speculators"])
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=24, help="the dumps' token budget")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    data = demo / "dumps" / args.layout
    tm = TargetModel(args.target, device=args.device)
    dev = tm.device
    model = load_drafter(args.drafter, tm, "reference", device=dev, dtype=tm.dtype)
    prompts = [tm.encode(t) for t in read_prompts(args.prompts)]
    ids = set(model.aux_ids)

    def in_process(generate: bool) -> tuple[float, float, int]:
        _sync(dev)
        t0 = time.perf_counter()
        conts = [tm.greedy(p, args.max_new_tokens) for p in prompts] if generate else fixed
        d = teacher_forced_data(tm, prompts, conts, ids)
        tf = teacher_forced_estimate(model, d, args.k)
        _sync(dev)
        return time.perf_counter() - t0, tf.simulated_acceptance_length, sum(len(s) for s in d.sequences)

    def offline() -> tuple[float, float, int, int]:
        c = scan_offline(args.drafter, data, ScanOptions(target=args.target), k=args.k, device=args.device)
        from eagle3_forensics.probe.offline.result import finish_probe

        tf = finish_probe(c).teacher_forced
        assert tf is not None
        return c.seconds, tf.simulated_acceptance_length, c.tokens, c.bytes

    def read_only() -> float:
        from eagle3_forensics.io.dumps import open_dumps

        t0 = time.perf_counter()
        ds = open_dumps(data)
        for got in ds.iter_samples(ds.items):
            assert not isinstance(got, tuple), got
        return time.perf_counter() - t0

    fixed = [tm.greedy(p, args.max_new_tokens) for p in prompts]
    in_process(True)  # warm-up, untimed
    offline()
    rows: dict[str, list[float]] = {"in-process": [], "in-process, text given": [], "offline": []}
    reads: list[float] = []
    al: dict[str, float] = {}
    tokens = nbytes = 0
    for _ in range(args.rounds):
        s, a, tokens = in_process(True)
        rows["in-process"].append(s)
        al["in-process"] = a
        s, a, _ = in_process(False)
        rows["in-process, text given"].append(s)
        al["in-process, text given"] = a
        s, a, tokens_off, nbytes = offline()
        rows["offline"].append(s)
        al["offline"] = a
        assert tokens_off == tokens, (tokens_off, tokens)
        reads.append(read_only())
    med = {k: statistics.median(v) for k, v in rows.items()}
    tps = {k: tokens / v for k, v in med.items()}
    ratio = tps["offline"] / tps["in-process"]
    ratio_given = tps["offline"] / tps["in-process, text given"]
    result = {
        "layout": args.layout,
        "device": str(dev),
        "threads": torch.get_num_threads(),
        "rounds": args.rounds,
        "tokens": tokens,
        "dump_bytes": nbytes,
        "median_seconds": med,
        "tokens_per_s": tps,
        "offline_bytes_per_s": nbytes / med["offline"],
        "read_only_bytes_per_s": nbytes / statistics.median(reads),
        "simulated_acceptance_length": al,
        "ratio_vs_in_process": ratio,
        "ratio_vs_in_process_text_given": ratio_given,
        "target": RATIO_TARGET,
        "pass": ratio >= RATIO_TARGET,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"probe-offline vs in-process teacher-forced estimate ({args.layout} dumps, {dev}, {tokens} tokens, K={args.k}, median of {args.rounds})"
        )
        print(f"{'':26} {'seconds':>9} {'tokens/s':>10} {'simulated AL':>13}")
        for k in rows:
            print(f"{k:26} {med[k]:9.3f} {tps[k]:10.0f} {al[k]:13.4f}")
        print(
            f"offline bytes/s over dumps: {nbytes / med['offline'] / 1e6:.1f} MB/s ({nbytes} bytes); reading and "
            f"normalising alone: {nbytes / statistics.median(reads) / 1e6:.1f} MB/s"
        )
        print(
            f"ratio offline / in-process: {ratio:.1f}x (target >= {RATIO_TARGET:.0f}x: {'PASS' if ratio >= RATIO_TARGET else 'FAIL'}); "
            f"vs in-process with the text given: {ratio_given:.1f}x"
        )
    return 0 if ratio >= RATIO_TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
