"""Tiny, real EAGLE-3 drafter checkpoints (and target configs) for the tests.

Everything here writes actual files: ``config.json`` plus ``model.safetensors`` saved with
``safetensors.torch.save_file``. Sizes are tiny (H=32, 2 heads x 16, I=64, V=64, v=32) so a
checkpoint costs a few hundred KiB and milliseconds.

The default :class:`DrafterSpec` is a *healthy* SpecForge-style drafter (flat config,
``midlayer.*`` keys, no embedding, offsets ``d2t``). Its draft vocabulary starts with target
ids ``0..9``, so ``d2t[:10] == 0`` exactly: the seed-story case where leading zeros are right.
Every knob changes one thing, so a broken variant is a near-identical copy of a healthy one.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

# The fixtures are built with torch (the probe extra): where it is absent (the core-only tier of
# tests/packaging), every test module importing this one skips.
pytest.importorskip("torch")
import torch
from safetensors.torch import load_file, save_file

# -- sizes --------------------------------------------------------------------------------------

H = 32
HEADS = 2
KV_HEADS = 2
HEAD_DIM = 16
INTER = 64
V = 64
SMALL_V = 32
TARGET_LAYERS = 8
LEADING_IDENTITY = 10  # the first draft ids map to target ids 0..9, so d2t[:10] == 0
ROPE_THETA = 10000.0
MAX_POS = 2048

_UNSET: Any = object()  # "use the default for this style"


def selection(
    vocab: int = V, draft: int = SMALL_V, seed: int = 0, leading: int = LEADING_IDENTITY
) -> torch.Tensor:
    """Ascending target ids of a draft vocabulary: ``0..leading-1`` then scattered ids."""
    leading = min(leading, draft)
    rest = sorted(random.Random(seed).sample(range(leading, vocab), draft - leading))
    return torch.tensor(list(range(leading)) + rest, dtype=torch.int64)


def target_embedding(vocab: int = V, hidden: int = H, seed: int = 1234) -> torch.Tensor:
    """The (deterministic) embedding table of the tiny target built by :func:`build_target`."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(vocab, hidden, generator=g) * 0.02


def target_lm_head(vocab: int = V, hidden: int = H, seed: int = 4321) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(vocab, hidden, generator=g) * 0.02


# -- drafter ------------------------------------------------------------------------------------


@dataclass
class DrafterSpec:
    """Knobs for one drafter checkpoint. Defaults: a healthy flat SpecForge drafter."""

    # sizes
    hidden: int = H
    heads: int = HEADS
    kv_heads: int = KV_HEADS
    head_dim: int = HEAD_DIM
    intermediate: int = INTER
    vocab: int = V
    draft_vocab: int = SMALL_V
    seed: int = 0
    leading: int = LEADING_IDENTITY  # draft ids 0..leading-1 map to target ids 0..leading-1

    # format
    layout: str = "midlayer"  # "midlayer" | "layers"
    config_style: str = "flat"  # "flat" (SpecForge) | "speculators"
    architectures: Any = _UNSET  # list[str] | None (absent); default by style
    speculators_model_type: str = "eagle3"

    # vocabulary mapping
    d2t: str = "offsets"  # offsets|absolute|double|missing|zeros|permuted|corrupt|out_of_range|int32|float
    corrupt_index: int = 12  # for d2t="corrupt": the first (and only) bad draft id
    t2d: str = "ok"  # ok|missing|all_true|wrong_len|int8
    draft_vocab_size_in_config: bool = True
    config_vocab_size: int | None = None  # override config vocab_size
    config_draft_vocab_size: int | None = None  # override config draft_vocab_size

    # embeddings / head
    embed: Any = _UNSET  # "absent" | "target" (equal to the target's) | "random" | "wrong_shape"
    embed_rows: int | None = None  # rows of a stored embedding (default V)
    lm_head: bool = True
    lm_head_rows: int | None = None  # default draft vocab
    tie_word_embeddings: bool | None = False

    # fc / attention shapes
    target_hidden_size: int | None = None  # written to the config; fc is sized from it
    fc_in: int | None = None  # override fc in-features (default 3 * (target_hidden_size or H))
    q_in: int | None = None  # override q_proj in-features (default 2H)

    # aux layer ids
    aux_top: list[Any] | None = None  # top-level eagle_aux_hidden_state_layer_ids
    aux_nested: list[Any] | None = None  # eagle_config.eagle_aux_hidden_state_layer_ids

    # normalisation variants
    norm_before_residual: Any = _UNSET  # bool | None; speculators default False (explicit)
    norm_before_fc: bool | None = None
    input_norm_key: bool | None = None  # write input_norm.weight (default: norm_before_fc is True)
    fc_norm: bool | None = None
    fc_norm_keys: bool | None = None  # write fc_norm.{j}.weight (default: fc_norm is True)
    norm_output: bool | None = None

    # layers
    num_hidden_layers: int = 1
    extra_layers: int = 0  # extra decoder layers written as keys (layers.{i} / midlayer.{i})

    # weight values
    nan_in: str | None = None  # tensor name that gets a NaN
    norms_all_ones: bool = False
    zero_matrix: str | None = None  # tensor name set to all zeros
    dtype: torch.dtype = torch.float32
    mixed_dtype: tuple[str, ...] = ()  # tensor names cast to bfloat16
    torch_dtype: str | None = "float32"  # config torch_dtype (None: absent)

    # config odds and ends
    rope: str = "legacy"  # "legacy" (rope_theta) | "parameters" (rope_parameters only) | "both" | "none"
    rope_theta: float = ROPE_THETA
    max_position_embeddings: int | None = MAX_POS
    bias: bool | None = None
    model_type: str = "llama"
    verifier_architectures: list[str] | None = None  # speculators verifier

    # raw edits
    extra_keys: dict[str, tuple[tuple[int, ...], torch.dtype]] = field(default_factory=dict)
    remove_keys: tuple[str, ...] = ()
    config_extra: dict[str, Any] = field(default_factory=dict)  # top-level; value None deletes the key

    def with_(self, **changes: Any) -> DrafterSpec:
        return replace(self, **changes)

    # derived -----------------------------------------------------------------------------------
    @property
    def speculators(self) -> bool:
        return self.config_style == "speculators"

    @property
    def embed_mode(self) -> str:
        if self.embed is not _UNSET:
            return str(self.embed)
        return "target" if self.speculators else "absent"

    @property
    def selected(self) -> torch.Tensor:
        return selection(self.vocab, self.draft_vocab, self.seed, self.leading)

    @property
    def layer_prefix(self) -> str:
        return "midlayer." if self.layout == "midlayer" else "layers.0."


def _weights(spec: DrafterSpec) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(spec.seed + 1)
    h, q_out, kv_out = spec.hidden, spec.heads * spec.head_dim, spec.kv_heads * spec.head_dim
    ht = spec.target_hidden_size or h

    def w(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * 0.05

    def norm(n: int = h) -> torch.Tensor:
        if spec.norms_all_ones:
            return torch.ones(n)
        return 1.0 + torch.randn(n, generator=g) * 0.05

    def layer(prefix: str) -> dict[str, torch.Tensor]:
        q_in = spec.q_in if spec.q_in is not None else 2 * h
        return {
            prefix + "self_attn.q_proj.weight": w(q_out, q_in),
            prefix + "self_attn.k_proj.weight": w(kv_out, 2 * h),
            prefix + "self_attn.v_proj.weight": w(kv_out, 2 * h),
            prefix + "self_attn.o_proj.weight": w(h, q_out),
            prefix + "mlp.gate_proj.weight": w(spec.intermediate, h),
            prefix + "mlp.up_proj.weight": w(spec.intermediate, h),
            prefix + "mlp.down_proj.weight": w(h, spec.intermediate),
            prefix + "input_layernorm.weight": norm(),
            prefix + "hidden_norm.weight": norm(),
            prefix + "post_attention_layernorm.weight": norm(),
        }

    fc_in = spec.fc_in if spec.fc_in is not None else 3 * ht
    out: dict[str, torch.Tensor] = {"fc.weight": w(h, fc_in), "norm.weight": norm()}
    if spec.bias:
        out["fc.bias"] = w(h)
    out.update(layer(spec.layer_prefix))
    for i in range(1, 1 + spec.extra_layers):
        prefix = f"midlayer.{i}." if spec.layout == "midlayer" else f"layers.{i}."
        extra = layer(prefix)
        extra.pop(prefix + "hidden_norm.weight")  # only the first layer has hidden_norm
        out.update(extra)
    if spec.lm_head:
        rows = spec.lm_head_rows if spec.lm_head_rows is not None else spec.draft_vocab
        out["lm_head.weight"] = w(rows, h)
    mode = spec.embed_mode
    rows = spec.embed_rows if spec.embed_rows is not None else spec.vocab
    if mode == "target":
        out["embed_tokens.weight"] = target_embedding(spec.vocab, h)[:rows].clone()
    elif mode == "random":
        out["embed_tokens.weight"] = w(rows, h)
    elif mode == "wrong_shape":
        out["embed_tokens.weight"] = w(rows, h + 8)
    elif mode != "absent":
        raise ValueError(f"unknown embed mode {mode!r}")
    wants_input_norm = spec.input_norm_key if spec.input_norm_key is not None else spec.norm_before_fc is True
    if wants_input_norm:
        out["input_norm.weight"] = norm(3 * ht)
    wants_fc_norm = spec.fc_norm_keys if spec.fc_norm_keys is not None else spec.fc_norm is True
    if wants_fc_norm:
        for j in range(3):
            out[f"fc_norm.{j}.weight"] = norm(ht)
    return out


def _d2t(spec: DrafterSpec) -> torch.Tensor | None:
    sel = spec.selected
    v = sel.shape[0]
    ar = torch.arange(v, dtype=torch.int64)
    mode = spec.d2t
    if mode == "missing":
        return None
    if mode in ("offsets", "int32", "float"):
        d = sel - ar
        return d.to(torch.int32) if mode == "int32" else d.to(torch.float32) if mode == "float" else d
    if mode == "absolute":
        return sel.clone()
    if mode == "double":
        return sel - 2 * ar
    if mode == "zeros":
        return torch.zeros(v, dtype=torch.int64)
    if mode == "permuted":
        perm = sel.clone()
        perm[[14, 20]] = perm[[20, 14]]
        return perm - ar
    if mode == "corrupt":
        i = spec.corrupt_index
        unused = [j for j in range(spec.vocab) if j not in set(sel.tolist())]
        bad = sel.clone()
        bad[i] = unused[-1] if unused[-1] != sel[i] else unused[0]
        return bad - ar
    if mode == "out_of_range":
        d = sel - ar
        d[-1] = spec.vocab + 5 - (v - 1)  # target id V + 5
        return d
    raise ValueError(f"unknown d2t mode {mode!r}")


def _t2d(spec: DrafterSpec) -> torch.Tensor | None:
    mode = spec.t2d
    if mode == "missing":
        return None
    if mode == "all_true":
        return torch.ones(spec.vocab, dtype=torch.bool)
    length = spec.vocab + 8 if mode == "wrong_len" else spec.vocab
    mask = torch.zeros(length, dtype=torch.bool)
    mask[spec.selected] = True
    if mode == "int8":
        return mask.to(torch.int8)
    if mode not in ("ok", "wrong_len"):
        raise ValueError(f"unknown t2d mode {mode!r}")
    return mask


def drafter_tensors(spec: DrafterSpec) -> dict[str, torch.Tensor]:
    out = {k: t.to(spec.dtype) for k, t in _weights(spec).items()}
    d2t, t2d = _d2t(spec), _t2d(spec)
    if d2t is not None:
        out["d2t"] = d2t
    if t2d is not None:
        out["t2d"] = t2d
    for name in spec.mixed_dtype:
        out[name] = out[name].to(torch.bfloat16)
    if spec.zero_matrix is not None:
        out[spec.zero_matrix] = torch.zeros_like(out[spec.zero_matrix])
    if spec.nan_in is not None:
        t = out[spec.nan_in].clone()
        t.view(-1)[0] = float("nan")
        out[spec.nan_in] = t
    for name, (shape, dtype) in spec.extra_keys.items():
        out[name] = (
            torch.zeros(shape, dtype=dtype) if not dtype.is_floating_point else torch.randn(shape).to(dtype)
        )
    for name in spec.remove_keys:
        out.pop(name)
    return out


def _llama_fields(spec: DrafterSpec) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "model_type": spec.model_type,
        "hidden_size": spec.hidden,
        "intermediate_size": spec.intermediate,
        "num_hidden_layers": spec.num_hidden_layers,
        "num_attention_heads": spec.heads,
        "num_key_value_heads": spec.kv_heads,
        "head_dim": spec.head_dim,
        "vocab_size": spec.config_vocab_size if spec.config_vocab_size is not None else spec.vocab,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
    }
    if spec.tie_word_embeddings is not None:
        cfg["tie_word_embeddings"] = spec.tie_word_embeddings
    if spec.max_position_embeddings is not None:
        cfg["max_position_embeddings"] = spec.max_position_embeddings
    if spec.rope in ("legacy", "both"):
        cfg["rope_theta"] = spec.rope_theta
    if spec.rope in ("parameters", "both"):
        cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": spec.rope_theta}
    if spec.torch_dtype is not None:
        cfg["torch_dtype"] = spec.torch_dtype
    if spec.bias is not None:
        cfg["bias"] = spec.bias
    return cfg


def _norm_flags(spec: DrafterSpec) -> dict[str, Any]:
    nbr = spec.norm_before_residual
    if nbr is _UNSET:
        nbr = False if spec.speculators else None
    flags = {
        "norm_before_residual": nbr,
        "norm_before_fc": spec.norm_before_fc,
        "fc_norm": spec.fc_norm,
        "norm_output": spec.norm_output,
    }
    return {k: v for k, v in flags.items() if v is not None}


def drafter_config(spec: DrafterSpec) -> dict[str, Any]:
    dvs = spec.config_draft_vocab_size if spec.config_draft_vocab_size is not None else spec.draft_vocab
    if spec.speculators:
        archs = ["Eagle3Speculator"] if spec.architectures is _UNSET else spec.architectures
        cfg: dict[str, Any] = {
            "speculators_model_type": spec.speculators_model_type,
            "speculators_version": "0.7.0",
            "speculators_config": {
                "algorithm": "eagle3",
                "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
                "default_proposal_method": "greedy",
                "verifier": {
                    "name_or_path": "tiny-target",
                    "architectures": spec.verifier_architectures or ["LlamaForCausalLM"],
                },
            },
            "transformer_layer_config": _llama_fields(spec),
            "target_hidden_size": spec.target_hidden_size,
            "embed_requires_grad": False,
        }
        if spec.draft_vocab_size_in_config:
            cfg["draft_vocab_size"] = dvs
    else:
        archs = ["LlamaForCausalLMEagle3"] if spec.architectures is _UNSET else spec.architectures
        cfg = _llama_fields(spec)
        if spec.draft_vocab_size_in_config:
            cfg["draft_vocab_size"] = dvs
        if spec.target_hidden_size is not None:
            cfg["target_hidden_size"] = spec.target_hidden_size
    if archs is not None:
        cfg = {"architectures": list(archs), **cfg}
    cfg.update(_norm_flags(spec))
    if spec.aux_top is not None:
        cfg["eagle_aux_hidden_state_layer_ids"] = list(spec.aux_top)
    if spec.aux_nested is not None:
        cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(spec.aux_nested)}
    for key, value in spec.config_extra.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    return cfg


def write_checkpoint(directory: Path, config: dict[str, Any], tensors: dict[str, torch.Tensor]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    save_file(
        {k: tensors[k].contiguous() for k in sorted(tensors)},
        str(directory / "model.safetensors"),
        metadata={"format": "pt"},
    )
    return directory


def build_drafter(directory: str | Path, spec: DrafterSpec | None = None, **changes: Any) -> Path:
    """Write the drafter described by ``spec`` (healthy SpecForge by default) with ``changes`` applied."""
    spec = (spec or DrafterSpec()).with_(**changes)
    return write_checkpoint(Path(directory), drafter_config(spec), drafter_tensors(spec))


def speculators_spec(**changes: Any) -> DrafterSpec:
    """A healthy speculators-format drafter: ``layers.0.*`` keys, nested config, the target's embedding."""
    base = DrafterSpec(
        layout="layers", config_style="speculators", aux_top=[2, TARGET_LAYERS // 2, TARGET_LAYERS - 3]
    )
    return base.with_(**changes)


# -- target -------------------------------------------------------------------------------------


def build_target(
    directory: str | Path,
    vocab: int = V,
    hidden: int = H,
    layers: int = TARGET_LAYERS,
    with_weights: bool = False,
    rope_theta: float | None = ROPE_THETA,
    max_pos: int | None = MAX_POS,
    architectures: list[str] | None = None,
    embedding: torch.Tensor | None = None,
    chat: dict[str, int] | None = None,
) -> Path:
    """A tiny target: ``config.json`` and, with ``with_weights``, ``model.safetensors`` holding
    ``model.embed_tokens.weight`` (:func:`target_embedding` unless given) and ``lm_head.weight``;
    with ``chat`` (special token -> id) a chat tokenizer too (:func:`write_chat_tokenizer`)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    cfg: dict[str, Any] = {
        "architectures": architectures or ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "vocab_size": vocab,
        "tie_word_embeddings": False,
    }
    if rope_theta is not None:
        cfg["rope_theta"] = rope_theta
    if max_pos is not None:
        cfg["max_position_embeddings"] = max_pos
    (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
    if chat is not None:
        write_chat_tokenizer(d, vocab, chat)
    if with_weights:
        emb = embedding if embedding is not None else target_embedding(vocab, hidden)
        save_file(
            {
                "model.embed_tokens.weight": emb.contiguous(),
                "lm_head.weight": target_lm_head(vocab, hidden).contiguous(),
            },
            str(d / "model.safetensors"),
            metadata={"format": "pt"},
        )
    return d


#: a Qwen3-like template over the demo chat format's tokens (thinking by default; enable_thinking=false
#: closes an empty think block in the generation prompt)
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ '<|' + m.role + '|>' }} {{ m.content }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> "
    "{% if enable_thinking is defined and enable_thinking is false %}<think></think> {% endif %}"
    "{% endif %}"
)
CHAT_SPECIALS = {"[UNK]": 2, "<|user|>": 3, "<|assistant|>": 4, "<|end|>": 5, "<think>": 6, "</think>": 7}


def write_chat_tokenizer(directory: Path, vocab: int, specials: dict[str, int]) -> None:
    """A real word-level ``tokenizer.json`` of ``vocab`` tokens (``w<i>`` words, ``specials`` at their
    ids as added tokens), :data:`CHAT_TEMPLATE` with eos ``<|end|>``, and ``generation_config.json``."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    words = {f"w{i}": i for i in range(vocab) if i not in specials.values()}
    tok = Tokenizer(models.WordLevel({**words, **specials}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens([AddedToken(t, special=True) for t in sorted(specials, key=specials.__getitem__)])
    tok.save(str(directory / "tokenizer.json"))
    cfg = {"eos_token": "<|end|>", "unk_token": "[UNK]", "chat_template": CHAT_TEMPLATE}
    (directory / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    eos = specials.get("<|end|>")
    (directory / "generation_config.json").write_text(json.dumps({"eos_token_id": eos}), encoding="utf-8")


# -- a hostile drafter --------------------------------------------------------------------------

#: a tensor name that runs script if a renderer forgets to escape it: it sets ``data-xss="1"`` on
#: ``<html>`` (no quotes, so its escaped form is the same for every HTML escaper)
TENSOR_PAYLOAD = "<img src=x onerror=document.documentElement.dataset.xss=1>"
#: a directory name (no ``/``) that does the same through another element: ``data-xss="2"``
DIR_PAYLOAD = "<svg onload=document.documentElement.dataset.xss=2>"


def build_hostile_drafter(parent: str | Path, source: str | Path) -> Path:
    """``source`` (a healthy drafter) copied to ``parent/DIR_PAYLOAD`` with one more tensor, named
    :data:`TENSOR_PAYLOAD` (a copy of ``t2d``, so the drafter still diagnoses and runs)."""
    src, dst = Path(source), Path(parent) / DIR_PAYLOAD
    dst.mkdir(parents=True)
    (dst / "config.json").write_bytes((src / "config.json").read_bytes())
    tensors = load_file(str(src / "model.safetensors"))
    tensors[TENSOR_PAYLOAD] = tensors["t2d"].clone()
    save_file(tensors, str(dst / "model.safetensors"))
    return dst


# -- MLA (Kimi-K2.5 style) drafter ------------------------------------------------------------------

MLA_Q_LORA = 16
MLA_KV_LORA = 16
MLA_NOPE = 8
MLA_ROPE = 8
MLA_V = 8


def mla_tensors(
    *, layout: str = "layers", fused: bool = False, fc_norm_keys: bool = False, seed: int = 0
) -> dict[str, torch.Tensor]:
    """An EAGLE-3 drafter with DeepSeek-V2 multi-latent attention (SGLang's ``Eagle3DeepseekV2ForCausalLM``).

    ``fused``: ship ``fused_qkv_a_proj_with_mqa`` (pre-fused) instead of ``q_a_proj`` + ``kv_a_proj_with_mqa``.
    """
    g = torch.Generator().manual_seed(seed + 7)

    def w(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * 0.05

    def norm(n: int) -> torch.Tensor:
        return 1.0 + torch.randn(n, generator=g) * 0.05

    h = H
    p = "midlayer." if layout == "midlayer" else "layers.0."
    out = {
        "fc.weight": w(h, 3 * h),
        "norm.weight": norm(h),
        "lm_head.weight": w(SMALL_V, h),
        p + "self_attn.q_a_layernorm.weight": norm(MLA_Q_LORA),
        p + "self_attn.q_b_proj.weight": w(HEADS * (MLA_NOPE + MLA_ROPE), MLA_Q_LORA),
        p + "self_attn.kv_a_layernorm.weight": norm(MLA_KV_LORA),
        p + "self_attn.kv_b_proj.weight": w(HEADS * (MLA_NOPE + MLA_V), MLA_KV_LORA),
        p + "self_attn.o_proj.weight": w(h, HEADS * MLA_V),
        p + "mlp.gate_proj.weight": w(INTER, h),
        p + "mlp.up_proj.weight": w(INTER, h),
        p + "mlp.down_proj.weight": w(h, INTER),
        p + "input_layernorm.weight": norm(h),
        p + "hidden_norm.weight": norm(h),
        p + "post_attention_layernorm.weight": norm(h),
    }
    if fused:
        out[p + "self_attn.fused_qkv_a_proj_with_mqa.weight"] = w(MLA_Q_LORA + MLA_KV_LORA + MLA_ROPE, 2 * h)
    else:
        out[p + "self_attn.q_a_proj.weight"] = w(MLA_Q_LORA, 2 * h)
        out[p + "self_attn.kv_a_proj_with_mqa.weight"] = w(MLA_KV_LORA + MLA_ROPE, 2 * h)
    if fc_norm_keys:
        for j in range(3):
            out[f"fc_norm.{j}.weight"] = norm(h)
    sel = selection()
    out["d2t"] = sel - torch.arange(SMALL_V)
    mask = torch.zeros(V, dtype=torch.bool)
    mask[sel] = True
    out["t2d"] = mask
    return out


def mla_config(*, model_type: str = "deepseek_v3", **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "architectures": ["Eagle3DeepseekV2ForCausalLM"],
        "model_type": model_type,
        "hidden_size": H,
        "intermediate_size": INTER,
        "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS,
        "q_lora_rank": MLA_Q_LORA,
        "kv_lora_rank": MLA_KV_LORA,
        "qk_nope_head_dim": MLA_NOPE,
        "qk_rope_head_dim": MLA_ROPE,
        "v_head_dim": MLA_V,
        "num_hidden_layers": 1,
        "vocab_size": V,
        "draft_vocab_size": SMALL_V,
        "max_position_embeddings": MAX_POS,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "rope_theta": ROPE_THETA,
        "torch_dtype": "float32",
    }
    for key, value in extra.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    return cfg


def build_mla_drafter(
    directory: str | Path,
    *,
    layout: str = "layers",
    fused: bool = False,
    fc_norm_keys: bool = False,
    remove_keys: tuple[str, ...] = (),
    **config: Any,
) -> Path:
    """Write an MLA drafter; ``config`` overrides config fields (``None`` deletes one)."""
    tensors = mla_tensors(layout=layout, fused=fused, fc_norm_keys=fc_norm_keys)
    for name in remove_keys:
        tensors.pop(name)
    return write_checkpoint(Path(directory), mla_config(**config), tensors)
