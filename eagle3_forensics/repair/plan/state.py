"""The plan being built (:class:`PlanState`) and the three things every planning step does with it:
record a step, record a refusal, look at the planned drafter. The config, vocabulary and tensor
planners are plain functions over one ``PlanState``, called in order by :func:`repair_plan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from eagle3_forensics.checks.context import Context
from eagle3_forensics.engines.rules import EngineRules
from eagle3_forensics.io.config import DrafterConfig
from eagle3_forensics.repair.plan.result import PlannedCheckpoint, PlannedTensor, Refusal, RepairPlan, Step


@dataclass
class PlanState:
    """What the planning steps share: the plan, the diagnosis context, the engine's rules and the
    tensors planned so far. Every decision is recorded as a step or a refusal on :attr:`plan`."""

    plan: RepairPlan
    ctx: Context
    data_path: str | Path | None  # --rebuild-vocab-from
    trust: str | None  # --trust-t2d / --trust-d2t
    new_tensors: dict[str, torch.Tensor] = field(default_factory=dict)  # output name -> new data
    planned: dict[str, PlannedTensor] = field(default_factory=dict)

    @property
    def release(self) -> EngineRules:
        return self.ctx.releases[0]

    @property
    def rules(self) -> EngineRules:
        return self.ctx.rules(self.plan.engine)

    @property
    def display(self) -> str:
        """The engine as texts name it: ``SGLang (0.5.11)``."""
        return f"{self.rules.display} ({self.rules.release})"

    @property
    def cfg(self) -> DrafterConfig:
        return self.ctx.cfg


def add_step(
    state: PlanState,
    kind: str,
    description: str,
    tensors: list[str] | None = None,
    fixes: tuple[str, ...] = (),
    **detail: Any,
) -> None:
    """Record a step; it names only the finding codes (of ``fixes``) the source drafter has."""
    diagnosis = state.plan.diagnosis
    present = (
        {f.code for f in diagnosis.findings if f.engine in (None, state.plan.engine)} if diagnosis else set()
    )
    relevant = [c for c in fixes if c in present]
    state.plan.steps.append(Step(kind, description, list(tensors or []), relevant, detail))


def refuse(
    state: PlanState,
    code: str,
    reason: str,
    options: list[str] | tuple[str, ...] = (),
    finding: str | None = None,
) -> None:
    """Record a refusal; ``{engine}`` in the options becomes the engine's display name."""
    state.plan.refusals.append(
        Refusal(code, reason, [o.format(engine=state.display) for o in options], finding)
    )


def planned_checkpoint(state: PlanState, out_cfg: dict[str, Any]) -> PlannedCheckpoint:
    """The drafter as planned so far, in memory, for the load simulator and the checks."""
    return PlannedCheckpoint(state.ctx.ckpt.path, out_cfg, state.planned, state.ctx.ckpt)
