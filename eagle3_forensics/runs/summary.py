"""Finishing a run: from the per-job results to ``summary.json``, ``index.html``, the gate, the
history entry and the bundle.

:func:`finalize` is the one place that turns results into outputs, for a single ``run`` and for
``merge-runs`` alike, which is what makes a merged run identical to a single one (timings aside).
:class:`Finish` holds the options that apply to a whole run (``--baseline``, ``--previous``,
``--history``, ``--gate-window``, ``--trend-runs``, ``--bundle``, ``--write-baseline``);
:meth:`Finish.check` reads and validates them before any notebook runs, so a typo fails in a
second, not after the run.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from eagle3_forensics.errors import BadArgumentsError, UnusableInputError, one_line
from eagle3_forensics.runs.bundle import write_bundle
from eagle3_forensics.runs.gate import (
    BASELINE_SCHEMA,
    SUMMARY_SCHEMA,
    Gate,
    baseline_from_runs,
    check_run_records,
    evaluate_gates,
    finite_number,
    load_baseline,
)
from eagle3_forensics.runs.history import (
    DEFAULT_TREND_RUNS,
    History,
    append_entry,
    free_entry_id,
    new_entry_id,
    parse_entry,
    read_history,
    trend,
    window_baseline,
)
from eagle3_forensics.schemas import log_object, strict

Log = Callable[[str], None]


def to_stderr(msg: str) -> None:
    """The default progress log of a run or a merge: one line on stderr."""
    sys.stderr.write(msg + "\n")


# -- changes against a previous run ---------------------------------------------------------------


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
            a, b = (
                finite_number((r.get("metrics") or {}).get(key)),
                finite_number((p.get("metrics") or {}).get(key)),
            )
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
        raise UnusableInputError(f"unreadable previous run {p}: {one_line(exc)[:200]}") from None
    runs = data.get("runs") if isinstance(data, dict) else data
    if not isinstance(runs, list):
        raise UnusableInputError(f"{p} is not a run summary")
    return check_run_records(runs, str(p))


# -- provenance ------------------------------------------------------------------------------------


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in ("eagle3-forensics", "torch", "papermill", "nbconvert", "ipykernel"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def git_sha(where: Path) -> str | None:
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


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "platform": platform.platform()}


def contract_json(obj: dict[str, Any]) -> str:
    """The text of a file with a published schema (summary.json, a baseline, part.json): strict
    JSON (NaN/Infinity as null), also logged for the test suite's schema validation."""
    doc = strict(json.loads(json.dumps(obj, default=str)))
    log_object(doc)
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: readers see old or new, whole."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# -- the options of a whole run ---------------------------------------------------------------------


@dataclass
class Finish:
    """Options that apply to a whole run (a single ``run`` or ``merge-runs``), not to a shard."""

    baseline: str | Path | None = None
    previous: str | Path | None = None
    history: str | Path | None = None
    gate_window: int | None = None
    trend_runs: int = DEFAULT_TREND_RUNS
    bundle: str | Path | None = None
    write_baseline: str | Path | None = None
    # read by check()
    base: dict[str, Any] | None = field(default=None, repr=False)
    prev_runs: list[dict[str, Any]] | None = field(default=None, repr=False)

    def given(self) -> list[str]:
        """The options set, as their command-line names."""
        names = {
            "baseline": "--baseline",
            "previous": "--previous",
            "history": "--history",
            "gate_window": "--gate-window",
            "bundle": "--bundle",
            "write_baseline": "--write-baseline",
        }
        return [flag for attr, flag in names.items() if getattr(self, attr) is not None]

    def check(self, tolerance: dict[str, float]) -> Finish:
        """Validate the options and read the baseline and the previous run (fail before running)."""
        if self.gate_window is not None:
            if self.history is None:
                raise BadArgumentsError(
                    "--gate-window N compares against the last N runs of --history DIR: give --history"
                )
            if self.gate_window < 1:
                raise BadArgumentsError(f"--gate-window must be at least 1, got {self.gate_window}")
        if self.trend_runs < 1:
            raise BadArgumentsError(f"--trend-runs must be at least 1, got {self.trend_runs}")
        if self.history is not None and Path(self.history).exists() and not Path(self.history).is_dir():
            raise UnusableInputError(f"history {self.history} is not a directory", path=str(self.history))
        if self.bundle is not None:
            b = Path(self.bundle)
            if b.suffix.lower() != ".zip":
                raise BadArgumentsError(f"--bundle {b}: the archive's name must end in .zip")
            if b.is_dir():
                raise BadArgumentsError(f"--bundle {b} is a directory")
        self.base = load_baseline(self.baseline, tolerance) if self.baseline is not None else None
        self.prev_runs = read_previous(self.previous) if self.previous is not None else None
        if self.prev_runs is None and self.baseline is not None:
            bp = Path(self.baseline)
            bp = bp / "summary.json" if bp.is_dir() else bp
            try:
                data = json.loads(bp.read_text(encoding="utf-8"))
                if isinstance(data, dict) and data.get("schema") == SUMMARY_SCHEMA:
                    self.prev_runs = data.get("runs")
            except (OSError, ValueError):
                pass
        return self


@dataclass
class Finished:
    summary: dict[str, Any]
    exit_code: int
    history_entry: Path | None = None
    bundle: Path | None = None
    trend: dict[str, Any] | None = None


def finalize(
    runs: list[dict[str, Any]],
    meta: dict[str, Any],
    out: Path,
    finish: Finish,
    *,
    tolerance: dict[str, float],
    started: float,
    workers: int,
    extra: dict[str, Any] | None = None,
    wall_offset: float = 0.0,
    say: Log = to_stderr,
) -> Finished:
    """Changes, gate, ``summary.json``, ``index.html``, history entry, bundle, baseline: the end of a run.

    ``meta`` holds the run's identity (name, description, config, notebooks, drafters, git,
    versions); ``extra`` more top-level members (a merge's ``shards``); ``wall_offset`` seconds
    spent before ``started`` elsewhere (a merge: its slowest shard).
    """
    from eagle3_forensics.runs.report import index_html  # heavy: numpy, nbconvert

    hist = read_history(finish.history, name=meta.get("name")) if finish.history is not None else None
    prev_runs = finish.prev_runs
    if prev_runs is None and finish.previous is None and hist is not None and hist.entries:
        prev_runs = hist.entries[-1].runs  # nightly: changes against last night
    changes(runs, prev_runs)
    gate, window_note = _gate(runs, finish, hist, tolerance)
    failed = sum(r["status"] != "ok" for r in runs)
    exit_code = 0 if (failed == 0 and gate.passed) else 1
    wall = round(time.perf_counter() - started + wall_offset, 1)
    gate_dict = gate.to_dict()
    if window_note:
        gate_dict["notes"].append(
            {"drafter": "-", "notebook": None, "kind": "no_history", "message": window_note}
        )
    summary: dict[str, Any] = {
        "schema": SUMMARY_SCHEMA,
        "name": meta.get("name"),
        "description": meta.get("description", ""),
        "config": meta.get("config"),
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "wall_s": wall,
        "workers": workers,
        "notebooks": meta.get("notebooks"),
        "drafters": meta.get("drafters"),
        "git": meta.get("git"),
        "versions": meta.get("versions"),
        "machine": machine(),
        **(extra or {}),
        "ok": sum(r["status"] == "ok" for r in runs),
        "failed": failed,
        "gate": gate_dict,
        "exit_code": exit_code,
        "runs": runs,
    }
    entry_id, trend_data = _history_section(summary, finish, hist)
    write_atomic(out / "summary.json", contract_json(summary))
    write_atomic(out / "index.html", index_html(summary, trend_data, out))
    done = Finished(summary, exit_code, trend=trend_data)
    if finish.history is not None:
        done.history_entry = _append_history(finish.history, summary, entry_id, out)
    if finish.write_baseline is not None:
        _write_baseline(Path(finish.write_baseline), runs, meta, tolerance)
        say(f"baseline written: {finish.write_baseline}")
    if finish.bundle is not None:
        done.bundle = write_bundle(out, finish.bundle, summary)
    _say_done(say, done, gate, hist, window_note, failed, out, wall)
    return done


def _gate(
    runs: list[dict[str, Any]], finish: Finish, hist: History | None, tolerance: dict[str, float]
) -> tuple[Gate, str | None]:
    """The gate against the baseline and the recent runs' median; a note when there is no history yet."""
    references: list[dict[str, Any]] = [finish.base] if finish.base is not None else []
    window_note = None
    if hist is not None and finish.gate_window is not None:
        median = window_baseline(hist, finish.gate_window, tolerance)
        if median is None:
            window_note = "no history yet: the --gate-window gate starts with the next run"
        else:
            references.append(median)
    return evaluate_gates(runs, references), window_note


def _history_section(
    summary: dict[str, Any], finish: Finish, hist: History | None
) -> tuple[str | None, dict[str, Any] | None]:
    """The summary's ``history`` member and the trend (this run its newest point): ``(entry id, trend)``."""
    if hist is None:
        return None, None
    assert finish.history is not None  # hist was read from it
    entry_id = free_entry_id(finish.history, new_entry_id(summary))
    summary["history"] = {
        "directory": str(finish.history),
        "entry": entry_id,
        "entries_before": len(hist.entries),
        "skipped": hist.warnings,
        "gate_window": finish.gate_window,
    }
    this, why = parse_entry(json.dumps(summary, default=str), f"{entry_id}.json")
    if this is not None:
        hist.entries.append(this)
    else:
        hist.warnings.append({"file": f"{entry_id}.json (this run)", "message": f"{why}: not in the trend"})
    trend_data = trend(hist, finish.trend_runs)
    trend_data["current"] = entry_id
    return entry_id, trend_data


def _append_history(history: str | Path, summary: dict[str, Any], entry_id: str | None, out: Path) -> Path:
    """Add the run to the history; when another run took the name meanwhile, the summary follows."""
    try:
        entry = append_entry(history, summary, entry_id)
        if entry_id is not None and entry.stem != entry_id:
            summary["history"]["entry"] = entry.stem
            write_atomic(out / "summary.json", contract_json(summary))
    except OSError as exc:
        raise UnusableInputError(f"cannot add to history {history}: {one_line(exc)[:200]}") from None
    return entry


def _write_baseline(
    path: Path, runs: list[dict[str, Any]], meta: dict[str, Any], tolerance: dict[str, float]
) -> None:
    """``--write-baseline``: this run's measurements as the next runs' regression baseline."""
    new = {
        "schema": BASELINE_SCHEMA,
        "description": (
            f"Regression baseline for run config '{meta.get('name')}', written by `eagle3-forensics run "
            "--write-baseline`. Per drafter: acceptance length and per-position (cumulative) "
            "acceptance with absolute tolerances (a drop beyond them fails the gate), "
            "by_notebook overrides where a notebook measures with other settings, and the "
            "finding codes expected (an error finding not listed fails the gate)."
        ),
        "drafters": baseline_from_runs(runs, tolerance)["drafters"],
    }
    write_atomic(path, contract_json(new))


def _say_done(
    say: Log,
    done: Finished,
    gate: Gate,
    hist: History | None,
    window_note: str | None,
    failed: int,
    out: Path,
    wall: float,
) -> None:
    """The run's last lines: runs ok, the gate's problems, the history, the bundle, where the report is."""
    runs = done.summary["runs"]
    say(
        f"{len(runs) - failed}/{len(runs)} notebook runs ok"
        + (
            ""
            if not gate.baseline
            else f"; gate {'passed' if gate.passed else 'FAILED'} against {gate.baseline}"
        )
    )
    for p in gate.problems:
        say(f"  gate: {p.drafter} · {p.notebook or '-'}: {p.message}")
    if window_note:
        say(f"  gate: {window_note}")
    if done.history_entry is not None and hist is not None:
        skipped = (
            f", {len(hist.warnings)} unusable entr{'y' if len(hist.warnings) == 1 else 'ies'} skipped"
            if hist.warnings
            else ""
        )
        n = len(hist.entries)
        say(f"history: {done.history_entry} ({n} run{'s' if n != 1 else ''}{skipped})")
        for w in hist.warnings:
            say(f"  history: {w['file']}: {w['message']}")
    if done.bundle is not None:
        say(f"bundle: {done.bundle} ({done.bundle.stat().st_size / 1e6:.1f} MB)")
    say(f"report: {out / 'index.html'} · summary: {out / 'summary.json'} · wall time {wall:.1f} s")


__all__ = ["Finish", "Finished", "changes", "contract_json", "finalize", "read_previous", "write_atomic"]
