"""The SafeAILab EAGLE reference loader (``ea_model``), as a rule table.

Describes SafeAILab/EAGLE @cb7e0841: ``eagle/model/ea_model.py`` and ``eagle/model/cnets.py``.
The checkpoint is loaded with ``load_state_dict(strict=False)``: misnamed keys are ignored
and the parameters they were meant for keep their random initialisation.
"""

from __future__ import annotations

from eagle3_forensics.engines.rules import (
    AS_IS,
    DEFAULT_IF_ABSENT,
    DROP,
    FROM_TARGET,
    HF_DEFAULT_AUX,
    EngineRules,
    ParamRule,
)

RULES = EngineRules(
    name="eagle",
    display="EAGLE (SafeAILab reference)",
    revision="SafeAILab/EAGLE eagle/model/ea_model.py + cnets.py@cb7e0841",
    sources=(
        "SafeAILab/EAGLE eagle/model/ea_model.py@cb7e0841",
        "SafeAILab/EAGLE eagle/model/cnets.py@cb7e0841",
    ),
    config_styles=frozenset({"flat"}),
    flat_architectures=None,
    speculators_architectures=(),
    flat_required_fields=("hidden_size", "vocab_size", "draft_vocab_size", "num_attention_heads"),
    max_layers=1,
    skip=(),
    consume=(),
    renames=(),
    fuse=(),
    prefix=AS_IS,
    unknown_keys=DROP,
    params=(
        # Embeddings come from the base model unless the config has target_hidden_size.
        ParamRule("embed_tokens.weight", when="!has_target_hidden_size", filled_by=FROM_TARGET),
        ParamRule("embed_tokens.weight", when="has_target_hidden_size"),
        ParamRule("fc.weight"),
        ParamRule("fc.bias", when="bias"),
        ParamRule("midlayer.self_attn.q_proj.weight"),
        ParamRule("midlayer.self_attn.k_proj.weight"),
        ParamRule("midlayer.self_attn.v_proj.weight"),
        ParamRule("midlayer.self_attn.o_proj.weight"),
        ParamRule("midlayer.mlp.gate_proj.weight"),
        ParamRule("midlayer.mlp.up_proj.weight"),
        ParamRule("midlayer.mlp.down_proj.weight"),
        ParamRule("midlayer.input_layernorm.weight"),
        ParamRule("midlayer.hidden_norm.weight"),
        ParamRule("midlayer.post_attention_layernorm.weight"),
        ParamRule("norm.weight"),
        ParamRule("lm_head.weight"),
        # Buffers are deleted when vocab_size == draft_vocab_size.
        ParamRule("d2t", when="reduced_vocab", filled_by=DEFAULT_IF_ABSENT),
        ParamRule("t2d", when="reduced_vocab", filled_by=DEFAULT_IF_ABSENT),
    ),
    d2t_encoding="offsets",
    missing_d2t="identity (zero d2t buffer)",
    aux_sources=(),  # hard-coded in the patched target modeling files
    aux_default_hf=HF_DEFAULT_AUX,
    aux_count_from_ids=False,
    norm_flags=frozenset(),
    norm_output_meaning=None,
    speculators_norm_before_residual_default=None,
    honours_tie_word_embeddings=False,
    missing_draft_vocab_size="vocab_size",
    notes=("load_state_dict(strict=False): unknown keys ignored, missing ones left at init.",),
)
