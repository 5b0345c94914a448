"""vLLM's ``Eagle3LlamaForCausalLM`` loader, as a rule table.

Describes vllm-project/vllm ``vllm/model_executor/models/llama_eagle3.py`` (the revision with
``norm_before_fc`` / ``fc_norm`` / ``norm_output`` and a ``WeightsMapper``; PRs #38111, #42143,
#46488), ``vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py`` @0cfdd2e1 (aux ids) and the
speculators config shim ``vllm/transformers_utils/configs/speculators/algos.py``.
"""

from __future__ import annotations

from eagle3_forensics.engines.rules import (
    DEFAULT_IF_ABSENT,
    HF_DEFAULT_AUX,
    MODEL_EXCEPT_LM_HEAD,
    REJECT,
    TARGET_IF_ABSENT,
    AuxSource,
    EngineRules,
    KeyRule,
    ParamRule,
)

RULES = EngineRules(
    name="vllm",
    display="vLLM",
    revision="vllm-project/vllm llama_eagle3.py (norm_before_fc/fc_norm/norm_output era), eagle3_utils.py@0cfdd2e1",
    sources=(
        "vllm-project/vllm vllm/model_executor/models/llama_eagle3.py (PRs #38111, #42143, #46488)",
        "vllm-project/vllm vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py@0cfdd2e1",
        "vllm-project/vllm vllm/transformers_utils/configs/speculators/algos.py (update_eagle3)",
        "vllm-project/vllm vllm/model_executor/models/utils.py (AutoWeightsLoader)",
    ),
    config_styles=frozenset({"flat", "speculators"}),
    flat_architectures=None,  # EAGLEConfig prefixes 'Eagle3' itself
    speculators_architectures=None,
    flat_required_fields=("hidden_size", "vocab_size", "num_attention_heads", "intermediate_size"),
    max_layers=None,  # multi-layer EAGLE-3 since PR #26164
    skip=(
        KeyRule(r"^t2d$", note="t2d is never read"),
        KeyRule(r"^input_norm\.", when="!norm_before_fc", note="skipped when norm_before_fc is false"),
    ),
    consume=(KeyRule(r"^d2t$", "draft_id_to_target_id", note="renamed; targets = arange(v) + d2t"),),
    renames=(KeyRule(r"^midlayer\.", "layers.0.", note="midlayer. -> layers.0."),),
    fuse=(
        KeyRule(r"\.(q_proj|k_proj|v_proj)\.", ".qkv_proj."),
        KeyRule(r"\.(gate_proj|up_proj)\.", ".gate_up_proj."),
    ),
    prefix=MODEL_EXCEPT_LM_HEAD,
    unknown_keys=REJECT,  # AutoWeightsLoader: "There is no module or parameter named ..."
    params=(
        # Shared from the target when absent or identical; the draft's own copy is kept when it differs.
        ParamRule("model.embed_tokens.weight", filled_by=TARGET_IF_ABSENT),
        ParamRule("model.fc.weight"),
        ParamRule("model.fc.bias", when="bias"),
        ParamRule("model.input_norm.weight", when="norm_before_fc"),
        ParamRule("model.fc_norm.{j}.weight", when="fc_norm"),
        ParamRule("model.layers.{layer}.self_attn.qkv_proj.weight"),
        ParamRule("model.layers.{layer}.self_attn.o_proj.weight"),
        ParamRule("model.layers.{layer}.mlp.gate_up_proj.weight"),
        ParamRule("model.layers.{layer}.mlp.down_proj.weight"),
        ParamRule("model.layers.{layer}.input_layernorm.weight"),
        ParamRule("model.layers.{layer}.post_attention_layernorm.weight"),
        ParamRule("model.layers.0.hidden_norm.weight", first_layer_only=True),
        ParamRule("model.norm.weight"),
        ParamRule("lm_head.weight", when="reduced_vocab"),
        ParamRule("lm_head.weight", when="!reduced_vocab", filled_by=TARGET_IF_ABSENT),
        ParamRule("draft_id_to_target_id", when="reduced_vocab", filled_by=DEFAULT_IF_ABSENT),
    ),
    d2t_encoding="offsets",
    missing_d2t="identity (draft_id_to_target_id stays zero)",
    aux_sources=(AuxSource("top", 0),),  # used as-is: input-of-layer = HF index
    aux_default_hf=HF_DEFAULT_AUX,
    aux_count_from_ids=True,
    norm_flags=frozenset({"norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"}),
    norm_output_meaning="post_norm_recurrence",
    speculators_norm_before_residual_default=True,  # update_eagle3 assumes true when the key is absent
    honours_tie_word_embeddings=False,
    missing_draft_vocab_size="vocab_size",
    notes=(
        "Unknown names raise ValueError at load (loud).",
        "Missing weights are not reported by the revision read.",
        "Some runner revisions and plugins also read nested eagle_config ids as-is (no +1).",
    ),
)
