"""``lm_head`` rows pin a map down: :func:`check_lm_head_rows` compares ``lm_head[i]`` with
``target_lm_head[target(i)]`` for a drafter trained with a frozen head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    pass
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.vocab.mapping.classify import as_numpy, import_torch, usable_t2d

# -- lm_head rows: a frozen head pins the map down -------------------------------------------------


@dataclass
class LmHeadRowCheck:
    """Draft ``lm_head[i]`` against target ``lm_head[target(i)]`` under each candidate map.

    ``method == "exact"``: some candidate matches every row exactly (speculators >= 0.5 freezes
    the draft head as a copy of the target rows), which proves that candidate is the map the
    head was built with. Otherwise ``"cosine (heuristic)"``: mean row cosine per candidate
    against a baseline of mismatched rows; a clear winner is evidence, not proof.
    """

    method: str
    hypotheses: dict[str, dict[str, Any]]
    baseline_cosine: float | None
    best: str | None
    d2t_confirmed: (
        bool | None
    )  # what engines use (d2t as offsets; identity without d2t) is the best candidate

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "best": self.best,
            "d2t_confirmed": self.d2t_confirmed,
            "baseline_cosine": None if self.baseline_cosine is None else round(self.baseline_cosine, 6),
            "hypotheses": self.hypotheses,
        }


def check_lm_head_rows(
    draft_lm_head: Any,
    target_lm_head: Any,
    d2t: Any | None,
    t2d: Any | None = None,
) -> LmHeadRowCheck:
    """Compare draft head rows with the target head rows each candidate map points at."""
    torch = import_torch()
    dh = (
        draft_lm_head
        if isinstance(draft_lm_head, torch.Tensor)
        else torch.as_tensor(np.asarray(draft_lm_head))
    )
    th = (
        target_lm_head
        if isinstance(target_lm_head, torch.Tensor)
        else torch.as_tensor(np.asarray(target_lm_head))
    )
    if dh.ndim != 2 or th.ndim != 2 or dh.shape[1] != th.shape[1]:
        raise UnusableInputError(
            f"lm_head shapes {list(dh.shape)} and {list(th.shape)} do not share a hidden size"
        )
    v, big_v = int(dh.shape[0]), int(th.shape[0])
    ar = np.arange(v, dtype=np.int64)
    cands: dict[str, np.ndarray] = {}
    if d2t is not None and as_numpy(d2t).size == v:
        d = as_numpy(d2t).astype(np.int64).reshape(-1)
        cands.update({"offsets": d + ar, "absolute": d, "double_offset": d + 2 * ar})
    if t2d is not None and usable_t2d(t2d, v) and int(as_numpy(t2d).astype(bool).sum()) == v:
        cands["t2d"] = np.flatnonzero(as_numpy(t2d).astype(bool))
    cands["identity"] = ar.copy()
    dn = torch.nn.functional.normalize(dh.float(), dim=1)
    hyps: dict[str, dict[str, Any]] = {}
    for name, idx in cands.items():
        if idx.min() < 0 or idx.max() >= big_v:
            hyps[name] = {"in_range": False}
            continue
        rows = th[torch.from_numpy(idx)]
        same = (rows.to(dh.dtype) == dh).all(dim=1).numpy()
        cos = (dn * torch.nn.functional.normalize(rows.float(), dim=1)).sum(dim=1).numpy()
        bad = np.flatnonzero(~same)
        hyps[name] = {
            "in_range": True,
            "exact_fraction": round(float(same.mean()), 6),
            "first_mismatch": int(bad[0]) if bad.size else None,
            "mean_cosine": round(float(cos.mean()), 6),
        }
    base_idx = np.roll(next((c for c in cands.values() if c.min() >= 0 and c.max() < big_v), ar), 1)
    base_rows = th[torch.from_numpy(base_idx)]
    baseline = float((dn * torch.nn.functional.normalize(base_rows.float(), dim=1)).sum(dim=1).mean())
    valid = {k: h for k, h in hyps.items() if h.get("in_range")}
    exact = [k for k, h in valid.items() if h["exact_fraction"] == 1.0]
    if exact:
        best: str | None = "offsets" if "offsets" in exact else exact[0]
        method = "exact"
    else:
        best = max(valid, key=lambda k: valid[k]["mean_cosine"]) if valid else None
        method = "cosine (heuristic)"
        if best is not None and valid[best]["mean_cosine"] <= baseline + 0.1:
            best = None  # no candidate stands out from mismatched rows
    confirmed = None
    engine = (
        "offsets" if "offsets" in hyps else "identity"
    )  # without d2t, engines propose target id = draft id
    if best is not None:
        if engine not in valid:
            confirmed = False  # the engines' reading points outside the target vocabulary
        else:
            confirmed = (
                valid[engine].get("exact_fraction") == 1.0
                if method == "exact"
                else valid[engine]["mean_cosine"] >= valid[best]["mean_cosine"] - 1e-6
            )
    return LmHeadRowCheck(method, hyps, baseline, best, confirmed)
