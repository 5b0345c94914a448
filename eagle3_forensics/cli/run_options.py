"""The options of ``run`` that apply to a whole run (history, trend, gate window, bundle) and ``--shard``.

``merge-runs`` takes the same whole-run options, so a sharded run ends exactly like a single one.
"""

from __future__ import annotations

import argparse
from typing import Any

# = eagle3_forensics.runs.history.DEFAULT_TREND_RUNS (not imported: the CLI must start fast; a test keeps them equal)
DEFAULT_TREND_RUNS = 30


def add_whole_run_options(p: argparse.ArgumentParser) -> None:
    """``--history``, ``--gate-window``, ``--trend-runs``, ``--bundle`` (for ``run`` and ``merge-runs``)."""
    p.add_argument(
        "--history",
        metavar="DIR",
        help="keep this run's summary.json in DIR (one new file per run, named by UTC time and git SHA) "
        "and add a trend over the last runs to index.html",
    )
    p.add_argument(
        "--gate-window",
        type=int,
        metavar="N",
        help="also gate against the median of the last N runs in --history (with --baseline: both must pass)",
    )
    p.add_argument(
        "--trend-runs",
        type=int,
        default=DEFAULT_TREND_RUNS,
        metavar="N",
        help=f"runs shown in the trend section (default {DEFAULT_TREND_RUNS})",
    )
    p.add_argument(
        "--bundle",
        metavar="FILE.zip",
        help="also pack index.html, summary.json and every report into one archive that opens offline",
    )


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The whole-run options plus ``--shard`` (``run`` only)."""
    add_whole_run_options(p)
    p.add_argument(
        "--shard",
        metavar="[POOL:]I/N",
        help="run only slice I of N (0-based: 0 ≤ I < N, as Slurm arrays and Indexed Jobs count) of the "
        "drafter × notebook jobs (of the config's pool POOL) and write a partial output directory for `merge-runs`",
    )


def whole_run_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "history": args.history,
        "gate_window": args.gate_window,
        "trend_runs": args.trend_runs,
        "bundle": args.bundle,
    }


def run_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :func:`eagle3_forensics.runs.runner.run` these options give."""
    return {**whole_run_kwargs(args), "shard": args.shard, "argv": getattr(args, "command_line", None)}


__all__ = ["add_run_options", "add_whole_run_options", "run_kwargs", "whole_run_kwargs"]
