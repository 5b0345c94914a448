"""Planning the vocabulary map (:func:`build_vocab`): ``d2t``/``t2d`` re-encoded for the engine,
reconstructed from the trusted half, or rebuilt from training data.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from eagle3_forensics.errors import ForensicsError, UnusableInputError
from eagle3_forensics.io.config import DrafterConfig
from eagle3_forensics.repair.plan.state import PlanState, add_step, refuse
from eagle3_forensics.repair.policy import POLICY, StepKind
from eagle3_forensics.vocab.inputs.tokens import load_token_ids
from eagle3_forensics.vocab.mapping.build import build_vocab_mapping
from eagle3_forensics.vocab.mapping.classify import VocabClassification, check_t2d, classify_mapping
from eagle3_forensics.vocab.mapping.convert import (
    absolute_to_offsets,
    d2t_from_t2d,
    t2d_from_d2t,
    undo_double_offset,
)

_FIXES: tuple[str, ...] = (
    "D2T_MISSING",
    "D2T_ABSOLUTE",
    "D2T_DOUBLE_OFFSET",
    "D2T_T2D_MISMATCH",
    "D2T_INVALID",
    "T2D_INVALID",
    "VOCAB_SIZE_INCONSISTENT",
)
_CODES = {
    "missing": "D2T_MISSING",
    "identity_default": "D2T_MISSING",
    "absolute": "D2T_ABSOLUTE",
    "double_offset": "D2T_DOUBLE_OFFSET",
}

# (new d2t, new t2d, how), or None when the map was refused
Rewrite = tuple[torch.Tensor | None, torch.Tensor | None, str] | None


@dataclass
class _Map:
    """The source's vocabulary map as read and classified, and what each half can be trusted for."""

    v: int
    big_v: int
    d2t: torch.Tensor | None
    t2d: torch.Tensor | None
    d2t_name: str | None
    t2d_name: str | None
    cast: bool  # a float d2t of whole numbers, cast to int64
    res: VocabClassification
    t2d_problems: list[str]
    t2d_ok: bool  # a valid mask but for its dtype
    t2d_default: bool  # all-true or all-false: a default buffer
    d2t_alone_ok: bool  # valid offsets by itself

    @property
    def code(self) -> str:
        """The finding code a refusal of this map names."""
        return _CODES.get(self.res.kind, "D2T_T2D_MISMATCH" if self.t2d is not None else "D2T_INVALID")


def build_vocab(state: PlanState, out_cfg: dict[str, Any]) -> None:
    """Re-encode, reconstruct or rebuild ``d2t``/``t2d`` so the engine reads the map the head was trained
    with; refuse when nothing says which half is right."""
    m = _read_map(state, out_cfg)
    if m is None:
        return
    if m.res.consistent:
        rewrite = _rewrite_consistent(state, m)
    elif m.res.kind == "absolute":
        rewrite = (
            absolute_to_offsets(m.d2t),
            None,
            "d2t converted from absolute ids to offsets (d2t - arange(v))",
        )
    elif m.res.kind == "double_offset":
        rewrite = undo_double_offset(m.d2t), None, "second offset conversion undone (d2t + arange(v))"
    elif m.res.kind in ("missing", "identity_default"):
        rewrite = _rewrite_missing(state, m)
    else:
        rewrite = _rewrite_disagreeing(state, m)
    if rewrite is not None:
        _verify_and_record(state, m, *rewrite)


def _read_map(state: PlanState, out_cfg: dict[str, Any]) -> _Map | None:
    """The map to plan for, or None when there is nothing to do (sizes unknown, or no map needed)."""
    ctx = state.ctx
    big_v = ctx.target_vocab_size
    v = DrafterConfig(out_cfg).draft_vocab_size or ctx.draft_vocab_size
    if big_v is None or v is None:
        return None
    d2t_name, t2d_name = ctx.find("d2t"), ctx.find("t2d")
    d2t = ctx.tensor(d2t_name) if d2t_name else None
    t2d = ctx.tensor(t2d_name) if t2d_name else None
    cast = False
    if d2t is not None and d2t.is_floating_point() and d2t.numel() and bool((d2t == d2t.round()).all()):
        d2t, cast = d2t.to(torch.int64), True
    res = classify_mapping(d2t, t2d, big_v, v)
    if res.kind == "missing" and not v < big_v:
        return None
    t2d_problems = check_t2d(t2d, big_v, v) if t2d is not None else []
    return _Map(
        v,
        big_v,
        d2t,
        t2d,
        d2t_name,
        t2d_name,
        cast,
        res,
        t2d_problems,
        t2d_ok=t2d is not None and all("expected bool" in p for p in t2d_problems),
        t2d_default=(
            t2d is not None and t2d.dim() == 1 and (bool(t2d.bool().all()) or not bool(t2d.bool().any()))
        ),
        d2t_alone_ok=d2t is not None and classify_mapping(d2t, None, big_v, v).kind == "unverified_offsets",
    )


def _rewrite_consistent(state: PlanState, m: _Map) -> Rewrite:
    """d2t is right: cast it if it was a float, and rebuild a t2d that is not a valid mask."""
    new_d2t, new_t2d, how = None, None, ""
    if m.cast:
        new_d2t, how = m.d2t, "d2t cast to int64 (its values were already valid offsets)"
    if m.t2d is None or m.t2d_ok:
        return new_d2t, new_t2d, how
    if m.res.kind == "consistent_offsets" or m.t2d_default or state.trust == "d2t":
        why = (
            "t2d agrees with d2t but " + "; ".join(m.t2d_problems)
            if m.res.kind == "consistent_offsets"
            else "t2d was a default buffer"
            if m.t2d_default
            else "--trust-d2t"
        )
        return (
            new_d2t,
            t2d_from_d2t(m.d2t, m.big_v),
            (how + "; " if how else "") + f"t2d rebuilt from d2t ({why})",
        )
    if state.data_path is not None:
        return _from_data(state, m.v, m.big_v, m.t2d)
    refuse(
        state,
        "T2D_INVALID",
        "t2d is not a valid mask (" + "; ".join(m.t2d_problems) + ") and d2t cannot be checked against it",
        POLICY["T2D_INVALID"].options,
    )
    return None


def _rewrite_missing(state: PlanState, m: _Map) -> Rewrite:
    """No d2t (or a default buffer): rebuild it from a trustworthy t2d, else from the training data."""
    what = "no d2t" if m.res.kind == "missing" else "d2t is an all-zero default buffer"
    if m.t2d_ok and not m.t2d_default:
        how = f"d2t rebuilt from t2d ({what}; t2d is a valid mask)"
        if state.data_path is not None:
            how += "; --rebuild-vocab-from not needed (t2d can be trusted)"
        return d2t_from_t2d(m.t2d), None, how
    if state.data_path is not None:
        return _from_data(state, m.v, m.big_v, m.t2d)
    refuse(
        state,
        m.code,
        f"{what} and t2d cannot be trusted to rebuild it"
        + (f" ({'; '.join(m.t2d_problems)})" if m.t2d_problems else " (there is none)"),
        POLICY["D2T_MISSING"].options,
    )
    return None


def _rewrite_disagreeing(state: PlanState, m: _Map) -> Rewrite:
    """d2t and t2d disagree (or d2t is invalid): only the data or a --trust flag decides."""
    res, detail = m.res, f"d2t classified {m.res.kind}: {m.res.meaning}"
    if state.data_path is not None:
        return _from_data(state, m.v, m.big_v, m.t2d)
    if state.trust == "t2d" and m.t2d_ok and not m.t2d_default:
        return d2t_from_t2d(m.t2d), None, f"d2t rebuilt from t2d (--trust-t2d; {detail})"
    if state.trust == "d2t" and m.d2t_alone_ok:
        return None, t2d_from_d2t(m.d2t, m.big_v), f"t2d rebuilt from d2t (--trust-d2t; {detail})"
    reason = (
        detail
        + (
            f", first disagreement at draft id {res.first_bad_index}"
            if res.first_bad_index is not None
            else ""
        )
        + (
            "; nothing says which one the weights were trained with, so repair will not guess"
            if m.t2d is not None
            else "; there is no t2d to rebuild it from"
        )
    )
    if state.trust == "t2d" and not m.t2d_ok:
        reason += (
            " (--trust-t2d given, but there is no t2d)"
            if m.t2d is None
            else " (--trust-t2d given, but t2d itself is not a valid mask)"
        )
    if state.trust == "d2t" and not m.d2t_alone_ok:
        reason += " (--trust-d2t given, but d2t by itself is not a valid offsets map)"
    refuse(state, m.code, reason, list(POLICY[m.code].options))
    return None


def _verify_and_record(
    state: PlanState, m: _Map, new_d2t: torch.Tensor | None, new_t2d: torch.Tensor | None, how: str
) -> None:
    """Classify the rewritten map again; record the step when it is consistent, else refuse."""
    if new_d2t is None and new_t2d is None:
        return
    final_d2t = new_d2t if new_d2t is not None else m.d2t
    final_t2d = new_t2d if new_t2d is not None else m.t2d
    check = classify_mapping(final_d2t, final_t2d, m.big_v, m.v)
    if not (check.kind == "consistent_offsets" or (final_t2d is None and check.kind == "unverified_offsets")):
        refuse(
            state,
            m.code,
            f"the rewritten map is still not consistent ({check.meaning})",
            POLICY[m.code].options,
        )
        return
    touched = []
    if new_d2t is not None:
        name = m.d2t_name or "d2t"
        state.new_tensors[name] = new_d2t.to(torch.int64).contiguous()
        touched.append(name)
    if new_t2d is not None:
        name = m.t2d_name or "t2d"
        state.new_tensors[name] = new_t2d.to(torch.bool).contiguous()
        touched.append(name)
    add_step(
        state,
        StepKind.VOCAB,
        how + f"; verified: nonzero(t2d) == d2t + arange({m.v})" if final_t2d is not None else how,
        tensors=touched,
        fixes=_FIXES,
        kind_before=m.res.kind,
        kind_after=check.kind,
    )


def _from_data(
    state: PlanState, v: int, big_v: int, t2d: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, str]:
    assert state.data_path is not None
    ids, mask = load_token_ids(state.data_path)
    # The writer's own tie-break: speculators (-count, id); SpecForge first row then id; EAGLE first seen.
    tie = {"speculators": "id", "eagle": "first_seen"}.get(state.ctx.fmt.family, "first_row")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # padding is reported in the step itself
            m = build_vocab_mapping(ids, v, big_v, loss_mask=mask, tie_break=tie)
    except (ValueError, ForensicsError) as exc:  # the sizes come from the config: input, not arguments
        raise UnusableInputError(f"cannot build a vocabulary map from {state.data_path}: {exc}") from None
    counted = int(mask.sum()) if mask is not None else int(ids.size)
    note = (
        f"d2t and t2d rebuilt from {Path(state.data_path).name} ({counted} counted tokens, "
        f"tie-break {tie!r} as {state.ctx.fmt.family} does"
    )
    if m.padded:
        note += f", {m.padded} unseen ids padded"
    if t2d is not None and t2d.dim() == 1 and t2d.shape[0] == big_v:
        old = set(np.flatnonzero(t2d.bool().numpy()).tolist())
        new = set(m.selected.tolist())
        note += f", {len(old & new)}/{v} ids shared with the old t2d"
    return m.d2t, m.t2d, note + ")"
