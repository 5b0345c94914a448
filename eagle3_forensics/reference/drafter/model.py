"""The clean-room EAGLE-3 drafter in plain PyTorch: :class:`Eagle3Drafter` and its parts.

The model (``docs/reference/acceptance.md`` §1, ``docs/reference/formats.md`` §0), written from the
description:

* ``fuse``: the target's aux hidden states (``k`` of them, width ``Ht`` each, concatenated low
  to high) go through optional norms (``norm_before_fc``: one RMSNorm over the ``k*Ht``
  concatenation, weight ``input_norm``; ``fc_norm``: one RMSNorm per aux chunk) and ``fc``
  (``k*Ht -> H``). ``fc`` is applied to target features only.
* layer 0 (the "midlayer"): ``x = cat([input_layernorm(embed(tok)), hidden_norm(h)])`` (width
  2H, embedding first) feeds q/k/v; the residual is ``h`` (or ``hidden_norm(h)`` with
  ``norm_before_residual``); then the usual Llama residual + post-attention norm + SwiGLU MLP.
  Layers 1.. (multi-layer drafters) are ordinary Llama decoder layers of width H.
* head: ``lm_head(norm(h_out))`` over the draft vocabulary (SpecForge's ``norm_output=false``
  skips ``norm``); a draft id ``i`` is target id ``i + d2t[i]``.
* recurrence: the next draft step is fed the **pre-norm** ``h_out`` (``norm_output=true`` in
  the speculators/vLLM meaning feeds ``norm(h_out)`` instead).

Canonical parameter names (the module's ``state_dict``): ``embed_tokens.weight``,
``fc.weight`` (+ ``fc.bias``), ``input_norm.weight``, ``fc_norm.{j}.weight``,
``layers.{i}.self_attn.{q,k,v,o}_proj.weight`` (+ ``q_norm``/``k_norm`` for Qwen3 layers),
``layers.{i}.mlp.{gate,up,down}_proj.weight``,
``layers.{i}.{input_layernorm,hidden_norm,post_attention_layernorm}.weight``, ``norm.weight``,
``lm_head.weight`` and the ``d2t`` buffer (always held as offsets).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.reference.drafter.views import DrafterView

#: seed of the initialisation of a new drafter and of the stand-in for unfilled parameters
FRESH_INIT_SEED = 0
#: weights of a new (to-be-trained) drafter: N(0, 0.02), Llama's initializer_range
TRAIN_INIT_STD = 0.02
#: parameters a view leaves unfilled. Engines allocate them (``torch.empty``) and never initialise
#: them, so they hold whatever the memory held; a seeded unit-scale normal stands in for that.
#: (All-zero memory would hide the damage: a zero decoder layer passes ``fc``'s output straight to
#: ``lm_head``, which alone still drafts a little.)
UNFILLED_STD = 1.0

# ---------------------------------------------------------------------------------------------
# architecture
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DrafterSpec:
    """Shapes and semantics of one drafter, already resolved for one view."""

    hidden_size: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int  # V: target vocabulary (embedding rows)
    draft_vocab_size: int  # v: lm_head rows
    target_hidden_size: int | None = None  # Ht; None = hidden_size
    num_layers: int = 1
    num_aux: int = 3
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_parameters: dict[str, Any] | None = None  # non-default RoPE (transformers' rope init functions)
    hidden_act: str = "silu"
    attention_bias: bool = False
    fc_bias: bool = False
    qk_norm: bool = False  # Qwen3 draft layers
    norm_before_residual: bool = False
    norm_before_fc: bool = False
    fc_norm: bool = False
    post_norm_recurrence: bool = False  # norm_output=true, speculators/vLLM meaning
    final_norm: bool = True  # False only for SpecForge's norm_output=false

    @property
    def ht(self) -> int:
        return self.target_hidden_size or self.hidden_size


class RMSNorm(nn.Module):
    """Llama RMSNorm: normalise in float32, scale by the weight."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Rotary(nn.Module):
    """Rotary position embedding (half-split layout, as Llama and vLLM's neox style use)."""

    def __init__(self, spec: DrafterSpec) -> None:
        super().__init__()
        d = spec.head_dim
        scale = 1.0
        params = spec.rope_parameters or {}
        rope_type = str(params.get("rope_type", params.get("type", "default")))
        if rope_type == "default":
            inv = 1.0 / (spec.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
            inv_freq = inv.float()
        else:
            inv_freq, scale = _transformers_rope(spec, rope_type, params)
        # a plain attribute, not a buffer: ``module.to(bfloat16)`` must not round the frequencies
        self.inv_freq = inv_freq
        self.scale = float(scale)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        if self.inv_freq.device != positions.device:
            self.inv_freq = self.inv_freq.to(positions.device)
        freqs = positions.to(torch.float32)[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * self.scale).to(dtype), (emb.sin() * self.scale).to(dtype)


def _transformers_rope(
    spec: DrafterSpec, rope_type: str, params: dict[str, Any]
) -> tuple[torch.Tensor, float]:
    """Scaled RoPE variants through transformers' own init functions (a library, not an engine)."""
    try:
        from transformers import LlamaConfig  # optional: transformers (the models extra)
        from transformers.modeling_rope_utils import (
            ROPE_INIT_FUNCTIONS,  # optional: transformers (the models extra)
        )
    except ImportError as exc:  # pragma: no cover - transformers is a declared extra
        raise UnusableInputError(f"RoPE type {rope_type!r} needs transformers: {exc}") from None
    if rope_type not in ROPE_INIT_FUNCTIONS:
        raise UnusableInputError(f"unsupported RoPE type {rope_type!r} in the drafter config")
    rope = {"rope_theta": spec.rope_theta, **params, "rope_type": rope_type}
    kwargs: dict[str, Any] = {
        "hidden_size": spec.hidden_size,
        "num_attention_heads": spec.num_heads,
        "head_dim": spec.head_dim,
        "rope_parameters": rope,
        "rope_scaling": rope,
        "rope_theta": spec.rope_theta,
    }
    cfg = LlamaConfig(**kwargs)
    inv_freq, scale = ROPE_INIT_FUNCTIONS[rope_type](cfg, torch.device("cpu"))
    return inv_freq.float(), float(scale)


class Attention(nn.Module):
    def __init__(self, spec: DrafterSpec, in_dim: int) -> None:
        super().__init__()
        nh, nkv, hd, h = spec.num_heads, spec.num_kv_heads, spec.head_dim, spec.hidden_size
        self.nh, self.nkv, self.hd = nh, nkv, hd
        self.q_proj = nn.Linear(in_dim, nh * hd, bias=spec.attention_bias)
        self.k_proj = nn.Linear(in_dim, nkv * hd, bias=spec.attention_bias)
        self.v_proj = nn.Linear(in_dim, nkv * hd, bias=spec.attention_bias)
        self.o_proj = nn.Linear(nh * hd, h, bias=spec.attention_bias)
        self.q_norm = RMSNorm(hd, spec.rms_norm_eps) if spec.qk_norm else None
        self.k_norm = RMSNorm(hd, spec.rms_norm_eps) if spec.qk_norm else None

    def project(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v as ``[B, heads, T, head_dim]``; k and v already repeated to the query heads."""
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.nh, self.hd)
        k = self.k_proj(x).view(b, t, self.nkv, self.hd)
        v = self.v_proj(x).view(b, t, self.nkv, self.hd)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        if self.nkv != self.nh:
            rep = self.nh // self.nkv
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        return q, k, v

    def out(self, attn: torch.Tensor) -> torch.Tensor:
        b, _, t, _ = attn.shape
        return self.o_proj(attn.transpose(1, 2).reshape(b, t, self.nh * self.hd))


class MLP(nn.Module):
    def __init__(self, spec: DrafterSpec) -> None:
        super().__init__()
        h, i = spec.hidden_size, spec.intermediate_size
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)
        if spec.hidden_act not in _ACTIVATIONS:
            raise UnusableInputError(f"unsupported hidden_act {spec.hidden_act!r} in the drafter config")
        self.act: Callable[[torch.Tensor], torch.Tensor] = _ACTIVATIONS[spec.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "silu": F.silu,
    "swish": F.silu,
    "gelu": F.gelu,
    "gelu_pytorch_tanh": _gelu_tanh,
    "relu": F.relu,
}


class DecoderLayer(nn.Module):
    """Layer 0 is the EAGLE-3 layer (2H attention input, ``hidden_norm``); later layers are plain Llama layers."""

    def __init__(self, spec: DrafterSpec, first: bool) -> None:
        super().__init__()
        h = spec.hidden_size
        self.first = first
        self.norm_before_residual = spec.norm_before_residual
        self.self_attn = Attention(spec, 2 * h if first else h)
        self.mlp = MLP(spec)
        self.input_layernorm = RMSNorm(h, spec.rms_norm_eps)
        self.hidden_norm = RMSNorm(h, spec.rms_norm_eps) if first else None
        self.post_attention_layernorm = RMSNorm(h, spec.rms_norm_eps)

    def pre(self, e: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(attention input, residual)."""
        if self.hidden_norm is None:
            return self.input_layernorm(h), h
        hn = self.hidden_norm(h)
        residual = hn if self.norm_before_residual else h
        return torch.cat([self.input_layernorm(e), hn], dim=-1), residual

    def post(self, attn_out: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h = residual + attn_out
        return h + self.mlp(self.post_attention_layernorm(h))


class DraftCache:
    """Per-layer K/V of the drafter, ``[1, heads, L, head_dim]``; truncation drops draft-step entries."""

    def __init__(self, num_layers: int) -> None:
        self.k: list[torch.Tensor | None] = [None] * num_layers
        self.v: list[torch.Tensor | None] = [None] * num_layers

    @property
    def length(self) -> int:
        k0 = self.k[0]
        return 0 if k0 is None else int(k0.shape[2])

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pk, pv = self.k[layer], self.v[layer]
        if pk is not None and pv is not None:
            k, v = torch.cat([pk, k], dim=2), torch.cat([pv, v], dim=2)
        self.k[layer], self.v[layer] = k, v
        return k, v

    def truncate(self, length: int) -> None:
        for i, (k, v) in enumerate(zip(self.k, self.v, strict=True)):
            if k is not None and v is not None:
                self.k[i], self.v[i] = k[:, :, :length], v[:, :, :length]


class Eagle3Drafter(nn.Module):
    """One EAGLE-3 drafter. ``aux_ids`` are the Hugging Face ``hidden_states`` indices it is fed."""

    d2t: torch.Tensor

    def __init__(self, spec: DrafterSpec, aux_ids: Sequence[int] = ()) -> None:
        super().__init__()
        self.spec = spec
        self.aux_ids: list[int] = list(aux_ids)
        h, ht, k = spec.hidden_size, spec.ht, spec.num_aux
        self.embed_tokens = nn.Embedding(spec.vocab_size, h)
        self.input_norm = RMSNorm(k * ht, spec.rms_norm_eps) if spec.norm_before_fc else None
        self.fc_norm = (
            nn.ModuleList([RMSNorm(ht, spec.rms_norm_eps) for _ in range(k)]) if spec.fc_norm else None
        )
        self.fc = nn.Linear(k * ht, h, bias=spec.fc_bias)
        self.layers = nn.ModuleList([DecoderLayer(spec, first=(i == 0)) for i in range(spec.num_layers)])
        self.norm = RMSNorm(h, spec.rms_norm_eps)
        self.lm_head = nn.Linear(h, spec.draft_vocab_size, bias=False)
        self.rotary = Rotary(spec)
        self.register_buffer("d2t", torch.zeros(spec.draft_vocab_size, dtype=torch.int64))
        self.view: DrafterView | None = None

    def decoder_layers(self) -> list[DecoderLayer]:
        return [layer for layer in self.layers if isinstance(layer, DecoderLayer)]

    # -- pieces ----------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.fc.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.fc.weight.dtype

    def fuse(self, aux: torch.Tensor) -> torch.Tensor:
        """Target features ``[..., k*Ht]`` -> ``[..., H]`` (pre-fc norms, then ``fc``)."""
        aux = aux.to(self.dtype)
        if self.input_norm is not None:
            aux = self.input_norm(aux)
        if self.fc_norm is not None:
            chunks = aux.split(self.spec.ht, dim=-1)
            aux = torch.cat([norm(c) for norm, c in zip(self.fc_norm, chunks, strict=True)], dim=-1)
        return self.fc(aux)

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary logits from the last layer's pre-norm output."""
        return self.lm_head(self.norm(out) if self.spec.final_norm else out)

    def feedback(self, out: torch.Tensor) -> torch.Tensor:
        """What the next draft step receives as ``h``."""
        return self.norm(out) if self.spec.post_norm_recurrence else out

    def to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        """Draft ids -> target ids: ``i + d2t[i]`` (may fall outside the target vocabulary)."""
        return draft_ids + self.d2t[draft_ids]

    def target_ids(self) -> torch.Tensor:
        """The target id of every draft id."""
        return torch.arange(self.spec.draft_vocab_size, device=self.d2t.device) + self.d2t

    def new_cache(self) -> DraftCache:
        return DraftCache(len(self.layers))

    # -- chain inference (batch 1) -----------------------------------------------------------
    def extend(
        self, tokens: torch.Tensor, hidden: torch.Tensor, positions: torch.Tensor, cache: DraftCache
    ) -> torch.Tensor:
        """Run ``T`` new slots (token ids ``[T]``, fed hidden ``[T, H]``, positions ``[T]``).

        Each slot attends to everything in ``cache`` and causally to the new slots; their K/V
        are appended to ``cache``. Returns the last layer's pre-norm outputs ``[T, H]``.
        """
        t = int(tokens.shape[0])
        e = self.embed_tokens(tokens)[None]
        h = hidden.to(self.dtype)[None]
        cos, sin = self.rotary(positions, self.dtype)
        past = cache.length
        mask = None
        if t > 1:
            cols = torch.arange(past + t, device=tokens.device)
            rows = torch.arange(t, device=tokens.device)
            mask = cols[None, :] <= (past + rows)[:, None]
        for i, layer in enumerate(self.decoder_layers()):
            x, residual = layer.pre(e, h)
            q, k, v = layer.self_attn.project(x, cos, sin)
            k, v = cache.append(i, k, v)
            attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            h = layer.post(layer.self_attn.out(attn), residual)
        return h[0]

    # -- training-time test: K teacher-forced steps at every slot (batched) ---------------------
    def ttt_forward(self, aux: torch.Tensor, step_tokens: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Teacher-forced multi-step forward, as EAGLE-3 trains and as the chain drafts.

        ``aux`` is ``[B, S, k*Ht]`` (target features of positions ``0..S-1``); ``step_tokens[j]``
        is ``[B, S]``, the token fed at draft step ``j`` of slot ``t`` (token ``t+1+j`` of the
        sequence). Step 0 at slot ``t`` attends causally to step-0 slots ``<= t``; step ``j > 0``
        additionally attends only to its own slot in steps ``1..j`` (its ancestors in the chain),
        with RoPE position ``t + j``. Returns the pre-norm outputs of every step, ``[B, S, H]``.
        """
        s = int(step_tokens[0].shape[1])
        dev = aux.device
        base = torch.arange(s, device=dev)
        causal = base[None, :] <= base[:, None]
        scale = 1.0 / math.sqrt(self.spec.head_dim)
        k0: list[torch.Tensor] = []
        v0: list[torch.Tensor] = []
        kd: list[list[torch.Tensor]] = [[] for _ in self.layers]
        vd: list[list[torch.Tensor]] = [[] for _ in self.layers]
        outs: list[torch.Tensor] = []
        h = self.fuse(aux)
        for j, toks in enumerate(step_tokens):
            if j > 0:
                h = self.feedback(outs[-1])
            e = self.embed_tokens(toks)
            cos, sin = self.rotary(base + j, self.dtype)
            for i, layer in enumerate(self.decoder_layers()):
                x, residual = layer.pre(e, h)
                q, k, v = layer.self_attn.project(x, cos, sin)
                if j == 0:
                    k0.append(k)
                    v0.append(v)
                    attn = F.scaled_dot_product_attention(q, k, v, attn_mask=causal)
                else:
                    kd[i].append(k)
                    vd[i].append(v)
                    s0 = torch.matmul(q, k0[i].transpose(-1, -2)) * scale
                    s0 = s0.masked_fill(~causal, float("-inf"))
                    sd = [(q * kk).sum(-1, keepdim=True) * scale for kk in kd[i]]
                    probs = torch.softmax(torch.cat([s0, *sd], dim=-1).float(), dim=-1).to(q.dtype)
                    attn = torch.matmul(probs[..., :s], v0[i])
                    for n, vv in enumerate(vd[i]):
                        attn = attn + probs[..., s + n : s + n + 1] * vv
                h = layer.post(layer.self_attn.out(attn), residual)
            outs.append(h)
        return outs


def fresh_init(module: Eagle3Drafter, seed: int = FRESH_INIT_SEED) -> None:
    """Initialisation of a drafter to be trained: weights ~ N(0, 0.02), norms 1, biases 0, d2t 0."""
    g = torch.Generator(device="cpu")
    g.manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(module.named_parameters()):
            if name.endswith("norm.weight") or re.fullmatch(r"fc_norm\.\d+\.weight", name):
                p.fill_(1.0)
            elif name.endswith(".bias"):
                p.zero_()
            else:
                p.copy_(torch.randn(p.shape, generator=g) * TRAIN_INIT_STD)
        module.d2t.zero_()


def fill_unfilled(module: Eagle3Drafter, names: Sequence[str], seed: int = FRESH_INIT_SEED) -> None:
    """The stand-in for parameters an engine allocates but never loads: seeded N(0, 1) (:data:`UNFILLED_STD`)."""
    g = torch.Generator(device="cpu")
    g.manual_seed(seed + 1)
    params = dict(module.named_parameters())
    with torch.no_grad():
        for name in sorted(names):
            if name in params:
                p = params[name]
                p.copy_(torch.randn(p.shape, generator=g) * UNFILLED_STD)


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``auto`` -> CUDA when present, else the CPU; asking for CUDA without a GPU is unusable input."""
    name = str(device or "auto")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UnusableInputError(f"--device {name} requested but no CUDA GPU is available")
    try:
        return torch.device(name)
    except RuntimeError:
        raise UnusableInputError(f"unknown device {name!r} (use auto, cpu or cuda)") from None


def default_dtype(device: torch.device) -> torch.dtype:
    """bfloat16 on CUDA, float32 on the CPU."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32
