"""``eagle3-forensics run``: execute the notebooks over many drafters, render reports, gate regressions.

A run configuration (YAML, see ``configs/demo.yaml``) names the notebooks, the drafters and the
parameters. For every drafter × notebook the runner

* executes the notebook with papermill (kernel ``python3``, working directory the notebooks
  folder, per-cell execution timeout; path parameters resolved to absolute paths against the
  config file), ``workers`` at a time, each in its own worker process, and goes on past failures;
* reads back what the notebook recorded through :mod:`eagle3_forensics.runs.record` (a JSON sidecar,
  never scraped from HTML) and papermill's own metadata (timings, the failing cell);
* renders the executed notebook, failed ones included, to one self-contained HTML file (code
  hidden unless ``show_code``, images inline, no scripts, a restrictive CSP);

then writes ``summary.json`` (machine-readable: per run drafter, notebook, parameters, status,
duration, finding counts by severity, probe metrics, gate result) and ``index.html``.

With a baseline (``--baseline``, see :func:`load_baseline`) the **regression gate** runs: the exit
code is 1 when a notebook failed, an acceptance metric fell beyond its tolerance, or an error
finding appeared that the baseline does not expect; ``index.html`` marks which. Without one,
only notebook failures set the exit code.

Kernels get ``E3F_RECORD`` (their sidecar), ``E3F_INTERACTIVE=0`` (explorers render static
HTML, see :mod:`eagle3_forensics.views.widgets`) and the config's ``env``.
"""

from __future__ import annotations

import ast
import json
import math
import multiprocessing
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.runs.record import ENV_VAR, acceptance_metrics, read_records

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
KERNEL_NAME = "python3"
SUMMARY_SCHEMA = "eagle3-forensics/run-summary/1"
BASELINE_SCHEMA = "eagle3-forensics/baseline/1"
DEFAULT_PATH_PARAMETERS = ("checkpoint", "target", "ids", "corpus", "prompts", "variants")
DEFAULT_TOLERANCE = {"acceptance_length": 0.1, "per_position": 0.1}
_CONFIG_KEYS = {
    "name",
    "description",
    "notebooks_dir",
    "timeout",
    "start_timeout",
    "workers",
    "env",
    "show_code",
    "path_parameters",
    "parameters",
    "notebooks",
    "drafters",
    "drafters_from",
    "gate",
}


# ---------------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------------


@dataclass
class Job:
    drafter: str
    notebook: str  # stem, e.g. "01_checkpoint_keys"
    path: str  # the notebook file
    parameters: dict[str, Any]
    stem: str  # file-name stem of this run's outputs


@dataclass
class RunConfig:
    name: str
    source: str | None
    notebooks_dir: Path
    timeout: int
    start_timeout: int
    workers: int
    env: dict[str, str]
    show_code: bool
    notebooks: list[str]
    drafters: list[str]
    jobs: list[Job]
    tolerance: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TOLERANCE))
    description: str = ""


def notebook_parameters(path: str | Path) -> dict[str, Any]:
    """The names and default values in a notebook's ``parameters`` cell (plain literals)."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    cells = [
        c for c in nb.cells if c.cell_type == "code" and "parameters" in c.get("metadata", {}).get("tags", [])
    ]
    if not cells:
        return {}
    out: dict[str, Any] = {}
    for node in ast.parse(cells[0].source).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    try:
                        out[t.id] = ast.literal_eval(node.value)
                    except ValueError:
                        out[t.id] = None
    return out


def _safe_stem(text: str) -> str:
    """A file-name-safe rendering of a drafter / notebook name (the original stays in the summary)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")
    return stem or "x"


def _resolve_paths(params: dict[str, Any], names: Sequence[str], base: Path) -> dict[str, Any]:
    out = dict(params)
    for k, v in params.items():
        if k in names and isinstance(v, str) and v:
            p = Path(os.path.expanduser(v))
            out[k] = str(p if p.is_absolute() else (base / p).resolve())
    return out


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UnusableInputError(f"config: {what} must be a mapping, got {type(value).__name__}")
    return {str(k): v for k, v in value.items()}


def load_config(path: str | Path) -> RunConfig:
    """Read a run configuration (YAML). Relative paths are relative to the config file."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise UnusableInputError(f"run config not found: {p}", path=str(p))
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UnusableInputError(f"unreadable run config {p}: {' '.join(str(exc).split())[:300]}") from None
    return config_from_dict(_mapping(data, "the top level"), base=p.resolve().parent, source=str(p))


def config_from_dict(data: dict[str, Any], base: str | Path = ".", source: str | None = None) -> RunConfig:
    """Build a :class:`RunConfig` from parsed YAML (see ``configs/demo.yaml`` for every key)."""
    base = Path(base).resolve()
    unknown = set(data) - _CONFIG_KEYS
    if unknown:
        raise UnusableInputError(
            f"config: unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(_CONFIG_KEYS))}"
        )
    path_names = tuple(data.get("path_parameters") or DEFAULT_PATH_PARAMETERS)
    nb_dir_raw = data.get("notebooks_dir")
    nb_dir = NOTEBOOKS_DIR if nb_dir_raw is None else (base / os.path.expanduser(str(nb_dir_raw))).resolve()
    global_params = _resolve_paths(_mapping(data.get("parameters"), "parameters"), path_names, base)

    nb_spec = data.get("notebooks")
    if isinstance(nb_spec, list):
        nb_spec = {str(n): {} for n in nb_spec}
    notebooks = _mapping(nb_spec, "notebooks")
    if not notebooks:
        raise UnusableInputError("config: no notebooks listed")
    declared: dict[str, dict[str, Any]] = {}
    nb_params: dict[str, dict[str, Any]] = {}
    for name, spec in notebooks.items():
        stem = name[:-6] if name.endswith(".ipynb") else name
        f = nb_dir / f"{stem}.ipynb"
        if not f.is_file():
            raise UnusableInputError(f"config: notebook {f} not found")
        declared[stem] = notebook_parameters(f)
        params = _resolve_paths(_mapping(spec, f"notebooks.{name}"), path_names, base)
        bad = set(params) - set(declared[stem])
        if bad:
            raise UnusableInputError(
                f"config: notebook {stem} has no parameter(s) {', '.join(sorted(bad))} "
                f"(it declares {', '.join(declared[stem]) or 'none'})"
            )
        nb_params[stem] = params
    names = list(declared)

    drafters: dict[str, dict[str, Any]] = {}
    if data.get("drafters_from") is not None:
        root = (base / os.path.expanduser(str(data["drafters_from"]))).resolve()
        if not root.is_dir():
            raise UnusableInputError(
                f"config: drafters_from {root} is not a directory (create the demo with `make data`)"
            )
        for d in sorted(x for x in root.iterdir() if x.is_dir() and not x.name.startswith(".")):
            drafters[d.name] = {"checkpoint": str(d)}
    for dname, spec in _mapping(data.get("drafters"), "drafters").items():
        drafters[dname] = (
            {"checkpoint": spec} if isinstance(spec, str) else _mapping(spec, f"drafters.{dname}")
        )
    if not drafters:
        raise UnusableInputError("config: no drafters (give `drafters` or `drafters_from`)")

    jobs: list[Job] = []
    stems: set[str] = set()
    for dname, spec in drafters.items():
        unknown_d = set(spec) - {"checkpoint", "parameters", "notebooks"}
        if unknown_d:
            raise UnusableInputError(
                f"config: drafters.{dname}: unknown key(s) {', '.join(sorted(unknown_d))} "
                "(checkpoint, parameters, notebooks)"
            )
        d_params = _resolve_paths(
            _mapping(spec.get("parameters"), f"drafters.{dname}.parameters"), path_names, base
        )
        if spec.get("checkpoint") is not None:
            d_params = {
                **_resolve_paths({"checkpoint": str(spec["checkpoint"])}, path_names, base),
                **d_params,
            }
        chosen = spec.get("notebooks")
        selected = (
            names
            if chosen is None
            else [str(n)[:-6] if str(n).endswith(".ipynb") else str(n) for n in chosen]
        )
        missing = [n for n in selected if n not in declared]
        if missing:
            raise UnusableInputError(
                f"config: drafters.{dname}.notebooks names {', '.join(missing)}, "
                "which the config's notebooks do not list"
            )
        for k in d_params:
            if not any(k in declared[n] for n in selected):
                raise UnusableInputError(
                    f"config: drafters.{dname}: no listed notebook has a parameter {k!r}"
                )
        for n in selected:
            params = {k: v for k, v in global_params.items() if k in declared[n]}
            params.update(nb_params[n])
            params.update({k: v for k, v in d_params.items() if k in declared[n]})
            stem = f"{_safe_stem(dname)}__{_safe_stem(n)}"
            while stem in stems:
                stem += "_"
            stems.add(stem)
            jobs.append(Job(dname, n, str(nb_dir / f"{n}.ipynb"), params, stem))

    gate = _mapping(data.get("gate"), "gate")
    tolerance = dict(DEFAULT_TOLERANCE)
    tolerance.update({k: float(v) for k, v in _mapping(gate.get("tolerance"), "gate.tolerance").items()})
    workers = int(data.get("workers") or 1)
    return RunConfig(
        name=str(data.get("name") or (Path(source).stem if source else "run")),
        source=source,
        notebooks_dir=nb_dir,
        timeout=int(data.get("timeout") or 300),
        start_timeout=int(data.get("start_timeout") or 120),
        workers=max(1, workers),
        env={str(k): str(v) for k, v in _mapping(data.get("env"), "env").items()},
        show_code=bool(data.get("show_code", False)),
        notebooks=names,
        drafters=list(drafters),
        jobs=jobs,
        tolerance=tolerance,
        description=str(data.get("description") or ""),
    )


# ---------------------------------------------------------------------------------------------
# executing one notebook (runs in a worker process)
# ---------------------------------------------------------------------------------------------


@contextmanager
def _env(values: dict[str, str | None]) -> Iterator[None]:
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
    import nbformat

    try:
        nb = nbformat.read(str(executed), as_version=4)
    except Exception:
        return False
    return any(
        c.get("metadata", {}).get("papermill", {}).get("status") in ("completed", "failed", "running")
        for c in nb.cells
        if c.cell_type == "code"
    )


def execute_job(job: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """Run one notebook, read its sidecar, render its HTML. Never raises: failures are in the result."""
    import papermill

    from eagle3_forensics.runs.report import render_html, run_header_html

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
        ENV_VAR: str(sidecar),
        "E3F_INTERACTIVE": "0",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        # ipykernel picks the inline backend only when MPLBACKEND is unset
        "MPLBACKEND": None,
    }
    start = time.perf_counter()
    with _env(env):
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


# ---------------------------------------------------------------------------------------------
# what a run recorded -> summary fields
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# the regression gate
# ---------------------------------------------------------------------------------------------


@dataclass
class GateProblem:
    drafter: str
    notebook: str | None
    kind: str  # notebook_failed | acceptance_length | per_position | new_error_finding | missing
    message: str


@dataclass
class Gate:
    baseline: str | None
    passed: bool = True
    problems: list[GateProblem] = field(default_factory=list)
    notes: list[GateProblem] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "passed": self.passed,
            "problems": [asdict(p) for p in self.problems],
            "notes": [asdict(p) for p in self.notes],
        }


def _num(x: Any) -> float | None:
    if (
        isinstance(x, bool)
        or not isinstance(x, (int, float))
        or (isinstance(x, float) and not math.isfinite(x))
    ):
        return None
    return float(x)


def load_baseline(path: str | Path, tolerance: dict[str, float] | None = None) -> dict[str, Any]:
    """A gate baseline: ``{"drafters": {name: {acceptance_length, per_position, expected_findings}}}``.

    Also accepts a previous run's ``summary.json`` (or its directory): its per-drafter metrics
    become the baseline with ``tolerance`` (default :data:`DEFAULT_TOLERANCE`), and every finding
    code it saw is expected.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "summary.json"
    if not p.is_file():
        raise UnusableInputError(f"baseline not found: {p}", path=str(p))
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UnusableInputError(f"unreadable baseline {p}: {_one_line(str(exc), 200)}") from None
    if isinstance(data, dict) and data.get("schema") == SUMMARY_SCHEMA:
        return baseline_from_runs(data.get("runs") or [], tolerance, source=str(p))
    if not isinstance(data, dict) or not isinstance(data.get("drafters"), dict):
        raise UnusableInputError(f"{p} is neither a baseline (with 'drafters') nor a run summary.json")
    data.setdefault("source", str(p))
    return data


def baseline_from_runs(
    runs: Sequence[dict[str, Any]], tolerance: dict[str, float] | None = None, source: str | None = None
) -> dict[str, Any]:
    """A baseline from a run's results: per drafter the acceptance metrics of the first run that
    measured them (``by_notebook`` overrides for notebooks that measured different values, e.g.
    with other prompts) and every finding code seen."""
    tol = {**DEFAULT_TOLERANCE, **(tolerance or {})}
    drafters: dict[str, dict[str, Any]] = {}
    for r in runs:
        entry = drafters.setdefault(r["drafter"], {"expected_findings": []})
        for code in r.get("codes") or []:
            if code not in entry["expected_findings"]:
                entry["expected_findings"].append(code)
        m = r.get("metrics") or {}
        al = _num(m.get("acceptance_length"))
        if al is None:
            continue
        spec: dict[str, Any] = {
            "acceptance_length": {"value": round(al, 6), "tolerance": tol["acceptance_length"]},
            "per_position": {
                "values": [round(float(x), 6) for x in m.get("per_position") or []],
                "tolerance": tol["per_position"],
            },
        }
        if "acceptance_length" not in entry:
            entry.update(spec)
        elif (entry["acceptance_length"]["value"], entry["per_position"]["values"]) != (
            spec["acceptance_length"]["value"],
            spec["per_position"]["values"],
        ):
            entry.setdefault("by_notebook", {})[r["notebook"]] = spec
    for entry in drafters.values():
        entry["expected_findings"] = sorted(entry["expected_findings"])
    return {"schema": BASELINE_SCHEMA, "source": source, "drafters": drafters}


def evaluate_gate(runs: Sequence[dict[str, Any]], baseline: dict[str, Any] | None) -> Gate:
    """Failures: a notebook that failed; acceptance length or a per-position acceptance below
    baseline − tolerance; an error finding whose code the baseline does not expect. Notes
    (not failures): values above baseline + tolerance, expected findings no longer seen,
    drafters without a baseline entry."""
    gate = Gate(None if baseline is None else str(baseline.get("source") or "baseline"))
    entries: dict[str, Any] = {} if baseline is None else dict(baseline.get("drafters") or {})
    for r in runs:
        r["gate"] = {"status": "pass", "problems": [], "notes": []}

        def fail(kind: str, message: str, run: dict[str, Any] = r) -> None:
            gate.problems.append(GateProblem(run["drafter"], run["notebook"], kind, message))
            run["gate"]["problems"].append(message)
            run["gate"]["status"] = "fail"

        def note(kind: str, message: str, run: dict[str, Any] = r) -> None:
            gate.notes.append(GateProblem(run["drafter"], run["notebook"], kind, message))
            run["gate"]["notes"].append(message)

        if r["status"] != "ok":
            fail("notebook_failed", f"notebook failed: {r.get('error') or 'unknown error'}")
        entry = entries.get(r["drafter"])
        if baseline is None:
            r["gate"]["status"] = "fail" if r["status"] != "ok" else "not gated"
            continue
        if entry is None:
            note("no_baseline", "no baseline entry for this drafter")
            continue
        expected = set(entry.get("expected_findings") or [])
        if r.get("findings") is not None:
            for code in dict.fromkeys(f["code"] for f in r["findings"] if f.get("severity") == "error"):
                if code not in expected:
                    engines = sorted(
                        {str(f.get("engine")) for f in r["findings"] if f["code"] == code and f.get("engine")}
                    )
                    fail(
                        "new_error_finding",
                        f"new error finding {code}" + (f" [{', '.join(engines)}]" if engines else ""),
                    )
        else:
            for code in r.get("codes") or []:
                if code not in expected:
                    fail("new_error_finding", f"new finding {code} (severity not recorded)")
        seen = set(r.get("codes") or [])
        if r.get("verdict") is not None and r["status"] == "ok":
            gone = sorted(expected - seen)
            if gone:
                note("finding_gone", f"expected finding(s) no longer reported: {', '.join(gone)}")
        m = r.get("metrics") or {}
        if _num(m.get("acceptance_length")) is None:
            continue
        spec = (entry.get("by_notebook") or {}).get(r["notebook"]) or entry
        al_spec = spec.get("acceptance_length")
        if isinstance(al_spec, dict) and _num(al_spec.get("value")) is not None:
            base, tol = (
                float(al_spec["value"]),
                float(al_spec.get("tolerance", DEFAULT_TOLERANCE["acceptance_length"])),
            )
            al = float(m["acceptance_length"])
            r["gate"]["acceptance_length_baseline"] = base
            if al < base - tol:
                fail("acceptance_length", f"acceptance length {al:.3f} < baseline {base:.3f} − {tol:g}")
            elif al > base + tol:
                note(
                    "acceptance_length",
                    f"acceptance length {al:.3f} > baseline {base:.3f} + {tol:g} "
                    "(better: update the baseline)",
                )
        pp_spec = spec.get("per_position")
        if isinstance(pp_spec, dict) and isinstance(pp_spec.get("values"), list):
            base_pp = [float(x) for x in pp_spec["values"]]
            tols = pp_spec.get("tolerance", DEFAULT_TOLERANCE["per_position"])
            tol_list = [float(x) for x in tols] if isinstance(tols, list) else [float(tols)] * len(base_pp)
            got = [float(x) for x in m.get("per_position") or []]
            if len(got) != len(base_pp):
                fail(
                    "per_position",
                    f"per-position acceptance has {len(got)} positions, baseline {len(base_pp)} (K changed?)",
                )
            else:
                for i, (g, b, t) in enumerate(zip(got, base_pp, tol_list, strict=False)):
                    if g < b - t:
                        fail(
                            "per_position",
                            f"acceptance at draft position {i} {g:.3f} < baseline {b:.3f} − {t:g}",
                        )
    for name, entry in entries.items():
        mine = [r for r in runs if r["drafter"] == name]
        if not mine:
            gate.notes.append(GateProblem(name, None, "missing", "in the baseline but not in this run"))
        elif entry.get("acceptance_length") and not any(
            _num((r.get("metrics") or {}).get("acceptance_length")) is not None for r in mine
        ):
            gate.notes.append(
                GateProblem(name, None, "missing", "baseline has acceptance metrics; no run measured them")
            )
    gate.passed = not gate.problems
    return gate


def changes(runs: Sequence[dict[str, Any]], previous: Sequence[dict[str, Any]] | None) -> None:
    """Attach ``change`` (vs the previous run of the same drafter × notebook) to every run."""
    prev = {(p.get("drafter"), p.get("notebook")): p for p in previous or []}
    for r in runs:
        p = prev.get((r["drafter"], r["notebook"]))
        if p is None:
            r["change"] = None if previous is None else {"new": True}
            continue
        ch: dict[str, Any] = {
            "status": None if p.get("status") == r["status"] else f"{p.get('status')} → {r['status']}"
        }
        for key in ("acceptance_length", "coverage"):
            a, b = _num((r.get("metrics") or {}).get(key)), _num((p.get("metrics") or {}).get(key))
            ch[key] = None if a is None or b is None else round(a - b, 6)
        a_err, b_err = (r.get("counts") or {}).get("error"), (p.get("counts") or {}).get("error")
        ch["errors"] = None if a_err is None or b_err is None else a_err - b_err
        old_codes, new_codes = set(p.get("codes") or []), set(r.get("codes") or [])
        ch["codes_added"] = sorted(new_codes - old_codes)
        ch["codes_removed"] = sorted(old_codes - new_codes)
        r["change"] = ch


def read_previous(path: str | Path) -> list[dict[str, Any]]:
    p = Path(path)
    if p.is_dir():
        p = p / "summary.json"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UnusableInputError(f"unreadable previous run {p}: {_one_line(str(exc), 200)}") from None
    runs = data.get("runs") if isinstance(data, dict) else data
    if not isinstance(runs, list):
        raise UnusableInputError(f"{p} is not a run summary")
    return [r for r in runs if isinstance(r, dict)]


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in ("eagle3-forensics", "torch", "papermill", "nbconvert", "ipykernel"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def _git_sha(where: Path) -> str | None:
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "HEAD"],  # noqa: S607 - git from PATH, read-only provenance
            cwd=where,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def _durations(summary: Path) -> dict[tuple[str, str], float]:
    try:
        data = json.loads(summary.read_text(encoding="utf-8"))
        return {(str(r["drafter"]), str(r["notebook"])): float(r["duration_s"]) for r in data.get("runs", [])}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc="notebooks",
        unit="nb",
        file=sys.stderr,
        disable=not enabled,
        dynamic_ncols=True,
        leave=True,
    )


def run(
    config: RunConfig,
    out_dir: str | Path,
    *,
    baseline: str | Path | None = None,
    previous: str | Path | None = None,
    workers: int | None = None,
    progress: bool = True,
    write_baseline: str | Path | None = None,
    log: Callable[[str], None] | None = None,
) -> int:
    """Execute every job of ``config``; write ``summary.json`` and ``index.html`` under ``out_dir``.

    Returns the exit code: 0 when every notebook ran (and the gate passed, with a baseline), 1 otherwise.
    """
    from eagle3_forensics.runs.report import index_html

    t0 = time.perf_counter()
    out = Path(out_dir).resolve()  # absolute: the kernels run in the notebooks folder, not in our cwd
    out.mkdir(parents=True, exist_ok=True)
    base = load_baseline(baseline, config.tolerance) if baseline is not None else None
    prev_runs = read_previous(previous) if previous is not None else None
    if prev_runs is None and baseline is not None:
        bp = Path(baseline)
        bp = bp / "summary.json" if bp.is_dir() else bp
        try:
            data = json.loads(bp.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("schema") == SUMMARY_SCHEMA:
                prev_runs = data.get("runs")
        except (OSError, ValueError):
            pass
    n_workers = max(1, min(workers or config.workers, len(config.jobs)))
    settings = {
        "out": str(out),
        "cwd": str(config.notebooks_dir),
        "timeout": config.timeout,
        "start_timeout": config.start_timeout,
        "env": config.env,
        "show_code": config.show_code,
        "name": config.name,
    }
    say = log or (lambda msg: sys.stderr.write(msg + "\n"))
    say(
        f"eagle3-forensics run: {len(config.jobs)} notebook runs ({len(config.drafters)} drafters × "
        f"{len(config.notebooks)} notebooks), {n_workers} worker(s), per-cell timeout {config.timeout}s -> {out}"
    )
    order = {id(j): i for i, j in enumerate(config.jobs)}
    results: list[dict[str, Any] | None] = [None] * len(config.jobs)
    bar = _progress(len(config.jobs), progress)

    def done(i: int, res: dict[str, Any]) -> None:
        results[i] = res
        bar.update(1)
        detail = f" · {res['error']}" if res["error"] else ""
        bar.write(
            f"  {res['drafter']} · {res['notebook']} · {res['status']} · {res['duration_s']:.1f}s{detail}",
            file=sys.stderr,
        )

    jobs = [(order[id(j)], asdict(j)) for j in config.jobs]
    # longest first (durations of the previous run into the same --out, unknown ones first): the
    # last notebooks to finish are short ones, so the workers finish together
    history = _durations(out / "summary.json")
    jobs.sort(key=lambda ij: -history.get((ij[1]["drafter"], ij[1]["notebook"]), math.inf))
    try:
        if n_workers == 1:
            for i, job in jobs:
                done(i, execute_job(job, settings))
        else:
            # one process per worker (spawned: no inherited threads or kernel state); papermill and
            # nbconvert are imported once per worker, kernels are still one per notebook
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=n_workers, mp_context=ctx) as pool:
                futures: dict[Future[dict[str, Any]], tuple[int, dict[str, Any]]] = {
                    pool.submit(execute_job, job, settings): (i, job) for i, job in jobs
                }
                from concurrent.futures import as_completed

                for fut in as_completed(futures):
                    i, job = futures[fut]
                    try:
                        res = fut.result()
                    except Exception as exc:  # a worker died: record it, keep going
                        res = {
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
                    done(i, res)
    finally:
        bar.close()

    runs: list[dict[str, Any]] = []
    for item in results:
        assert item is not None
        records = item.pop("records", {}) or {}
        item.update(extract(records))
        runs.append(item)
    changes(runs, prev_runs)
    gate = evaluate_gate(runs, base)
    failed = sum(r["status"] != "ok" for r in runs)
    exit_code = 0 if (failed == 0 and gate.passed) else 1
    wall = round(time.perf_counter() - t0, 1)
    summary = {
        "schema": SUMMARY_SCHEMA,
        "name": config.name,
        "description": config.description,
        "config": config.source,
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "wall_s": wall,
        "workers": n_workers,
        "notebooks": config.notebooks,
        "drafters": config.drafters,
        "git": _git_sha(config.notebooks_dir),
        "versions": _versions(),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "ok": sum(r["status"] == "ok" for r in runs),
        "failed": failed,
        "gate": gate.to_dict(),
        "exit_code": exit_code,
        "runs": runs,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    (out / "index.html").write_text(index_html(summary), encoding="utf-8")
    if write_baseline is not None:
        drafted = baseline_from_runs(runs, config.tolerance)
        new = {
            "schema": BASELINE_SCHEMA,
            "description": (
                f"Regression baseline for run config '{config.name}', written by `eagle3-forensics run "
                "--write-baseline`. Per drafter: acceptance length and per-position (cumulative) "
                "acceptance with absolute tolerances (a drop beyond them fails the gate), "
                "by_notebook overrides where a notebook measures with other settings, and the "
                "finding codes expected (an error finding not listed fails the gate)."
            ),
            "drafters": drafted["drafters"],
        }
        Path(write_baseline).write_text(json.dumps(new, indent=2) + "\n", encoding="utf-8")
        say(f"baseline written: {write_baseline}")
    say(
        f"{len(runs) - failed}/{len(runs)} notebook runs ok"
        + (
            ""
            if base is None
            else f"; gate {'passed' if gate.passed else 'FAILED'} against {base.get('source')}"
        )
    )
    for p in gate.problems:
        say(f"  gate: {p.drafter} · {p.notebook or '-'}: {p.message}")
    say(f"report: {out / 'index.html'} · summary: {out / 'summary.json'} · wall time {wall:.1f} s")
    return exit_code


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
