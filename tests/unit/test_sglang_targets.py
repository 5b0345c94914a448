"""SGLang target rows that hold only for part of a record's range, as read in each released wheel."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import build_drafter, build_target

from eagle3_forensics.checks.diagnose import diagnose
from eagle3_forensics.engines import resolve_release
from eagle3_forensics.engines.target_tables import read_target
from eagle3_forensics.engines.targets import Capture


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
