"""Nightly history: every run's ``summary.json`` kept in one directory, read back as trends.

``run --history DIR`` appends the run's summary as ``DIR/<UTC time>_<git sha>.json``
(:func:`append_entry`: written to a hidden temporary file, then linked to a name that does not
exist yet, so an entry appears whole or not at all and an existing one is never replaced). The
names sort by time. :func:`read_history` reads them back; an entry that is not exactly a run
summary (truncated or invalid JSON, another schema, a run without drafter/notebook/status, a
metric that is not a number, NaN or Infinity anywhere) is skipped as a whole and reported as a
warning, never fatal. From the entries come the acceptance series per drafter × notebook
(:func:`series`), the findings that appeared or went away and the run in which they did
(:func:`finding_changes`), and the median reference of the regression gate's window
(:func:`window_baseline`).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle3_forensics.errors import UnusableInputError, one_line
from eagle3_forensics.runs.config import DEFAULT_TOLERANCE
from eagle3_forensics.runs.gate import BASELINE_SCHEMA, SUMMARY_SCHEMA

DEFAULT_TREND_RUNS = 30
MAX_ENTRY_BYTES = 64 * 1024 * 1024
ENTRY_NAME = re.compile(r"^(\d{8}T\d{6}Z)_([A-Za-z0-9]+)(?:_(\d+))?\.json$")


@dataclass
class HistoryEntry:
    """One run in the history: its file and the parts of its summary the trends use."""

    id: str  # the file name without .json: "20261201T060048Z_73f21d32dd2e"
    file: str
    generated: str | None
    git: str | None
    name: str | None
    runs: list[dict[str, Any]]

    @property
    def time(self) -> str:
        """The UTC time of the entry's name as ``YYYY-MM-DD HH:MM:SS``."""
        m = ENTRY_NAME.match(self.id + ".json")
        if not m:
            return self.id
        t = m.group(1)
        return f"{t[0:4]}-{t[4:6]}-{t[6:8]} {t[9:11]}:{t[11:13]}:{t[13:15]}"

    def label(self) -> str:
        """A short axis label: ``MM-DD HH:MM`` and the first 7 characters of the git SHA."""
        sha = (self.git or "")[:7] or "no git"
        return f"{self.time[5:16]} {sha}"

    def info(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "file": self.file,
            "time": self.time,
            "generated": self.generated,
            "git": self.git,
            "name": self.name,
        }


@dataclass
class History:
    """The valid entries of a history directory, oldest first, and a warning per skipped file."""

    directory: str
    entries: list[HistoryEntry] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)

    def last(self, n: int | None) -> list[HistoryEntry]:
        return self.entries if not n or n <= 0 else self.entries[-n:]


# -- writing -------------------------------------------------------------------------------------


def new_entry_id(summary: dict[str, Any], when: float | None = None) -> str:
    """The entry name of a run (without ``.json``): UTC time, then the first 12 characters of its git SHA."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when))
    sha = re.sub(r"[^A-Za-z0-9]", "", str(summary.get("git") or ""))[:12] or "nogit"
    return f"{stamp}_{sha}"


def free_entry_id(directory: str | Path, base: str) -> str:
    """``base``, or ``base_2``, ``base_3`` … : the first name not yet taken in ``directory``.

    A run names its entry in its own summary before the entry is written, so it must pick the
    name :func:`append_entry` will use (two runs in one second share a time stamp).
    """
    d = Path(directory)
    k = 1
    while True:
        name = base if k == 1 else f"{base}_{k}"
        if not (d / f"{name}.json").exists():
            return name
        k += 1


def append_entry(directory: str | Path, summary: dict[str, Any], entry_id: str | None = None) -> Path:
    """Add ``summary`` to the history in ``directory`` (created if needed) as a new file; returns it.

    Never replaces an entry: a name already taken (two runs in one second) gets ``_2``, ``_3`` …
    """
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise UnusableInputError(f"history {d} is not a directory", path=str(d))
    d.mkdir(parents=True, exist_ok=True)
    base = entry_id or new_entry_id(summary)
    text = json.dumps(summary, indent=2, default=str) + "\n"
    tmp = d / f".{base}.{os.getpid()}.tmp"  # hidden and not *.json: readers never see it
    tmp.write_text(text, encoding="utf-8")
    try:
        k = 1
        while True:
            final = d / (f"{base}.json" if k == 1 else f"{base}_{k}.json")
            try:
                os.link(tmp, final)  # fails if the name exists: no entry is ever overwritten
                return final
            except FileExistsError:
                k += 1
            except OSError:  # a file system without hard links: check, then rename
                if final.exists():
                    k += 1
                    continue
                os.replace(tmp, final)
                return final
    finally:
        tmp.unlink(missing_ok=True)


# -- reading -------------------------------------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def _non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_non_finite(v) for v in value)
    return False


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_run(i: int, r: Any) -> str | None:
    """Why run ``i`` of an entry is unusable, or ``None``."""
    if not isinstance(r, dict):
        return f"run #{i} is not an object"
    for key in ("drafter", "notebook", "status"):
        if not isinstance(r.get(key), str):
            return f"run #{i} has no {key}"
    where = f"run #{i} ({r['drafter']} · {r['notebook']})"
    m = r.get("metrics", {})
    if m is None:
        m = {}
    if not isinstance(m, dict):
        return f"{where}: metrics is not an object"
    al = m.get("acceptance_length")
    if al is not None and not _is_num(al):
        return f"{where}: acceptance_length is not a number"
    pp = m.get("per_position")
    if pp is not None and (not isinstance(pp, list) or not all(_is_num(x) for x in pp)):
        return f"{where}: per_position is not a list of numbers"
    codes = r.get("codes")
    if codes is not None and (not isinstance(codes, list) or not all(isinstance(c, str) for c in codes)):
        return f"{where}: codes is not a list of strings"
    return None


def parse_entry(text: str, name: str) -> tuple[HistoryEntry | None, str | None]:
    """An entry from a file's text, or ``(None, why it is unusable)``."""
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg} at line {exc.lineno}; truncated?)"
    except ValueError as exc:
        return None, f"{exc} (NaN/Infinity are not valid in a summary)"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    if data.get("schema") != SUMMARY_SCHEMA:
        return None, f"schema {data.get('schema')!r}, expected {SUMMARY_SCHEMA!r}"
    if _non_finite(data):
        return None, "a number out of range (Infinity)"
    runs = data.get("runs")
    if not isinstance(runs, list):
        return None, "no list of runs"
    for i, r in enumerate(runs):
        why = _check_run(i, r)
        if why:
            return None, why
    for key in ("generated", "git", "name"):
        if data.get(key) is not None and not isinstance(data[key], str):
            return None, f"{key} is not a string"
    stem = name[:-5] if name.endswith(".json") else name
    return HistoryEntry(stem, name, data.get("generated"), data.get("git"), data.get("name"), runs), None


def read_history(directory: str | Path, name: str | None = None) -> History:
    """The valid entries under ``directory``, oldest first (``name``: only runs of that config).

    A missing directory is an empty history; a path that is not a directory is unusable input.
    Every skipped file is a warning ``{"file", "message"}``.
    """
    d = Path(directory)
    hist = History(str(d))
    if not d.exists():
        return hist
    if not d.is_dir():
        raise UnusableInputError(f"history {d} is not a directory", path=str(d))
    for p in sorted(d.iterdir(), key=lambda x: x.name):
        if p.name.startswith("."):
            continue  # temporary files of a writer, editor droppings
        if not p.name.endswith(".json"):
            continue
        if not ENTRY_NAME.match(p.name):
            hist.warnings.append(
                {"file": p.name, "message": "not named <YYYYMMDDTHHMMSSZ>_<sha>.json: skipped"}
            )
            continue
        try:
            if not p.is_file():
                raise OSError("not a regular file")
            if p.stat().st_size > MAX_ENTRY_BYTES:
                raise OSError(f"larger than {MAX_ENTRY_BYTES // (1024 * 1024)} MiB")
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            hist.warnings.append({"file": p.name, "message": f"unreadable ({one_line(exc)[:200]}): skipped"})
            continue
        entry, why = parse_entry(text, p.name)
        if entry is None:
            hist.warnings.append({"file": p.name, "message": f"{why}: skipped"})
            continue
        if name is not None and entry.name != name:
            hist.warnings.append(
                {"file": p.name, "message": f"a run of config {entry.name!r}, not {name!r}: skipped"}
            )
            continue
        hist.entries.append(entry)
    return hist


# -- what the entries say ------------------------------------------------------------------------


def _num(x: Any) -> float | None:
    return float(x) if _is_num(x) and math.isfinite(float(x)) else None


def series(entries: Sequence[HistoryEntry], drafter: str | None = None) -> list[dict[str, Any]]:
    """Per drafter × notebook (in the order of the newest entry that has them), one point per entry
    in which it ran: ``{entry, status, acceptance_length, per_position, errors, codes}``.
    ``measured`` says whether any point has an acceptance length."""
    order: dict[tuple[str, str], None] = {}
    for e in reversed(entries):
        for r in e.runs:
            if drafter is None or r["drafter"] == drafter:
                order.setdefault((r["drafter"], r["notebook"]), None)
    index = [{(x["drafter"], x["notebook"]): x for x in e.runs} for e in entries]
    out: list[dict[str, Any]] = []
    for d, n in order:
        points = []
        for e, runs in zip(entries, index, strict=True):
            if (d, n) not in runs:
                continue
            r = runs[(d, n)]
            m = r.get("metrics") or {}
            pp = m.get("per_position")
            errors = (r.get("counts") or {}).get("error") if isinstance(r.get("counts"), dict) else None
            points.append(
                {
                    "entry": e.id,
                    "status": r["status"],
                    "acceptance_length": _num(m.get("acceptance_length")),
                    "per_position": [float(x) for x in pp] if isinstance(pp, list) else None,
                    "errors": errors if isinstance(errors, int) else None,
                    "codes": list(r.get("codes") or []),
                }
            )
        out.append(
            {
                "drafter": d,
                "notebook": n,
                "measured": any(p["acceptance_length"] is not None for p in points),
                "points": points,
            }
        )
    return out


def finding_changes(entries: Sequence[HistoryEntry], drafter: str | None = None) -> list[dict[str, Any]]:
    """The finding codes that appeared or went away, and the entry in which they did.

    Per drafter × notebook, an entry's codes are compared with those of the last earlier entry in
    which the same notebook ran ``ok`` (a failed notebook records nothing, so it changes nothing).
    One item per entry × drafter × code × change, with the notebooks that saw it:
    ``{entry, drafter, code, change: "appeared" | "went away", notebooks}``.
    """
    last: dict[tuple[str, str], set[str]] = {}
    events: dict[tuple[str, str, str, str], list[str]] = {}
    for e in entries:
        for r in e.runs:
            if r["status"] != "ok" or (drafter is not None and r["drafter"] != drafter):
                continue
            key = (r["drafter"], r["notebook"])
            codes = set(r.get("codes") or [])
            before = last.get(key)
            last[key] = codes
            if before is None:
                continue
            for code, change in [
                *((c, "appeared") for c in codes - before),
                *((c, "went away") for c in before - codes),
            ]:
                events.setdefault((e.id, r["drafter"], code, change), []).append(r["notebook"])
    position = {e.id: i for i, e in enumerate(entries)}
    return [
        {"entry": eid, "drafter": d, "code": code, "change": change, "notebooks": nbs}
        for (eid, d, code, change), nbs in sorted(
            events.items(), key=lambda kv: (position[kv[0][0]], kv[0][1:])
        )
    ]


def window_baseline(
    history: History, window: int, tolerance: dict[str, float] | None = None
) -> dict[str, Any] | None:
    """The gate reference of ``--gate-window N``: per drafter × notebook the median acceptance
    length and the per-position medians of the last ``window`` entries' ``ok`` runs (per position
    only over runs with as many positions as the newest), with the config's tolerances; every
    finding code seen in the window is expected. ``None`` when the history has no entry yet."""
    win = history.last(window)
    if not win:
        return None
    tol = {**DEFAULT_TOLERANCE, **(tolerance or {})}
    label = f"median of last {len(win)} run{'s' if len(win) != 1 else ''}"
    drafters: dict[str, dict[str, Any]] = {}
    for s in series(win):
        entry = drafters.setdefault(s["drafter"], {"expected_findings": []})
        ok = [p for p in s["points"] if p["status"] == "ok"]
        for p in ok:
            entry["expected_findings"].extend(c for c in p["codes"] if c not in entry["expected_findings"])
        als = [p["acceptance_length"] for p in ok if p["acceptance_length"] is not None]
        if not als:
            continue
        spec: dict[str, Any] = {
            "acceptance_length": {
                "value": round(statistics.median(als), 6),
                "tolerance": tol["acceptance_length"],
            }
        }
        pps = [p["per_position"] for p in ok if p["acceptance_length"] is not None and p["per_position"]]
        if pps:
            k = len(pps[-1])
            same = [pp for pp in pps if len(pp) == k]
            spec["per_position"] = {
                "values": [round(statistics.median(col), 6) for col in zip(*same, strict=True)],
                "tolerance": tol["per_position"],
            }
        entry.setdefault("by_notebook", {})[s["notebook"]] = spec
    for entry in drafters.values():
        entry["expected_findings"] = sorted(entry["expected_findings"])
    return {
        "schema": BASELINE_SCHEMA,
        "source": f"{label} in {history.directory}",
        "label": label,
        "kind": "median",
        "entries": [e.id for e in win],
        "drafters": drafters,
    }


def trend(history: History, last: int = DEFAULT_TREND_RUNS, drafter: str | None = None) -> dict[str, Any]:
    """What the index's trend section and ``eagle3-forensics history`` show: the last ``last``
    entries, their series, the findings changes between them, and the warnings."""
    shown = history.last(last)
    shown_ids = {e.id for e in shown}
    return {
        "directory": history.directory,
        "last": last,
        "total_entries": len(history.entries),
        "entries": [e.info() | {"label": e.label()} for e in shown],
        "series": series(shown, drafter),
        # over every entry, so a change in the oldest shown entry (against an older one) is listed
        "findings_changes": [c for c in finding_changes(history.entries, drafter) if c["entry"] in shown_ids],
        "warnings": list(history.warnings),
    }


__all__ = [
    "DEFAULT_TREND_RUNS",
    "History",
    "HistoryEntry",
    "append_entry",
    "finding_changes",
    "free_entry_id",
    "new_entry_id",
    "parse_entry",
    "read_history",
    "series",
    "trend",
    "window_baseline",
]
