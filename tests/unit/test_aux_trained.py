"""The layers a drafter was trained on, as a fact (issue 30): not recorded, presumed from the trainer,
measured on the target; and a repair that never lowers acceptance.

Config-only cases use tiny targets of several classes (Llama, Qwen2, Qwen3, DeepSeek-V3); the measured
cases run the real demo target (an 8-layer transformers Llama) with the demo ``healthy`` drafter, which
was trained on HF [2, 4, 5], and a copy whose config says [2, 4, 7].
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import build_drafter, build_target
from paths import DEMO, demo_drafter_copy

from eagle3_forensics.checks.aux_measured import AuxCandidate, MeasuredAux, beats
from eagle3_forensics.checks.diagnose import diagnose
from eagle3_forensics.checks.trainers import TRAINERS, recognise_trainer
from eagle3_forensics.cli.main import main
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.config import DrafterConfig
from eagle3_forensics.probe.aux_trained import measure_trained_aux
from eagle3_forensics.probe.confirm import confirm_repair
from eagle3_forensics.repair.execute import repair

TARGET = DEMO / "target"
PROMPTS = DEMO / "prompts.jsonl"
MODELOPT_EAGLE = {
    "use_aux_hidden_state": True,
    "use_input_layernorm_in_first_layer": True,
    "use_last_layernorm": False,
    "use_mtp_layernorm": False,
    "next_layer_regular": True,
    "parallel_draft_step": 1,
}


def _not_recorded(findings: list[Finding]) -> dict[str, Finding]:
    return {str(f.engine): f for f in findings if f.code == "AUX_LAYER_IDS_NOT_RECORDED"}


# -- the trainer from the config's shape ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "trainer"),
    [
        ({"architectures": ["LlamaForCausalLMEagle3"], "eagle_config": MODELOPT_EAGLE}, "modelopt"),
        ({"architectures": ["LlamaForCausalLMEagle3"]}, "specforge"),
        ({"architectures": ["Eagle3DeepseekV2ForCausalLM"]}, "specforge"),
        ({"architectures": ["Eagle3LlamaForCausalLM"], "draft_vocab_size": 32000}, "angelslim"),
        ({"architectures": ["LlamaForCausalLM"], "draft_vocab_size": 32000}, "eagle"),
        ({"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3"}, "speculators"),
        ({"architectures": ["LlamaForCausalLM"]}, None),
        ({}, None),
    ],
)
def test_trainer_recognised_from_the_config_shape(config: dict[str, Any], trainer: str | None) -> None:
    got = recognise_trainer(DrafterConfig(config))
    assert (got.name if got else None) == trainer


def test_trainer_defaults_follow_their_code() -> None:
    """HF index: output-of-layer {1, N//2-1, N-4} is [2, N//2, N-3]; AngelSlim counts the embedding."""
    for name in ("speculators", "modelopt", "eagle"):
        default = TRAINERS[name].default
        assert default is not None and default(80) == [2, 40, 77] and default(36) == [2, 18, 33]
    angelslim = TRAINERS["angelslim"].default
    assert angelslim is not None and angelslim(80) == [2, 40, 78] and angelslim(61) == [2, 31, 59]
    assert TRAINERS["specforge"].follows_sglang_class and TRAINERS["specforge"].default is None
    assert all("@" in t.source or " 0." in t.source for t in TRAINERS.values())  # a version is cited


# -- missing ids against several target classes (config only) ------------------------------------------


@pytest.mark.parametrize("recorded", ["absent", "empty"])
def test_modelopt_70b_shape_without_ids_warns_naming_the_fallback(recorded: str, tmp_path: Path) -> None:
    """vllm#50170's shape: ModelOpt's default equals vLLM's fallback (2, 40, 77), yet proves nothing.
    ModelOpt's default config holds ``eagle_aux_hidden_state_layer_ids: []``, which engines skip too."""
    target = build_target(tmp_path / "llama80", layers=80)
    eagle = dict(MODELOPT_EAGLE, **({"eagle_aux_hidden_state_layer_ids": []} if recorded == "empty" else {}))
    path = build_drafter(tmp_path / "d", config_extra={"eagle_config": eagle})
    d = diagnose(path, target=target, engines=["vllm", "sglang"])
    assert {f.code for f in d.findings if f.code.startswith("AUX_")} == {"AUX_LAYER_IDS_NOT_RECORDED"}
    found = _not_recorded(d.findings)
    assert set(found) == {"vllm", "sglang"}
    for f in found.values():
        assert f.severity is Severity.WARNING
        assert f.evidence["engine_hf_ids"] == [2, 40, 77] and f.evidence["trainer"] == "modelopt"
        assert "[2, 40, 77]" in f.message and "not recorded" in f.message
        assert "pin_hf_ids" not in f.evidence  # nothing to pin without a measurement


@pytest.mark.parametrize(
    ("architecture", "layers"),
    [
        ("LlamaForCausalLM", 32),
        ("Qwen2ForCausalLM", 28),
        ("Qwen3ForCausalLM", 36),
        ("Qwen3MoeForCausalLM", 48),
        ("DeepseekV3ForCausalLM", 61),
        ("GptOssForCausalLM", 24),
    ],
)
@pytest.mark.parametrize(
    "shape",
    [
        {"config_extra": {"eagle_config": MODELOPT_EAGLE}},
        {},  # SpecForge: the SGLang class default
        {"architectures": ["Eagle3LlamaForCausalLM"]},  # AngelSlim
        {"architectures": ["LlamaForCausalLM"]},  # EAGLE reference (draft_vocab_size is written)
    ],
    ids=["modelopt", "specforge", "angelslim", "eagle"],
)
def test_missing_ids_error_exactly_where_trainer_and_engine_differ(
    architecture: str, layers: int, shape: dict[str, Any], tmp_path: Path
) -> None:
    target = build_target(tmp_path / "t", layers=layers, architectures=[architecture])
    path = build_drafter(tmp_path / "d", **shape)
    d = diagnose(path, target=target, engines=["vllm", "sglang", "eagle"])
    found = _not_recorded(d.findings)
    assert found, [(f.code, f.engine) for f in d.findings]
    for engine, f in found.items():
        fallback, presumed = f.evidence["engine_hf_ids"], f.evidence["trainer_default_hf"]
        assert f.evidence["target_architecture"] == architecture
        assert presumed is not None and len(presumed) == 3
        if presumed != fallback:
            assert f.severity is Severity.ERROR and f.evidence["pin_hf_ids"] == presumed, (engine, f.message)
            assert str(presumed) in (f.fix or "")
        else:
            assert f.severity is Severity.WARNING, (engine, f.message)


def test_angelslim_on_qwen3_is_an_error_on_vllm(tmp_path: Path) -> None:
    target = build_target(tmp_path / "q3", layers=36, architectures=["Qwen3ForCausalLM"])
    path = build_drafter(tmp_path / "d", architectures=["Eagle3LlamaForCausalLM"])
    f = _not_recorded(diagnose(path, target=target, engines=["vllm"]).findings)["vllm"]
    assert f.severity is Severity.ERROR
    assert f.evidence["engine_hf_ids"] == [2, 18, 33] and f.evidence["trainer_default_hf"] == [2, 18, 34]
    assert "eagle_aux_hidden_state_layer_ids = [2, 18, 34]" in (f.fix or "")


def test_unknown_trainer_warns(tmp_path: Path) -> None:
    """A plain LlamaForCausalLM config without draft_vocab_size is no trainer's own shape."""
    target = build_target(tmp_path / "t")
    path = build_drafter(tmp_path / "d", architectures=["LlamaForCausalLM"], draft_vocab_size_in_config=False)
    f = _not_recorded(diagnose(path, target=target, engines=["vllm"]).findings)["vllm"]
    assert f.severity is Severity.WARNING and f.evidence["trainer"] is None
    assert "not recognisable" in f.message and f.evidence["engine_hf_ids"] == [2, 4, 5]


def test_recorded_ids_are_not_flagged_as_missing(tmp_path: Path) -> None:
    target = build_target(tmp_path / "t", layers=80)
    path = build_drafter(
        tmp_path / "d",
        aux_top=[2, 40, 77],
        aux_nested=[1, 39, 76],
        config_extra={"eagle_config": MODELOPT_EAGLE},
    )
    d = diagnose(path, target=target, engines=["vllm", "sglang"])
    assert not _not_recorded(d.findings)


# -- the measurement ------------------------------------------------------------------------------------


def _cand(ids: tuple[int, ...], per: list[float], *sources: str) -> AuxCandidate:
    return AuxCandidate(ids, sources or ("neighbour",), sum(per) / len(per), tuple(per))


def test_materiality_comes_from_the_per_prompt_spread() -> None:
    right = _cand((2, 4, 5), [3.5, 3.4, 3.6, 3.5], "vllm captures")
    steady = _cand((2, 4, 7), [3.2, 3.1, 3.3, 3.2], "config")  # 0.3 lower on every prompt
    erratic = _cand((2, 4, 6), [3.9, 2.9, 3.9, 3.1])  # 0.05 lower on average, spread 0.5
    assert beats(right, steady) and not beats(right, erratic)
    m = MeasuredAux((right, steady, erratic), 4, 100, 3, 0.0, "test")
    assert m.best.ids == (2, 4, 5) and m.material((2, 4, 7)) and not m.material((2, 4, 6))
    one = MeasuredAux((_cand((2, 4, 5), [3.5], "x"), _cand((2, 4, 7), [2.0], "config")), 1, 10, 3, 0.0, "t")
    assert not one.material((2, 4, 7))  # one prompt has no spread: nothing is material
    # a higher-scoring neighbour inside the noise does not displace the set engines and trainers use
    tie = MeasuredAux((erratic, right), 4, 100, 3, 0.0, "t")
    assert tie.best.ids == (2, 4, 5)


@pytest.fixture(scope="module")
def wrong_ids(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo healthy drafter (trained on HF [2, 4, 5]) with eagle_aux_hidden_state_layer_ids [2, 4, 7]."""
    return demo_drafter_copy(
        tmp_path_factory.mktemp("aux") / "wrong", eagle_aux_hidden_state_layer_ids=[2, 4, 7]
    )


@pytest.fixture(scope="module")
def measured(wrong_ids: Path) -> MeasuredAux:
    return measure_trained_aux(wrong_ids, TARGET, PROMPTS)


def test_wrong_ids_are_measured(measured: MeasuredAux) -> None:
    assert measured.best.ids == (2, 4, 5)
    assert measured.material([2, 4, 7]) and not measured.material([2, 4, 5])
    gap, noise = measured.gap([2, 4, 7]), measured.noise([2, 4, 7])
    assert gap is not None and noise is not None and gap > noise > 0
    sources = {s for c in measured.candidates for s in c.sources}
    assert {"config", "vllm captures", "sglang captures", "NVIDIA ModelOpt default", "neighbour"} <= sources
    assert measured.prompts == 16 and len(measured.candidates) <= 16


def test_measured_ids_decide_the_findings(wrong_ids: Path, measured: MeasuredAux) -> None:
    static = diagnose(wrong_ids, target=TARGET, engines=["vllm", "sglang"])
    assert {f.code for f in static.findings if f.engine == "sglang"} == {"AUX_LAYER_IDS_IGNORED_BY_ENGINE"}
    assert not static.errors or all(f.engine == "sglang" for f in static.errors)  # vLLM: "healthy"
    d = diagnose(wrong_ids, target=TARGET, engines=["vllm", "sglang"], measured_aux=measured)
    nt = {f.engine: f for f in d.findings if f.code == "AUX_LAYER_IDS_NOT_TRAINED"}
    assert set(nt) == {"vllm", "sglang"}
    for f in nt.values():
        assert f.severity is Severity.ERROR and f.evidence["pin_hf_ids"] == [2, 4, 5]
        assert f.evidence["cost"]["basis"] == "measured" and f.evidence["cost"]["acceptance_length_drop"] > 0
    assert "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4]" in (nt["sglang"].fix or "")
    codes = {(f.code, f.engine) for f in d.findings}
    assert ("AUX_LAYER_IDS_IGNORED_BY_ENGINE", "sglang") not in codes  # SGLang's default is the trained set
    shift = next(f for f in d.findings if f.code == "AUX_LAYER_IDS_CONVENTION_SHIFT")
    assert shift.engine == "vllm" and shift.evidence["trained_field"] == "measured"


def test_repair_pins_the_measured_ids(wrong_ids: Path, measured: MeasuredAux, tmp_path: Path) -> None:
    for engine, field, value in (("vllm", None, [2, 4, 5]), ("sglang", "eagle_config", [1, 3, 4])):
        r = repair(wrong_ids, engine, tmp_path / engine, target=TARGET, measured_aux=measured)
        assert r.status == "repaired", r.message
        cfg = json.loads((tmp_path / engine / "config.json").read_text())
        holder = cfg if field is None else cfg[field]
        assert holder["eagle_aux_hidden_state_layer_ids"] == value
    # without the measurement SGLang's copy trusts the config's ids and captures [2, 4, 7]: lower
    blind = repair(wrong_ids, "sglang", tmp_path / "blind", target=TARGET)
    assert json.loads((tmp_path / "blind" / "config.json").read_text())["eagle_config"][
        "eagle_aux_hidden_state_layer_ids"
    ] == [1, 3, 6]
    c = confirm_repair(wrong_ids, tmp_path / "blind", "sglang", TARGET, PROMPTS)
    assert blind.status == "repaired" and c.lowered and c.before is not None and c.after < c.before
    ok = confirm_repair(wrong_ids, tmp_path / "vllm", "vllm", TARGET, PROMPTS)
    assert not ok.lowered and ok.before is not None and ok.after > ok.before


def test_repair_cli_refuses_a_copy_that_accepts_less(
    wrong_ids: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One prompt: the measurement has no spread, so the config's ids stand and SGLang's copy would
    capture [2, 4, 7]; the confirm step measures the drop, removes the copy and exits 1."""
    one = tmp_path / "one.jsonl"
    one.write_text(PROMPTS.read_text().splitlines()[0] + "\n")
    out = tmp_path / "copy"
    argv = ["repair", str(wrong_ids), "--engine", "sglang", "--out", str(out)]
    rc = main([*argv, "--target", str(TARGET), "--prompts", str(one), "--json"])
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert rc == 1 and payload["status"] == "refused" and payload["confirm"]["lowered"] is True
    assert payload["confirm"]["acceptance_length_after"] < payload["confirm"]["acceptance_length_before"]
    assert not out.exists() and "accepts less" in captured.err
    assert json.loads((wrong_ids / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] == [
        2,
        4,
        7,
    ]
