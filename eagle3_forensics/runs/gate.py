"""The regression gate: a run's results against a fixed baseline and/or the median of recent runs.

Failures: a notebook that failed; acceptance length or a per-position acceptance below
reference − tolerance; an error finding whose code the reference does not expect. Notes (not
failures): values above reference + tolerance, expected findings no longer seen, drafters
without a reference entry.

A reference is a baseline dict (:func:`load_baseline`: a baseline file or a previous run's
``summary.json``) or the median of the last N runs of a history directory
(:func:`eagle3_forensics.runs.history.window_baseline`). With both, :func:`evaluate_gates` checks
the run against each and it must pass both: the fixed baseline catches a slow drift that a
rolling median follows, the median catches a drop from a level better than the fixed baseline.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eagle3_forensics.errors import UnusableInputError, one_line
from eagle3_forensics.runs.config import DEFAULT_TOLERANCE

SUMMARY_SCHEMA = "eagle3-forensics/run-summary/1"
BASELINE_SCHEMA = "eagle3-forensics/baseline/1"


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


def finite_number(x: Any) -> float | None:
    """``x`` as a float when it is a finite number (not a bool), else None: metrics may be missing or NaN."""
    if (
        isinstance(x, bool)
        or not isinstance(x, (int, float))
        or (isinstance(x, float) and not math.isfinite(x))
    ):
        return None
    return float(x)


def check_run_records(runs: Any, where: str) -> list[dict[str, Any]]:
    """``runs`` of a summary.json or part.json read back from disk, checked field by field before
    anything computes with them (a damaged file is unusable input, naming the run and the field)."""
    if not isinstance(runs, list):
        raise UnusableInputError(f"{where}: runs is not a list")
    for i, r in enumerate(runs):
        problem = _run_record_problem(r)
        if problem:
            raise UnusableInputError(f"{where}: runs[{i}]: {problem}")
    return runs


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _run_record_problem(r: Any) -> str | None:
    if not isinstance(r, dict):
        return "not an object"
    for key in ("drafter", "notebook", "status"):
        if not isinstance(r.get(key), str):
            return f"{key} is not a string"
    if not _number(r.get("duration_s", 0.0)):
        return "duration_s is not a number"
    for key in ("verdict", "error", "html", "executed_notebook", "record"):
        if not isinstance(r.get(key), (str, type(None))):
            return f"{key} is not a string"
    for key in ("error_detail", "change", "gate"):
        if not isinstance(r.get(key), (dict, type(None))):
            return f"{key} is not an object"
    if not isinstance(r.get("attempts", 0), int):
        return "attempts is not an integer"
    for key, kind in (("codes", list), ("metrics", dict), ("counts", dict), ("parameters", dict)):
        if r.get(key) is not None and not isinstance(r[key], kind):
            return f"{key} is not a {kind.__name__}"
    if not all(isinstance(c, str) for c in r.get("codes") or []):
        return "codes are not strings"
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (r.get("counts") or {}).values()):
        return "counts are not integers"
    findings = r.get("findings")
    if findings is not None and not (
        isinstance(findings, list)
        and all(isinstance(f, dict) and isinstance(f.get("code"), str) for f in findings)
    ):
        return "findings are not objects with a code"
    return None


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
        raise UnusableInputError(f"unreadable baseline {p}: {one_line(exc)[:200]}") from None
    if isinstance(data, dict) and data.get("schema") == SUMMARY_SCHEMA:
        return baseline_from_runs(check_run_records(data.get("runs") or [], str(p)), tolerance, source=str(p))
    if not isinstance(data, dict) or not isinstance(data.get("drafters"), dict):
        raise UnusableInputError(f"{p} is neither a baseline (with 'drafters') nor a run summary.json")
    for name, entry in data["drafters"].items():
        _check_baseline_entry(entry, f"{p}: drafters.{name}")
    data.setdefault("source", str(p))
    return data


def _check_baseline_entry(entry: Any, where: str) -> None:
    """Fail at load, naming the field, on a baseline the gate could not read after the notebooks ran."""

    def number(x: Any, what: str, optional: bool = False) -> None:
        if (x is None and optional) or (isinstance(x, (int, float)) and not isinstance(x, bool)):
            return
        raise UnusableInputError(f"{where}.{what} must be a number, got {x!r}")

    def spec(d: Any, what: str) -> None:
        if not isinstance(d, dict):
            raise UnusableInputError(f"{what} must be an object, got {d!r}")
        al = d.get("acceptance_length")
        if al is not None:
            if not isinstance(al, dict):
                raise UnusableInputError(f"{what}.acceptance_length must be an object, got {al!r}")
            number(al.get("value"), "acceptance_length.value", optional=True)
            number(al.get("tolerance", 0), "acceptance_length.tolerance")
        pp = d.get("per_position")
        if pp is not None:
            if not isinstance(pp, dict) or not isinstance(pp.get("values", []), list):
                raise UnusableInputError(f"{what}.per_position must be an object with a list of values")
            for i, x in enumerate(pp.get("values") or []):
                number(x, f"per_position.values[{i}]")
            tols = pp.get("tolerance", 0)
            for i, x in enumerate(tols if isinstance(tols, list) else [tols]):
                number(x, f"per_position.tolerance[{i}]")

    spec(entry, where)
    found = entry.get("expected_findings")
    if found is not None and (not isinstance(found, list) or not all(isinstance(c, str) for c in found)):
        raise UnusableInputError(f"{where}.expected_findings must be a list of finding codes, got {found!r}")
    by_nb = entry.get("by_notebook")
    if by_nb is not None:
        if not isinstance(by_nb, dict):
            raise UnusableInputError(f"{where}.by_notebook must be an object, got {by_nb!r}")
        for nb, d in by_nb.items():
            spec(d, f"{where}.by_notebook.{nb}")


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
        al = finite_number(m.get("acceptance_length"))
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
    # "baseline" for a fixed baseline; the window gate says "median of last N runs"
    label = "baseline" if baseline is None else str(baseline.get("label") or "baseline")
    ref_kind = "baseline" if baseline is None else str(baseline.get("kind") or "baseline")
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
            note("no_baseline", f"no {label} entry for this drafter")
            continue
        _gate_findings(r, entry, fail, note)
        _gate_metrics(r, entry, label, ref_kind, fail, note)
    _missing_drafters(gate, entries, runs, label)
    gate.passed = not gate.problems
    return gate


_Say = Callable[[str, str], None]  # (kind, message): a failure or a note of one run


def _gate_findings(r: dict[str, Any], entry: dict[str, Any], fail: _Say, note: _Say) -> None:
    """An error finding the baseline does not expect fails; an expected one no longer seen is a note."""
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


def _gate_metrics(
    r: dict[str, Any], entry: dict[str, Any], label: str, ref_kind: str, fail: _Say, note: _Say
) -> None:
    """Acceptance length and per-position acceptance against the reference and its tolerances."""
    m = r.get("metrics") or {}
    if finite_number(m.get("acceptance_length")) is None:
        return
    spec = (entry.get("by_notebook") or {}).get(r["notebook"]) or entry
    al_spec = spec.get("acceptance_length")
    if isinstance(al_spec, dict) and finite_number(al_spec.get("value")) is not None:
        base, tol = (
            float(al_spec["value"]),
            float(al_spec.get("tolerance", DEFAULT_TOLERANCE["acceptance_length"])),
        )
        al = float(m["acceptance_length"])
        r["gate"][f"acceptance_length_{ref_kind}"] = base
        if al < base - tol:
            fail("acceptance_length", f"acceptance length {al:.3f} < {label} {base:.3f} − {tol:g}")
        elif al > base + tol:
            note(
                "acceptance_length",
                f"acceptance length {al:.3f} > {label} {base:.3f} + {tol:g}"
                + (" (better: update the baseline)" if ref_kind == "baseline" else " (better)"),
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
                f"per-position acceptance has {len(got)} positions, {label} {len(base_pp)} (K changed?)",
            )
            return
        for i, (g, b, t) in enumerate(zip(got, base_pp, tol_list, strict=False)):
            if g < b - t:
                fail("per_position", f"acceptance at draft position {i} {g:.3f} < {label} {b:.3f} − {t:g}")


def _missing_drafters(
    gate: Gate, entries: dict[str, Any], runs: Sequence[dict[str, Any]], label: str
) -> None:
    """Notes for drafters the reference has but this run did not measure."""
    for name, entry in entries.items():
        mine = [r for r in runs if r["drafter"] == name]
        _findings_gone(gate, name, entry, mine, label)
        if not mine:
            gate.notes.append(GateProblem(name, None, "missing", f"in the {label} but not in this run"))
        elif entry.get("acceptance_length") and not any(
            finite_number((r.get("metrics") or {}).get("acceptance_length")) is not None for r in mine
        ):
            gate.notes.append(
                GateProblem(name, None, "missing", f"{label} has acceptance metrics; no run measured them")
            )


def _findings_gone(
    gate: Gate, drafter: str, entry: dict[str, Any], mine: Sequence[dict[str, Any]], label: str
) -> None:
    """One note per drafter when an expected finding is reported by none of its notebooks.

    Why per drafter: ``expected_findings`` is the union over the drafter's notebooks, and each
    notebook reports only its own part (06 the data findings, 01 none of them), so judged per
    notebook every run would note the others' codes as gone. Only when every run of the drafter
    went through, or a failed notebook would read as a finding that went away."""
    if not mine or any(r.get("status") != "ok" for r in mine):
        return
    seen = {str(c) for r in mine for c in r.get("codes") or []}
    gone = sorted(set(entry.get("expected_findings") or []) - seen)
    if gone:
        gate.notes.append(
            GateProblem(
                drafter,
                None,
                "finding_gone",
                f"expected in the {label}, reported by none of its notebooks: {', '.join(gone)}",
            )
        )


def _dedupe(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for x in items:
        if x not in out:
            out.append(x)
    return out


def evaluate_gates(runs: Sequence[dict[str, Any]], references: Sequence[dict[str, Any]]) -> Gate:
    """The gate against every reference (a fixed baseline, the median of recent runs): a run must
    pass each. With one reference or none this is :func:`evaluate_gate`."""
    if len(references) <= 1:
        return evaluate_gate(runs, references[0] if references else None)
    gates: list[Gate] = []
    per_run: list[list[dict[str, Any]]] = [[] for _ in runs]
    for ref in references:
        copies = [dict(r) for r in runs]
        gates.append(evaluate_gate(copies, ref))
        for i, c in enumerate(copies):
            per_run[i].append(c["gate"])
    for r, parts in zip(runs, per_run, strict=True):
        statuses = [p["status"] for p in parts]
        merged: dict[str, Any] = {
            "status": "fail" if "fail" in statuses else "pass" if "pass" in statuses else statuses[0],
            "problems": _dedupe([m for p in parts for m in p["problems"]]),
            "notes": _dedupe([m for p in parts for m in p["notes"]]),
        }
        for p in parts:
            merged.update({k: v for k, v in p.items() if k not in merged})
        r["gate"] = merged
    gate = Gate(" + ".join(str(g.baseline) for g in gates))
    gate.problems = _dedupe([p for g in gates for p in g.problems])
    gate.notes = _dedupe([n for g in gates for n in g.notes])
    gate.passed = not gate.problems
    return gate


__all__ = [
    "BASELINE_SCHEMA",
    "SUMMARY_SCHEMA",
    "Gate",
    "GateProblem",
    "baseline_from_runs",
    "check_run_records",
    "evaluate_gate",
    "evaluate_gates",
    "load_baseline",
]
