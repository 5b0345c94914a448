"""vLLM 0.34.0's whole target surface, as read in its wheel: every registered architecture has a verdict.

Each case is a target class read in ``pip download --no-deps vllm==0.34.0`` (registry, the class's MRO,
its decoder's capture code), judged through ``diagnose`` on real drafter and target directories.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import TARGET_LAYERS, build_drafter, build_target

from eagle3_forensics.checks.diagnose import Diagnosis, diagnose
from eagle3_forensics.engines import resolve_release
from eagle3_forensics.engines.target_tables import read_target
from eagle3_forensics.engines.targets import Capture, Failure
from eagle3_forensics.findings import Finding, Severity

N = TARGET_LAYERS
V34 = "vllm==0.34.0"
PLATFORM_WITHOUT_INTERFACE = (
    "InklingForCausalLM",
    "InklingForConditionalGeneration",
    "Dots3NoteForCausalLM",
    "FlintForCausalLM",
    "HYV4ForCausalLM",
    "Qwen4ExpForCausalLM",
    "Step5ForCausalLM",
    "Step5ForConditionalGeneration",
)
TRANSFORMERS_BACKEND = ("OlmoForCausalLM", "Olmo2ForCausalLM", "OlmoeForCausalLM", "StableLmForCausalLM",
                        "SmolLM3ForCausalLM", "Starcoder2ForCausalLM", "PhiForCausalLM", "GPTNeoXForCausalLM",
                        "HunYuanDenseV1ForCausalLM")  # fmt: skip
PLATFORM_CAPTURING = (
    "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "KimiK3ForConditionalGeneration",
    "KimiK31ForConditionalGeneration",
    "KimiLinearForCausalLM",
    "Glm5NextForCausalLM",
    "MiniMaxM3SparseForCausalLM",
    "MistralLarge4ForCausalLM",
    "BeamForCausalLM",
)


def hits(d: Diagnosis, code: str) -> list[Finding]:
    return [f for f in d.findings if f.code == code and f.engine == "vllm"]


def judge(tmp_path: Path, arch: str, ids: list[int]) -> Diagnosis:
    target = build_target(tmp_path / "t", architectures=[arch])
    return diagnose(build_drafter(tmp_path / "d", aux_top=ids), target=target, engines=[V34])


def test_every_registered_architecture_has_a_verdict() -> None:
    table = read_target(resolve_release(V34), "LlamaForCausalLM").table
    assert table is not None
    names = [a for r in table.rows for a in r.architectures]
    assert len(names) == len(set(names)) == 283  # _TEXT_GENERATION + _MULTIMODAL + _TRANSFORMERS_SUPPORTED


def test_mimo_crashes_at_the_first_forward(tmp_path: Path) -> None:
    """MiMoModel overrides forward without capturing: the runner's `isinstance(model_output, tuple)` fails."""
    (f,) = hits(judge(tmp_path, "MiMoForCausalLM", [2, 4, 5]), "TARGET_NO_EAGLE3_CAPTURE")
    assert f.severity is Severity.ERROR and f.evidence["failure"] == Failure.FIRST_FORWARD_CRASH.value
    assert "first forward" in f.message and "acceptance stays near 1.0" not in f.message


def test_kimi_k25_builds_deepseek_v2_whose_first_id_is_1(tmp_path: Path) -> None:
    (f,) = hits(judge(tmp_path, "KimiK25ForConditionalGeneration", [0, 3, N]), "AUX_LAYER_IDS_INVALID")
    assert f.evidence["min_capturable"] == 1 and "residual" in f.message
    assert not hits(
        judge(tmp_path / "ok", "KimiK25ForConditionalGeneration", [1, 3, N]), "AUX_LAYER_IDS_INVALID"
    )


@pytest.mark.parametrize("arch", ["Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration"])
def test_qwen3_5_moe_is_registered_and_captures_through_n(arch: str, tmp_path: Path) -> None:
    d = judge(tmp_path, arch, [0, 3, N])
    assert not [f for f in d.findings if f.code in ("TARGET_CLASS_UNKNOWN", "TARGET_NO_EAGLE3_CAPTURE")]
    assert not hits(d, "AUX_LAYER_IDS_INVALID")


@pytest.mark.parametrize("arch", PLATFORM_WITHOUT_INTERFACE)
def test_platform_classes_without_the_interface_are_refused_at_startup(arch: str, tmp_path: Path) -> None:
    (f,) = hits(judge(tmp_path, arch, [2, 4, 5]), "TARGET_NO_EAGLE3_CAPTURE")
    assert f.severity is Severity.ERROR and "Model does not support EAGLE3 interface" in f.message
    assert f.evidence["failure"] == Failure.STARTUP_REFUSAL.value


@pytest.mark.parametrize("arch", ["Exaone4_5_ForConditionalGeneration", "Qwen4ExpForConditionalGeneration"])
def test_declared_interface_on_a_decoder_without_the_mixin_is_refused_at_startup(
    arch: str, tmp_path: Path
) -> None:
    (f,) = hits(judge(tmp_path, arch, [2, 4, 5]), "TARGET_NO_EAGLE3_CAPTURE")
    assert f.evidence["capture"] == "never" and "must inherit from EagleModelMixin" in f.message
    assert "acceptance stays near 1.0" not in f.message


@pytest.mark.parametrize("arch", TRANSFORMERS_BACKEND)
def test_transformers_backend_captures_ids_1_to_n_and_id_0_raises_a_key_error(
    arch: str, tmp_path: Path
) -> None:
    assert not hits(judge(tmp_path / "ok", arch, [1, 3, N]), "AUX_LAYER_IDS_INVALID")
    d = judge(tmp_path, arch, [0, 3, N])
    (f,) = hits(d, "AUX_LAYER_IDS_INVALID")
    assert f.evidence["min_capturable"] == 1 and "KeyError" in f.message
    assert not [x for x in d.findings if x.code == "TARGET_CLASS_UNKNOWN"]


@pytest.mark.parametrize("arch", PLATFORM_CAPTURING)
def test_platform_classes_with_the_interface_capture_0_to_n(arch: str, tmp_path: Path) -> None:
    d = judge(tmp_path, arch, [0, 3, N])
    assert not hits(d, "AUX_LAYER_IDS_INVALID") and not hits(d, "TARGET_NO_EAGLE3_CAPTURE")
    beyond = hits(judge(tmp_path / "b", arch, [0, 3, N + 1]), "AUX_LAYER_IDS_INVALID")
    assert beyond and beyond[0].evidence["max_capturable"] == N


@pytest.mark.parametrize("arch", ["DeepseekV4ForCausalLM", "DeepseekV41ForCausalLM"])
def test_deepseek_v4_captures_after_each_layer_only(arch: str, tmp_path: Path) -> None:
    """Both capture `idx + 1` after layer idx (V4.1 through capture_previous_aux): id 0 never arrives."""
    assert not hits(judge(tmp_path / "ok", arch, [1, 3, N]), "AUX_LAYER_IDS_INVALID")
    (f,) = hits(judge(tmp_path, arch, [0, 3, N]), "AUX_LAYER_IDS_INVALID")
    assert f.evidence["min_capturable"] == 1 and "shape error" in f.message


def test_an_unregistered_class_is_unknown_and_says_why(tmp_path: Path) -> None:
    d = judge(tmp_path, "NotInAnyRegistryForCausalLM", [2, 4, 5])
    (f,) = [x for x in d.findings if x.code == "TARGET_CLASS_UNKNOWN"]
    assert "Transformers backend" in f.message and "not decidable" in f.message


def test_bypassed_rows_need_the_release_behaviour() -> None:
    table = read_target(resolve_release(V34), "MiMoForCausalLM").table
    assert table is not None and table.bypassed
    row = table.row("MiMoForCausalLM")
    assert (
        row is not None
        and row.capture is Capture.BYPASSED
        and table.failure(row) is Failure.FIRST_FORWARD_CRASH
    )


@pytest.mark.parametrize("engine", ["vllm==0.32.0", "vllm==0.33.0"])
def test_the_same_classes_fail_the_same_way_in_the_older_wheels(engine: str, tmp_path: Path) -> None:
    """mimo.py, kimi_k25.py and exaone4_5.py are the same code in 0.32.0 and 0.33.0."""
    rules = resolve_release(engine)
    mimo = read_target(rules, "MiMoForCausalLM")
    assert mimo.row is not None and mimo.table is not None
    assert mimo.table.failure(mimo.row) is Failure.FIRST_FORWARD_CRASH
    kimi = read_target(rules, "KimiK25ForConditionalGeneration").row
    assert kimi is not None and kimi.first_id == 1
    exaone = read_target(rules, "Exaone4_5_ForConditionalGeneration").row
    assert exaone is not None and exaone.capture is Capture.NEVER
    target = build_target(tmp_path / "t", architectures=["KimiK25ForConditionalGeneration"])
    d = diagnose(build_drafter(tmp_path / "d", aux_top=[0, 3, N]), target=target, engines=[engine])
    assert [f.evidence["min_capturable"] for f in hits(d, "AUX_LAYER_IDS_INVALID")][:1] == [1]
