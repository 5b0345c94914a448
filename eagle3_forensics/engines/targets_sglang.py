"""SGLang's target classes per release read (the data of :mod:`eagle3_forensics.engines.targets`).

Capturing classes come from each release table's own ``aux_rules`` (``set_eagle3_layers_to_capture``
per class, run on 0.5.11 and 0.5.23 by the loader tier's capture oracle), so the two never disagree:
a class whose rule keeps the boundary id N (gpt-oss, 0.5.17+) captures ``[0, N]`` in HF index, every
other ``[0, N-1]`` (``forward`` appends ``hidden_states + residual`` *before* layer i for i in
``layers_to_capture``). The registered classes without the method were listed from the wheels: every
``EntryClass`` of ``sglang/srt/models/*.py`` whose class (or a base) lacks ``set_eagle3_layers_to_capture``.
Only the releases read are described; a release table read from neither leaves unknown classes unknown.

- 0.5.11 ``model_runner.py`` ``init_aux_hidden_state_capture`` calls the method unguarded:
  ``AttributeError`` at start-up.
- 0.5.23 ``model_runner_components/attention_backend_setup.py``: ``ValueError("Model X does not
  implement set_eagle3_layers_to_capture, which EAGLE3 aux hidden-state capture requires.")``.
"""

from __future__ import annotations

from eagle3_forensics.engines import sglang
from eagle3_forensics.engines.proof import Citation
from eagle3_forensics.engines.rules import AuxConvert, EngineRules
from eagle3_forensics.engines.targets import Capture, TargetRow, TargetTable, mark_ran


def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _capturing(rules: EngineRules) -> tuple[TargetRow, ...]:
    """The classes with ``set_eagle3_layers_to_capture`` in ``rules`` (MindSpore's external model: unknown)."""
    return tuple(
        TargetRow(
            group.architectures,
            Capture.THROUGH_N if group.rule.captures_final else Capture.BELOW_N,
            f"{group.defining_class} ({group.rule.source})",
        )
        for group in rules.aux_rules
        if group.rule.convert is not AuxConvert.UNTOUCHED
    )


def _release(version: str) -> EngineRules:
    return next(r for r in sglang.RELEASES if r.covers(version))


_CITE_0_5_11 = (
    Citation(
        "sglang",
        "0.5.11",
        "sglang/srt/models/registry.py",
        "ecd264ebeb3d3fc49de63b077ed6e024b4e48f62f5ba9baf16113dab0d82b717",
    ),
    Citation(
        "sglang",
        "0.5.11",
        "sglang/srt/models/llama.py",
        "12f93fa8f7e594a1389abad5670bdb6d6b168c4951bb7a0071e06f58873c6e09",
    ),
    Citation(
        "sglang",
        "0.5.11",
        "sglang/srt/models/gpt_oss.py",
        "ff7a92b9a3b6ce746cf3ea0cd2a3ae5d2a965906f9350d3d84986a4aac769553",
    ),
    Citation(
        "sglang",
        "0.5.11",
        "sglang/srt/models/deepseek_v2.py",
        "505a213c65a30389ca36d6d0ba56990530a979d95dc2e3b30b46a962b7db1bf5",
    ),
    Citation(
        "sglang",
        "0.5.11",
        "sglang/srt/model_executor/model_runner.py",
        "8dc3d81b8ce758e19d2e7cd3427c3fd21307b1e332276f777ae95225751f4978",
    ),
)

_CITE_0_5_23 = (
    Citation(
        "sglang",
        "0.5.23",
        "sglang/srt/models/registry.py",
        "2394ed48eddaf315cfe8e9220969e8ebf796aebd5adb2b7394baa951f6f6e020",
    ),
    Citation(
        "sglang",
        "0.5.23",
        "sglang/srt/models/llama.py",
        "19a843fda901ee5cdc1ede2356d5e87f804fd87a37cc2719b6698f434b82c9ae",
    ),
    Citation(
        "sglang",
        "0.5.23",
        "sglang/srt/models/gpt_oss.py",
        "b8dca096b9c6757618329fc2426cda35a15ea559076f58f588751d0787427fe9",
    ),
    Citation(
        "sglang",
        "0.5.23",
        "sglang/srt/models/deepseek_v2.py",
        "f61f93019bf1e7680f45a1fe227244433e1b22021cb955e53d25b9cf900473f9",
    ),
    Citation(
        "sglang",
        "0.5.23",
        "sglang/srt/model_executor/model_runner_components/attention_backend_setup.py",
        "e6db2f8136f45cabc4558dd26db54f3d3b887918b9302a74453f22346e285bb8",
    ),
    Citation(
        "sglang",
        "0.5.23",
        "sglang/srt/models/llama_eagle3.py",
        "b25e5f839b088ddf50138bce4a3c4569acc31f8203727b9a7e2a53c337287dac",
    ),
    Citation(
        "sglang",
        "0.5.23",
        "sglang/srt/arg_groups/speculative_hook.py",
        "d10577c3b5f333ae560adc467e8ca8864196154da5a26683011328c6765a59f0",
    ),
)

_NO_INTERFACE_0_5_11 = _names(
    """
    AfmoeForCausalLM ArceeForCausalLM BaichuanForCausalLM BailingMoeForCausalLMNextN
    BailingMoeV2_5ForCausalLM BertForSequenceClassification BertModel CLIPModel ChatGLMModel
    Cohere2ForCausalLM CohereForCausalLM Contriever DFlashDraftModel DbrxForCausalLM DeciLMForCausalLM
    DeepseekForCausalLM DeepseekOCRForCausalLM DeepseekVL2ForCausalLM DotsOCRForCausalLM
    DotsVLMForCausalLM Ernie4_5_ForCausalLM Ernie4_5_MoeForCausalLM Ernie4_5_MoeForCausalLMMTP
    Ernie4_5_VLMoeForConditionalGeneration Exaone4ForCausalLM ExaoneForCausalLM FalconH1ForCausalLM
    GPT2LMHeadModel GPTBigCodeForCausalLM GPTJForCausalLM Gemma2ForCausalLM
    Gemma2ForSequenceClassification Gemma3ForCausalLM Gemma3ForConditionalGeneration Gemma3nForCausalLM
    Gemma3nForConditionalGeneration Gemma4ForCausalLM Gemma4ForConditionalGeneration GemmaForCausalLM
    Glm4ForCausalLM Glm4vForConditionalGeneration Glm4vMoeForConditionalGeneration
    GlmAsrForConditionalGeneration GlmOcrForConditionalGeneration GlmOcrForConditionalGenerationNextN
    GraniteForCausalLM GraniteMoeForCausalLM GraniteMoeHybridForCausalLM Grok1ForCausalLM
    Grok1ModelForCausalLM HYV3ForCausalLM HYV3ForCausalLMNextN HunYuanDenseV1ForCausalLM
    HunYuanMoEV1ForCausalLM IQuestLoopCoderForCausalLM InternLM2ForCausalLM InternLM2ForRewardModel
    InternS1ForConditionalGeneration InternVLChatModel JetNemotronForCausalLM
    JetVLMForConditionalGeneration KimiLinearForCausalLM KimiVLForConditionalGeneration LLaDA2MoeModelLM
    Lfm2ForCausalLM Lfm2MoeForCausalLM Lfm2VlForConditionalGeneration LightOnOCRForConditionalGeneration
    LlamaEmbeddingModel LlamaForClassification LlamaForSequenceClassification
    LlamaForSequenceClassificationWithNormal_Weights LlavaForConditionalGeneration LlavaLlamaForCausalLM
    LlavaMistralForCausalLM LlavaQwenForCausalLM LlavaVidForCausalLM MiDashengLMModel MiMoForCausalLM
    MiMoMTP MiMoV2FlashForCausalLM MiMoV2ForCausalLM MiMoV2MTP MiniCPM3ForCausalLM MiniCPMForCausalLM
    MiniCPMO MiniCPMV Mistral3ForConditionalGeneration MistralModel MixtralForCausalLM
    MllamaForConditionalGeneration MossVLForConditionalGeneration MultiModalityCausalLM
    NVILAForConditionalGeneration NVILALiteForConditionalGeneration NemotronHForCausalLM
    NemotronHForCausalLMMTP NemotronH_Nano_Omni_Reasoning_V3 NemotronH_Nano_VL_V2 OPTForCausalLM
    Olmo2ForCausalLM OlmoForCausalLM OlmoeForCausalLM OrionForCausalLM POINTSV15ChatModel
    PaddleOCRVLForConditionalGeneration PersimmonForCausalLM Phi3SmallForCausalLM Phi4MMForCausalLM
    PhiForCausalLM PhiMoEForCausalLM PixtralForConditionalGeneration PixtralVisionModel QWenLMHeadModel
    QuantMixtralForCausalLM Qwen2AudioForConditionalGeneration Qwen2ForRewardModel
    Qwen2VLForConditionalGeneration Qwen3ASRForConditionalGeneration Qwen3ForRewardModel
    Qwen3ForSequenceClassification Qwen3OmniMoeForConditionalGeneration Qwen3_5ForCausalLMMTP
    SDARForCausalLM SDARMoeForCausalLM Sarashina2VisionForCausalLM SarvamMLAForCausalLM SolarForCausalLM
    StableLmForCausalLM Starcoder2ForCausalLM Step3VLForConditionalGeneration Step3p5ForCausalLM
    Step3p5MTP StepVLForConditionalGeneration TorchNativeLlamaForCausalLM TorchNativePhi3ForCausalLM
    TransformersEmbeddingModel TransformersForCausalLM TransformersForSequenceClassification
    TransformersMoEEmbeddingModel TransformersMoEForCausalLM TransformersMoEForSequenceClassification
    TransformersMultiModalEmbeddingModel TransformersMultiModalForCausalLM
    TransformersMultiModalForSequenceClassification TransformersMultiModalMoEEmbeddingModel
    TransformersMultiModalMoEForCausalLM TransformersMultiModalMoEForSequenceClassification
    VoxtralForConditionalGeneration WhisperForConditionalGeneration XLMRobertaForSequenceClassification
    XLMRobertaModel XverseForCausalLM XverseMoeForCausalLM YiVLForCausalLM
    """
)
_NO_INTERFACE_0_5_23 = _names(
    """
    AfmoeForCausalLM ArceeForCausalLM BaichuanForCausalLM BailingMM2NativeForConditionalGeneration
    BailingMMNativeForConditionalGeneration BailingMoeForCausalLMNextN BailingMoeV2_5ForCausalLM
    BailingMoeV3ForCausalLM BailingMoeV3VLForConditionalGeneration BeamForCausalLM
    BertForSequenceClassification BertModel CLIPModel ChatGLMModel Cohere2ForCausalLM
    Cohere2MoeForCausalLM Cohere2VisionForConditionalGeneration CohereForCausalLM Contriever
    Cosmos3EdgeForConditionalGeneration DFlash2BeamDraftModel DFlash2DraftModel DFlashDraftModel
    DFlashLagunaForCausalLM DSparkDraftModel DSparkMiniMaxDraftModel DbrxForCausalLM DeciLMForCausalLM
    DeepseekForCausalLM DeepseekOCRForCausalLM DeepseekV4ForCausalLM DeepseekV4ForCausalLMDSpark
    DeepseekV4ForCausalLMNextN DeepseekVL2ForCausalLM DiffusionGemmaForBlockDiffusion
    Dots3NoteForCausalLM Dots3NoteForCausalLMNextN DotsOCRForCausalLM DotsVLMForCausalLM
    Eagle3DeepseekV2ForCausalLM EmbeddingGemma2Model Ernie4_5_ForCausalLM Ernie4_5_MoeForCausalLM
    Ernie4_5_MoeForCausalLMMTP Ernie4_5_VLMoeForConditionalGeneration Exaone4ForCausalLM
    ExaoneForCausalLM FalconH1ForCausalLM FalconMambaForCausalLM GPT2LMHeadModel GPTBigCodeForCausalLM
    GPTJForCausalLM Gemma2ForCausalLM Gemma2ForSequenceClassification Gemma3nForCausalLM
    Gemma3nForConditionalGeneration GemmaForCausalLM GigaChat35ForCausalLM GigaChat35ForCausalLMNextN
    Glm4ForCausalLM Glm4vForConditionalGeneration Glm4vMoeForConditionalGeneration
    GlmAsrForConditionalGeneration GlmImageForConditionalGeneration GlmOcrForConditionalGeneration
    GlmOcrForConditionalGenerationNextN GraniteForCausalLM GraniteMoeForCausalLM
    GraniteMoeHybridForCausalLM GraniteMoeSWAForCausalLM GraniteMoeSharedForCausalLM
    GraniteSWAForCausalLM Grok1ForCausalLM Grok1ModelForCausalLM HYV3ForCausalLM HYV3ForCausalLMNextN
    HYV4ForCausalLM HYV4ForCausalLMNextN HrmTextForCausalLM HunYuanDenseV1ForCausalLM
    HunYuanMoEV1ForCausalLM IQuestLoopCoderForCausalLM IQuestQ1ForCausalLM IQuestQ1MTP
    InklingForConditionalGeneration InklingForConditionalGenerationMTP InternLM2ForCausalLM
    InternLM2ForRewardModel InternS1ForConditionalGeneration InternVLChatModel JetNemotronForCausalLM
    JetVLMForConditionalGeneration K2HorizonForCausalLM KimiK3ForConditionalGeneration
    KimiK3LinearForCausalLM KimiLinearForCausalLM KimiVLForConditionalGeneration LLaDA2MoeModelLM
    LagunaForCausalLM Lfm2BidirectionalModel Lfm2DSparkDraftModel Lfm2ForCausalLM Lfm2MoeForCausalLM
    Lfm2VlForConditionalGeneration LiLiCorrDraftModel LightOnOCRForConditionalGeneration LingDSparkModel
    LlamaEmbeddingModel LlamaForClassification LlamaForSequenceClassification
    LlamaForSequenceClassificationWithNormal_Weights LlavaForConditionalGeneration LlavaLlamaForCausalLM
    LlavaMistralForCausalLM LlavaQwenForCausalLM LlavaVidForCausalLM
    LocateAnythingForConditionalGeneration Mamba2ForCausalLM MambaForCausalLM MiDashengLMModel
    MiMoForCausalLM MiMoMTP MiMoV2ASRForCausalLM MiMoV2FlashForCausalLM MiMoV2ForCausalLM MiMoV2MTP
    MiniCPM3ForCausalLM MiniCPMForCausalLM MiniCPMO MiniCPMSALAForCausalLM MiniCPMV
    MiniCPMV4_6ForConditionalGeneration MiniCPMV4_7ForConditionalGeneration MiniMaxDFlash2DraftModel
    Mistral3ForConditionalGeneration MistralModel MixtralForCausalLM MllamaForConditionalGeneration
    MossVLForConditionalGeneration MultiModalityCausalLM MuseGlimmerAssistantModel
    MuseGlimmerForCausalLM MuseGlimmerForConditionalGeneration MuseSparkForConditionalGeneration
    NVILAForConditionalGeneration NVILALiteForConditionalGeneration NanbeigeForCausalLM
    NanbeigeForSequenceClassification NemotronHForCausalLM NemotronHForCausalLMMTP
    NemotronHPuzzleForCausalLM NemotronH_Nano_Omni_Reasoning_V3 NemotronH_Nano_VL_V2
    NemotronH_Omni_Reasoning_V3 OPTForCausalLM Olmo2ForCausalLM OlmoForCausalLM OlmoeForCausalLM
    OrionForCausalLM POINTSV15ChatModel PaddleOCRVLForConditionalGeneration PersimmonForCausalLM
    Phi3SmallForCausalLM Phi4MMForCausalLM PhiForCausalLM PhiMoEForCausalLM
    PixtralForConditionalGeneration PixtralVisionModel QWenLMHeadModel QuantMixtralForCausalLM
    Qwen2AudioForConditionalGeneration Qwen2ForRewardModel Qwen2ForSequenceClassification
    Qwen2VLForConditionalGeneration Qwen3ASRForConditionalGeneration Qwen3DSparkModel
    Qwen3ForRewardModel Qwen3ForSequenceClassification Qwen3Model Qwen3OmniMoeForConditionalGeneration
    Qwen3_5ForCausalLMMTP Qwen4ExpForCausalLMMTP SDARForCausalLM SDARMoeForCausalLM
    Sarashina2VisionForCausalLM SarvamMLAForCausalLM SolarForCausalLM Spark2_5ForCausalLM
    StableLmForCausalLM Starcoder2ForCausalLM Step3VLForConditionalGeneration Step3p5ForCausalLM
    Step3p5MTP Step3p7ForConditionalGeneration StepVLForConditionalGeneration
    TorchNativeLlamaForCausalLM TorchNativePhi3ForCausalLM TransformersEmbeddingModel
    TransformersForCausalLM TransformersForSequenceClassification TransformersMoEEmbeddingModel
    TransformersMoEForCausalLM TransformersMoEForSequenceClassification
    TransformersMultiModalEmbeddingModel TransformersMultiModalForCausalLM
    TransformersMultiModalForSequenceClassification TransformersMultiModalMoEEmbeddingModel
    TransformersMultiModalMoEForCausalLM TransformersMultiModalMoEForSequenceClassification
    UnlimitedOCRForCausalLM VoxtralForConditionalGeneration WhisperForConditionalGeneration
    XLMRobertaForSequenceClassification XLMRobertaModel XllmForCausalLM XverseForCausalLM
    XverseMoeForCausalLM YiVLForCausalLM ZayaForCausalLM
    """
)

SGLANG_0_5_11 = TargetTable(
    "sglang",
    "0.5.11",
    (
        *_capturing(_release("0.5.11")),
        TargetRow(
            _NO_INTERFACE_0_5_11, Capture.NO_INTERFACE, "registered without set_eagle3_layers_to_capture"
        ),
    ),
    _CITE_0_5_11,
    "AttributeError: the model has no attribute 'set_eagle3_layers_to_capture' (model_runner.py "
    "init_aux_hidden_state_capture): the server does not start",
    unlisted=Capture.BELOW_N,
    conversion="per class: the release table's aux rules (most add 1 to every id)",
)
SGLANG_0_5_23 = TargetTable(
    "sglang",
    "0.5.23",
    (
        *_capturing(_release("0.5.23")),
        TargetRow(
            _NO_INTERFACE_0_5_23, Capture.NO_INTERFACE, "registered without set_eagle3_layers_to_capture"
        ),
    ),
    _CITE_0_5_23,
    'ValueError "Model ... does not implement set_eagle3_layers_to_capture, which EAGLE3 aux hidden-state '
    'capture requires." (attention_backend_setup.py): the server does not start',
    unlisted=Capture.BELOW_N,
    conversion="per class: the release table's aux rules (most add 1 to every id)",
)


def _ran(version: str, *defining: str) -> tuple[str, ...]:
    """The row names (``where``) of the classes ``defining`` in the release table covering ``version``."""
    return tuple(
        f"{g.defining_class} ({g.rule.source})"
        for g in _release(version).aux_rules
        if g.defining_class in defining
    )


# tests/loaders/test_target_capture_oracle.py runs these decoders' own capture loop on sglang 0.5.23
SGLANG_0_5_23 = mark_ran(
    SGLANG_0_5_23,
    *_ran("0.5.23", "llama.LlamaForCausalLM", "qwen2.Qwen2ForCausalLM", "qwen3.Qwen3ForCausalLM"),
)

TABLES: tuple[TargetTable, ...] = (SGLANG_0_5_11, SGLANG_0_5_23)
