"""Benchmark: wall time of the ``eagle3-forensics`` CLI against the import floor.

Not a timed test: it prints a side-by-side table and PASS/FAIL against the target stated in
issue 12, and exits 1 when the target is missed.

Every contender is a fresh ``python`` process (the interpreter running this script), timed from
spawn to exit, so interpreter start-up is in every figure:

- the floor: ``python -c "import numpy, safetensors"`` (what any header-first checker of
  safetensors files has to pay);
- ``python -m eagle3_forensics inspect DRAFTER``;
- ``python -m eagle3_forensics diagnose DRAFTER`` (text, and ``--json``);
- ``python -m eagle3_forensics diagnose DRAFTER --target TARGET`` (reads the target's embedding);
- for scale, ``python -c "import torch"`` (what every CLI call paid before the fast path).

The rounds are interleaved (each round runs every contender once, in a rotated order) so that
load on the shared machine hits all of them alike; medians over the rounds are reported, and
each CLI figure as a ratio to the floor's median. Target: ``inspect`` and ``diagnose`` within
3x the floor. ``--checkout DIR`` measures another checkout's package with the same interpreter
(every process runs in DIR, which comes first on ``sys.path``): how the "before" figure in
docs/benchmarks.md was taken.

Usage::

    .venv/bin/python benchmarks/bench_cli.py [--rounds 15] [--drafter DIR] [--target DIR] [--checkout DIR]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "demo"
TARGET_RATIO = 3.0
FLOOR = "floor: import numpy, safetensors"


def contenders(drafter: Path, target: Path) -> dict[str, list[str]]:
    py = sys.executable
    cli = [py, "-m", "eagle3_forensics"]
    return {
        FLOOR: [py, "-c", "import numpy, safetensors"],
        "inspect": [*cli, "inspect", str(drafter)],
        "diagnose": [*cli, "diagnose", str(drafter)],
        "diagnose --json": [*cli, "diagnose", str(drafter), "--json"],
        "diagnose --target": [*cli, "diagnose", str(drafter), "--target", str(target)],
        "scale: import torch": [py, "-c", "import torch"],
    }


def time_once(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, cwd=cwd, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # 1: error findings (a broken drafter); anything else is a failure
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--drafter", type=Path, default=DEMO / "drafters" / "healthy")
    ap.add_argument("--target", type=Path, default=DEMO / "target")
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose package is measured")
    args = ap.parse_args()
    cwd = args.checkout.resolve()

    cmds = contenders(args.drafter.resolve(), args.target.resolve())
    names = list(cmds)
    for name in names:  # warm the page cache and the bytecode cache; not measured
        time_once(cmds[name], cwd)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            times[name].append(time_once(cmds[name], cwd))

    med = {n: statistics.median(t) for n, t in times.items()}
    floor = med[FLOOR]
    print(f"CLI wall time vs the import floor: {args.rounds} interleaved rounds, medians, {sys.executable}")
    print(f"package from {cwd}; drafter {args.drafter}, target {args.target}\n")
    print(f"| {'contender':34} | median (s) | min (s) | vs floor |")
    print(f"|{'-' * 36}|-----------:|--------:|---------:|")
    for n in names:
        print(f"| {n:34} | {med[n]:10.3f} | {min(times[n]):7.3f} | {med[n] / floor:7.2f}x |")
    gated = [n for n in names if n in ("inspect", "diagnose", "diagnose --json", "diagnose --target")]
    worst = max(gated, key=lambda n: med[n])
    ok = med[worst] / floor <= TARGET_RATIO
    print(
        f"\nslowest CLI call: {worst} at {med[worst] / floor:.2f}x the floor "
        f"(target <= {TARGET_RATIO:.0f}x): {'PASS' if ok else 'FAIL'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
