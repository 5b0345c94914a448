"""The trainers that write EAGLE-3 drafters: how to tell them apart from the config alone, and the aux
layers each captures when the user names none.

A declarative table (:data:`TRAINERS`). Every default is in the Hugging Face ``hidden_states`` index
convention (index ``i`` = the input of decoder layer ``i``) and is derived from the trainer's released
code, cited in ``source``. Trainers that hook layer *outputs* ``{1, N//2-1, N-4}`` therefore appear as
HF ``[2, N//2, N-3]``. The table only says what a trainer does by default: a config without ids can
have been trained on other layers (a user setting, an older default; vllm#50170), so the checks treat
a default as a presumption that a measurement settles (:mod:`eagle3_forensics.checks.aux_trained`).

Distinguishable from the config: speculators (``speculators_config``), ModelOpt (its exported
``eagle_config`` keys), AngelSlim (``Eagle3LlamaForCausalLM``), the EAGLE reference (``LlamaForCausalLM``
with ``draft_vocab_size``), SpecForge (``LlamaForCausalLMEagle3`` and the other ``*Eagle3`` classes).
TorchSpec exports SpecForge's shape and shares its default, so it is reported with SpecForge. NeMo
Automodel's EAGLE-3 export has no shape of its own that we could verify, so it is not recognised
(unknown trainer: the checks warn instead of deciding).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eagle3_forensics.io.config import EAGLE, DrafterConfig

#: keys ModelOpt's exporter writes into ``eagle_config`` and no other trainer does
#: (NVIDIA/Model-Optimizer ``modelopt/torch/export/plugins/hf_spec_export.py``, the llama template)
MODELOPT_EAGLE_KEYS = frozenset(
    {"use_input_layernorm_in_first_layer", "use_last_layernorm", "use_mtp_layernorm", "next_layer_regular"}
)


def _hf_default(n: int) -> list[int]:
    return [2, n // 2, n - 3]


def _angelslim_default(n: int) -> list[int]:
    # _get_default_aux_layer_ids(len(hidden_states)) with len = N + 1 (the embedding included), then
    # hidden_states[id + 1]: [1, (N+1)//2 - 1, N-3] + 1
    return [2, (n + 1) // 2, n - 2]


@dataclass(frozen=True)
class Trainer:
    """One trainer: how its configs look and which aux layers (HF index) it captures by default."""

    name: str
    display: str
    shape: str  # how the config shows it
    formula: str  # the default, HF index, as text
    source: str  # the released code the default is read from (repository@version path)
    default: Callable[[int], list[int]] | None = None  # None: the SGLang target class's default
    follows_sglang_class: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "display": self.display,
            "shape": self.shape,
            "default": self.formula,
            "source": self.source,
        }


TRAINERS: dict[str, Trainer] = {
    t.name: t
    for t in (
        Trainer(
            "speculators",
            "speculators",
            "speculators_config (Eagle3Speculator)",
            "[2, N//2, N-3]",
            "vllm-project/speculators@028a49e src/speculators/data_generation/vllm_hidden_states_generator.py "
            "(layer_ids None -> [2, N//2, N-3, N-1]; the last feeds the verifier, the first three are the aux ids)",
            _hf_default,
        ),
        Trainer(
            "modelopt",
            "NVIDIA ModelOpt",
            "LlamaForCausalLMEagle3 with eagle_config." + "/".join(sorted(MODELOPT_EAGLE_KEYS)),
            "[2, N//2, N-3]",
            "NVIDIA/Model-Optimizer 0.47 modelopt/torch/speculative/plugins/hf_eagle.py ({1, N//2-1, N-4} hooked "
            "on layer outputs); export shape: modelopt/torch/export/plugins/hf_spec_export.py",
            _hf_default,
        ),
        Trainer(
            "angelslim",
            "AngelSlim",
            "Eagle3LlamaForCausalLM",
            "[2, (N+1)//2, N-2]",
            "Tencent/AngelSlim@0725bc8 angelslim/compressor/speculative/train/models/target/"
            "target_model_wrapper.py (_get_default_aux_layer_ids(len(hidden_states)), len = N+1, then +1 for "
            "the embedding); configs: angelslim/compressor/speculative/train/configs/*-eagle3.json",
            _angelslim_default,
        ),
        Trainer(
            "specforge",
            "SpecForge/TorchSpec",
            "LlamaForCausalLMEagle3 / another *Eagle3 class, no ModelOpt keys",
            "the SGLang class default",
            "sgl-project/SpecForge@00c4bba specforge/modeling/target/eagle3_target_model.py "
            "(set_aux_hidden_states_layers: HF backend {1, N//2-1, N-4} on layer outputs, SGLang backend the "
            "class's set_eagle3_layers_to_capture default); torchspec-project/TorchSpec@4643a09 "
            "torchspec/models/target/eagle3_target_model.py (the same)",
            None,
            follows_sglang_class=True,
        ),
        Trainer(
            "eagle",
            "EAGLE reference",
            "LlamaForCausalLM with draft_vocab_size",
            "[2, N//2, N-3]",
            "SafeAILab/EAGLE@cb7e0841 eagle/model/modeling_llama_kv.py:1138 (hard-coded capture)",
            _hf_default,
        ),
    )
}


def recognise_trainer(cfg: DrafterConfig) -> Trainer | None:
    """The trainer whose export shape ``cfg`` has, or ``None`` when the shape is no trainer's own."""
    if cfg.style == "speculators":
        return TRAINERS["speculators"]
    eagle = cfg.raw.get(EAGLE)
    if isinstance(eagle, dict) and MODELOPT_EAGLE_KEYS & set(eagle):
        return TRAINERS["modelopt"]
    archs = cfg.architectures
    if archs and archs[0] == "Eagle3LlamaForCausalLM":
        return TRAINERS["angelslim"]
    if any("Eagle3" in a or "EAGLE3" in a for a in archs):
        return TRAINERS["specforge"]
    if archs and archs[0] == "LlamaForCausalLM" and cfg.draft_vocab_size is not None:
        return TRAINERS["eagle"]
    return None


__all__ = ["MODELOPT_EAGLE_KEYS", "TRAINERS", "Trainer", "recognise_trainer"]
