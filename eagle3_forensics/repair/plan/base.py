"""The planner's shared state (:class:`_PlannerBase`): the plan, the context, the engine's rules and the
tensors planned so far; each concern of the plan is a subclass in its own module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from eagle3_forensics.checks.context import Context
from eagle3_forensics.repair.plan.result import Refusal, RepairPlan, Step, _Planned, _PlannedCheckpoint


class _PlannerBase:
    """What every planning step shares: the plan, the diagnosis context, the engine's rules and the
    tensors planned so far. Every decision is recorded as a step or a refusal."""

    def __init__(
        self, plan: RepairPlan, ctx: Context, rebuild_vocab_from: str | Path | None, trust: str | None
    ) -> None:
        self.plan = plan
        self.ctx = ctx
        self.release = ctx.releases[0]
        self.rules = ctx.rules(plan.engine)
        self.display = f"{self.rules.display} ({self.rules.release})"
        self.data_path = rebuild_vocab_from
        self.trust = trust
        self.cfg = ctx.cfg
        self.new_tensors: dict[str, torch.Tensor] = {}  # output name -> new data (rewritten or added)
        self.planned: dict[str, _Planned] = {}

    # -- helpers -----------------------------------------------------------------------------------
    def step(
        self,
        kind: str,
        description: str,
        tensors: list[str] | None = None,
        fixes: tuple[str, ...] = (),
        **detail: Any,
    ) -> None:
        diagnosis = self.plan.diagnosis
        present = (
            {f.code for f in diagnosis.findings if f.engine in (None, self.plan.engine)}
            if diagnosis
            else set()
        )
        relevant = [c for c in fixes if c in present]
        self.plan.steps.append(Step(kind, description, list(tensors or []), relevant, detail))

    def refuse(
        self, code: str, reason: str, options: list[str] | tuple[str, ...] = (), finding: str | None = None
    ) -> None:
        self.plan.refusals.append(
            Refusal(code, reason, [o.format(engine=self.display) for o in options], finding)
        )

    def virtual(self, out_cfg: dict[str, Any]) -> _PlannedCheckpoint:
        return _PlannedCheckpoint(self.ctx.ckpt.path, out_cfg, self.planned, self.ctx.ckpt)
