"""The demo world: the generator (quick budget: determinism, structure) and the committed data/demo."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
from safetensors.torch import load_file

from eagle3_forensics.demo import world as demo

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

ROOT = pathlib.Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "data" / "demo"
pytestmark = pytest.mark.slow  # trains a quick demo world and regenerates it (make test-all)


def _digests(root: pathlib.Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def quick_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("demo_quick")
    demo.make_demo(out, budget=demo.QUICK)
    return out


def _tensors(root: pathlib.Path, variant: str) -> dict[str, torch.Tensor]:
    return load_file(str(root / "drafters" / variant / "model.safetensors"))


def _config(root: pathlib.Path, variant: str) -> dict[str, object]:
    cfg: dict[str, object] = json.loads((root / "drafters" / variant / "config.json").read_text())
    return cfg


ROOTS = ["quick", "committed"]


@pytest.fixture(params=ROOTS)
def root(request: pytest.FixtureRequest, quick_dir: pathlib.Path) -> pathlib.Path:
    return quick_dir if request.param == "quick" else COMMITTED


# -- the generator -------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_byte_identical_across_runs(quick_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    demo.make_demo(tmp_path, budget=demo.QUICK)
    first, second = _digests(quick_dir), _digests(tmp_path)
    assert first.keys() == second.keys()
    assert first == second


def test_generation_restores_torch_state(tmp_path: pathlib.Path) -> None:
    threads, det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    demo.make_demo(tmp_path, budget=demo.QUICK)
    assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()) == (threads, det)


def test_return_value_maps_variants_to_dirs(tmp_path: pathlib.Path) -> None:
    paths = demo.make_demo(tmp_path, budget=demo.QUICK)
    assert tuple(paths) == demo.VARIANTS
    for name, path in paths.items():
        assert path == tmp_path / "drafters" / name
        assert path.is_dir()


def test_world_is_a_successor_cycle() -> None:
    world = demo.make_world(0)
    assert len(world.facts) == demo.N_FACTS == len(set(world.facts))
    seen, f = set(), 0
    for _ in range(demo.N_FACTS):
        seen.add(f)
        f = world.successor[f]
    assert seen == set(range(demo.N_FACTS)) and f == 0


# -- structure (quick run and committed data) ----------------------------------------------------


def test_every_variant_is_written(root: pathlib.Path) -> None:
    assert set(demo.EXPECTED_FINDINGS) == set(demo.VARIANTS)
    assert demo.VARIANTS == (
        "healthy",
        "speculators_layout",
        "layers_flat",
        "d2t_absolute",
        "d2t_double_offset",
        "d2t_missing",
        "aux_shifted",
    )
    drafters = sorted(p.name for p in (root / "drafters").iterdir())
    assert drafters == sorted(demo.VARIANTS)
    for v in demo.VARIANTS:
        assert (root / "drafters" / v / "config.json").is_file()
        assert (root / "drafters" / v / "model.safetensors").is_file()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (root / "target" / name).is_file()
    assert (root / "README.md").is_file()
    lines = (root / "prompts.jsonl").read_text().splitlines()
    assert lines and all(isinstance(json.loads(ln)["prompt"], str) for ln in lines)


def test_healthy_d2t_identity(root: pathlib.Path) -> None:
    t = _tensors(root, "healthy")
    d2t, t2d = t["d2t"], t["t2d"]
    assert d2t.dtype == torch.int64 and d2t.shape == (demo.DRAFT_VOCAB_SIZE,)
    assert t2d.dtype == torch.bool and t2d.shape == (demo.VOCAB_SIZE,)
    assert int(t2d.sum()) == demo.DRAFT_VOCAB_SIZE
    assert torch.equal(torch.nonzero(t2d).flatten(), d2t + torch.arange(demo.DRAFT_VOCAB_SIZE))
    assert int(d2t[-1]) > 0  # the draft vocabulary is not the first 256 ids
    assert int(d2t[0]) == 0  # ...but it starts with them (padding with the smallest unused ids)


def test_healthy_layout_and_config(root: pathlib.Path) -> None:
    t = _tensors(root, "healthy")
    assert t["fc.weight"].shape == (128, 384)
    assert t["midlayer.self_attn.q_proj.weight"].shape == (128, 256)
    assert t["lm_head.weight"].shape == (256, 128)
    assert t["fc.weight"].dtype == torch.bfloat16
    assert not any(k.startswith(("embed_tokens", "layers.")) for k in t)
    cfg = _config(root, "healthy")
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
    assert cfg["draft_vocab_size"] == 256 and cfg["vocab_size"] == 512
    assert cfg["head_dim"] == 32
    assert not any("aux" in k for k in cfg)
    assert "eagle_config" not in cfg


def test_broken_d2t_variants(root: pathlib.Path) -> None:
    healthy = _tensors(root, "healthy")
    ar = torch.arange(demo.DRAFT_VOCAB_SIZE)
    sel = healthy["d2t"] + ar
    assert torch.equal(_tensors(root, "d2t_absolute")["d2t"], sel)
    assert torch.equal(_tensors(root, "d2t_double_offset")["d2t"], sel - 2 * ar)
    missing = _tensors(root, "d2t_missing")
    assert "d2t" not in missing and "t2d" in missing
    for v in ("d2t_absolute", "d2t_double_offset", "d2t_missing"):
        for k, x in _tensors(root, v).items():
            if k != "d2t":
                assert torch.equal(x, healthy[k]), (v, k)


@pytest.mark.parametrize(("variant", "ids"), [("speculators_layout", [2, 4, 5]), ("aux_shifted", [1, 3, 4])])
def test_speculators_layouts(root: pathlib.Path, variant: str, ids: list[int]) -> None:
    healthy = _tensors(root, "healthy")
    spec = _tensors(root, variant)
    target = load_file(str(root / "target" / "model.safetensors"))
    assert torch.equal(spec["embed_tokens.weight"], target["model.embed_tokens.weight"])
    assert not any(k.startswith("midlayer.") for k in spec)
    for k, x in healthy.items():
        assert torch.equal(spec[k.replace("midlayer.", "layers.0.")], x)
    cfg = _config(root, variant)
    assert cfg["speculators_model_type"] == "eagle3"
    assert cfg["eagle_aux_hidden_state_layer_ids"] == ids
    layer_cfg = cfg["transformer_layer_config"]
    assert (
        isinstance(layer_cfg, dict)
        and layer_cfg["model_type"] == "llama"
        and layer_cfg["hidden_act"] == "silu"
    )
    assert "draft_vocab_size" not in layer_cfg and "architectures" not in layer_cfg


def test_target_and_tokenizer(root: pathlib.Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    cfg = AutoConfig.from_pretrained(root / "target")
    assert cfg.num_hidden_layers == 8 and cfg.head_dim == 32 and cfg.vocab_size == 512
    assert cfg.architectures == ["LlamaForCausalLM"] and not cfg.tie_word_embeddings
    tok = AutoTokenizer.from_pretrained(root / "target")
    assert len(tok) == 512
    assert (tok.bos_token_id, tok.eos_token_id) == (0, 1)
    text = "the cat sees the red ball today."
    ids = tok(text)["input_ids"]
    assert ids[0] == demo.BOS_ID  # <s> is prepended, as vLLM's tokenisation of a prompt will do
    assert tok.decode(ids, skip_special_tokens=True) == text
    target = load_file(str(root / "target" / "model.safetensors"))
    assert all(x.dtype == torch.bfloat16 for x in target.values())


# -- the committed data --------------------------------------------------------------------------


def test_committed_data_is_small() -> None:
    total = sum(p.stat().st_size for p in COMMITTED.rglob("*") if p.is_file())
    drafters = sum(p.stat().st_size for p in (COMMITTED / "drafters").rglob("*") if p.is_file())
    assert drafters < 10_000_000
    assert total < 12_000_000


def test_committed_readme_describes_the_world() -> None:
    text = (COMMITTED / "README.md").read_text()
    for variant in demo.VARIANTS:
        assert f"`{variant}`" in text
    assert "byte-identical" in text and "@" not in text.replace("@SEED@", "")


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(
    os.environ.get("E3F_REGENERATE") != "1", reason="full regeneration takes minutes: E3F_REGENERATE=1"
)
def test_full_regeneration_matches_committed(tmp_path: pathlib.Path) -> None:
    demo.make_demo(tmp_path)
    regenerated, committed = _digests(tmp_path), _digests(COMMITTED)
    assert {name: committed.get(name) for name in regenerated} == regenerated  # other files: demo_corpus


def test_import_does_not_pull_transformers() -> None:
    code = "import sys, eagle3_forensics.demo.world; sys.exit(1 if 'transformers' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
