"""Planning the tensors (:func:`build_tensors`, :func:`ship_missing`): renamed to the names the engine's table expects
(its renames and their inverses), stripped where the engine takes the target's, and added from the
target where the engine must find them in the checkpoint.
"""

from __future__ import annotations

import re
from typing import Any

from eagle3_forensics.engines import ENGINES
from eagle3_forensics.engines.rules import EngineRules, Fill
from eagle3_forensics.engines.simulate import conditions, expected_params, resolve_key, simulate_load
from eagle3_forensics.engines.view import rules_for
from eagle3_forensics.io.checkpoint import SAFETENSORS_FILE, TensorInfo, torch_dtype_of
from eagle3_forensics.io.config import DrafterConfig
from eagle3_forensics.io.layout import is_drafter_weight
from eagle3_forensics.repair.plan.result import PlannedTensor, tensor_info
from eagle3_forensics.repair.plan.state import PlanState, add_step, planned_checkpoint, refuse
from eagle3_forensics.repair.policy import POLICY, PRECONDITION, StepKind

# -- tensor names ----------------------------------------------------------------------------------

_USED = ("loaded", "renamed", "fused", "consumed", "skipped", "overwritten")


def _literal(pattern: str) -> str | None:
    """The literal prefix a ``^literal`` regex matches, or ``None`` for anything fancier."""
    if not pattern.startswith("^"):
        return None
    body = pattern[1:]
    lit = re.sub(r"\\(.)", r"\1", body)
    return lit if re.escape(lit) == body else None


def _layout_renames() -> list[tuple[str, str]]:
    """Every engine's layer renames and their inverses: the spellings a tensor name can take."""
    out: list[tuple[str, str]] = [
        (r"^midlayer\.", "layers.0."),
        (r"^layers\.0\.", "midlayer."),
        (r"^midlayer\.(\d+)\.", r"layers.\1."),
        (r"^layers\.(\d+)\.", r"midlayer.\1."),
    ]
    for rules in ENGINES.values():
        for rule in rules.renames:
            src = _literal(rule.pattern)
            if src is None or "layer" not in src:
                continue  # only anchored layer-prefix renames are spellings of the same tensor
            out.append((rule.pattern, rule.target))
            out.append(("^" + re.escape(rule.target), src))
    return out


def _spellings(key: str) -> list[str]:
    """``key`` first, then the same tensor under every other layout's spelling."""
    base = key.removeprefix("model.")
    variants = [base]
    for pattern, repl in _layout_renames():
        new = re.sub(pattern, repl, base, count=1)
        if new != base and new not in variants:
            variants.append(new)
    out = [key]
    for v in variants:
        for cand in (v, "model." + v):
            if cand not in out:
                out.append(cand)
    return out


def _canonical(rules: EngineRules, name: str) -> str:
    name = name.removeprefix("model.")
    for rule in rules.renames:
        name = rule.regex.sub(rule.target, name, count=rule.count)
    return name.removeprefix("model.")


def build_tensors(state: PlanState, out_cfg: dict[str, Any]) -> None:
    """Each tensor renamed to the engine's name, stripped where the engine takes the target's, or refused."""
    ctx = state.ctx
    view = DrafterConfig(out_cfg)
    rules = rules_for(state.release, view)
    names = set(ctx.ckpt.tensors) | set(state.new_tensors)
    cond = conditions(rules, view, names)
    params = expected_params(rules, view, cond)
    present = frozenset(names)
    hidden = view.hidden_size
    renames: dict[str, str] = {}
    canon: dict[str, str] = {}
    for key in sorted(names):
        fate, out_name = None, key
        for cand in _spellings(key):
            f = resolve_key(rules, cand, cond, params, present)
            if f.action in _USED:
                fate, out_name = f, cand
                break
        info = ctx.ckpt.tensors.get(key)
        if fate is None:
            f = resolve_key(rules, key, cond, params, present)
            harmless = not is_drafter_weight(key) or (
                key.removeprefix("model.") in ("d2t", "t2d") and not ctx.reduced_vocab
            )
            verb = {"rejected": "would reject it (load fails)", "warned": "would warn and ignore it"}.get(
                f.action, "would drop it silently"
            )
            if harmless:
                add_step(
                    state,
                    StepKind.DROP,
                    f"{key} removed: not a drafter weight; {state.display} {verb}",
                    [key],
                    fixes=("KEYS_DROPPED_BY_ENGINE", "KEYS_REJECTED_BY_ENGINE"),
                )
            else:
                code = "KEYS_REJECTED_BY_ENGINE" if f.action == "rejected" else "KEYS_DROPPED_BY_ENGINE"
                refuse(
                    state,
                    code,
                    f"{key} is a trained drafter weight that {state.display} has no parameter for "
                    "under any spelling",
                    POLICY[code].options,
                )
            continue
        if (fate.action == "overwritten" or _bad_embed(state, key, hidden, params, fate.param)) and _strip(
            state, key, fate.param
        ):
            continue
        c = _canonical(rules, out_name)
        if c in canon:
            refuse(
                state,
                PRECONDITION,
                f"{canon[c]} and {key} are the same tensor under two spellings; which one "
                "was trained is unknown",
                ["remove the stale copy from a copy of the checkpoint"],
            )
            continue
        canon[c] = key
        if out_name != key:
            renames[key] = out_name
        data = state.new_tensors.get(key)
        if data is not None:
            state.planned[out_name] = PlannedTensor(out_name, tensor_info(out_name, data), None, data)
        else:
            assert info is not None
            state.planned[out_name] = PlannedTensor(
                out_name, TensorInfo(out_name, info.shape, info.dtype, SAFETENSORS_FILE, info.nbytes), key
            )
    if renames:
        add_step(
            state,
            StepKind.RENAME,
            _rename_summary(renames) + f": the names {state.display} looks up; bytes unchanged",
            sorted(renames),
            fixes=("KEYS_DROPPED_BY_ENGINE", "KEYS_REJECTED_BY_ENGINE", "PARAMS_UNFILLED"),
            renames=renames,
        )


def _bad_embed(
    state: PlanState, key: str, hidden: int | None, params: dict[str, str], param: str | None
) -> bool:
    """A stored embedding that cannot be the drafter's (wrong width) where the engine can use the target's."""
    info = state.ctx.ckpt.tensors.get(key)
    if info is None or not key.endswith("embed_tokens.weight") or hidden is None or len(info.shape) != 2:
        return False
    return (
        info.shape[1] != hidden
        and param is not None
        and params.get(param) in (Fill.TARGET, Fill.TARGET_IF_ABSENT)
    )


def _strip(state: PlanState, key: str, param: str | None) -> bool:
    if state.cfg.get("embed_requires_grad") is True and key.endswith("embed_tokens.weight"):
        refuse(
            state,
            "EMBED_TOKENS_PROBLEM",
            f"the drafter trained its own embedding (embed_requires_grad: true) "
            f"and {state.display} replaces it with the target's",
            ["serve it on vLLM, which keeps a draft embedding that differs from the target's"],
        )
        return True
    info = state.ctx.ckpt.tensors[key]
    why = (
        "its width differs from hidden_size, so it cannot be the drafter's"
        if state.ctx.cfg.hidden_size is not None and info.shape[-1] != state.ctx.cfg.hidden_size
        else "target_hidden_size is absent or equals hidden_size"
        if key.endswith("embed_tokens.weight")
        else ""
    )
    add_step(
        state,
        StepKind.STRIP,
        f"{key} removed: {state.display} overwrites {param} with the target's, so the stored copy "
        "is never used" + (f" ({why})" if why else ""),
        [key],
        fixes=("EMBED_TOKENS_PROBLEM",),
    )
    return True


def ship_missing(state: PlanState, out_cfg: dict[str, Any]) -> None:
    """Add tensors the engine must find in the checkpoint and the target can supply (the embedding)."""
    vck = planned_checkpoint(state, out_cfg)
    view = DrafterConfig(out_cfg)
    rules = rules_for(state.release, view)
    load = simulate_load(rules, vck, view)
    for param in load.unfilled:
        if not param.endswith("embed_tokens.weight"):
            continue
        tinfo = state.plan._target_info
        tname = tinfo.tensor_name("embed_tokens.weight") if tinfo is not None else None
        want = (view.vocab_size, view.hidden_size)
        if tinfo is None or tinfo.weights is None or tname is None:
            refuse(
                state,
                "EMBED_TOKENS_PROBLEM",
                f"{state.display} keeps the checkpoint's embedding "
                "(target_hidden_size differs from hidden_size) and the checkpoint has none; no --target "
                "weights were given to ship one from",
                POLICY["EMBED_TOKENS_PROBLEM"].options,
            )
            continue
        tshape = tinfo.weights.tensors[tname].shape
        if tuple(tshape) != want:
            refuse(
                state,
                "EMBED_TOKENS_PROBLEM",
                f"{state.display} needs an embedding of shape {list(want)} in the "
                f"checkpoint; the target's {tname} is {list(tshape)}, so it cannot be the one trained "
                "with",
                POLICY["EMBED_TOKENS_PROBLEM"].options,
            )
            continue
        name = next(
            (
                c
                for c in _spellings("embed_tokens.weight")
                if resolve_key(rules, c, load.conditions, expected_params(rules, view, load.conditions)).param
                == param
            ),
            "embed_tokens.weight",
        )
        emb = tinfo.weights.read_tensor(tname)
        float_dtypes = [p.info.dtype for p in state.planned.values() if p.info.is_float]
        dtype = max(set(float_dtypes), key=float_dtypes.count) if float_dtypes else None
        torch_dtype = (torch_dtype_of(dtype) if dtype else None) or emb.dtype
        emb = emb.to(torch_dtype).contiguous()
        state.planned[name] = PlannedTensor(name, tensor_info(name, emb), None, emb)
        add_step(
            state,
            StepKind.SHIP,
            f"{name} added from the target's {tname} ({state.display} keeps the checkpoint's "
            "embedding because target_hidden_size differs from hidden_size)",
            [name],
            fixes=("EMBED_TOKENS_PROBLEM", "PARAMS_UNFILLED"),
            target_tensor=tname,
        )


def _rename_summary(renames: dict[str, str]) -> str:
    """``layers.0.* → midlayer.* for 10 tensors`` when every rename swaps one prefix, else a count."""
    pairs = set()
    for old, new in renames.items():
        i = 0  # length of the common suffix
        while i < min(len(old), len(new)) and old[-1 - i] == new[-1 - i]:
            i += 1
        q = len(old) - i  # prefixes end at q (old) / q + delta (new); move q to just after a "."
        while q < len(old) and not (q > 0 and old[q - 1] == "."):
            q += 1
        delta = len(new) - len(old)
        pairs.add((old[:q], new[: q + delta]))
    if len(pairs) == 1:
        a, b = next(iter(pairs))
        return f"{a}* → {b}* for {len(renames)} tensors"
    return f"{len(renames)} tensors renamed"
