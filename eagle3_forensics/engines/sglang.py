"""SGLang's ``LlamaForCausalLMEagle3`` loader, as a rule table.

Describes sgl-project/sglang ``python/sglang/srt/models/llama_eagle3.py`` @03d5a777 (one
decoder layer; the older d737979c refuses more with ``ValueError``), ``eagle_worker.py``
@00559eac (embedding/head sharing) and the model-config revision that carries the
``Eagle3Speculator`` shim (``_load_eagle3_speculator_model``).
"""

from __future__ import annotations

from eagle3_forensics.engines.rules import (
    DEFAULT_IF_ABSENT,
    DROP,
    FROM_CHECKPOINT,
    FROM_TARGET,
    HF_DEFAULT_AUX,
    NAME_THEN_MODEL,
    AuxSource,
    EngineRules,
    KeyRule,
    ParamRule,
)

RULES = EngineRules(
    name="sglang",
    display="SGLang",
    revision="sgl-project/sglang llama_eagle3.py@03d5a777, eagle_worker.py@00559eac",
    sources=(
        "sgl-project/sglang python/sglang/srt/models/llama_eagle3.py@03d5a777",
        "sgl-project/sglang python/sglang/srt/speculative/eagle_worker.py@00559eac",
        "sgl-project/sglang python/sglang/srt/utils/hf_transformers/config.py (speculators shim)",
    ),
    config_styles=frozenset({"flat", "speculators"}),
    flat_architectures=("LlamaForCausalLMEagle3",),
    # The shim converts a speculators config only when architectures[0] is exactly this.
    speculators_architectures=("Eagle3Speculator",),
    flat_required_fields=("hidden_size", "vocab_size", "num_attention_heads", "intermediate_size"),
    max_layers=1,
    skip=(KeyRule(r"t2d", note="t2d is never read"),),
    consume=(KeyRule(r"d2t", "hot_token_id", note="hot_token_id = d2t + arange(len(d2t))"),),
    renames=(),
    fuse=(
        KeyRule(r"\.(q_proj|k_proj|v_proj)\.", ".qkv_proj."),
        KeyRule(r"\.(gate_proj|up_proj)\.", ".gate_up_proj."),
    ),
    prefix=NAME_THEN_MODEL,
    unknown_keys=DROP,
    params=(
        # set_embed overwrites the draft embedding unless target_hidden_size differs from hidden_size.
        ParamRule("model.embed_tokens.weight", when="!hidden_differs", filled_by=FROM_TARGET),
        ParamRule("model.embed_tokens.weight", when="hidden_differs"),
        ParamRule("model.fc.weight"),
        ParamRule("model.fc.bias", when="bias"),
        ParamRule("model.midlayer.self_attn.qkv_proj.weight"),
        ParamRule("model.midlayer.self_attn.o_proj.weight"),
        ParamRule("model.midlayer.mlp.gate_up_proj.weight"),
        ParamRule("model.midlayer.mlp.down_proj.weight"),
        ParamRule("model.midlayer.input_layernorm.weight"),
        ParamRule("model.midlayer.hidden_norm.weight"),
        ParamRule("model.midlayer.post_attention_layernorm.weight"),
        ParamRule("model.norm.weight"),
        # tie_word_embeddings binds lm_head to the embedding; a null draft_vocab_size borrows the target head.
        ParamRule("lm_head.weight", when="!tied & has_draft_vocab_size"),
        ParamRule("lm_head.weight", when="!tied & !has_draft_vocab_size", filled_by=FROM_TARGET),
        ParamRule("hot_token_id", when="reduced_vocab", filled_by=DEFAULT_IF_ABSENT),
    ),
    d2t_encoding="offsets",
    missing_d2t="identity (hot_token_id stays None)",
    aux_sources=(AuxSource("eagle_config", +1),),  # explicit ids are output-of-layer: +1 applied
    aux_default_hf=HF_DEFAULT_AUX,
    aux_count_from_ids=False,
    norm_flags=frozenset(),  # residual always before hidden_norm; no input_norm/fc_norm/post-norm feedback
    norm_output_meaning=None,
    speculators_norm_before_residual_default=None,
    honours_tie_word_embeddings=True,
    missing_draft_vocab_size="target_head",
    notes=(
        "Names that are neither a parameter nor 'model.'+parameter are dropped without any warning.",
        "No missing-weight check: unfilled parameters keep their allocation.",
        "Aux ids come only from nested eagle_config inside a bare try/except; anything else means default.",
    ),
)

_ = FROM_CHECKPOINT  # default of ParamRule.filled_by, imported for readers of the table
