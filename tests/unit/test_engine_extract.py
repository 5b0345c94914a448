"""The maintainer's extractor on small source trees written here (fast, offline).

Each tree mimics one shape the released wheels have (tests/loaders/test_extract_wheels.py runs
the same extractor on the real ones): the vLLM registry, ``SupportsEagle3`` and the capture
sites of a decoder's ``forward``; SGLang's ``EntryClass`` and ``set_eagle3_layers_to_capture``;
the launch facts of ``config/speculative.py``. The last tests run the whole loop: a release
against its record, the diff, the re-derived record written and read back.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from eagle3_forensics.engines.extract import drift
from eagle3_forensics.engines.extract.__main__ import main
from eagle3_forensics.engines.extract.facts import INTERFACE_DEFAULT
from eagle3_forensics.engines.extract.records import compare_targets, settle, targets_section
from eagle3_forensics.engines.extract.run import extract
from eagle3_forensics.engines.extract.source import SourceTree
from eagle3_forensics.engines.record import read_record

INTERFACES = """
class EagleModelMixin:
    aux_hidden_state_layers = ()

    def _maybe_add_hidden_state(self, aux, layer_idx, hidden_states, residual):
        if layer_idx in self.aux_hidden_state_layers:
            aux.append(hidden_states + residual if residual is not None else hidden_states)
        return aux


class SupportsEagle3(Protocol):
    def set_aux_hidden_state_layers(self, layers):
        holder = getattr(self, "model", self)
        assert isinstance(holder, EagleModelMixin), (
            "Model instance must inherit from EagleModelMixin to set auxiliary layers"
        )

    def get_eagle3_default_aux_hidden_state_layers(self):
        num_layers = len(self.model.layers)
        return (2, num_layers // 2, num_layers - 3)
"""

LLAMA = """
from .interfaces import EagleModelMixin, SupportsEagle3


class LlamaModel(nn.Module, EagleModelMixin):
    def forward(self, x):
        residual = None
        aux = []
        self._maybe_add_hidden_state(aux, 0, x, residual)
        for idx, layer in enumerate(self.layers[self.start_layer : self.end_layer]):
            x, residual = layer(x, residual)
            self._maybe_add_hidden_state(aux, idx + 1, x, residual)
        return x, aux


class LlamaForCausalLM(nn.Module, SupportsEagle3):
    def __init__(self):
        self.model = self._init_model()

    def _init_model(self):
        return LlamaModel()


class NoInterfaceForCausalLM(nn.Module):
    def __init__(self):
        self.model = LlamaModel()
"""

DEEP = """
from vllm.model_executor.models.interfaces import SupportsEagle3


class DeepModel(nn.Module):
    def forward(self, x):
        residual = None
        aux = []
        for idx, layer in enumerate(self.layers):
            if idx in self.aux_hidden_state_layers:
                aux.append(x + residual)
            x, residual = layer(x, residual)
        if get_pp_group().is_last_rank and self.end_layer in self.aux_hidden_state_layers:
            aux.append(x + residual)
        return x, aux


class DeepForCausalLM(nn.Module, SupportsEagle3):
    model_cls = DeepModel

    def __init__(self):
        self.model = self.model_cls()

    def set_aux_hidden_state_layers(self, layers):
        self.model.aux_hidden_state_layers = layers
"""

MIMO = """
from .llama import LlamaForCausalLM, LlamaModel


class MiMoModel(LlamaModel):
    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class MiMoForCausalLM(LlamaForCausalLM):
    def __init__(self):
        self.model = MiMoModel()


class PlainModel(nn.Module):
    def forward(self, x):
        return x


class PlainForCausalLM(LlamaForCausalLM):
    def __init__(self):
        self.model = PlainModel()


class WrapModel(LlamaModel):
    def forward(self, x, **kw):
        return super().forward(x, **kw)


class WrapForCausalLM(LlamaForCausalLM):
    def _init_model(self):
        return WrapModel()
"""

MM = """
from .interfaces import SupportsEagle3
from .utils import init_vllm_registered_model


class VisionForConditionalGeneration(nn.Module, SupportsEagle3):
    def __init__(self):
        self.language_model = init_vllm_registered_model(architectures=["LlamaForCausalLM"])


class DeepVisionForConditionalGeneration(nn.Module, SupportsEagle3):
    def __init__(self):
        self.language_model = init_vllm_registered_model(architectures=["DeepForCausalLM"])

    def set_aux_hidden_state_layers(self, layers):
        self.language_model.set_aux_hidden_state_layers(layers)


class AnyVisionForConditionalGeneration(nn.Module, SupportsEagle3):
    def __init__(self):
        self.language_model = init_vllm_registered_model(architectures=config.architectures)
"""

TRANSFORMERS = """
from ..interfaces import SupportsEagle3


class Base(nn.Module, SupportsEagle3):
    def set_aux_hidden_state_layers(self, layers):
        for layer in layers:
            name = self._layer_names[layer - 1]
"""

PLATFORM_INIT = """
from vllm.platforms import current_platform

if current_platform.is_rocm():
    from .amd.model import PlatForCausalLM
else:
    from .nvidia.model import PlatForCausalLM
"""

PLATFORM_NVIDIA = """
from vllm.model_executor.models.llama import LlamaForCausalLM


class PlatForCausalLM(LlamaForCausalLM):
    pass
"""

PLATFORM_AMD = """
class PlatForCausalLM(nn.Module):
    pass
"""

REGISTRY = """
_TEXT_GENERATION_MODELS = {
    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
    "NoInterfaceForCausalLM": ("llama", "NoInterfaceForCausalLM"),
    "DeepForCausalLM": ("deep", "DeepForCausalLM"),
    "MiMoForCausalLM": ("mimo", "MiMoForCausalLM"),
    "PlainForCausalLM": ("mimo", "PlainForCausalLM"),
    "WrapForCausalLM": ("mimo", "WrapForCausalLM"),
    "PlatForCausalLM": ("vllm.models.plat", "PlatForCausalLM"),
    "MissingForCausalLM": ("missing", "MissingForCausalLM"),
}
_MULTIMODAL_MODELS = {
    "VisionForConditionalGeneration": ("mm", "VisionForConditionalGeneration"),
    "DeepVisionForConditionalGeneration": ("mm", "DeepVisionForConditionalGeneration"),
    "AnyVisionForConditionalGeneration": ("mm", "AnyVisionForConditionalGeneration"),
}
_TRANSFORMERS_SUPPORTED_MODELS = {
    "OlmoForCausalLM": ("transformers", "TransformersForCausalLM"),
}
"""

SPECULATIVE = """
SpeculativeMethod = Literal["ngram", "eagle", "eagle3", MTPTypes]
MTPTypes = Literal["mtp"]
RejectionSampleMethod = Literal["standard", "fly"]
_METHOD_SPECIFIC_OPTIONS = ("xpress_topc", "draft_lm_head_quantization")


@config
class SpeculativeConfig:
    method: SpeculativeMethod | None = None
    tensor_parallel_size: int | None = None
    rejection_sample_method: RejectionSampleMethod = "standard"
    custom_method: str | None = field(default=None, init=False)

    @classmethod
    def _validate_method(cls, value):
        raise ValueError(f"Unknown speculative method {value!r}.")

    def _verify_args(self):
        if self.tensor_parallel_size is not None:
            raise ValueError("'tensor_parallel_size' is not a valid argument in the speculative_config.")
        if self.rejection_sample_method == "fly":
            logger.warning_once("FLy verification is a lossy speculative decoding method.")
"""

SPEC_CONFIG = """
_CONFIG_BY_METHOD: dict[str, str] = {
    "eagle3": _builtin("eagle.config", "Eagle3SpeculatorConfig"),
}
"""

EAGLE_CONFIG = """
class EagleSpeculatorConfig:
    supported_options = frozenset({"draft_lm_head_quantization"})


class Eagle3SpeculatorConfig(EagleSpeculatorConfig):
    base_method = "eagle3"
"""

RUNNER = """
def set_eagle3_aux_hidden_state_layers(model):
    if not supports_eagle3(model):
        raise RuntimeError("Model does not support EAGLE3 interface")
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


def vllm_tree(root: Path, **extra: str) -> Path:
    m = "vllm/model_executor/models/"
    return write(
        root,
        {
            m + "registry.py": REGISTRY,
            m + "interfaces.py": INTERFACES,
            m + "llama.py": LLAMA,
            m + "deep.py": DEEP,
            m + "mimo.py": MIMO,
            m + "mm.py": MM,
            m
            + "transformers/__init__.py": "from .base import Base\n\nclass TransformersForCausalLM(Base): ...\n",
            m + "transformers/base.py": TRANSFORMERS,
            "vllm/models/plat/__init__.py": PLATFORM_INIT,
            "vllm/models/plat/nvidia/model.py": PLATFORM_NVIDIA,
            "vllm/models/plat/amd/model.py": PLATFORM_AMD,
            "vllm/config/speculative.py": SPECULATIVE,
            "vllm/config/utils.py": 'merged_config = ConfigDict(extra="forbid")\n',
            "vllm/v1/worker/gpu/spec_decode/speculator_config.py": SPEC_CONFIG,
            "vllm/v1/worker/gpu/spec_decode/eagle/config.py": EAGLE_CONFIG,
            "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py": RUNNER,
            **extra,
        },
    )


@pytest.fixture(scope="module")
def vllm_extraction(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    root = vllm_tree(tmp_path_factory.mktemp("vllm"))
    return {a: v.to_dict() for a, v in extract("vllm", "1.0", root).targets.items()}


def _kind(d: dict[str, dict[str, object]], arch: str) -> tuple[object, ...]:
    v = d[arch]
    return (v["kind"], v.get("first_id"), v.get("last"))


@pytest.mark.parametrize(
    ("arch", "expected"),
    [
        ("LlamaForCausalLM", ("captures", 0, "N")),  # the mixin: id 0 before, idx + 1 after each layer
        ("NoInterfaceForCausalLM", ("no_interface", None, None)),
        ("DeepForCausalLM", ("captures", 1, "N")),  # residual None before layer 0: id 0 crashes
        ("MiMoForCausalLM", ("crash_first_forward", None, None)),  # forward override without capture
        ("PlainForCausalLM", ("startup_refusal", None, None)),  # decoder is no EagleModelMixin
        ("WrapForCausalLM", ("captures", 0, "N")),  # super().forward reaches the capturing forward
        ("PlatForCausalLM", ("captures", 0, "N")),  # the CUDA branch of a platform package
        ("VisionForConditionalGeneration", ("captures", 0, "N")),  # language model's .model is a mixin
        ("DeepVisionForConditionalGeneration", ("captures", 1, "N")),  # delegated: the inner verdict
        ("AnyVisionForConditionalGeneration", ("delegated", None, None)),  # the text config decides
        ("OlmoForCausalLM", ("captures", 1, "N")),  # _layer_names[layer - 1]: id 0 is a KeyError
        ("MissingForCausalLM", ("unknown", None, None)),
    ],
)
def test_vllm_verdicts(
    vllm_extraction: dict[str, dict[str, object]], arch: str, expected: tuple[object, ...]
) -> None:
    assert _kind(vllm_extraction, arch) == expected


def test_vllm_verdicts_say_why_and_cite(vllm_extraction: dict[str, dict[str, object]]) -> None:
    assert "Model does not support EAGLE3 interface" in str(
        vllm_extraction["NoInterfaceForCausalLM"]["failure"]
    )
    assert "EagleModelMixin" in str(vllm_extraction["PlainForCausalLM"]["failure"])
    assert "never captures" in str(vllm_extraction["MiMoForCausalLM"]["failure"])
    assert "residual is None" in str(vllm_extraction["DeepForCausalLM"]["below_first"])
    assert "not found" in str(vllm_extraction["MissingForCausalLM"]["reason"])
    assert vllm_extraction["LlamaForCausalLM"]["default_ids"] == [list(t) for t in INTERFACE_DEFAULT]
    cites = vllm_extraction["LlamaForCausalLM"]["cites"]
    assert isinstance(cites, list) and {
        "vllm/model_executor/models/llama.py:8",
        "vllm/model_executor/models/llama.py:11",
    } <= set(cites)


def test_vllm_launch_facts(tmp_path: Path) -> None:
    ex = extract("vllm", "1.0", vllm_tree(tmp_path))
    facts = {n: f.value for n, f in ex.facts.items()}
    assert facts["methods"] == ["ngram", "eagle", "eagle3", "mtp"]
    assert facts["methods.unknown"] == "refused: Unknown speculative method"
    assert facts["speculative_config.fields"] == ["method", "tensor_parallel_size", "rejection_sample_method"]
    assert facts["speculative_config.extra"] == "forbid"
    assert "not a valid argument" in facts["refuses.tensor_parallel_size"]
    assert facts["refuses.eagle3_options"] == ["xpress_topc"]
    assert facts["rejection_sample_methods.lossy"] == ["fly"]
    assert ex.undecided() == [
        "target MissingForCausalLM (missing.MissingForCausalLM): "
        "class vllm.model_executor.models.missing.MissingForCausalLM not found in the wheel"
    ]
    every = {c.path for f in ex.facts.values() for c in f.cites} | {
        c.path for v in ex.targets.values() for c in v.cites
    }
    assert set(ex.to_dict()["files"]) == every  # each cited file carries its sha256


SGLANG_LLAMA = """
class LlamaModel(nn.Module):
    def forward(self, x):
        aux = []
        for i in range(self.start_layer, self.end_layer):
            x = self.layers[i](x, capture=aux.capture if i in self.layers_to_capture else None)
        return x, aux


class LlamaForCausalLM(nn.Module):
    def __init__(self):
        self.model = LlamaModel()

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        if layer_ids is None:
            num_layers = self.config.num_hidden_layers
            self.model.layers_to_capture = [2, num_layers // 2, num_layers - 3]
        else:
            self.model.layers_to_capture = [val + 1 for val in layer_ids]


class LlamaForCausalLMEagle3(LlamaForCausalLM):
    pass


class BertModel(nn.Module):
    pass


EntryClass = [LlamaForCausalLM, LlamaForCausalLMEagle3, BertModel]
"""

SGLANG_GPT = """
class GptModel(nn.Module):
    def forward(self, x):
        aux = []
        for i in range(self.start_layer, self.end_layer):
            if i in self.layers_to_capture:
                aux.append(x)
            x = self.layers[i](x)
        num_layers = len(self.layers)
        if num_layers in self.layers_to_capture:
            aux.append(x)
        return x, aux


class GptForCausalLM(nn.Module):
    def __init__(self):
        self.model = GptModel()

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        if layer_ids is None:
            layer_ids = [2, 4]
        if layer_ids and max(layer_ids) == num_layers:
            self.model.layers_to_capture = list(layer_ids)
        else:
            self.model.layers_to_capture = [val + 1 for val in layer_ids]


class VisionForConditionalGeneration(nn.Module):
    def __init__(self):
        from sglang.srt.models.llama import LlamaForCausalLM

        self.language_model = LlamaForCausalLM()

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.language_model.set_eagle3_layers_to_capture(layer_ids)


class ExternalForCausalLM(nn.Module):
    def __init__(self):
        self.model = arch(config)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.model.set_eagle3_layers_to_capture(layer_ids)


EntryClass = [GptForCausalLM, VisionForConditionalGeneration, ExternalForCausalLM]
"""


def test_sglang_verdicts_and_conversions(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "sglang/srt/models/llama.py": SGLANG_LLAMA,
            "sglang/srt/models/gpt.py": SGLANG_GPT,
            "sglang/srt/model_executor/model_runner.py": "model.set_eagle3_layers_to_capture(ids)\n",
            "sglang/srt/server_args.py": 'parser.add_argument("--speculative-algorithm")\n',
        },
    )
    ex = extract("sglang", "0.1", root)
    got = {a: (v.kind, v.last, v.conversion, v.default_ids) for a, v in ex.targets.items()}
    default = ((0, 1, 2), (1, 2, 0), (1, 1, -3))
    assert got["LlamaForCausalLM"] == ("captures", "N-1", "plus_one", default)
    assert got["LlamaForCausalLMEagle3"] == got["LlamaForCausalLM"]  # inherited
    assert got["BertModel"][0] == "no_interface"
    assert got["GptForCausalLM"] == ("captures", "N", "as_is_if_max_is_n", ((0, 1, 2), (0, 1, 4)))
    assert got["VisionForConditionalGeneration"] == got["LlamaForCausalLM"]  # the language model converts
    assert (
        got["ExternalForCausalLM"][0] == "unknown"
        and "outside the wheel" in ex.targets["ExternalForCausalLM"].reason
    )
    assert "AttributeError" in ex.targets["BertModel"].failure
    assert ex.facts["server.speculative_options"].value == ["--speculative-algorithm"]


SGLANG_OLD = """
class OldModel(nn.Module):
    def forward(self, x):
        residual = None
        aux = []
        for i in range(self.start_layer, self.end_layer):
            if i in self.layers_to_capture:
                aux.append(x + residual)
            x, residual = self.layers[i](x, residual)
        return x, aux


class OldForCausalLM(nn.Module):
    def __init__(self):
        self.model = OldModel()

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.model.layers_to_capture = [val + 1 for val in layer_ids]


class GemmaModel(nn.Module):
    def forward(self, x):
        residual = None
        aux = []
        num_layers = len(self.layers)
        for i, layer in enumerate(self.layers):
            if i in self.layers_to_capture:
                aux.append(x)
            x, residual = layer(x, residual)
        if num_layers in self.layers_to_capture:
            aux.append(x)
        return x, aux


class GemmaForCausalLM(nn.Module):
    def __init__(self):
        self.model = GemmaModel()

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.model.layers_to_capture = [val + 1 for val in layer_ids]


EntryClass = [OldForCausalLM, GemmaForCausalLM]
"""


def test_sglang_capture_ranges_from_the_decoder(tmp_path: Path) -> None:
    """SGLang 0.5.11's decoders add a residual that is None before layer 0 (captured index 0 raises);
    Gemma-3/4 (0.5.12 on) and MiniMax-M3 (0.5.23) also capture the final layer's output (index N)."""
    root = write(tmp_path, {"sglang/srt/models/old.py": SGLANG_OLD})
    ex = extract("sglang", "0.1", root)
    old, gemma = ex.targets["OldForCausalLM"], ex.targets["GemmaForCausalLM"]
    assert (old.first_id, old.last, old.conversion) == (1, "N-1", "plus_one")
    assert "residual is None" in old.below_first
    assert (gemma.first_id, gemma.last, gemma.conversion, gemma.below_first) == (0, "N", "plus_one", "")
    section = targets_section(ex, None)
    rows = {a: r for r in section["rows"] for a in r["architectures"]}
    assert (rows["OldForCausalLM"]["capture"], rows["OldForCausalLM"]["first_id"]) == ("below_n", 1)
    assert rows["GemmaForCausalLM"]["capture"] == "through_n" and section["below_first"]


def test_a_stored_change_inside_the_range_survives_the_re_extraction(tmp_path: Path) -> None:
    """A row that says when, inside the record's range, the capture changed (``since``/``before``)
    keeps that, its where and its hand citation while the extraction agrees with it; not once it differs."""
    ex = extract("sglang", "0.2", write(tmp_path, {"sglang/srt/models/old.py": SGLANG_OLD}))
    gemma = {
        "architectures": ["GemmaForCausalLM"],
        "capture": "through_n",
        "where": "gemma (hand: the final layer from 0.2 on)",
        "since": "0.2",
        "before": "below_n",
    }
    stored = {"rows": [gemma], "cites": ["sglang==0.1 sglang/srt/models/old.py"], "unlisted_where": "backend"}
    section = targets_section(ex, stored)
    rows = {a: r for r in section["rows"] for a in r["architectures"]}
    assert {k: rows["GemmaForCausalLM"][k] for k in ("since", "before", "where")} == {
        k: gemma[k] for k in ("since", "before", "where")
    }
    assert (
        section["unlisted_where"] == "backend" and "sglang==0.1 sglang/srt/models/old.py" in section["cites"]
    )
    differs = targets_section(ex, {"rows": [{**gemma, "capture": "below_n"}]})
    assert "since" not in next(r for r in differs["rows"] if "GemmaForCausalLM" in r["architectures"])
    # a record of a later release (range from 0.3) has nothing left to say about 0.2
    later = settle(section, "0.3")
    assert "since" not in rows["GemmaForCausalLM"] and "before" not in rows["GemmaForCausalLM"]
    assert settle(targets_section(ex, stored), "0.1")["rows"] != later["rows"]


def test_source_prefers_the_cuda_branch_and_follows_local_imports(tmp_path: Path) -> None:
    tree = SourceTree(vllm_tree(tmp_path))
    cls = tree.resolve("vllm.models.plat", "PlatForCausalLM")
    assert cls is not None and cls.module.name == "vllm.models.plat.nvidia.model"
    assert [getattr(c, "name", c) for c in tree.mro(cls)][:3] == [
        "PlatForCausalLM",
        "LlamaForCausalLM",
        "Module",
    ]


# -- the loop: a new release against the newest record, the diff, the record written --------------


def _record(targets: dict[str, object], citations: dict[str, str]) -> dict[str, object]:
    return {
        "format": 1,
        "engine": "vllm",
        "package": "vllm",
        "first": "1.0",
        "last": "1.0",
        "targets": targets,
        "startup": {"config_keys": ["num_speculative_tokens"]},  # as 1.0 had it, by hand
        "citations": citations,
    }


def _release(cache: Path, version: str, **extra: str) -> Path:
    """An unpacked release in the cache's ``extracted/`` folder, as the extractor leaves it."""
    return vllm_tree(cache / "extracted" / f"vllm-{version}", **extra)


def test_the_loop_from_one_release_to_the_next(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache, records = tmp_path / "wheels", tmp_path / "records"
    records.mkdir()
    old = extract("vllm", "1.0", _release(cache, "1.0"))
    section = targets_section(old, None)
    # a hand entry for what the extractor cannot decide, as a maintainer writes it
    section["rows"].append(
        {
            "architectures": ["MissingForCausalLM"],
            "capture": "through_n",
            "where": "missing (hand)",
            "proof": "read",
        }
    )
    cites = {f"vllm==1.0 {p}": s for p, s in old.to_dict()["files"].items()}
    (records / "vllm-1.0.json").write_text(json.dumps(_record(section, cites)))
    assert compare_targets(old, section).clean

    # release 1.1: Llama's decoder stops capturing at id 0, a new architecture appears
    new_llama = LLAMA.replace("        self._maybe_add_hidden_state(aux, 0, x, residual)\n", "")
    registry = REGISTRY.replace(
        "_MULTIMODAL_MODELS = {",
        '_MULTIMODAL_MODELS = {\n    "NewForCausalLM": ("llama", "NoInterfaceForCausalLM"),',
    )
    _release(
        cache,
        "1.1",
        **{
            "vllm/model_executor/models/llama.py": new_llama,
            "vllm/model_executor/models/registry.py": registry,
        },
    )
    report = drift.extract_release("vllm", "1.1", cache, offline=True, folder=records)
    assert report.baseline is not None and report.baseline.last == "1.0"
    assert "vllm/model_executor/models/llama.py" in report.files["changed"]
    differ = {a for a, *_ in report.targets.differ}
    assert {"LlamaForCausalLM", "VisionForConditionalGeneration", "PlatForCausalLM"} <= differ
    assert [a for a, _ in report.targets.new] == ["NewForCausalLM"] and report.targets.hand == [
        "MissingForCausalLM"
    ]
    assert not report.clean

    path = drift.write(report, records)  # the one new file of the step
    assert path.name == "vllm-1.1.json" and read_record(path).first == "1.1"
    rows = {a: r for r in read_record(path).section("targets")["rows"] for a in r["architectures"]}
    assert rows["LlamaForCausalLM"]["first_id"] == 1 and rows["MissingForCausalLM"]["proof"] == "read"
    assert read_record(path).section("startup")["config_keys"] == [
        "method",
        "rejection_sample_method",
        "tensor_parallel_size",
    ]
    again = drift.extract_release("vllm", "1.1", cache, offline=True, folder=records)
    assert again.targets.clean and again.baseline is not None and again.baseline.first == "1.1"

    rc = main(
        [
            "extract",
            "vllm",
            "1.1",
            "--cache",
            str(cache),
            "--offline",
            "--records",
            str(records),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 1 and "hand entry needed (read): target MissingForCausalLM" in out  # undecided stays listed
    assert json.loads((tmp_path / "out" / "vllm-1.1.json").read_text())["counts"]["targets"] == 13


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["extract", "vllm", "9.9", "--cache", str(tmp_path), "--offline"])
    assert rc == 2 and capsys.readouterr().err.strip() == f"engine-extract: vllm==9.9: no wheel in {tmp_path}"
    assert main(["extract", "nope", "1.0", "--cache", str(tmp_path), "--offline"]) == 2
