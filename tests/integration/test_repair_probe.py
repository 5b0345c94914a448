"""Repaired demo drafters accept like the healthy one (issue: repair, "done when").

The probe loads each repaired copy the way the engine it was repaired for would (same rule
tables as ``diagnose``) and its acceptance length must be within 5 % of the healthy drafter's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)

from paths import DEMO

from eagle3_forensics.probe.core import probe, read_prompts
from eagle3_forensics.repair.execute import repair

TARGET = DEMO / "target"
PROMPTS = read_prompts(DEMO / "prompts.jsonl")[:4]
K = 3
TOKENS = 32
pytestmark = pytest.mark.slow  # repair, then a probe per variant and engine (make test-all)


@pytest.fixture(scope="module")
def healthy_al() -> float:
    res = probe(
        DEMO / "drafters" / "healthy",
        TARGET,
        PROMPTS,
        k=K,
        max_new_tokens=TOKENS,
        device="cpu",
        teacher_forced=False,
        sweep=False,
    )
    assert res.lossless
    return res.acceptance_length


@pytest.mark.parametrize(
    ("variant", "engine"),
    [
        ("layers_flat", "sglang==0.5.11"),  # the seed's case: layers.0.* dropped by SGLang <= 0.5.11
        ("d2t_absolute", "sglang"),
        ("d2t_double_offset", "vllm"),
        ("d2t_missing", "vllm"),
    ],
)
def test_repaired_drafter_accepts_like_healthy(
    tmp_path: Path, healthy_al: float, variant: str, engine: str
) -> None:
    broken = probe(
        DEMO / "drafters" / variant,
        TARGET,
        PROMPTS,
        k=K,
        max_new_tokens=TOKENS,
        device="cpu",
        engine=engine,
        teacher_forced=False,
        sweep=False,
    )
    result = repair(DEMO / "drafters" / variant, engine, tmp_path / "fixed", target=TARGET)
    assert result.exit_code == 0, result.message
    fixed = probe(
        tmp_path / "fixed",
        TARGET,
        PROMPTS,
        k=K,
        max_new_tokens=TOKENS,
        device="cpu",
        engine=engine,
        teacher_forced=False,
        sweep=False,
    )
    assert broken.acceptance_length <= 1.2 < healthy_al
    assert fixed.lossless
    assert abs(fixed.acceptance_length - healthy_al) <= 0.05 * healthy_al
