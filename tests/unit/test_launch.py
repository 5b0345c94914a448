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

from eagle3_forensics.checks.diagnose import Diagnosis, diagnose
from eagle3_forensics.cli.main import main
from eagle3_forensics.engines import resolve_release
from eagle3_forensics.engines.launch import (
    LAUNCH_RELEASES,
    SGLANG_0_5_11,
    SGLANG_0_5_12,
    SGLANG_0_5_16,
    TENSORRT_LLM_MAIN,
    VLLM_0_32_0,
    launch_rules_for,
    read_launch,
)
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.launch import split_command

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo"
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
    assert launch_rules_for(resolve_release("vllm")) is VLLM_0_32_0
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
    d = launch(cmd, drafter)
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
