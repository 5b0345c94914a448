"""`make test-loaders`, target side: vLLM 0.32's and SGLang 0.5.23's own target classes capture what
the target tables say.

One harness run per engine (tests/loaders/target_oracle.py) in .venv-engine and .venv-sglang; every (class, id set) row must
agree with the table, the classes the issue names must build, and the table's ``ran`` marks must be
exactly the decoders this tier runs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import target_oracle as oracle

pytestmark = pytest.mark.loaders

MUST_BUILD = {
    "vllm": {
        "LlamaForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "GptOssForCausalLM",
        "DeepseekV2ForCausalLM",
    },
    "sglang": {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"},
}
VERSION = {"vllm": "0.32.0", "sglang": "0.5.23"}


@pytest.fixture(scope="module")
def rows() -> Iterator[list[oracle.Row]]:
    out: list[oracle.Row] = []
    for run in oracle.RUNS:
        try:
            out += oracle.judge(oracle.run_harness(run))
        except FileNotFoundError as e:
            pytest.fail(str(e))
    oracle.record(out)
    yield out


@pytest.mark.parametrize("engine", sorted(MUST_BUILD))
def test_capture_capable_classes_build(rows: list[oracle.Row], engine: str) -> None:
    built = {r.architecture for r in rows if r.decoder and r.engine == engine}
    assert built >= MUST_BUILD[engine], [r.real for r in rows if not r.decoder]


def test_every_row_agrees_with_the_table(rows: list[oracle.Row]) -> None:
    bad = [r for r in rows if r.decoder and not r.agree]
    assert not bad, "\n".join(
        f"{r.architecture} ids {r.ids}: real {r.real}, table {r.predicted}" for r in bad
    )
    ids = {tuple(r.ids or ()) for r in rows if r.engine == "vllm"}
    n = 6
    assert any({0, n - 1, n, n + 1} <= set(i) for i in ids), "the id sets include 0, N-1, N and N+1"


@pytest.mark.parametrize("engine", sorted(VERSION))
def test_ran_marks_are_the_decoders_this_tier_runs(rows: list[oracle.Row], engine: str) -> None:
    mine = [r for r in rows if r.engine == engine]
    assert oracle.marked_ran(VERSION[engine], engine) == oracle.ran_decoders(mine)
