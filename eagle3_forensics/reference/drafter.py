"""A clean-room EAGLE-3 drafter in plain PyTorch, and a loader for every drafter format.

The model (``acceptance.md`` §1, ``eagle3-formats.md`` §0), written from the description:

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
``lm_head.weight`` and the ``d2t`` buffer (always held as offsets). EAGLE/SpecForge
``midlayer.*``, TRT-LLM ``midlayer.{i}.*``, SGLang ``additional_layers.{j}.*`` and any
``model.`` prefix map onto these names.

:func:`load_drafter` builds the module either the way the checkpoint's writer meant it
(``engine="reference"``: the intrinsic drafter) or the way an engine would load it
(``engine="sglang"``, ``"vllm"``, ``"eagle"``, ``"speculators"``). Engine views come only from
the rule tables in :mod:`eagle3_forensics.engines` (:func:`~eagle3_forensics.engines.simulate.simulate_load`,
:func:`~eagle3_forensics.engines.simulate.aux_ids_read`,
:func:`~eagle3_forensics.engines.simulate.engine_flag`): keys an engine drops stay at a fresh
(seeded) initialisation, tensors it takes from the target come from the target, ``d2t`` is
read in the table's encoding, aux ids and norm flags are read where and as that engine reads
them. There are no per-engine branches here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from eagle3_forensics.checks.aux_layers import trained_ids
from eagle3_forensics.checks.context import Context
from eagle3_forensics.checks.norms import trained_flags
from eagle3_forensics.engines import ENGINE_NAMES, release_label, resolve_release, split_spec
from eagle3_forensics.engines.rules import HF_DEFAULT_AUX, EngineRules
from eagle3_forensics.engines.simulate import (
    LoadReport,
    aux_capture,
    effective_draft_vocab,
    engine_flag,
    expected_params,
    fc_count,
    num_layers,
    rules_for,
    simulate_load,
)
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.io.checkpoint import Checkpoint, open_checkpoint
from eagle3_forensics.io.config import DrafterConfig
from eagle3_forensics.io.layout import detect_format
from eagle3_forensics.io.target import open_target

REFERENCE = "reference"
#: every view :func:`load_drafter` can build: the writer's own meaning, then each engine's
VIEW_NAMES: tuple[str, ...] = (REFERENCE, *ENGINE_NAMES)
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


# ---------------------------------------------------------------------------------------------
# the target side a loader needs
# ---------------------------------------------------------------------------------------------


class TargetSide(Protocol):
    """What :func:`load_drafter` needs from the target (``TargetModel`` and :class:`TargetFiles` have it)."""

    @property
    def num_layers(self) -> int: ...

    @property
    def hidden_size(self) -> int: ...

    @property
    def vocab_size(self) -> int: ...

    def embedding_weight(self) -> torch.Tensor | None: ...

    def lm_head_weight(self) -> torch.Tensor | None: ...


@dataclass
class TargetFiles:
    """A target directory read header-first (no model is built): enough to load a drafter."""

    path: Path
    num_layers: int
    hidden_size: int
    vocab_size: int
    _info: Any = field(repr=False, default=None)

    @property
    def architecture(self) -> str | None:
        archs = self._info.architectures if self._info is not None else []
        return archs[0] if archs else None

    def embedding_weight(self) -> torch.Tensor | None:
        return None if self._info is None else self._info.embedding()

    def lm_head_weight(self) -> torch.Tensor | None:
        return None if self._info is None else self._info.lm_head()


def target_files(path: str | Path) -> TargetFiles:
    info = open_target(path)
    n, h, v = info.num_hidden_layers, info.hidden_size, info.vocab_size
    if n is None or h is None or v is None:
        raise UnusableInputError(f"target config lacks num_hidden_layers/hidden_size/vocab_size: {path}")
    return TargetFiles(Path(path), n, h, v, info)


# ---------------------------------------------------------------------------------------------
# views: how a drafter is read
# ---------------------------------------------------------------------------------------------


@dataclass
class DrafterView:
    """How one view (the writer's meaning or one engine) built the drafter, for reports."""

    engine: str
    family: str
    aux_ids: list[int]  # HF hidden_states indices fed to fc
    aux_source: str
    flags: dict[str, bool]
    d2t_source: str
    from_checkpoint: list[str] = field(default_factory=list)
    from_target: list[str] = field(default_factory=list)
    unfilled: list[str] = field(default_factory=list)  # left uninitialised (stand-in: N(0, 1))
    defaulted: list[str] = field(default_factory=list)
    ignored_keys: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    revision: str | None = None
    release: str | None = None  # the engine release this view follows

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "release": self.release,
            "revision": self.revision,
            "family": self.family,
            "aux_ids_hf": self.aux_ids,
            "aux_source": self.aux_source,
            "flags": self.flags,
            "d2t_source": self.d2t_source,
            "from_checkpoint": self.from_checkpoint,
            "from_target": self.from_target,
            "unfilled": self.unfilled,
            "defaulted": self.defaulted,
            "ignored_keys": self.ignored_keys,
            "notes": self.notes,
        }


_ALIASES = {"draft_id_to_target_id": "d2t", "hot_token_id": "d2t"}


def canonical_name(name: str) -> str:
    """Any trainer's or engine's spelling -> this module's parameter name."""
    n = name.removeprefix("model.")
    n = _ALIASES.get(n, n)
    n = re.sub(r"^midlayer\.(\d+)\.", r"layers.\1.", n)
    n = re.sub(r"^midlayer\.", "layers.0.", n)
    return re.sub(r"^additional_layers\.(\d+)\.", lambda m: f"layers.{int(m.group(1)) + 1}.", n)


_FUSED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


_REST_LAYER = re.compile(r"^layers\.([1-9]\d*)\.(hidden_norm|input_layernorm)\.weight$")


def _engine_role(name: str, rules: EngineRules) -> str | None:
    """The canonical parameter an engine tensor plays (``None``: built but unused by the engine).

    SGLang 0.5.12+ normalises the input of layers >= 1 with their ``hidden_norm`` (fused with the
    residual) and never uses their ``input_layernorm``; the reference drafter's layers >= 1 have
    one input norm, ``input_layernorm`` (vLLM / speculators semantics).
    """
    m = _REST_LAYER.match(name)
    if m is None or rules.rest_layer_input_norm == "input_layernorm":
        return name
    if m.group(2) == rules.rest_layer_input_norm:
        return f"layers.{m.group(1)}.input_layernorm.weight"
    return None


def _param_components(param: str, rules: EngineRules) -> list[str]:
    """An engine parameter (possibly fused, possibly a consumed buffer) -> canonical names."""
    consumed = {r.target: r.pattern.strip("^$").replace("\\", "") for r in rules.consume}
    name = consumed.get(param.removeprefix("model."), param)
    name = canonical_name(name)
    for fused, parts in _FUSED.items():
        if f".{fused}." in name:
            return [name.replace(f".{fused}.", f".{p}.") for p in parts]
    return [name]


def _int(cfg: DrafterConfig, key: str) -> int | None:
    return cfg.int_field(key)


def _flag(cfg: DrafterConfig, key: str) -> bool:
    return cfg.get(key) is True


def _rope(cfg: DrafterConfig) -> tuple[float, dict[str, Any] | None]:
    theta = cfg.get("rope_theta")
    params: dict[str, Any] | None = None
    rp = cfg.get("rope_parameters")
    if isinstance(rp, dict):
        theta = rp.get("rope_theta", theta)
        if str(rp.get("rope_type", rp.get("type", "default"))) != "default":
            params = dict(rp)
    rs = cfg.get("rope_scaling")
    if (
        params is None
        and isinstance(rs, dict)
        and str(rs.get("rope_type", rs.get("type", "default"))) != "default"
    ):
        params = dict(rs)
    return float(theta) if isinstance(theta, (int, float)) else 10000.0, params


@dataclass
class _Plan:
    """Where each canonical tensor comes from, under one view."""

    view: DrafterView
    spec_flags: dict[str, bool]
    num_layers: int
    num_aux: int
    draft_vocab_size: int | None  # what the view expects (None: take lm_head rows)
    tensors: dict[str, torch.Tensor]  # canonical name -> tensor (checkpoint or target)
    zeros: set[str]  # canonical names set to an engine default of zeros
    qk_norm: bool = False  # the view builds Qwen3 q_norm/k_norm
    fc_bias: bool = False  # the view builds fc.bias


def _reference_plan(
    ckpt: Checkpoint, cfg: DrafterConfig, raw: dict[str, torch.Tensor], target: TargetSide | None
) -> _Plan:
    ctx = Context(ckpt)
    family = ctx.fmt.family
    ids, level = trained_ids(ctx)
    if ids is None:
        if target is None:
            raise UnusableInputError(
                "the drafter names no aux layers: pass the target to resolve the default"
            )
        ids = [target.num_layers * a // b + c for a, b, c in HF_DEFAULT_AUX]
        source = "trainer default [2, N//2, N-3]"
    else:
        field_name = (
            "eagle_config.eagle_aux_hidden_state_layer_ids"
            if level == "eagle_config"
            else "eagle_aux_hidden_state_layer_ids"
        )
        source = f"{field_name} as the {family} writer meant it" + (
            " (output-of-layer ids, +1)" if level == "eagle_config" else " (HF index)"
        )
    trained = trained_flags(ctx)
    notes: list[str] = []
    nbr = trained.get("norm_before_residual")
    if cfg.style == "speculators" and not isinstance(cfg.at("top", "norm_before_residual"), bool):
        notes.append(
            f"norm_before_residual not stated in the speculators config: {str(bool(nbr)).lower()}, "
            "speculators' own default (vLLM's speculators reader assumes true)"
        )
    flags = {
        "norm_before_residual": bool(nbr),
        "norm_before_fc": trained.get("norm_before_fc") is True,
        "fc_norm": trained.get("fc_norm") is True,
        "norm_output": trained.get("norm_output") is True,
        # SpecForge's norm_output=false: no final norm before lm_head
        "final_norm": not (cfg.style == "flat" and cfg.at("top", "norm_output") is False),
    }
    tensors: dict[str, torch.Tensor] = {}
    for key, t in raw.items():
        name = canonical_name(key)
        if name != "t2d":
            tensors[name] = t
    from_target: list[str] = []
    zeros: set[str] = set()
    if "embed_tokens.weight" not in tensors:
        emb = target.embedding_weight() if target is not None else None
        if emb is None:
            raise UnusableInputError(
                "the drafter has no embed_tokens and the target's embedding is unavailable"
            )
        tensors["embed_tokens.weight"] = emb
        from_target.append("embed_tokens.weight")
    if "lm_head.weight" not in tensors:
        head = target.lm_head_weight() if target is not None else None
        if head is None:
            raise UnusableInputError("the drafter has no lm_head and the target's is unavailable")
        tensors["lm_head.weight"] = head
        from_target.append("lm_head.weight")
    rows = int(tensors["lm_head.weight"].shape[0])
    vocab = _int(cfg, "vocab_size") or (target.vocab_size if target is not None else rows)
    if "d2t" in tensors:
        d2t_source = "checkpoint d2t, read as offsets (every trainer writes offsets)"
    elif rows < vocab:
        zeros.add("d2t")
        d2t_source = "no d2t in the checkpoint: zero offsets (identity), as the writers' loaders leave it"
    else:
        d2t_source = "full vocabulary: no mapping"
    view = DrafterView(
        REFERENCE,
        family,
        list(ids),
        source,
        flags,
        d2t_source,
        from_target=from_target,
        ignored_keys=sorted(k for k in raw if canonical_name(k) == "t2d"),
        notes=notes,
    )
    layers = _int(cfg, "num_hidden_layers") or 1
    qk = cfg.get("model_type") == "qwen3" or any(n.endswith("self_attn.q_norm.weight") for n in tensors)
    fc_bias = _flag(cfg, "bias") or "fc.bias" in tensors
    return _Plan(view, flags, layers, len(ids), _int(cfg, "draft_vocab_size"), tensors, zeros, qk, fc_bias)


def _engine_plan(
    rules: EngineRules,
    ckpt: Checkpoint,
    cfg: DrafterConfig,
    raw: dict[str, torch.Tensor],
    target: TargetSide | None,
) -> _Plan:
    release = rules
    rules = rules_for(release, cfg)
    report: LoadReport = simulate_load(release, ckpt, cfg)
    params = expected_params(rules, cfg, report.conditions)
    who = f"{rules.display} ({rules.release})"
    if not report.config_readable:
        raise UnusableInputError(f"{who} would refuse this drafter at start-up: {report.config_problem}")
    if report.build_errors:
        raise UnusableInputError(f"{who} would fail to build this drafter: {report.build_errors[0]}")
    if report.load_errors:
        chance = " (unless uninitialised memory happens to be valid)" if report.load_errors_by_chance else ""
        raise UnusableInputError(f"{who} would fail to load this drafter{chance}: {report.load_errors[0][1]}")
    rejected = report.keys_with("rejected")
    if rejected:
        raise UnusableInputError(
            f"{who} would refuse this drafter at load (key "
            f"{rejected[0]!r}{f' and {len(rejected) - 1} more' if len(rejected) > 1 else ''})"
        )

    def target_tensor(name: str) -> torch.Tensor:
        src: torch.Tensor | None = None
        if target is not None and name == "embed_tokens.weight":
            src = target.embedding_weight()
        elif target is not None and name == "lm_head.weight":
            src = target.lm_head_weight()
        if src is None:
            raise UnusableInputError(f"{rules.display} takes {name} from the target, which is unavailable")
        return src

    tensors: dict[str, torch.Tensor] = {}
    from_ckpt, from_target, ignored = [], [], []
    for fate in report.fates:
        role = _engine_role(canonical_name(fate.key), rules)
        name = role or canonical_name(fate.key)
        if fate.action in ("loaded", "renamed", "fused", "consumed") and role is None:
            ignored.append(fate.key)  # loaded into a parameter the engine never uses
        elif fate.action in ("loaded", "renamed", "fused", "consumed"):
            tensors[name] = raw[fate.key]
            from_ckpt.append(fate.key)
        elif fate.action == "overwritten":
            tensors[name] = target_tensor(name)
            from_target.append(name)
        else:  # dropped, skipped, warned
            ignored.append(fate.key)
    for param in report.from_target:
        for name in _param_components(param, rules):
            if name.startswith("verifier_"):
                continue  # speculators' verifier_lm_head / verifier_norm: not part of the drafter's forward
            if name not in tensors:
                tensors[name] = target_tensor(name)
                from_target.append(name)
    zeros: set[str] = set()
    defaulted: list[str] = []
    for param in report.defaulted:
        for name in _param_components(param, rules):
            if name == "t2d" or name in tensors:
                continue
            if name == "d2t":
                zeros.add(name)
            defaulted.append(name)
    fresh = sorted(
        {r for p in report.unfilled for n in _param_components(p, rules) if (r := _engine_role(n, rules))}
    )

    n_layers = target.num_layers if target is not None else None
    arch = getattr(target, "architecture", None) if target is not None else None
    reading = aux_capture(rules, cfg, arch, n_layers)
    assumed = "; target class assumed" if reading.rule_assumed else ""
    if reading.ids is not None and reading.captured is not None:
        hf = list(reading.captured)
        field_name = (
            "eagle_config.eagle_aux_hidden_state_layer_ids"
            if reading.level == "eagle_config"
            else "eagle_aux_hidden_state_layer_ids"
        )
        source = f"{field_name} read by {who} ({reading.rule.describe()}{assumed})"
    else:
        if n_layers is None:
            raise UnusableInputError(f"{who} uses its default aux layers: pass the target to resolve them")
        captured = reading.rule.capture(None, n_layers)
        if captured is None:
            raise UnusableInputError(f"{who} lets an external model choose the aux layers for this target")
        hf = captured
        source = f"{who} {reading.rule.describe()}{assumed}"
    flags = {f: engine_flag(rules, cfg, f) for f in ("norm_before_residual", "norm_before_fc", "fc_norm")}
    flags["norm_output"] = rules.norm_output_meaning == "post_norm_recurrence" and engine_flag(
        rules, cfg, "norm_output"
    )
    flags["final_norm"] = True  # engines always apply the final norm before lm_head
    n_aux, _ = fc_count(rules, cfg)
    if n_aux != len(hf):
        raise UnusableInputError(
            f"{who} captures {len(hf)} aux layers {hf} but builds fc for {n_aux} aux states: the draft step "
            "fails on the shape"
        )
    layers = num_layers(rules, cfg)
    v_cfg = effective_draft_vocab(rules, cfg)
    if "d2t" in tensors:
        d2t_source = f"checkpoint d2t read as {rules.d2t_encoding} ({who})"
    elif "d2t" in zeros:
        d2t_source = f"no d2t: {rules.missing_d2t}"
    else:
        d2t_source = "full vocabulary: no mapping"
    notes = list(rules.notes)
    view = DrafterView(
        rules.name,
        detect_format(ckpt, cfg).family,
        hf,
        source,
        flags,
        d2t_source,
        from_checkpoint=sorted(from_ckpt),
        from_target=sorted(set(from_target)),
        unfilled=fresh,
        defaulted=sorted(defaulted),
        ignored_keys=sorted(ignored),
        notes=notes,
        revision=rules.revision,
        release=release_label(rules),
    )
    if rules.d2t_encoding not in ("offsets", "absolute"):
        raise UnusableInputError(f"unknown d2t encoding {rules.d2t_encoding!r} in the {rules.name} table")
    if rules.d2t_encoding == "absolute" and "d2t" in tensors:
        d2t = tensors["d2t"].to(torch.int64)
        tensors["d2t"] = d2t - torch.arange(d2t.shape[0], dtype=torch.int64)
    qk = any(".q_norm." in p for p in params)
    fc_bias = any(p.endswith("fc.bias") for p in params)
    return _Plan(view, flags, layers, n_aux, v_cfg, tensors, zeros, qk, fc_bias)


# ---------------------------------------------------------------------------------------------
# the loader
# ---------------------------------------------------------------------------------------------


def _spec(cfg: DrafterConfig, plan: _Plan, target: TargetSide | None) -> DrafterSpec:
    h = _int(cfg, "hidden_size")
    nh = _int(cfg, "num_attention_heads")
    inter = _int(cfg, "intermediate_size")
    if h is None or nh is None or inter is None:
        raise UnusableInputError("drafter config lacks hidden_size, num_attention_heads or intermediate_size")
    nkv = _int(cfg, "num_key_value_heads") or nh
    hd = _int(cfg, "head_dim") or h // nh
    if nh % nkv:
        raise UnusableInputError(f"num_attention_heads {nh} is not a multiple of num_key_value_heads {nkv}")
    for name in ("lm_head.weight", "embed_tokens.weight"):
        if name not in plan.tensors:  # neither the checkpoint nor the target supplies it to this view
            raise UnusableInputError(f"{plan.view.engine}: the drafter has no {name} and none is borrowed")
    head = plan.tensors["lm_head.weight"]
    emb = plan.tensors["embed_tokens.weight"]
    vocab = _int(cfg, "vocab_size") or int(emb.shape[0])
    rows = int(head.shape[0])
    if plan.draft_vocab_size is not None and plan.draft_vocab_size != rows:
        raise UnusableInputError(
            f"{plan.view.engine}: lm_head has {rows} rows but the config's draft vocabulary "
            f"is {plan.draft_vocab_size} (a loud shape error at load)"
        )
    ht = _int(cfg, "target_hidden_size")
    if target is not None:
        if (ht or h) != target.hidden_size:
            raise UnusableInputError(
                f"hidden sizes do not fit the target: the drafter takes {ht or h}-wide target "
                f"states, the target's hidden_size is {target.hidden_size}"
            )
        if vocab != target.vocab_size:
            raise UnusableInputError(
                f"vocabularies do not fit: the drafter's vocab_size is {vocab}, the "
                f"target's is {target.vocab_size}"
            )
        bad = [i for i in plan.view.aux_ids if not 0 <= i <= target.num_layers]
        if bad:
            raise UnusableInputError(
                f"aux layer ids {plan.view.aux_ids} (HF index) do not fit a target with "
                f"{target.num_layers} layers"
            )
    theta, rope = _rope(cfg)
    f = plan.spec_flags
    return DrafterSpec(
        hidden_size=h,
        intermediate_size=inter,
        num_heads=nh,
        num_kv_heads=nkv,
        head_dim=hd,
        vocab_size=vocab,
        draft_vocab_size=rows,
        target_hidden_size=ht,
        num_layers=plan.num_layers,
        num_aux=plan.num_aux,
        rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        rope_theta=theta,
        rope_parameters=rope,
        hidden_act=str(cfg.get("hidden_act", "silu")),
        attention_bias=_flag(cfg, "attention_bias"),
        fc_bias=plan.fc_bias,
        qk_norm=plan.qk_norm,
        norm_before_residual=f["norm_before_residual"],
        norm_before_fc=f["norm_before_fc"],
        fc_norm=f["fc_norm"],
        post_norm_recurrence=f["norm_output"],
        final_norm=f["final_norm"],
    )


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


def load_drafter(
    path: str | Path,
    target: TargetSide | str | Path | None = None,
    engine: str = REFERENCE,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    seed: int = FRESH_INIT_SEED,
) -> Eagle3Drafter:
    """Build the drafter at ``path`` as ``engine`` would load it (``"reference"``: as its writer meant it).

    ``target`` supplies the layer count (default aux ids), the hidden size and vocabulary that
    must fit, and the embedding / lm_head an engine borrows; a directory path is read
    header-first. Loud engine failures (a config the engine cannot parse, a key it rejects, a
    shape that does not fit) and unusable input raise :class:`UnusableInputError`.
    """
    if engine != REFERENCE and split_spec(engine)[0] not in ENGINE_NAMES:
        raise UnusableInputError(f"unknown engine {engine!r}; choose from {', '.join(VIEW_NAMES)}")
    tside: TargetSide | None = target_files(target) if isinstance(target, (str, Path)) else target
    ckpt = open_checkpoint(path)
    cfg = DrafterConfig(ckpt.config)
    raw = {name: ckpt.read_tensor(name) for name in ckpt.names()}
    if engine == REFERENCE:
        plan = _reference_plan(ckpt, cfg, raw, tside)
    else:
        plan = _engine_plan(resolve_release(engine), ckpt, cfg, raw, tside)
    spec = _spec(cfg, plan, tside)
    model = Eagle3Drafter(spec, plan.view.aux_ids)
    fresh_init(model, seed)
    expected = dict(model.state_dict())
    filled: list[str] = []
    with torch.no_grad():
        for name, tensor in plan.tensors.items():
            if name not in expected:
                if plan.view.engine == REFERENCE:
                    plan.view.ignored_keys.append(name)
                continue
            dest = expected[name]
            if tuple(tensor.shape) != tuple(dest.shape):
                raise UnusableInputError(
                    f"{plan.view.engine}: {name} has shape {list(tensor.shape)}, the drafter "
                    f"built from its config needs {list(dest.shape)} (a loud shape error at load)"
                )
            dest.copy_(tensor.to(dest.dtype))
            filled.append(name)
        for name in plan.zeros:
            if name in expected:
                expected[name].zero_()
    never = sorted(set(expected) - set(filled) - plan.zeros - {"d2t"})
    plan.view.unfilled = sorted((set(plan.view.unfilled) | set(never)) - set(filled))
    fill_unfilled(model, plan.view.unfilled, seed)
    if plan.view.engine == REFERENCE:
        plan.view.from_checkpoint = sorted(
            k for k in raw if canonical_name(k) in filled and canonical_name(k) not in plan.view.from_target
        )
    plan.view.ignored_keys = sorted(set(plan.view.ignored_keys))
    model.view = plan.view
    dev = resolve_device(device)
    model = model.to(device=dev, dtype=dtype or default_dtype(dev))
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


# ---------------------------------------------------------------------------------------------
# export (used by the demo trainer)
# ---------------------------------------------------------------------------------------------


def export_tensors(
    model: Eagle3Drafter,
    *,
    layout: str = "midlayer",
    include_embed: bool = False,
    t2d: torch.Tensor | None = None,
    dtype: torch.dtype | None = None,
) -> dict[str, torch.Tensor]:
    """The drafter's tensors named as a trainer writes them.

    ``layout="midlayer"``: EAGLE/SpecForge names (``midlayer.*``; layers 1.. as ``midlayer.{i}.*``);
    ``layout="layers"``: speculators names (``layers.{i}.*``). ``d2t`` is written as offsets.
    """
    if layout not in ("midlayer", "layers"):
        raise ValueError("layout must be 'midlayer' or 'layers'")
    out: dict[str, torch.Tensor] = {}
    for name, t in model.state_dict().items():
        if name == "embed_tokens.weight" and not include_embed:
            continue
        key = name
        if layout == "midlayer":
            key = re.sub(r"^layers\.0\.", "midlayer.", key)
            key = re.sub(r"^layers\.(\d+)\.", r"midlayer.\1.", key)
        t = t.detach().cpu()
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        out[key] = t.contiguous()
    if t2d is not None:
        out["t2d"] = t2d.to(torch.bool).contiguous()
    return out
