"""vllm-project/speculators' own ``Eagle3DraftModel`` loading (PyPI ``speculators``), one table per range.

Read in the wheels 0.3.0 … 0.9.0; 0.9.0 (the newest) was also run (``[run]``: its real
loader in the loader tier, ``tests/loaders``). Loading is Transformers ``from_pretrained``: unexpected keys
are logged as warnings; ``embed_tokens``, ``d2t``, ``t2d`` (and from 0.5.0 ``input_norm``) are in
``_keys_to_ignore_on_load_missing``.

- 0.3.0: ``fc`` takes 3 aux states; only ``norm_before_residual``; a ``verifier_lm_head``.
- 0.4.0: a ``verifier_norm`` too.
- 0.5.0–0.6.0: ``norm_before_fc`` (``input_norm``); ``from_pretrained`` ends with
  ``load_verifier_weights``, which needs ``t2d`` for a reduced vocabulary.
- 0.7.0–0.9.0: ``fc_norm``, ``norm_output`` (``norm_before_fc`` and ``fc_norm`` exclusive); ``fc``
  width from the number of ids.

Every release: ``draft_vocab_size`` null is a config error, absent means 32000, and
``from_pretrained`` compares every shape (an ``lm_head`` for another vocabulary is an error).

``norm_before_residual`` defaults to **False** in every release (``config.py``), while vLLM's
speculators shim assumes True when a config lacks it.
"""

from __future__ import annotations

from dataclasses import replace

from eagle3_forensics.engines.citations import with_provenance
from eagle3_forensics.engines.rules import (
    AuxConvert,
    AuxRule,
    AuxSource,
    ConfigStyle,
    D2tEncoding,
    EngineRules,
    FcCount,
    FcWidth,
    Fill,
    KeyRule,
    Layers,
    Level,
    MissingDraftVocab,
    NormFlag,
    NormOutputMeaning,
    ParamRule,
    Prefix,
    RequiredTensor,
    UnknownKeys,
)


def _src(version: str, *paths: str) -> tuple[str, ...]:
    return tuple(f"speculators=={version} speculators/{p}" for p in paths)


_L = "layers.{layer}."
_PARAMS_0_3 = (
    # Absent embed_tokens / lm_head are copied from the verifier only when the parameter is NaN
    # (model.py:169, :182); under Transformers 5 the NaN initialisation does not survive
    # from_pretrained, so an absent tensor is uninitialised memory, copied only by chance [run].
    ParamRule("embed_tokens.weight", filled_by=Fill.VERIFIER_IF_NAN),
    ParamRule("fc.weight"),  # Linear(num_aux * hidden_size, hidden_size, bias=False)
    ParamRule(_L + "self_attn.q_proj.weight"),
    ParamRule(_L + "self_attn.k_proj.weight"),
    ParamRule(_L + "self_attn.v_proj.weight"),
    ParamRule(_L + "self_attn.o_proj.weight"),
    # Transformers' Llama/Qwen3 attention: q/k/v/o biases when transformer_layer_config.attention_bias [run]
    ParamRule(_L + "self_attn.q_proj.bias", when="attention_bias"),
    ParamRule(_L + "self_attn.k_proj.bias", when="attention_bias"),
    ParamRule(_L + "self_attn.v_proj.bias", when="attention_bias"),
    ParamRule(_L + "self_attn.o_proj.bias", when="attention_bias"),
    ParamRule(_L + "self_attn.q_norm.weight", when="qwen3"),
    ParamRule(_L + "self_attn.k_norm.weight", when="qwen3"),
    ParamRule(_L + "mlp.gate_proj.weight"),
    ParamRule(_L + "mlp.up_proj.weight"),
    ParamRule(_L + "mlp.down_proj.weight"),
    ParamRule(_L + "input_layernorm.weight"),
    ParamRule(_L + "post_attention_layernorm.weight"),
    # layers[0] is the Eagle3 first layer with hidden_norm; layers[1..] are plain decoder layers
    ParamRule(_L + "hidden_norm.weight", layers=Layers.FIRST),
    ParamRule("norm.weight"),
    ParamRule("lm_head.weight", filled_by=Fill.VERIFIER_IF_NAN),
    # buffers built when draft_vocab_size != the verifier's vocab_size (use_draft_vocab, model.py:48-55)
    ParamRule("d2t", when="vocab_differs", filled_by=Fill.DEFAULT_IF_ABSENT),
    ParamRule("t2d", when="vocab_differs", filled_by=Fill.DEFAULT_IF_ABSENT),
    # the verifier's lm_head (rows selected by t2d): never read from the draft checkpoint
    # (its key is skipped), filled from the verifier (core.py:265 in 0.3.0; model.py:67, :186 in 0.9.0)
    ParamRule("verifier_lm_head.weight", filled_by=Fill.TARGET),
)
# 0.4.0 adds the verifier's final norm, likewise filled from the verifier (core.py:297; 0.9.0 core.py:119)
_VERIFIER_NORM = ParamRule("verifier_norm.weight", filled_by=Fill.TARGET)

SPECULATORS_0_3_0 = EngineRules(
    name="speculators",
    display="speculators",
    package="speculators",
    first="0.3.0",
    last="0.3.0",
    sources=_src(
        "0.3.0",
        "models/eagle3/core.py:149-155 (_keys_to_ignore_on_load_missing / _on_save)",
        "models/eagle3/core.py:181, :265 (fc, verifier_lm_head)",
        "models/eagle3/config.py:38 (draft_vocab_size: int = 32000)",
        "models/eagle3/model_definitions.py",
    ),
    drafter_class="Eagle3DraftModel",
    config_styles=frozenset({ConfigStyle.SPECULATORS}),
    flat_architectures=(),
    speculators_model_types=None,  # any transformer_layer_config AutoConfig knows
    config_fix="Convert with `speculators convert SRC --algorithm eagle3 --verifier TARGET --output-path DST`.",
    skip=(KeyRule(r"^verifier_(lm_head|norm)\.", note="in _keys_to_ignore_on_save"),),
    # pydantic `draft_vocab_size: int`: a null is a ValidationError (an absent one defaults to 32000) [run]
    null_rejected=("draft_vocab_size",),
    prefix=Prefix.AS_IS,
    unknown_keys=UnknownKeys.WARN,  # from_pretrained logs unexpected keys
    params=_PARAMS_0_3,
    # from_pretrained(ignore_mismatched_sizes=False): an lm_head / d2t sized for another draft
    # vocabulary (e.g. the 32000 default when draft_vocab_size is absent) is an error [run]
    vocab_shapes_checked=True,
    d2t_encoding=D2tEncoding.OFFSETS,
    missing_d2t="identity (no mapping loaded; d2t is in _keys_to_ignore_on_load_missing)",
    aux_sources=(AuxSource(Level.TOP),),
    # ids are HF hidden_states indices validated within [0, N] (models/utils.py resolve_target_layer_ids)
    aux_rule_default=AuxRule(AuxConvert.AS_IS, source="models/utils.py:99-129", captures_final=True),
    fc_count_from=(),  # Linear(3 * hidden_size, ...)
    fc_width=FcWidth.HIDDEN_SIZE,  # target_hidden_size exists as a field but nothing reads it
    norm_flags=(NormFlag("norm_before_residual", (Level.TOP,)),),
    speculators_norm_before_residual_default=False,  # Eagle3SpeculatorConfig: default False
    honours_tie_word_embeddings=False,
    missing_draft_vocab_size=MissingDraftVocab.DEFAULT_32000,  # config.py:39 default 32000
    null_draft_vocab_size=MissingDraftVocab.DEFAULT_32000,
    notes=(
        "Read statically from the wheel (not run).",
        "Unexpected keys are logged as warnings by from_pretrained.",
    ),
)

SPECULATORS_0_4_0 = replace(
    SPECULATORS_0_3_0,
    first="0.4.0",
    last="0.4.0",
    sources=_src("0.4.0", "models/eagle3/core.py:158-165, :297 (verifier_norm), :319 (verifier_lm_head)"),
    params=(*_PARAMS_0_3, _VERIFIER_NORM),
)

# 0.5.0: from_pretrained ends with load_vocab_mappings + load_verifier_weights (model.py:340), which
# masks the verifier's lm_head with t2d; t2d is in _keys_to_ignore_on_load_missing, so without the
# tensor the buffer holds uninitialised memory and the masked head has the wrong row count.
_T2D_REQUIRED = RequiredTensor(
    r"(^|\.)t2d$",
    when="vocab_differs",
    note="without a t2d tensor, from_pretrained's load_verifier_weights masks the verifier's lm_head with "
    "an uninitialised t2d buffer and fails (size mismatch, or 't2d tensor hasn't been set') whenever the "
    "config names a verifier",
    finding="T2D_INVALID",
    fix="Add t2d to the checkpoint: a bool mask over the target vocabulary, True exactly at the target "
    "ids the draft vocabulary covers (t2d[arange(draft_vocab_size) + d2t] = True).",
    by_chance=True,  # [run: 14 of 15 such drafters failed; one loaded, its memory held a valid mask]
)

SPECULATORS_0_5_0 = replace(
    SPECULATORS_0_4_0,
    first="0.5.0",
    last="0.6.0",
    sources=_src(
        "0.5.0",
        "models/eagle3/core.py:159-167, :189-226",
        "models/eagle3/config.py:58",
        "model.py:150-175 (load_verifier_weights: t2d mask), :340 (from_pretrained calls it)",
    ),
    params=(*_PARAMS_0_3, _VERIFIER_NORM, ParamRule("input_norm.weight", when="norm_before_fc")),
    required_tensors=(_T2D_REQUIRED,),
    norm_flags=(*SPECULATORS_0_3_0.norm_flags, NormFlag("norm_before_fc", (Level.TOP,))),
)

SPECULATORS_0_7_0 = replace(
    SPECULATORS_0_5_0,
    first="0.7.0",
    last="0.9.0",
    sources=_src(
        "0.9.0",
        "models/eagle3/core.py:71-138",
        "models/eagle3/config.py:34-114",
        "models/eagle3/model_definitions.py:29-94",
        "model.py:123-210 (load_verifier_weights: t2d mask at :172-181), :243-400 (from_pretrained)",
        "models/utils.py:99-129 (resolve_target_layer_ids)",
        "convert/entrypoints.py:139-147 (no auto-conversion of EAGLE / SpecForge configs)",
    ),
    params=(
        *_PARAMS_0_3,
        _VERIFIER_NORM,
        ParamRule("input_norm.weight", when="norm_before_fc"),
        ParamRule("fc_norm.{j}.weight", when="fc_norm"),
    ),
    # Eagle3SpeculatorConfig._check_norm_flags (config.py:89-96): a ValidationError [run]
    exclusive_flags=(("norm_before_fc", "fc_norm"),),
    fc_count_from=(FcCount.TOP_IDS,),  # `len(config.eagle_aux_hidden_state_layer_ids) or 3` (core.py:70-78)
    norm_flags=(
        NormFlag("norm_before_residual", (Level.TOP,)),
        NormFlag("norm_before_fc", (Level.TOP,)),
        NormFlag("fc_norm", (Level.TOP,)),
        NormFlag("norm_output", (Level.TOP,)),
    ),
    norm_output_meaning=NormOutputMeaning.POST_NORM_RECURRENCE,
    notes=(
        "Unexpected keys are logged as warnings by from_pretrained.",
        "0.9.0 from_pretrained auto-converts only DFlash checkpoints; EAGLE / SpecForge configs raise "
        "NotImplementedError.",
        "An absent embed_tokens / lm_head is uninitialised memory under Transformers 5 (copied from the "
        "verifier only when it happens to be NaN).",
    ),
)

# A flat (EAGLE / SpecForge) checkpoint: 0.9.0's from_pretrained refuses it (NotImplementedError,
# convert/entrypoints.py:139-147), so the release table judges it unreadable. `speculators convert`
# (Eagle3Converter) turns it into a one-layer legacy Eagle3Speculator checkpoint, which then loads as
# above [run: every flat drafter]. This table describes that two-step path; it is not part of RELEASES
# (diagnose judges what the engine does with the files given), but the real-loader oracle compares it.
_MLA = "the converter builds a LlamaConfig, and MLA tensors do not fit it (size mismatch at conversion)"
CONVERTER_0_9_0 = replace(
    SPECULATORS_0_7_0,
    sources=_src("0.9.0", "convert/eagle/eagle3_converter.py:140-221", "convert/entrypoints.py:139-147"),
    drafter_class="Eagle3Converter -> Eagle3DraftModel",
    via_conversion="speculators convert SRC --algorithm eagle3 --verifier TARGET --output-path DST",
    config_styles=frozenset({ConfigStyle.FLAT}),
    flat_architectures=None,
    flat_required_fields=("hidden_size", "vocab_size", "num_attention_heads", "intermediate_size"),
    rejected_model_types=(("deepseek_v3", _MLA), ("deepseek_v2", _MLA)),
    config_fix="Convert with `speculators convert SRC --algorithm eagle3 --verifier TARGET --output-path DST` "
    "(and pass the aux layer ids and norm flags the drafter was trained with on its command line).",
    # the legacy model has one layer, no fc bias, no q/k norms, and the converter loads its
    # fc_norm / input_norm weights into nothing (strict=False, logged as unexpected) [run]
    drop=(
        KeyRule(r"^(midlayer\.[1-9]|layers\.[1-9])", note="the converter's legacy model has one layer"),
        KeyRule(r"^fc\.bias$", note="the converter's fc has no bias"),
        KeyRule(r"(q_norm|k_norm)\.", note="the converter builds a Llama layer (no q/k norms)"),
        KeyRule(r"^fc_norm\.", note="dropped by the converter (the flag is kept: an untrained norm)"),
        KeyRule(r"^input_norm\.", note="dropped by the converter (the flag is kept: an untrained norm)"),
    ),
    renames=(
        KeyRule(r"^midlayer\.", "layers.0.", note="midlayer. -> layers.0. (eagle3_converter.py:203-211)"),
    ),
    # qwen3 never applies: the converted config's model_type is always llama
    params=tuple(p for p in SPECULATORS_0_7_0.params if "q_norm" not in p.name and "k_norm" not in p.name),
    # ids are set only from the converter's CLI arguments: the config's nested or top-level ids are
    # dropped, and the default [2, N//2, N-3] is written [run: aux3_nested -> [2, 4, 5]]
    aux_sources=(),
    fc_count_from=(),
    # norm_before_fc / fc_norm / norm_output read at the top level only (eagle3_converter.py:142-144)
    norm_flags=(
        NormFlag("norm_before_fc", (Level.TOP,)),
        NormFlag("fc_norm", (Level.TOP,)),
        NormFlag("norm_output", (Level.TOP,)),
    ),
    missing_draft_vocab_size=MissingDraftVocab.DEFAULT_32000,  # eagle3_converter.py:140
    notes=(
        "Flat checkpoints load only after `speculators convert`; this table is that converter plus the load.",
        "The converter drops nested aux ids, nested norm_before_fc, layers >= 1, fc_norm and input_norm weights.",
    ),
)
RELEASES: tuple[EngineRules, ...] = (
    SPECULATORS_0_3_0,
    SPECULATORS_0_4_0,
    SPECULATORS_0_5_0,
    SPECULATORS_0_7_0,
)

# RAN: the loader tier runs these releases' own loaders on the CPU (tests/loaders); the rest were read
RELEASES = with_provenance(RELEASES, ran=("0.9.0",))
RULES = RELEASES[-1]
