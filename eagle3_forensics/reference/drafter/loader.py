"""The loader for every drafter format ``diagnose`` reads: :func:`load_drafter`.

It builds the module either the way the checkpoint's writer meant it (``engine="reference"``:
the intrinsic drafter) or the way an engine would load it (``engine="sglang"``, ``"vllm"``,
``"eagle"``, ``"speculators"``), following the plan :mod:`.views` makes from the engine's rule
table: keys an engine drops stay at a fresh (seeded) initialisation, tensors it takes from the
target come from the target.
"""

from __future__ import annotations

from pathlib import Path

import torch

from eagle3_forensics.engines import ENGINE_NAMES, resolve_release, split_spec
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.io.checkpoint import open_checkpoint
from eagle3_forensics.io.config import DrafterConfig
from eagle3_forensics.reference.drafter.model import (
    FRESH_INIT_SEED,
    DrafterSpec,
    Eagle3Drafter,
    default_dtype,
    fill_unfilled,
    fresh_init,
    resolve_device,
)
from eagle3_forensics.reference.drafter.views import (
    REFERENCE,
    VIEW_NAMES,
    LoadPlan,
    TargetSide,
    canonical_name,
    engine_plan,
    reference_plan,
    rope_settings,
    target_files,
)

# ---------------------------------------------------------------------------------------------
# the loader
# ---------------------------------------------------------------------------------------------


def _spec(cfg: DrafterConfig, plan: LoadPlan, target: TargetSide | None) -> DrafterSpec:
    h = cfg.int_field("hidden_size")
    nh = cfg.int_field("num_attention_heads")
    inter = cfg.int_field("intermediate_size")
    if h is None or nh is None or inter is None:
        raise UnusableInputError("drafter config lacks hidden_size, num_attention_heads or intermediate_size")
    nkv = cfg.int_field("num_key_value_heads") or nh
    hd = cfg.int_field("head_dim") or h // nh
    if nh % nkv:
        raise UnusableInputError(f"num_attention_heads {nh} is not a multiple of num_key_value_heads {nkv}")
    for name in ("lm_head.weight", "embed_tokens.weight"):
        if name not in plan.tensors:  # neither the checkpoint nor the target supplies it to this view
            raise UnusableInputError(f"{plan.view.engine}: the drafter has no {name} and none is borrowed")
    head = plan.tensors["lm_head.weight"]
    emb = plan.tensors["embed_tokens.weight"]
    vocab = cfg.int_field("vocab_size") or int(emb.shape[0])
    rows = int(head.shape[0])
    if plan.draft_vocab_size is not None and plan.draft_vocab_size != rows:
        raise UnusableInputError(
            f"{plan.view.engine}: lm_head has {rows} rows but the config's draft vocabulary "
            f"is {plan.draft_vocab_size} (a loud shape error at load)"
        )
    ht = cfg.int_field("target_hidden_size")
    if target is not None:
        if (ht or h) != target.hidden_size:
            raise UnusableInputError(
                f"hidden sizes do not fit the target: the drafter takes {ht or h}-wide target "
                f"states, the target's hidden_size is {target.hidden_size}"
            )
        if vocab != target.vocab_size:
            raise UnusableInputError(
                f"vocabularies do not fit: the drafter's vocab_size is {vocab}, the "
                f"target's is {target.vocab_size}"
            )
        bad = [i for i in plan.view.aux_ids if not 0 <= i <= target.num_layers]
        if bad:
            raise UnusableInputError(
                f"aux layer ids {plan.view.aux_ids} (HF index) do not fit a target with "
                f"{target.num_layers} layers"
            )
    theta, rope = rope_settings(cfg)
    f = plan.spec_flags
    return DrafterSpec(
        hidden_size=h,
        intermediate_size=inter,
        num_heads=nh,
        num_kv_heads=nkv,
        head_dim=hd,
        vocab_size=vocab,
        draft_vocab_size=rows,
        target_hidden_size=ht,
        num_layers=plan.num_layers,
        num_aux=plan.num_aux,
        rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        rope_theta=theta,
        rope_parameters=rope,
        hidden_act=str(cfg.get("hidden_act", "silu")),
        attention_bias=cfg.get("attention_bias") is True,
        fc_bias=plan.fc_bias,
        qk_norm=plan.qk_norm,
        norm_before_residual=f["norm_before_residual"],
        norm_before_fc=f["norm_before_fc"],
        fc_norm=f["fc_norm"],
        post_norm_recurrence=f["norm_output"],
        final_norm=f["final_norm"],
    )


def load_drafter(
    path: str | Path,
    target: TargetSide | str | Path | None = None,
    engine: str = REFERENCE,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    seed: int = FRESH_INIT_SEED,
) -> Eagle3Drafter:
    """Build the drafter at ``path`` as ``engine`` would load it (``"reference"``: as its writer meant it).

    ``target`` supplies the layer count (default aux ids), the hidden size and vocabulary that
    must fit, and the embedding / lm_head an engine borrows; a directory path is read
    header-first. Loud engine failures (a config the engine cannot parse, a key it rejects, a
    shape that does not fit) and unusable input raise :class:`UnusableInputError`.
    """
    if engine != REFERENCE and split_spec(engine)[0] not in ENGINE_NAMES:
        raise UnusableInputError(f"unknown engine {engine!r}; choose from {', '.join(VIEW_NAMES)}")
    tside: TargetSide | None = target_files(target) if isinstance(target, (str, Path)) else target
    ckpt = open_checkpoint(path)
    cfg = DrafterConfig(ckpt.config)
    raw = {name: ckpt.read_tensor(name) for name in ckpt.names()}
    if engine == REFERENCE:
        plan = reference_plan(ckpt, cfg, raw, tside)
    else:
        plan = engine_plan(resolve_release(engine), ckpt, cfg, raw, tside)
    spec = _spec(cfg, plan, tside)
    model = Eagle3Drafter(spec, plan.view.aux_ids)
    fresh_init(model, seed)
    expected = dict(model.state_dict())
    filled: list[str] = []
    with torch.no_grad():
        for name, tensor in plan.tensors.items():
            if name not in expected:
                if plan.view.engine == REFERENCE:
                    plan.view.ignored_keys.append(name)
                continue
            dest = expected[name]
            if tuple(tensor.shape) != tuple(dest.shape):
                raise UnusableInputError(
                    f"{plan.view.engine}: {name} has shape {list(tensor.shape)}, the drafter "
                    f"built from its config needs {list(dest.shape)} (a loud shape error at load)"
                )
            dest.copy_(tensor.to(dest.dtype))
            filled.append(name)
        for name in plan.zeros:
            if name in expected:
                expected[name].zero_()
    never = sorted(set(expected) - set(filled) - plan.zeros - {"d2t"})
    plan.view.unfilled = sorted((set(plan.view.unfilled) | set(never)) - set(filled))
    fill_unfilled(model, plan.view.unfilled, seed)
    if plan.view.engine == REFERENCE:
        plan.view.from_checkpoint = sorted(
            k for k in raw if canonical_name(k) in filled and canonical_name(k) not in plan.view.from_target
        )
    plan.view.ignored_keys = sorted(set(plan.view.ignored_keys))
    model.view = plan.view
    dev = resolve_device(device)
    model = model.to(device=dev, dtype=dtype or default_dtype(dev))
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model
