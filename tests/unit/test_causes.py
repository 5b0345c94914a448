"""The ranking of causes (notebook 06) over real Finding objects: grouping, cost order, never crying wolf.

The issue-22 codes (DATA_NOT_FROM_TARGET, ...) are owned by other branches; until they are merged the
fixture adds any that the catalogue lacks, so the findings built here are the real type with the real
validation. The end-to-end ranking over the real diagnose and probe is tests/integration/test_why.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from eagle3_forensics import findings as catalogue
from eagle3_forensics.checks.causes import (
    CATEGORIES,
    MIN_DROP,
    AuxGain,
    Cost,
    EngineGap,
    category,
    rank_causes,
)
from eagle3_forensics.findings import Finding, Severity

NEW_CODES = {
    "DATA_NOT_FROM_TARGET": "The responses the drafter was trained on were not written by the target.",
    "DATA_TEMPLATE_MISMATCH": "The training data was rendered with another chat template or mode.",
    "DATA_TRAINED_LENGTH": "The lengths the drafter was trained on.",
    "CONTEXT_BEYOND_TRAINING": "Requests run longer than the drafter's training sequences.",
    "VOCAB_SPECIAL_TOKENS_MISSING": "The draft vocabulary lacks structural tokens the target emits.",
    "VERIFY_MODE_LOSSY": "The server verifies drafts in a lossy mode.",
}


@pytest.fixture(autouse=True)
def issue22_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    for code, line in NEW_CODES.items():
        if code not in catalogue.CATALOGUE:  # merged branches bring their own entry; keep it
            monkeypatch.setitem(catalogue.CATALOGUE, code, line)


def cost(drop: float | None, basis: str = "measured", share: float | None = None) -> dict[str, Any]:
    return {
        "cost": {"acceptance_length_drop": drop, "share_of_positions": share, "basis": basis, "how": "test"}
    }


def f(code: str, severity: str = "warning", engine: str | None = None, **evidence: Any) -> Finding:
    return Finding(code, Severity(severity), f"{code} here", engine=engine, evidence=evidence)


def test_info_findings_and_no_findings_are_no_cause() -> None:
    r = rank_causes(
        data=[f("DATA_TRAINED_LENGTH", "info", **cost(1.0)), f("CONFIG_UNREADABLE_BY_ENGINE", "info")]
    )
    assert not r.found and r.causes == [] and r.codes == []
    assert rank_causes([], not_checked=["data: none given"]).not_checked == ["data: none given"]


def test_healthy_gap_is_no_cause() -> None:
    gap = EngineGap("vllm", 2.91, 2.93, "probe")
    assert not rank_causes([], engine="vllm", engine_gap=gap).found


def test_unexplained_engine_gap_is_a_cause() -> None:
    gap = EngineGap("vllm", 1.5, 2.9, "probe")
    r = rank_causes([], engine="vllm", engine_gap=gap)
    assert r.codes == ["ENGINE_GAP"]
    assert r.causes[0].cost is not None and r.causes[0].cost.acceptance_length_drop == pytest.approx(1.4)


def test_checkpoint_findings_form_one_cause_with_the_engine_gap_as_cost() -> None:
    gap = EngineGap("sglang", 1.0, 2.91, "engine view vs trained view")
    r = rank_causes(
        [f("PARAMS_UNFILLED", "error", "sglang"), f("KEYS_DROPPED_BY_ENGINE", "error", "sglang")],
        engine="sglang==0.5.11",
        engine_gap=gap,
    )
    assert len(r.causes) == 1
    c = r.causes[0]
    assert c.codes == ["KEYS_DROPPED_BY_ENGINE", "PARAMS_UNFILLED"]  # catalogue order
    assert c.category == "checkpoint and engine"
    assert c.cost == Cost(1.91, None, "measured", "engine view vs trained view: 1.000 vs. 2.910")


def test_findings_of_other_engines_are_set_aside() -> None:
    r = rank_causes([f("D2T_ABSOLUTE", "error", "sglang")], engine="vllm")
    assert not r.found
    assert [x.code for x, _ in r.set_aside] == ["D2T_ABSOLUTE"]


def test_measured_before_estimated_then_larger_drop() -> None:
    r = rank_causes(
        data=[
            f("DATA_NOT_FROM_TARGET", **cost(0.9, "estimated")),
            f("DATA_TEMPLATE_MISMATCH", **cost(None, "estimated", share=0.4)),
        ],
        probe=[
            f("VOCAB_SPECIAL_TOKENS_MISSING", **cost(0.3, "measured")),
            f("CONTEXT_BEYOND_TRAINING", **cost(0.6, "measured")),
        ],
    )
    assert r.codes == [
        "CONTEXT_BEYOND_TRAINING",
        "VOCAB_SPECIAL_TOKENS_MISSING",
        "DATA_NOT_FROM_TARGET",
        "DATA_TEMPLATE_MISMATCH",
    ]
    assert [c.category for c in r.causes] == ["length", "vocabulary", "data provenance", "template and mode"]


def test_cost_before_severity_and_severity_breaks_ties() -> None:
    r = rank_causes(
        data=[f("DATA_LOSS_MASK_SUSPICIOUS", "error"), f("DATA_NOT_FROM_TARGET", "warning", **cost(0.5))]
    )
    assert r.codes == ["DATA_NOT_FROM_TARGET", "DATA_LOSS_MASK_SUSPICIOUS"]
    r = rank_causes(data=[f("DATA_LOSS_MASK_SUSPICIOUS", "warning"), f("DATA_LOSS_MASK_EMPTY", "error")])
    assert r.codes == ["DATA_LOSS_MASK_EMPTY", "DATA_LOSS_MASK_SUSPICIOUS"]


def test_a_warning_that_costs_nothing_is_not_a_cause_but_an_error_is() -> None:
    small = MIN_DROP / 2
    r = rank_causes(data=[f("CONTEXT_BEYOND_TRAINING", "warning", **cost(small))])
    assert not r.found and "below" in r.set_aside[0][1]
    r = rank_causes(
        data=[f("DATA_NOT_FROM_TARGET", **cost(0.2))],
        probe=[f("VOCAB_SPECIAL_TOKENS_MISSING", "error", **cost(small))],
    )
    assert r.codes == [
        "DATA_NOT_FROM_TARGET",
        "VOCAB_SPECIAL_TOKENS_MISSING",
    ]  # kept, but after the costly one


def test_aux_codes_take_the_sweep_gain_when_the_gap_is_nil() -> None:
    shift = f("AUX_LAYER_IDS_CONVENTION_SHIFT", "warning", "vllm")
    gap = EngineGap("vllm", 3.03, 3.03, "probe")
    r = rank_causes([shift], engine="vllm", engine_gap=gap, aux_gain=AuxGain(1, 0.09, "sweep"))
    assert r.codes == ["AUX_LAYER_IDS_CONVENTION_SHIFT"]
    assert r.causes[0].cost == Cost(0.09, None, "estimated", "sweep")
    # the sweep says the ids as read are best: the warning costs nothing measurable
    assert not rank_causes([shift], engine="vllm", engine_gap=gap, aux_gain=AuxGain(0, 0.0, "sweep")).found


def test_a_static_code_from_the_data_audit_is_a_data_cause() -> None:
    r = rank_causes(data=[f("D2T_T2D_MISMATCH", "error")])
    assert r.codes == ["D2T_T2D_MISMATCH"] and r.causes[0].category == "data provenance"


def test_codes_that_do_not_lower_acceptance_are_set_aside() -> None:
    r = rank_causes(data=[f("DATA_DUPLICATE_SAMPLES")], server=[f("SERVER_TIMEOUT", "error")])
    assert not r.found and len(r.set_aside) == 2


def test_malformed_cost_blocks_are_ignored() -> None:
    assert Cost.from_evidence({"cost": {"basis": "guessed", "acceptance_length_drop": 1.0}}) is None
    assert Cost.from_evidence({"cost": {"basis": "measured", "acceptance_length_drop": float("nan")}}) is None
    assert Cost.from_evidence({"cost": "1.0"}) is None
    c = Cost.from_evidence(cost(0.4, "estimated", 0.1))
    assert c == Cost(0.4, 0.1, "estimated", "test")


def test_every_category_is_reachable_and_ordered() -> None:
    seen = {category(code) for code in [*catalogue.CATALOGUE, *NEW_CODES]}
    assert set(CATEGORIES) <= seen
    assert category("DATA_DUPLICATE_SAMPLES") is None and category("D2T_ABSOLUTE") == "checkpoint and engine"


def test_to_dict_is_json_shaped() -> None:
    import json

    r = rank_causes(
        data=[f("DATA_NOT_FROM_TARGET", **cost(0.5))], not_checked=["server"], acceptance_length=2.0
    )
    d = json.loads(json.dumps(r.to_dict()))
    assert d["causes"][0]["codes"] == ["DATA_NOT_FROM_TARGET"]
    assert d["causes"][0]["cost"]["basis"] == "measured"
    assert "cost" not in d["causes"][0]["evidence"][0].get("evidence", {})  # shown once, as the cause's cost
    assert d["not_checked"] == ["server"] and d["acceptance_length"] == 2.0


def test_engine_aux_finding_contradicted_by_the_gap_is_set_aside() -> None:
    """SGLang ignores a wrong top-level [2, 4, 7] and captures the trained [2, 4, 5]: its view accepts
    more (3.310) than the checkpoint as written (3.065). "Ignored by the engine" is then no cause at
    −0.000; the measured AUX_LAYER_IDS_NOT_TRAINED is, first, with its measured cost."""
    gap = EngineGap("sglang", 3.310, 3.065, "live probe")
    ignored = f("AUX_LAYER_IDS_IGNORED_BY_ENGINE", "error", "sglang")
    r = rank_causes([ignored], engine="sglang", engine_gap=gap)
    assert r.codes == [] and any("contradicted by the measurement" in why for _, why in r.set_aside)
    measured = f("AUX_LAYER_IDS_NOT_TRAINED", "error", "sglang", **cost(0.231))
    r = rank_causes([ignored, measured], engine="sglang", engine_gap=gap)
    assert r.codes == ["AUX_LAYER_IDS_NOT_TRAINED"] and r.causes[0].codes == ["AUX_LAYER_IDS_NOT_TRAINED"]
    assert r.causes[0].cost is not None and r.causes[0].cost.acceptance_length_drop == pytest.approx(0.231)
    assert "not the layers the drafter was trained on" in r.causes[0].explanation
    # not contradicted (the engine's view accepts less): the engine-side finding stays a cause
    r = rank_causes([ignored], engine="sglang", engine_gap=EngineGap("sglang", 3.065, 3.310, "live probe"))
    assert r.codes == ["AUX_LAYER_IDS_IGNORED_BY_ENGINE"]
