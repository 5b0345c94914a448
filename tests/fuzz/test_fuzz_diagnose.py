"""Fuzzing ``diagnose`` and ``inspect``: mutated safetensors headers and config.json files.

Whatever the bytes, ``diagnose --json`` (and ``inspect --json`` on the same files) ends with a
documented exit code and one schema-valid JSON object, quickly, without a traceback
(tests/fuzz/contract.py); unusable input is one CHECKPOINT_UNREADABLE finding beside the error
object. Example counts scale with ``FUZZ_SCALE`` (default 1). The other commands share the harness
in test_contract_fuzz.py.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
from contract import FUZZ_SETTINGS, alarm, check, examples, run_cli
from hypothesis import event, given
from hypothesis import strategies as st
from mangle import (
    AUX,
    FLAT_CONFIG,
    SPECULATORS_CONFIG,
    apply_config_edits,
    draw_config,
    draw_safetensors,
    write_drafter,
    write_target,
)

from eagle3_forensics.checks.diagnose import Diagnosis, diagnose, inspect_checkpoint
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.views.text import render_diagnosis, render_inspection

TIME_LIMIT_S = 5.0  # one diagnose call on a tiny drafter takes milliseconds
HARD_LIMIT_S = 20


def run_bounded(path: Path, target: Path | None) -> Diagnosis:
    """diagnose + every renderer the CLI uses, through the API; must finish, never raise."""
    start = time.perf_counter()
    with alarm(HARD_LIMIT_S):
        d = diagnose(path, target=target)
        json.dumps(d.to_dict(), default=str)
        render_diagnosis(d)
        if not d.unusable:
            with contextlib.suppress(UnusableInputError):
                render_inspection(inspect_checkpoint(path))
    elapsed = time.perf_counter() - start
    assert isinstance(d, Diagnosis)
    assert d.exit_code in (0, 1, 2)
    if d.unusable:
        assert [f.code for f in d.findings] == ["CHECKPOINT_UNREADABLE"]
        assert "\n" not in d.findings[0].message
    assert elapsed < TIME_LIMIT_S, f"diagnose took {elapsed:.1f} s"
    return d


def run_commands(data: st.DataObject, work: Path, target: Path | None) -> int:
    """``diagnose`` (JSON or text) and sometimes ``inspect --json`` on ``work``: the contract holds."""
    engine = data.draw(
        st.sampled_from(["all", "all", "vllm", "sglang", "eagle", "speculators"]), label="engine"
    )
    argv = ["diagnose", str(work), "--engine", engine, *(["--target", str(target)] if target else [])]
    if data.draw(st.sampled_from([True, True, True, False]), label="json"):
        out = check(run_cli([*argv, "--json"]), "diagnose", {0, 1, 2})
        assert out.obj is not None
        if out.code == 2:
            assert [f["code"] for f in out.obj["findings"]] == ["CHECKPOINT_UNREADABLE"], out
            assert out.obj["error"]["code"] == "UNUSABLE_INPUT", out
    else:
        out = check(run_cli(argv), "diagnose", {0, 1, 2}, json_output=False)
        assert out.stdout.strip(), out
    if data.draw(st.booleans(), label="inspect too"):
        check(run_cli(["inspect", str(work), "--json"]), "inspect", {0, 2})
    return out.code


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fuzz_base")
    return {
        "flat": write_drafter(root / "flat", "flat"),
        "speculators": write_drafter(root / "speculators", "speculators"),
        "target": write_target(root / "target"),
        "work": root / "work",
    }


def test_base_drafters_are_clean(base: dict[str, Path]) -> None:
    """The fuzz seeds are valid: no error finding, with and without the target."""
    for style in ("flat", "speculators"):
        for target in (None, base["target"]):
            d = run_bounded(base[style], target)
            errors = [(f.code, f.engine) for f in d.errors]
            if style == "speculators":  # SGLang wants midlayer.* keys: the known layout problem
                errors = [e for e in errors if e[1] != "sglang"]
            assert errors == [], (style, target, errors)


@FUZZ_SETTINGS(examples(500))
@given(data=st.data())
def test_fuzz_safetensors_header(base: dict[str, Path], data: st.DataObject) -> None:
    style = data.draw(st.sampled_from(["flat", "speculators"]), label="style")
    mutated = draw_safetensors(data, (base[style] / "model.safetensors").read_bytes())
    work = base["work"]
    work.mkdir(exist_ok=True)
    (work / "config.json").write_bytes((base[style] / "config.json").read_bytes())
    (work / "model.safetensors").write_bytes(mutated)
    target = base["target"] if data.draw(st.booleans(), label="with target") else None
    event(f"exit code {run_commands(data, work, target)}")


@FUZZ_SETTINGS(examples(500))
@given(data=st.data())
def test_fuzz_config(base: dict[str, Path], data: st.DataObject) -> None:
    style = data.draw(st.sampled_from(["flat", "speculators"]), label="style")
    raw = draw_config(data, FLAT_CONFIG if style == "flat" else SPECULATORS_CONFIG)
    work = base["work"]
    work.mkdir(exist_ok=True)
    (work / "model.safetensors").write_bytes((base[style] / "model.safetensors").read_bytes())
    (work / "config.json").write_bytes(raw)
    target = base["target"] if data.draw(st.booleans(), label="with target") else None
    event(f"exit code {run_commands(data, work, target)}")


# -- a deterministic sweep: every named field, every wrong type ------------------------------------

_SWEEP_PATHS: list[tuple[str, ...]] = [
    ("hidden_size",),
    ("target_hidden_size",),
    ("vocab_size",),
    ("draft_vocab_size",),
    ("num_hidden_layers",),
    (AUX,),
    ("eagle_config",),
    ("eagle_config", AUX),
    ("rope_parameters",),
    ("rope_theta",),
    ("tie_word_embeddings",),
    ("architectures",),
    ("speculators_config",),
    ("speculators_config", "verifier"),
    ("speculators_config", "verifier", "architectures"),
    ("speculators_model_type",),
    ("transformer_layer_config",),
    ("transformer_layer_config", "hidden_size"),
    ("transformer_layer_config", "num_hidden_layers"),
    ("transformer_layer_config", "rope_theta"),
    ("norm_before_residual",),
    ("norm_before_fc",),
    ("fc_norm",),
    ("norm_output",),
    ("torch_dtype",),
]
_SWEEP_VALUES: list[Any] = [
    None, True, False, "x", "", [], [1], [-1, 2], [2, 2], ["a"], [[1]], {}, {"a": 1}, {"rope_theta": "x"},
    -1, 0, 1, 10**7, 10**12, 10**30, 10**400, 1.5, float("nan"), float("inf"),
]  # fmt: skip


@pytest.mark.parametrize("path", _SWEEP_PATHS, ids=".".join)
def test_config_wrong_types_sweep(base: dict[str, Path], path: tuple[str, ...]) -> None:
    """Each value at each field, on both config styles, with and without the target (and without rope_theta)."""
    work = base["work"]
    work.mkdir(exist_ok=True)
    no_theta = [(("rope_theta",), True, None), (("transformer_layer_config", "rope_theta"), True, None)]
    for style in ("flat", "speculators"):
        (work / "model.safetensors").write_bytes((base[style] / "model.safetensors").read_bytes())
        cfg = FLAT_CONFIG if style == "flat" else SPECULATORS_CONFIG
        for value in [*_SWEEP_VALUES, "<delete>"]:
            for extra in ([], no_theta) if "rope" in path[-1] else ([],):
                doc = apply_config_edits(cfg, [*extra, (path, value == "<delete>", value)])
                (work / "config.json").write_text(json.dumps(doc))
                for target in (None, base["target"]):
                    run_bounded(work, target)
