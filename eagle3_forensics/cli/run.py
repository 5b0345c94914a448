"""``eagle3-forensics run --config FILE --out DIR``: a run config's notebooks, reports and gate;
``--history``/``--gate-window``/``--trend-runs``/``--bundle``/``--shard`` (see :mod:`eagle3_forensics.cli.run_options`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from eagle3_forensics.cli.output import emit_json
from eagle3_forensics.cli.run_options import add_run_options, run_kwargs


def run(args: argparse.Namespace) -> int:
    from eagle3_forensics.runs.runner import load_config  # heavy: papermill, nbformat, jinja2, yaml
    from eagle3_forensics.runs.runner import run as run_config  # heavy: as above

    config = load_config(args.config, profile=args.profile)
    code = run_config(
        config,
        args.out,
        baseline=args.baseline,
        previous=args.previous,
        workers=args.workers,
        kernels=args.kernels,
        progress=not args.no_progress,
        write_baseline=args.write_baseline,
        **run_kwargs(args),  # --history, --gate-window, --trend-runs, --bundle, --shard
    )
    if args.json:
        emit_json("run", result_payload(Path(args.out), sharded=bool(getattr(args, "shard", None))), code)
    return code


def result_payload(out: Path, *, sharded: bool) -> dict[str, Any]:
    """The ``run --json`` members: the summary.json just written and where it and index.html are;
    for ``--shard I/N`` the part.json written instead (``merge-runs`` makes the summary)."""
    out = out.resolve()
    name = "part.json" if sharded else "summary.json"
    written: dict[str, Any] = json.loads((out / name).read_text(encoding="utf-8"))
    if sharded:
        return {**written, "part_file": str(out / name)}
    return {**written, "summary_file": str(out / name), "index_file": str(out / "index.html")}


def add_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    ru = sub.add_parser(
        "run",
        help="execute the notebooks of a run config over its drafters: HTML reports, "
        "summary.json, index.html, regression gate",
    )
    ru.add_argument("--config", required=True, help="run configuration (YAML; see configs/demo.yaml)")
    ru.add_argument(
        "--profile",
        metavar="NAME",
        help="lay the config's profiles.NAME over it (configs/demo.yaml: `full`, the whole demo matrix)",
    )
    ru.add_argument(
        "--out", required=True, help="output directory (index.html, summary.json, one HTML per run)"
    )
    ru.add_argument(
        "--baseline",
        help="gate baseline JSON (or a previous run's summary.json): exit 1 on a "
        "metric beyond tolerance, a new error finding or a failed notebook",
    )
    ru.add_argument(
        "--previous", help="a previous run's summary.json (or its directory) to show changes against"
    )
    ru.add_argument(
        "--workers", type=int, help="notebooks executed at once (default: the config's `workers`)"
    )
    ru.add_argument(
        "--kernels",
        choices=("warm", "fresh"),
        help="fresh: papermill/nbclient start each kernel the ordinary way; warm (opt-in): kernels forked "
        "from one process with torch & co. imported, faster (default: the config's `kernels`, else fresh)",
    )
    ru.add_argument("--write-baseline", metavar="FILE", help="also write a baseline from this run's results")
    ru.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_run_options(ru)
    ru.add_argument(
        "--json", action="store_true", help="print exactly one JSON object (summary.json's members) on stdout"
    )
    ru.set_defaults(func=run, extra="notebooks", json_command="run")
