"""The next command for a set of findings (repair/next_steps.py), on the demo drafters as diagnosed."""

from __future__ import annotations

import shlex

from paths import ROOT

from eagle3_forensics.checks.diagnose import diagnose
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.repair.next_steps import (
    StepAction,
    code_commands,
    fix_command,
    next_steps,
    repair_command,
    repair_out,
)

DRAFTERS = ROOT / "data" / "demo" / "drafters"


def test_repair_command_names_this_runs_paths_and_quotes_them() -> None:
    assert repair_out("runs/my drafter/", "sglang==0.5.11") == "runs/my drafter-repaired-sglang-0.5.11"
    cmd = repair_command("runs/my drafter", "vllm", target="t")
    assert shlex.split(cmd) == [
        "eagle3-forensics",
        "repair",
        "runs/my drafter",
        "--engine",
        "vllm",
        "--out",
        "runs/my drafter-repaired-vllm",
        "--target",
        "t",
    ]


def test_d2t_absolute_repair_then_confirm_per_repairable_engine_and_by_hand_elsewhere() -> None:
    path = str(DRAFTERS / "d2t_absolute")
    d = diagnose(path)
    steps = d.next_steps()
    repairs = [s for s in steps if s.action is StepAction.REPAIR]
    assert [s.engines for s in repairs] == [("sglang",), ("vllm",)]
    assert repairs[0].command == repair_command(path, "sglang")
    assert all(s.codes == ("D2T_ABSOLUTE",) for s in repairs)
    confirm = steps[steps.index(repairs[0]) + 1]
    assert confirm.action is StepAction.CONFIRM
    assert shlex.split(confirm.command or "")[2] == repair_out(path, "sglang")  # diagnoses the copy
    manual = {s.codes[0]: s for s in steps if s.action is StepAction.MANUAL}
    assert set(manual["D2T_ABSOLUTE"].engines) == {"eagle", "tensorrt_llm"}  # no repair for these engines
    assert manual["D2T_ABSOLUTE"].command is None and "arange" in manual["D2T_ABSOLUTE"].text
    # diagnose's fix lines carry the same command
    for f in d.findings:
        if f.code == "D2T_ABSOLUTE" and f.engine == "sglang":
            assert f.fix is not None and f.fix.endswith(repair_command(path, "sglang"))
        if f.code == "D2T_ABSOLUTE" and f.engine == "eagle":
            assert f.fix is not None and "repair" not in f.fix


def test_a_pinned_release_is_repaired_for_that_release() -> None:
    path = str(DRAFTERS / "layers_flat")
    d = diagnose(path, engines=["sglang==0.5.11"])
    (repair, confirm) = d.next_steps()
    assert repair.command == repair_command(path, "sglang==0.5.11")
    assert set(repair.codes) == {"KEYS_DROPPED_BY_ENGINE", "PARAMS_UNFILLED"}
    assert "--engine sglang==0.5.11" in (confirm.command or "")
    only = d.next_steps(out="/tmp/elsewhere")  # one engine repaired: --out is the caller's
    assert shlex.split(only[0].command or "")[-1] == "/tmp/elsewhere"


def test_conversion_is_a_repair_for_sglang_even_as_info() -> None:
    """speculators_layout with every engine: SGLang cannot read its config (info, not an error); repair converts it."""
    path = str(DRAFTERS / "speculators_layout")
    d = diagnose(path)
    cmds = code_commands(d.findings, path, specs=d.specs)
    assert [e for e, _ in cmds["CONFIG_UNREADABLE_BY_ENGINE"]] == ["sglang"]
    assert any(s.action is StepAction.REPAIR and s.engines == ("sglang",) for s in d.next_steps())


def test_healthy_gives_no_repair_and_warnings_give_no_step() -> None:
    d = diagnose(DRAFTERS / "healthy", engines=["sglang", "vllm"])
    assert d.next_steps() == []
    warn = Finding("AUX_LAYER_IDS_CONVENTION_SHIFT", Severity.WARNING, "m", engine="vllm", fix="f")
    assert fix_command(warn, "x") is None and next_steps([warn], "x") == []


def test_refused_codes_and_launch_findings_keep_their_words() -> None:
    refused = Finding("MULTI_LAYER_DRAFTER", Severity.ERROR, "m", engine="sglang", fix="serve it on vLLM")
    launch = Finding("LAUNCH_ALGORITHM_MISMATCH", Severity.ERROR, "m", engine="sglang", fix="Launch with X.")
    steps = next_steps([refused, launch], "ckpt")
    assert [(s.action, s.command, s.text) for s in steps] == [
        (StepAction.LAUNCH, None, "Launch with X."),
        (StepAction.MANUAL, None, "serve it on vLLM"),
    ]


def test_a_conversion_fix_names_this_runs_paths() -> None:
    """The speculators loader needs `speculators convert`: its fix names the drafter, target and output."""
    path, target = str(DRAFTERS / "healthy"), str(DRAFTERS.parent / "target")
    d = diagnose(path, target=target, engines=["speculators"])
    (f,) = [f for f in d.findings if f.code == "CONFIG_UNREADABLE_BY_ENGINE"]
    assert f.fix is not None
    assert (
        f"speculators convert {path} --algorithm eagle3 --verifier {target} --output-path {path}-converted"
        in f.fix
    )
    assert "TARGET" in (
        diagnose(path, engines=["speculators"]).findings[0].fix or ""
    )  # no target: the placeholder stays
