"""The drafter corpus of ``make test-loaders``: tiny EAGLE-3 checkpoints (config.json +
model.safetensors) that every engine's real loader and the project's simulation both judge.

Three sources, all deterministic:
- every demo drafter under data/demo/drafters (copied as ``demo_<name>``);
- named variants, one per case the engine tables tell apart (``named_*``, ``mla_*``);
- property-generated drafters (``fuzz_NNNN``): seeded random combinations of the same options —
  key spellings (``midlayer``, ``layers.N``, ``model.``-prefixed, TRT-LLM's ``midlayer.N``, unknown
  keys), 1-3 layers, norm flags at the top level and in ``eagle_config`` with and without their
  tensors, tied and untied heads, with and without ``d2t``/``t2d``/``embed_tokens``/``lm_head``,
  flat, speculators and SafeAILab configs, Qwen3 q/k norms and MLA (Kimi-K2.5 / DeepSeek) drafters.

Tensors are random (seeded) and tiny (H=128, 4 heads of 32, I=256, V=512, v=256: ~1 MB a drafter);
norm weights are 1 + noise, so no tensor ever holds the harnesses' sentinel values.

    .venv/bin/python tests/loaders/loader_corpus.py OUT_DIR [--fuzz N] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

H, NH, NKV, HD, INTER, V, v = 128, 4, 2, 32, 256, 512, 256
TARGET_LAYERS = 8  # the tiny target the drafters claim to serve
ROOT = Path(__file__).resolve().parents[2]
DEMO_DRAFTERS = ROOT / "data" / "demo" / "drafters"
DEFAULT_FUZZ = 300
NORM_FLAGS = ("fc_norm", "norm_before_fc", "norm_output", "norm_before_residual")

Tensors = dict[str, torch.Tensor]

LLAMA: dict[str, Any] = {
    "layout": "midlayer",  # midlayer | layers | model_midlayer | model_layers | midlayer_n
    "layers": 1,
    "config": "flat",  # flat | speculators | eagle (SafeAILab: architectures LlamaForCausalLM)
    "arch": None,  # override architectures[0] of a flat config
    "aux_ids": None,
    "aux_level": "eagle_config",  # eagle_config | top | both
    "num_aux": None,  # top-level num_aux_hidden_states
    "use_aux": None,  # eagle_config.use_aux_hidden_state
    "flags": {},  # norm flag -> (level, value); level top | eagle_config | both
    "fc_norm_keys": False,
    "aux_norm_keys": False,  # legacy aux_norm_low/mid/high (+ use_aux_norm when flagged)
    "input_norm_key": False,
    "bias": False,  # config bias: true
    "attention_bias": False,
    "fc_bias_key": False,
    "tie": False,
    "draft_vocab": "v",  # v | full (== V) | absent | null
    "d2t": "offsets",  # offsets | absolute | zeros | none
    "t2d": True,
    "embed": False,
    "lm_head": True,
    "target_hidden": None,  # None | 256 | "null"
    "extra": (),
    "qk_norm": False,  # Qwen3: model_type qwen3 and q_norm/k_norm keys
    "hidden_norm_all": False,  # hidden_norm in every layer (speculators writes it in layer 0 only)
    "dtype": "float32",
}

MLA: dict[str, Any] = {
    "prefix": "layers.0.",
    "layers": 1,
    "model_type": "deepseek_v3",  # Kimi-K2.5 drafters; vLLM wants deepseek_v2
    "fused": False,
    "drop": (),
    "extra": (),
    "fc_norm": False,
    "input_norm": False,
    "aux_ids": (1, 3, 5),
    "aux_level": "eagle_config",
    "draft_vocab": "v",
    "d2t": True,
    "t2d": True,
    "embed": False,
}


def _rand(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g) * 0.02


def _norm(g: torch.Generator, n: int) -> torch.Tensor:
    return 1.0 + torch.rand(n, generator=g) * 0.01


def _vocab(o: dict[str, Any], g: torch.Generator, t: Tensors, top: dict[str, Any]) -> int:
    """Head rows, d2t/t2d and draft_vocab_size for the vocabulary options; returns the head rows."""
    rows = v if o["draft_vocab"] == "v" else V
    if o["draft_vocab"] in ("v", "full"):
        top["draft_vocab_size"] = rows
    elif o["draft_vocab"] == "null":
        top["draft_vocab_size"] = None
    sel = torch.sort(torch.randperm(V, generator=g)[:rows]).values
    d2t = o["d2t"]
    if d2t is True or d2t == "offsets":
        t["d2t"] = (sel - torch.arange(rows)).to(torch.int64)
    elif d2t == "absolute":
        t["d2t"] = sel.to(torch.int64)
    elif d2t == "zeros":
        t["d2t"] = torch.zeros(rows, dtype=torch.int64)
    if o["t2d"]:
        mask = torch.zeros(V, dtype=torch.bool)
        mask[sel] = True
        t["t2d"] = mask
    return rows


def _extra(g: torch.Generator, name: str, rows: int) -> torch.Tensor:
    """A key no drafter class of the corpus' configs expects; the speculators trainer's own extras
    get their real shapes (a verifier copy is a real parameter of speculators' model)."""
    if name == "verifier_norm.weight":
        return _norm(g, H)
    if name == "verifier_lm_head.weight":
        return _rand(g, rows, H)
    return _rand(g, 4)


def _set_flag(top: dict[str, Any], nested: dict[str, Any], name: str, level: str, value: object) -> None:
    if level in ("top", "both"):
        top[name] = value
    if level in ("eagle_config", "both"):
        nested[name] = value


def build_llama(opts: dict[str, Any], seed: int) -> tuple[dict[str, Any], Tensors]:
    o = {**LLAMA, **opts}
    g = torch.Generator().manual_seed(seed)
    ht = o["target_hidden"] if isinstance(o["target_hidden"], int) else H
    k = o["num_aux"] or (len(o["aux_ids"]) if o["aux_ids"] else 3)
    t: Tensors = {"fc.weight": _rand(g, H, k * ht)}
    if o["bias"] or o["fc_bias_key"]:
        t["fc.bias"] = _rand(g, H)
    if o["fc_norm_keys"]:
        for j in range(k):
            t[f"fc_norm.{j}.weight"] = _norm(g, ht)
    if o["aux_norm_keys"]:
        for name in ("aux_norm_low", "aux_norm_mid", "aux_norm_high")[:k]:
            t[f"{name}.weight"] = _norm(g, ht)
    if o["input_norm_key"]:
        t["input_norm.weight"] = _norm(g, k * ht)
    for i in range(o["layers"]):
        p = _layer_prefix(o["layout"], i)
        width = 2 * H if i == 0 else H
        t[p + "self_attn.q_proj.weight"] = _rand(g, NH * HD, width)
        t[p + "self_attn.k_proj.weight"] = _rand(g, NKV * HD, width)
        t[p + "self_attn.v_proj.weight"] = _rand(g, NKV * HD, width)
        t[p + "self_attn.o_proj.weight"] = _rand(g, H, NH * HD)
        if o["qk_norm"]:
            t[p + "self_attn.q_norm.weight"] = _norm(g, HD)
            t[p + "self_attn.k_norm.weight"] = _norm(g, HD)
        t[p + "mlp.gate_proj.weight"] = _rand(g, INTER, H)
        t[p + "mlp.up_proj.weight"] = _rand(g, INTER, H)
        t[p + "mlp.down_proj.weight"] = _rand(g, H, INTER)
        t[p + "input_layernorm.weight"] = _norm(g, H)
        t[p + "post_attention_layernorm.weight"] = _norm(g, H)
        if i == 0 or o["hidden_norm_all"]:
            t[p + "hidden_norm.weight"] = _norm(g, H)
    t["norm.weight"] = _norm(g, H)
    top: dict[str, Any] = {}
    rows = _vocab(o, g, t, top)
    if o["lm_head"]:
        t["lm_head.weight"] = _rand(g, rows, H)
    if o["embed"]:
        t["embed_tokens.weight"] = _rand(g, V, H)
    for name in o["extra"]:
        t[name] = _extra(g, name, rows)
    dtype = getattr(torch, o["dtype"])
    t = {n: (x.to(dtype) if x.is_floating_point() else x).contiguous() for n, x in t.items()}

    layer_cfg: dict[str, Any] = {
        "model_type": "qwen3" if o["qk_norm"] else "llama",
        "hidden_size": H,
        "intermediate_size": INTER,
        "num_attention_heads": NH,
        "num_key_value_heads": NKV,
        "head_dim": HD,
        "num_hidden_layers": o["layers"],
        "vocab_size": V,
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": bool(o["tie"]),
        "bos_token_id": 0,
        "eos_token_id": 1,
        "torch_dtype": o["dtype"],
    }
    if o["attention_bias"]:
        layer_cfg["attention_bias"] = True
    nested: dict[str, Any] = {}
    if o["aux_ids"] is not None:
        _set_flag(top, nested, "eagle_aux_hidden_state_layer_ids", o["aux_level"], list(o["aux_ids"]))
    if o["use_aux"] is not None:
        nested["use_aux_hidden_state"] = o["use_aux"]
    for name, (level, value) in o["flags"].items():
        _set_flag(top, nested, name, level, value)
    if o["bias"]:
        top["bias"] = True
    if o["num_aux"]:
        top["num_aux_hidden_states"] = o["num_aux"]
    if o["target_hidden"] == "null":
        top["target_hidden_size"] = None
    elif isinstance(o["target_hidden"], int):
        top["target_hidden_size"] = o["target_hidden"]

    if o["config"] == "speculators":
        cfg: dict[str, Any] = {
            "architectures": ["Eagle3Speculator"],
            "speculators_model_type": "eagle3",
            "speculators_version": "0.9.0",
            "transformer_layer_config": layer_cfg,
            "speculators_config": {
                "algorithm": "eagle3",
                "default_proposal_method": "greedy",
                "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
                "verifier": {"name_or_path": "tiny-target", "architectures": ["LlamaForCausalLM"]},
            },
            "torch_dtype": o["dtype"],
            # speculators configs are flat pydantic models: nested settings have no home there
            **top,
            **{key: val for key, val in nested.items() if key in NORM_FLAGS},
        }
        if o["aux_ids"] is not None:
            cfg["eagle_aux_hidden_state_layer_ids"] = list(o["aux_ids"])
    else:
        arch = o["arch"] or ("LlamaForCausalLM" if o["config"] == "eagle" else "LlamaForCausalLMEagle3")
        cfg = {"architectures": [arch], **layer_cfg, **top}
        if nested:
            cfg["eagle_config"] = nested
    return cfg, t


def _layer_prefix(layout: str, i: int) -> str:
    if layout == "midlayer":
        return "midlayer." if i == 0 else f"layers.{i}."
    if layout == "midlayer_n":
        return f"midlayer.{i}."
    if layout == "layers":
        return f"layers.{i}."
    if layout == "model_midlayer":
        return "model.midlayer." if i == 0 else f"model.layers.{i}."
    if layout == "model_layers":
        return f"model.layers.{i}."
    raise ValueError(layout)


# MLA dimensions: q_lora, kv_lora, nope, rope and value head dims
QL, KVL, NOPE, ROPE, VD = 64, 32, 16, 16, 16


def build_mla(opts: dict[str, Any], seed: int) -> tuple[dict[str, Any], Tensors]:
    """A Kimi-K2.5 style MLA drafter (SGLang ``Eagle3DeepseekV2ForCausalLM``)."""
    o = {**MLA, **opts}
    g = torch.Generator().manual_seed(seed)
    k = len(o["aux_ids"]) if o["aux_ids"] else 3
    t: Tensors = {"fc.weight": _rand(g, H, k * H)}
    for i in range(o["layers"]):
        p = o["prefix"] if i == 0 else f"layers.{i}."
        width = 2 * H if i == 0 else H
        if o["fused"]:
            t[p + "self_attn.fused_qkv_a_proj_with_mqa.weight"] = _rand(g, QL + KVL + ROPE, width)
        else:
            t[p + "self_attn.q_a_proj.weight"] = _rand(g, QL, width)
            t[p + "self_attn.kv_a_proj_with_mqa.weight"] = _rand(g, KVL + ROPE, width)
        t[p + "self_attn.q_a_layernorm.weight"] = _norm(g, QL)
        t[p + "self_attn.q_b_proj.weight"] = _rand(g, NH * (NOPE + ROPE), QL)
        t[p + "self_attn.kv_a_layernorm.weight"] = _norm(g, KVL)
        t[p + "self_attn.kv_b_proj.weight"] = _rand(g, NH * (NOPE + VD), KVL)
        t[p + "self_attn.o_proj.weight"] = _rand(g, H, NH * VD)
        t[p + "mlp.gate_proj.weight"] = _rand(g, INTER, H)
        t[p + "mlp.up_proj.weight"] = _rand(g, INTER, H)
        t[p + "mlp.down_proj.weight"] = _rand(g, H, INTER)
        for n in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
            t[p + n + ".weight"] = _norm(g, H)
    t["norm.weight"] = _norm(g, H)
    top: dict[str, Any] = {}
    rows = _vocab(o, g, t, top)
    t["lm_head.weight"] = _rand(g, rows, H)
    if o["embed"]:
        t["embed_tokens.weight"] = _rand(g, V, H)
    if o["fc_norm"]:
        for j in range(k):
            t[f"fc_norm.{j}.weight"] = _norm(g, H)
        top["fc_norm"] = True
    if o["input_norm"]:
        t["input_norm.weight"] = _norm(g, k * H)
        top["norm_before_fc"] = True
    for name in o["extra"]:
        t[name] = _extra(g, name, rows)
    for name in o["drop"]:
        t.pop(name.replace("{p}", o["prefix"]), None)
    cfg: dict[str, Any] = {
        "architectures": ["Eagle3DeepseekV2ForCausalLM"],
        "model_type": o["model_type"],
        "hidden_size": H,
        "intermediate_size": INTER,
        "moe_intermediate_size": 64,
        "num_attention_heads": NH,
        "num_key_value_heads": NH,
        "q_lora_rank": QL,
        "kv_lora_rank": KVL,
        "qk_nope_head_dim": NOPE,
        "qk_rope_head_dim": ROPE,
        "v_head_dim": VD,
        "num_hidden_layers": o["layers"],
        "vocab_size": V,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "rope_theta": 50000.0,
        # SGLang's CPU rope factory accepts only deepseek_yarn for this class
        "rope_scaling": {
            "rope_type": "deepseek_yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 1024,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
        "torch_dtype": "float32",
        **top,
    }
    if o["aux_ids"]:
        nested: dict[str, Any] = {}
        _set_flag(cfg, nested, "eagle_aux_hidden_state_layer_ids", o["aux_level"], list(o["aux_ids"]))
        if nested:
            cfg["eagle_config"] = {**nested, "use_aux_hidden_state": True}
    return cfg, t


# One entry per case the tables tell apart; the fuzz below draws combinations of the same options.
NAMED: dict[str, dict[str, Any]] = {
    "specforge_midlayer": {},
    "specforge_layers0": {"layout": "layers"},
    "model_prefixed_midlayer": {"layout": "model_midlayer"},
    "model_prefixed_layers0": {"layout": "model_layers"},
    "eagle_arch_llama": {"config": "eagle"},
    "speculators_layers0": {"config": "speculators", "layout": "layers", "embed": True, "aux_ids": [2, 4, 5]},
    "speculators_no_norm_before_residual": {
        "config": "speculators",
        "layout": "layers",
        "aux_ids": [2, 4, 5],
    },
    "speculators_norm_before_residual": {
        "config": "speculators",
        "layout": "layers",
        "flags": {"norm_before_residual": ("top", True)},
    },
    "speculators_qwen3": {"config": "speculators", "layout": "layers", "qk_norm": True, "aux_ids": [2, 4, 5]},
    "speculators_qwen3_aux4": {
        "config": "speculators",
        "layout": "layers",
        "qk_norm": True,
        "aux_ids": [1, 3, 5, 6],
    },
    "speculators_aux4": {"config": "speculators", "layout": "layers", "aux_ids": [1, 3, 5, 6]},
    "speculators_2layers": {"config": "speculators", "layout": "layers", "layers": 2},
    "speculators_3layers_fc_norm": {
        "config": "speculators",
        "layout": "layers",
        "layers": 3,
        "flags": {"fc_norm": ("top", True)},
        "fc_norm_keys": True,
    },
    "speculators_norm_before_fc": {
        "config": "speculators",
        "layout": "layers",
        "flags": {"norm_before_fc": ("top", True)},
        "input_norm_key": True,
    },
    "speculators_tied": {"config": "speculators", "layout": "layers", "tie": True},
    "speculators_no_d2t": {"config": "speculators", "layout": "layers", "d2t": "none", "t2d": False},
    "layers2": {"layout": "layers", "layers": 2},
    "layers3": {"layout": "layers", "layers": 3},
    "layers2_hidden_norm_all": {"layout": "layers", "layers": 2, "hidden_norm_all": True},
    "layers2_midlayer_n": {"layout": "midlayer_n", "layers": 2},
    "layers2_mixed": {"layout": "midlayer", "layers": 2},
    "layers2_model_prefixed": {"layout": "model_layers", "layers": 2},
    "fc_norm_top": {"flags": {"fc_norm": ("top", True)}, "fc_norm_keys": True},
    "fc_norm_nested": {"flags": {"fc_norm": ("eagle_config", True)}, "fc_norm_keys": True},
    "fc_norm_keys_no_flag": {"fc_norm_keys": True},
    "fc_norm_flag_no_keys": {"flags": {"fc_norm": ("top", True)}},
    "aux_norm_legacy": {"flags": {"use_aux_norm": ("top", True)}, "aux_norm_keys": True},
    "norm_before_fc_top": {"flags": {"norm_before_fc": ("top", True)}, "input_norm_key": True},
    "norm_before_fc_nested": {"flags": {"norm_before_fc": ("eagle_config", True)}, "input_norm_key": True},
    "norm_before_fc_flag_no_key": {"flags": {"norm_before_fc": ("top", True)}},
    "input_norm_no_flag": {"input_norm_key": True},
    "norm_output_top": {"flags": {"norm_output": ("top", True)}},
    "norm_output_nested": {"flags": {"norm_output": ("eagle_config", True)}},
    "norm_before_residual_top": {"flags": {"norm_before_residual": ("top", True)}},
    "norm_before_residual_nested": {"flags": {"norm_before_residual": ("eagle_config", True)}},
    "aux4_nested": {"aux_ids": [1, 3, 5, 6]},
    "aux4_top": {"aux_ids": [1, 3, 5, 6], "aux_level": "top"},
    "aux3_nested": {"aux_ids": [1, 3, 4]},
    "aux3_top": {"aux_ids": [2, 4, 5], "aux_level": "top"},
    "num_aux4": {"num_aux": 4},
    "use_aux_false": {"use_aux": False},
    "bias": {"bias": True},
    "attention_bias": {"attention_bias": True},
    "fc_bias_no_flag": {"fc_bias_key": True},
    "tied": {"tie": True},
    "full_vocab": {"draft_vocab": "full"},
    "no_draft_vocab": {"draft_vocab": "absent"},
    "null_draft_vocab": {"draft_vocab": "null", "lm_head": False},
    "no_lm_head": {"lm_head": False},
    "d2t_absolute": {"d2t": "absolute"},
    "d2t_missing": {"d2t": "none"},
    "d2t_zeros": {"d2t": "zeros"},
    "no_t2d": {"t2d": False},
    "with_embed": {"embed": True},
    "target_hidden_256": {"target_hidden": 256, "embed": True},
    "target_hidden_null": {"target_hidden": "null"},
    "extra_keys": {"extra": ("bogus.weight", "verifier_lm_head.weight", "model.foo.bias")},
    "qwen3_qk_norm_layers": {"layout": "layers", "qk_norm": True},
    "qwen3_qk_norm_eagle3_arch": {"layout": "layers", "qk_norm": True, "arch": "Eagle3Qwen3ForCausalLM"},
    "bf16": {"dtype": "bfloat16"},
}

NAMED_MLA: dict[str, dict[str, Any]] = {
    "kimi_layers0": {},
    "kimi_midlayer": {"prefix": "midlayer."},
    "kimi_model_prefixed": {"prefix": "model.layers.0."},
    "kimi_model_midlayer": {"prefix": "model.midlayer."},
    "kimi_fused_key": {"fused": True},
    "kimi_no_kv_a": {"drop": ("{p}self_attn.kv_a_proj_with_mqa.weight",)},
    "kimi_no_q_a": {"drop": ("{p}self_attn.q_a_proj.weight",)},
    "kimi_extra": {"extra": ("bogus.weight",)},
    "kimi_fc_norm": {"fc_norm": True},
    "kimi_input_norm": {"input_norm": True},
    "kimi_aux4": {"aux_ids": (1, 3, 5, 6)},
    "kimi_aux_top": {"aux_level": "top"},
    "kimi_no_draft_vocab": {"draft_vocab": "absent"},
    "kimi_2layers": {"layers": 2},
    "kimi_with_embed": {"embed": True},
    "kimi_no_d2t": {"d2t": False, "t2d": False},
    "dsv2_layers0": {"model_type": "deepseek_v2"},
    "dsv2_midlayer": {"model_type": "deepseek_v2", "prefix": "midlayer."},
    "dsv2_model_prefixed": {"model_type": "deepseek_v2", "prefix": "model.layers.0."},
    "dsv2_fused_key": {"model_type": "deepseek_v2", "fused": True},
    "dsv2_2layers": {"model_type": "deepseek_v2", "layers": 2, "prefix": "layers.0."},
    "dsv2_fc_norm": {"model_type": "deepseek_v2", "fc_norm": True},
}


def fuzz_llama(rng: random.Random) -> dict[str, Any]:
    o: dict[str, Any] = {
        "layout": rng.choices(
            ["midlayer", "layers", "model_midlayer", "model_layers", "midlayer_n"],
            weights=[30, 40, 8, 10, 12],
        )[0],
        "layers": rng.choice([1, 1, 1, 2, 2, 3]),
        "config": rng.choices(["flat", "speculators", "eagle"], weights=[7, 10, 1])[0],
    }
    if rng.random() < 0.5:
        o["aux_ids"] = sorted(rng.sample(range(TARGET_LAYERS), rng.choice([3, 3, 4])))
        o["aux_level"] = rng.choice(["eagle_config", "top", "both"])
    if rng.random() < 0.08:
        o["num_aux"] = rng.choice([3, 4])
    flags: dict[str, tuple[str, bool]] = {}
    for name in NORM_FLAGS:
        if rng.random() < 0.25:
            flags[name] = (rng.choice(["top", "top", "eagle_config", "both"]), rng.random() < 0.8)
    if rng.random() < 0.05:
        flags["use_aux_norm"] = ("top", True)
    o["flags"] = flags

    def tensors_for(flag: str) -> bool:  # usually the flag and its tensors agree; sometimes not
        on = flag in flags and flags[flag][1]
        return on if rng.random() < 0.85 else not on

    o["fc_norm_keys"] = tensors_for("fc_norm")
    o["input_norm_key"] = tensors_for("norm_before_fc")
    o["aux_norm_keys"] = "use_aux_norm" in flags and rng.random() < 0.8
    o["use_aux"] = rng.choice([None] * 8 + [False, True])
    o["bias"] = rng.random() < 0.1
    o["attention_bias"] = rng.random() < 0.05
    o["fc_bias_key"] = not o["bias"] and rng.random() < 0.05
    o["tie"] = rng.random() < 0.12
    o["draft_vocab"] = rng.choice(["v"] * 14 + ["full", "full", "absent", "null"])
    o["d2t"] = rng.choice(["offsets"] * 6 + ["absolute", "none", "zeros"])
    o["t2d"] = rng.random() < 0.85
    o["embed"] = rng.random() < 0.3
    o["lm_head"] = rng.random() < 0.9
    o["target_hidden"] = rng.choice([None] * 10 + ["null", 256])
    if o["target_hidden"] == 256:
        o["embed"] = True
    unknown = ["bogus.weight", "verifier_norm.weight", "verifier_lm_head.weight", "model.foo.bias"]
    o["extra"] = tuple(rng.sample(unknown, rng.choices([0, 1, 2], weights=[85, 10, 5])[0]))
    o["qk_norm"] = rng.random() < 0.12
    if o["qk_norm"] and o["config"] == "flat" and rng.random() < 0.5:
        o["arch"] = "Eagle3Qwen3ForCausalLM"
    o["hidden_norm_all"] = o["layers"] > 1 and rng.random() < 0.3
    o["dtype"] = rng.choice(["float32", "float32", "bfloat16"])
    return o


def fuzz_mla(rng: random.Random) -> dict[str, Any]:
    drop = rng.choice(
        [(), (), (), ("{p}self_attn.kv_a_proj_with_mqa.weight",), ("{p}self_attn.q_a_proj.weight",)]
    )
    return {
        "prefix": rng.choice(["layers.0.", "layers.0.", "midlayer.", "model.layers.0.", "model.midlayer."]),
        "layers": rng.choice([1, 1, 1, 2]),
        "model_type": rng.choice(["deepseek_v3", "deepseek_v2"]),
        "fused": rng.random() < 0.15,
        "drop": drop,
        "extra": tuple(rng.sample(["bogus.weight", "verifier_norm.weight"], rng.choice([0, 0, 1]))),
        "fc_norm": rng.random() < 0.25,
        "input_norm": rng.random() < 0.15,
        "aux_ids": tuple(sorted(rng.sample(range(TARGET_LAYERS), rng.choice([3, 3, 4])))),
        "aux_level": rng.choice(["eagle_config", "eagle_config", "top"]),
        "draft_vocab": rng.choice(["v"] * 6 + ["full", "absent"]),
        "d2t": rng.random() < 0.85,
        "t2d": rng.random() < 0.85,
        "embed": rng.random() < 0.2,
    }


def _plain(x: Any) -> Any:
    if isinstance(x, tuple):
        return [_plain(i) for i in x]
    if isinstance(x, dict):
        return {k: _plain(val) for k, val in x.items()}
    return x


def write_drafter(out: Path, name: str, kind: str, opts: dict[str, Any], seed: int) -> dict[str, Any]:
    cfg, tensors = (build_mla if kind == "mla" else build_llama)(opts, seed)
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    save_file(tensors, str(d / "model.safetensors"))
    entry = {"name": name, "kind": kind, "seed": seed, "opts": _plain(opts)}
    (d / "variant.json").write_text(json.dumps(entry) + "\n")
    return entry


def write_corpus(
    out: Path, fuzz: int = DEFAULT_FUZZ, seed: int = 0, demo: Path = DEMO_DRAFTERS
) -> list[dict]:
    """Write the whole corpus under ``out`` (emptied first); returns one manifest entry per drafter."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    manifest: list[dict[str, Any]] = []
    for src in sorted(p for p in demo.iterdir() if (p / "config.json").is_file()):
        shutil.copytree(src, out / f"demo_{src.name}")
        manifest.append({"name": f"demo_{src.name}", "kind": "demo", "seed": None, "opts": {}})
    n = 0
    for name, opts in NAMED.items():
        manifest.append(write_drafter(out, f"named_{name}", "llama", opts, 1000 + n))
        n += 1
    for name, opts in NAMED_MLA.items():
        manifest.append(write_drafter(out, f"mla_{name}", "mla", opts, 1000 + n))
        n += 1
    rng = random.Random(seed)
    for i in range(fuzz):
        kind = "mla" if rng.random() < 0.12 else "llama"
        opts = fuzz_mla(rng) if kind == "mla" else fuzz_llama(rng)
        manifest.append(write_drafter(out, f"fuzz_{i:04d}", kind, opts, 5000 + i))
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Write the loader-test drafter corpus.")
    ap.add_argument("out", type=Path)
    ap.add_argument("--fuzz", type=int, default=DEFAULT_FUZZ)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    manifest = write_corpus(a.out, a.fuzz, a.seed)
    print(f"wrote {len(manifest)} drafters to {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
