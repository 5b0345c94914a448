"""``diagnose --launch``: reading serving commands per release, and the LAUNCH_* findings.

Every command here is written as a user would type it; the drafters are the bundled demo drafters
(or copies of them). Each code has a positive and a negative case; a consistent command gives no
finding at all.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
from builders import H, build_drafter
from paths import DEMO, ROOT

from eagle3_forensics.checks.diagnose import Diagnosis, diagnose
from eagle3_forensics.cli.main import main
from eagle3_forensics.engines import resolve_release
from eagle3_forensics.engines.launch import LAUNCH_RELEASES, launch_rules_for, read_launch
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.launch import split_command

# the launch tables of the releases these tests name (read from the release records)
SGLANG_0_5_11, SGLANG_0_5_12, SGLANG_0_5_16 = LAUNCH_RELEASES["sglang"]
VLLM_0_32_0, VLLM_0_33_0, VLLM_0_34_0 = LAUNCH_RELEASES["vllm"]
(TENSORRT_LLM_MAIN,) = LAUNCH_RELEASES["tensorrt_llm"]

HEALTHY = DEMO / "drafters" / "healthy"
OTHER = DEMO / "drafters" / "d2t_missing"
TARGET = DEMO / "target"
SG = f"python -m sglang.launch_server --model-path {TARGET} --speculative-draft-model-path {HEALTHY}"
SG_CHAIN = "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"


def launch(cmd: str, drafter: Path = HEALTHY, engines: str | list[str] = "all") -> Diagnosis:
    return diagnose(drafter, target=TARGET, engines=engines, launch=cmd, launch_base=ROOT)


def codes(d: Diagnosis, prefix: str = "LAUNCH_") -> list[tuple[str, str]]:
    return [(f.code, f.severity.value) for f in d.findings if f.code.startswith(prefix)]


def one(d: Diagnosis, code: str) -> Finding:
    hits = [f for f in d.findings if f.code == code]
    assert len(hits) == 1, [(f.code, f.message) for f in d.findings]
    return hits[0]


def trt_yaml(tmp_path: Path, **spec: object) -> Path:
    lines = ["speculative_config:"] + [f"  {k}: {json.dumps(v)}" for k, v in spec.items()]
    path = tmp_path / "extra.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# -- parsing: SGLang ---------------------------------------------------------------------------------


def test_sglang_launch_server_both_value_spellings_and_aliases() -> None:
    line = split_command(
        "CUDA_VISIBLE_DEVICES=0 /opt/venv/bin/python3.11 -m sglang.launch_server --model meta/Llama \\\n"
        "  --speculative-algorithm=EAGLE3 --speculative-draft-model d/r --speculative-num-steps=5 "
        "--speculative-eagle-topk 1 --speculative-num-draft-tokens 6 --trust-remote-code --port 30000"
    )
    assert (line.engine, line.program) == ("sglang", "python -m sglang.launch_server")
    s = read_launch(line, SGLANG_0_5_16)
    assert s.settings == {
        "target": "meta/Llama",
        "method": "EAGLE3",
        "draft": "d/r",
        "num_steps": 5,
        "topk": 1,
        "num_draft_tokens": 6,
    }
    assert s.given["method"] == "--speculative-algorithm" and s.method_used == "EAGLE3"


def test_sglang_serve_operand_model_by_release() -> None:
    line = split_command("sglang serve meta/Llama --speculative-algorithm EAGLE3")
    assert read_launch(line, SGLANG_0_5_16).settings.get("target") == "meta/Llama"
    assert read_launch(line, SGLANG_0_5_12).settings.get("target") is None  # --model-path only


def test_sglang_algorithm_case_by_release() -> None:
    line = split_command("sglang serve --model-path m --speculative-algorithm eagle3")
    old = read_launch(line, SGLANG_0_5_11)
    assert old.method_refused is not None and "EAGLE3" in old.method_refused  # argparse choices, exact
    new = read_launch(line, SGLANG_0_5_12)
    assert (new.method_refused, new.method_used) == (None, "EAGLE3")  # .upper() since 0.5.12
    nextn = read_launch(
        split_command("sglang serve --model-path m --speculative-algorithm NEXTN"), SGLANG_0_5_16
    )
    assert nextn.method_used == "EAGLE"  # an alias of EAGLE


def test_sglang_refuses_underscore_spellings() -> None:
    line = split_command("python -m sglang.launch_server --model-path m --speculative_algorithm EAGLE3")
    with pytest.raises(BadArgumentsError, match="--speculative-algorithm"):
        read_launch(line, SGLANG_0_5_16)


def test_sglang_non_integer_count_is_refused() -> None:
    with pytest.raises(BadArgumentsError, match="integer"):
        read_launch(split_command(f"{SG} --speculative-num-steps three"), SGLANG_0_5_16)


# -- parsing: vLLM -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags",
    [
        """--speculative-config '{"method": "eagle3", "model": "d/r", "num_speculative_tokens": 3}'""",
        """--speculative_config='{"method": "eagle3", "model": "d/r", "num_speculative_tokens": 3}'""",
        """-sc '{"method": "eagle3", "model": "d/r", "num-speculative-tokens": 3}'""",
        "--speculative-config.method eagle3 --speculative-config.model d/r --speculative_config.num_speculative_tokens=3",
        "--spec-method eagle3 --spec-model d/r --spec-tokens 3",
    ],
)
def test_vllm_speculative_config_spellings(flags: str) -> None:
    s = read_launch(split_command(f"vllm serve meta/Llama {flags} --tensor-parallel-size 2"), VLLM_0_32_0)
    assert s.settings == {
        "target": "meta/Llama",
        "method": "eagle3",
        "draft": "d/r",
        "num_speculative_tokens": 3,
        "tensor_parallel_size": 2,
    }


def test_vllm_spec_flag_and_json_key_are_mutually_exclusive() -> None:
    line = split_command("""vllm serve m --spec-method eagle3 --speculative-config '{"method": "eagle"}'""")
    with pytest.raises(BadArgumentsError, match="mutually exclusive"):
        read_launch(line, VLLM_0_32_0)


@pytest.mark.parametrize(
    ("draft", "method", "source"),
    [
        ("yuhuili/EAGLE-LLaMA3-Instruct-8B", "eagle", "draft name"),
        ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "eagle3", "draft name"),
        ("/models/my-eagle-3-head", "eagle", "draft name"),  # "eagle-" is tried first
        ("/models/drafter", "draft_model", "default"),
    ],
)
def test_vllm_guesses_the_method_from_the_draft_name(draft: str, method: str, source: str) -> None:
    cmd = f"""vllm serve m --speculative-config '{{"model": "{draft}", "num_speculative_tokens": 3}}'"""
    s = read_launch(split_command(cmd), VLLM_0_32_0)
    assert (s.method_used, s.method_source) == (method, source)


def test_vllm_serving_a_speculators_checkpoint_reads_its_config() -> None:
    drafter = DEMO / "drafters" / "speculators_layout"
    s = read_launch(split_command(f"vllm serve {drafter}"), VLLM_0_32_0)
    assert s.settings["draft"] == str(drafter)
    assert (s.method_used, s.settings["num_speculative_tokens"]) == ("eagle3", 3)
    assert s.settings["target"] == "data/demo/target"  # the verifier named in the drafter's config


# -- parsing: TensorRT-LLM ---------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--extra_llm_api_options", "--config", "--extra_llm_api_options="])
def test_trtllm_reads_the_options_yaml(flag: str, tmp_path: Path) -> None:
    path = trt_yaml(
        tmp_path,
        decoding_type="Eagle",
        max_draft_len=3,
        speculative_model_dir="d/r",
        eagle3_layers_to_capture=[4, 1, 3],
    )
    sep = "" if flag.endswith("=") else " "
    s = read_launch(
        split_command(f"trtllm-serve meta/Llama {flag}{sep}{path.name}"), TENSORRT_LLM_MAIN, tmp_path
    )
    assert s.settings == {
        "target": "meta/Llama",
        "method": "Eagle",
        "draft": "d/r",
        "max_draft_len": 3,
        "capture_layers": [1, 3, 4],  # a set in TensorRT-LLM
    }
    assert s.options_file == str(tmp_path / "extra.yaml")


def test_trtllm_speculative_model_alias(tmp_path: Path) -> None:
    path = trt_yaml(tmp_path, decoding_type="Eagle3", max_draft_len=2, speculative_model="d/r")
    s = read_launch(split_command(f"trtllm-serve serve m --config {path}"), TENSORRT_LLM_MAIN)
    assert s.settings["draft"] == "d/r" and s.method_used == "Eagle3"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("speculative_config: [1, 2\n", "not valid YAML"),
        ("- a\n- b\n", "YAML mapping"),
        ("!!python/object/apply:os.system ['echo hi']\n", "not valid YAML"),  # safe_load refuses tags
    ],
)
def test_trtllm_bad_yaml_is_unusable(text: str, match: str, tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(UnusableInputError, match=match):
        read_launch(split_command(f"trtllm-serve m --config {tmp_path / 'x.yaml'}"), TENSORRT_LLM_MAIN)


def test_trtllm_missing_yaml_is_unusable(tmp_path: Path) -> None:
    with pytest.raises(UnusableInputError, match="does not exist"):
        read_launch(split_command(f"trtllm-serve m --config {tmp_path / 'no.yaml'}"), TENSORRT_LLM_MAIN)


# -- malformed command lines -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cmd", "match"),
    [
        ("", "empty"),
        ("python -m sglang.launch_server --model-path 'unclosed", "cannot split"),
        ("ls -la /", "unknown program"),
        ("python -m sglang.bench_serving --model-path m", "unknown program"),
        ("vllm serve m && rm -rf /", "one command"),
        ("vllm serve m | tee log", "one command"),
        ("vllm serve m --speculative-config '{\"method\": eagle3}'", "not valid JSON"),
        ("vllm serve m --speculative-config '[1, 2]'", "JSON object"),
        ("vllm serve m --speculative-config", "JSON object"),
    ],
)
def test_malformed_command_lines_are_bad_arguments(cmd: str, match: str) -> None:
    with pytest.raises(BadArgumentsError, match=match):
        line = split_command(cmd)
        read_launch(line, LAUNCH_RELEASES[line.engine][-1])


def test_launch_table_follows_the_judged_release() -> None:
    assert launch_rules_for(resolve_release("sglang==0.5.11")) is SGLANG_0_5_11
    assert launch_rules_for(resolve_release("sglang==0.5.14")) is SGLANG_0_5_12
    assert launch_rules_for(resolve_release("sglang==0.5.16")) is SGLANG_0_5_16
    assert launch_rules_for(resolve_release("sglang")) is SGLANG_0_5_16
    assert launch_rules_for(resolve_release("vllm==0.32.0")) is VLLM_0_32_0
    assert launch_rules_for(resolve_release("vllm==0.33.0")) is VLLM_0_33_0
    assert launch_rules_for(resolve_release("vllm")) is VLLM_0_34_0
    with pytest.raises(BadArgumentsError, match="no launch rules"):
        launch_rules_for(resolve_release("speculators"))


def test_every_launch_table_cites_its_files() -> None:
    for tables in LAUNCH_RELEASES.values():
        for t in tables:
            assert t.sources and all(t.package in s for s in t.sources), t.release


# -- a consistent command: no finding ----------------------------------------------------------------


@pytest.mark.parametrize(
    "cmd",
    [
        f"{SG} --speculative-algorithm EAGLE3 {SG_CHAIN}",
        f"sglang serve {TARGET} --speculative-algorithm eagle3 --speculative-draft-model-path {HEALTHY}",  # auto
        f"sglang serve {TARGET} --speculative-algorithm EAGLE3 --speculative-draft-model-path ./data/demo/drafters/healthy/",
        f"vllm serve {TARGET} --speculative-config "
        f"""'{{"method": "eagle3", "model": "{HEALTHY}", "num_speculative_tokens": 3}}'""",
        f"vllm serve {DEMO / 'drafters' / 'speculators_layout'}",
    ],
)
def test_consistent_launch_gives_no_finding(cmd: str) -> None:
    drafter = DEMO / "drafters" / "speculators_layout" if "speculators_layout" in cmd else HEALTHY
    # the demo speculators drafter's verifier is a local path: vLLM 0.33+ refuse to serve it directly
    d = launch(cmd, drafter, engines="vllm==0.32.0" if "speculators_layout" in cmd else "all")
    assert d.findings == [], [(f.code, f.message) for f in d.findings]
    assert d.launch is not None and d.exit_code == 0


def test_the_command_picks_the_engine_and_the_report_names_the_release() -> None:
    d = launch(f"{SG} --speculative-algorithm EAGLE3 {SG_CHAIN}")
    assert d.engines == ["sglang"] and d.launch is not None
    assert d.launch.to_dict()["judged_by"] == "sglang 0.5.18–0.5.23"
    assert d.launch.launch_release == "sglang 0.5.16–0.5.23"
    old = launch(f"{SG} --speculative-algorithm EAGLE3 {SG_CHAIN}", engines=["sglang==0.5.11"])
    assert old.launch is not None and old.launch.launch_release == "sglang 0.5.10.post1–0.5.11"


def test_engine_all_with_a_launch_judges_every_engine_and_the_command_by_its_own() -> None:
    d = launch(f"{SG} --speculative-algorithm EAGLE3 {SG_CHAIN}", engines=["all"])
    assert set(d.engines) == {"sglang", "vllm", "eagle", "speculators", "tensorrt_llm"}
    assert d.launch is not None and d.launch.engine == "sglang" and codes(d) == []


def test_an_engine_other_than_the_commands_is_bad_arguments() -> None:
    with pytest.raises(BadArgumentsError, match="vllm command"):
        launch("vllm serve m", engines=["sglang"])


# -- LAUNCH_ALGORITHM_MISMATCH -----------------------------------------------------------------------


def test_algorithm_eagle_on_sglang() -> None:
    f = one(launch(f"{SG} --speculative-algorithm EAGLE {SG_CHAIN}"), "LAUNCH_ALGORITHM_MISMATCH")
    assert f.severity is Severity.ERROR and f.engine == "sglang"
    assert "21272" in f.message and f.fix == "Launch with --speculative-algorithm EAGLE3."


def test_algorithm_lowercase_refused_by_sglang_0_5_11_only() -> None:
    cmd = f"{SG} --speculative-algorithm eagle3 {SG_CHAIN}"
    f = one(launch(cmd, engines=["sglang==0.5.11"]), "LAUNCH_ALGORITHM_MISMATCH")
    assert "refuses" in f.message
    assert codes(launch(cmd, engines=["sglang==0.5.12"])) == []


def test_algorithm_missing_means_no_speculative_decoding() -> None:
    f = one(launch(SG), "LAUNCH_ALGORITHM_MISMATCH")
    assert "without speculative decoding" in f.message and "ignored" in f.message


def test_algorithm_eagle_on_vllm_and_by_draft_name(tmp_path: Path) -> None:
    cfg = f"""'{{"method": "eagle", "model": "{HEALTHY}", "num_speculative_tokens": 3}}'"""
    f = one(launch(f"vllm serve {TARGET} --speculative-config {cfg}"), "LAUNCH_ALGORITHM_MISMATCH")
    assert f.engine == "vllm" and '"method": "eagle3"' in (f.fix or "")
    named = tmp_path / "llama-eagle-head"
    shutil.copytree(HEALTHY, named)
    cfg = f"""'{{"model": "{named}", "num_speculative_tokens": 3}}'"""
    f = one(launch(f"vllm serve {TARGET} --speculative-config {cfg}", named), "LAUNCH_ALGORITHM_MISMATCH")
    assert f.evidence["method_source"] == "draft name" and f.evidence["method_used"] == "eagle"


# -- LAUNCH_DRAFT_PATH_MISSING -----------------------------------------------------------------------


def test_draft_path_missing_on_sglang_loads_the_target() -> None:
    cmd = f"python -m sglang.launch_server --model-path {TARGET} --speculative-algorithm EAGLE3 {SG_CHAIN}"
    f = one(launch(cmd), "LAUNCH_DRAFT_PATH_MISSING")
    assert f.severity is Severity.ERROR and "36528" in f.message and str(HEALTHY) in (f.fix or "")
    assert f.evidence["effect"] == "target_as_drafter"


def test_draft_path_missing_on_vllm_is_refused() -> None:
    f = one(
        launch("""vllm serve m --speculative-config '{"method": "eagle3", "num_speculative_tokens": 3}'"""),
        "LAUNCH_DRAFT_PATH_MISSING",
    )
    assert f.evidence["effect"] == "refused"


def test_draft_path_given_negative() -> None:
    assert "LAUNCH_DRAFT_PATH_MISSING" not in dict(
        codes(launch(f"{SG} --speculative-algorithm EAGLE3 {SG_CHAIN}"))
    )


# -- LAUNCH_DRAFT_PATH_OTHER -------------------------------------------------------------------------


def test_draft_path_other_directory_is_an_error() -> None:
    cmd = f"{SG.replace(str(HEALTHY), str(OTHER))} --speculative-algorithm EAGLE3 {SG_CHAIN}"
    f = one(launch(cmd), "LAUNCH_DRAFT_PATH_OTHER")
    assert f.severity is Severity.ERROR and f.evidence["draft_resolved"] == str(OTHER.resolve())


def test_draft_path_not_on_this_machine_is_a_warning() -> None:
    cmd = f"{SG.replace(str(HEALTHY), '/mnt/models/healthy')} --speculative-algorithm EAGLE3 {SG_CHAIN}"
    f = one(launch(cmd), "LAUNCH_DRAFT_PATH_OTHER")
    assert f.severity is Severity.WARNING and f.evidence["same_name"] is True


def test_draft_path_hub_id_is_said_honestly() -> None:
    cmd = f"{SG.replace(str(HEALTHY), 'yuhuili/EAGLE3-LLaMA3.1-Instruct-8B')} --speculative-algorithm EAGLE3 {SG_CHAIN}"
    f = one(launch(cmd), "LAUNCH_DRAFT_PATH_OTHER")
    assert f.severity is Severity.INFO and f.evidence["hub_id"] is True and "Hub id" in f.message


def test_draft_path_same_drafter_by_copy_or_cache_snapshot(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(HEALTHY, copy)
    cmd = f"{SG.replace(str(HEALTHY), str(copy))} --speculative-algorithm EAGLE3 {SG_CHAIN}"
    assert codes(launch(cmd)) == []
    snapshot = tmp_path / "hub" / "models--org--eagle3-head" / "snapshots" / "abc"
    shutil.copytree(HEALTHY, snapshot)
    cmd = f"{SG.replace(str(HEALTHY), 'org/eagle3-head')} --speculative-algorithm EAGLE3 {SG_CHAIN}"
    assert codes(launch(cmd, snapshot)) == []


# -- LAUNCH_SPEC_PARAMS_INCONSISTENT -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "severity", "text"),
    [
        (
            "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 5",
            "warning",
            "resets it to 4",
        ),
        ("--speculative-num-steps 3", "error", "TypeError"),
        ("--speculative-eagle-topk 1 --speculative-num-draft-tokens 4", "error", "asserts"),
    ],
)
def test_sglang_spec_params(flags: str, severity: str, text: str) -> None:
    f = one(launch(f"{SG} --speculative-algorithm EAGLE3 {flags}"), "LAUNCH_SPEC_PARAMS_INCONSISTENT")
    assert f.severity.value == severity and text in f.message
    assert f.evidence["outcome"] == ("adjusted" if severity == "warning" else "refused")


@pytest.mark.parametrize(
    "flags",
    ["", SG_CHAIN, "--speculative-num-steps 5 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8"],
)
def test_sglang_spec_params_negative(flags: str) -> None:
    assert codes(launch(f"{SG} --speculative-algorithm EAGLE3 {flags}")) == []


def test_sglang_spec_params_are_not_judged_for_a_method_that_does_not_draft_with_the_drafter() -> None:
    d = launch(f"{SG} --speculative-algorithm NGRAM --speculative-num-steps 3")
    assert codes(d) == [("LAUNCH_ALGORITHM_MISMATCH", "error")]


@pytest.mark.parametrize(
    ("extra", "flags", "text"),
    [
        (', "num_speculative_tokens": 0', "", "> 0"),
        ("", "", "num_speculative_tokens was not provided"),
        (
            ', "num_speculative_tokens": 3, "draft_tensor_parallel_size": 2',
            "-tp 4",
            "draft_tensor_parallel_size",
        ),
    ],
)
def test_vllm_spec_params(extra: str, flags: str, text: str) -> None:
    cmd = f"""vllm serve {TARGET} {flags} --speculative-config '{{"method": "eagle3", "model": "{HEALTHY}"{extra}}}'"""
    f = one(launch(cmd), "LAUNCH_SPEC_PARAMS_INCONSISTENT")
    assert f.severity is Severity.ERROR and text in f.message


def test_vllm_draft_tp_matching_the_target_negative() -> None:
    cfg = f"""'{{"method": "eagle3", "model": "{HEALTHY}", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 4}}'"""
    assert codes(launch(f"vllm serve {TARGET} -tp 4 --speculative-config {cfg}")) == []


def test_trtllm_max_draft_len(tmp_path: Path) -> None:
    path = trt_yaml(tmp_path, decoding_type="Eagle", speculative_model_dir=str(HEALTHY))
    f = one(launch(f"trtllm-serve {TARGET} --config {path}"), "LAUNCH_SPEC_PARAMS_INCONSISTENT")
    assert "max_draft_len" in f.message
    path = trt_yaml(tmp_path, decoding_type="Eagle", speculative_model_dir=str(HEALTHY), max_draft_len=3)
    assert codes(launch(f"trtllm-serve {TARGET} --config {path}")) == []


# -- LAUNCH_CAPTURE_LAYERS_MISMATCH ------------------------------------------------------------------


def _nested_ids_drafter(tmp_path: Path, ids: list[int]) -> Path:
    """The healthy drafter with SpecForge's nested aux ids (on a Llama target: HF index = id + 1)."""
    out = tmp_path / "nested"
    shutil.copytree(HEALTHY, out)
    cfg = json.loads((out / "config.json").read_text(encoding="utf-8"))
    cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": ids}
    (out / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return out


def test_capture_layers_mismatch_gives_the_exact_option(tmp_path: Path) -> None:
    # healthy on the 8-layer demo target was trained on the default HF [2, 4, 5] = option {1, 3, 4}
    path = trt_yaml(
        tmp_path,
        decoding_type="Eagle",
        max_draft_len=3,
        speculative_model_dir=str(HEALTHY),
        eagle3_layers_to_capture=[2, 4, 5],
    )
    f = one(launch(f"trtllm-serve {TARGET} --config {path}"), "LAUNCH_CAPTURE_LAYERS_MISMATCH")
    assert f.severity is Severity.ERROR and f.evidence["captured_hf"] == [3, 5, 6]
    assert f.fix == "Write eagle3_layers_to_capture: [1, 3, 4] (HF layers [2, 4, 5])."


def test_capture_layers_right_option_replaces_the_default_finding(tmp_path: Path) -> None:
    drafter = _nested_ids_drafter(tmp_path, [0, 3, 5])  # HF [1, 4, 6]: not TensorRT-LLM's default
    plain = diagnose(drafter, target=TARGET, engines=["tensorrt_llm"])
    assert "AUX_LAYER_IDS_IGNORED_BY_ENGINE" in {f.code for f in plain.findings}
    path = trt_yaml(
        tmp_path,
        decoding_type="Eagle",
        max_draft_len=3,
        speculative_model_dir=str(drafter),
        eagle3_layers_to_capture=[0, 3, 5],
    )
    d = launch(f"trtllm-serve {TARGET} --config {path}", drafter)
    assert d.findings == [], [(f.code, f.message) for f in d.findings]
    path = trt_yaml(
        tmp_path,
        decoding_type="Eagle",
        max_draft_len=3,
        speculative_model_dir=str(drafter),
        eagle3_layers_to_capture=[1, 3, 4],
    )
    f = one(launch(f"trtllm-serve {TARGET} --config {path}", drafter), "LAUNCH_CAPTURE_LAYERS_MISMATCH")
    assert "[0, 3, 5]" in (f.fix or "")


# -- the CLI -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cmd",
    [
        "vllm serve m --speculative-config '{oops'",
        "sglang serve 'm",
        "bash -c 'vllm serve m'",
        "trtllm-serve m --config /nonexistent/x.yaml",
    ],
)
def test_cli_malformed_launch_is_one_line_exit_2(cmd: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(HEALTHY), "--launch", cmd]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("eagle3-forensics: --launch")
    assert main(["diagnose", str(HEALTHY), "--launch", cmd, "--json"]) == 2
    out, _ = capsys.readouterr()
    obj = json.loads(out)
    assert obj["exit_code"] == 2 and obj["error"]["code"] in ("BAD_ARGUMENTS", "UNUSABLE_INPUT")


def test_cli_text_and_json_name_the_launch_release(capsys: pytest.CaptureFixture[str]) -> None:
    cmd = f"{SG} --speculative-algorithm EAGLE {SG_CHAIN}"
    assert main(["diagnose", str(HEALTHY), "--launch", cmd]) == 1
    out, _ = capsys.readouterr()
    assert "launch:     python -m sglang.launch_server judged by sglang 0.5.18–0.5.23" in out
    assert "LAUNCH_ALGORITHM_MISMATCH [sglang]" in out
    assert main(["diagnose", str(HEALTHY), "--launch", cmd, "--json"]) == 1
    obj = json.loads(capsys.readouterr()[0])
    assert obj["engines"] == ["sglang"] and obj["launch"]["launch_release"] == "sglang 0.5.16–0.5.23"
    assert obj["launch"]["settings"]["method"] == "EAGLE"


# -- vLLM 0.33 / 0.34 start-up rules: LAUNCH_FAILS_AT_STARTUP, LAUNCH_CONTEXT_SHRUNK -------------------
# Every expectation was read in the released vllm 0.32.0 / 0.33.0 / 0.34.0 wheels (engines/startup.py).


def vllm_sc(extra: str = "", drafter: Path = HEALTHY) -> str:
    return (
        f"vllm serve {TARGET} --speculative-config "
        f"""'{{"method": "eagle3", "model": "{drafter}", "num_speculative_tokens": 3{extra}}}'"""
    )


def startup(d: Diagnosis) -> list[Finding]:
    return [f for f in d.findings if f.code == "LAUNCH_FAILS_AT_STARTUP"]


@pytest.mark.parametrize("key", ["disable_padded_drafter_batch", "use_heterogeneous_vocab"])
def test_vllm_0_34_refuses_removed_keys_that_0_33_accepts(key: str) -> None:
    extra = f', "{key}": true'
    for release in ("vllm==0.32.0", "vllm==0.33.0"):
        assert not [
            f for f in startup(launch(vllm_sc(extra), engines=release)) if f.evidence.get("key") == key
        ]
    f = one(launch(vllm_sc(extra), engines="vllm==0.34.0"), "LAUNCH_FAILS_AT_STARTUP")
    assert f.severity is Severity.ERROR and f.evidence["key"] == key and f.evidence["outcome"] == "refused"
    assert (
        "refuses to start" in f.message and "removed in 0.34.0" in f.message and "extra='forbid'" in f.message
    )
    assert f.fix == f"Remove '{key}' from --speculative-config."
    # this rule ran through vLLM 0.34.0's own SpeculativeConfig (tests/loaders/test_vllm034_startup.py)
    assert f.proof == "ran" and f.evidence["runner"] == "V2"
    older = one(launch(vllm_sc(', "num_spec_tokens": 2'), engines="vllm==0.33.0"), "LAUNCH_FAILS_AT_STARTUP")
    assert older.proof == "read"


def test_vllm_refuses_an_unknown_speculative_key_on_every_release() -> None:
    for release in ("vllm==0.32.0", "vllm==0.33.0", "vllm==0.34.0"):
        f = one(launch(vllm_sc(', "num_spec_tokens": 2'), engines=release), "LAUNCH_FAILS_AT_STARTUP")
        assert "'num_spec_tokens' is not a field" in f.message
    # keys each release does accept (dotted spelling too) give nothing
    for release, extra in (("vllm==0.33.0", ', "draft_lm_head_quantization": "fp8"'), ("vllm==0.34.0", "")):
        assert not startup(launch(vllm_sc(extra), engines=release))
    assert not startup(launch(vllm_sc(), engines="vllm==0.34.0"))
    assert not startup(
        launch(vllm_sc() + " --speculative-config.rejection_sample_method standard", engines="vllm")
    )


def test_vllm_parallel_drafting_refused_by_0_34_and_a_load_crash_before(tmp_path: Path) -> None:
    extra = ', "parallel_drafting": true'
    refused = one(launch(vllm_sc(extra), engines="vllm==0.34.0"), "LAUNCH_FAILS_AT_STARTUP")
    assert (
        "only supported by the dflash and dspark" in refused.message
        and refused.evidence["outcome"] == "refused"
    )
    for release in ("vllm==0.32.0", "vllm==0.33.0"):
        f = one(launch(vllm_sc(extra), engines=release), "LAUNCH_FAILS_AT_STARTUP")
        assert "mask_hidden not found" in f.message and f.evidence["outcome"] == "crash"
        assert f.evidence["runner"] == "V1" and "parallel_drafting" in f.evidence["runner_why"]
    # a P-EAGLE drafter (it has mask_hidden) runs on 0.33's V1 runner; false is harmless everywhere
    peagle = build_drafter(tmp_path / "peagle", extra_keys={"mask_hidden": ((1, 1, H), torch.float32)})
    assert not startup(launch(vllm_sc(extra, peagle), peagle, engines="vllm==0.33.0"))
    assert not startup(launch(vllm_sc(', "parallel_drafting": false'), engines="vllm==0.34.0"))


def test_vllm_speculators_checkpoint_with_a_local_verifier_is_refused(tmp_path: Path) -> None:
    drafter = DEMO / "drafters" / "speculators_layout"  # verifier: data/demo/target, a local path
    cmd = f"vllm serve {drafter}"
    assert not startup(launch(cmd, drafter, engines="vllm==0.32.0"))
    for release in ("vllm==0.33.0", "vllm==0.34.0"):
        f = one(launch(cmd, drafter, engines=release), "LAUNCH_FAILS_AT_STARTUP")
        assert "remote model repository" in f.message and f.evidence["verifier"] == "data/demo/target"
        assert "--model" in (f.fix or "")
    remote = tmp_path / "remote"
    shutil.copytree(drafter, remote)
    cfg = json.loads((remote / "config.json").read_text())
    cfg["speculators_config"]["verifier"]["name_or_path"] = "meta-llama/Llama-3.1-8B-Instruct"
    (remote / "config.json").write_text(json.dumps(cfg))
    assert not startup(launch(f"vllm serve {remote}", remote, engines="vllm==0.34.0"))
    cfg["speculators_model_type"] = "peagle"
    (remote / "config.json").write_text(json.dumps(cfg))
    f = one(launch(f"vllm serve {remote}", remote, engines="vllm==0.34.0"), "LAUNCH_FAILS_AT_STARTUP")
    assert "P-EAGLE (parallel drafting EAGLE-3) is not supported." in f.message
    # named in --speculative-config instead of served: 0.34 reads it through the same speculators registry
    named = vllm_sc(drafter=remote).replace('"method": "eagle3", ', "")
    f = one(launch(named, remote, engines="vllm==0.34.0"), "LAUNCH_FAILS_AT_STARTUP")
    assert "P-EAGLE" in f.message and f.proof == "ran"
    # 0.33 maps peagle to eagle3 with parallel_drafting true: V1, and no mask_hidden -> a load crash
    f = one(launch(f"vllm serve {remote}", remote, engines="vllm==0.33.0"), "LAUNCH_FAILS_AT_STARTUP")
    assert f.evidence["outcome"] == "crash" and f.evidence["runner"] == "V1"


def test_vllm_0_34_refuses_the_removed_v1_runner() -> None:
    cmd = "VLLM_USE_V2_MODEL_RUNNER=0 " + vllm_sc()
    f = one(launch(cmd, engines="vllm==0.34.0"), "LAUNCH_FAILS_AT_STARTUP")
    assert "Model Runner V1 has been removed" in f.message and "Unset VLLM_USE_V2_MODEL_RUNNER" in (
        f.fix or ""
    )
    assert not startup(launch(cmd, engines="vllm==0.33.0"))  # 0.33 still has V1
    assert not startup(launch("VLLM_USE_V2_MODEL_RUNNER=1 " + vllm_sc(), engines="vllm==0.34.0"))


def test_vllm_0_32_v2_runner_crashes_on_use_aux_hidden_state_false(tmp_path: Path) -> None:
    drafter = build_drafter(tmp_path / "d")
    cfg = json.loads((drafter / "config.json").read_text())
    cfg.setdefault("eagle_config", {})["use_aux_hidden_state"] = False
    (drafter / "config.json").write_text(json.dumps(cfg))
    f = one(launch(vllm_sc(drafter=drafter), drafter, engines="vllm==0.32.0"), "LAUNCH_FAILS_AT_STARTUP")
    assert "same last dimension" in f.message and f.evidence["runner"] == "V2" and f.proof == "read"
    for release in ("vllm==0.33.0", "vllm==0.34.0"):  # honoured by every runner: silent, not a crash
        assert not startup(launch(vllm_sc(drafter=drafter), drafter, engines=release))


@pytest.mark.parametrize(
    ("rope", "asked", "server"),
    [
        ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 512}, "8k", 2048),
        ({"type": "dynamic", "factor": 2.0}, "8192", 4096),  # dynamic scales the draft's limit by factor
    ],
)
def test_vllm_0_33_lowers_the_servers_context_to_a_non_cache_only_draft(
    tmp_path: Path, rope: dict[str, object], asked: str, server: int
) -> None:
    drafter = build_drafter(
        tmp_path / "d", config_extra={"rope_scaling": rope}
    )  # max_position_embeddings 2048
    cmd = vllm_sc(drafter=drafter) + f" --max-model-len {asked}"
    assert "LAUNCH_CONTEXT_SHRUNK" not in [c for c, _ in codes(launch(cmd, drafter, engines="vllm==0.32.0"))]
    for release in ("vllm==0.33.0", "vllm==0.34.0"):
        f = one(launch(cmd, drafter, engines=release), "LAUNCH_CONTEXT_SHRUNK")
        assert f.severity is Severity.WARNING and f.evidence["server_max_model_len"] == server
        assert f"max_model_len {server} instead of" in f.message and "silent shrink" in f.message
    # 0.33: only the V2 runner shrinks; P-EAGLE's V1 fallback can skip speculation instead
    assert ("LAUNCH_CONTEXT_SHRUNK", "warning") not in codes(
        launch("VLLM_USE_V2_MODEL_RUNNER=0 " + cmd, drafter, engines="vllm==0.33.0")
    )


def test_vllm_cache_only_rope_or_a_long_draft_keeps_the_context(tmp_path: Path) -> None:
    llama3 = build_drafter(
        tmp_path / "l3", config_extra={"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}
    )
    assert not codes(launch(vllm_sc(drafter=llama3) + " --max-model-len 8192", llama3, engines="vllm"))
    yarn = build_drafter(tmp_path / "y", config_extra={"rope_scaling": {"rope_type": "yarn", "factor": 4.0}})
    assert not codes(launch(vllm_sc(drafter=yarn) + " --max-model-len 1024", yarn, engines="vllm"))
    # without --max-model-len the target's max_position_embeddings (2048 here) is the context asked for
    assert not codes(launch(vllm_sc(drafter=yarn), yarn, engines="vllm"))


def test_vllm_0_34_keeps_an_explicit_method_that_0_33_overrides(tmp_path: Path) -> None:
    named = tmp_path / "my-eagle3-head"
    shutil.copytree(HEALTHY, named)
    cmd = (
        f"vllm serve {TARGET} --speculative-config "
        f"""'{{"method": "draft_model", "model": "{named}", "num_speculative_tokens": 3}}'"""
    )
    old = read_launch(split_command(cmd), VLLM_0_33_0)
    assert (old.method_used, old.method_source) == ("eagle3", "draft name")
    new = read_launch(split_command(cmd), VLLM_0_34_0)
    assert (new.method_used, new.method_source) == ("draft_model", "flag")
    assert (
        one(launch(cmd, named, engines="vllm==0.34.0"), "LAUNCH_ALGORITHM_MISMATCH").severity
        is Severity.ERROR
    )
    assert not codes(launch(cmd, named, engines="vllm==0.33.0"))


def test_vllm_method_choices_by_release() -> None:
    cmd = f'vllm serve {TARGET} --speculative-config \'{{"method": "medusa", "model": "x"}}\''
    assert read_launch(split_command(cmd), VLLM_0_32_0).method_refused is None
    assert "not one of its choices" in (read_launch(split_command(cmd), VLLM_0_33_0).method_refused or "")
    refused = read_launch(split_command(cmd), VLLM_0_34_0).method_refused  # _validate_method: not registered
    assert refused is not None and "Unknown speculative method" in refused


def test_vllm_max_model_len_reads_human_readable_values() -> None:
    for text, value in (("32k", 32000), ("32K", 32768), ("auto", -1), ("4096", 4096)):
        s = read_launch(split_command(vllm_sc() + f" --max-model-len {text}"), VLLM_0_34_0)
        assert s.settings["max_model_len"] == value


def test_sliding_window_drafter_without_the_sglang_window_flag(tmp_path: Path) -> None:
    """SGLang 0.5.23 ignores the drafter's layer_types / sliding_window: only the launch flag sets a window."""
    drafter = tmp_path / "swa"
    shutil.copytree(HEALTHY, drafter)
    cfg = json.loads((drafter / "config.json").read_text())
    (drafter / "config.json").write_text(
        json.dumps({**cfg, "layer_types": ["sliding_attention"], "sliding_window": 1024})
    )
    cmd = f"python -m sglang.launch_server --model-path {TARGET} --speculative-draft-model-path {drafter}"
    cmd += f" --speculative-algorithm EAGLE3 {SG_CHAIN}"
    f = one(launch(cmd, drafter), "LAUNCH_DRAFT_WINDOW_MISSING")
    assert f.severity is Severity.WARNING and f.engine == "sglang" and f.evidence["given"] is None
    assert not codes(launch(f"{cmd} --speculative-draft-window-size 1024", drafter))


# -- vLLM 0.34.0 start-up refusals, as read in its wheel (config/speculative.py) ------------------------


@pytest.mark.parametrize("method", ["custom_class", "medusa", "EAGLE3", "eagle-3"])
def test_vllm_034_refuses_an_unregistered_method_name(method: str) -> None:
    """SpeculativeConfig._validate_method: a built-in SpeculativeMethod or a registered custom method."""
    cmd = f"""vllm serve {TARGET} --speculative-config '{{"method": "{method}", "model": "{HEALTHY}", "num_speculative_tokens": 3}}'"""
    s = read_launch(split_command(cmd), VLLM_0_34_0)
    assert s.method_refused is not None and "Unknown speculative method" in s.method_refused
    f = one(launch(cmd, engines="vllm==0.34.0"), "LAUNCH_ALGORITHM_MISMATCH")
    assert (
        f.severity is Severity.ERROR
        and "refuses" in f.message
        and "runs" not in f.message.split("refuses")[0]
    )


@pytest.mark.parametrize("engine", ["vllm==0.32.0", "vllm==0.33.0", "vllm==0.34.0"])
def test_vllm_refuses_tensor_parallel_size_inside_the_speculative_config(engine: str) -> None:
    d = launch(vllm_sc(', "tensor_parallel_size": 2'), engines=engine)
    (f,) = startup(d)
    assert f.evidence["key"] == "tensor_parallel_size" and "draft_tensor_parallel_size" in (f.fix or "")
    assert not startup(launch(vllm_sc(', "draft_tensor_parallel_size": 1'), engines=engine))


@pytest.mark.parametrize(
    "option", ["speculator_options", "xpress_topc", "dspark_draft_topk", "index_share_for_mtp_iteration"]
)
def test_vllm_034_refuses_other_methods_options_with_eagle3(option: str) -> None:
    value = '{"a": 1}' if option == "speculator_options" else ("true" if option.startswith("index") else "2")
    (f,) = startup(launch(vllm_sc(f', "{option}": {value}'), engines="vllm==0.34.0"))
    assert f.evidence["key"] == option and "supported_options" in f.message
    assert not startup(launch(vllm_sc(', "draft_lm_head_quantization": "fp8"'), engines="vllm==0.34.0"))


def test_fly_rejection_sampling_is_lossy_in_a_launch() -> None:
    lossy = [
        f
        for f in launch(vllm_sc(', "rejection_sample_method": "fly"'), engines="vllm==0.34.0").findings
        if f.code == "VERIFY_MODE_LOSSY"
    ]
    assert len(lossy) == 1 and lossy[0].severity is Severity.WARNING and "'fly'" in lossy[0].message
    exact = launch(vllm_sc(', "rejection_sample_method": "standard"'), engines="vllm==0.34.0")
    assert not [f for f in exact.findings if f.code == "VERIFY_MODE_LOSSY"]
