"""Tests for the deterministic demo-data generator (eagle3_forensics.demo)."""

from __future__ import annotations

import hashlib
import json
import pathlib
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from eagle3_forensics import demo

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")


def _digests(root: pathlib.Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("demo_a")
    demo.make_demo(out)
    return out


def _tensors(root: pathlib.Path, variant: str) -> dict[str, torch.Tensor]:
    return load_file(str(root / "drafters" / variant / "model.safetensors"))


def _config(root: pathlib.Path, variant: str) -> dict[str, object]:
    cfg: dict[str, object] = json.loads((root / "drafters" / variant / "config.json").read_text())
    return cfg


@pytest.mark.timeout(60)
def test_byte_identical_across_runs(demo_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    demo.make_demo(tmp_path)
    first, second = _digests(demo_dir), _digests(tmp_path)
    assert first.keys() == second.keys()
    assert first == second


def test_returns_every_variant(demo_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    assert set(demo.EXPECTED_FINDINGS) == set(demo.VARIANTS)
    assert demo.VARIANTS == (
        "healthy",
        "speculators_layout",
        "d2t_absolute",
        "d2t_double_offset",
        "d2t_missing",
    )
    drafters = sorted(p.name for p in (demo_dir / "drafters").iterdir())
    assert drafters == sorted(demo.VARIANTS)
    for v in demo.VARIANTS:
        assert (demo_dir / "drafters" / v / "config.json").is_file()
        assert (demo_dir / "drafters" / v / "model.safetensors").is_file()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (demo_dir / "target" / name).is_file()
    assert (demo_dir / "README.md").is_file()


def test_return_value_maps_variants_to_dirs(tmp_path: pathlib.Path) -> None:
    paths = demo.make_demo(tmp_path)
    assert tuple(paths) == demo.VARIANTS
    for name, path in paths.items():
        assert path == tmp_path / "drafters" / name
        assert path.is_dir()


def test_healthy_d2t_identity(demo_dir: pathlib.Path) -> None:
    t = _tensors(demo_dir, "healthy")
    d2t, t2d = t["d2t"], t["t2d"]
    assert d2t.dtype == torch.int64 and d2t.shape == (demo.DRAFT_VOCAB_SIZE,)
    assert t2d.dtype == torch.bool and t2d.shape == (demo.VOCAB_SIZE,)
    assert int(t2d.sum()) == demo.DRAFT_VOCAB_SIZE
    assert torch.equal(torch.nonzero(t2d).flatten(), d2t + torch.arange(demo.DRAFT_VOCAB_SIZE))
    # the draft vocabulary is not one contiguous block
    assert int(d2t[-1]) > 0


def test_healthy_d2t_leading_zeros(demo_dir: pathlib.Path) -> None:
    d2t = _tensors(demo_dir, "healthy")["d2t"]
    assert torch.equal(d2t[:20], torch.zeros(20, dtype=torch.int64))


def test_healthy_layout_and_config(demo_dir: pathlib.Path) -> None:
    t = _tensors(demo_dir, "healthy")
    assert t["fc.weight"].shape == (128, 384)
    assert t["midlayer.self_attn.q_proj.weight"].shape == (128, 256)
    assert t["lm_head.weight"].shape == (256, 128)
    assert not any(k.startswith("embed_tokens") or k.startswith("layers.") for k in t)
    cfg = _config(demo_dir, "healthy")
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
    assert cfg["draft_vocab_size"] == 256 and cfg["vocab_size"] == 512
    assert not any("aux" in k for k in cfg)
    assert "eagle_config" not in cfg


def test_broken_d2t_variants(demo_dir: pathlib.Path) -> None:
    healthy = _tensors(demo_dir, "healthy")
    ar = torch.arange(demo.DRAFT_VOCAB_SIZE)
    sel = healthy["d2t"] + ar
    assert torch.equal(_tensors(demo_dir, "d2t_absolute")["d2t"], sel)
    assert torch.equal(_tensors(demo_dir, "d2t_double_offset")["d2t"], sel - 2 * ar)
    missing = _tensors(demo_dir, "d2t_missing")
    assert "d2t" not in missing and "t2d" in missing
    for v in ("d2t_absolute", "d2t_double_offset", "d2t_missing"):
        other = _tensors(demo_dir, v)
        for k, x in other.items():
            if k != "d2t":
                assert torch.equal(x, healthy[k]), (v, k)


def test_speculators_layout(demo_dir: pathlib.Path) -> None:
    healthy = _tensors(demo_dir, "healthy")
    spec = _tensors(demo_dir, "speculators_layout")
    target = load_file(str(demo_dir / "target" / "model.safetensors"))
    assert torch.equal(spec["embed_tokens.weight"], target["model.embed_tokens.weight"])
    assert not any(k.startswith("midlayer.") for k in spec)
    for k, x in healthy.items():
        assert torch.equal(spec[k.replace("midlayer.", "layers.0.")], x)
    cfg = _config(demo_dir, "speculators_layout")
    assert cfg["speculators_model_type"] == "eagle3"
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    layer_cfg = cfg["transformer_layer_config"]
    assert isinstance(layer_cfg, dict) and layer_cfg["model_type"] == "llama"
    assert "draft_vocab_size" not in layer_cfg and "architectures" not in layer_cfg


def test_target_and_tokenizer(demo_dir: pathlib.Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    cfg = AutoConfig.from_pretrained(demo_dir / "target")
    assert cfg.num_hidden_layers == 8 and cfg.head_dim == 32 and cfg.vocab_size == 512
    assert not cfg.tie_word_embeddings
    tok = AutoTokenizer.from_pretrained(demo_dir / "target")
    assert len(tok) == 512
    assert (tok.bos_token_id, tok.eos_token_id) == (0, 1)
    text = "the cat sees the red ball today."
    assert tok.decode(tok(text)["input_ids"]) == text
    target = load_file(str(demo_dir / "target" / "model.safetensors"))
    assert all(x.dtype == torch.float32 for x in target.values())
    # lm_head rows of the drafter are the target's selected rows plus small noise
    healthy = _tensors(demo_dir, "healthy")
    sel = torch.nonzero(healthy["t2d"]).flatten()
    diff = (healthy["lm_head.weight"] - target["lm_head.weight"][sel]).abs().max()
    assert 0 < float(diff) < 0.02


def test_import_does_not_pull_transformers() -> None:
    code = "import sys, eagle3_forensics.demo; sys.exit(1 if 'transformers' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
