"""``eagle3-forensics run``: execute the notebooks over many drafters, render reports, gate regressions.

A run configuration (YAML, see ``configs/demo.yaml`` and :mod:`eagle3_forensics.runs.config`) names
the notebooks, the drafters and the parameters. :func:`run` executes every drafter × notebook
(:mod:`eagle3_forensics.runs.execute`: papermill, ``workers`` at a time, on past failures, one
self-contained script-free HTML report each) and finishes the run
(:mod:`eagle3_forensics.runs.summary`): ``summary.json`` (machine-readable: per run drafter,
notebook, parameters, status, duration, finding counts by severity, probe metrics, gate result)
and ``index.html``.

With a baseline (``--baseline``) and/or a window of recent runs (``--history DIR --gate-window N``)
the **regression gate** runs (:mod:`eagle3_forensics.runs.gate`): the exit code is 1 when a
notebook failed, an acceptance metric fell beyond its tolerance, or an error finding appeared that
the reference does not expect; ``index.html`` marks which. Without one, only notebook failures set
the exit code. ``--history DIR`` keeps every run's summary and adds a trend section to the index
(:mod:`eagle3_forensics.runs.history`); ``--shard I/N`` runs one slice for ``merge-runs``
(:mod:`eagle3_forensics.runs.shard`); ``--bundle FILE.zip`` packs the reports
(:mod:`eagle3_forensics.runs.bundle`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eagle3_forensics.errors import BadArgumentsError
from eagle3_forensics.runs.config import (
    DEFAULT_TOLERANCE,
    KERNEL_MODES,
    Job,
    RunConfig,
    config_from_dict,
    load_config,
    notebook_parameters,
)
from eagle3_forensics.runs.execute import KERNEL_NAME, execute_job, execute_jobs, extract
from eagle3_forensics.runs.gate import (
    BASELINE_SCHEMA,
    SUMMARY_SCHEMA,
    Gate,
    GateProblem,
    baseline_from_runs,
    evaluate_gate,
    evaluate_gates,
    load_baseline,
)
from eagle3_forensics.runs.history import DEFAULT_TREND_RUNS
from eagle3_forensics.runs.shard import PART_FILE, Shard, parse_shard, shard_jobs, write_part
from eagle3_forensics.runs.summary import Finish, changes, finalize, git_sha, read_previous, versions


def run_meta(config: RunConfig) -> dict[str, Any]:
    """What identifies a run in its summary (the same for every shard of it)."""
    return {
        "name": config.name,
        "description": config.description,
        "config": config.source,
        "notebooks": config.notebooks,
        "drafters": config.drafters,
        "git": git_sha(config.notebooks_dir),
        "versions": versions(),
    }


def run(
    config: RunConfig,
    out_dir: str | Path,
    *,
    baseline: str | Path | None = None,
    previous: str | Path | None = None,
    workers: int | None = None,
    kernels: str | None = None,
    progress: bool = True,
    write_baseline: str | Path | None = None,
    log: Callable[[str], None] | None = None,
    history: str | Path | None = None,
    gate_window: int | None = None,
    trend_runs: int = DEFAULT_TREND_RUNS,
    bundle: str | Path | None = None,
    shard: Shard | str | None = None,
    argv: Sequence[str] | None = None,
) -> int:
    """Execute every job of ``config`` (or of one ``shard``); write ``summary.json`` and ``index.html``
    (a shard: ``part.json``) under ``out_dir``. ``kernels`` (``warm``/``fresh``, see
    :mod:`eagle3_forensics.runs.warm`) and ``workers`` override the config's.

    Returns the exit code: 0 when every notebook ran (and the gate passed, with a reference), 1
    otherwise. ``argv`` (a shard's command line) goes into ``part.json`` so ``merge-runs`` can say
    how to re-run a missing shard. Bad options raise :class:`~eagle3_forensics.errors.BadArgumentsError` before anything runs.
    """
    t0 = time.perf_counter()
    finish = Finish(baseline, previous, history, gate_window, trend_runs, bundle, write_baseline)
    sh = parse_shard(shard) if isinstance(shard, str) else shard
    if sh is not None and finish.given():
        raise BadArgumentsError(
            f"{', '.join(finish.given())} appl{'y' if len(finish.given()) > 1 else 'ies'} to the whole run: "
            "give it to `merge-runs`, not to a --shard"
        )
    finish.check(config.tolerance)
    if kernels is not None and kernels not in KERNEL_MODES:
        raise BadArgumentsError(f"kernels must be one of {', '.join(KERNEL_MODES)}, not {kernels!r}")
    jobs = config.jobs if sh is None else shard_jobs(config, sh)
    out = Path(out_dir).resolve()  # absolute: the kernels run in the notebooks folder, not in our cwd
    out.mkdir(parents=True, exist_ok=True)
    # an earlier part here is stale from now on: a shard re-run and killed midway must leave nothing
    # merge-runs accepts (its reports may be half rewritten); a single run's directory is no part
    (out / PART_FILE).unlink(missing_ok=True)
    n_workers = max(1, min(workers or config.workers, len(jobs) or 1))
    settings = {
        "out": str(out),
        "cwd": str(config.notebooks_dir),
        "timeout": config.timeout,
        "start_timeout": config.start_timeout,
        "env": config.env,
        "show_code": config.show_code,
        "name": config.name,
        "kernels": kernels or config.kernels,
    }

    def say(msg: str) -> None:
        if log is not None:
            log(msg)
        else:
            sys.stderr.write(msg + "\n")

    what = (
        f"{len(config.jobs)} notebook runs ({len(config.drafters)} drafters × {len(config.notebooks)} notebooks)"
        if sh is None
        else f"shard {sh}: {len(jobs)} of {len(config.jobs)} notebook runs"
    )
    if config.profile:
        what += f", profile {config.profile}"
    say(
        f"eagle3-forensics run: {what}, {n_workers} worker(s), {settings['kernels']} kernels, "
        f"per-cell timeout {config.timeout}s -> {out}"
    )
    runs = execute_jobs(jobs, settings, n_workers, progress)
    meta = run_meta(config)
    if sh is not None:
        path = write_part(out, config, sh, jobs, runs, meta, started=t0, workers=n_workers, argv=argv)
        failed = sum(r["status"] != "ok" for r in runs)
        say(
            f"shard {sh}: {len(runs) - failed}/{len(runs)} notebook runs ok · part: {path} "
            f"(merge the parts with `eagle3-forensics merge-runs`) · wall time {time.perf_counter() - t0:.1f} s"
        )
        return 0 if failed == 0 else 1
    done = finalize(
        runs, meta, out, finish, tolerance=config.tolerance, started=t0, workers=n_workers, say=say
    )
    return done.exit_code


# -- `eagle3-forensics report` (notebook 01 over every demo drafter) -----------------------------


def build_demo_report(
    out_dir: str | Path,
    demo_dir: str | Path = "data/demo",
    timeout: int = 300,
    notebooks: tuple[str, ...] = ("01_checkpoint_keys",),
    notebooks_dir: str | Path | None = None,
    workers: int = 2,
    progress: bool = False,
) -> int:
    """Run ``notebooks`` over every drafter directory under ``<demo_dir>/drafters``; write one HTML
    report per run, ``index.html`` and ``summary.json``. Returns 0 when every notebook ran, 1 when
    any failed (failures are recorded and the remaining runs still happen)."""
    demo = Path(demo_dir).resolve()
    target = demo / "target"
    data: dict[str, Any] = {
        "name": "demo drafter reports",
        "description": "Notebook 01 over every demo drafter. Findings in the deliberately broken demo drafters are "
        "expected.",
        "drafters_from": str(demo / "drafters"),
        "parameters": {"target": str(target) if target.is_dir() else None},
        "notebooks": {n: ({"engine": "all"} if n == "01_checkpoint_keys" else {}) for n in notebooks},
        "timeout": timeout,
        "workers": workers,
    }
    if notebooks_dir is not None:
        data["notebooks_dir"] = str(Path(notebooks_dir).resolve())
    return run(config_from_dict(data, base=Path.cwd()), out_dir, progress=progress)


__all__ = [
    "BASELINE_SCHEMA",
    "DEFAULT_TOLERANCE",
    "KERNEL_NAME",
    "SUMMARY_SCHEMA",
    "Gate",
    "GateProblem",
    "Job",
    "RunConfig",
    "baseline_from_runs",
    "build_demo_report",
    "changes",
    "config_from_dict",
    "evaluate_gate",
    "evaluate_gates",
    "execute_job",
    "extract",
    "load_baseline",
    "load_config",
    "notebook_parameters",
    "read_previous",
    "run",
    "run_meta",
]
