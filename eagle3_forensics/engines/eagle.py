"""The SafeAILab EAGLE reference loader (``ea_model``), as a rule table.

Read in the repository SafeAILab/EAGLE at commit cb7e0841 (HEAD "add-glm47-flash-eagle3"; the
project publishes no releases): ``eagle/model/ea_model.py`` and ``eagle/model/cnets.py``. The
checkpoint is loaded with ``load_state_dict(strict=False)``: misnamed keys are ignored and the
parameters they were meant for keep their random initialisation.
"""

from __future__ import annotations

from eagle3_forensics.engines.rules import (
    AuxConvert,
    AuxRule,
    ConfigStyle,
    D2tEncoding,
    EngineRules,
    Fill,
    MissingDraftVocab,
    OverLimit,
    ParamRule,
    Prefix,
    UnknownKeys,
)

_COMMIT = "cb7e0841"

EAGLE_REFERENCE = EngineRules(
    name="eagle",
    display="EAGLE",  # the release label names SafeAILab/EAGLE and the commit
    package="SafeAILab/EAGLE",
    first=_COMMIT,
    last=_COMMIT,
    pinned=False,
    sources=(
        f"SafeAILab/EAGLE@{_COMMIT} eagle/model/ea_model.py:74-135",
        f"SafeAILab/EAGLE@{_COMMIT} eagle/model/cnets.py:479-534",
        f"SafeAILab/EAGLE@{_COMMIT} eagle/model/modeling_llama_kv.py:1138",
    ),
    drafter_class="Model (cnets.py)",
    config_styles=frozenset({ConfigStyle.FLAT}),
    flat_architectures=None,
    flat_required_fields=("hidden_size", "vocab_size", "draft_vocab_size", "num_attention_heads"),
    max_layers=1,  # one midlayer; num_hidden_layers is not used to build more
    over_max=OverLimit.DROPPED,
    config_fix="Write a flat Llama config with hidden_size, vocab_size and draft_vocab_size at top level.",
    prefix=Prefix.AS_IS,
    unknown_keys=UnknownKeys.DROP,  # load_state_dict(strict=False)
    params=(
        # Embeddings come from the base model unless the config has target_hidden_size (cnets.py:488).
        ParamRule("embed_tokens.weight", when="!has_target_hidden_size", filled_by=Fill.TARGET),
        ParamRule("embed_tokens.weight", when="has_target_hidden_size"),
        # EAGLE-3 fc is always bias=False (cnets.py:531-534): an fc.bias key is ignored.
        ParamRule("fc.weight"),
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
        # d2t / t2d are deleted before loading when vocab_size == draft_vocab_size (ea_model.py:74-75).
        ParamRule("d2t", when="reduced_vocab", filled_by=Fill.DEFAULT_IF_ABSENT),
        ParamRule("t2d", when="reduced_vocab", filled_by=Fill.DEFAULT_IF_ABSENT),
    ),
    d2t_encoding=D2tEncoding.OFFSETS,
    missing_d2t="identity (zero d2t buffer)",
    aux_sources=(),
    # hard-coded in the patched target: idx == 2, N//2, N-3 (modeling_llama_kv.py:1138)
    aux_rule_default=AuxRule(AuxConvert.HARD_CODED, source="eagle/model/modeling_llama_kv.py:1138"),
    fc_count_from=(),  # Linear(hidden * 3, ...)
    norm_flags=(),
    honours_tie_word_embeddings=False,
    missing_draft_vocab_size=MissingDraftVocab.VOCAB_SIZE,
    null_draft_vocab_size=MissingDraftVocab.VOCAB_SIZE,
    reads_rope_parameters=False,  # cnets.py:216-226 reads rope_theta / rope_scaling["type"] only
    notes=(
        "load_state_dict(strict=False): unknown keys ignored, missing ones left at init.",
        "pytorch_model.bin is tried before model.safetensors: when both exist the .bin wins (ea_model.py:124-135).",
    ),
)

RELEASES: tuple[EngineRules, ...] = (EAGLE_REFERENCE,)

RULES = EAGLE_REFERENCE
