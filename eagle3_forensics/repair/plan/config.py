"""Planning the repaired config (:func:`build_config`): flattened for a release that reads no
speculators config, sizes, tying, aux-layer ids and norm flags where and as the engine reads them.
"""

from __future__ import annotations

import copy
from typing import Any

from eagle3_forensics.checks.aux_layers import MEASURED, trained_ids
from eagle3_forensics.checks.norms import trained_flags
from eagle3_forensics.engines.rules import ConfigStyle
from eagle3_forensics.engines.simulate import engine_flag
from eagle3_forensics.engines.view import rules_for
from eagle3_forensics.io.config import AUX_FIELD, EAGLE, LAYER, NORM_FLAGS, TOP, DrafterConfig
from eagle3_forensics.repair.plan.state import PlanState, add_step, refuse
from eagle3_forensics.repair.policy import POLICY, PRECONDITION, SERVE_VLLM, StepKind


def _rope_both(d: dict[str, Any]) -> tuple[list[str], str | None]:
    """Write RoPE in both forms (legacy ``rope_theta``/``rope_scaling`` and ``rope_parameters``)."""
    changes: list[str] = []
    theta, scaling, params = d.get("rope_theta"), d.get("rope_scaling"), d.get("rope_parameters")
    for value in (theta, params.get("rope_theta") if isinstance(params, dict) else None):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return (
                changes,
                f"rope_theta {value!r} is not a number; which value the drafter was trained with is unknown",
            )
    if isinstance(params, dict):
        p_theta = params.get("rope_theta")
        if p_theta is None:
            return changes, None  # per-layer-type parameters: leave them alone
        if theta is None:
            d["rope_theta"] = p_theta
            changes.append(
                f"rope_theta = {p_theta} (mirrors rope_parameters for revisions that read only the "
                "legacy field)"
            )
        elif float(theta) != float(p_theta):
            return changes, (
                f"rope_theta ({theta}) and rope_parameters.rope_theta ({p_theta}) disagree; "
                "which one the drafter was trained with is unknown"
            )
        rtype = params.get("rope_type", params.get("type", "default"))
        if rtype != "default" and scaling is None:
            d["rope_scaling"] = {k: v for k, v in params.items() if k != "rope_theta"}
            changes.append(f"rope_scaling = {d['rope_scaling']} (mirrors rope_parameters)")
    elif theta is not None:
        new: dict[str, Any] = {"rope_type": "default", "rope_theta": theta}
        if isinstance(scaling, dict):
            new["rope_type"] = scaling.get("rope_type", scaling.get("type", "default"))
            new.update({k: v for k, v in scaling.items() if k not in ("type", "rope_type")})
        d["rope_parameters"] = new
        changes.append(f"rope_parameters = {new} (current form of rope_theta/rope_scaling)")
    return changes, None


def build_config(state: PlanState) -> dict[str, Any]:
    """The repaired config: flattened for releases that read no speculators config, sizes, tying,
    aux-layer ids and norm flags as the engine reads them."""
    raw = copy.deepcopy(state.ctx.ckpt.config)
    # a release that reads no speculators config gets the flat config of its model class
    flatten = state.cfg.style == "speculators" and ConfigStyle.SPECULATORS not in state.release.config_styles
    if flatten:
        out = _flatten(state, raw)
    else:
        out = raw
        allowed = state.rules.flat_architectures
        if state.cfg.style == "flat" and allowed and not any(a in allowed for a in state.cfg.architectures):
            out["architectures"] = [allowed[0]]
            add_step(
                state,
                StepKind.CONFIG,
                f"architectures = {[allowed[0]]} (the model class {state.display} builds; "
                f"was {state.cfg.architectures or 'absent'})",
                fixes=("CONFIG_UNREADABLE_BY_ENGINE",),
                keys=["architectures"],
            )
    llama = (
        out[LAYER]
        if (not flatten and state.cfg.style == "speculators" and isinstance(out.get(LAYER), dict))
        else out
    )
    _sizes(state, out)
    _tie(state, out, llama)
    changes, problem = _rope_both(llama)
    if problem:
        refuse(
            state,
            PRECONDITION,
            problem,
            [
                "write the RoPE settings the drafter was trained with into a copy "
                "of config.json and repair that copy"
            ],
        )
    for text in changes:
        add_step(state, StepKind.CONFIG, text, fixes=("ROPE_MISMATCH",), keys=["rope"])
    _aux_enabled(state, out)
    _aux(state, out)
    _norms(state, out)
    return out


def _aux_enabled(state: PlanState, out: dict[str, Any]) -> None:
    """fc trained over k aux states needs them captured: drop use_aux_hidden_state: false."""
    fc = state.ctx.shape("fc.weight")
    ht = state.cfg.target_hidden_size or state.cfg.hidden_size
    if fc is None or len(fc) != 2 or not ht or fc[1] < 2 * ht:
        return
    for holder_name, holder in (
        (EAGLE, out.get(EAGLE)),
        (f"{LAYER}.{EAGLE}", (out.get(LAYER) or {}).get(EAGLE)),
    ):
        if isinstance(holder, dict) and holder.get("use_aux_hidden_state") is False:
            del holder["use_aux_hidden_state"]
            add_step(
                state,
                StepKind.CONFIG,
                f"removed {holder_name}.use_aux_hidden_state = false: fc.weight {list(fc)} was trained over "
                f"{fc[1] // ht} aux states, which {state.display} captures only when it is true (the default)",
                fixes=("AUX_HIDDEN_STATE_DISABLED", "FC_WIDTH_MISMATCH"),
                keys=[f"{holder_name}.use_aux_hidden_state"],
            )
    if isinstance(out.get(EAGLE), dict) and not out[EAGLE]:
        del out[EAGLE]


def _flatten(state: PlanState, raw: dict[str, Any]) -> dict[str, Any]:
    """speculators config -> the flat LlamaForCausalLMEagle3 config SGLang's model class reads."""
    layer = raw.get(LAYER) if isinstance(raw.get(LAYER), dict) else {}
    assert isinstance(layer, dict)
    arch = (state.rules.flat_architectures or ("LlamaForCausalLMEagle3",))[0]
    out: dict[str, Any] = {"architectures": [arch]}
    out.update({k: v for k, v in layer.items() if k not in ("architectures", EAGLE)})
    if "model_type" not in out:
        out["model_type"] = "llama"  # speculators' default draft architecture
    carried = []
    skip = {
        "architectures",
        "speculators_model_type",
        "speculators_version",
        "speculators_config",
        LAYER,
        "embed_requires_grad",
        AUX_FIELD,
        EAGLE,
        *NORM_FLAGS,
    }
    for key, value in raw.items():
        if key in skip or value is None:
            continue
        if key in ("draft_vocab_size", "target_hidden_size") or key not in out:
            out[key] = value
            carried.append(key)
    nested = (
        {k: v for k, v in (layer.get(EAGLE) or {}).items() if k != AUX_FIELD}
        if isinstance(layer.get(EAGLE), dict)
        else {}
    )
    nested.update(
        {k: v for k, v in (raw.get(EAGLE) or {}).items() if k != AUX_FIELD}
        if isinstance(raw.get(EAGLE), dict)
        else {}
    )
    if nested:
        out[EAGLE] = nested
    flags = {f: raw.get(f) for f in NORM_FLAGS if f in raw}
    rules = rules_for(state.release, DrafterConfig(out))
    enabled = [f for f, value in flags.items() if value is True]
    unsupported = [f for f in enabled if f not in rules.implemented_flags]
    if unsupported:
        refuse(
            state,
            "NORM_FLAGS_UNSUPPORTED",
            f"the drafter was trained with {', '.join(unsupported)} = true, which "
            f"{state.display} does not implement",
            POLICY["NORM_FLAGS_UNSUPPORTED"].options,
        )
    carried_flags = [f for f in enabled if f in rules.implemented_flags]
    for flag in carried_flags:
        out[flag] = True  # every SGLang release that implements a flag reads it at the top level
    # A speculators config without norm_before_residual was trained with speculators' default, false
    # (config.py in every release): the residual before hidden_norm, which is what a flat config means.
    dropped_flags = [f"{k}={str(v).lower()}" for k, v in flags.items() if v is False]
    add_step(
        state,
        StepKind.CONFIG,
        f"speculators config → flat {arch} config: transformer_layer_config fields moved to "
        f"the top level, kept {', '.join(carried) or 'no other fields'}; speculators_* fields and "
        f"embed_requires_grad dropped"
        + (f"; {', '.join(f'{f} = true' for f in carried_flags)} kept" if carried_flags else "")
        + (
            f"; norm flags {', '.join(dropped_flags)} dropped ({state.display}'s own behaviour)"
            if dropped_flags
            else ""
        ),
        fixes=("CONFIG_UNREADABLE_BY_ENGINE",),
        keys=sorted(out),
    )
    return out


def _sizes(state: PlanState, out: dict[str, Any]) -> None:
    lm = state.ctx.shape("lm_head.weight")
    current = out.get("draft_vocab_size")
    want, source = (lm[0], "lm_head rows") if lm else (current, "")
    if want is None:
        d2t = state.ctx.shape("d2t")
        want, source = (d2t[0], "d2t length") if d2t else (None, "")
    if want is not None and current != want:
        out["draft_vocab_size"] = want
        add_step(
            state,
            StepKind.CONFIG,
            f"draft_vocab_size = {want} ({source}; was {current})",
            fixes=("DRAFT_VOCAB_SIZE_MISSING", "VOCAB_SIZE_INCONSISTENT"),
            keys=["draft_vocab_size"],
        )


def _tie(state: PlanState, out: dict[str, Any], llama: dict[str, Any]) -> None:
    if state.ctx.find("lm_head.weight") is None:
        return  # the head is the embedding: tying is what the drafter means
    holders = [d for d in (out, llama, out.get(EAGLE)) if isinstance(d, dict) and "tie_word_embeddings" in d]
    changed = False
    for d in holders:
        if d["tie_word_embeddings"] is not False:
            d["tie_word_embeddings"] = False
            changed = True
    if not holders:
        llama["tie_word_embeddings"] = False
        changed = True
    if changed:
        add_step(
            state,
            StepKind.CONFIG,
            "tie_word_embeddings = false (the drafter has its own lm_head)",
            fixes=("TIED_EMBEDDINGS_ON_REDUCED_VOCAB",),
            keys=["tie_word_embeddings"],
        )


def _aux(state: PlanState, out: dict[str, Any]) -> None:
    hf, level = trained_ids(state.ctx)
    if hf is None:
        # no ids recorded: pin what AUX_LAYER_IDS_NOT_RECORDED decided (measured, or the trainer's
        # default where it differs from the engine's fallback); else nothing to pin
        pins = [
            f.evidence.get("pin_hf_ids")
            for f in state.plan.source_errors()
            if f.code == "AUX_LAYER_IDS_NOT_RECORDED"
        ]
        hf = next((list(p) for p in pins if p), None)
        level = MEASURED if state.ctx.measured_aux is not None else "the trainer's default"
        if hf is None:
            return
    fixes = (
        "AUX_LAYER_IDS_IGNORED_BY_ENGINE",
        "AUX_LAYER_IDS_CONVENTION_SHIFT",
        "AUX_LAYER_IDS_INVALID",
        "AUX_LAYER_IDS_NOT_TRAINED",
        "AUX_LAYER_IDS_NOT_RECORDED",
    )
    src_field = (
        f"{'eagle_config.' if level == EAGLE else ''}{AUX_FIELD}"
        if level in (TOP, EAGLE)
        else f"the {level} ids"
        if level == MEASURED
        else str(level)
    )
    rules = rules_for(state.release, DrafterConfig(out))
    reading = state.ctx.aux(state.plan.engine)
    rule, n = reading.rule, state.ctx.target_layers
    # write where every runner of the release reads (a runner-only level is not relied on)
    write_levels = [s.level for s in rules.aux_sources if not s.runners]
    if not write_levels or not rule.reads_drafter:
        return
    stored = rule.stored_for(hf, n)
    if stored is None:
        refuse(
            state,
            PRECONDITION,
            f"the trained aux layers (HF {hf}) cannot be written so that {state.display} captures them "
            f"on this target ({rule.describe()})",
            [SERVE_VLLM],
        )
        return
    assumed = " (no --target: the target class's rule assumed)" if reading.rule_assumed else ""
    for lvl in write_levels:
        holder = out if lvl == TOP else out.setdefault(EAGLE, {})
        if holder.get(AUX_FIELD) != stored:
            holder[AUX_FIELD] = stored
            where = AUX_FIELD if lvl == TOP else f"eagle_config.{AUX_FIELD}"
            add_step(
                state,
                StepKind.CONFIG,
                f"{where} = {stored} ({state.display}: {rule.describe()}{assumed}: HF layers {hf}, as "
                f"trained; from {src_field})",
                fixes=fixes,
                keys=[where],
            )
    # The ids live in one place, in this engine's convention: a field it does not read (or reads only
    # under one runner) is removed, so no other revision or runner can read it in the wrong convention.
    removed = []
    if TOP not in write_levels and AUX_FIELD in out:
        del out[AUX_FIELD]
        removed.append(AUX_FIELD)
    for holder_name, holder in (
        (EAGLE, out.get(EAGLE)),
        (
            f"{LAYER}.{EAGLE}",
            (out.get(LAYER) or {}).get(EAGLE) if isinstance(out.get(LAYER), dict) else None,
        ),
    ):
        if EAGLE in write_levels and holder_name == EAGLE:
            continue
        if isinstance(holder, dict) and AUX_FIELD in holder:
            del holder[AUX_FIELD]
            removed.append(f"{holder_name}.{AUX_FIELD}")
    if isinstance(out.get(EAGLE), dict) and not out[EAGLE]:
        del out[EAGLE]
    if removed:
        add_step(
            state,
            StepKind.CONFIG,
            f"removed {', '.join(removed)}: {state.display} does not read it everywhere; the ids now live "
            f"only where it reads them, in its convention (another reader would shift them)",
            fixes=fixes,
            keys=removed,
        )


def _norms(state: PlanState, out: dict[str, Any]) -> None:
    trained = trained_flags(state.ctx)
    view = DrafterConfig(out)
    rules = rules_for(state.release, view)
    if not rules.norm_flags:
        return
    for flag, value in trained.items():
        spec = rules.norm_flag(flag)
        if not isinstance(value, bool) or spec is None:
            continue
        if engine_flag(rules, view, flag) == value:
            continue
        fixes = ("NORM_FLAGS_UNSUPPORTED", "NORM_OUTPUT_MEANING_CLASH")
        if view.style == "flat" and flag == "norm_output" and value is False:
            for holder in (out, out.get(EAGLE)):
                if isinstance(holder, dict):
                    holder.pop("norm_output", None)
            add_step(
                state,
                StepKind.CONFIG,
                "removed norm_output: in a flat (SpecForge) config it means 'norm before "
                f"lm_head', which {state.display} would read as post-norm recurrence",
                fixes=fixes,
                keys=["norm_output"],
            )
        else:
            # write it at the first level the class reads it from (that one wins)
            nested = out.get(EAGLE)
            if spec.levels[0] == EAGLE:
                holder = out.setdefault(EAGLE, {}) if not isinstance(nested, dict) else nested
            else:
                holder = out
            holder[flag] = value
            where = flag if holder is out else f"eagle_config.{flag}"
            add_step(
                state,
                StepKind.CONFIG,
                f"{where} = {str(value).lower()} (the trained value, where {state.display} reads it)",
                fixes=fixes,
                keys=[flag],
            )
        view = DrafterConfig(out)
        rules = rules_for(state.release, view)
