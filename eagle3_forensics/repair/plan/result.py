"""What a repair plan is made of: :class:`RepairPlan`, its :class:`Step` s and :class:`Refusal` s, and the
planned drafter, a checkpoint that exists only in memory (checked with every diagnose check before
anything is written).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from eagle3_forensics.checks.diagnose import Diagnosis
from eagle3_forensics.errors import BadArgumentsError
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.checkpoint import SAFETENSORS_FILE, Checkpoint, TensorInfo, st_dtype
from eagle3_forensics.io.target import TargetInfo
from eagle3_forensics.repair.policy import StepKind

RECORD_FILE = "repair.json"


class RepairArgumentError(BadArgumentsError, ValueError):
    """Bad arguments (unknown engine, existing DST without force, DST inside SRC, ...): exit 2."""


# -- result types -----------------------------------------------------------------------------------


@dataclass
class Step:
    """One explicit change. ``tensors`` are the source names affected (or the names added)."""

    kind: str
    description: str
    tensors: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)  # finding codes this step addresses
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "description": self.description,
            "tensors": self.tensors,
            "fixes": self.fixes,
            "detail": self.detail,
        }


@dataclass
class Refusal:
    """Why the repair will not be done, and what the user can do instead."""

    code: str  # a finding code, or PRECONDITION
    reason: str
    options: list[str] = field(default_factory=list)
    finding: str | None = None  # the finding's message, when one triggered it

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "reason": self.reason, "options": self.options, "finding": self.finding}

    def text(self) -> str:
        out = f"{self.code}: {self.reason}."
        if self.finding and self.finding not in self.reason:
            out += f" (Finding: {self.finding.rstrip('.')}.)"
        if self.options:
            out += " Options: " + "; ".join(self.options) + "."
        return out


@dataclass
class PlannedTensor:
    """One tensor of the planned output: copied from the source (bit-exact) or new data."""

    name: str
    info: TensorInfo
    source: str | None = None  # source tensor name (copied bytes)
    data: torch.Tensor | None = None  # new content (rewritten or added)


@dataclass
class RepairPlan:
    """What ``repair`` would do to ``source`` for ``engine``; display it, or pass it to :func:`execute`."""

    source: str
    engine: str
    target: str | None
    options: dict[str, Any]
    release: str = ""  # the release the copy is made ready for (its label)
    spec: str = ""  # the --engine spec naming that release again (verification, hints)
    steps: list[Step] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    coverage: dict[str, dict[str, Any]] = field(default_factory=dict)  # source error code -> how handled
    diagnosis: Diagnosis | None = None  # of the source, for this engine
    predicted: list[Finding] = field(default_factory=list)  # findings of the planned drafter (in memory)
    unusable: str | None = None
    config_before: dict[str, Any] = field(default_factory=dict)
    config_after: dict[str, Any] = field(default_factory=dict)
    files_copied: list[str] = field(default_factory=list)
    files_not_copied: list[str] = field(default_factory=list)
    _planned: dict[str, PlannedTensor] = field(default_factory=dict, repr=False)
    _ckpt: Checkpoint | None = field(default=None, repr=False)
    _target_info: TargetInfo | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.unusable is None and not self.refusals

    @property
    def status(self) -> str:
        if self.unusable is not None:
            return "unusable"
        if self.refusals:
            return "refused"
        return "ready" if self.steps else "nothing to change"

    @property
    def tensors_changed(self) -> bool:
        return any(
            s.kind
            in (
                StepKind.RENAME,
                StepKind.DROP,
                StepKind.STRIP,
                StepKind.SHIP,
                StepKind.VOCAB,
                StepKind.FORMAT,
            )
            for s in self.steps
        )

    @property
    def config_changed(self) -> bool:
        return self.config_before != self.config_after

    def source_errors(self) -> list[Finding]:
        if self.diagnosis is None:
            return []
        return [
            f
            for f in self.diagnosis.findings
            if f.severity is Severity.ERROR and f.engine in (None, self.engine)
        ]

    def predicted_errors(self) -> list[Finding]:
        return [f for f in self.predicted if f.severity is Severity.ERROR and f.engine in (None, self.engine)]

    def steps_table(self) -> list[dict[str, Any]]:
        """One row per step (for a DataFrame in a notebook)."""
        return [
            {
                "#": i,
                "kind": s.kind,
                "description": s.description,
                "tensors": len(s.tensors),
                "fixes": ", ".join(s.fixes),
            }
            for i, s in enumerate(self.steps, 1)
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "engine": self.engine,
            "release": self.release,
            "engine_spec": self.spec or self.engine,
            "target": self.target,
            "status": self.status,
            "options": self.options,
            "steps": [s.to_dict() for s in self.steps],
            "refusals": [r.to_dict() for r in self.refusals],
            "coverage": self.coverage,
            "source_errors": [f.to_dict() for f in self.source_errors()],
            "predicted_findings": [f.to_dict() for f in self.predicted],
            "unusable": self.unusable,
            "config_after": self.config_after,
            "files_copied": self.files_copied,
            "files_not_copied": self.files_not_copied,
        }


# -- the planned drafter, in memory --------------------------------------------------------------------


class PlannedCheckpoint(Checkpoint):
    """A checkpoint that exists only as a plan: tensors read from the source or from new data."""

    def __init__(
        self, path: Path, config: dict[str, Any], planned: dict[str, PlannedTensor], src: Checkpoint
    ) -> None:
        super().__init__(
            path=path,
            config=config,
            tensors={n: p.info for n, p in planned.items()},
            weight_format="safetensors",
        )
        self._planned = planned
        self._src = src

    def read_tensor(self, name: str) -> torch.Tensor:
        p = self._planned[name]
        if p.data is not None:
            return p.data
        assert p.source is not None
        return self._src.read_tensor(p.source)

    def read_slice(self, name: str, max_elements: int = 1 << 16) -> torch.Tensor:
        p = self._planned[name]
        if p.data is None:
            assert p.source is not None
            return self._src.read_slice(p.source, max_elements)
        if p.data.numel() <= max_elements:
            return p.data
        row = math.prod(p.data.shape[1:]) or 1
        return p.data[: max(1, max_elements // row)]


def tensor_info(name: str, t: torch.Tensor, shard: str = SAFETENSORS_FILE) -> TensorInfo:
    dtype = st_dtype(t.dtype)
    shape = tuple(int(d) for d in t.shape)
    return TensorInfo(name, shape, dtype, shard, t.numel() * t.element_size())
