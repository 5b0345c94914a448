"""Rendering of repair plans and results: the CLI text, and the per-engine repair table of the notebooks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from eagle3_forensics.engines import ENGINES
from eagle3_forensics.findings import Severity
from eagle3_forensics.repair.execute import RepairResult, repair_overview
from eagle3_forensics.repair.plan.result import RECORD_FILE, RepairPlan, Step
from eagle3_forensics.repair.policy import StepKind

# -- text rendering ------------------------------------------------------------------------------------


def _lines_for_steps(steps: list[Step]) -> Iterator[str]:
    for i, s in enumerate(steps, 1):
        fixes = f"  [fixes {', '.join(s.fixes)}]" if s.fixes else ""
        yield f"  {i:2}. {s.kind:7} {s.description}{fixes}"
        if (
            s.kind in (StepKind.DROP, StepKind.STRIP, StepKind.SHIP, StepKind.VOCAB)
            and s.tensors
            and len(s.tensors) > 1
        ):
            yield f"               tensors: {', '.join(s.tensors)}"


def render_plan(plan: RepairPlan) -> str:
    display = ENGINES[plan.engine].display if plan.engine in ENGINES else plan.engine
    if plan.release:
        display = f"{display} ({plan.release})"
    out = [f"repair:   {plan.source} for {display}"]
    if plan.unusable is not None:
        out.append(f"unusable: {plan.unusable}")
        return "\n".join(out)
    if plan.diagnosis is not None:
        errs = plan.source_errors()
        out.append(f"format:   {plan.diagnosis.format}")
        out.append(
            f"source:   {len(errs)} error(s) for {display}"
            + (f": {', '.join(sorted({f.code for f in errs}))}" if errs else "")
        )
    if plan.steps:
        out.append("plan:" if not plan.refusals else "plan (not applied: the repair is refused):")
        out.extend(_lines_for_steps(plan.steps))
    elif not plan.refusals:
        out.append("plan:     nothing to change")
    if plan.files_copied:
        out.append(f"copied:   {', '.join(plan.files_copied)}")
    if plan.files_not_copied:
        out.append(f"not copied: {', '.join(plan.files_not_copied)}")
    if plan.refusals:
        out.append("refused:")
        for r in plan.refusals:
            out.append(f"  {r.code}: {r.reason}.")
            if r.finding:
                out.append(f"      finding: {r.finding}")
            for o in r.options:
                out.append(f"      option: {o}")
    elif plan.diagnosis is not None:
        left = [
            f for f in plan.predicted if f.engine in (None, plan.engine) and f.severity is not Severity.INFO
        ]
        if left:
            out.append("after repair (predicted): " + ", ".join(f"{f.severity.value} {f.code}" for f in left))
        else:
            out.append("after repair (predicted): no error, no warning")
    return "\n".join(out)


def render_repair(result: RepairResult) -> str:
    out = [render_plan(result.plan)] if result.plan is not None else []
    if result.verification is not None and result.status == "not-verified":
        errs = [f for f in result.verification.findings if f.severity is Severity.ERROR]
        out.append("verification errors: " + ", ".join(f.code for f in errs))
    out.append(
        f"result:   {result.status.upper()}: {result.message}"
        if result.status != "refused"
        else "result:   REFUSED: nothing was written"
    )
    if result.record is not None:
        t = result.record["tensors"]
        out.append(
            f"record:   {result.dest}/{RECORD_FILE} ({len(t['changed'])} tensor change(s), "
            f"{t['copied_bit_exact']} tensor(s) copied bit-exactly)"
        )
    out.append(f"exit code: {result.exit_code}")
    return "\n".join(out)


def repair_table(src: str, target: str | None = None) -> Any:
    """Each repairable engine: errors before, what repair did or why it refused, diagnose after."""
    import pandas as pd  # optional: notebooks only

    return pd.DataFrame(repair_overview(src, target=target))
