"""The in-process accept-rate probe on the committed demo world (CPU; GPU tests marked ``gpu``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
from paths import DEMO

from eagle3_forensics.cli.main import main
from eagle3_forensics.probe.core import ProbeResult, compare_variants, probe, read_prompts
from eagle3_forensics.probe.decode import GreedyRun
from eagle3_forensics.probe.proposers import OracleProposer, RandomProposer
from eagle3_forensics.reference.target import TargetModel
from eagle3_forensics.views.probe import (
    per_position_figure,
    per_position_table,
    render_probe,
    summary_table,
    variants_figure,
    variants_table,
)

pytest.importorskip("transformers")

DRAFTERS = DEMO / "drafters"
K = 3
N_PROMPTS = 8
NEW_TOKENS = 40
BROKEN = ("d2t_absolute", "d2t_double_offset", "d2t_missing")


@pytest.fixture(scope="module")
def target() -> TargetModel:
    return TargetModel(DEMO / "target", device="cpu")


@pytest.fixture(scope="module")
def prompts() -> list[str]:
    return read_prompts(DEMO / "prompts.jsonl")[:N_PROMPTS]


@pytest.fixture(scope="module")
def greedy(target: TargetModel, prompts: list[str]) -> GreedyRun:
    run = GreedyRun()
    with _one_thread():
        for p in prompts:
            out = target.greedy(target.encode(p), NEW_TOKENS)
            run.outputs.append(out)
            run.new_tokens += len(out)
    run.seconds = 1.0  # not timed here
    return run


class _one_thread:  # noqa: N801 - a context manager used like a function: `with _one_thread():`
    def __enter__(self) -> None:
        self.n = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc: object) -> None:
        torch.set_num_threads(self.n)


def _probe(
    target: TargetModel,
    prompts: list[str],
    greedy: GreedyRun,
    drafter: Any,
    engine: str = "reference",
    **kw: Any,
) -> ProbeResult:
    opts: dict[str, Any] = {
        "k": K,
        "max_new_tokens": NEW_TOKENS,
        "device": "cpu",
        "greedy": greedy,
        "engine": engine,
    }
    opts.update(kw)
    return probe(drafter, target, prompts, **opts)


@pytest.fixture(scope="module")
def healthy(target: TargetModel, prompts: list[str], greedy: GreedyRun) -> ProbeResult:
    return _probe(target, prompts, greedy, DRAFTERS / "healthy")


# -- controls ------------------------------------------------------------------------------------


def test_oracle_drafter_is_accepted_every_time(
    target: TargetModel, prompts: list[str], greedy: GreedyRun
) -> None:
    r = _probe(target, prompts, greedy, OracleProposer(greedy.outputs))
    assert r.lossless
    assert r.acceptance_length == pytest.approx(K + 1)
    assert r.per_position_cumulative == [1.0] * K
    assert r.per_position_conditional == [1.0] * K
    assert r.teacher_forced is None and r.engine == "control"


def test_random_drafter_is_almost_never_accepted(
    target: TargetModel, prompts: list[str], greedy: GreedyRun
) -> None:
    r = _probe(target, prompts, greedy, RandomProposer(target.vocab_size, seed=1))
    assert r.lossless
    assert 1.0 <= r.acceptance_length < 1.1


def test_kv_caches_are_used_not_the_prefix(
    target: TargetModel, prompts: list[str], greedy: GreedyRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each verify forward feeds only [bonus, drafts]; the prompt is fed once, at prefill."""
    fed: list[int] = []
    real = TargetModel.forward

    def spy(self: TargetModel, ids: Any, cache: Any = None, *a: Any, **kw: Any) -> Any:
        if cache is not None:
            fed.append(len(ids))
        return real(self, ids, cache, *a, **kw)

    monkeypatch.setattr(TargetModel, "forward", spy)
    prompt = prompts[:1]
    r = probe(
        DRAFTERS / "healthy",
        target,
        prompt,
        k=K,
        max_new_tokens=NEW_TOKENS,
        device="cpu",
        greedy=GreedyRun(greedy.outputs[:1], 1.0, NEW_TOKENS),
        teacher_forced=False,
        sweep=False,
    )
    n_prompt = len(target.encode(prompt[0]))
    spec_calls = fed[-(r.live.num_drafts + 1) :]
    assert spec_calls[0] == n_prompt
    assert all(1 <= n <= K + 1 for n in spec_calls[1:])
    assert sum(spec_calls[1:]) <= r.live.num_drafts * (K + 1)


# -- the healthy drafter -------------------------------------------------------------------------


def test_healthy_acceptance(healthy: ProbeResult) -> None:
    assert healthy.lossless
    assert healthy.acceptance_length >= 2.5
    tf = healthy.teacher_forced
    assert tf is not None
    assert abs(tf.simulated_acceptance_length - healthy.acceptance_length) <= 0.10 * healthy.acceptance_length
    assert healthy.aux_sweep is not None and healthy.aux_sweep.best_offset == 0


def test_metric_conventions(healthy: ProbeResult) -> None:
    r = healthy
    assert r.acceptance_length == pytest.approx(1 + sum(r.per_position_cumulative))
    assert r.mean_accepted_drafts == pytest.approx(r.acceptance_length - 1)
    assert r.acceptance_rate == pytest.approx(r.live.accepted / (K * r.live.num_drafts))
    cum = r.per_position_cumulative
    cond = r.per_position_conditional
    assert cond[0] == pytest.approx(cum[0])
    for i in range(1, K):
        assert cum[i] <= cum[i - 1] + 1e-12
        assert cond[i] == pytest.approx(cum[i] / cum[i - 1])
    tf = r.teacher_forced
    assert tf is not None
    prod, total = 1.0, 1.0
    for c in tf.conditional_accuracy:
        prod *= c
        total += prod
    assert tf.simulated_acceptance_length == pytest.approx(total)
    assert tf.simulated_acceptance_length == pytest.approx(1 + sum(tf.cumulative))


def test_report_keys(healthy: ProbeResult) -> None:
    d = healthy.to_dict()
    for key in (
        "acceptance_length",
        "mean_accepted_drafts",
        "per_position",
        "drafted",
        "accepted",
        "k",
        "temperature",
        "device",
        "lossless",
        "tokens_per_s",
        "greedy_tokens_per_s",
        "speedup_vs_greedy",
        "teacher_forced",
        "aux_sweep",
        "conventions",
    ):
        assert key in d, key
    assert set(d["per_position"]) >= {"cumulative", "conditional"}
    assert "simulated_acceptance_length" in d["teacher_forced"]
    assert {"best_offset", "margin", "offsets"} <= set(d["aux_sweep"])
    json.dumps(d)
    text = render_probe(healthy)
    assert "acceptance length" in text and "lossless" in text


# -- broken variants, per engine view ------------------------------------------------------------


@pytest.mark.slow  # a probe per variant and engine
@pytest.mark.parametrize("engine", ["reference", "sglang", "vllm", "eagle"])
@pytest.mark.parametrize("variant", BROKEN)
def test_broken_d2t_collapses_acceptance(
    target: TargetModel, prompts: list[str], greedy: GreedyRun, variant: str, engine: str
) -> None:
    r = _probe(
        target,
        prompts[:4],
        GreedyRun(greedy.outputs[:4], 1.0, 4 * NEW_TOKENS),
        DRAFTERS / variant,
        engine,
        teacher_forced=False,
        sweep=False,
    )
    assert r.lossless
    assert r.acceptance_length <= 1.2


@pytest.mark.slow  # a probe per release
def test_seed_case_per_release(
    target: TargetModel, prompts: list[str], greedy: GreedyRun, healthy: ProbeResult
) -> None:
    """layers.0.* names: SGLang 0.5.11 drops the decoder (acceptance ~1), 0.5.12+ and vLLM load it."""
    old = _probe(
        target, prompts, greedy, DRAFTERS / "layers_flat", "sglang==0.5.11", teacher_forced=False, sweep=False
    )
    new = _probe(
        target, prompts, greedy, DRAFTERS / "layers_flat", "sglang", teacher_forced=False, sweep=False
    )
    vll = _probe(
        target, prompts, greedy, DRAFTERS / "speculators_layout", "vllm", teacher_forced=False, sweep=False
    )
    assert old.lossless and new.lossless and vll.lossless
    assert old.acceptance_length <= 1.2
    assert (
        old.view is not None and old.view["unfilled"] and old.view["release"] == "sglang 0.5.10.post1–0.5.11"
    )
    for r in (new, vll):
        assert abs(r.acceptance_length - healthy.acceptance_length) <= 0.05 * healthy.acceptance_length


@pytest.mark.slow  # an aux-layer sweep of probes
@pytest.mark.parametrize("engine", ["reference", "vllm"])
def test_aux_sweep_finds_the_shift(
    target: TargetModel, prompts: list[str], greedy: GreedyRun, engine: str
) -> None:
    r = _probe(target, prompts, greedy, DRAFTERS / "aux_shifted", engine)
    assert r.view is not None and r.view["aux_ids_hf"] == [1, 3, 4]
    sw = r.aux_sweep
    assert sw is not None
    assert sw.best_offset == +1
    assert sw.margin > 0.05
    assert sw.to_dict()["best_aux_ids_hf"] == [2, 4, 5]


# -- display helpers used by notebook 04 ---------------------------------------------------------


def test_display_helpers(healthy: ProbeResult, target: TargetModel, prompts: list[str]) -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    assert len(summary_table(healthy)) >= 8
    assert list(per_position_table(healthy)["position"]) == [0, 1, 2]
    assert per_position_figure(healthy) is not None
    rows = compare_variants(
        {"healthy": DRAFTERS / "healthy", "aux_shifted": DRAFTERS / "aux_shifted"},
        target,
        prompts[:2],
        engines=("reference", "eagle"),
        max_new_tokens=16,
        device="cpu",
    )
    json.dumps(rows, allow_nan=False)  # the records are JSON as they are
    table = variants_table(rows)
    assert len(table) == 4
    assert variants_figure(rows) is not None
    refused = table[(table["drafter"] == "aux_shifted") & (table["engine"] == "eagle")]
    assert refused["acceptance length"].isna().all() and "refuse" in refused["note"].iloc[0]


# -- the CLI -------------------------------------------------------------------------------------


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_probe_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prompts = tmp_path / "p.txt"
    prompts.write_text(read_prompts(DEMO / "prompts.jsonl")[0] + "\n")
    rc, out, _ = _cli(
        [
            "probe",
            str(DRAFTERS / "healthy"),
            "--target",
            str(DEMO / "target"),
            "--prompts",
            str(prompts),
            "--k",
            "2",
            "--max-new-tokens",
            "12",
            "--device",
            "cpu",
            "--engine",
            "vllm",
            "--json",
        ],
        capsys,
    )
    assert rc == 0
    d = json.loads(out)
    assert d["k"] == 2 and d["engine"] == "vllm" and d["lossless"] is True and d["device"] == "cpu"
    assert len(d["per_position"]["cumulative"]) == 2


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing_prompts", "prompts file not found"),
        ("empty_prompts", "prompts file is empty"),
        ("k0", "K must be a positive integer"),
        ("missing_target", "target directory not found"),
        ("hidden", "hidden sizes do not fit"),
        ("cuda", "CUDA"),
    ],
)
def test_cli_probe_bad_input(
    case: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if case == "cuda" and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    drafter, target_dir, prompts = DRAFTERS / "healthy", DEMO / "target", DEMO / "prompts.jsonl"
    extra: list[str] = []
    if case == "missing_prompts":
        prompts = tmp_path / "nope.jsonl"
    elif case == "empty_prompts":
        prompts = tmp_path / "empty.jsonl"
        prompts.write_text("\n  \n")
    elif case == "k0":
        extra = ["--k", "0"]
    elif case == "missing_target":
        target_dir = tmp_path / "no_target"
    elif case == "hidden":
        drafter = tmp_path / "wide"
        shutil.copytree(DRAFTERS / "healthy", drafter)
        cfg = json.loads((drafter / "config.json").read_text())
        cfg["target_hidden_size"] = 256
        (drafter / "config.json").write_text(json.dumps(cfg))
    elif case == "cuda":
        extra = ["--device", "cuda"]
    rc, _, err = _cli(
        ["probe", str(drafter), "--target", str(target_dir), "--prompts", str(prompts), *extra], capsys
    )
    assert rc == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1


# -- GPU ---------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_probe_on_cuda() -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA")
    r = probe(
        DRAFTERS / "healthy", DEMO / "target", DEMO / "prompts.jsonl", k=K, max_new_tokens=64, device="auto"
    )
    assert r.device.startswith("cuda") and r.dtype == "bfloat16"
    assert r.acceptance_length >= 2.5
    # bf16 verify forwards over K+1 tokens can round a near-tie differently from 1-token greedy steps
    assert len(r.mismatched_prompts) <= r.prompts // 10
