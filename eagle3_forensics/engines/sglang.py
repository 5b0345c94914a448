"""SGLang's EAGLE-3 drafter loading, one table per release range (PyPI ``sglang``).

Every fact was read in the released wheels (``pip download --no-deps sglang==V``) and, where
marked ``[run]``, seen with SGLang's real loader on the CPU (the loader
tier, ``tests/loaders``). ``RELEASES`` runs oldest to newest; each newer table is the previous one
plus its differences:

- 0.5.10.post1–0.5.11: one ``midlayer``; ``layers.N.*`` names dropped without a log.
- 0.5.12: ``model.layers.{i}`` (multi-layer), legacy map ``midlayer -> layers.0``, ``fc_norm``,
  ``norm_output``, fc width from ``num_aux_hidden_states`` / nested ids; the Kimi-K2.5 MLA drafter.
- 0.5.13: DeepSeek-V2/V3, GLM-MoE-Lite and Kimi-K2.5 targets add 1 only when the first id is 1;
  the MLA drafter gains ``fc_norm`` / ``norm_output``.
- 0.5.15: the draft-input buffer also counts top-level ids.
- 0.5.17: ``norm_before_fc`` (nested first, then top level); gpt-oss keeps ids when max == N.
- 0.5.18: MiniMax-M3-VL shifts its default ids too.

No release up to 0.5.23 reads a speculators config (``Eagle3Speculator``,
``speculators_model_type`` and ``transformer_layer_config`` occur in no file of any of them).
"""

from __future__ import annotations

from dataclasses import replace

from eagle3_forensics.engines.citations import with_provenance
from eagle3_forensics.engines.rules import (
    ArchAux,
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
    PairFuse,
    ParamRule,
    Prefix,
    UnknownKeys,
)


def _src(version: str, *paths: str) -> tuple[str, ...]:
    return tuple(f"sglang=={version} {p}" for p in paths)


# -- aux capture: set_eagle3_layers_to_capture of each target class ---------------------------------
# Architectures are the registered names whose class (directly or by inheritance) defines the method;
# the rule was executed for every one of them on 0.5.11, 0.5.12, 0.5.16, 0.5.17 and 0.5.23 [run; the
# loader tier re-runs 0.5.11 and 0.5.23]; the releases in between follow from the registry (EntryClass) and
# the method's history in each wheel (``set_eagle3_layers_to_capture`` per release).


def _plus_one(source: str) -> AuxRule:
    return AuxRule(AuxConvert.PLUS_ONE, source=source)


def _first_is_one(source: str) -> AuxRule:
    return AuxRule(AuxConvert.PLUS_ONE_IF_FIRST_IS_ONE, source=source)


def _group(defining: str, rule: AuxRule, *archs: str, since: tuple[tuple[str, str], ...] = ()) -> ArchAux:
    return ArchAux(tuple(archs), rule, defining, since)


def _amend(groups: tuple[ArchAux, ...], *changes: ArchAux) -> tuple[ArchAux, ...]:
    """``groups`` with the groups of the same defining class replaced by ``changes`` (new ones appended)."""
    by_class = {c.defining_class: c for c in changes}
    out = [by_class.pop(g.defining_class, g) for g in groups]
    return tuple(out) + tuple(by_class.values())


_LLAMA_ARCHS = (
    "IQuestCoderForCausalLM",
    "InternLM3ForCausalLM",
    "Llama4ForCausalLM",
    "LlamaForCausalLM",
    "LlamaForCausalLMEagle",
    "LlamaForCausalLMEagle3",
    "Ministral3ForCausalLM",
    "MistralForCausalLM",
    "MistralForCausalLMEagle",
    "Phi3ForCausalLM",
    "TeleFLMForCausalLM",
)
_DEEPSEEK_ARCHS = (
    "DeepseekV2ForCausalLM",
    "DeepseekV32ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV3ForCausalLMNextN",
    "GlmMoeDsaForCausalLM",
    "MistralLarge3ForCausalLM",
    "MistralLarge3ForCausalLMEagle",
)
_QWEN3_VL_ARCHS = (
    "InternS1ProForConditionalGeneration",
    "Qwen3VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
)

# sglang 0.5.11: every class adds 1 to every id; default [2, N//2, N-3] (capture_0.5.11_bodies.txt).
_CAPTURE_0_5_11: tuple[ArchAux, ...] = (
    _group("apertus.ApertusForCausalLM", _plus_one("apertus.py:670"), "ApertusForCausalLM"),
    _group(
        "bailing_moe.BailingMoEForCausalLM",
        _plus_one("bailing_moe.py:1037"),
        "BailingMoEForCausalLM",
        "BailingMoeForCausalLM",
        "BailingMoeV2ForCausalLM",
        "SarvamMoEForCausalLM",
    ),
    _group(
        "deepseek_v2.DeepseekV2ForCausalLM",
        _plus_one("deepseek_v2.py:2362"),
        *_DEEPSEEK_ARCHS,
        "Glm4MoeLiteForCausalLM",  # a DeepseekV2ForCausalLM subclass until 0.5.13
    ),
    _group(
        "exaone_moe.ExaoneMoEForCausalLM",
        _plus_one("exaone_moe.py:871"),
        "ExaoneMoEForCausalLM",
        "ExaoneMoEForCausalLMMTP",
    ),
    _group(
        "glm4_moe.Glm4MoeForCausalLM",
        _plus_one("glm4_moe.py:1468"),
        "Glm4MoeForCausalLM",
        "Glm4MoeForCausalLMNextN",
    ),
    _group("gpt_oss.GptOssForCausalLM", _plus_one("gpt_oss.py:1191"), "GptOssForCausalLM"),
    # Kimi-K2.5 delegates to the DeepseekV3ForCausalLM it builds (kimi_k25.py:693).
    _group(
        "kimi_k25.KimiK25ForConditionalGeneration",
        _plus_one("kimi_k25.py:799"),
        "KimiK25ForConditionalGeneration",
    ),
    _group(
        "llama.LlamaForCausalLM",
        _plus_one("llama.py:796"),
        *_LLAMA_ARCHS,
        since=(("MistralForCausalLMEagle", "0.5.11"),),
    ),
    _group(
        "longcat_flash.LongcatFlashForCausalLM",
        _plus_one("longcat_flash.py:1057"),
        "LongcatFlashForCausalLM",
        "LongcatFlashForCausalLMNextN",
    ),
    # MindSpore hands the ids untouched to an external MindSpore model, which decides the default.
    _group(
        "mindspore.MindSporeForCausalLM",
        AuxRule(AuxConvert.UNTOUCHED, default_hf=None, source="mindspore.py:359"),
        "MindSporeForCausalLM",
    ),
    _group("minimax_m2.MiniMaxM2ForCausalLM", _plus_one("minimax_m2.py:1233"), "MiniMaxM2ForCausalLM"),
    _group(
        "mllama4.Llama4ForConditionalGeneration",
        _plus_one("mllama4.py:953"),
        "Llama4ForConditionalGeneration",
    ),
    _group("qwen2.Qwen2ForCausalLM", _plus_one("qwen2.py:644"), "Qwen2ForCausalLM", "Qwen2ForCausalLMEagle"),
    _group(
        "qwen2_5_vl.Qwen2_5_VLForConditionalGeneration",
        _plus_one("qwen2_5_vl.py:876"),
        "Qwen2_5_VLForConditionalGeneration",
    ),
    _group("qwen2_moe.Qwen2MoeForCausalLM", _plus_one("qwen2_moe.py:1048"), "Qwen2MoeForCausalLM"),
    _group("qwen3.Qwen3ForCausalLM", _plus_one("qwen3.py:682"), "Qwen3ForCausalLM"),
    _group("qwen3_moe.Qwen3MoeForCausalLM", _plus_one("qwen3_moe.py:1080"), "Qwen3MoeForCausalLM"),
    _group(
        "qwen3_next.Qwen3NextForCausalLM",
        _plus_one("qwen3_next.py:1170"),
        "Qwen3NextForCausalLM",
        "Qwen3NextForCausalLMMTP",
    ),
    _group("qwen3_vl.Qwen3VLForConditionalGeneration", _plus_one("qwen3_vl.py:1398"), *_QWEN3_VL_ARCHS),
)

# sglang 0.5.12: the Gemma families gain the method; still +1 everywhere.
_CAPTURE_0_5_12 = _amend(
    _CAPTURE_0_5_11,
    _group("llama.LlamaForCausalLM", _plus_one("llama.py:798"), *_LLAMA_ARCHS),
    _group(
        "qwen3_vl.Qwen3VLForConditionalGeneration",
        _plus_one("qwen3_vl.py:1398"),
        *_QWEN3_VL_ARCHS,
        "InternS2PreviewForConditionalGeneration",
    ),
    _group("gemma3_causal.Gemma3ForCausalLM", _plus_one("gemma3_causal.py:897"), "Gemma3ForCausalLM"),
    _group(
        "gemma3_mm.Gemma3ForConditionalGeneration",
        _plus_one("gemma3_mm.py:497"),
        "Gemma3ForConditionalGeneration",
    ),
    _group(
        "gemma4_causal.Gemma4ForCausalLM",
        _plus_one("gemma4_causal.py:1127"),
        "Gemma4AssistantForCausalLM",
        "Gemma4ForCausalLM",
    ),
    _group(
        "gemma4_mm.Gemma4ForConditionalGeneration",
        _plus_one("gemma4_mm.py:955"),
        "Gemma4ForConditionalGeneration",
    ),
)

# sglang 0.5.13: DeepSeek-V2/V3 (and its subclasses, Kimi-K2.5 through it, the new GLM-MoE-Lite
# class) add 1 only when the first id is 1: deepseek_v2.py `if layer_ids and layer_ids[0] == 1:`.
_CAPTURE_0_5_13 = _amend(
    tuple(
        replace(g, architectures=tuple(a for a in g.architectures if a != "Glm4MoeLiteForCausalLM"))
        for g in _CAPTURE_0_5_12
    ),
    _group("deepseek_v2.DeepseekV2ForCausalLM", _first_is_one("deepseek_v2.py:2799"), *_DEEPSEEK_ARCHS),
    _group(
        "glm4_moe_lite.Glm4MoeLiteForCausalLM",
        _first_is_one("glm4_moe_lite.py:1023"),
        "Glm4MoeLiteForCausalLM",
        "Glm4MoeLiteForCausalLMNextN",
    ),
    _group(
        "kimi_k25.KimiK25ForConditionalGeneration",
        _first_is_one("kimi_k25.py:834 -> deepseek_v2.py:2799"),
        "KimiK25ForConditionalGeneration",
    ),
    _group(
        "gemma4_causal.Gemma4ForCausalLM",
        _plus_one("gemma4_causal.py:1409"),
        "Gemma4AssistantForCausalLM",
        "Gemma4ForCausalLM",
        "Gemma4UnifiedAssistantForCausalLM",
    ),
    _group(
        "gemma4_mm.Gemma4ForConditionalGeneration",
        _plus_one("gemma4_mm.py:1101"),
        "Gemma4ForConditionalGeneration",
        "Gemma4UnifiedForConditionalGeneration",
    ),
    _group(
        "qwen3_moe.Qwen3MoeForCausalLM",
        _plus_one("qwen3_moe.py:1076"),
        "Qwen3MoeForCausalLM",
        "Qwen3MoeForCausalLMMTP",
    ),
)

# sglang 0.5.16: MiniMax-M3 gains the method (+1); GlmMoeDsa-NextN and Mellum are registered.
_CAPTURE_0_5_16 = _amend(
    _CAPTURE_0_5_13,
    _group(
        "deepseek_v2.DeepseekV2ForCausalLM",
        _first_is_one("deepseek_v2.py:2915"),
        *_DEEPSEEK_ARCHS,
        "GlmMoeDsaForCausalLMNextN",
        since=(("GlmMoeDsaForCausalLMNextN", "0.5.16"),),
    ),
    _group(
        "qwen3_moe.Qwen3MoeForCausalLM",
        _plus_one("qwen3_moe.py:1068"),
        "MellumForCausalLM",
        "Qwen3MoeForCausalLM",
        "Qwen3MoeForCausalLMMTP",
        since=(("MellumForCausalLM", "0.5.16"),),
    ),
    _group(
        "minimax_m3.MiniMaxM3SparseForCausalLM",
        _plus_one("minimax_m3.py:1491"),
        "MiniMaxM3SparseForCausalLM",
        since=(("MiniMaxM3SparseForCausalLM", "0.5.16"),),
    ),
)

# sglang 0.5.17: gpt-oss keeps the ids when max(ids) == N (captured at the final norm,
# gpt_oss.py `if layer_ids and max(layer_ids) == num_layers:`); EmbeddingGemma registered.
_CAPTURE_0_5_17 = _amend(
    _CAPTURE_0_5_16,
    _group(
        "gpt_oss.GptOssForCausalLM",
        AuxRule(AuxConvert.AS_IS_IF_MAX_IS_N, source="gpt_oss.py:1328", captures_final=True),
        "GptOssForCausalLM",
    ),
    _group(
        "deepseek_v2.DeepseekV2ForCausalLM",
        _first_is_one("deepseek_v2.py:3134"),
        *_DEEPSEEK_ARCHS,
        "GlmMoeDsaForCausalLMNextN",
    ),
    _group(
        "minimax_m3.MiniMaxM3SparseForCausalLM", _plus_one("minimax_m3.py:1511"), "MiniMaxM3SparseForCausalLM"
    ),
    _group(
        "qwen3_moe.Qwen3MoeForCausalLM",
        _plus_one("qwen3_moe.py:1073"),
        "MellumForCausalLM",
        "Qwen3MoeForCausalLM",
        "Qwen3MoeForCausalLMMTP",
    ),
    _group(
        "gemma3_causal.Gemma3ForCausalLM",
        _plus_one("gemma3_causal.py:920"),
        "EmbeddingGemmaModel",
        "Gemma3ForCausalLM",
    ),
)

# sglang 0.5.18-0.5.23 (lines of 0.5.23): MiniMax-M3-VL adds 1 to its *default* too
# (minimax_m3_vl.py: [3, N//2+1, N-2]); Glm5Next (0.5.20) and Qwen3.5-text (0.5.22) gain the method.
_CAPTURE_0_5_18 = _amend(
    _CAPTURE_0_5_17,
    _group(
        "deepseek_v2.DeepseekV2ForCausalLM",
        _first_is_one("deepseek_v2.py:3458"),
        *_DEEPSEEK_ARCHS,
        "GlmMoeDsaForCausalLMNextN",
        "Glm5NextForConditionalGenerationNextN",
        since=(("Glm5NextForConditionalGenerationNextN", "0.5.20"),),
    ),
    _group(
        "exaone_moe.ExaoneMoEForCausalLM",
        _plus_one("exaone_moe.py:866"),
        "ExaoneMoEForCausalLM",
        "ExaoneMoEForCausalLMMTP",
        "ExaoneMoeForCausalLM",
        since=(("ExaoneMoeForCausalLM", "0.5.22"),),
    ),
    _group(
        "gpt_oss.GptOssForCausalLM",
        AuxRule(AuxConvert.AS_IS_IF_MAX_IS_N, source="gpt_oss.py:1337", captures_final=True),
        "GptOssForCausalLM",
    ),
    _group(
        "kimi_k25.KimiK25ForConditionalGeneration",
        _first_is_one("kimi_k25.py:928 -> deepseek_v2.py:3458"),
        "KimiK25ForConditionalGeneration",
    ),
    _group("llama.LlamaForCausalLM", _plus_one("llama.py:929"), *_LLAMA_ARCHS),
    _group(
        "qwen3_vl.Qwen3VLForConditionalGeneration",
        _plus_one("qwen3_vl.py:1777"),
        *_QWEN3_VL_ARCHS,
        "InternS2PreviewForConditionalGeneration",
        "InternS2MobiusForConditionalGeneration",
        "Cosmos3ForConditionalGeneration",
        "Qwen4ExpForConditionalGeneration",
        since=(("Cosmos3ForConditionalGeneration", "0.5.20"), ("Qwen4ExpForConditionalGeneration", "0.5.20")),
    ),
    _group(
        "minimax_m3_vl.MiniMaxM3SparseForConditionalGeneration",
        AuxRule(
            AuxConvert.PLUS_ONE, default_hf=((0, 1, 3), (1, 2, 1), (1, 1, -2)), source="minimax_m3_vl.py:246"
        ),
        "MiniMaxM3SparseForConditionalGeneration",
    ),
    _group(
        "glm5_next.Glm5NextForConditionalGeneration",
        _plus_one("glm5_next.py:1533"),
        "Glm5NextForConditionalGeneration",
        since=(("Glm5NextForConditionalGeneration", "0.5.20"),),
    ),
    _group(
        "qwen3_5_text.Qwen3_5ForCausalLM",
        _plus_one("qwen3_5_text.py:150"),
        "Qwen3_5ForCausalLM",
        "Qwen3_5MoeForCausalLM",
        since=(("Qwen3_5ForCausalLM", "0.5.22"), ("Qwen3_5MoeForCausalLM", "0.5.22")),
    ),
)

# The Llama target class, assumed when the target is unknown (no --target) or not listed.
_LLAMA_RULE = _plus_one("llama.py (LlamaForCausalLM; assumed for targets not listed)")

# -- sglang 0.5.10.post1 - 0.5.11: LlamaForCausalLMEagle3 with one midlayer --------------------------

_LAYER = "model.midlayer."
_EMBED_RULES = (
    # set_embed replaces the draft embedding with the target's unless target_hidden_size differs
    # (models/llama.py set_embed); a null draft_vocab_size takes set_embed_and_head, which always
    # replaces both (speculative/eagle_worker_v2.py init_lm_head).
    ParamRule("model.embed_tokens.weight", when="!hidden_differs", filled_by=Fill.TARGET),
    ParamRule(
        "model.embed_tokens.weight",
        when="hidden_differs & draft_vocab_size_null & !tied",
        filled_by=Fill.TARGET,
    ),
    ParamRule("model.embed_tokens.weight", when="hidden_differs & !draft_vocab_size_null"),
    ParamRule("model.embed_tokens.weight", when="hidden_differs & draft_vocab_size_null & tied"),
)
_HEAD_RULES = (
    # tie_word_embeddings: lm_head *is* the embedding (the lm_head key finds no parameter);
    # a null draft_vocab_size borrows the target head.
    ParamRule("lm_head.weight", when="!tied & has_draft_vocab_size"),
    ParamRule("lm_head.weight", when="!tied & draft_vocab_size_null", filled_by=Fill.TARGET),
    ParamRule("hot_token_id", when="reduced_vocab", filled_by=Fill.DEFAULT_IF_ABSENT),
)

SGLANG_0_5_11 = EngineRules(
    name="sglang",
    display="SGLang",
    package="sglang",
    first="0.5.10.post1",
    last="0.5.11",
    # llama_eagle3.py has the same md5 (a97ea7db) in 0.5.10.post1 and 0.5.11.
    sources=_src(
        "0.5.11",
        "sglang/srt/models/llama_eagle3.py",
        "sglang/srt/models/llama.py",
        "sglang/srt/model_executor/model_runner.py:401-414",
        "sglang/srt/speculative/eagle_worker_v2.py:215",
    ),
    drafter_class="LlamaForCausalLMEagle3",
    config_styles=frozenset({ConfigStyle.FLAT}),  # speculators configs: "Unrecognized model" [run]
    flat_architectures=("LlamaForCausalLMEagle3",),
    flat_required_fields=("hidden_size", "vocab_size", "num_attention_heads", "intermediate_size"),
    # `config.draft_vocab_size` is read unconditionally: an absent key is an AttributeError [run]
    required_keys=("draft_vocab_size",),
    # `hasattr(config, "target_hidden_size")` then `* 3`: a JSON null is a TypeError [run]
    null_fatal=("target_hidden_size",),
    # with tie_word_embeddings the null is never replaced by vocab_size, and the logits processor's
    # config gets vocab_size = draft_vocab_size = None (llama_eagle3.py:224-236) [run: a strict-config error]
    null_fatal_if=(
        (
            "draft_vocab_size",
            "tied",
            "with tie_word_embeddings the logits processor is built with vocab_size = null "
            "(llama_eagle3.py: config_.vocab_size = config_.draft_vocab_size)",
        ),
    ),
    max_layers=1,
    over_max=OverLimit.BUILD_ERROR,  # llama_eagle3.py:213 ValueError("EAGLE3 currently only supports 1 layer")
    config_fix="Write a flat config with architectures ['LlamaForCausalLMEagle3'], draft_vocab_size (null to "
    "borrow the target head) and the aux ids in eagle_config; no SGLang release up to 0.5.23 reads "
    "speculators configs.",
    skip=(KeyRule(r"t2d", note='`if "t2d" in name: continue`'),),
    consume=(KeyRule(r"d2t", "hot_token_id", note="hot_token_id = d2t + arange(len(d2t))"),),
    renames=(),
    fuse=(
        KeyRule(r"\.(q_proj|k_proj|v_proj)", ".qkv_proj"),
        KeyRule(r"\.(gate_proj|up_proj)", ".gate_up_proj"),
    ),
    prefix=Prefix.NAME_THEN_MODEL,  # `param_name = name if name in params_dict else f"model.{name}"`
    unknown_keys=UnknownKeys.DROP,  # no else branch: dropped without a log
    params=(
        *_EMBED_RULES,
        ParamRule("model.fc.weight"),
        ParamRule("model.fc.bias", when="bias"),  # nn.Linear(..., bias=getattr(config, "bias", False))
        ParamRule(_LAYER + "self_attn.qkv_proj.weight"),
        ParamRule(_LAYER + "self_attn.o_proj.weight"),
        # LlamaAttention: attention_bias or bias (models/llama.py); no EAGLE-3 checkpoint carries it
        ParamRule(_LAYER + "self_attn.o_proj.bias", when="o_proj_bias"),
        ParamRule(_LAYER + "mlp.gate_up_proj.weight"),
        ParamRule(_LAYER + "mlp.down_proj.weight"),
        ParamRule(_LAYER + "input_layernorm.weight"),
        ParamRule(_LAYER + "hidden_norm.weight"),
        ParamRule(_LAYER + "post_attention_layernorm.weight"),
        ParamRule("model.norm.weight"),
        *_HEAD_RULES,
    ),
    d2t_encoding=D2tEncoding.OFFSETS,
    missing_d2t="identity (hot_token_id stays None)",
    # model_runner.py: only the nested eagle_config, inside a bare try/except
    aux_sources=(AuxSource(Level.EAGLE),),
    aux_rules=_CAPTURE_0_5_11,
    aux_rule_default=_LLAMA_RULE,
    use_aux_hidden_state=AuxDisabled.FC_SKIPPED,  # `eagle_config.get("use_aux_hidden_state", True)`
    fc_count_from=(),  # `self.hidden_size_in * 3`
    norm_flags=(),  # residual always taken before hidden_norm; no input_norm / fc_norm / post-norm feedback
    norm_output_meaning=None,
    honours_tie_word_embeddings=True,
    missing_draft_vocab_size=MissingDraftVocab.BUILD_ERROR,
    null_draft_vocab_size=MissingDraftVocab.TARGET_HEAD,  # `if config.draft_vocab_size is None: load_lm_head_from_target`
    reads_rope_parameters=True,  # models/llama.py reads rope_parameters first
    notes=(
        "Names that are neither a parameter nor 'model.'+parameter are dropped without any warning.",
        "No missing-weight check: unfilled parameters keep torch.empty memory.",
        "Aux ids come only from nested eagle_config inside a bare try/except; anything else means default.",
    ),
)

# -- sglang 0.5.12: model.layers.{i}, legacy names, fc_norm, norm_output, MLA drafter ----------------

_LAYERS = "model.layers.{layer}."
_LLAMA_PARAMS_0_5_12 = (
    *_EMBED_RULES,
    ParamRule("model.fc.weight"),
    ParamRule("model.fc.bias", when="bias"),
    ParamRule("model.fc_norm.{j}.weight", when="fc_norm"),
    # layer 0 takes 2H (embedding + fused features); later layers H (llama_eagle3.py:64)
    ParamRule(_LAYERS + "self_attn.qkv_proj.weight"),
    ParamRule(_LAYERS + "self_attn.o_proj.weight"),
    ParamRule(_LAYERS + "self_attn.o_proj.bias", when="o_proj_bias"),
    ParamRule(_LAYERS + "mlp.gate_up_proj.weight"),
    ParamRule(_LAYERS + "mlp.down_proj.weight"),
    ParamRule(_LAYERS + "input_layernorm.weight", layers=Layers.FIRST),
    # layers >= 1 run `hidden_states, residual = self.hidden_norm(hidden_states, residual)` (:105):
    # their input_layernorm is built but never used, their hidden_norm is the input norm.
    ParamRule(_LAYERS + "input_layernorm.weight", layers=Layers.REST, filled_by=Fill.UNUSED),
    ParamRule(_LAYERS + "hidden_norm.weight"),
    ParamRule(_LAYERS + "post_attention_layernorm.weight"),
    ParamRule("model.norm.weight"),
    *_HEAD_RULES,
)

# Eagle3DeepseekV2ForCausalLM (kimi_k25_eagle3.py): one MLA midlayer, its own name map.
_MLA = "model.midlayer."
KIMI_MLA_0_5_12 = replace(
    SGLANG_0_5_11,
    sources=_src("0.5.12", "sglang/srt/models/kimi_k25_eagle3.py"),
    drafter_class="Eagle3DeepseekV2ForCausalLM",
    flat_architectures=("Eagle3DeepseekV2ForCausalLM",),
    flat_required_fields=(
        "hidden_size",
        "vocab_size",
        "num_attention_heads",
        "intermediate_size",
        "q_lora_rank",
    ),
    required_keys=(),  # `getattr(config, "draft_vocab_size", None)`: absent borrows the target head [run]
    null_fatal=(),
    null_fatal_if=(),  # `config_for_logits.vocab_size = draft_vocab_size or config.vocab_size` (:368)
    max_layers=1,  # `if config.num_hidden_layers != 1: raise ValueError(...)` [run]
    over_max=OverLimit.BUILD_ERROR,
    skip=(KeyRule(r"(^|\.)t2d$", note='`name == "t2d" or name.endswith(".t2d")`'),),
    consume=(KeyRule(r"(^|\.)d2t$", "hot_token_id", note="hot_token_id = d2t + arange(len(d2t))"),),
    renames=(KeyRule(r"^layers\.0\.", "midlayer.", note="re.sub(r'^layers\\.0\\.', 'midlayer.', name)"),),
    fuse=(KeyRule(r"\.(gate_proj|up_proj)", ".gate_up_proj"),),
    pair_fuse=(
        PairFuse(
            "q_a_proj",
            "kv_a_proj_with_mqa",
            "fused_qkv_a_proj_with_mqa",
            note="torch.cat([q_a, kv_a]) only when both arrive in one load_weights call",
        ),
    ),
    prefix=Prefix.MODEL_UNLESS_LEADING_LM_HEAD,
    unknown_keys=UnknownKeys.WARN,  # logger.warning("Eagle3 MLA: skipping unexpected weight %s")
    params=(
        *_EMBED_RULES[:1],
        ParamRule(
            "model.embed_tokens.weight",
            when="hidden_differs & draft_vocab_size_null & !tied",
            filled_by=Fill.TARGET,
        ),
        ParamRule("model.embed_tokens.weight", when="hidden_differs & !draft_vocab_size_null"),
        ParamRule("model.embed_tokens.weight", when="hidden_differs & draft_vocab_size_null & tied"),
        ParamRule("model.fc.weight"),
        ParamRule("model.fc.bias", when="bias"),
        ParamRule(_MLA + "self_attn.fused_qkv_a_proj_with_mqa.weight"),
        ParamRule(_MLA + "self_attn.q_a_layernorm.weight"),
        ParamRule(_MLA + "self_attn.q_b_proj.weight"),
        ParamRule(_MLA + "self_attn.kv_a_layernorm.weight"),
        ParamRule(_MLA + "self_attn.kv_b_proj.weight"),
        ParamRule(_MLA + "self_attn.o_proj.weight"),
        ParamRule(_MLA + "mlp.gate_up_proj.weight"),
        ParamRule(_MLA + "mlp.down_proj.weight"),
        ParamRule(_MLA + "input_layernorm.weight"),
        ParamRule(_MLA + "hidden_norm.weight"),
        ParamRule(_MLA + "post_attention_layernorm.weight"),
        ParamRule("model.norm.weight"),
        ParamRule("lm_head.weight", when="!tied & has_draft_vocab_size"),
        ParamRule("lm_head.weight", when="!tied & !has_draft_vocab_size", filled_by=Fill.TARGET),
        ParamRule("hot_token_id", when="reduced_vocab", filled_by=Fill.DEFAULT_IF_ABSENT),
    ),
    fc_count_from=(FcCount.NESTED_IDS, FcCount.TOP_IDS),  # _get_eagle_aux_layer_count
    norm_flags=(),  # no fc_norm (grep -c fc_norm is 0 in 0.5.12) and no norm_before_fc
    norm_output_meaning=None,
    missing_draft_vocab_size=MissingDraftVocab.TARGET_HEAD,
    null_draft_vocab_size=MissingDraftVocab.TARGET_HEAD,
    notes=(
        "Unknown names are skipped with a warning; an unpaired q_a_proj / kv_a_proj_with_mqa (or a pre-fused "
        "fused_qkv_a_proj_with_mqa) is dropped without one.",
        "CPU runs need rope_scaling.rope_type 'deepseek_yarn'.",
    ),
)

SGLANG_0_5_12 = replace(
    SGLANG_0_5_11,
    first="0.5.12",
    last="0.5.12.post1",
    sources=_src(
        "0.5.12",
        "sglang/srt/models/llama_eagle3.py",
        "sglang/srt/models/llama.py",
        "sglang/srt/models/kimi_k25_eagle3.py",
        "sglang/srt/model_executor/model_runner.py",
        "sglang/srt/speculative/eagle_worker_v2.py",
    ),
    classes=(ClassChoice(KIMI_MLA_0_5_12, architectures=("Eagle3DeepseekV2ForCausalLM",)),),
    max_layers=None,  # self.layers = nn.ModuleList(... for i in range(config.num_hidden_layers))
    # legacy_name_map: substring replacement anywhere, so midlayer.N.* becomes layers.0.N.* and is lost
    renames=(
        KeyRule(r"midlayer", "layers.0", count=0, note='legacy name "midlayer" -> "layers.0"'),
        KeyRule(r"aux_norm_low", "fc_norm.0", count=0, note="legacy aux_norm_low -> fc_norm.0"),
        KeyRule(r"aux_norm_mid", "fc_norm.1", count=0, note="legacy aux_norm_mid -> fc_norm.1"),
        KeyRule(r"aux_norm_high", "fc_norm.2", count=0, note="legacy aux_norm_high -> fc_norm.2"),
    ),
    params=_LLAMA_PARAMS_0_5_12,
    aux_rules=_CAPTURE_0_5_12,
    # num_aux resolution: explicit attr > eagle_config layer_ids > default 3 (llama_eagle3.py:157-164)
    fc_count_from=(FcCount.NUM_AUX_HIDDEN_STATES, FcCount.NESTED_IDS),
    norm_flags=(
        NormFlag("fc_norm", (Level.TOP,), aliases=("use_aux_norm",)),
        NormFlag("norm_output", (Level.TOP,)),
    ),
    norm_output_meaning=NormOutputMeaning.POST_NORM_RECURRENCE,
    rest_layer_input_norm="hidden_norm",  # llama_eagle3.py:105
)

# -- sglang 0.5.13: DeepSeek-family aux rule; the MLA drafter gains fc_norm / norm_output ----------

KIMI_MLA_0_5_13 = replace(
    KIMI_MLA_0_5_12,
    sources=_src("0.5.13", "sglang/srt/models/kimi_k25_eagle3.py"),
    params=(*KIMI_MLA_0_5_12.params, ParamRule("model.fc_norm.{j}.weight", when="fc_norm")),
    norm_flags=(
        NormFlag("fc_norm", (Level.TOP,), aliases=("use_aux_norm",)),
        NormFlag("norm_output", (Level.TOP,)),
    ),
    norm_output_meaning=NormOutputMeaning.POST_NORM_RECURRENCE,
)
SGLANG_0_5_13 = replace(
    SGLANG_0_5_12,
    first="0.5.13",
    last="0.5.14",
    sources=_src(
        "0.5.13",
        "sglang/srt/models/llama_eagle3.py",
        "sglang/srt/models/kimi_k25_eagle3.py",
        "sglang/srt/models/deepseek_v2.py:2799",
        "sglang/srt/models/glm4_moe_lite.py:1023",
    ),
    classes=(ClassChoice(KIMI_MLA_0_5_13, architectures=("Eagle3DeepseekV2ForCausalLM",)),),
    aux_rules=_CAPTURE_0_5_13,
)

# -- sglang 0.5.15: the draft-input buffer also counts top-level ids --------------------------------

_BUFFER = (FcCount.NUM_AUX_HIDDEN_STATES, FcCount.NESTED_IDS, FcCount.TOP_IDS)
SGLANG_0_5_15 = replace(
    SGLANG_0_5_13,
    first="0.5.15",
    last="0.5.16",
    sources=_src(
        "0.5.16",
        "sglang/srt/models/llama_eagle3.py",
        "sglang/srt/speculative/eagle_utils.py (get_draft_input_from_target_hidden_dim)",
        "sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py",
    ),
    buffer_count_from=_BUFFER,
    aux_rules=_CAPTURE_0_5_16,
)

# -- sglang 0.5.17: norm_before_fc; gpt-oss boundary ids -------------------------------------------

SGLANG_0_5_17 = replace(
    SGLANG_0_5_15,
    first="0.5.17",
    last="0.5.17",
    sources=_src(
        "0.5.17",
        "sglang/srt/models/llama_eagle3.py:166",
        "sglang/srt/models/gpt_oss.py:1328",
        "sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py",
    ),
    params=(*_LLAMA_PARAMS_0_5_12, ParamRule("model.input_norm.weight", when="norm_before_fc")),
    norm_flags=(
        *SGLANG_0_5_15.norm_flags,
        # `eagle_config.get("norm_before_fc", getattr(config, "norm_before_fc", False))`
        NormFlag("norm_before_fc", (Level.EAGLE, Level.TOP)),
    ),
    aux_rules=_CAPTURE_0_5_17,
)

# -- sglang 0.5.18 - 0.5.23 (the newest read; cited lines are 0.5.23's) ---------------------------

SGLANG_0_5_18 = replace(
    SGLANG_0_5_17,
    first="0.5.18",
    last="0.5.23",
    sources=_src(
        "0.5.23",
        "sglang/srt/models/llama_eagle3.py",
        "sglang/srt/models/llama.py",
        "sglang/srt/models/kimi_k25_eagle3.py",
        "sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py:185-196",
        "sglang/srt/speculative/eagle_utils.py:262-276",
        "sglang/srt/speculative/eagle_worker_v2.py:345-378",
        "sglang/srt/models/minimax_m3_vl.py:246",
    ),
    classes=(
        ClassChoice(
            replace(KIMI_MLA_0_5_13, sources=_src("0.5.23", "sglang/srt/models/kimi_k25_eagle3.py:428-501")),
            architectures=("Eagle3DeepseekV2ForCausalLM",),
        ),
    ),
    aux_rules=_CAPTURE_0_5_18,
)

RELEASES: tuple[EngineRules, ...] = (
    SGLANG_0_5_11,
    SGLANG_0_5_12,
    SGLANG_0_5_13,
    SGLANG_0_5_15,
    SGLANG_0_5_17,
    SGLANG_0_5_18,
)

# RAN: the loader tier runs these releases' own loaders on the CPU (tests/loaders); the rest were read
RELEASES = with_provenance(RELEASES, ran=("0.5.11", "0.5.23"))
RULES = RELEASES[-1]  # the newest described release
