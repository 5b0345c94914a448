"""vllm-project/speculators' ``Eagle3DraftModel`` loader, as a rule table.

Describes vllm-project/speculators @c05b95b3: ``src/speculators/models/eagle3/core.py`` and
``model_definitions.py`` (Transformers ``from_pretrained``: unexpected keys logged as
warnings, ``embed_tokens``/``d2t``/``t2d`` in ``_keys_to_ignore_on_load_missing``).
"""

from __future__ import annotations

from eagle3_forensics.engines.rules import (
    AS_IS,
    DEFAULT_IF_ABSENT,
    HF_DEFAULT_AUX,
    WARN,
    AuxSource,
    EngineRules,
    KeyRule,
    ParamRule,
)

RULES = EngineRules(
    name="speculators",
    display="speculators",
    revision="vllm-project/speculators src/speculators/models/eagle3@c05b95b3",
    sources=(
        "vllm-project/speculators src/speculators/models/eagle3/core.py@c05b95b3",
        "vllm-project/speculators src/speculators/models/eagle3/config.py@c05b95b3",
    ),
    config_styles=frozenset({"speculators"}),
    flat_architectures=(),
    speculators_architectures=None,
    flat_required_fields=(),
    max_layers=None,
    skip=(KeyRule(r"^verifier_(lm_head|norm)\.", note="in _keys_to_ignore_on_save"),),
    consume=(),
    renames=(),
    fuse=(),
    prefix=AS_IS,
    unknown_keys=WARN,
    params=(
        ParamRule("embed_tokens.weight", filled_by=DEFAULT_IF_ABSENT),
        ParamRule("fc.weight"),
        ParamRule("input_norm.weight", when="norm_before_fc"),
        ParamRule("fc_norm.{j}.weight", when="fc_norm"),
        ParamRule("layers.{layer}.self_attn.q_proj.weight"),
        ParamRule("layers.{layer}.self_attn.k_proj.weight"),
        ParamRule("layers.{layer}.self_attn.v_proj.weight"),
        ParamRule("layers.{layer}.self_attn.o_proj.weight"),
        ParamRule("layers.{layer}.self_attn.q_norm.weight", when="qwen3"),
        ParamRule("layers.{layer}.self_attn.k_norm.weight", when="qwen3"),
        ParamRule("layers.{layer}.mlp.gate_proj.weight"),
        ParamRule("layers.{layer}.mlp.up_proj.weight"),
        ParamRule("layers.{layer}.mlp.down_proj.weight"),
        ParamRule("layers.{layer}.input_layernorm.weight"),
        ParamRule("layers.{layer}.post_attention_layernorm.weight"),
        ParamRule("layers.0.hidden_norm.weight", first_layer_only=True),
        ParamRule("norm.weight"),
        ParamRule("lm_head.weight"),
        ParamRule("d2t", when="reduced_vocab", filled_by=DEFAULT_IF_ABSENT),
        ParamRule("t2d", when="reduced_vocab", filled_by=DEFAULT_IF_ABSENT),
    ),
    d2t_encoding="offsets",
    missing_d2t="identity (no mapping loaded; d2t is in _keys_to_ignore_on_load_missing)",
    aux_sources=(AuxSource("top", 0),),
    aux_default_hf=HF_DEFAULT_AUX,
    aux_count_from_ids=True,
    norm_flags=frozenset({"norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"}),
    norm_output_meaning="post_norm_recurrence",
    speculators_norm_before_residual_default=True,
    honours_tie_word_embeddings=False,
    missing_draft_vocab_size="vocab_size",
    notes=("Unexpected keys are logged as warnings by from_pretrained.",),
)
