"""The loader oracle's comparison itself (part of `make test`: no engine needed).

It must pass when an engine does exactly what the simulation says, and fail, naming the drafter,
the channel and both values, on any single difference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import loader_corpus
import loader_oracle as oracle
import loader_tables as tables
import pytest

ENGINES = ("sglang", "vllm", "speculators")
VERSION = {"sglang": "0.5.23", "vllm": "0.32.0", "speculators": "0.9.0"}


def _perfect_engine(engine: str, drafter: Path) -> dict[str, Any]:
    """A harness line for an engine that behaves exactly as the simulation predicts."""
    sim, _ = oracle.simulated_outcome(tables.table_for(engine, VERSION[engine]), drafter)
    if sim.status == "refused":
        return {
            "drafter": drafter.name,
            "version": VERSION[engine],
            "status": "config_error",
            "error": sim.detail,
        }
    effect = {"used": "changed", "dropped": "dropped", "rejected": "rejected"}
    d2t = {"present": sim.d2t != "absent", "engine_targets": sim.d2t in ("offsets", "absolute")}
    d2t.update(equals_i_plus_d2t=sim.d2t == "offsets", equals_d2t_raw=sim.d2t == "absolute")
    return {
        "drafter": drafter.name,
        "version": VERSION[engine],
        "status": "loaded" if sim.status == "loads" else "rejected",
        "per_key": {k: {"effect": effect[v]} for k, v in sim.keys.items()},
        "per_param": {n: {"fate": f} for n, f in sim.params.items()},
        "serving_share": {f"{part}_from_target": v for part, v in sim.shared.items()},
        "d2t": d2t,
    }


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("loader-corpus")
    for i, name in enumerate(("specforge_midlayer", "speculators_layers0", "layers2", "d2t_missing")):
        loader_corpus.write_drafter(out, name, "llama", loader_corpus.NAMED[name], seed=i)
    loader_corpus.write_drafter(out, "kimi", "mla", {}, seed=9)
    return out


@pytest.mark.parametrize("engine", ENGINES)
def test_an_engine_that_does_what_the_table_says_agrees(corpus: Path, engine: str) -> None:
    results = [_perfect_engine(engine, d) for d in sorted(corpus.iterdir())]
    rep = oracle.judge(engine, results, corpus)
    assert (rep.drafters, rep.agree, rep.differences) == (5, 5, [])


@pytest.mark.parametrize("engine", ENGINES)
def test_every_single_difference_fails_the_drafter(corpus: Path, engine: str) -> None:
    results = [_perfect_engine(engine, d) for d in sorted(corpus.iterdir())]
    loaded = next(r for r in results if r["status"] == "loaded" and r["per_param"])
    key = next(k for k, v in loaded["per_key"].items() if v["effect"] == "changed")
    param = next(iter(loaded["per_param"]))
    loaded["per_key"][key]["effect"] = "dropped"
    loaded["per_param"][param]["fate"] = "partial"
    loaded["per_param"]["model.only_in_the_engine.weight"] = {"fate": "unfilled"}
    rep = oracle.judge(engine, results, corpus)
    assert rep.agree == rep.drafters - 1
    found = {(d.drafter, d.channel, d.item, d.real, d.simulated) for d in rep.differences}
    name = loaded["drafter"]
    assert (name, "key", key, "dropped", "used") in found
    assert any(f[:4] == (name, "param", param, "partial") for f in found)
    assert (name, "param", "model.only_in_the_engine.weight", "unfilled", "absent") in found
    assert all(d.drafter == name for d in rep.differences)


def test_param_share_and_d2t_differences_are_reported(corpus: Path) -> None:
    results = [_perfect_engine("sglang", d) for d in sorted(corpus.iterdir())]
    loaded = next(r for r in results if r["status"] == "loaded" and r["d2t"]["present"])
    param = next(iter(loaded["per_param"]))
    loaded["per_param"][param]["fate"] = "partial"
    loaded["serving_share"]["embed_from_target"] = not loaded["serving_share"]["embed_from_target"]
    loaded["d2t"]["equals_i_plus_d2t"] = False
    rep = oracle.judge("sglang", results, corpus)
    got = {(d.channel, d.item, d.real) for d in rep.differences if d.drafter == loaded["drafter"]}
    assert ("param", param, "partial") in got
    assert any(c == "shared" and i == "embed from target" for c, i, _ in got)
    assert any(c == "d2t" for c, _, _ in got)


def test_status_difference_and_harness_error(corpus: Path) -> None:
    results = [_perfect_engine("vllm", d) for d in sorted(corpus.iterdir())]
    results[0] = {
        "drafter": results[0]["drafter"],
        "version": "0.32.0",
        "status": "build_error",
        "error": "boom",
    }
    results[1] = {
        "drafter": results[1]["drafter"],
        "version": "0.32.0",
        "status": "harness_error",
        "error": "bug",
    }
    rep = oracle.judge("vllm", results, corpus)
    assert rep.harness_errors == 1
    channels = {d.drafter: d.channel for d in rep.differences}
    assert channels[results[1]["drafter"]] == "harness"
    assert channels.get(results[0]["drafter"]) == "status" or _refused_in_simulation(
        corpus / results[0]["drafter"]
    )


def _refused_in_simulation(drafter: Path) -> bool:
    table = tables.table_for("vllm", "0.32.0")
    return oracle.simulated_outcome(table, drafter)[0].status == "refused"


def test_capture_comparison_uses_the_tables_rule() -> None:
    table = tables.table_for("sglang", "0.5.23")
    ids = [1, 17, 32]
    predicted = tables.capture_prediction(table, "LlamaForCausalLM", ids, 36)
    capture = {
        "version": "0.5.23",
        "n_layers": 36,
        "samples": {"given": ids, "none": None},
        "classes": [
            {
                "architecture": "Agrees",
                "defined_in": "x.Agrees",
                "results": {
                    "given": {"capture": predicted},
                    "none": {"capture": tables.capture_prediction(table, "Agrees", None, 36)},
                },
            },
            {
                "architecture": "Differs",
                "defined_in": "x.Differs",
                "results": {"given": {"capture": [9, 9, 9]}, "none": {"error": "KeyError: x"}},
            },
            {
                "architecture": "External",
                "defined_in": "x.External",
                "results": {"given": {"capture": ids}, "none": {"capture": ["passed_through", None]}},
            },
        ],
    }
    rep = oracle.judge_capture("sglang", json.loads(json.dumps(capture)))
    assert (rep.architectures, rep.agree) == (2, 1)
    assert {d.drafter for d in rep.differences} == {"Differs"}
    assert len(rep.not_evaluable) == 1 and rep.not_evaluable[0].startswith("External")


def test_partial_stacked_parameter_is_compared(tmp_path: Path) -> None:
    """A stacked parameter the simulation says gets only some shards is `partial`, as the harness reports."""
    loader_corpus.write_drafter(
        tmp_path,
        "mla_half",
        "mla",
        {"drop": ["{p}self_attn.kv_a_proj_with_mqa.weight"], "model_type": "deepseek_v2"},
        seed=3,
    )
    drafter = tmp_path / "mla_half"
    sim, _ = oracle.simulated_outcome(tables.table_for("vllm", "0.32.0"), drafter)
    assert sim.status == "loads" and "partial" in sim.params.values()
    line = _perfect_engine("vllm", drafter)
    rep = oracle.judge("vllm", [line], tmp_path)
    assert rep.agree == 1
    fused = next(n for n, f in sim.params.items() if f == "partial")
    line["per_param"][fused]["fate"] = "filled"
    assert oracle.judge("vllm", [line], tmp_path).agree == 0


def test_a_load_failure_by_chance_accepts_either_real_outcome(tmp_path: Path) -> None:
    """speculators without t2d: the table says the load fails unless uninitialised memory holds a valid
    mask, so a real load that succeeds agrees, and so does one that fails."""
    loader_corpus.write_drafter(
        tmp_path, "no_t2d", "llama", {**loader_corpus.NAMED["speculators_layers0"], "t2d": False}, seed=5
    )
    drafter = tmp_path / "no_t2d"
    sim, _ = oracle.simulated_outcome(tables.table_for("speculators", "0.9.0"), drafter)
    assert sim.status == "rejected" and sim.may_load
    loads = _perfect_engine("speculators", drafter)
    loads["status"] = "loaded"
    assert oracle.judge("speculators", [loads], tmp_path).agree == 1
    fails = {
        "drafter": "no_t2d",
        "version": "0.9.0",
        "status": "rejected",
        "error": "size mismatch",
        "per_key_complete": False,
    }
    assert oracle.judge("speculators", [fails], tmp_path).agree == 1
    refused = {"drafter": "no_t2d", "version": "0.9.0", "status": "config_error", "error": "x"}
    assert oracle.judge("speculators", [refused], tmp_path).agree == 0
