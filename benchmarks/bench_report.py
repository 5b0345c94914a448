"""Benchmark: the whole demo report, and what papermill costs per notebook over calling the package directly.

Not a timed test: it prints tables and PASS/FAIL against the issue's target, and exits 1 when the
target is missed.

1. **The demo report** — exactly what ``make report`` runs (``eagle3-forensics run --config
   configs/demo.yaml --baseline configs/demo_baseline.json``: 59 notebook runs, the config's
   workers), into a temporary directory, timed from the outside (wall clock of the whole command,
   Python start included, and the CPU time of it and everything it started), side by side with
   ``--kernels fresh`` (papermill/nbclient's own kernels, the default) and ``--kernels warm``
   (opt-in, :mod:`eagle3_forensics.runs.warm`), alternating over ``--report-rounds``.
   Target: ≤ 120 s on the 2-core CI machines (the config's kernels, as ``make report`` runs).
2. **Per-notebook overhead** — for each notebook, with the demo config's parameters for one
   drafter, interleaved over ``--rounds`` rounds, medians:

   * *papermill*: ``papermill.execute_notebook`` as the runner calls it (kernel start, injected
     parameters, every cell, outputs over ZMQ, immediate kernel shutdown), plus the HTML render;
   * *cells*: the time papermill itself records for the cells (the work inside the kernel);
   * *direct*: a fresh ``python`` process that executes the same code cells (magics stripped) in
     one namespace and materialises each cell's displayed value the way the frontend would
     (``_repr_mimebundle_`` / ``_repr_html_``, figures rendered to PNG) — the same package
     calls, no kernel, no notebook;
   * *overhead* = papermill + render − direct.

3. **A fresh clone** (``--fresh-clone``) — what a new user's first two commands cost: the
   repository (its committed HEAD) cloned into a temporary directory, ``make setup`` timed, then
   ``make report`` timed in the clone (nothing of this checkout's ``.venv`` or ``PYTHONPATH``
   reaches it), and the ratio report / set-up. Wall clock and CPU time of each (the CPU time of
   every process it started): on a shared machine the wall clock depends on the neighbours' load,
   the CPU time much less, so both are printed with the load average.
   Target: the report ≤ 120 s wall on a quiet 2-core machine.

Usage::

    .venv/bin/python benchmarks/bench_report.py [--rounds 3] [--drafter healthy] [--skip-report]
        [--skip-notebooks] [--report-rounds 1] [--workers N] [--profile NAME] [--json]
    .venv/bin/python benchmarks/bench_report.py --fresh-clone [--keep] [--json]
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eagle3_forensics.runs.runner import load_config  # noqa: E402

CONFIG = ROOT / "configs" / "demo.yaml"
BASELINE = ROOT / "configs" / "demo_baseline.json"
REPORT_TARGET_S = 120.0


# -- the direct child: run a notebook's code cells as plain Python --------------------------------


def _materialise(value: Any) -> None:
    """Do what displaying ``value`` would cost: build its rich representation."""
    if value is None:
        return
    bundle = getattr(value, "_repr_mimebundle_", None)
    if callable(bundle):
        bundle()
        return
    html = getattr(value, "_repr_html_", None)
    if callable(html):
        html()
        return
    if hasattr(value, "savefig"):  # a matplotlib Figure: the inline backend renders a PNG
        value.savefig(io.BytesIO(), format="png", bbox_inches="tight")  # as matplotlib-inline does
        return
    repr(value)


def direct(notebook: str, params_json: str) -> None:
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    params = json.loads(params_json)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        src = "\n".join(ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("%", "!")))
        tree = ast.parse(src)
        last = tree.body[-1] if tree.body else None
        if isinstance(last, ast.Expr):
            tree.body.pop()
        exec(compile(tree, f"<{cell.get('id')}>", "exec"), namespace)
        if isinstance(last, ast.Expr):
            _materialise(eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace))
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            namespace.update(params)  # papermill's injected cell comes right after


# -- the parent -----------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    cfg = load_config(CONFIG)
    env = {**os.environ, **cfg.env, "E3F_INTERACTIVE": "0", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    env.pop("MPLBACKEND", None)
    return env


def _timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Wall clock, CPU time (this command and every process it started) and exit code of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        sys.stderr.write(f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stderr[-3000:]}\n")
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "exit_code": proc.returncode,
        "load_1min_before": round(load, 2),
        "load_1min_after": round(os.getloadavg()[0], 2),
        "tail": proc.stderr.strip().splitlines()[-1:] if proc.stderr else [],
    }


def fresh_clone(keep: bool) -> dict[str, Any]:
    """``git clone`` this repository's HEAD into a temporary directory, then time ``make setup`` and
    ``make report`` there, with an environment free of this checkout (no PYTHONPATH, no VIRTUAL_ENV)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MAKEFLAGS")}
    clone = Path(tempfile.mkdtemp(prefix="e3f-fresh-clone-"))
    try:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True, check=True
        ).stdout.strip()
        setup = _timed(["make", "setup"], clone, env)
        report = _timed(["make", "report"], clone, env) if setup["exit_code"] == 0 else None
    finally:
        if not keep:
            shutil.rmtree(clone, ignore_errors=True)
    ratio = None
    if report is not None and setup["wall_s"]:
        ratio = round(report["wall_s"] / setup["wall_s"], 2)
    return {
        "clone": str(clone) if keep else None,
        "commit": head,
        "cpus": os.cpu_count(),
        "setup": setup,
        "report": report,
        "report_over_setup_wall": ratio,
        "report_target_s": REPORT_TARGET_S,
    }


def print_fresh_clone(res: dict[str, Any]) -> None:
    print(f"fresh clone of {res['commit']} ({res['cpus']} CPUs; wall depends on the load, CPU much less)")
    for name in ("setup", "report"):
        row = res[name]
        if row is None:
            print(f"  make {name:<7} not run (set-up failed)")
            continue
        print(
            f"  make {name:<7} {row['wall_s']:>7.1f} s wall {row['cpu_s']:>7.1f} s CPU  exit {row['exit_code']}"
            f"  load {row['load_1min_before']:.1f} -> {row['load_1min_after']:.1f}"
        )
    if res["report_over_setup_wall"] is not None:
        rep = res["report"]
        verdict = "PASS" if rep["wall_s"] <= REPORT_TARGET_S and rep["exit_code"] == 0 else "FAIL"
        print(f"  report / set-up: {res['report_over_setup_wall']:.2f}x wall")
        print(f"  make report: target <= {REPORT_TARGET_S:.0f} s after set-up, exit 0: {verdict}")


def time_report(workers: int | None, kernels: str, profile: str | None = None) -> tuple[float, float, int]:
    """(wall s, CPU s of the run and every process it started, exit code) of one demo report."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "eagle3_forensics",
            "run",
            "--config",
            str(CONFIG),
            "--out",
            tmp,
            "--baseline",
            str(BASELINE),
            "--no-progress",
            "--kernels",
            kernels,
        ]
        if profile:
            cmd += ["--profile", profile]
        if workers:
            cmd += ["--workers", str(workers)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr[-3000:])
        return wall, cpu, proc.returncode


def time_papermill(job: Any, cwd: str, out: Path) -> tuple[float, float, float]:
    import nbformat
    import papermill

    from eagle3_forensics.runs.execute import scoped_environ as env_block
    from eagle3_forensics.runs.kernel import KERNEL_NAME, kernel_env
    from eagle3_forensics.runs.report import render_html

    executed = out / f"{job.notebook}.ipynb"
    with env_block(
        {
            **kernel_env(),
            "E3F_INTERACTIVE": "0",
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",
            "MPLBACKEND": None,
            "E3F_RECORD": str(out / f"{job.notebook}.json"),
            **load_config(CONFIG).env,
        }
    ):
        t0 = time.perf_counter()
        papermill.execute_notebook(
            job.path,
            str(executed),
            parameters=job.parameters,
            cwd=cwd,
            kernel_name=KERNEL_NAME,
            progress_bar=False,
            extra_arguments=["--IPKernelApp.log_level=CRITICAL"],
            shutdown_kernel="immediate",
            execution_timeout=600,
        )
        t1 = time.perf_counter()
    nb = nbformat.read(str(executed), as_version=4)
    cells = sum(
        c.metadata.get("papermill", {}).get("duration") or 0.0 for c in nb.cells if c.cell_type == "code"
    )
    t2 = time.perf_counter()
    render_html(executed, out / f"{job.notebook}.html", job.notebook)
    return t1 - t0, cells, time.perf_counter() - t2


def time_direct(job: Any, cwd: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--direct", job.path, json.dumps(job.parameters)],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"direct run of {job.notebook} failed:\n{proc.stderr[-2000:]}")
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--drafter", default="healthy", help="demo drafter for the per-notebook rows")
    ap.add_argument("--skip-report", action="store_true", help="only the per-notebook rows")
    ap.add_argument("--skip-notebooks", action="store_true", help="only the demo report rows")
    ap.add_argument("--report-rounds", type=int, default=1, help="demo reports per kernel mode")
    ap.add_argument("--workers", type=int, help="override the config's workers for the report run")
    ap.add_argument("--profile", help="the config's profile for the report rows (default: make report's)")
    ap.add_argument(
        "--fresh-clone",
        action="store_true",
        help="clone HEAD to a temporary directory, time make setup + make report",
    )
    ap.add_argument("--keep", action="store_true", help="with --fresh-clone: keep the clone")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--direct", nargs=2, metavar=("NOTEBOOK", "PARAMS_JSON"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.direct:
        direct(*args.direct)
        return 0
    if args.fresh_clone:
        res = fresh_clone(args.keep)
        if args.json:
            print(json.dumps(res, indent=2))
        else:
            print_fresh_clone(res)
        rep = res["report"]
        return 0 if rep is not None and rep["exit_code"] == 0 and rep["wall_s"] <= REPORT_TARGET_S else 1

    cfg = load_config(CONFIG)
    jobs = [j for j in cfg.jobs if j.drafter == args.drafter]
    if not jobs:
        raise SystemExit(f"no jobs for drafter {args.drafter!r} in {CONFIG}")
    rows: dict[str, dict[str, list[float]]] = {
        j.notebook: {"pm": [], "cells": [], "render": [], "direct": []} for j in jobs
    }
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(
            0 if args.skip_notebooks else args.rounds
        ):  # interleaved: every contender sees the same machine load
            for job in jobs:
                pm, cells, render = time_papermill(job, str(cfg.notebooks_dir), Path(tmp))
                d = time_direct(job, str(cfg.notebooks_dir))
                r = rows[job.notebook]
                r["pm"].append(pm)
                r["cells"].append(cells)
                r["render"].append(render)
                r["direct"].append(d)
    med = {nb: {k: statistics.median(v) for k, v in r.items() if v} for nb, r in rows.items()}
    med = {nb: m for nb, m in med.items() if m}

    reports: dict[str, list[tuple[float, float, int]]] = {"warm": [], "fresh": []}
    for i in range(0 if args.skip_report else args.report_rounds):
        # alternating, the first mode swapped each round: both see the same machine and page cache
        for kernels in ("warm", "fresh") if i % 2 == 0 else ("fresh", "warm"):
            reports[kernels].append(time_report(args.workers, kernels, args.profile))
    report: dict[str, dict[str, Any]] = {
        k: {
            "wall_s": round(statistics.median(w for w, _, _ in v), 1),
            "cpu_s": round(statistics.median(c for _, c, _ in v), 1),
            "exit_codes": [rc for _, _, rc in v],
        }
        for k, v in reports.items()
        if v
    }
    mode = cfg.kernels  # make report's kernels (the config's)
    report_wall = report[mode]["wall_s"] if report else None
    report_rc = max(report[mode]["exit_codes"]) if report else None
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    result = {
        "cpus": os.cpu_count(),
        "load_1min": round(load, 2),
        "rounds": args.rounds,
        "drafter": args.drafter,
        "per_notebook": {nb: {k: round(v, 3) for k, v in m.items()} for nb, m in med.items()},
        "report_wall_s": report_wall,
        "report_exit_code": report_rc,
        "report": report,
        "report_target_s": REPORT_TARGET_S,
        "workers": args.workers or cfg.workers,
        "runs": len(cfg.jobs),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        if med:  # papermill over fresh kernels, so the kernel start shows in the overhead
            print(
                f"per notebook ({args.drafter}, demo-config parameters, median of {args.rounds} interleaved rounds, "
                f"{os.cpu_count()} CPUs, load {load:.1f})"
            )
            print(
                f"{'notebook':<22} {'papermill':>9} {'(cells)':>8} {'render':>7} {'direct':>7} {'overhead':>9} {'ratio':>6}"
            )
            tot = {"pm": 0.0, "render": 0.0, "direct": 0.0}
            for nb, m in med.items():
                over = m["pm"] + m["render"] - m["direct"]
                print(
                    f"{nb:<22} {m['pm']:>8.2f}s {m['cells']:>7.2f}s {m['render']:>6.2f}s {m['direct']:>6.2f}s "
                    f"{over:>+8.2f}s {(m['pm'] + m['render']) / m['direct']:>5.2f}x"
                )
                for k in tot:
                    tot[k] += m[k]
            over = tot["pm"] + tot["render"] - tot["direct"]
            print(
                f"{'all':<22} {tot['pm']:>8.2f}s {'':>8} {tot['render']:>6.2f}s {tot['direct']:>6.2f}s "
                f"{over:>+8.2f}s {(tot['pm'] + tot['render']) / tot['direct']:>5.2f}x"
            )
        if report:
            print(
                f"\ndemo report ({len(cfg.jobs)} notebook runs, {args.workers or cfg.workers} workers, "
                f"median of {args.report_rounds} alternating round(s))"
            )
            for k, row in report.items():
                print(
                    f"  {k + ' kernels':<14} {row['wall_s']:>6.1f} s wall {row['cpu_s']:>7.1f} s CPU  exit {row['exit_codes']}"
                )
            if "warm" in report:
                w, f = report["warm"], report["fresh"]
                print(
                    f"  fresh / warm:  {f['wall_s'] / w['wall_s']:.2f}x wall, {f['cpu_s'] / w['cpu_s']:.2f}x CPU"
                )
            verdict = (
                "PASS"
                if report_wall is not None and report_wall <= REPORT_TARGET_S and report_rc == 0
                else "FAIL"
            )
            print(f"  {mode} (make report): target <= {REPORT_TARGET_S:.0f} s, exit 0: {verdict}")
    if report_wall is not None and (report_wall > REPORT_TARGET_S or report_rc != 0):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
