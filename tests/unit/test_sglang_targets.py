"""SGLang target rows that hold only for part of a record's range, as read in each released wheel."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import TARGET_LAYERS, build_drafter, build_target

from eagle3_forensics.checks.diagnose import diagnose
from eagle3_forensics.engines import resolve_release
from eagle3_forensics.engines.target_tables import read_target
from eagle3_forensics.engines.targets import Capture
from eagle3_forensics.findings import Severity


@pytest.mark.parametrize("arch", ["Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM"])
def test_qwen3_5_text_gains_the_capture_in_0_5_22(arch: str, tmp_path: Path) -> None:
    """qwen3_5_text.py registers the class from 0.5.17 as a plain nn.Module; set_eagle3_layers_to_capture
    arrives in 0.5.22, so 0.5.18-0.5.21 refuse it at start-up although the table was read in 0.5.23."""
    for version in ("0.5.18", "0.5.21"):
        row = read_target(resolve_release(f"sglang=={version}"), arch).row
        assert row is not None and row.capture is Capture.NO_INTERFACE, version
    for version in ("0.5.22", "0.5.23"):
        row = read_target(resolve_release(f"sglang=={version}"), arch).row
        assert row is not None and row.capture is Capture.BELOW_N, version
    target = build_target(tmp_path / "t", architectures=[arch])
    d = diagnose(build_drafter(tmp_path / "d"), target=target, engines=["sglang==0.5.19"])
    (f,) = [x for x in d.findings if x.code == "TARGET_NO_EAGLE3_CAPTURE"]
    assert "0.5.22" in f.message and "set_eagle3_layers_to_capture" in f.message


def test_a_class_registered_later_in_the_range_is_unregistered_before() -> None:
    assert read_target(resolve_release("sglang==0.5.19"), "Cosmos3ForConditionalGeneration").row is None
    assert read_target(resolve_release("sglang==0.5.20"), "Cosmos3ForConditionalGeneration").row is not None


@pytest.mark.parametrize("engine", ["sglang==0.5.11", "sglang==0.5.23"])
def test_mindspore_is_unknown_and_says_why(engine: str, tmp_path: Path) -> None:
    """MindSporeForCausalLM hands the ids untouched to the MindSpore model: undecidable from SGLang's code."""
    row = read_target(resolve_release(engine), "MindSporeForCausalLM").row
    assert row is not None and row.capture is Capture.EXTERNAL
    target = build_target(tmp_path / "t", architectures=["MindSporeForCausalLM"])
    d = diagnose(build_drafter(tmp_path / "d"), target=target, engines=[engine])
    (f,) = [x for x in d.findings if x.code == "TARGET_CLASS_UNKNOWN"]
    assert "outside the engine" in f.message and "mindspore.py" in f.message
    assert not [x for x in d.findings if x.code == "TARGET_NO_EAGLE3_CAPTURE"]


@pytest.mark.parametrize("engine", ["sglang==0.5.11", "sglang==0.5.23"])
def test_an_unregistered_class_goes_to_the_transformers_backend_and_is_refused(
    engine: str, tmp_path: Path
) -> None:
    """A class that is no EntryClass is served by SGLang's Transformers backend, which cannot capture."""
    target = build_target(tmp_path / "t", architectures=["NotAnEntryClassForCausalLM"])
    d = diagnose(build_drafter(tmp_path / "d"), target=target, engines=[engine])
    (f,) = [x for x in d.findings if x.code == "TARGET_NO_EAGLE3_CAPTURE"]
    assert f.evidence["failure"] == "startup_refusal" and "Transformers backend" in f.message
    assert not [x for x in d.findings if x.code == "TARGET_CLASS_UNKNOWN"]


def _aux_errors(tmp_path: Path, arch: str, engine: str) -> set[str]:
    """Errors for a drafter whose last id is N-1: SGLang adds 1, so it needs the final layer's output (N)."""
    target = build_target(tmp_path / arch, architectures=[arch])
    drafter = build_drafter(tmp_path / "d", aux_nested=[1, 4, TARGET_LAYERS - 1])
    d = diagnose(drafter, target=target, engines=[engine])
    return {f.code for f in d.findings if f.engine == "sglang" and f.severity is Severity.ERROR}


@pytest.mark.parametrize("engine", ["sglang==0.5.12", "sglang==0.5.17", "sglang==0.5.23"])
@pytest.mark.parametrize("arch", ["Gemma3ForCausalLM", "Gemma4ForConditionalGeneration"])
def test_gemma_captures_the_final_layer(arch: str, engine: str, tmp_path: Path) -> None:
    """gemma3_causal.py / gemma4_causal.py test ``num_layers in self.layers_to_capture`` after the loop
    from 0.5.12 on: id N-1 (+1 = N) is the final layer's output, captured."""
    if engine == "sglang==0.5.23":  # the release whose target table the record holds
        row = read_target(resolve_release(engine), arch).row
        assert row is not None and row.capture is Capture.THROUGH_N
    assert "AUX_LAYER_IDS_INVALID" not in _aux_errors(tmp_path, arch, engine)


@pytest.mark.parametrize("arch", ["MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration"])
def test_minimax_m3_captures_the_final_layer_from_0_5_23(arch: str, tmp_path: Path) -> None:
    """minimax_m3.py gains ``capture=... if self.end_layer in self.layers_to_capture`` at the final norm in
    0.5.23; 0.5.18-0.5.22 never capture id N, although the record's table was read in 0.5.23."""
    for version, capture in (
        ("0.5.18", Capture.BELOW_N),
        ("0.5.22", Capture.BELOW_N),
        ("0.5.23", Capture.THROUGH_N),
    ):
        row = read_target(resolve_release(f"sglang=={version}"), arch).row
        assert row is not None and row.capture is capture, version
    assert "AUX_LAYER_IDS_INVALID" in _aux_errors(tmp_path / "old", arch, "sglang==0.5.22")
    assert "AUX_LAYER_IDS_INVALID" not in _aux_errors(tmp_path / "new", arch, "sglang==0.5.23")


def test_0_5_11_decoders_raise_on_captured_index_0() -> None:
    """0.5.11's llama.py captures ``hidden_states + residual`` before each layer, residual None before
    layer 0: captured index 0 (id -1 after the +1) raises; 0.5.23's decoders capture it."""
    old = read_target(resolve_release("sglang==0.5.11"), "LlamaForCausalLM")
    assert old.row is not None and old.row.first_id == 1 and old.table is not None
    assert "TypeError" in old.table.below_first_text(old.row)
    new = read_target(resolve_release("sglang==0.5.23"), "LlamaForCausalLM").row
    assert new is not None and new.first_id == 0
