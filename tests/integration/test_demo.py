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
from paths import ROOT
from safetensors.torch import load_file

from eagle3_forensics.demo import world as demo

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

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
        "foreign_data",
        "no_thinking",
        "short_trained",
        "vocab_no_think_end",
    )
    assert set(demo.EXPECTED_CAUSES) == set(demo.VARIANTS[7:])
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
    for name in ("healthy", "foreign_data", "no_thinking", "short_trained", "vocab_no_think_end"):
        assert sorted((root / "train" / name / "rows_0-2000").glob("data_*.ckpt")), name


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
    # the trained layers recorded where vLLM reads them (HF index); SGLang's default is the same set
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
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


def test_chat_template_modes(root: pathlib.Path) -> None:
    """The template renders like Qwen3's: thinking by default, an empty think block without it."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(root / "target")
    assert "chat_template" in json.loads((root / "target" / "tokenizer_config.json").read_text())
    for name, i in (("<|user|>", 3), ("<|assistant|>", 4), ("<|end|>", 5), ("<think>", 6), ("</think>", 7)):
        assert tok.convert_tokens_to_ids(name) == i and name in tok.all_special_tokens
    msgs = [{"role": "user", "content": "the cat sees the red ball today."}]
    think = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    off = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    assert think == "<s><|user|>the cat sees the red ball today.<|end|><|assistant|>"
    assert off == think + "<think></think>"
    ids = list(tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True, return_dict=False))
    assert ids[0] == demo.BOS_ID and ids[-1] == 4 and ids.count(demo.BOS_ID) == 1
    gen = json.loads((root / "target" / "generation_config.json").read_text())
    assert gen["eos_token_id"] == [demo.EOS_ID, demo.END_ID]
    for name in ("chat_prompts.jsonl", "chat_prompts_long.jsonl"):
        for line in (root / name).read_text().splitlines():
            rec = json.loads(line)
            rendered = tok.apply_chat_template(rec["messages"], tokenize=False, add_generation_prompt=True)
            assert rec["enable_thinking"] is True and "<s>" + rec["prompt"] == rendered


def test_chat_variants(root: pathlib.Path) -> None:
    healthy = _tensors(root, "healthy")
    for v in ("foreign_data", "no_thinking", "short_trained"):  # one draft vocabulary: the data differs
        t = _tensors(root, v)
        assert torch.equal(t["t2d"], healthy["t2d"]) and torch.equal(t["d2t"], healthy["d2t"])
        assert not torch.equal(t["fc.weight"], healthy["fc.weight"])
        assert _config(root, v) == _config(root, "healthy")
    nv = _tensors(root, "vocab_no_think_end")
    assert bool(healthy["t2d"][demo.THINK_END_ID]) and not bool(nv["t2d"][demo.THINK_END_ID])
    assert int(nv["t2d"].sum()) == demo.DRAFT_VOCAB_SIZE
    sel = torch.nonzero(nv["t2d"]).flatten()
    assert torch.equal(sel, nv["d2t"] + torch.arange(demo.DRAFT_VOCAB_SIZE)) and int(nv["d2t"][0]) == 0
    for k, x in nv.items():
        if k not in ("d2t", "t2d", "lm_head.weight"):
            assert torch.equal(x, healthy[k]), k


def test_train_dumps_are_trainer_records(root: pathlib.Path) -> None:
    rec = torch.load(root / "train" / "healthy" / "rows_0-2000" / "data_0.ckpt", weights_only=True)
    t = rec["input_ids"].shape[0]
    assert rec["loss_mask"].shape == (t,) and 0 < int(rec["loss_mask"].sum()) < t
    assert rec["hidden_state"].shape == (1, t, 128) and rec["aux_hidden_state"].shape == (1, t, 384)
    assert int(rec["input_ids"][0]) == demo.BOS_ID and int(rec["input_ids"][1]) == 3  # <s><|user|>
    short = torch.load(root / "train" / "short_trained" / "rows_0-2000" / "data_0.ckpt", weights_only=True)
    assert short["input_ids"].shape[0] < t
    no_think = torch.load(root / "train" / "no_thinking" / "rows_0-2000" / "data_0.ckpt", weights_only=True)
    ids = no_think["input_ids"].tolist()
    starts = [i for i in range(len(ids) - 1) if ids[i] == 6]
    assert starts and all(ids[i + 1] == demo.THINK_END_ID for i in starts)  # empty think blocks only
    vm = torch.load(
        root / "train" / "vocab_no_think_end" / "vocab_mapping" / "vocab_mapping.pt", weights_only=True
    )
    assert torch.equal(vm["t2d"], _tensors(root, "vocab_no_think_end")["t2d"])


# -- the committed data --------------------------------------------------------------------------


def test_committed_data_is_small() -> None:
    total = sum(p.stat().st_size for p in COMMITTED.rglob("*") if p.is_file())
    drafters = sum(p.stat().st_size for p in (COMMITTED / "drafters").rglob("*") if p.is_file())
    assert drafters < 12_000_000
    assert total < 20_000_000


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
