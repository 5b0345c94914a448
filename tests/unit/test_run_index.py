"""The run index's drafter rows (runs.overview) and their HTML (views.run_index, runs.report.index_html)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from eagle3_forensics.runs.overview import (
    LOW_ACCEPTANCE_LENGTH,
    drafter_rows,
    shown_verdict,
    view_of,
)
from eagle3_forensics.runs.report import index_html
from eagle3_forensics.views.html import VERDICT_COLOURS


def _run(drafter: str, notebook: str, tmp: Path, *, al: float | None = None, engine: str = "vllm",
         verdict: str | None = None, records: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    rec = f"runs/{drafter}__{notebook}.record.json"
    (tmp / "runs").mkdir(exist_ok=True)
    (tmp / rec).write_text(json.dumps(records or {}), encoding="utf-8")
    metrics = (
        {}
        if al is None
        else {"acceptance_length": al, "engine": engine, "prompts": 4, "max_new_tokens": 24, "k": 3}
    )
    return {
        "drafter": drafter, "notebook": notebook, "status": "ok", "verdict": verdict, "codes": [],
        "counts": {}, "metrics": metrics, "parameters": {"prompts": "p.jsonl", "max_new_tokens": 24},
        "gate": {"status": "pass", "problems": [], "notes": []}, "html": f"{drafter}__{notebook}.html",
        "record": rec, "duration_s": 1.0,
    }  # fmt: skip


CAUSE = {
    "category": "checkpoint and engine",
    "explanation": "The engine does not run the drafter as it was trained.",
    "codes": ["D2T_ABSOLUTE"],
    "severity": "error",
    "cost": {"acceptance_length_drop": 2.3, "basis": "measured"},
    "fix": "repair",
}


def _summary(tmp: Path) -> dict[str, Any]:
    runs = [
        _run("healthy", "00_triage", tmp, al=3.31, engine="reference", verdict="healthy",
             records={"verdicts": {"sglang": "healthy", "vllm": "healthy"}}),
        _run("healthy", "06_why_low_acceptance", tmp, al=3.31, records={"causes": {"causes": []}}),
        _run("broken", "00_triage", tmp, al=3.31, engine="reference", verdict="broken",
             records={"verdicts": {"sglang": "healthy", "vllm": "broken"}}),
        _run("broken", "06_why_low_acceptance", tmp, al=1.01, records={"causes": {"causes": [CAUSE]}}),
        _run("quiet", "00_triage", tmp, al=1.49, engine="reference", verdict="healthy",
             records={"verdicts": {"vllm": "healthy"}}),
        _run("quiet", "05_offline_probe", tmp, al=1.003, verdict="healthy"),
    ]  # fmt: skip
    return {
        "name": "t",
        "drafters": ["healthy", "broken", "quiet"],
        "notebooks": [],
        "runs": runs,
        "gate": {},
    }


def test_views_and_verdicts_beside_low_acceptance() -> None:
    assert view_of({"notebook": "05_offline_probe"}) == "offline (training dumps)"
    assert view_of({"notebook": "00_triage", "metrics": {"engine": "reference"}}) == "trained view"
    assert (
        view_of({"notebook": "06_x", "metrics": {"engine": "sglang==0.5.11"}})
        == "engine view (sglang==0.5.11)"
    )
    assert shown_verdict("healthy", LOW_ACCEPTANCE_LENGTH - 0.01) != "healthy"
    assert shown_verdict("healthy", LOW_ACCEPTANCE_LENGTH) == "healthy"
    assert shown_verdict("broken", 1.0) == "broken" and shown_verdict("healthy", None) == "healthy"


def test_one_row_per_drafter_with_its_first_cause_and_reference(tmp_path: Path) -> None:
    rows = {r.drafter: r for r in drafter_rows(_summary(tmp_path), tmp_path)}
    assert list(rows) == ["healthy", "broken", "quiet"]
    assert rows["healthy"].cause is None and rows["healthy"].cause_note == "no cause found"
    b = rows["broken"]
    assert (
        b.cause is not None
        and b.cause.codes == ("D2T_ABSOLUTE",)
        and "2.300 acceptance length" in b.cause.cost
    )
    assert (
        b.acceptance is not None and b.acceptance.value == 1.01 and b.acceptance.view == "engine view (vllm)"
    )
    assert b.reference is not None and b.reference.value == 3.31 and b.reference_comparable
    assert b.verdicts == {"sglang": "loads fine, accepts little", "vllm": "broken"}  # 1.01 < 1.5: no healthy
    quiet = rows["quiet"].acceptance
    assert rows["quiet"].cause_note == "06 not run" and quiet is not None and quiet.view == "trained view"


def test_the_index_shows_no_green_verdict_beside_a_low_acceptance(tmp_path: Path) -> None:
    page = index_html(_summary(tmp_path), None, tmp_path)
    green = VERDICT_COLOURS["healthy"]
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", page, flags=re.S):
        figures = [float(x) for x in re.findall(r"<b>(\d\.\d{3})</b>", row)]
        if any(f < LOW_ACCEPTANCE_LENGTH for f in figures):
            assert green not in row, row
    assert page.count("D2T_ABSOLUTE") >= 1 and "The engine does not run the drafter" in page
    assert "offline (training dumps)" in page and "trained view" in page


def test_a_data_cause_shows_its_share_with_the_acceptance_length_estimate(tmp_path: Path) -> None:
    """As 06's cards do: a share of positions, and beside it share × (trained view − 1) when 06
    recorded the trained view's acceptance length; without it, the share alone."""
    data_cause = {**CAUSE, "codes": ["DATA_TEMPLATE_MISMATCH"], "category": "template and mode",
                  "cost": {"share_of_positions": 0.5, "basis": "estimated"}}  # fmt: skip
    summary = _summary(tmp_path)
    summary["runs"][3] = _run("broken", "06_why_low_acceptance", tmp_path, al=1.49,
                              records={"causes": {"causes": [data_cause]}, "trained_acceptance_length": 3.3})  # fmt: skip
    cost = {r.drafter: r for r in drafter_rows(summary, tmp_path)}["broken"].cause
    assert cost is not None and cost.cost == "50.0 % of positions ≈ −1.150 acceptance length (estimated)"
    summary["runs"][3] = _run("broken", "06_why_low_acceptance", tmp_path, al=1.49,
                              records={"causes": {"causes": [data_cause]}})  # fmt: skip
    cost = {r.drafter: r for r in drafter_rows(summary, tmp_path)}["broken"].cause
    assert cost is not None and cost.cost == "50.0 % of positions (estimated)"
