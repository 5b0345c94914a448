"""Rendering the ranking of causes (notebook 06): cards and text, escaping, the segment × length explorer."""

from __future__ import annotations

import html

import pytest

pytest.importorskip("pandas")
from builders import TENSOR_PAYLOAD

from eagle3_forensics.checks.causes import EngineGap, rank_causes
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.views.causes import acceptance_explorer, cost_text, ranking_html, ranking_text
from eagle3_forensics.views.widgets import STATIC_NOTE

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
ROWS = [
    {
        "segment": "all",
        "length": 8,
        "acceptance_length": 2.5,
        "per_position": [0.6, 0.5, 0.4],
        "num_drafts": 10,
    },
    {
        "segment": "all",
        "length": 24,
        "acceptance_length": 2.9,
        "per_position": [0.7, 0.6, 0.6],
        "num_drafts": 30,
    },
    {"segment": "reasoning", "length": 24, "acceptance_length": 1.4, "per_position": [0.3], "num_drafts": 12},
]


def test_cards_and_text_rank_and_say_the_cost() -> None:
    gap = EngineGap("vllm", 1.0, 2.912, "live probe")
    r = rank_causes(
        [Finding("D2T_ABSOLUTE", Severity.ERROR, "d2t holds absolute ids", engine="vllm", fix="repair it")],
        engine="vllm",
        engine_gap=gap,
        not_checked=["server settings: none given"],
        acceptance_length=1.0,
    )
    page = ranking_html(r)
    assert "acceptance length 1.000: 1 cause(s); first: D2T_ABSOLUTE" in page
    assert "#1" in page and "−1.912 acceptance length (measured)" in page and "repair it" in page
    assert "server settings: none given" in page and "<script" not in page
    text = ranking_text(r)
    assert text.splitlines()[1].startswith("1. [error] D2T_ABSOLUTE — checkpoint and engine: −1.912")
    assert cost_text(None) == "cost not measured"


def test_no_cause_found_in_green() -> None:
    page = ranking_html(rank_causes([], not_checked=["data"]))
    assert "no cause found" in page and "#2e7d32" in page


def test_evidence_is_escaped() -> None:
    f = Finding(
        "DATA_LOSS_MASK_SUSPICIOUS", Severity.WARNING, TENSOR_PAYLOAD, evidence={"sample": TENSOR_PAYLOAD}
    )
    page = ranking_html(rank_causes(data=[f]))
    assert html.escape(TENSOR_PAYLOAD) in page and TENSOR_PAYLOAD not in page


def test_explorer_picks_segment_and_length() -> None:
    page = acceptance_explorer(ROWS, segment="reasoning", interactive=False).static_html()
    assert "1.4" in page and "2.9" not in page
    page = acceptance_explorer(ROWS, length=8, interactive=False).static_html()
    assert "2.5" in page and "2.9" not in page
    page = acceptance_explorer(
        ROWS, segment="tool_call", interactive=False
    ).static_html()  # not measured: all
    assert "2.5" in page and "1.4" in page
    assert "segments: reasoning;" in page and STATIC_NOTE in page  # "all" is the picker's own, once


def test_costs_in_acceptance_length_and_evidence_folded() -> None:
    share = Finding("DATA_NOT_FROM_TARGET", Severity.WARNING, "m", evidence={"cost": {"share_of_positions": 0.2,
                    "basis": "estimated", "how": "h"}, "detail": list(range(50))})  # fmt: skip
    ranking = rank_causes(data=[share])
    page = ranking_html(ranking, trained=3.0)
    assert "20.0% of positions ≈ −0.400 acceptance length (estimated)" in page  # 0.2 × (3.0 − 1)
    assert "<details>" in page and "evidence (full JSON)" in page and "49" in page
    assert "≈ −" not in ranking_html(ranking)  # no trained view: no conversion
    from eagle3_forensics.probe.why_next import why_next_steps

    steps = why_next_steps(ranking, {"checkpoint": "d", "target": "t", "data": "train"}, 2.5, 3.0)
    assert steps[0].confirm.startswith("eagle3-forensics audit-data train --target t")
    assert "3.000" in steps[0].expect and "20.0%" in steps[0].expect


def test_explorer_is_live_in_jupyterlab() -> None:
    pytest.importorskip("ipywidgets")
    pytest.importorskip("IPython")
    bundle = acceptance_explorer(ROWS, interactive=True)._repr_mimebundle_()
    assert WIDGET_MIME in bundle and "text/html" in bundle
