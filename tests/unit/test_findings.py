"""Every finding code: a drafter that triggers it, and a near-identical one that does not.

The drafters are real checkpoints written by :mod:`builders` (safetensors + config.json);
``diagnose`` runs on them exactly as the CLI would.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
from builders import (
    CHAT_SPECIALS,
    SMALL_V,
    DrafterSpec,
    V,
    build_drafter,
    build_target,
    speculators_spec,
    write_checkpoint,
)
from paths import ROOT
from safetensors.torch import load_file

from eagle3_forensics.checks.diagnose import diagnose
from eagle3_forensics.findings import (
    CATALOGUE,
    CHECK_CATALOGUE,
    DATA_CATALOGUE,
    LAUNCH_CATALOGUE,
    SERVER_CATALOGUE,
    Finding,
    Severity,
)

ALL = frozenset({"sglang", "vllm", "eagle", "tensorrt_llm"})  # engines that read a flat config
OLD_SGLANG = ["sglang==0.5.11", "vllm", "eagle", "tensorrt_llm"]  # the flat-config engines, SGLang <= 0.5.11
SAME = "same"


@dataclass(frozen=True)
class Case:
    id: str
    code: str
    severity: str
    engines: frozenset[str | None]  # exactly the engines reporting ``code`` at ``severity``
    bad: dict[str, Any] = field(default_factory=dict)
    good: dict[str, Any] = field(default_factory=dict)
    base: str = "flat"  # "flat" | "speculators"
    good_base: str | None = None  # defaults to base
    run: Any = "all"  # the engines argument
    target: dict[str, Any] | None = None  # build_target kwargs (None: no target)
    good_target: Any = SAME
    evidence: dict[str, Any] = field(default_factory=dict)  # expected subset of one finding's evidence
    strict_negative: bool = True  # negative: the code is absent entirely (else: absent for ``engines``)

    def __str__(self) -> str:
        return self.id


def _spec(base: str, changes: dict[str, Any]) -> DrafterSpec:
    return (speculators_spec() if base == "speculators" else DrafterSpec()).with_(**changes)


def _run(
    tmp: Path, name: str, base: str, changes: dict[str, Any], run: Any, target: dict[str, Any] | None
) -> list[Finding]:
    path = build_drafter(tmp / name, _spec(base, changes))
    tpath = build_target(tmp / f"{name}-target", **target) if target is not None else None
    return diagnose(path, target=tpath, engines=run).findings


N1 = frozenset({None})  # checkpoint-level

CASES: list[Case] = [
    # -- structure ---------------------------------------------------------------------------
    Case(
        "not_eagle3_no_fc",
        "NOT_EAGLE3",
        "error",
        N1,
        bad={"remove_keys": ("fc.weight",)},
        evidence={"reason": "fc.weight missing"},
    ),
    Case(
        "not_eagle3_q_width",
        "NOT_EAGLE3",
        "error",
        N1,
        bad={"q_in": 48},
        evidence={"reason": "q_proj input width", "shape": [32, 48]},
    ),
    Case(
        "not_eagle3_fc_2h", "NOT_EAGLE3", "error", N1, bad={"fc_in": 64}, evidence={"reason": "fc width 2H"}
    ),
    Case(
        "not_eagle3_model_type",
        "NOT_EAGLE3",
        "error",
        N1,
        base="speculators",
        bad={"speculators_model_type": "medusa"},
        run=["vllm", "speculators"],
        evidence={"speculators_model_type": "medusa"},
    ),
    Case(
        "config_flat_architectures",
        "CONFIG_UNREADABLE_BY_ENGINE",
        "error",
        frozenset({"sglang"}),
        bad={"architectures": ["LlamaForCausalLM"]},
        run=["sglang", "vllm", "eagle"],
    ),
    Case(
        # no SGLang release up to 0.5.23 reads a speculators config ("Unrecognized model") [real loader]
        "config_speculators_on_sglang",
        "CONFIG_UNREADABLE_BY_ENGINE",
        "error",
        frozenset({"sglang"}),
        base="speculators",
        good_base="flat",
        run=["sglang", "vllm", "speculators"],
        strict_negative=False,
    ),
    Case(
        # the Llama class reads config.draft_vocab_size unconditionally: AttributeError [real loader]
        "config_sglang_needs_draft_vocab_size_key",
        "CONFIG_UNREADABLE_BY_ENGINE",
        "error",
        frozenset({"sglang"}),
        bad={"draft_vocab_size_in_config": False},
        run=["sglang"],
    ),
    Case(
        # vLLM rewrites a deepseek_v3 draft to its MTP model, which eagle3 rejects [real loader]
        "config_vllm_deepseek_v3_mtp",
        "CONFIG_UNREADABLE_BY_ENGINE",
        "error",
        frozenset({"vllm"}),
        bad={"model_type": "deepseek_v3"},
        run=["vllm"],
    ),
    Case(
        "config_eagle_needs_draft_vocab_size",
        "CONFIG_UNREADABLE_BY_ENGINE",
        "error",
        frozenset({"eagle"}),
        bad={"draft_vocab_size_in_config": False},
        run=["eagle"],
    ),
    Case(
        "config_flat_named_speculators",
        "CONFIG_UNREADABLE_BY_ENGINE",
        "error",
        frozenset({"speculators"}),
        run=["speculators"],
        good_base="speculators",
    ),
    Case(
        "config_flat_all_engines_info",
        "CONFIG_UNREADABLE_BY_ENGINE",
        "info",
        frozenset({"speculators"}),
        good_base="speculators",
        strict_negative=False,
    ),
    Case(
        # layers.0.* : SGLang <= 0.5.11 and the EAGLE reference drop them; 0.5.12+ maps midlayer -> layers.0
        "dropped_layers_prefix",
        "KEYS_DROPPED_BY_ENGINE",
        "error",
        frozenset({"sglang", "eagle"}),
        bad={"layout": "layers"},
        run=OLD_SGLANG,
    ),
    Case(
        "dropped_input_norm",
        "KEYS_DROPPED_BY_ENGINE",
        "error",
        frozenset({"sglang", "eagle", "tensorrt_llm"}),
        bad={"input_norm_key": True},
    ),
    Case(
        "dropped_speculators_midlayer",
        "KEYS_DROPPED_BY_ENGINE",
        "error",
        frozenset({"speculators"}),
        base="speculators",
        bad={"layout": "midlayer"},
        run=["vllm", "speculators"],
    ),
    Case(
        "dropped_harmless_extra",
        "KEYS_DROPPED_BY_ENGINE",
        "info",
        frozenset({"sglang", "eagle"}),
        bad={"extra_keys": {"verifier_lm_head.weight": ((4, 32), "float32")}},
        run=["sglang", "eagle"],
    ),
    Case(
        "rejected_qwen3_q_norm",
        "KEYS_REJECTED_BY_ENGINE",
        "error",
        frozenset({"vllm"}),
        bad={"extra_keys": {"midlayer.self_attn.q_norm.weight": ((16,), "float32")}},
    ),
    Case(
        "rejected_verifier_leftover",
        "KEYS_REJECTED_BY_ENGINE",
        "error",
        frozenset({"vllm"}),
        bad={"extra_keys": {"verifier_lm_head.weight": ((4, 32), "float32")}},
    ),
    Case(
        "unfilled_hidden_norm",
        "PARAMS_UNFILLED",
        "error",
        ALL,
        bad={"remove_keys": ("midlayer.hidden_norm.weight",)},
    ),
    Case(
        "unfilled_layers_prefix",
        "PARAMS_UNFILLED",
        "error",
        frozenset({"sglang", "eagle"}),
        bad={"layout": "layers"},
        run=OLD_SGLANG,
    ),
    Case(
        "unfilled_input_norm",
        "PARAMS_UNFILLED",
        "error",
        frozenset({"vllm", "speculators"}),
        base="speculators",
        bad={"norm_before_fc": True, "input_norm_key": False},
        good={"norm_before_fc": True},
        run=["vllm", "speculators"],
    ),
    Case(
        # SGLang <= 0.5.11 raises "EAGLE3 currently only supports 1 layer"; 0.5.12+ builds them
        "multi_layer_config",
        "MULTI_LAYER_DRAFTER",
        "error",
        frozenset({"sglang", "eagle"}),
        bad={"num_hidden_layers": 2},
        run=OLD_SGLANG,
    ),
    Case(
        "multi_layer_keys",
        "MULTI_LAYER_DRAFTER",
        "error",
        frozenset({"sglang", "eagle"}),
        bad={"extra_layers": 1},
        run=OLD_SGLANG,
    ),
    Case(
        # vLLM 0.10.2 built one layer
        "multi_layer_speculators",
        "MULTI_LAYER_DRAFTER",
        "error",
        frozenset({"vllm"}),
        base="speculators",
        bad={"num_hidden_layers": 2, "extra_layers": 1},
        run=["vllm==0.10.2", "speculators"],
    ),
    Case(
        "lm_head_missing",
        "LM_HEAD_MISSING",
        "error",
        ALL,
        bad={"lm_head": False},
        good={"lm_head": False, "draft_vocab": V},
    ),
    Case(
        "embed_wrong_width",
        "EMBED_TOKENS_PROBLEM",
        "error",
        N1,
        bad={"embed": "wrong_shape"},
        good={"embed": "target"},
    ),
    Case(
        "embed_absent_target_hidden_differs",
        "EMBED_TOKENS_PROBLEM",
        "error",
        ALL,
        bad={"target_hidden_size": 48},
        good={"target_hidden_size": 48, "embed": "target"},
    ),
    Case(
        # speculators under Transformers 5: uninitialised memory, copied from the verifier only if NaN
        "embed_absent_speculators",
        "EMBED_TOKENS_PROBLEM",
        "error",
        frozenset({"speculators"}),
        base="speculators",
        bad={"embed": "absent"},
        run=["vllm", "speculators"],
    ),
    Case(
        "embed_differs_from_target",
        "EMBED_TOKENS_PROBLEM",
        "warning",
        frozenset({"vllm"}),
        bad={"embed": "random"},
        good={"embed": "target"},
        target={"with_weights": True},
    ),
    Case(
        "embed_differs_speculators",
        "EMBED_TOKENS_PROBLEM",
        "warning",
        frozenset({"vllm", "speculators"}),
        base="speculators",
        bad={"embed": "random"},
        run=["vllm", "speculators"],
        target={"with_weights": True},
    ),
    # -- vocabulary mapping ---------------------------------------------------------------------
    Case(
        "d2t_missing",
        "D2T_MISSING",
        "error",
        ALL,
        bad={"d2t": "missing"},
        good={"d2t": "missing", "draft_vocab": V},
        evidence={"kind": "missing"},
    ),
    Case(
        "d2t_zeros_default_buffer",
        "D2T_MISSING",
        "error",
        ALL,
        bad={"d2t": "zeros"},
        good={"d2t": "zeros", "leading": SMALL_V},
        evidence={"kind": "identity_default"},
    ),
    Case(
        "d2t_zeros_default_buffers_both",
        "D2T_MISSING",
        "error",
        ALL,
        bad={"d2t": "zeros", "t2d": "all_true"},
        good={},
        evidence={"kind": "identity_default"},
    ),
    Case(
        "d2t_zeros_without_t2d",
        "D2T_MISSING",
        "warning",
        ALL,
        bad={"d2t": "zeros", "t2d": "missing"},
        good={"t2d": "missing"},
    ),
    Case(
        "d2t_missing_speculators",
        "D2T_MISSING",
        "error",
        frozenset({"vllm", "speculators"}),
        base="speculators",
        bad={"d2t": "missing"},
        run=["vllm", "speculators"],
    ),
    Case(
        "d2t_absolute",
        "D2T_ABSOLUTE",
        "error",
        ALL,
        bad={"d2t": "absolute"},
        evidence={
            "kind": "absolute",
            "agreement": {"offsets": 1 / SMALL_V, "absolute": 1.0, "double_offset": 1 / SMALL_V},
        },
    ),
    Case(
        "d2t_absolute_without_t2d",
        "D2T_ABSOLUTE",
        "error",
        ALL,
        bad={"d2t": "absolute", "t2d": "missing"},
        good={"t2d": "missing"},
    ),
    Case(
        "d2t_double_offset",
        "D2T_DOUBLE_OFFSET",
        "error",
        ALL,
        bad={"d2t": "double"},
        evidence={"kind": "double_offset", "first_bad_index": 1},
    ),
    Case(
        "d2t_double_offset_without_t2d",
        "D2T_DOUBLE_OFFSET",
        "error",
        ALL,
        bad={"d2t": "double", "t2d": "missing"},
        good={"t2d": "missing"},
    ),
    Case(
        "d2t_permuted",
        "D2T_T2D_MISMATCH",
        "error",
        N1,
        bad={"d2t": "permuted"},
        evidence={"kind": "permuted", "first_bad_index": 14, "bad_runs": [[14, 15], [20, 21]]},
    ),
    Case(
        "d2t_partial_corruption",
        "D2T_T2D_MISMATCH",
        "error",
        N1,
        bad={"d2t": "corrupt", "corrupt_index": 12},
        evidence={"kind": "partial_corruption", "first_bad_index": 12, "bad_runs": [[12, 13]]},
    ),
    Case("d2t_float", "D2T_INVALID", "error", N1, bad={"d2t": "float"}, evidence={"kind": "invalid_d2t"}),
    Case(
        "d2t_out_of_range",
        "D2T_INVALID",
        "error",
        N1,
        bad={"d2t": "out_of_range"},
        evidence={"kind": "out_of_range", "first_bad_index": SMALL_V - 1},
    ),
    Case("t2d_all_true", "T2D_INVALID", "error", N1, bad={"t2d": "all_true"}),
    Case("t2d_wrong_length", "T2D_INVALID", "error", N1, bad={"t2d": "wrong_len"}),
    Case("t2d_int8", "T2D_INVALID", "warning", N1, bad={"t2d": "int8"}),
    Case("sizes_lm_head_rows", "VOCAB_SIZE_INCONSISTENT", "error", N1, bad={"lm_head_rows": 30}),
    Case(
        "sizes_embed_rows",
        "VOCAB_SIZE_INCONSISTENT",
        "error",
        N1,
        bad={"embed": "target", "embed_rows": 60},
        good={"embed": "target"},
    ),
    Case("sizes_t2d_length", "VOCAB_SIZE_INCONSISTENT", "error", N1, bad={"t2d": "wrong_len"}),
    Case(
        "sizes_config_draft_vocab",
        "VOCAB_SIZE_INCONSISTENT",
        "error",
        N1,
        bad={"config_draft_vocab_size": 30},
    ),
    Case(
        # SGLang fails to build instead (CONFIG_UNREADABLE_BY_ENGINE), the EAGLE reference requires the key
        "draft_vocab_size_missing",
        "DRAFT_VOCAB_SIZE_MISSING",
        "error",
        frozenset({"vllm", "tensorrt_llm"}),
        bad={"draft_vocab_size_in_config": False},
    ),
    Case(
        "tied_on_reduced_vocab",
        "TIED_EMBEDDINGS_ON_REDUCED_VOCAB",
        "error",
        frozenset({"sglang"}),
        bad={"tie_word_embeddings": True},
        good={"tie_word_embeddings": True, "draft_vocab": V},
    ),
    Case("fc_width_four_states", "FC_WIDTH_MISMATCH", "error", ALL, bad={"fc_in": 4 * 32}),
    Case(
        # top-level ids size no Llama-class fc (vLLM included: only num_aux_hidden_states / nested ids) [real]
        "fc_width_four_ids",
        "FC_WIDTH_MISMATCH",
        "error",
        ALL,
        bad={"fc_in": 4 * 32, "aux_top": [2, 3, 4, 5]},
        good={"aux_top": [2, 4, 5]},
    ),
    Case(
        "fc_width_four_nested_ids",
        "FC_WIDTH_MISMATCH",
        "error",
        frozenset({"sglang", "eagle", "tensorrt_llm"}),
        bad={"fc_in": 4 * 32, "aux_nested": [1, 2, 3, 4]},
        run=OLD_SGLANG,
    ),
    Case(
        "fc_width_target_hidden",
        "FC_WIDTH_MISMATCH",
        "error",
        ALL,
        bad={"target_hidden_size": 48, "embed": "target", "fc_in": 3 * 32},
        good={"target_hidden_size": 48, "embed": "target"},
    ),
    # -- target fit ------------------------------------------------------------------------------
    Case("target_vocab", "TARGET_MISMATCH", "error", N1, target={"vocab": 80}, good_target={}),
    Case("target_hidden", "TARGET_MISMATCH", "error", N1, target={"hidden": 48}, good_target={}),
    Case(
        "target_verifier",
        "TARGET_MISMATCH",
        "error",
        N1,
        base="speculators",
        bad={"verifier_architectures": ["Qwen3ForCausalLM"]},
        run=["vllm", "speculators"],
        target={},
    ),
    # -- the target class -------------------------------------------------------------------------
    Case(
        "target_no_capture",
        "TARGET_NO_EAGLE3_CAPTURE",
        "error",
        frozenset({"vllm", "sglang"}),
        run=["vllm", "sglang"],
        target={"architectures": ["Gemma2ForCausalLM"]},
        good_target={"architectures": ["LlamaForCausalLM"]},
        evidence={"capture": "no_interface"},
    ),
    Case(
        "target_class_unknown",
        "TARGET_CLASS_UNKNOWN",
        "info",
        N1,
        run=["vllm", "sglang"],
        target={"architectures": ["NotARealForCausalLM"]},
        good_target={"architectures": ["Qwen3ForCausalLM"]},
    ),
    Case(
        "aux_unsorted",
        "AUX_LAYER_IDS_UNSORTED",
        "warning",
        frozenset({"vllm"}),
        bad={"aux_top": [5, 2, 4]},
        good={"aux_top": [2, 4, 5]},
        run=["vllm"],
        target={},
        evidence={"captured_order": [2, 4, 5]},
    ),
    # -- aux layers ------------------------------------------------------------------------------
    Case(
        "aux_negative",
        "AUX_LAYER_IDS_INVALID",
        "error",
        N1,
        bad={"aux_nested": [-1, 3, 5]},
        good={"aux_nested": [1, 3, 4]},
    ),
    Case(
        "aux_duplicate",
        "AUX_LAYER_IDS_INVALID",
        "error",
        N1,
        bad={"aux_nested": [3, 3, 5]},
        good={"aux_nested": [1, 3, 4]},
    ),
    Case(
        "aux_not_int",
        "AUX_LAYER_IDS_INVALID",
        "error",
        N1,
        bad={"aux_top": [2, "4", 5]},
        good={"aux_top": [2, 4, 5]},
    ),
    Case(
        "aux_count_vs_fc",
        "AUX_LAYER_IDS_INVALID",
        "error",
        N1,
        bad={"aux_nested": [1, 3]},
        good={"aux_nested": [1, 3, 4]},
    ),
    Case(
        # SGLang adds 1 (-> 10): never captured on an 8-layer target; nested 7 would be HF 8, which a
        # Llama target never captures either. vLLM 0.34 has no V1 runner: nested ids are never captured
        # (vllm==0.32.0 is covered in test_engine_releases.py)
        "aux_out_of_range",
        "AUX_LAYER_IDS_INVALID",
        "error",
        frozenset({"sglang"}),
        bad={"aux_nested": [1, 3, 9]},
        good={"aux_nested": [1, 3, 6]},
        target={},
    ),
    Case(
        # AngelSlim (Eagle3LlamaForCausalLM) captures HF [2, (N+1)//2, N-2] = [2, 4, 6] by default on an
        # 8-layer target; every engine that reads the class falls back to [2, 4, 5] (SGLang has no
        # Eagle3LlamaForCausalLM class: CONFIG_UNREADABLE_BY_ENGINE). Pinning the ids settles it.
        "aux_not_recorded_trainer_differs",
        "AUX_LAYER_IDS_NOT_RECORDED",
        "error",
        frozenset({"vllm", "eagle", "tensorrt_llm"}),
        bad={"architectures": ["Eagle3LlamaForCausalLM"]},
        good={"architectures": ["Eagle3LlamaForCausalLM"], "aux_top": [2, 4, 6], "aux_nested": [1, 3, 5]},
        target={},
        evidence={"trainer": "angelslim", "trainer_default_hf": [2, 4, 6], "engine_hf_ids": [2, 4, 5]},
        strict_negative=False,
    ),
    Case(
        "aux_nested_ignored_undecided",
        "AUX_LAYER_IDS_IGNORED_BY_ENGINE",
        "warning",
        frozenset({"vllm", "eagle", "tensorrt_llm"}),
        bad={"aux_nested": [1, 3, 5]},
    ),
    Case(
        # vLLM 0.32.0's default (V2) runner ignores nested ids; TensorRT-LLM takes its launch option
        "aux_nested_ignored",
        "AUX_LAYER_IDS_IGNORED_BY_ENGINE",
        "error",
        frozenset({"vllm", "eagle", "tensorrt_llm"}),
        bad={"aux_nested": [1, 3, 5]},
        good={"aux_nested": [1, 3, 4]},
        target={},
    ),
    Case(
        "aux_top_ignored_by_sglang",
        "AUX_LAYER_IDS_IGNORED_BY_ENGINE",
        "error",
        frozenset({"sglang"}),
        bad={"aux_top": [3, 4, 6]},
        good={"aux_top": [2, 4, 5]},
        run=["sglang"],
        target={},
    ),
    Case(
        "aux_shift_nested_copied",
        "AUX_LAYER_IDS_CONVENTION_SHIFT",
        "error",
        frozenset({"vllm"}),
        bad={"aux_nested": [1, 3, 5], "aux_top": [1, 3, 5]},
        good={"aux_nested": [1, 3, 5], "aux_top": [2, 4, 6]},
        evidence={"trained_hf_ids": [2, 4, 6], "engine_hf_ids": [1, 3, 5]},
    ),
    Case(
        "aux_shift_ambiguous",
        "AUX_LAYER_IDS_CONVENTION_SHIFT",
        "warning",
        frozenset({"vllm", "speculators"}),
        base="speculators",
        bad={"aux_top": [1, 3, 4]},
        run=["vllm", "speculators"],
        target={},
    ),
    Case(
        # fc takes 3 fused states, but no aux state is captured: SGLang skips fc, vLLM does not build it
        "aux_hidden_state_disabled",
        "AUX_HIDDEN_STATE_DISABLED",
        "error",
        frozenset({"sglang", "vllm"}),
        bad={"config_extra": {"eagle_config": {"use_aux_hidden_state": False}}},
        good={"config_extra": {"eagle_config": {"use_aux_hidden_state": True}}},
    ),
    # -- norms -----------------------------------------------------------------------------------
    Case(
        "norm_before_residual_sglang",
        "NORM_FLAGS_UNSUPPORTED",
        "error",
        frozenset({"sglang"}),
        bad={"norm_before_residual": True},
        good={"norm_before_residual": False},
        run=["sglang"],
    ),
    Case("norm_before_fc_key", "NORM_FLAGS_UNSUPPORTED", "error", ALL, bad={"input_norm_key": True}),
    Case(
        # norm_before_fc arrived in SGLang 0.5.17; TensorRT-LLM reads it only from the nested eagle_config
        "norm_before_fc_flag",
        "NORM_FLAGS_UNSUPPORTED",
        "error",
        frozenset({"sglang", "eagle", "tensorrt_llm"}),
        bad={"norm_before_fc": True},
        run=["sglang==0.5.16", "vllm", "eagle", "tensorrt_llm"],
    ),
    Case(
        # fc_norm arrived in SGLang 0.5.12
        "fc_norm_flag",
        "NORM_FLAGS_UNSUPPORTED",
        "error",
        frozenset({"sglang", "eagle"}),
        bad={"fc_norm": True},
        run=OLD_SGLANG,
    ),
    Case(
        # SpecForge's norm_output=false: no final norm before lm_head, which every engine applies
        "norm_output_false_flat",
        "NORM_FLAGS_UNSUPPORTED",
        "error",
        ALL,
        bad={"norm_output": False},
    ),
    Case(
        # speculators trains with its default false; vLLM's speculators reader assumes true
        "norm_before_residual_unstated",
        "NORM_FLAGS_UNSUPPORTED",
        "error",
        frozenset({"vllm"}),
        base="speculators",
        bad={"norm_before_residual": None},
        run=["vllm", "speculators"],
    ),
    Case(
        # SGLang (0.5.12+), vLLM and TensorRT-LLM read norm_output as post-norm recurrence
        "norm_output_clash",
        "NORM_OUTPUT_MEANING_CLASH",
        "warning",
        frozenset({"sglang", "vllm", "tensorrt_llm"}),
        bad={"norm_output": True},
    ),
    # -- rope / context ----------------------------------------------------------------------------
    Case(
        # every SGLang release described reads rope_parameters first; the EAGLE reference does not and
        # runs theta 10000 (the good drafter records it at both levels)
        "rope_parameters_only",
        "ROPE_MISMATCH",
        "warning",
        frozenset({"eagle"}),
        bad={"rope": "parameters", "rope_theta": 500000.0},
        good={"rope": "both", "rope_theta": 500000.0},
    ),
    Case(
        # the draft runs its own RoPE on every engine: a difference from the target is info only
        "rope_theta_vs_target",
        "ROPE_MISMATCH",
        "info",
        N1,
        target={"rope_theta": 500000.0},
        good_target={},
    ),
    Case(
        # the draft vocabulary (0..9 and scattered ids) lacks </think> placed at id 10; the good
        # target keeps every chat special token inside 0..9
        "special_tokens_think_end",
        "VOCAB_SPECIAL_TOKENS_MISSING",
        "error",
        N1,
        target={"chat": {**CHAT_SPECIALS, "</think>": 10}},
        good_target={"chat": CHAT_SPECIALS},
        evidence={"what": "structural", "kinds": ["reasoning_tag"]},
    ),
    Case(
        # the turn-end eos; the good target lacks only <|user|> in the draft vocabulary: a prompt-side
        # role marker the drafter never proposes, so no finding
        "special_tokens_turn_end",
        "VOCAB_SPECIAL_TOKENS_MISSING",
        "error",
        N1,
        target={"chat": {**CHAT_SPECIALS, "<|end|>": 10}},
        good_target={"chat": {**CHAT_SPECIALS, "<|user|>": 10}},
        evidence={"kinds": ["eos"], "roles": ["critical"]},
    ),
    Case(
        # SGLang refuses to start unless its env var is set; vLLM 0.34 raises a default-RoPE draft (info);
        # the other engines' behaviour is not recorded (one checkpoint-level warning)
        "context_too_short",
        "CONTEXT_TOO_SHORT",
        "warning",
        frozenset({None, "sglang"}),
        target={"max_pos": 8192},
        good_target={"max_pos": 2048},
        evidence={"drafter": 2048, "target": 8192},
    ),
    # -- weights -----------------------------------------------------------------------------------
    Case(
        "nan_fc",
        "WEIGHTS_NONFINITE",
        "error",
        N1,
        bad={"nan_in": "fc.weight"},
        evidence={"tensors": ["fc.weight"]},
    ),
    Case("nan_norm", "WEIGHTS_NONFINITE", "error", N1, bad={"nan_in": "norm.weight"}),
    Case("untrained_norms", "WEIGHTS_LOOK_UNTRAINED", "warning", N1, bad={"norms_all_ones": True}),
    Case(
        "untrained_zero_matrix",
        "WEIGHTS_LOOK_UNTRAINED",
        "warning",
        N1,
        bad={"zero_matrix": "midlayer.mlp.up_proj.weight"},
    ),
    Case("dtype_mixed", "DTYPE_MISMATCH", "warning", N1, bad={"mixed_dtype": ("fc.weight",)}),
    Case(
        "dtype_fp16_vs_bf16",
        "DTYPE_MISMATCH",
        "warning",
        N1,
        bad={"torch_dtype": "bfloat16", "dtype": "float16"},
        good={"torch_dtype": "bfloat16", "dtype": "bfloat16"},
    ),
    Case(
        "dtype_config_differs",
        "DTYPE_MISMATCH",
        "info",
        N1,
        bad={"torch_dtype": "bfloat16"},
        good={"torch_dtype": "bfloat16", "dtype": "bfloat16"},
    ),
    Case("dtype_d2t_int32", "DTYPE_MISMATCH", "info", N1, bad={"d2t": "int32"}),
]


def _resolve(changes: dict[str, Any]) -> dict[str, Any]:
    """Dtype names in the table -> torch dtypes (keeps the table printable)."""
    out = dict(changes)
    if isinstance(out.get("dtype"), str):
        out["dtype"] = getattr(torch, out["dtype"])
    if "extra_keys" in out:
        out["extra_keys"] = {k: (shape, getattr(torch, dt)) for k, (shape, dt) in out["extra_keys"].items()}
    return out


def _matches(expected: dict[str, Any], evidence: dict[str, Any]) -> bool:
    for key, want in expected.items():
        got = evidence.get(key)
        if isinstance(want, dict):
            if not isinstance(got, dict) or not all(
                got.get(k) == pytest.approx(v, abs=1e-6) for k, v in want.items()
            ):
                return False
        elif got != want:
            return False
    return True


@pytest.mark.parametrize("case", CASES, ids=str)
def test_positive(case: Case, tmp_path: Path) -> None:
    findings = _run(tmp_path, "bad", case.base, _resolve(case.bad), case.run, case.target)
    hits = [f for f in findings if f.code == case.code and f.severity == Severity(case.severity)]
    got = {f.engine for f in hits}
    assert got == set(case.engines), [(f.code, f.severity.value, f.engine, f.message) for f in findings]
    for f in hits:
        assert f.message and "\n" not in f.message
        assert f.fix or f.severity is Severity.INFO  # a harmless fact needs no fix
        json.dumps(f.to_dict())  # evidence is JSON-serialisable
        assert Finding.from_dict(f.to_dict()) == f
    if case.evidence:
        assert any(_matches(case.evidence, f.evidence) for f in hits), [f.evidence for f in hits]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_negative(case: Case, tmp_path: Path) -> None:
    target = case.target if case.good_target == SAME else case.good_target
    findings = _run(tmp_path, "good", case.good_base or case.base, _resolve(case.good), case.run, target)
    if case.strict_negative:
        bad = [f for f in findings if f.code == case.code]
    else:
        bad = [f for f in findings if f.code == case.code and f.engine in case.engines]
    assert not bad, [(f.code, f.severity.value, f.engine, f.message) for f in bad]


def test_every_code_has_a_case() -> None:
    """Every static-check code has a case here; live-server codes are tested in test_server_probe.py."""
    # AUX_LAYER_IDS_NOT_TRAINED comes only from a measurement on a target: tests/unit/test_aux_trained.py
    covered = {c.code for c in CASES} | {"CHECKPOINT_UNREADABLE", "AUX_LAYER_IDS_NOT_TRAINED"}
    assert covered == set(CHECK_CATALOGUE)
    # DATA_* codes (audit-data) have their positive and negative tests in tests/unit/test_data_audit.py,
    # LAUNCH_* codes (diagnose --launch) theirs in tests/unit/test_launch.py
    assert set(CATALOGUE) == set(CHECK_CATALOGUE) | set(SERVER_CATALOGUE) | set(DATA_CATALOGUE) | set(
        LAUNCH_CATALOGUE
    )
    launch_tests = (ROOT / "tests" / "unit" / "test_launch.py").read_text(encoding="utf-8")
    assert [code for code in LAUNCH_CATALOGUE if f'"{code}"' not in launch_tests] == []


def test_every_server_code_is_exercised_by_the_server_tests() -> None:
    text = "".join(
        (ROOT / "tests" / "integration" / name).read_text(encoding="utf-8")
        for name in ("test_server_probe.py", "test_server_verify.py")
    )
    assert [code for code in SERVER_CATALOGUE if f'"{code}"' not in text] == []


def test_every_code_exists_without_importing_its_source() -> None:
    """The catalogue is static: a server code is valid in a process that never imported the probe."""
    import subprocess
    import sys

    code = (
        "import sys; from eagle3_forensics.findings import Finding, Severity; "
        "Finding('ENGINE_GAP', Severity.ERROR, 'x'); "
        "assert 'eagle3_forensics.probe.server.core' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- CHECKPOINT_UNREADABLE -----------------------------------------------------------------------


def _missing(tmp: Path) -> Path:
    return tmp / "does-not-exist"


def _empty(tmp: Path) -> Path:
    (tmp / "empty").mkdir()
    return tmp / "empty"


def _bad_json(tmp: Path) -> Path:
    p = build_drafter(tmp / "d")
    (p / "config.json").write_text("{not json", encoding="utf-8")
    return p


def _no_config(tmp: Path) -> Path:
    p = build_drafter(tmp / "d")
    (p / "config.json").unlink()
    return p


def _truncated(tmp: Path) -> Path:
    p = build_drafter(tmp / "d")
    f = p / "model.safetensors"
    f.write_bytes(f.read_bytes()[:4])
    return p


def _truncated_header(tmp: Path) -> Path:
    p = build_drafter(tmp / "d")
    f = p / "model.safetensors"
    f.write_bytes(f.read_bytes()[:100])
    return p


def _no_weights(tmp: Path) -> Path:
    p = build_drafter(tmp / "d")
    (p / "model.safetensors").unlink()
    return p


@pytest.mark.parametrize(
    "make",
    [_missing, _empty, _bad_json, _no_config, _truncated, _truncated_header, _no_weights],
    ids=lambda f: f.__name__.strip("_"),
)
def test_checkpoint_unreadable(make: Any, tmp_path: Path) -> None:
    d = diagnose(make(tmp_path))
    assert d.exit_code == 2
    assert [(f.code, f.severity, f.engine) for f in d.findings] == [
        ("CHECKPOINT_UNREADABLE", Severity.ERROR, None)
    ]
    f = d.findings[0]
    assert f.evidence["reason"] and "\n" not in f.evidence["reason"]


def test_checkpoint_readable_negative(tmp_path: Path) -> None:
    d = diagnose(build_drafter(tmp_path / "d"))
    assert d.exit_code == 0
    assert not any(f.code == "CHECKPOINT_UNREADABLE" for f in d.findings)


def test_unreadable_target_is_unusable(tmp_path: Path) -> None:
    d = diagnose(build_drafter(tmp_path / "d"), target=tmp_path / "no-target")
    assert d.exit_code == 2
    assert [f.code for f in d.findings] == ["CHECKPOINT_UNREADABLE"]


# -- healthy drafters ----------------------------------------------------------------------------


def test_healthy_flat_has_no_errors(tmp_path: Path) -> None:
    path = build_drafter(tmp_path / "d")
    d2t = load_file(str(path / "model.safetensors"))["d2t"]
    assert d2t[:10].eq(0).all() and d2t.ne(0).any()  # the seed-story case: leading zeros are correct
    d = diagnose(path, engines="all")
    assert d.exit_code == 0
    assert not d.errors
    assert d.format.startswith("specforge")
    # The only finding: speculators never reads a flat config (information, not a problem).
    assert [(f.code, f.severity, f.engine) for f in d.findings] == [
        ("CONFIG_UNREADABLE_BY_ENGINE", Severity.INFO, "speculators")
    ]


def test_healthy_flat_with_target_has_no_findings(tmp_path: Path) -> None:
    # ids pinned where every engine reads them (HF [2, 4, 5]): nothing to say
    path = build_drafter(tmp_path / "d", aux_top=[2, 4, 5], aux_nested=[1, 3, 4])
    target = build_target(tmp_path / "t", with_weights=True)
    d = diagnose(path, target=target, engines=["sglang", "vllm", "eagle"])
    assert d.findings == [], [(f.code, f.engine, f.message) for f in d.findings]
    assert d.exit_code == 0


def test_unrecorded_ids_warn_where_trainer_and_engine_agree(tmp_path: Path) -> None:
    """No ids: the SpecForge default equals every fallback, yet the trained layers are only presumed."""
    path = build_drafter(tmp_path / "d")
    target = build_target(tmp_path / "t", with_weights=True)
    d = diagnose(path, target=target, engines=["sglang", "vllm", "eagle"])
    assert {(f.code, f.severity, f.engine) for f in d.findings} == {
        ("AUX_LAYER_IDS_NOT_RECORDED", Severity.WARNING, e) for e in ("sglang", "vllm", "eagle")
    }
    f = next(f for f in d.findings if f.engine == "vllm")
    assert f.evidence["engine_hf_ids"] == [2, 4, 5] and f.evidence["trainer"] == "specforge"
    assert "not recorded" in f.message and "--measure-aux" in (f.fix or "")
    assert d.exit_code == 0
    assert not diagnose(path, engines=["vllm"]).findings  # without a target nothing numeric to say


@pytest.mark.parametrize("engines", [["vllm", "speculators"], ["vllm"], ["speculators"]])
@pytest.mark.parametrize("with_target", [False, True])
def test_healthy_speculators_has_no_errors(engines: list[str], with_target: bool, tmp_path: Path) -> None:
    path = build_drafter(tmp_path / "d", speculators_spec())
    target = build_target(tmp_path / "t", with_weights=True) if with_target else None
    d = diagnose(path, target=target, engines=engines)
    assert d.exit_code == 0
    assert d.findings == [], [(f.code, f.engine, f.message) for f in d.findings]
    assert d.format.startswith("speculators")


def test_healthy_full_vocab_has_no_errors(tmp_path: Path) -> None:
    d = diagnose(build_drafter(tmp_path / "d", draft_vocab=V), engines=["sglang", "eagle", "tensorrt_llm"])
    assert d.exit_code == 0, [(f.code, f.engine, f.message) for f in d.errors]


def test_vllm_rejects_d2t_of_a_full_vocabulary_drafter(tmp_path: Path) -> None:
    """vLLM 0.32.0 builds draft_id_to_target_id only for a reduced vocabulary: a d2t key then has no
    parameter and the load fails (seen with vLLM's real loader); without d2t the drafter loads."""
    d = diagnose(build_drafter(tmp_path / "d", draft_vocab=V), engines=["vllm"])
    rejected = [f for f in d.errors if f.code == "KEYS_REJECTED_BY_ENGINE"]
    assert rejected and rejected[0].evidence["rejected"] == ["d2t"]
    clean = diagnose(build_drafter(tmp_path / "e", draft_vocab=V, d2t="missing"), engines=["vllm"])
    assert clean.exit_code == 0, [(f.code, f.message) for f in clean.errors]


def test_identity_selection_with_zero_d2t_is_healthy(tmp_path: Path) -> None:
    """All-zero d2t is right when the draft vocabulary is exactly target ids 0..v-1."""
    d = diagnose(build_drafter(tmp_path / "d", leading=SMALL_V))
    assert d.exit_code == 0
    assert not any(f.code.startswith("D2T") for f in d.findings)


def test_seed_story_wrong_fix_is_double_offset(tmp_path: Path) -> None:
    """Applying the 'absolute -> offsets' fix to a correct file is reported, the correct file is not."""
    good = build_drafter(tmp_path / "good")
    tensors = load_file(str(good / "model.safetensors"))
    tensors["d2t"] = tensors["d2t"] - torch.arange(SMALL_V)
    fixed = write_checkpoint(tmp_path / "fixed", json.loads((good / "config.json").read_text()), tensors)
    assert not any(f.code.startswith("D2T") for f in diagnose(good).findings)
    hits = [f for f in diagnose(fixed).findings if f.code == "D2T_DOUBLE_OFFSET"]
    assert {f.engine for f in hits} == ALL
    assert all(f.severity is Severity.ERROR for f in hits)


def test_findings_sorted_errors_first(tmp_path: Path) -> None:
    d = diagnose(build_drafter(tmp_path / "d", layout="layers", norms_all_ones=True, d2t="absolute"))
    ranks = [f.severity.rank for f in d.findings]
    assert ranks == sorted(ranks)
    assert d.exit_code == 1


# -- documentation ------------------------------------------------------------------------------


def test_every_code_documented() -> None:
    text = (ROOT / "docs" / "findings.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^## ([A-Z0-9_]+)\s*$", text, flags=re.MULTILINE))
    missing = [code for code in CATALOGUE if code not in headings]
    assert not missing, missing
    # and in catalogue order
    order = [h for h in re.findall(r"^## ([A-Z0-9_]+)\s*$", text, flags=re.MULTILINE) if h in CATALOGUE]
    assert order == list(CATALOGUE)
