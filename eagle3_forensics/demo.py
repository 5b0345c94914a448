"""Deterministic demo data: a tiny Llama target plus healthy and broken EAGLE-3 drafters.

``make_demo(out_dir)`` writes::

    out_dir/
      README.md
      target/                      tiny Hugging Face Llama (8 layers, V=512) + byte-level BPE tokenizer
      drafters/healthy/            SpecForge/EAGLE layout, d2t stored as offsets (correct)
      drafters/speculators_layout/ the same weights in the speculators layout (layers.0.*, embed_tokens)
      drafters/d2t_absolute/       d2t stored as absolute target ids
      drafters/d2t_double_offset/  offset conversion applied twice
      drafters/d2t_missing/        no d2t tensor at all

Every byte is a function of ``seed`` only: running it twice gives identical files. The weights are
random (the accept-rate work replaces them with trained ones); the per-variant construction is kept
in small helpers so that only ``_healthy_tensors`` needs to change for that.

Heavy imports (transformers, tokenizers) happen inside the functions that need them, so importing
this module stays cheap.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
from typing import Any

import torch

# ---------------------------------------------------------------------------------------------
# sizes and names
# ---------------------------------------------------------------------------------------------

VOCAB_SIZE = 512
DRAFT_VOCAB_SIZE = 256
HIDDEN_SIZE = 128
INTERMEDIATE_SIZE = 256
NUM_TARGET_LAYERS = 8
NUM_HEADS = 4
NUM_KV_HEADS = 4
HEAD_DIM = 32
MAX_POSITIONS = 2048
ROPE_THETA = 10000.0
BOS_ID = 0
EOS_ID = 1
#: the first draft-vocabulary entries map to target ids 0..N-1, so ``d2t[:N] == 0`` exactly
N_LEADING_IDENTITY = 20
SPECIAL_TOKENS = ("<s>", "</s>", "<unk>")

TARGET_SUBDIR = "target"
DRAFTERS_SUBDIR = "drafters"
#: speculators' default ``[2, N//2, N-3]`` (input-of-layer indexing) for the 8-layer target
SPECULATORS_AUX_LAYER_IDS = [2, NUM_TARGET_LAYERS // 2, NUM_TARGET_LAYERS - 3]

VARIANTS: tuple[str, ...] = (
    "healthy",
    "speculators_layout",
    "d2t_absolute",
    "d2t_double_offset",
    "d2t_missing",
)

#: finding codes each variant is meant to trigger (empty: nothing should fire)
EXPECTED_FINDINGS: dict[str, tuple[str, ...]] = {
    "healthy": (),
    "speculators_layout": ("KEYS_DROPPED_BY_ENGINE", "PARAMS_UNFILLED"),
    "d2t_absolute": ("D2T_ABSOLUTE",),
    "d2t_double_offset": ("D2T_DOUBLE_OFFSET",),
    "d2t_missing": ("D2T_MISSING",),
}

Tensors = dict[str, torch.Tensor]

# ---------------------------------------------------------------------------------------------
# deterministic helpers
# ---------------------------------------------------------------------------------------------


def _generator(seed: int, stream: int) -> torch.Generator:
    """An independent, seeded CPU generator per purpose (so one change does not shift the others)."""
    g = torch.Generator(device="cpu")
    g.manual_seed(seed * 1_000_003 + stream)
    return g


def _write_json(path: pathlib.Path, obj: dict[str, Any]) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")


def _save_tensors(path: pathlib.Path, tensors: Tensors) -> None:
    from safetensors.torch import save_file

    ordered = {k: tensors[k].contiguous() for k in sorted(tensors)}
    save_file(ordered, str(path), metadata={"format": "pt"})


# ---------------------------------------------------------------------------------------------
# target model + tokenizer
# ---------------------------------------------------------------------------------------------

_SUBJECTS = (
    "the cat",
    "a dog",
    "my friend",
    "the teacher",
    "our model",
    "the drafter",
    "a small bird",
    "the server",
    "this engine",
    "the old man",
    "a student",
    "the robot",
    "her sister",
    "the team",
)
_VERBS = (
    "sees",
    "likes",
    "finds",
    "builds",
    "reads",
    "writes",
    "checks",
    "loads",
    "drafts",
    "accepts",
    "rejects",
    "moves",
    "counts",
    "sorts",
    "maps",
    "trains",
)
_OBJECTS = (
    "the red ball",
    "a long book",
    "every token",
    "the weights",
    "a quiet river",
    "the big tree",
    "some numbers",
    "the offsets",
    "a new table",
    "the green door",
    "two apples",
    "the last layer",
    "a warm bowl of soup",
    "the vocabulary",
    "three small boxes",
)
_TAILS = (
    "today.",
    "again.",
    "in the morning.",
    "very slowly.",
    "with care.",
    "before lunch.",
    "at night.",
    "for the test.",
    "without errors.",
    "on the server.",
    "every day.",
    "quickly!",
    "?",
    "twice.",
)


def _training_sentences(seed: int, n: int = 2000) -> list[str]:
    rng = random.Random(seed)  # noqa: S311 - demo data, not cryptography
    out: list[str] = []
    for i in range(n):
        s = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_TAILS)}"
        if i % 7 == 0:
            s = s.capitalize()
        if i % 11 == 0:
            s += f" {rng.randrange(1000)} {rng.randrange(100)}."
        out.append(s)
    return out


def _build_tokenizer(seed: int) -> Any:
    """Byte-level BPE with exactly ``VOCAB_SIZE`` tokens; ids 0,1,2 = <s>, </s>, <unk>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_training_sentences(seed), trainer=trainer)
    n = tok.get_vocab_size(with_added_tokens=True)
    if n < VOCAB_SIZE:
        tok.add_tokens([f"<x{i}>" for i in range(VOCAB_SIZE - n)])
    n = tok.get_vocab_size(with_added_tokens=True)
    if n != VOCAB_SIZE:
        raise RuntimeError(f"demo tokenizer has {n} tokens, expected {VOCAB_SIZE}")
    for i, name in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(name) != i:
            raise RuntimeError(f"demo tokenizer: {name} is not id {i}")
    return tok


def _write_target(target_dir: pathlib.Path, seed: int) -> Tensors:
    """Write the tiny Llama target + tokenizer; return the target tensors the drafters reuse."""
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=NUM_TARGET_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_KV_HEADS,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=False,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA},
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    if any(p.dtype != torch.float32 for p in model.parameters()):
        raise RuntimeError("demo target must be float32 (torch default dtype was changed?)")
    target_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(target_dir))
    if not (target_dir / "model.safetensors").is_file():
        raise RuntimeError(f"save_pretrained did not write {target_dir / 'model.safetensors'}")

    fast = PreTrainedTokenizerFast(
        tokenizer_object=_build_tokenizer(seed),
        bos_token=SPECIAL_TOKENS[0],
        eos_token=SPECIAL_TOKENS[1],
        unk_token=SPECIAL_TOKENS[2],
    )
    fast.save_pretrained(str(target_dir))

    sd = model.state_dict()
    return {
        "embed_tokens.weight": sd["model.embed_tokens.weight"].detach().clone(),
        "lm_head.weight": sd["lm_head.weight"].detach().clone(),
    }


# ---------------------------------------------------------------------------------------------
# drafters
# ---------------------------------------------------------------------------------------------


def _draft_vocab_ids(seed: int) -> torch.Tensor:
    """Ascending target ids of the draft vocabulary: 0..19, then 236 scattered ids from the rest."""
    g = _generator(seed, 1)
    rest = torch.arange(N_LEADING_IDENTITY, VOCAB_SIZE, dtype=torch.int64)
    picked = rest[torch.randperm(rest.numel(), generator=g)[: DRAFT_VOCAB_SIZE - N_LEADING_IDENTITY]]
    sel = torch.cat([torch.arange(N_LEADING_IDENTITY, dtype=torch.int64), picked])
    return torch.sort(sel).values


def _flat_llama_fields() -> dict[str, Any]:
    return {
        "model_type": "llama",
        "hidden_size": HIDDEN_SIZE,
        "intermediate_size": INTERMEDIATE_SIZE,
        "num_hidden_layers": 1,
        "num_attention_heads": NUM_HEADS,
        "num_key_value_heads": NUM_KV_HEADS,
        "head_dim": HEAD_DIM,
        "vocab_size": VOCAB_SIZE,
        "tie_word_embeddings": False,
        "rms_norm_eps": 1e-6,
        "rope_theta": ROPE_THETA,
        "max_position_embeddings": MAX_POSITIONS,
        "hidden_act": "silu",
        "torch_dtype": "float32",
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
    }


def _specforge_config() -> dict[str, Any]:
    """Flat SpecForge/EAGLE config; no aux-layer field, so every engine uses its own default."""
    fields = _flat_llama_fields()
    cfg: dict[str, Any] = {"architectures": ["LlamaForCausalLMEagle3"]}
    for k, v in fields.items():
        cfg[k] = v
        if k == "vocab_size":
            cfg["draft_vocab_size"] = DRAFT_VOCAB_SIZE
    return cfg


def _speculators_config() -> dict[str, Any]:
    return {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "speculators_version": "0.7.0",
        "speculators_config": {
            "algorithm": "eagle3",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
            "default_proposal_method": "greedy",
            "verifier": {"name_or_path": "data/demo/target", "architectures": ["LlamaForCausalLM"]},
        },
        "transformer_layer_config": _flat_llama_fields(),
        "draft_vocab_size": DRAFT_VOCAB_SIZE,
        "norm_before_residual": False,
        "norm_before_fc": False,
        "fc_norm": False,
        "norm_output": False,
        "target_hidden_size": None,
        "eagle_aux_hidden_state_layer_ids": list(SPECULATORS_AUX_LAYER_IDS),
        "embed_requires_grad": False,
    }


def _healthy_tensors(target: Tensors, seed: int) -> Tensors:
    """SpecForge/EAGLE-named drafter tensors with a correct offset ``d2t``."""
    g = _generator(seed, 2)
    h, i, v, big_v = HIDDEN_SIZE, INTERMEDIATE_SIZE, DRAFT_VOCAB_SIZE, VOCAB_SIZE
    qkv_out = NUM_HEADS * HEAD_DIM

    def w(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float32) * 0.02

    def norm() -> torch.Tensor:
        return 1.0 + 0.05 * torch.randn(h, generator=g, dtype=torch.float32)

    sel = _draft_vocab_ids(seed)
    t2d = torch.zeros(big_v, dtype=torch.bool)
    t2d[sel] = True
    kv_out = NUM_KV_HEADS * HEAD_DIM
    return {
        "fc.weight": w(h, 3 * h),
        "midlayer.self_attn.q_proj.weight": w(qkv_out, 2 * h),
        "midlayer.self_attn.k_proj.weight": w(kv_out, 2 * h),
        "midlayer.self_attn.v_proj.weight": w(kv_out, 2 * h),
        "midlayer.self_attn.o_proj.weight": w(h, qkv_out),
        "midlayer.mlp.gate_proj.weight": w(i, h),
        "midlayer.mlp.up_proj.weight": w(i, h),
        "midlayer.mlp.down_proj.weight": w(h, i),
        "midlayer.input_layernorm.weight": norm(),
        "midlayer.hidden_norm.weight": norm(),
        "midlayer.post_attention_layernorm.weight": norm(),
        "norm.weight": norm(),
        "lm_head.weight": target["lm_head.weight"][sel].to(torch.float32)
        + 0.002 * torch.randn(v, h, generator=g, dtype=torch.float32),
        "d2t": (sel - torch.arange(v, dtype=torch.int64)).to(torch.int64),
        "t2d": t2d,
    }


def _to_speculators_layout(healthy: Tensors, target: Tensors) -> Tensors:
    """``midlayer.`` -> ``layers.0.`` plus the target's embedding, as speculators saves it."""
    out: Tensors = {}
    for k, t in healthy.items():
        out["layers.0." + k[len("midlayer.") :] if k.startswith("midlayer.") else k] = t.clone()
    out["embed_tokens.weight"] = target["embed_tokens.weight"].to(torch.float32).clone()
    return out


def _with_d2t(healthy: Tensors, d2t: torch.Tensor) -> Tensors:
    out = {k: t.clone() for k, t in healthy.items()}
    out["d2t"] = d2t.to(torch.int64)
    return out


def _d2t_absolute(healthy: Tensors) -> Tensors:
    """S2: ``d2t[i]`` holds the target id itself instead of the offset ``target_id - i``."""
    sel = torch.nonzero(healthy["t2d"]).flatten()
    return _with_d2t(healthy, sel)


def _d2t_double_offset(healthy: Tensors) -> Tensors:
    """Offset conversion applied twice: ``d2t[i] = sel[i] - 2 i``."""
    ar = torch.arange(DRAFT_VOCAB_SIZE, dtype=torch.int64)
    return _with_d2t(healthy, healthy["d2t"] - ar)


def _d2t_missing(healthy: Tensors) -> Tensors:
    """S4: ``d2t`` dropped (``t2d`` kept); engines fall back to zero offsets."""
    return {k: t.clone() for k, t in healthy.items() if k != "d2t"}


def _write_drafter(drafter_dir: pathlib.Path, config: dict[str, Any], tensors: Tensors) -> None:
    drafter_dir.mkdir(parents=True, exist_ok=True)
    _write_json(drafter_dir / "config.json", config)
    _save_tensors(drafter_dir / "model.safetensors", tensors)


# ---------------------------------------------------------------------------------------------
# README
# ---------------------------------------------------------------------------------------------

_README = f"""\
# Demo data (generated)

Generated by `eagle3_forensics.demo.make_demo` (seed @SEED@); regenerate with `make data`
(`python -m eagle3_forensics make-demo data/demo`). The output is byte-identical across runs:
do not edit these files by hand. All weights are random (seeded); they exist to exercise the
static checks, not to draft well.

## target/

A tiny Hugging Face `LlamaForCausalLM` (vocab {VOCAB_SIZE}, hidden {HIDDEN_SIZE}, intermediate
{INTERMEDIATE_SIZE}, {NUM_TARGET_LAYERS} layers, {NUM_HEADS} heads of dim {HEAD_DIM}, untied `lm_head`,
float32 safetensors) with a byte-level BPE tokenizer of exactly {VOCAB_SIZE} tokens
(`<s>`=0, `</s>`=1, `<unk>`=2). `head_dim` is {HEAD_DIM} because vLLM's CPU attention needs >= 32.

## drafters/

Every drafter is a one-layer EAGLE-3 head (hidden {HIDDEN_SIZE}, `fc` over 3 aux states, draft
vocabulary {DRAFT_VOCAB_SIZE}). The draft vocabulary is the ascending list of target ids
`sel` = 0..{N_LEADING_IDENTITY - 1} followed by {DRAFT_VOCAB_SIZE - N_LEADING_IDENTITY} scattered ids,
so a correct `d2t` has `d2t[:{N_LEADING_IDENTITY}] == 0` (the trap: a prefix of zeros looks like an
unset buffer). `lm_head` rows are the target's `lm_head[sel]` plus small noise.

| variant | what it is | expected findings |
|---|---|---|
| `healthy` | SpecForge/EAGLE layout (`midlayer.*`, flat config, no `embed_tokens`, no aux-layer field); `d2t = sel - arange(v)`, `t2d[sel] = True` | none |
| `speculators_layout` | the same weights saved the speculators way: `layers.0.*`, `embed_tokens.weight` (copy of the target's), nested `Eagle3Speculator` config with `eagle_aux_hidden_state_layer_ids = {SPECULATORS_AUX_LAYER_IDS}` | on sglang: `KEYS_DROPPED_BY_ENGINE`, `PARAMS_UNFILLED` (SGLang expects `midlayer.*`); fine on vLLM |
| `d2t_absolute` | healthy, but `d2t = sel` (absolute target ids instead of offsets) | `D2T_ABSOLUTE` |
| `d2t_double_offset` | healthy, but `d2t = sel - 2*arange(v)` (offset conversion applied twice) | `D2T_DOUBLE_OFFSET` |
| `d2t_missing` | healthy without the `d2t` tensor (`t2d` kept) | `D2T_MISSING` |
"""


# ---------------------------------------------------------------------------------------------
# public entry point
# ---------------------------------------------------------------------------------------------


def make_demo(out_dir: str | os.PathLike[str], *, seed: int = 0) -> dict[str, pathlib.Path]:
    """Write the demo target, drafters and README under ``out_dir``.

    Returns ``{variant_name: drafter_dir}`` for every name in :data:`VARIANTS` (the target lives at
    ``out_dir / TARGET_SUBDIR``). Existing files are overwritten; nothing else is removed.
    """
    root = pathlib.Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)

    target = _write_target(root / TARGET_SUBDIR, seed)
    healthy = _healthy_tensors(target, seed)
    specforge_cfg = _specforge_config()

    built: dict[str, tuple[dict[str, Any], Tensors]] = {
        "healthy": (specforge_cfg, healthy),
        "speculators_layout": (_speculators_config(), _to_speculators_layout(healthy, target)),
        "d2t_absolute": (specforge_cfg, _d2t_absolute(healthy)),
        "d2t_double_offset": (specforge_cfg, _d2t_double_offset(healthy)),
        "d2t_missing": (specforge_cfg, _d2t_missing(healthy)),
    }
    if tuple(built) != VARIANTS:  # keep the public list and the builders in step
        raise RuntimeError(f"demo variants {tuple(built)} != VARIANTS {VARIANTS}")

    paths: dict[str, pathlib.Path] = {}
    for name, (cfg, tensors) in built.items():
        d = root / DRAFTERS_SUBDIR / name
        _write_drafter(d, cfg, tensors)
        paths[name] = d

    (root / "README.md").write_text(_README.replace("@SEED@", str(seed)), encoding="utf-8")
    return paths
