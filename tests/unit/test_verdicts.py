"""Verdicts per engine (issue 25): the verdict line, JSON and HTML say where a drafter is healthy,
broken or needs a conversion, and a drafter no asked engine can serve never reads plain healthy."""

from __future__ import annotations

from dataclasses import replace

import pytest
from paths import ROOT

from eagle3_forensics.checks.diagnose import diagnose
from eagle3_forensics.views.html import load_table, verdict_html
from eagle3_forensics.views.text import render_diagnosis

DRAFTERS = ROOT / "data" / "demo" / "drafters"


def test_speculators_layout_on_every_engine_is_not_plain_healthy() -> None:
    d = diagnose(DRAFTERS / "speculators_layout")
    assert d.verdict() == "healthy"  # JSON's overall keeps its meaning: no error anywhere
    ev = d.engine_verdicts()
    assert set(ev["healthy"]) == {"vllm", "speculators"}
    assert set(ev["conversion_needed"]) == {"sglang", "eagle", "tensorrt_llm"}
    assert ev["broken"] == [] and ev["servable"] is True
    assert ev["why"]["sglang"] == ["CONFIG_UNREADABLE_BY_ENGINE"] and ev["why"]["vllm"] == []
    line = d.headline()
    assert line != "HEALTHY" and "CONVERSION NEEDED for sglang, eagle, tensorrt_llm" in line
    assert ev["summary"] == line
    text = render_diagnosis(d)
    assert f"verdict:    {line}\n" in text
    page = verdict_html(d)
    assert (
        "CONVERSION NEEDED for sglang, eagle, tensorrt_llm" in page and "HEALTHY on vllm, speculators" in page
    )
    assert 'background:#2e7d32;color:#fff;font-weight:600;font-size:1.25em">CONVERSION' not in page
    js = d.to_dict()
    assert js["engine_verdicts"] == ev
    assert js["codes"] == [
        {
            "code": "CONFIG_UNREADABLE_BY_ENGINE",
            "severity": "info",
            "count": 3,
            "engines": ["eagle", "sglang", "tensorrt_llm"],
        }
    ]


def test_sglang_alone_is_broken_and_says_why() -> None:
    d = diagnose(DRAFTERS / "speculators_layout", engines=["sglang"])
    assert d.headline() == "BROKEN"
    assert d.why("sglang") == ["CONFIG_UNREADABLE_BY_ENGINE"]
    assert "verdict broken (CONFIG_UNREADABLE_BY_ENGINE)" in render_diagnosis(d)


def test_no_engine_able_to_read_it_never_reads_healthy() -> None:
    """Every asked engine 'not applicable' (none reads the config): overall not applicable, not green."""
    full = diagnose(DRAFTERS / "speculators_layout")
    gone = {"vllm", "speculators"}
    d = replace(
        full,
        engines=[e for e in full.engines if e not in gone],
        loads={e: r for e, r in full.loads.items() if e not in gone},
        findings=[f for f in full.findings if f.engine not in gone],
    )
    assert d.verdict() == "not applicable"
    assert d.exit_code == 0  # no error finding: the exit code keeps its contract
    assert d.headline() == "CONVERSION NEEDED for sglang, eagle, tensorrt_llm"
    assert d.engine_verdicts()["servable"] is False
    assert "#2e7d32" not in verdict_html(d).split("per engine")[0]  # no green in the verdict line


@pytest.mark.parametrize("variant", ["d2t_absolute", "layers_flat"])
def test_load_rows_say_which_code_makes_an_engine_broken(variant: str) -> None:
    pytest.importorskip("pandas")  # the notebooks extra; absent in the core-only tier (tests/packaging)
    d = diagnose(DRAFTERS / variant)
    rows = load_table(d).set_index("engine")["verdict"]
    for engine in d.engines:
        if d.verdict(engine) == "broken":
            assert rows[engine].startswith("broken (") and all(c in rows[engine] for c in d.why(engine))
            assert d.why(engine)


def test_counts_are_per_code_with_the_engines() -> None:
    d = diagnose(DRAFTERS / "d2t_absolute")
    codes = {c["code"]: c for c in d.code_counts()}
    assert codes["D2T_ABSOLUTE"]["engines"] == ["eagle", "sglang", "tensorrt_llm", "vllm"]
    assert codes["D2T_ABSOLUTE"]["count"] == 4 and codes["D2T_ABSOLUTE"]["severity"] == "error"
    assert "findings:   error D2T_ABSOLUTE [eagle, sglang, tensorrt_llm, vllm]" in render_diagnosis(d)
