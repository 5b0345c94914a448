"""`make test-loaders`, target side: vLLM 0.32's own target classes capture what the target table says.

One harness run (tests/loaders/target_oracle.py) in .venv-engine; every (class, id set) row must
agree with the table, the classes the issue names must build, and the table's ``ran`` marks must be
exactly the decoders this tier runs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import target_oracle as oracle

pytestmark = pytest.mark.loaders

MUST_BUILD = {
    "LlamaForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "GptOssForCausalLM",
    "DeepseekV2ForCausalLM",
}


@pytest.fixture(scope="module")
def rows() -> Iterator[list[oracle.Row]]:
    try:
        result = oracle.run_harness()
    except FileNotFoundError as e:
        pytest.fail(str(e))
    out = oracle.judge(result)
    oracle.record(out)
    yield out


def test_capture_capable_classes_build(rows: list[oracle.Row]) -> None:
    built = {r.architecture for r in rows if r.decoder}
    assert built >= MUST_BUILD, [r.real for r in rows if not r.decoder]


def test_every_row_agrees_with_the_table(rows: list[oracle.Row]) -> None:
    bad = [r for r in rows if r.decoder and not r.agree]
    assert not bad, "\n".join(
        f"{r.architecture} ids {r.ids}: real {r.real}, table {r.predicted}" for r in bad
    )
    ids = {tuple(r.ids) for r in rows}
    n = 6
    assert any({0, n - 1, n, n + 1} <= set(i) for i in ids), "the id sets include 0, N-1, N and N+1"


def test_ran_marks_are_the_decoders_this_tier_runs(rows: list[oracle.Row]) -> None:
    assert oracle.marked_ran("0.32.0") == oracle.ran_decoders(rows)
