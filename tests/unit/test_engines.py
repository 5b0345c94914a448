"""The engine rule tables and the load simulator, directly: tables are checked when they are
built, and ``simulate_load`` gives each engine's documented fate on small built checkpoints."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
from builders import DrafterSpec, build_drafter

from eagle3_forensics.engines import ENGINES, resolve_release
from eagle3_forensics.engines.rules import (
    CONDITION_TOKENS,
    AuxSource,
    EngineRules,
    Fill,
    KeyRule,
    ParamRule,
    Prefix,
    UnknownKeys,
    when_tokens,
)
from eagle3_forensics.engines.simulate import LoadReport, conditions, simulate_load
from eagle3_forensics.io.checkpoint import open_checkpoint
from eagle3_forensics.io.config import DrafterConfig

# -- the tables -----------------------------------------------------------------------------------


def test_constants_are_str_enums_with_their_json_values() -> None:
    assert json.dumps([Fill.TARGET, UnknownKeys.REJECT, Prefix.AS_IS]) == '["target", "reject", "as_is"]'
    assert f"{Fill.TARGET}" == "target" and Fill.TARGET == "target"


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_every_table_uses_known_condition_tokens(engine: str) -> None:
    rules = ENGINES[engine]
    every: list[KeyRule | ParamRule] = [
        *rules.params,
        *rules.skip,
        *rules.consume,
        *rules.drop,
        *rules.renames,
        *rules.fuse,
    ]
    used = {t for r in every for t, _ in when_tokens(r.when)}
    assert used <= set(CONDITION_TOKENS)
    assert isinstance(rules.prefix, Prefix) and isinstance(rules.unknown_keys, UnknownKeys)
    assert all(isinstance(p.filled_by, Fill) for p in rules.params)


def test_the_simulator_computes_exactly_the_condition_tokens(tmp_path: Path) -> None:
    ckpt = open_checkpoint(build_drafter(tmp_path / "d"))
    for rules in ENGINES.values():
        assert set(conditions(rules, DrafterConfig(ckpt.config), set(ckpt.tensors))) == set(CONDITION_TOKENS)


@pytest.mark.parametrize(
    "build",
    [
        lambda: ParamRule("lm_head.weight", when="!tieed"),
        lambda: ParamRule("lm_head.weight", when="bias & reduced_vocabulary"),
        lambda: KeyRule(r"^t2d$", when="never"),
    ],
)
def test_a_mistyped_when_token_fails_when_the_rule_is_built(build: object) -> None:
    with pytest.raises(ValueError, match="unknown condition"):
        build()  # type: ignore[operator]


def test_a_bad_regex_or_replacement_fails_when_the_rule_is_built() -> None:
    with pytest.raises(ValueError, match=r"unterminated|missing"):
        KeyRule(r"^midlayer\.(", "layers.0.")
    with pytest.raises(ValueError, match="invalid group reference"):
        KeyRule(r"^midlayer\.", r"layers.\2.")
    assert KeyRule(r"^(q|k)_proj", r"\1_proj").regex.search("k_proj")


@pytest.mark.parametrize(
    "change",
    [
        {"prefix": "model_first"},
        {"unknown_keys": "ignore"},
        {"config_styles": frozenset({"flat", "yaml"})},
        {"d2t_encoding": "offset"},
        {"missing_draft_vocab_size": "target"},
        {"norm_flags": frozenset({"norm_befor_fc"})},
    ],
)
def test_a_value_outside_its_enum_fails_when_the_table_is_built(change: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="EngineRules 'vllm'"):
        dataclasses.replace(ENGINES["vllm"], **change)  # type: ignore[arg-type]


def test_a_bad_aux_level_fails_when_built() -> None:
    with pytest.raises(ValueError):
        AuxSource("nested")  # type: ignore[arg-type]


def test_a_rebuilt_table_is_equal_to_the_original() -> None:
    for rules in ENGINES.values():
        assert dataclasses.replace(rules) == rules
        assert isinstance(dataclasses.replace(rules), EngineRules)


# -- the simulator on built checkpoints ----------------------------------------------------------


def _load(tmp_path: Path, engine: str, **spec: object) -> LoadReport:
    """``engine`` is an engine spec: ``sglang==0.5.11`` judges by that release's table."""
    path = build_drafter(tmp_path / "d", DrafterSpec(**spec))  # type: ignore[arg-type]
    return simulate_load(resolve_release(engine), open_checkpoint(path))


def _fates(report: LoadReport) -> dict[str, str]:
    return {f.key: f.action for f in report.fates}


def test_sglang_fuses_projections_and_takes_the_embedding_from_the_target(tmp_path: Path) -> None:
    r = _load(tmp_path / "old", "sglang==0.5.11")
    fates = _fates(r)
    assert r.config_readable and r.unfilled == []
    assert fates["midlayer.self_attn.q_proj.weight"] == "fused"
    assert fates["midlayer.self_attn.o_proj.weight"] == "loaded"
    new = _fates(_load(tmp_path / "new", "sglang"))  # 0.5.12+: the legacy map midlayer -> layers.0
    assert new["midlayer.self_attn.o_proj.weight"] == "renamed"
    assert (fates["d2t"], fates["t2d"]) == ("consumed", "skipped")
    assert r.from_target == ["model.embed_tokens.weight"]


def test_sglang_drops_a_layers_layout_silently_until_0_5_12(tmp_path: Path) -> None:
    r = _load(tmp_path / "old", "sglang==0.5.11", layout="layers")
    assert _fates(r)["layers.0.self_attn.o_proj.weight"] == "dropped"
    assert "model.midlayer.self_attn.o_proj.weight" in r.unfilled
    new = _load(tmp_path / "new", "sglang==0.5.12", layout="layers")
    assert _fates(new)["layers.0.self_attn.o_proj.weight"] == "loaded" and new.unfilled == []


def test_sglang_overwrites_a_stored_embedding_unless_the_hidden_sizes_differ(tmp_path: Path) -> None:
    assert _fates(_load(tmp_path / "a", "sglang", embed="target"))["embed_tokens.weight"] == "overwritten"
    differs = _load(tmp_path / "b", "sglang", embed="random", target_hidden_size=48)
    assert differs.conditions["hidden_differs"] and _fates(differs)["embed_tokens.weight"] == "loaded"


def test_sglang_ties_lm_head_to_the_embedding_when_asked(tmp_path: Path) -> None:
    r = _load(tmp_path, "sglang", tie_word_embeddings=True)
    assert r.conditions["tied"] and _fates(r)["lm_head.weight"] == "dropped"


def test_vllm_renames_midlayer_and_rejects_unknown_keys(tmp_path: Path) -> None:
    r = _load(tmp_path / "a", "vllm", extra_keys={"bogus.weight": ((2,), torch.float32)})
    fates = _fates(r)
    assert fates["midlayer.self_attn.o_proj.weight"] == "renamed"
    assert fates["midlayer.self_attn.q_proj.weight"] == "fused"
    assert fates["bogus.weight"] == "rejected"
    assert not r.conditions["tied"]  # vLLM does not honour tie_word_embeddings
    assert (
        _fates(_load(tmp_path / "b", "vllm", layout="layers"))["layers.0.self_attn.o_proj.weight"] == "loaded"
    )


def test_vllm_reads_input_norm_only_with_norm_before_fc(tmp_path: Path) -> None:
    on = _load(tmp_path / "on", "vllm", norm_before_fc=True)
    off = _load(tmp_path / "off", "vllm", norm_before_fc=False, input_norm_key=True)
    assert _fates(on)["input_norm.weight"] == "loaded"
    assert _fates(off)["input_norm.weight"] == "skipped"


def test_eagle_loads_names_as_is_and_drops_the_rest(tmp_path: Path) -> None:
    r = _load(tmp_path / "a", "eagle")
    assert set(_fates(r).values()) == {"loaded"}
    layers = _load(tmp_path / "b", "eagle", layout="layers")
    assert _fates(layers)["layers.0.self_attn.o_proj.weight"] == "dropped"
    assert "midlayer.self_attn.o_proj.weight" in layers.unfilled


def test_speculators_reads_only_its_own_layout(tmp_path: Path) -> None:
    flat = _load(tmp_path / "a", "speculators")
    assert not flat.config_readable
    assert _fates(flat)["midlayer.self_attn.o_proj.weight"] == "warned"
    ours = _load(tmp_path / "b", "speculators", config_style="speculators", layout="layers")
    assert ours.config_readable and ours.unfilled == []
    assert _fates(ours)["layers.0.self_attn.o_proj.weight"] == "loaded"
