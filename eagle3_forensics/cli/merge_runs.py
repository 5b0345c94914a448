"""``eagle3-forensics merge-runs PART... --out DIR``: one run from the outputs of ``run --shard I/N``.

Checks that the parts make exactly one run (same config, same code, every shard once, every job
once), copies their reports into ``--out`` and finishes the run as a single ``run`` would:
``summary.json``, ``index.html``, the regression gate, and as asked the history entry, the trend
and the bundle. Exit codes: 0 every notebook ran and the gate passed; 1 a notebook failed or the
gate failed; 2 parts that do not make one run, or bad arguments (one line on stderr). ``--json``:
one object (schema ``eagle3-forensics/merge-runs/1``) on every exit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from eagle3_forensics.cli.output import emit_json
from eagle3_forensics.cli.run_options import add_whole_run_options, whole_run_kwargs
from eagle3_forensics.errors import ForensicsError
from eagle3_forensics.io.shard import MissingShardsError
from eagle3_forensics.runs.shard import merge_runs
from eagle3_forensics.runs.summary import Finish

COMMAND = "merge-runs"


def add_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser(
        COMMAND,
        help="merge the output directories of `run --shard I/N` into one report, summary and gate",
        epilog="exit codes: 0 every notebook ran and the gate passed; 1 a notebook or the gate failed; "
        "2 parts from different configs, missing or overlapping shards, bad arguments.",
    )
    p.add_argument("parts", nargs="+", metavar="PART", help="output directories of `run --shard I/N`")
    p.add_argument("--out", required=True, help="output directory of the merged run")
    p.add_argument("--baseline", help="gate baseline JSON (or a previous run's summary.json), as for `run`")
    p.add_argument(
        "--previous", help="a previous run's summary.json (or its directory) to show changes against"
    )
    p.add_argument("--write-baseline", metavar="FILE", help="also write a baseline from the merged results")
    add_whole_run_options(p)
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.set_defaults(func=run, json_command=COMMAND)
    return p


def run(args: argparse.Namespace) -> int:
    finish = Finish(
        baseline=args.baseline,
        previous=args.previous,
        write_baseline=args.write_baseline,
        **whole_run_kwargs(args),
    )
    try:
        done, _parts = merge_runs(args.parts, args.out, finish)
    except ForensicsError as exc:
        if args.json:
            payload: dict[str, Any] = {"parts": list(args.parts), "out": args.out}
            if isinstance(exc, MissingShardsError):
                payload["missing"] = exc.missing  # each missing shard and the command line that makes it
            emit_json(COMMAND, payload, int(exc.exit_code), exc)
        sys.stderr.write(f"eagle3-forensics: {exc}\n")
        return int(exc.exit_code)
    s = done.summary
    if args.json:
        out = Path(args.out)
        emit_json(
            COMMAND,
            {
                "out": str(out),
                "index": str(out / "index.html"),
                "summary": str(out / "summary.json"),
                "parts": s.get("shards"),
                "ok": s["ok"],
                "failed": s["failed"],
                "gate": s["gate"],
                "history_entry": None if done.history_entry is None else str(done.history_entry),
                "bundle": None if done.bundle is None else str(done.bundle),
            },
            done.exit_code,
        )
    return done.exit_code


__all__ = ["add_parser", "run"]
