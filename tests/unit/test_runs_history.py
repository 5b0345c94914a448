"""Run history: append-only entries, tolerant reading, series, finding changes, the median gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eagle3_forensics.cli.run_options import DEFAULT_TREND_RUNS as CLI_DEFAULT
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.runs.gate import SUMMARY_SCHEMA, baseline_from_runs, evaluate_gates
from eagle3_forensics.runs.history import (
    DEFAULT_TREND_RUNS,
    History,
    append_entry,
    finding_changes,
    free_entry_id,
    new_entry_id,
    read_history,
    series,
    trend,
    window_baseline,
)


def _run(
    drafter: str = "d",
    notebook: str = "04",
    al: float | None = 3.0,
    pp: list[float] | None = None,
    codes: tuple[str, ...] = (),
    status: str = "ok",
) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    if al is not None:
        metrics = {"acceptance_length": al, "per_position": pp if pp is not None else [0.9, 0.7, 0.4]}
    return {
        "drafter": drafter,
        "notebook": notebook,
        "status": status,
        "error": None if status == "ok" else "boom",
        "verdict": "healthy",
        "codes": list(codes),
        "findings": [{"code": c, "severity": "error", "engine": None} for c in codes],
        "counts": {"error": len(codes)},
        "metrics": metrics,
    }


def _summary(*runs: dict[str, Any], git: str = "abc123def4567890", name: str = "nightly") -> dict[str, Any]:
    return {
        "schema": SUMMARY_SCHEMA,
        "name": name,
        "generated": "2026-12-01T06:00:00+0000",
        "git": git,
        "runs": list(runs),
    }


def _write(d: Path, stamp: str, summary: dict[str, Any] | str) -> Path:
    p = d / f"{stamp}_abc123def456.json"
    p.write_text(summary if isinstance(summary, str) else json.dumps(summary))
    return p


def test_trend_default_is_the_cli_default() -> None:
    assert CLI_DEFAULT == DEFAULT_TREND_RUNS == 30


def test_entries_are_appended_never_replaced(tmp_path: Path) -> None:
    d = tmp_path / "hist"
    first = _summary(_run(al=3.0))
    entry = new_entry_id(first, when=0)
    assert entry == "19700101T000000Z_abc123def456"
    a = append_entry(d, first, entry)
    b = append_entry(d, _summary(_run(al=2.0)), entry)  # same second, same SHA
    c = append_entry(d, _summary(_run(al=1.0)), entry)
    assert [a.name, b.name, c.name] == [f"{entry}.json", f"{entry}_2.json", f"{entry}_3.json"]
    assert json.loads(a.read_text())["runs"][0]["metrics"]["acceptance_length"] == 3.0
    assert sorted(p.name for p in d.iterdir()) == [a.name, b.name, c.name]  # no temporary file left
    hist = read_history(d)
    assert [e.id for e in hist.entries] == [a.stem, b.stem, c.stem] and not hist.warnings
    # a run names its entry in its summary first: the name it picks is the one append_entry uses
    nxt = free_entry_id(d, entry)
    assert nxt == f"{entry}_4" and append_entry(d, first, nxt).stem == nxt
    assert free_entry_id(tmp_path / "absent", entry) == entry
    assert new_entry_id({"git": None}, when=0).endswith("_nogit")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UnusableInputError, match="not a directory"):
        append_entry(tmp_path / "file", first)


def test_corrupt_and_partial_entries_are_reported_and_skipped(tmp_path: Path) -> None:
    good = json.dumps(_summary(_run(al=2.9)))
    _write(tmp_path, "20261201T000000Z", good)
    _write(tmp_path, "20261202T000000Z", good[: len(good) // 2])  # truncated
    _write(
        tmp_path,
        "20261203T000000Z",
        json.dumps({**_summary(_run()), "schema": "eagle3-forensics/baseline/1"}),
    )
    _write(tmp_path, "20261204T000000Z", json.dumps({"schema": SUMMARY_SCHEMA}))  # no runs
    _write(
        tmp_path, "20261205T000000Z", json.dumps(_summary({"notebook": "04", "status": "ok"}))
    )  # no drafter
    _write(tmp_path, "20261206T000000Z", good.replace("2.9", "NaN"))
    _write(tmp_path, "20261207T000000Z", good.replace("2.9", "1e999"))  # parses as inf
    _write(tmp_path, "20261208T000000Z", good.replace("2.9", '"2.9"'))  # a string, not a number
    _write(tmp_path, "20261209T000000Z", "[1, 2]")
    _write(tmp_path, "20261210T000000Z", good.replace("2.9", "2.5"))
    (tmp_path / "notes.json").write_text(good)  # not an entry name
    (tmp_path / ".20261211T000000Z_abc.json.123.tmp").write_text(good[:10])  # a writer's temporary file
    (tmp_path / "README.txt").write_text("nightly history")
    hist = read_history(tmp_path)
    assert [e.id[:9] for e in hist.entries] == ["20261201T", "20261210T"]
    why = {w["file"][:9]: w["message"] for w in hist.warnings}
    assert set(why) == {f"2026120{i}T" for i in range(2, 10)} | {"notes.jso"}
    assert "not valid JSON" in why["20261202T"] and "truncated" in why["20261202T"]
    assert "schema 'eagle3-forensics/baseline/1'" in why["20261203T"]
    assert "no list of runs" in why["20261204T"]
    assert "no drafter" in why["20261205T"]
    assert "NaN" in why["20261206T"] and "Infinity" in why["20261207T"]
    assert "acceptance_length is not a number" in why["20261208T"]
    assert "not a JSON object" in why["20261209T"]
    assert all(m.endswith("skipped") for m in why.values())
    # the series only holds the usable entries
    (s,) = series(hist.entries)
    assert [p["acceptance_length"] for p in s["points"]] == [2.9, 2.5]


def test_missing_directory_is_empty_and_other_configs_are_skipped(tmp_path: Path) -> None:
    assert read_history(tmp_path / "none").entries == []
    _write(tmp_path, "20261201T000000Z", _summary(_run(), name="nightly"))
    _write(tmp_path, "20261202T000000Z", _summary(_run(), name="weekly"))
    hist = read_history(tmp_path, name="nightly")
    assert len(hist.entries) == 1 and "config 'weekly'" in hist.warnings[0]["message"]
    (tmp_path / "f").write_text("")
    with pytest.raises(UnusableInputError):
        read_history(tmp_path / "f")


def _history(*summaries: dict[str, Any], tmp: Path) -> History:
    tmp.mkdir(parents=True, exist_ok=True)
    for i, s in enumerate(summaries):
        _write(tmp, f"202612{i + 1:02d}T000000Z", s)
    return read_history(tmp)


def test_series_and_finding_changes(tmp_path: Path) -> None:
    hist = _history(
        _summary(_run(al=3.0), _run(notebook="01", al=None, codes=("X",))),
        _summary(
            _run(al=2.0, codes=("D2T_ABSOLUTE",)), _run(notebook="01", al=None, codes=("X", "D2T_ABSOLUTE"))
        ),
        _summary(_run(al=None, status="failed"), _run(notebook="01", al=None, codes=("X", "D2T_ABSOLUTE"))),
        _summary(_run(al=3.0), _run(notebook="01", al=None, codes=("X",)), _run(drafter="new")),
        tmp=tmp_path,
    )
    ids = [e.id for e in hist.entries]
    ss = {(s["drafter"], s["notebook"]): s for s in series(hist.entries)}
    assert [p["acceptance_length"] for p in ss[("d", "04")]["points"]] == [3.0, 2.0, None, 3.0]
    assert ss[("d", "04")]["measured"] and not ss[("d", "01")]["measured"]
    assert len(ss[("new", "04")]["points"]) == 1
    assert next(iter(ss)) == ("d", "04")  # order of the newest entry
    changes = finding_changes(hist.entries)
    # a failed notebook records nothing, so it is not "went away"; one event per drafter × code
    assert [(c["entry"], c["drafter"], c["code"], c["change"], c["notebooks"]) for c in changes] == [
        (ids[1], "d", "D2T_ABSOLUTE", "appeared", ["04", "01"]),
        (ids[3], "d", "D2T_ABSOLUTE", "went away", ["04", "01"]),
    ]
    assert series(hist.entries, drafter="new")[0]["drafter"] == "new"
    assert finding_changes(hist.entries, drafter="new") == []
    # the trend of the last two runs still lists the change in its oldest entry
    t = trend(hist, last=1)
    assert [e["id"] for e in t["entries"]] == [ids[3]] and len(t["findings_changes"]) == 1
    assert t["total_entries"] == 4


def test_window_baseline_is_the_median_of_the_last_runs(tmp_path: Path) -> None:
    hist = _history(
        _summary(_run(al=1.0, pp=[0.1, 0.1, 0.1])),  # outside a window of 3
        _summary(_run(al=3.0, pp=[0.9, 0.7, 0.5], codes=("A",))),
        _summary(_run(al=2.0, pp=[0.8, 0.6])),  # K changed: its per-position values are left out
        _summary(_run(al=2.8, pp=[0.7, 0.5, 0.3]), _run(notebook="00", al=None, status="failed")),
        tmp=tmp_path,
    )
    assert window_baseline(History(str(tmp_path)), 3) is None
    base = window_baseline(hist, 3, {"acceptance_length": 0.2, "per_position": 0.05})
    assert base is not None and base["label"] == "median of last 3 runs" and len(base["entries"]) == 3
    spec = base["drafters"]["d"]["by_notebook"]["04"]
    assert spec["acceptance_length"] == {"value": 2.8, "tolerance": 0.2}
    assert spec["per_position"]["values"] == [0.8, 0.6, 0.4] and spec["per_position"]["tolerance"] == 0.05
    assert base["drafters"]["d"]["expected_findings"] == ["A"]
    assert "00" not in base["drafters"]["d"]["by_notebook"]


def test_gate_against_a_baseline_and_the_window_median(tmp_path: Path) -> None:
    fixed = baseline_from_runs([_run(al=2.0, pp=[0.5, 0.4, 0.3])])
    hist = _history(*(_summary(_run(al=3.0)) for _ in range(3)), tmp=tmp_path)
    median = window_baseline(hist, 5)
    assert median is not None
    # better than the fixed baseline but a drop from the recent runs: the window catches it
    now = [_run(al=2.5, pp=[0.9, 0.7, 0.4])]
    g = evaluate_gates(now, [fixed, median])
    assert not g.passed and [p.kind for p in g.problems] == ["acceptance_length"]
    assert "< median of last 3 runs 3.000" in g.problems[0].message
    assert now[0]["gate"]["status"] == "fail"
    assert (
        now[0]["gate"]["acceptance_length_baseline"] == 2.0
        and now[0]["gate"]["acceptance_length_median"] == 3.0
    )
    assert g.baseline is not None and " + median of last 3 runs" in g.baseline
    # a slow drift the median follows, below the fixed baseline: the baseline catches it
    drifted = window_baseline(
        _history(*(_summary(_run(al=1.5)) for _ in range(3)), tmp=tmp_path / "drift"), 5
    )
    assert drifted is not None
    g = evaluate_gates([_run(al=1.5, pp=[0.9, 0.7, 0.4])], [fixed, drifted])
    assert [p.message.split(" <")[1].split()[0] for p in g.problems] == ["baseline"]
    # both pass; a failed notebook is one problem, not one per reference
    assert evaluate_gates([_run(al=3.0)], [fixed, median]).passed
    g = evaluate_gates([_run(status="failed")], [fixed, median])
    assert [p.kind for p in g.problems] == ["notebook_failed"]
    # a new error finding the window never saw fails it
    g = evaluate_gates([_run(al=3.0, codes=("D2T_ABSOLUTE",))], [median])
    assert [p.kind for p in g.problems] == ["new_error_finding"]
