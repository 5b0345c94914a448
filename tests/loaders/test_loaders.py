"""`make test-loaders`: the engines' own loaders, run in-process on the CPU, against the simulation.

One session runs everything once (tests/loaders/loader_oracle.py): the corpus, one harness process
per engine release in its venv (``make loaders-env``), the comparison, build/loader-oracle.json and
build/loader-disagreements.txt. Each engine release and each SGLang capture table is then one test,
which fails listing every difference.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import loader_corpus
import loader_oracle as oracle
import pytest

pytestmark = pytest.mark.loaders

SHOWN = 60  # differences printed in a failure; the files hold all of them


@pytest.fixture(scope="session")
def outcome() -> Iterator[dict[str, Any]]:
    t0 = time.perf_counter()
    corpus = oracle.WORK / "corpus"
    manifest = loader_corpus.write_corpus(corpus)
    t_corpus = time.perf_counter() - t0
    try:
        seconds = oracle.run_all(corpus)
    except oracle.LoaderEnvMissing as e:
        pytest.fail(str(e))
    engines, captures = oracle.judge_all(corpus, seconds=seconds)
    timing = {"corpus": round(t_corpus, 1), "loaders": seconds, "total": round(time.perf_counter() - t0, 1)}
    oracle.write_reports(engines, captures, corpus, {"seconds": timing})
    yield {
        "manifest": manifest,
        "engines": {f"{r.name}=={r.release}": r for r in engines},
        "captures": {f"{c.name}=={c.release}": c for c in captures},
    }


def _failure(title: str, diffs: list[oracle.Difference]) -> str:
    lines = [title, *(d.line() for d in diffs[:SHOWN])]
    if len(diffs) > SHOWN:
        lines.append(f"... and {len(diffs) - SHOWN} more")
    lines.append(f"all of them: {oracle.REPORT_TXT} and {oracle.ORACLE_JSON}")
    return "\n".join(lines)


RELEASES = ("sglang==0.5.23", "sglang==0.5.11", "vllm==0.32.0", "speculators==0.9.0")


@pytest.mark.parametrize("release", RELEASES)
def test_real_loader_agrees_with_simulation(outcome: dict[str, Any], release: str) -> None:
    assert release in outcome["engines"], f"no loader run reported {release}: {sorted(outcome['engines'])}"
    rep = outcome["engines"][release]
    assert rep.harness_errors == 0, _failure(f"{release}: the harness failed on drafters", rep.differences)
    assert rep.drafters >= oracle.MIN_DRAFTERS, f"{release}: only {rep.drafters} drafters"
    assert rep.agree == rep.drafters, _failure(
        f"{release} (table {rep.table}): {rep.drafters - rep.agree} of {rep.drafters} drafters disagree",
        rep.differences,
    )


@pytest.mark.parametrize("release", ("sglang==0.5.23", "sglang==0.5.11"))
def test_sglang_capture_agrees_with_table(outcome: dict[str, Any], release: str) -> None:
    cap = outcome["captures"][release]
    assert cap.architectures >= 40, (
        f"{release}: only {cap.architectures} target classes with a capture setter"
    )
    assert cap.agree == cap.architectures, _failure(
        f"{release}: {cap.architectures - cap.agree} of {cap.architectures} target architectures disagree",
        cap.differences,
    )


def test_oracle_json_lists_every_engine(outcome: dict[str, Any]) -> None:
    doc = json.loads(oracle.ORACLE_JSON.read_text())
    listed = {f"{e['name']}=={e['release']}" for e in doc["engines"]}
    assert listed == set(RELEASES)
    assert all({"name", "release", "drafters", "agree"} <= set(e) for e in doc["engines"])


def test_corpus_varies_what_the_tables_tell_apart(outcome: dict[str, Any]) -> None:
    """The property-generated part really covers each variation (not just the named drafters)."""
    fuzz = [e for e in outcome["manifest"] if e["name"].startswith("fuzz_")]
    llama = [e["opts"] for e in fuzz if e["kind"] == "llama"]
    mla = [e["opts"] for e in fuzz if e["kind"] == "mla"]
    assert len(fuzz) == loader_corpus.DEFAULT_FUZZ
    assert {o["layout"] for o in llama} == {
        "midlayer",
        "layers",
        "model_midlayer",
        "model_layers",
        "midlayer_n",
    }
    assert {o["layers"] for o in llama} == {1, 2, 3}
    assert {o["config"] for o in llama} == {"flat", "speculators", "eagle"}
    levels = {(name, level[0]) for o in llama for name, level in o["flags"].items()}
    for flag in loader_corpus.NORM_FLAGS:
        assert {(flag, "top"), (flag, "eagle_config"), (flag, "both")} <= levels, flag
    for flag, keys in (("fc_norm", "fc_norm_keys"), ("norm_before_fc", "input_norm_key")):
        with_flag = [o for o in llama if o["flags"].get(flag, [None, False])[1]]
        assert {o[keys] for o in with_flag} == {True, False}, f"{flag} with and without its tensors"
        assert any(o[keys] for o in llama if flag not in o["flags"]), f"{keys} without {flag}"
    for opt, values in {
        "tie": {True, False},
        "t2d": {True, False},
        "embed": {True, False},
        "lm_head": {True, False},
        "qk_norm": {True, False},
        "d2t": {"offsets", "absolute", "zeros", "none"},
        "draft_vocab": {"v", "full", "absent", "null"},
    }.items():
        assert {o[opt] for o in llama} == values, opt
    assert any(o["extra"] for o in llama)
    assert {o["model_type"] for o in mla} == {"deepseek_v3", "deepseek_v2"}
    assert {o["prefix"] for o in mla} >= {"layers.0.", "midlayer.", "model.layers.0."}
    assert any(o["fused"] for o in mla) and any(o["drop"] for o in mla)
    demo = {e["name"] for e in outcome["manifest"] if e["kind"] == "demo"}
    assert demo == {f"demo_{p.name}" for p in loader_corpus.DEMO_DRAFTERS.iterdir() if p.is_dir()}
