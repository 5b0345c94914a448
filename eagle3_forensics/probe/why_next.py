"""Notebook 06's Next section as data: per cause, what to do, the command, and how to confirm it.

Why here: the commands carry this run's paths and the figure that should move (the trained view's
acceptance length, a share of positions), which the probes measured; :mod:`eagle3_forensics.views.causes`
only lays the steps out. Every command runs in ``notebooks/`` (a ``make lab`` terminal starts there)
and writes only into ignored places: ``build/notebooks/`` or a ``*-repaired-*`` copy beside the drafter.
A step whose action is the user's own pipeline (regenerating data, retraining) gives it as a shell
comment, so pasting the block still runs.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from eagle3_forensics.checks.causes import (
    CHECKPOINT,
    DATA,
    LENGTH,
    SERVER,
    TEMPLATE,
    VOCABULARY,
    Cause,
    Ranking,
)
from eagle3_forensics.repair.next_steps import repair_command, repair_out

WHY_NOTEBOOK = "06_why_low_acceptance"
OUT_DIR = "../build/notebooks"  # as views.next_steps: ignored by git


@dataclass(frozen=True)
class WhyStep:
    """One cause's next step: what to do, the commands (shell, in ``notebooks/``), how to confirm."""

    category: str
    codes: tuple[str, ...]
    action: str
    commands: tuple[str, ...]
    confirm: str  # the confirming command
    expect: str  # which number should move, and where to


def estimated_drop(share: float, trained: float | None) -> float | None:
    """A share of positions as acceptance length: ``share × (trained − 1)``, the accepted drafts per
    cycle lost if every such position were rejected (first order: each cycle's accepted run is cut
    in proportion). ``None`` without the trained view's acceptance length to scale."""
    if trained is None:
        return None
    return max(0.0, float(share)) * max(0.0, float(trained) - 1.0)


def _q(x: Any) -> str:
    return shlex.quote(str(x))


def rerun_06(parameters: dict[str, Any]) -> str:
    """The papermill line that reruns notebook 06 with ``parameters`` into ``build/notebooks/``."""
    words = ["papermill", f"{WHY_NOTEBOOK}.ipynb", f"{OUT_DIR}/why.ipynb", "-k", "eagle3-forensics"]
    for k, v in parameters.items():
        if v is not None:
            words += ["-p", k, str(v)]
    return f"mkdir -p {OUT_DIR} && {shlex.join(words)}"


def _audit(data: Any, target: Any, checkpoint: str, launch: Any = None) -> str:
    words = f"eagle3-forensics audit-data {_q(data)} --target {_q(target)} --drafter {_q(checkpoint)}"
    return words + (f" --launch {_q(launch)}" if launch else "")


def _step(c: Cause, run: dict[str, Any], served: float | None, trained: float | None) -> WhyStep:
    ckpt, target, engine = str(run["checkpoint"]), run.get("target"), str(run.get("engine") or "vllm")
    data, launch = run.get("data"), run.get("launch")
    codes = tuple(c.codes)
    share = None if c.cost is None else c.cost.share_of_positions
    moved = (
        f"the acceptance length under {engine}'s view ({served:.3f})" if served is not None else "acceptance"
    )
    towards = f" toward the trained view's {trained:.3f}" if trained is not None else ""
    if (
        c.category == CHECKPOINT
        and c.severity.value == "error"
        and engine.split("==")[0] in ("sglang", "vllm")
    ):
        out = repair_out(ckpt, engine)
        return WhyStep(
            c.category, codes, "Repair: an engine-ready copy beside the drafter (the original is only read).",
            (repair_command(ckpt, engine, target=None if target is None else str(target)),),
            rerun_06({**run, "checkpoint": out}),
            f"06 on the copy: {moved} rises{towards}; the cause is gone from the ranking.",
        )  # fmt: skip
    if c.category in (DATA, TEMPLATE) and data:
        what = (
            "Re-render the training data with the serving template and mode (the chat_template_kwargs the "
            "server passes), dump the hidden states again and retrain."
            if c.category == TEMPLATE
            else "Regenerate the responses with the target itself (serving template and mode), dump again, retrain."
        )
        share_txt = f" (now {share:.1%} of positions)" if share is not None else ""
        return WhyStep(
            c.category, codes, what,
            ("# your data pipeline: regenerate/re-render with the target's chat template, then dump and retrain",),
            _audit(data, target, ckpt),
            f"audit-data on the new data: {', '.join(codes)} gone{share_txt}; then 06 on the retrained "
            f"drafter: {moved} rises{towards}.",
        )  # fmt: skip
    if c.category == LENGTH:
        return WhyStep(
            c.category, codes,
            "Re-launch with a context near the trained length (--max-model-len / --context-length), or retrain "
            "with longer sequences.",
            ("# serve: vllm serve ... --max-model-len N (N near the trained length), or retrain on longer samples",),
            _audit(data, target, ckpt, launch) if data else rerun_06(run),
            f"{', '.join(codes)} gone (the share of positions beyond the trained length"
            f"{f', now {share:.1%},' if share is not None else ''} falls to 0).",
        )  # fmt: skip
    if c.category == SERVER:
        return WhyStep(
            c.category, codes, f"Re-launch with the flag the finding names: {c.fix or ''}".strip(),
            ("# edit the serving command as the fix says, then check it:",),
            f"eagle3-forensics diagnose {_q(ckpt)} --launch {_q(launch or 'NEW LAUNCH COMMAND')}",
            f"{', '.join(codes)} gone from diagnose --launch; 06 with launch=the new command ranks no server cause.",
        )  # fmt: skip
    action = c.fix or "See the cause's fix."
    if c.category == VOCABULARY:
        action = f"Rebuild the draft vocabulary and retrain the head: {c.fix or ''}".strip()
    return WhyStep(
        c.category, codes, action, (), rerun_06(run),
        f"06 after the fix: {moved} rises{towards}; {', '.join(codes)} gone from the ranking.",
    )  # fmt: skip


def why_next_steps(
    ranking: Ranking, parameters: dict[str, Any], served: float | None = None, trained: float | None = None
) -> list[WhyStep]:
    """One step per ranked cause, in rank order, for the run with ``parameters`` (06's: checkpoint,
    target, engine, data, launch, prompts ...); ``served``/``trained``: the acceptance lengths measured
    under the engine's view and the trained view (the figure that should move, and where to)."""
    return [_step(c, dict(parameters), served, trained) for c in ranking.causes]


__all__ = ["OUT_DIR", "WhyStep", "estimated_drop", "rerun_06", "why_next_steps"]
