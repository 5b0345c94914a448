"""Planning the vocabulary map (:class:`_VocabPlanner`): ``d2t``/``t2d`` re-encoded for the engine,
reconstructed from the trusted half, or rebuilt from training data.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from eagle3_forensics.errors import ForensicsError, UnusableInputError
from eagle3_forensics.io.config import DrafterConfig
from eagle3_forensics.repair.plan.base import _PlannerBase
from eagle3_forensics.repair.policy import POLICY, StepKind
from eagle3_forensics.vocab.inputs.tokens import load_token_ids
from eagle3_forensics.vocab.mapping.build import build_vocab_mapping
from eagle3_forensics.vocab.mapping.classify import check_t2d, classify_mapping
from eagle3_forensics.vocab.mapping.convert import (
    absolute_to_offsets,
    d2t_from_t2d,
    t2d_from_d2t,
    undo_double_offset,
)


class _VocabPlanner(_PlannerBase):
    """The vocabulary map: ``d2t``/``t2d`` re-encoded, reconstructed from the trusted half, or rebuilt
    from training data."""

    def build_vocab(self, out_cfg: dict[str, Any]) -> None:
        ctx = self.ctx
        big_v = ctx.target_vocab_size
        view = DrafterConfig(out_cfg)
        v = view.draft_vocab_size or ctx.draft_vocab_size
        if big_v is None or v is None:
            return
        d2t_name, t2d_name = ctx.find("d2t"), ctx.find("t2d")
        d2t = ctx.tensor(d2t_name) if d2t_name else None
        t2d = ctx.tensor(t2d_name) if t2d_name else None
        cast = False
        if d2t is not None and d2t.is_floating_point() and d2t.numel() and bool((d2t == d2t.round()).all()):
            d2t, cast = d2t.to(torch.int64), True
        res = classify_mapping(d2t, t2d, big_v, v)
        reduced = v < big_v
        if res.kind == "missing" and not reduced:
            return
        t2d_problems = check_t2d(t2d, big_v, v) if t2d is not None else []
        t2d_ok = t2d is not None and all("expected bool" in p for p in t2d_problems)
        t2d_default = (
            t2d is not None and t2d.dim() == 1 and (bool(t2d.bool().all()) or not bool(t2d.bool().any()))
        )
        d2t_alone_ok = d2t is not None and classify_mapping(d2t, None, big_v, v).kind == "unverified_offsets"
        new_d2t: torch.Tensor | None = None
        new_t2d: torch.Tensor | None = None
        how = ""
        fixes: tuple[str, ...] = (
            "D2T_MISSING",
            "D2T_ABSOLUTE",
            "D2T_DOUBLE_OFFSET",
            "D2T_T2D_MISMATCH",
            "D2T_INVALID",
            "T2D_INVALID",
            "VOCAB_SIZE_INCONSISTENT",
        )
        code = {
            "missing": "D2T_MISSING",
            "identity_default": "D2T_MISSING",
            "absolute": "D2T_ABSOLUTE",
            "double_offset": "D2T_DOUBLE_OFFSET",
        }.get(res.kind, "D2T_T2D_MISMATCH" if t2d is not None else "D2T_INVALID")
        if res.consistent:
            if cast:
                new_d2t, how = d2t, "d2t cast to int64 (its values were already valid offsets)"
            if t2d is not None and not t2d_ok:
                if res.kind == "consistent_offsets" or t2d_default or self.trust == "d2t":
                    why = (
                        "t2d agrees with d2t but " + "; ".join(t2d_problems)
                        if res.kind == "consistent_offsets"
                        else "t2d was a default buffer"
                        if t2d_default
                        else "--trust-d2t"
                    )
                    new_t2d = t2d_from_d2t(d2t, big_v)
                    how = (how + "; " if how else "") + f"t2d rebuilt from d2t ({why})"
                elif self.data_path is not None:
                    new_d2t, new_t2d, how = self._from_data(v, big_v, t2d)
                else:
                    self.refuse(
                        "T2D_INVALID",
                        "t2d is not a valid mask (" + "; ".join(t2d_problems) + ") and "
                        "d2t cannot be checked against it",
                        POLICY["T2D_INVALID"].options,
                    )
                    return
        elif res.kind == "absolute":
            new_d2t, how = (
                absolute_to_offsets(d2t),
                "d2t converted from absolute ids to offsets (d2t - arange(v))",
            )
        elif res.kind == "double_offset":
            new_d2t, how = undo_double_offset(d2t), "second offset conversion undone (d2t + arange(v))"
        elif res.kind in ("missing", "identity_default"):
            what = "no d2t" if res.kind == "missing" else "d2t is an all-zero default buffer"
            if t2d_ok and not t2d_default:
                new_d2t, how = d2t_from_t2d(t2d), f"d2t rebuilt from t2d ({what}; t2d is a valid mask)"
                if self.data_path is not None:
                    how += "; --rebuild-vocab-from not needed (t2d can be trusted)"
            elif self.data_path is not None:
                new_d2t, new_t2d, how = self._from_data(v, big_v, t2d)
            else:
                self.refuse(
                    code,
                    f"{what} and t2d cannot be trusted to rebuild it"
                    + (f" ({'; '.join(t2d_problems)})" if t2d_problems else " (there is none)"),
                    POLICY["D2T_MISSING"].options,
                )
                return
        else:
            detail = f"d2t classified {res.kind}: {res.meaning}"
            if self.data_path is not None:
                new_d2t, new_t2d, how = self._from_data(v, big_v, t2d)
            elif self.trust == "t2d" and t2d_ok and not t2d_default:
                new_d2t, how = d2t_from_t2d(t2d), f"d2t rebuilt from t2d (--trust-t2d; {detail})"
            elif self.trust == "d2t" and d2t_alone_ok:
                new_t2d, how = t2d_from_d2t(d2t, big_v), f"t2d rebuilt from d2t (--trust-d2t; {detail})"
            else:
                reason = (
                    f"{detail}"
                    + (
                        f", first disagreement at draft id {res.first_bad_index}"
                        if res.first_bad_index is not None
                        else ""
                    )
                    + (
                        "; nothing says which one the weights were trained with, so repair will not guess"
                        if t2d is not None
                        else "; there is no t2d to rebuild it from"
                    )
                )
                options = list(POLICY[code].options)
                if self.trust == "t2d" and not t2d_ok:
                    reason += (
                        " (--trust-t2d given, but there is no t2d)"
                        if t2d is None
                        else " (--trust-t2d given, but t2d itself is not a valid mask)"
                    )
                if self.trust == "d2t" and not d2t_alone_ok:
                    reason += " (--trust-d2t given, but d2t by itself is not a valid offsets map)"
                self.refuse(code, reason, options)
                return
        if new_d2t is None and new_t2d is None:
            return
        final_d2t = new_d2t if new_d2t is not None else d2t
        final_t2d = new_t2d if new_t2d is not None else t2d
        check = classify_mapping(final_d2t, final_t2d, big_v, v)
        if not (
            check.kind == "consistent_offsets" or (final_t2d is None and check.kind == "unverified_offsets")
        ):
            self.refuse(
                code, f"the rewritten map is still not consistent ({check.meaning})", POLICY[code].options
            )
            return
        touched = []
        if new_d2t is not None:
            name = d2t_name or "d2t"
            self.new_tensors[name] = new_d2t.to(torch.int64).contiguous()
            touched.append(name)
        if new_t2d is not None:
            name = t2d_name or "t2d"
            self.new_tensors[name] = new_t2d.to(torch.bool).contiguous()
            touched.append(name)
        self.step(
            StepKind.VOCAB,
            how + f"; verified: nonzero(t2d) == d2t + arange({v})" if final_t2d is not None else how,
            tensors=touched,
            fixes=fixes,
            kind_before=res.kind,
            kind_after=check.kind,
        )

    def _from_data(
        self, v: int, big_v: int, t2d: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, str]:
        assert self.data_path is not None
        ids, mask = load_token_ids(self.data_path)
        # The writer's own tie-break: speculators (-count, id); SpecForge first row then id; EAGLE first seen.
        tie = {"speculators": "id", "eagle": "first_seen"}.get(self.ctx.fmt.family, "first_row")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # padding is reported in the step itself
                m = build_vocab_mapping(ids, v, big_v, loss_mask=mask, tie_break=tie)
        except (ValueError, ForensicsError) as exc:  # the sizes come from the config: input, not arguments
            raise UnusableInputError(f"cannot build a vocabulary map from {self.data_path}: {exc}") from None
        counted = int(mask.sum()) if mask is not None else int(ids.size)
        note = (
            f"d2t and t2d rebuilt from {Path(self.data_path).name} ({counted} counted tokens, "
            f"tie-break {tie!r} as {self.ctx.fmt.family} does"
        )
        if m.padded:
            note += f", {m.padded} unseen ids padded"
        if t2d is not None and t2d.dim() == 1 and t2d.shape[0] == big_v:
            old = set(np.flatnonzero(t2d.bool().numpy()).tolist())
            new = set(m.selected.tolist())
            note += f", {len(old & new)}/{v} ids shared with the old t2d"
        return m.d2t, m.t2d, note + ")"
