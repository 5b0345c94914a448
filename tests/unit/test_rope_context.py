"""ROPE_MISMATCH and CONTEXT_TOO_SHORT follow what each release runs (checks/rope.py).

A RoPE that differs from the target's is info (every engine builds the draft's rotary from the draft's
config); a warning only where a release runs another RoPE than the config records. CONTEXT_TOO_SHORT
says what the release does with a short draft limit: vLLM 0.32 raises it for every draft, 0.33+ only
for cache-only RoPE types and otherwise lowers the server's max_model_len.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import MAX_POS, build_drafter, build_target, speculators_spec

from eagle3_forensics.checks.diagnose import diagnose
from eagle3_forensics.findings import Finding, Severity

LONG = 4 * MAX_POS
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": MAX_POS}
LONGROPE = {
    "rope_type": "longrope",
    "short_factor": [1.0] * 4,
    "long_factor": [2.0] * 4,
    "original_max_position_embeddings": MAX_POS // 2,
}
DYNAMIC = {"rope_type": "dynamic", "factor": 2.0}
RELEASES = ["vllm==0.10.2", "vllm==0.32.0", "vllm==0.33.0", "vllm==0.34.0", "sglang", "eagle", "tensorrt_llm"]


def _found(d: Any, code: str) -> list[Finding]:
    return [f for f in d.findings if f.code == code]


def _target(tmp: Path, max_pos: int = MAX_POS, scaling: dict[str, Any] | None = None) -> Path:
    target = build_target(tmp, max_pos=max_pos)
    if scaling is not None:
        cfg = json.loads((target / "config.json").read_text())
        cfg["rope_scaling"] = scaling
        (target / "config.json").write_text(json.dumps(cfg))
    return target


@pytest.mark.parametrize("release", RELEASES)
def test_a_healthy_drafter_is_silent(tmp_path: Path, release: str) -> None:
    """Same RoPE as the target, the same limit, or RoPE only in rope_parameters at the default theta."""
    target = _target(tmp_path / "t")
    cases: tuple[tuple[str, dict[str, Any]], ...] = (
        ("legacy", {}),
        ("params", {"rope": "parameters"}),
        ("both", {"rope": "both"}),
    )
    for name, extra in cases:
        d = diagnose(build_drafter(tmp_path / name, **extra), target=target, engines=[release])
        assert not _found(d, "ROPE_MISMATCH") and not _found(d, "CONTEXT_TOO_SHORT"), (release, name)


def test_rope_parameters_only_warns_where_the_release_reads_only_rope_theta(tmp_path: Path) -> None:
    drafter = build_drafter(tmp_path / "d", rope="parameters", rope_theta=500000.0)
    d = diagnose(drafter, engines=["vllm==0.10.2", "sglang", "eagle"])
    warned = {f.engine for f in _found(d, "ROPE_MISMATCH") if f.severity is Severity.WARNING}
    assert warned == {"vllm", "eagle"}
    f = next(f for f in _found(d, "ROPE_MISMATCH") if f.engine == "vllm")
    assert "0.10.2" in f.message and f.evidence["engine_runs"]["rope_theta"] == 10000.0
    assert not _found(diagnose(drafter, engines=["vllm==0.34.0"]), "ROPE_MISMATCH")


def test_a_difference_from_the_target_is_info_only(tmp_path: Path) -> None:
    target = _target(tmp_path / "t", scaling=YARN)
    d = diagnose(build_drafter(tmp_path / "d", rope_theta=500000.0), target=target, engines="all")
    found = _found(d, "ROPE_MISMATCH")
    assert found and {f.severity for f in found} == {Severity.INFO}
    assert all(f.evidence["engines_run"] == "drafter's" for f in found)


def _context(d: Any) -> dict[str | None, Finding]:
    return {f.engine: f for f in _found(d, "CONTEXT_TOO_SHORT")}


def test_context_wording_follows_the_release_for_a_cache_only_rope(tmp_path: Path) -> None:
    target = _target(tmp_path / "t", max_pos=LONG)
    for release in ("vllm==0.32.0", "vllm==0.33.0", "vllm==0.34.0"):
        f = _context(diagnose(build_drafter(tmp_path / release), target=target, engines=[release]))["vllm"]
        assert f.severity is Severity.INFO and f.evidence["outcome"] == "raised", release
        assert "raises the draft's max_position_embeddings" in f.message and "stops" not in f.message
    assert (
        "every EAGLE draft"
        in _context(diagnose(build_drafter(tmp_path / "a"), target=target, engines=["vllm==0.32.0"]))[
            "vllm"
        ].message
    )


def test_context_a_non_cache_only_rope_limits_the_server_on_033_and_later(tmp_path: Path) -> None:
    target = _target(tmp_path / "t", max_pos=LONG)
    drafter = build_drafter(tmp_path / "d", config_extra={"rope_scaling": YARN})
    raised = _context(diagnose(drafter, target=target, engines=["vllm==0.32.0"]))["vllm"]
    assert raised.severity is Severity.INFO and raised.evidence["outcome"] == "raised"
    v2 = _context(diagnose(drafter, target=target, engines=["vllm==0.33.0"]))["vllm"]
    every = _context(diagnose(drafter, target=target, engines=["vllm==0.34.0"]))["vllm"]
    for f in (v2, every):
        assert f.severity is Severity.WARNING and f.evidence["outcome"] == "server_limited"
        assert "lowers the whole server's max_model_len" in f.message
    assert "V2 runner" in v2.message and "every runner" in every.message


def test_context_without_a_recorded_rule_is_one_checkpoint_level_warning(tmp_path: Path) -> None:
    target = _target(tmp_path / "t", max_pos=LONG)
    found = _context(
        diagnose(build_drafter(tmp_path / "d"), target=target, engines=["eagle", "vllm==0.34.0"])
    )
    assert set(found) == {None, "vllm"} and found[None].severity is Severity.WARNING
    assert "not recorded" in found[None].message and found["vllm"].severity is Severity.INFO


def test_context_a_dynamic_draft_whose_derived_limit_covers_the_target(tmp_path: Path) -> None:
    """factor 4 x 2048 covers 8192: SGLang starts (its derived limit is scaled); vLLM 0.34 neither raises
    max_position_embeddings nor lowers the server, so positions past 2048 leave the rotary cache."""
    target = _target(tmp_path / "t", max_pos=LONG)
    drafter = build_drafter(
        tmp_path / "d", config_extra={"rope_scaling": {"rope_type": "dynamic", "factor": 4.0}}
    )
    assert not _context(diagnose(drafter, target=target, engines=["sglang"]))
    f = _context(diagnose(drafter, target=target, engines=["vllm==0.34.0"]))["vllm"]
    assert f.severity is Severity.WARNING and f.evidence["outcome"] == "not_raised"


@pytest.mark.parametrize("release", ["sglang==0.5.11", "sglang==0.5.16", "sglang"])
def test_context_sglang_refuses_to_start_unless_its_env_var_is_set(tmp_path: Path, release: str) -> None:
    target = _target(tmp_path / "t", max_pos=LONG)
    llama3 = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": MAX_POS}
    variants: tuple[tuple[str, dict[str, Any]], ...] = (
        ("plain", {}),
        ("llama3", {"config_extra": {"rope_scaling": llama3}}),
    )
    for name, extra in variants:
        f = _context(diagnose(build_drafter(tmp_path / name, **extra), target=target, engines=[release]))[
            "sglang"
        ]
        assert f.severity is Severity.WARNING and f.evidence["outcome"] == "refused_unless_env", name
        assert f.proof == "read"  # read in the wheel, not run
        assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in f.message and "refuses to start" in f.message


@pytest.mark.parametrize(("scaling", "warned"), [(LONGROPE, True), ({**LONGROPE, "long_mscale": 1.0}, False)])
def test_sglang_raising_the_limit_changes_longrope(
    tmp_path: Path, scaling: dict[str, Any], warned: bool
) -> None:
    target = _target(tmp_path / "t", max_pos=LONG)
    d = diagnose(
        build_drafter(tmp_path / "d", config_extra={"rope_scaling": scaling}),
        target=target,
        engines=["sglang"],
    )
    hit = [f for f in _found(d, "ROPE_MISMATCH") if f.severity is Severity.WARNING]
    assert [f.engine for f in hit] == (["sglang"] if warned else [])
    if warned:
        assert "starts only with SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in hit[0].message


@pytest.mark.parametrize(
    ("scaling", "warned"),
    [
        (LONGROPE, True),  # the long mscale derives from max_position_embeddings
        ({**LONGROPE, "long_mscale": 1.0}, False),
        ({**DYNAMIC, "max_trained_positions": MAX_POS}, True),  # base scaled by max_pos / trained
        (DYNAMIC, False),  # max_trained_positions follows max_position: unchanged
        (YARN, False),  # frequencies from original_max_position_embeddings
    ],
)
def test_vllm_032_raising_the_limit_changes_some_ropes(
    tmp_path: Path, scaling: dict[str, Any], warned: bool
) -> None:
    target = _target(tmp_path / "t", max_pos=LONG)
    drafter = build_drafter(tmp_path / "d", config_extra={"rope_scaling": scaling})
    d = diagnose(drafter, target=target, engines=["vllm==0.32.0"])
    hit = [f for f in _found(d, "ROPE_MISMATCH") if f.severity is Severity.WARNING]
    assert [f.engine for f in hit] == (["vllm"] if warned else [])
    if warned:
        assert "0.32.0" in hit[0].message and hit[0].evidence["raised_to"] == LONG
    kept = diagnose(drafter, target=target, engines=["vllm==0.34.0"])  # not raised: the server shrinks
    assert not [f for f in _found(kept, "ROPE_MISMATCH") if f.severity is Severity.WARNING]
    same = diagnose(drafter, target=_target(tmp_path / "short"), engines=["vllm==0.32.0"])
    assert not [f for f in _found(same, "ROPE_MISMATCH") if f.severity is Severity.WARNING]


def test_context_reads_a_speculators_config_where_it_keeps_the_limit(tmp_path: Path) -> None:
    """max_position_embeddings lives in transformer_layer_config (vLLM's shim reads it there); engines
    that cannot read the config at all get CONFIG_UNREADABLE_BY_ENGINE only, and no shared warning."""
    target = _target(tmp_path / "t", max_pos=LONG)
    drafter = build_drafter(tmp_path / "d", speculators_spec())
    found = _context(diagnose(drafter, target=target, engines=["sglang", "vllm==0.34.0", "eagle"]))
    assert set(found) == {"vllm"} and found["vllm"].severity is Severity.INFO
