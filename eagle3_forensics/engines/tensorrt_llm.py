"""TensorRT-LLM's PyTorch-backend EAGLE-3 drafter (``Eagle3ForCausalLM``), as a rule table.

Not pinned to a release: PyPI's newest ``tensorrt_llm`` (1.2.1) is a 10 kB sdist that downloads the
real wheel from NVIDIA's own index (unreachable here), and the repository snapshot (2.5 GB) was too
large to fetch, so no release tag could be checked out. The facts come from NVIDIA/TensorRT-LLM
**main-branch commits** (``version.py`` there reads 1.2.0rc2) and were not run (``proof``
``read``, no citations with sha256: there is no wheel to hash):

- ``tensorrt_llm/_torch/models/modeling_speculative.py`` @00679c66 (``Eagle3ForCausalLM``,
  registered as ``EAGLE3LlamaForCausalLM`` and ``Eagle3DeepSeekV3ForCausalLM``)
- ``tensorrt_llm/_torch/speculative/eagle3.py`` @001e6700 (``Eagle3SpecMetadata.layers_to_capture``)
- ``tensorrt_llm/_torch/models/modeling_utils.py`` (``_load_weights_impl``: module-driven loading)
- ``tensorrt_llm/llmapi/llm_args.py`` (``EagleDecodingConfig``)

The capture layers come only from the launch option ``eagle3_layers_to_capture`` (default
``{1, N//2-1, N-4}``), captured at the *end* of a decoder layer: HF index = id + 1.
"""

from __future__ import annotations

from eagle3_forensics.engines.rules import (
    AuxConvert,
    AuxRule,
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
    ParamRule,
    Prefix,
    UnknownKeys,
)

_REPO = "NVIDIA/TensorRT-LLM"
_ONE = "model.midlayer."  # one decoder layer
_MANY = "model.midlayer.{layer}."  # several: midlayer.{i}; layers after the first have no input_layernorm

TENSORRT_LLM_MAIN = EngineRules(
    name="tensorrt_llm",
    display="TensorRT-LLM",
    package=_REPO,
    first="00679c66",
    last="00679c66",
    pinned=False,
    sources=(
        f"{_REPO}@00679c66 tensorrt_llm/_torch/models/modeling_speculative.py",
        f"{_REPO}@001e6700 tensorrt_llm/_torch/speculative/eagle3.py",
        f"{_REPO} tensorrt_llm/_torch/models/modeling_utils.py (_load_weights_impl)",
        f"{_REPO} tensorrt_llm/llmapi/llm_args.py (EagleDecodingConfig)",
    ),
    drafter_class="Eagle3ForCausalLM",
    config_styles=frozenset({ConfigStyle.FLAT}),
    flat_architectures=None,  # the class follows the eagle3_model_arch launch option, not the config
    flat_required_fields=("hidden_size", "vocab_size", "num_attention_heads", "intermediate_size"),
    max_layers=None,
    config_fix="Write a flat Llama-style EAGLE-3 config (hidden_size, vocab_size, draft_vocab_size).",
    skip=(KeyRule(r"^t2d$", note="no module: never looked at"),),
    # load_weights: ^layers\.0\. -> midlayer. (one layer) or ^layers\.(\d+)\. -> midlayer.\1. (several)
    renames=(
        KeyRule(r"^layers\.0\.", "midlayer.", when="!multi_layer", note="layers.0. -> midlayer."),
        KeyRule(r"^layers\.(\d+)\.", r"midlayer.\1.", when="multi_layer", note="layers.N. -> midlayer.N."),
    ),
    fuse=(
        KeyRule(r"\.(q_proj|k_proj|v_proj)", ".qkv_proj"),
        KeyRule(r"\.(gate_proj|up_proj)", ".gate_up_proj"),
    ),
    prefix=Prefix.MODEL_UNLESS_LEADING_LM_HEAD,  # `model.` prepended to every name except lm_head
    # module-driven loading: checkpoint names that match no module are never looked at (inferred)
    unknown_keys=UnknownKeys.DROP,
    params=(
        # embed_tokens exists only when target_hidden_size != hidden_size; otherwise the target's is used
        ParamRule("model.embed_tokens.weight", when="!hidden_differs", filled_by=Fill.TARGET),
        ParamRule("model.embed_tokens.weight", when="hidden_differs"),
        ParamRule("model.fc.weight"),  # exists when num_capture_layers > 1 (3 by default)
        ParamRule("model.fc.bias", when="bias"),  # bias=getattr(config, "bias", False)
        ParamRule("model.input_norm.weight", when="norm_before_fc"),
        ParamRule("model.fc_norm.{j}.weight", when="fc_norm"),
        *(
            ParamRule(_ONE + n, when="!multi_layer")
            for n in (
                "self_attn.qkv_proj.weight",
                "self_attn.o_proj.weight",
                "mlp.gate_up_proj.weight",
                "mlp.down_proj.weight",
                "input_layernorm.weight",
                "hidden_norm.weight",
                "post_attention_layernorm.weight",
            )
        ),
        *(
            ParamRule(_MANY + n, when="multi_layer")
            for n in (
                "self_attn.qkv_proj.weight",
                "self_attn.o_proj.weight",
                "mlp.gate_up_proj.weight",
                "mlp.down_proj.weight",
                "hidden_norm.weight",
                "post_attention_layernorm.weight",
            )
        ),
        ParamRule(_MANY + "input_layernorm.weight", when="multi_layer", layers=Layers.FIRST),
        ParamRule("model.norm.weight"),
        # lm_head absent -> the target's head (load_lm_head_from_target)
        ParamRule("lm_head.weight", filled_by=Fill.TARGET_IF_ABSENT),
        # an int32 parameter, only when draft_vocab_size differs from vocab_size
        ParamRule("model.d2t", when="reduced_vocab", filled_by=Fill.DEFAULT_IF_ABSENT),
    ),
    d2t_encoding=D2tEncoding.OFFSETS,
    missing_d2t="identity (model.d2t stays zero)",
    aux_sources=(),  # the drafter config's ids are never read
    aux_rule_default=AuxRule(
        AuxConvert.LAUNCH_OPTION,
        source="tensorrt_llm/_torch/speculative/eagle3.py (Eagle3SpecMetadata.layers_to_capture)",
        option="eagle3_layers_to_capture",
        option_offset=1,  # captured at the end of layer i: HF hidden_states[i + 1]
    ),
    fc_count_from=(FcCount.LAUNCH_OPTION,),
    norm_flags=(
        NormFlag("norm_before_fc", (Level.EAGLE,)),  # nested eagle_config only
        NormFlag("fc_norm", (Level.TOP,)),
        NormFlag("norm_output", (Level.TOP,)),  # or eagle_config.return_hidden_post_norm
    ),
    norm_output_meaning=NormOutputMeaning.POST_NORM_RECURRENCE,
    honours_tie_word_embeddings=False,
    missing_draft_vocab_size=MissingDraftVocab.VOCAB_SIZE,  # a warning, then vocab_size
    null_draft_vocab_size=MissingDraftVocab.VOCAB_SIZE,
    notes=(
        "Read at main-branch commits, not a release tag (the PyPI package is a stub); not run.",
        "Capture layers come from the launch option eagle3_layers_to_capture, never from the drafter.",
        "No norm_before_residual path.",
    ),
)

RELEASES: tuple[EngineRules, ...] = (TENSORRT_LLM_MAIN,)

RULES = TENSORRT_LLM_MAIN
