"""Executing notebooks: one papermill run per job, in worker processes, results read back.

For every job :func:`execute_job` executes the notebook with papermill (kernel
``eagle3-forensics`` running this interpreter, see :mod:`eagle3_forensics.runs.kernel`; working
directory the notebooks folder; per-cell execution timeout), reads back what the notebook recorded
through :mod:`eagle3_forensics.runs.record` (a JSON sidecar, never scraped from HTML) and papermill's
own metadata (timings, the failing cell), and renders the executed notebook, failed
ones included, to one self-contained HTML file (:func:`eagle3_forensics.runs.report.render_html`).
:func:`execute_jobs` runs many, ``workers`` at a time, each in its own spawned process, and goes
on past failures. Kernels get ``E3F_RECORD`` (their sidecar), ``E3F_INTERACTIVE=0`` (explorers
render static HTML, see :mod:`eagle3_forensics.views.widgets`) and the config's ``env``.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from eagle3_forensics.runs import warm
from eagle3_forensics.runs.config import Job
from eagle3_forensics.runs.kernel import KERNEL_NAME, kernel_env
from eagle3_forensics.runs.record import ENV_VAR, acceptance_metrics, read_records


@contextmanager
def scoped_environ(values: dict[str, str | None]) -> Iterator[None]:
    """Set (``None``: unset) environment variables for kernels started inside the block."""
    saved = {k: os.environ.get(k) for k in values}
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old


def _one_line(text: str, limit: int = 500) -> str:
    return " ".join(str(text).split())[:limit]


def _error_of(exc: BaseException) -> dict[str, Any]:
    ename = getattr(exc, "ename", None) or type(exc).__name__
    evalue = getattr(exc, "evalue", None)
    evalue = str(evalue) if evalue is not None else str(exc)
    # papermill's evalue of a DeadKernelError etc. may carry a traceback; keep the first line's gist
    return {"ename": str(ename), "evalue": _one_line(evalue), "cell": getattr(exc, "exec_count", None)}


def _cells_ran(executed: Path) -> bool:
    import nbformat  # optional: nbformat (the notebooks extra)

    try:
        nb = nbformat.read(str(executed), as_version=4)
    except Exception:
        return False
    return any(
        c.get("metadata", {}).get("papermill", {}).get("status") in ("completed", "failed", "running")
        for c in nb.cells
        if c.cell_type == "code"
    )


# seconds a cell's last outputs may trail its reply; nbclient's default of 4 s, which papermill turns
# into a failed cell, is missed by plot cells when several kernels share 2 loaded cores
IOPUB_TIMEOUT_S = 60

# for every kernel, after the config's env (explorers render static HTML; ipykernel picks the inline
# backend only when MPLBACKEND is unset)
_KERNEL_ENV: dict[str, str | None] = {
    "E3F_INTERACTIVE": "0",
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    "MPLBACKEND": None,
}


def execute_job(job: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """Run one notebook, read its sidecar, render its HTML. Never raises: failures are in the result."""
    import papermill  # optional: papermill (the notebooks extra)

    from eagle3_forensics.runs.report import render_html, run_header_html  # heavy: numpy, nbconvert

    out = Path(settings["out"])
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    executed, sidecar = runs / f"{job['stem']}.ipynb", runs / f"{job['stem']}.record.json"
    for stale in (executed, sidecar, out / f"{job['stem']}.html"):  # a previous run's, in the same --out
        stale.unlink(missing_ok=True)
    res: dict[str, Any] = {
        "drafter": job["drafter"],
        "notebook": job["notebook"],
        "parameters": job["parameters"],
        "status": "failed",
        "duration_s": 0.0,
        "error": None,
        "error_detail": None,
        "records": {},
        "html": None,
        "executed_notebook": None,
        "record": None,
        "attempts": 0,
    }
    env: dict[str, str | None] = {
        **settings.get("env", {}),
        # the kernelspec eagle3-forensics starts this interpreter, installed or not; in a warm run, a
        # client of the run's zygote (runs.warm)
        **(settings.get("kernel_env") or kernel_env()),
        ENV_VAR: str(sidecar),
        **_KERNEL_ENV,
    }
    start = time.perf_counter()
    with scoped_environ(env):
        for attempt in (1, 2):
            res["attempts"] = attempt
            try:
                papermill.execute_notebook(
                    job["path"],
                    str(executed),
                    parameters=job["parameters"],
                    cwd=settings["cwd"],
                    kernel_name=KERNEL_NAME,
                    progress_bar=False,
                    start_timeout=settings["start_timeout"],
                    execution_timeout=settings["timeout"],
                    iopub_timeout=IOPUB_TIMEOUT_S,
                    # kernel log lines (transport warnings, shutdown noise) would mix with the progress bar
                    extra_arguments=["--IPKernelApp.log_level=CRITICAL"],
                    # every output and the sidecar are written when the last cell returns; a graceful
                    # kernel shutdown only adds 0.5-2 s of waiting per notebook
                    shutdown_kernel="immediate",
                )
                res["status"], res["error"], res["error_detail"] = "ok", None, None
                break
            except Exception as exc:  # recorded; the other runs go on
                detail = _error_of(exc)
                res["error_detail"] = detail
                where = f" (cell {detail['cell']})" if detail["cell"] is not None else ""
                res["error"] = _one_line(f"{detail['ename']}: {detail['evalue']}{where}")
                # a kernel that never started (port race between workers, slow start) gets one more try
                if (
                    attempt == 1
                    and not _cells_ran(executed)
                    and not isinstance(exc, papermill.PapermillExecutionError)
                ):
                    continue
                break
    res["duration_s"] = round(time.perf_counter() - start, 2)
    try:
        res["records"] = read_records(sidecar)
    except (ValueError, OSError) as exc:
        res["records"] = {}
        if res["status"] == "ok":
            res["status"], res["error"] = "failed", _one_line(f"unreadable record sidecar: {exc}")
    if sidecar.exists():
        res["record"] = sidecar.relative_to(out).as_posix()
    if executed.exists():
        res["executed_notebook"] = executed.relative_to(out).as_posix()
        html_name = f"{job['stem']}.html"
        try:
            render_html(
                executed,
                out / html_name,
                f"{job['drafter']} · {job['notebook']}",
                header_html=run_header_html(res, settings.get("name", "")),
                show_code=settings.get("show_code", False),
            )
            res["html"] = html_name
        except Exception as exc:
            res["status"] = "failed"
            res["error"] = ((res["error"] + "; ") if res["error"] else "") + _one_line(
                f"HTML rendering: {exc}"
            )
    return res


def extract(records: dict[str, Any]) -> dict[str, Any]:
    """Summary fields from a notebook's records: verdict, counts, codes, findings and metrics."""
    out: dict[str, Any] = {"verdict": None, "counts": {}, "codes": [], "findings": None, "metrics": {}}
    if isinstance(records.get("verdict"), str):
        out["verdict"] = records["verdict"]
    if isinstance(records.get("counts"), dict):
        out["counts"] = {str(k): int(v) for k, v in records["counts"].items() if isinstance(v, int)}
    if isinstance(records.get("codes"), list):
        out["codes"] = [str(c) for c in records["codes"]]
    if isinstance(records.get("findings"), list):
        out["findings"] = [f for f in records["findings"] if isinstance(f, dict) and "code" in f]
        if not out["codes"]:
            out["codes"] = list(dict.fromkeys(str(f["code"]) for f in out["findings"]))
    metrics: dict[str, Any] = {}
    acc = acceptance_metrics(records.get("acceptance")) or acceptance_metrics(records.get("probe"))
    if acc:
        metrics.update(acc)
    cov = records.get("coverage")
    if isinstance(cov, dict) and "coverage" in cov:
        metrics["coverage"] = cov["coverage"]
        if "best_possible_coverage" in cov:
            metrics["best_possible_coverage"] = cov["best_possible_coverage"]
    if isinstance(records.get("vocab_kind"), str):
        metrics["vocab_kind"] = records["vocab_kind"]
    vs = records.get("vocab_vs_data")
    if isinstance(vs, dict) and isinstance(vs.get("jaccard"), (int, float)):
        metrics["vocab_jaccard_vs_data"] = vs["jaccard"]
    extra = records.get("metrics")
    if isinstance(extra, dict):
        metrics.update({str(k): v for k, v in extra.items()})
    out["metrics"] = metrics
    return out


def _durations(summary: Path) -> dict[tuple[str, str], float]:
    """Per job, the duration of the previous run into the same output directory (for ordering)."""
    try:
        data = json.loads(summary.read_text(encoding="utf-8"))
        return {(str(r["drafter"]), str(r["notebook"])): float(r["duration_s"]) for r in data.get("runs", [])}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm  # heavy: tqdm

    return tqdm(
        total=total,
        desc="notebooks",
        unit="nb",
        file=sys.stderr,
        disable=not enabled,
        dynamic_ncols=True,
        leave=True,
    )


def _worker_failed(job: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    return {
        "drafter": job["drafter"],
        "notebook": job["notebook"],
        "parameters": job["parameters"],
        "status": "failed",
        "duration_s": 0.0,
        "error": _one_line(f"worker failed: {type(exc).__name__}: {exc}"),
        "error_detail": None,
        "records": {},
        "html": None,
        "executed_notebook": None,
        "record": None,
        "attempts": 1,
    }


def execute_jobs(
    jobs: Sequence[Job], settings: dict[str, Any], workers: int, progress: bool = True
) -> list[dict[str, Any]]:
    """Execute ``jobs`` (``workers`` at a time); one result per job, in the order of ``jobs``, each
    with the summary fields of :func:`extract` in place of its raw records."""
    out = Path(settings["out"])
    results: list[dict[str, Any] | None] = [None] * len(jobs)
    bar = _progress(len(jobs), progress)

    def done(i: int, res: dict[str, Any]) -> None:
        results[i] = res
        bar.update(1)
        detail = f" · {res['error']}" if res["error"] else ""
        bar.write(
            f"  {res['drafter']} · {res['notebook']} · {res['status']} · {res['duration_s']:.1f}s{detail}",
            file=sys.stderr,
        )

    todo = [(i, asdict(j)) for i, j in enumerate(jobs)]
    # longest first (durations of the previous run into the same --out, unknown ones first): the
    # last notebooks to finish are short ones, so the workers finish together
    history = _durations(out / "summary.json")
    todo.sort(key=lambda ij: -history.get((ij[1]["drafter"], ij[1]["notebook"]), math.inf))
    try:
        with ExitStack() as stack:
            if settings.get("kernels", "fresh") == "warm" and warm.supported():
                zygote = stack.enter_context(warm.WarmKernels(_kernel_overrides(settings)))
                settings = {**settings, "kernel_env": zygote.kernel_env()}
            _execute(todo, settings, workers, done)
    finally:
        bar.close()
    runs: list[dict[str, Any]] = []
    for item in results:
        assert item is not None
        records = item.pop("records", {}) or {}
        item.update(extract(records))
        runs.append(item)
    return runs


def _kernel_overrides(settings: dict[str, Any]) -> dict[str, str | None]:
    """The environment :func:`execute_job` gives every kernel, less the per-job sidecar."""
    return {**settings.get("env", {}), **_KERNEL_ENV}


def _execute(
    todo: list[tuple[int, dict[str, Any]]],
    settings: dict[str, Any],
    workers: int,
    done: Callable[[int, dict[str, Any]], None],
) -> None:
    if workers <= 1:
        for i, job in todo:
            done(i, execute_job(job, settings))
    else:
        # one process per worker (spawned: no inherited threads or kernel state); papermill and
        # nbconvert are imported once per worker, kernels are still one per notebook
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures: dict[Future[dict[str, Any]], tuple[int, dict[str, Any]]] = {
                pool.submit(execute_job, job, settings): (i, job) for i, job in todo
            }
            for fut in as_completed(futures):
                i, job = futures[fut]
                try:
                    res = fut.result()
                except Exception as exc:  # a worker died: record it, keep going
                    res = _worker_failed(job, exc)
                done(i, res)


__all__ = ["KERNEL_NAME", "execute_job", "execute_jobs", "extract", "scoped_environ"]
