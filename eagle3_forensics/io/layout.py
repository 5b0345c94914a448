"""Which trainer wrote a drafter, and how its tensor names are laid out.

Format families (``docs/reference/formats.md`` §9 step 1):

* ``speculators`` — config has ``speculators_model_type`` / ``transformer_layer_config``;
* ``specforge`` — flat config with ``architectures == ["LlamaForCausalLMEagle3"]``;
* ``eagle`` — flat ``LlamaForCausalLM`` config carrying ``draft_vocab_size`` (SafeAILab);
* ``unknown`` — anything else (checks still run on what they can read).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from eagle3_forensics.io.checkpoint import Checkpoint
from eagle3_forensics.io.config import DrafterConfig

# Key layout of the decoder layer, tried in order; first pattern with a hit wins.
_LAYOUTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("midlayer", re.compile(r"^(model\.)?midlayer\.")),
    ("layers", re.compile(r"^layers\.\d+\.")),
    ("model.layers", re.compile(r"^model\.layers\.\d+\.")),
)

# Tensor names (after stripping an optional ``model.`` prefix) that an EAGLE-3 drafter trains
# or ships, in any trainer's spelling. Anything else is an extra (optimizer leftovers, verifier
# copies) whose loss is harmless.
DRAFTER_WEIGHT = re.compile(
    r"^(fc\.(weight|bias)|norm\.weight|lm_head\.weight|embed_tokens\.weight|input_norm\.weight"
    r"|fc_norm\.\d+\.weight|d2t|t2d"
    r"|(midlayer|layers\.\d+|midlayer\.\d+|additional_layers\.\d+)\."
    r"(self_attn\.(q_proj|k_proj|v_proj|o_proj|qkv_proj|q_norm|k_norm"
    r"|q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj|q_a_layernorm|kv_a_layernorm"
    r"|fused_qkv_a_proj_with_mqa|fused_qkv_a_proj)\.(weight|bias)"
    r"|mlp\.(gate_proj|up_proj|down_proj|gate_up_proj)\.weight"
    r"|(input_layernorm|hidden_norm|post_attention_layernorm)\.weight))$"
)
_LAYER_INDEX = re.compile(r"^(?:model\.)?(?:layers|midlayer|additional_layers)\.(\d+)\.")


def is_drafter_weight(name: str) -> bool:
    """True for names an EAGLE-3 drafter trains or needs (in any trainer's spelling)."""
    return bool(DRAFTER_WEIGHT.match(name.removeprefix("model.")))


@dataclass(frozen=True)
class FormatInfo:
    family: str  # speculators | specforge | eagle | unknown
    config_style: str  # flat | speculators
    key_layout: str  # midlayer | layers | model.layers | mixed | none
    decoder_layers: int  # distinct decoder layer indices seen in the keys

    @property
    def label(self) -> str:
        return f"{self.family} ({self.config_style} config, {self.key_layout} keys)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "config_style": self.config_style,
            "key_layout": self.key_layout,
            "decoder_layers": self.decoder_layers,
            "label": self.label,
        }


def key_layout(names: list[str]) -> str:
    hits = [name for name, pat in _LAYOUTS if any(pat.match(k) for k in names)]
    if not hits:
        return "none"
    return hits[0] if len(hits) == 1 else "mixed"


def decoder_layer_count(names: list[str]) -> int:
    indices = set()
    has_unindexed_midlayer = False
    for k in names:
        m = _LAYER_INDEX.match(k)
        if m:
            indices.add(int(m.group(1)))
        elif k.removeprefix("model.").startswith("midlayer."):
            has_unindexed_midlayer = True
    if has_unindexed_midlayer:
        indices.add(0)  # ``midlayer.*`` is layer 0; ``midlayer.N.*`` (TRT-LLM) / extras add to it
    return len(indices)


def family_of(cfg: DrafterConfig) -> str:
    if cfg.style == "speculators":
        return "speculators"
    archs = cfg.architectures
    if any("Eagle3" in a or "EAGLE3" in a for a in archs):
        return "specforge"
    if archs and archs[0] == "LlamaForCausalLM" and cfg.draft_vocab_size is not None:
        return "eagle"
    return "unknown"


def detect_format(ckpt: Checkpoint, cfg: DrafterConfig | None = None) -> FormatInfo:
    cfg = cfg or DrafterConfig(ckpt.config)
    names = ckpt.names()
    return FormatInfo(family_of(cfg), cfg.style, key_layout(names), decoder_layer_count(names))
