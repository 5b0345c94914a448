"""The clean-room EAGLE-3 drafter: formats, views (writer vs engine rule tables), chain/TTT equivalence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
from builders import TARGET_LAYERS, build_drafter, build_target, speculators_spec, target_embedding
from paths import DEMO, demo_drafter_copy

from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.reference.drafter import (
    VIEW_NAMES,
    DrafterSpec,
    Eagle3Drafter,
    canonical_name,
    export_tensors,
    fresh_init,
    load_drafter,
    resolve_device,
)


@pytest.fixture(scope="module")
def tiny_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_target(tmp_path_factory.mktemp("target"), with_weights=True)


def _spec(**kw: object) -> DrafterSpec:
    base: dict[str, Any] = dict(
        hidden_size=32,
        intermediate_size=48,
        num_heads=4,
        num_kv_heads=2,
        head_dim=8,
        vocab_size=40,
        draft_vocab_size=24,
    )
    base.update(kw)
    return DrafterSpec(**base)


def _random_drafter(spec: DrafterSpec, seed: int = 0) -> Eagle3Drafter:
    d = Eagle3Drafter(spec, [2, 4, 5])
    fresh_init(d, seed)
    g = torch.Generator().manual_seed(seed + 7)
    with torch.no_grad():
        for name, p in d.named_parameters():
            p.add_(torch.randn(p.shape, generator=g) * (0.05 if name.endswith("norm.weight") else 0.2))
        d.d2t.copy_(torch.arange(spec.draft_vocab_size) % 3)
    return d.eval()


# -- names ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("midlayer.self_attn.q_proj.weight", "layers.0.self_attn.q_proj.weight"),
        ("model.midlayer.hidden_norm.weight", "layers.0.hidden_norm.weight"),
        ("midlayer.1.mlp.up_proj.weight", "layers.1.mlp.up_proj.weight"),
        ("additional_layers.0.mlp.up_proj.weight", "layers.1.mlp.up_proj.weight"),
        ("layers.0.input_layernorm.weight", "layers.0.input_layernorm.weight"),
        ("draft_id_to_target_id", "d2t"),
        ("model.fc.weight", "fc.weight"),
    ],
)
def test_canonical_names(name: str, canonical: str) -> None:
    assert canonical_name(name) == canonical


# -- the forward pass ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags",
    [
        {},
        {"norm_before_residual": True, "post_norm_recurrence": True},
        {"fc_norm": True, "qk_norm": True, "num_layers": 2},
        {"norm_before_fc": True, "final_norm": False, "target_hidden_size": 16},
    ],
    ids=["plain", "nbr+post-norm", "fc_norm+qk_norm+2layers", "input_norm+no-final-norm+Ht"],
)
def test_chain_drafting_equals_training_time_test(flags: dict[str, object]) -> None:
    """Chain drafting with the KV cache computes exactly what the TTT forward computes at a slot."""
    spec = _spec(**flags)
    d = _random_drafter(spec)
    t_len, k, slot = 12, 3, 6
    g = torch.Generator().manual_seed(3)
    seq = torch.randint(0, spec.vocab_size, (t_len,), generator=g)
    aux = torch.randn(t_len, spec.num_aux * spec.ht, generator=g)
    with torch.no_grad():
        steps = []
        for j in range(k):
            toks = torch.zeros(t_len - 1, dtype=torch.long)
            toks[: t_len - 1 - j] = seq[1 + j :]
            steps.append(toks[None])
        ttt = d.ttt_forward(aux[None, : t_len - 1], steps)

        cache = d.new_cache()
        out = d.extend(seq[1 : slot + 2], d.fuse(aux[: slot + 1]), torch.arange(slot + 1), cache)
        chain = [out[-1]]
        h = out[-1:]
        for j in range(1, k):
            h = d.extend(seq[slot + 1 + j : slot + 2 + j], d.feedback(h), torch.tensor([slot + j]), cache)
            chain.append(h[-1])
    for j in range(k):
        torch.testing.assert_close(chain[j], ttt[j][0, slot], rtol=1e-4, atol=1e-5)


def test_d2t_maps_draft_ids_to_target_ids() -> None:
    d = _random_drafter(_spec())
    ids = torch.arange(d.spec.draft_vocab_size)
    assert torch.equal(d.to_target(ids), ids + ids % 3)
    assert torch.equal(d.target_ids(), ids + ids % 3)


def test_export_round_trip(tmp_path: Path, tiny_target: Path) -> None:
    """Weights exported in either trainer layout load back (reference view) to the same function."""
    spec = DrafterSpec(
        hidden_size=32,
        intermediate_size=64,
        num_heads=2,
        num_kv_heads=2,
        head_dim=16,
        vocab_size=64,
        draft_vocab_size=32,
    )
    d = _random_drafter(spec)
    with torch.no_grad():
        d.embed_tokens.weight.copy_(target_embedding())
    src = build_drafter(tmp_path / "ref")  # a config of the same shape
    cfg = json.loads((src / "config.json").read_text())
    from builders import write_checkpoint

    for layout in ("midlayer", "layers"):
        out = write_checkpoint(tmp_path / layout, cfg, export_tensors(d, layout=layout, include_embed=True))
        back = load_drafter(out, tiny_target)
        for name, t in d.state_dict().items():
            assert torch.equal(back.state_dict()[name], t), (layout, name)


# -- formats and views ---------------------------------------------------------------------------


def test_every_demo_variant_loads_under_the_reference_view() -> None:
    for variant in (
        "healthy",
        "speculators_layout",
        "d2t_absolute",
        "d2t_double_offset",
        "d2t_missing",
        "aux_shifted",
    ):
        d = load_drafter(DEMO / "drafters" / variant, DEMO / "target")
        assert d.view is not None and d.view.engine == "reference"
        assert not d.view.unfilled, variant
    shifted = load_drafter(DEMO / "drafters" / "aux_shifted", DEMO / "target")
    assert shifted.aux_ids == [1, 3, 4]  # speculators ids are HF indices, as written
    healthy = load_drafter(DEMO / "drafters" / "healthy", DEMO / "target")
    assert healthy.aux_ids == [2, 4, 5]  # the trainer default for an 8-layer target
    assert healthy.view is not None and healthy.view.from_target == ["embed_tokens.weight"]


def test_sglang_view_follows_the_release(tmp_path: Path, tiny_target: Path) -> None:
    """layers.0.* keys: SGLang <= 0.5.11 drops them (the layer stays uninitialised), 0.5.12+ loads them."""
    path = build_drafter(tmp_path / "d", layout="layers")
    ref = load_drafter(path, tiny_target)
    old = load_drafter(path, tiny_target, "sglang==0.5.11")
    new = load_drafter(path, tiny_target, "sglang")
    vll = load_drafter(path, tiny_target, "vllm")
    assert old.view is not None and new.view is not None and vll.view is not None
    assert old.view.release == "sglang 0.5.10.post1–0.5.11" and new.view.release == "sglang 0.5.18–0.5.23"
    assert "layers.0.self_attn.q_proj.weight" in old.view.unfilled
    assert any(k.startswith("layers.0.") for k in old.view.ignored_keys)
    q_old, q_ref = old.layers[0].self_attn.q_proj.weight, ref.layers[0].self_attn.q_proj.weight
    assert isinstance(q_old, torch.Tensor) and isinstance(q_ref, torch.Tensor)
    assert not torch.equal(q_old, q_ref)
    assert torch.equal(old.fc.weight, ref.fc.weight)  # fc.weight resolves on every release
    for view in (new, vll):
        for name, t in ref.state_dict().items():
            assert torch.equal(view.state_dict()[name], t), name
        assert view.view is not None and view.view.unfilled == []


def test_d2t_missing_is_identity_under_every_view() -> None:
    for engine in ("reference", "sglang", "vllm", "eagle"):
        d = load_drafter(DEMO / "drafters" / "d2t_missing", DEMO / "target", engine)
        assert int(d.d2t.abs().sum()) == 0, engine
        assert d.view is not None and "d2t" in d.view.d2t_source


def test_engines_refuse_configs_they_cannot_read() -> None:
    with pytest.raises(UnusableInputError, match="speculators"):
        load_drafter(DEMO / "drafters" / "healthy", DEMO / "target", "speculators")
    with pytest.raises(UnusableInputError, match="EAGLE"):
        load_drafter(DEMO / "drafters" / "speculators_layout", DEMO / "target", "eagle")
    with pytest.raises(UnusableInputError, match="unknown engine"):
        load_drafter(DEMO / "drafters" / "healthy", DEMO / "target", "tensorrt")


def test_vllm_refuses_an_unknown_key(tmp_path: Path, tiny_target: Path) -> None:
    path = build_drafter(tmp_path / "d", extra_keys={"bogus.weight": ((4,), torch.float32)})
    load_drafter(path, tiny_target)  # the reference view ignores it
    load_drafter(path, tiny_target, "sglang")  # dropped silently
    with pytest.raises(UnusableInputError, match="refuse"):
        load_drafter(path, tiny_target, "vllm")


def test_aux_id_conventions(tmp_path: Path, tiny_target: Path) -> None:
    # nested eagle_config ids are output-of-layer (+1) for SpecForge and SGLang; vLLM ignores them here
    nested = build_drafter(tmp_path / "nested", aux_nested=[2, 4, 5])
    assert load_drafter(nested, tiny_target).aux_ids == [3, 5, 6]
    assert load_drafter(nested, tiny_target, "sglang").aux_ids == [3, 5, 6]
    assert load_drafter(nested, tiny_target, "vllm").aux_ids == [2, TARGET_LAYERS // 2, TARGET_LAYERS - 3]
    # top-level ids are HF indices (vLLM/speculators); SGLang ignores them
    top = build_drafter(tmp_path / "top", aux_top=[1, 3, 6])
    assert load_drafter(top, tiny_target, "vllm").aux_ids == [1, 3, 6]
    assert load_drafter(top, tiny_target, "sglang").aux_ids == [2, 4, 5]
    eagle_fmt = build_drafter(tmp_path / "eagle", architectures=["LlamaForCausalLM"])
    assert load_drafter(eagle_fmt, tiny_target).view.family == "eagle"


def test_norm_flags_follow_each_format_family(tmp_path: Path, tiny_target: Path) -> None:
    nbr = build_drafter(tmp_path / "nbr", spec=speculators_spec(norm_before_residual=True))
    assert load_drafter(nbr, tiny_target).spec.norm_before_residual
    assert load_drafter(nbr, tiny_target, "vllm").spec.norm_before_residual
    # speculators config without the key: vLLM's reader assumes true; speculators trains with false
    unset = build_drafter(tmp_path / "unset", spec=speculators_spec(norm_before_residual=None))
    assert load_drafter(unset, tiny_target, "vllm").spec.norm_before_residual
    ref = load_drafter(unset, tiny_target)
    assert not ref.spec.norm_before_residual and ref.view is not None and ref.view.notes

    nbfc = build_drafter(tmp_path / "nbfc", spec=speculators_spec(norm_before_fc=True))
    assert load_drafter(nbfc, tiny_target).input_norm is not None
    assert load_drafter(nbfc, tiny_target, "vllm").input_norm is not None
    fcn = build_drafter(tmp_path / "fcn", spec=speculators_spec(fc_norm=True))
    assert load_drafter(fcn, tiny_target).fc_norm is not None

    # norm_output: speculators meaning = post-norm recurrence; SpecForge meaning = final norm before lm_head
    spec_no = build_drafter(tmp_path / "spec_no", spec=speculators_spec(norm_output=True))
    assert load_drafter(spec_no, tiny_target).spec.post_norm_recurrence
    flat_true = build_drafter(tmp_path / "flat_true", norm_output=True)
    ref_flat = load_drafter(flat_true, tiny_target)
    assert not ref_flat.spec.post_norm_recurrence and ref_flat.spec.final_norm
    assert load_drafter(flat_true, tiny_target, "vllm").spec.post_norm_recurrence  # the meaning clash
    assert load_drafter(flat_true, tiny_target, "sglang").spec.post_norm_recurrence  # 0.5.12+ reads it
    assert not load_drafter(flat_true, tiny_target, "sglang==0.5.11").spec.post_norm_recurrence
    flat_false = build_drafter(tmp_path / "flat_false", norm_output=False)
    assert not load_drafter(flat_false, tiny_target).spec.final_norm


def test_sglang_builds_norm_before_fc_from_0_5_17(tmp_path: Path, tiny_target: Path) -> None:
    path = build_drafter(tmp_path / "d", norm_before_fc=True)
    ref = load_drafter(path, tiny_target)
    old = load_drafter(path, tiny_target, "sglang==0.5.16")
    assert ref.input_norm is not None and old.input_norm is None
    assert old.view is not None and "input_norm.weight" in old.view.ignored_keys
    new = load_drafter(path, tiny_target, "sglang==0.5.17")
    assert new.input_norm is not None and torch.equal(new.input_norm.weight, ref.input_norm.weight)


def test_multi_layer_drafters(tmp_path: Path, tiny_target: Path) -> None:
    from builders import DrafterSpec as DrafterSpec_flat
    from builders import drafter_config, write_checkpoint

    spec = DrafterSpec(
        hidden_size=32,
        intermediate_size=64,
        num_heads=2,
        num_kv_heads=2,
        head_dim=16,
        vocab_size=64,
        draft_vocab_size=32,
        num_layers=2,
    )
    d = _random_drafter(spec)
    cfg = drafter_config(speculators_spec(num_hidden_layers=2))
    path = write_checkpoint(tmp_path / "d", cfg, export_tensors(d, layout="layers", include_embed=True))
    back = load_drafter(path, tiny_target)
    assert len(back.layers) == 2 and back.layers[1].hidden_norm is None
    assert back.layers[1].self_attn.q_proj.in_features == 32  # later layers take H, not 2H
    torch.testing.assert_close(
        back.state_dict()["layers.1.mlp.up_proj.weight"], d.state_dict()["layers.1.mlp.up_proj.weight"]
    )
    assert len(load_drafter(path, tiny_target, "vllm").layers) == 2
    with pytest.raises(UnusableInputError, match=r"layers\.1"):  # vLLM 0.10.2 built one layer: a KeyError
        load_drafter(path, tiny_target, "vllm==0.10.2")
    # A flat two-layer drafter on SGLang 0.5.12+: layer 1's input norm is its hidden_norm, which the
    # checkpoint (like every speculators-trained one) lacks; its input_layernorm loads but is unused.
    flat_cfg = drafter_config(DrafterSpec_flat(num_hidden_layers=2))
    flat = write_checkpoint(tmp_path / "flat", flat_cfg, export_tensors(d, layout="layers"))
    sgl = load_drafter(flat, tiny_target, "sglang")
    assert len(sgl.layers) == 2 and sgl.view is not None
    assert "layers.1.input_layernorm.weight" in sgl.view.unfilled
    assert "layers.1.input_layernorm.weight" in sgl.view.ignored_keys
    assert not torch.equal(sgl.layers[1].input_layernorm.weight, d.layers[1].input_layernorm.weight)
    with pytest.raises(UnusableInputError, match=r"only supports 1 layer|constructor raises"):
        load_drafter(flat, tiny_target, "sglang==0.5.11")


def test_embedding_from_checkpoint_or_target(tmp_path: Path, tiny_target: Path) -> None:
    own = build_drafter(tmp_path / "own", embed="random")
    d = load_drafter(own, tiny_target)
    assert not torch.equal(d.embed_tokens.weight, target_embedding())
    assert d.view is not None and "embed_tokens.weight" not in d.view.from_target
    sgl = load_drafter(own, tiny_target, "sglang")  # SGLang overwrites it with the target's
    assert torch.equal(sgl.embed_tokens.weight, target_embedding())
    borrowed = load_drafter(build_drafter(tmp_path / "none"), tiny_target)
    assert torch.equal(borrowed.embed_tokens.weight, target_embedding())


def test_hidden_sizes_must_fit_the_target(tmp_path: Path, tiny_target: Path) -> None:
    path = build_drafter(tmp_path / "d", target_hidden_size=48)
    with pytest.raises(UnusableInputError, match="hidden sizes do not fit"):
        load_drafter(path, tiny_target)


def test_shape_mismatch_is_a_loud_error(tmp_path: Path, tiny_target: Path) -> None:
    path = build_drafter(tmp_path / "d", fc_in=64)
    with pytest.raises(UnusableInputError, match="shape"):
        load_drafter(path, tiny_target)


def test_bf16_and_device_resolution(tmp_path: Path) -> None:
    d = load_drafter(DEMO / "drafters" / "healthy", DEMO / "target", dtype=torch.bfloat16)
    assert d.fc.weight.dtype == torch.bfloat16 and d.d2t.dtype == torch.int64
    assert resolve_device("cpu").type == "cpu"
    if not torch.cuda.is_available():
        assert resolve_device("auto").type == "cpu"
        with pytest.raises(UnusableInputError, match="CUDA"):
            resolve_device("cuda")


def test_demo_copy_with_nested_ids_is_read_shifted(tmp_path: Path) -> None:
    """SGLang adds 1 to nested ids: HF ids written into eagle_config land one layer late."""
    dst = demo_drafter_copy(
        tmp_path / "healthy_nested", eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 4, 5]}
    )
    assert load_drafter(dst, DEMO / "target", "sglang").aux_ids == [3, 5, 6]


def test_view_names() -> None:
    assert VIEW_NAMES == ("reference", "sglang", "vllm", "eagle", "speculators", "tensorrt_llm")
