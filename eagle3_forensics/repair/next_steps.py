"""The next command for a set of findings: which ``repair`` (with this run's paths) or which launch
flag fixes them, and what is left to do by hand.

A leaf like :mod:`eagle3_forensics.repair.policy` (it imports only the finding catalogue and the
policy table), so ``diagnose`` writes the same command into a fix line that the notebooks' cards and
"Next" sections show: one place decides what "the next command" is.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from eagle3_forensics.findings import LAUNCH_CATALOGUE, Finding, Severity, sort_findings
from eagle3_forensics.repair.policy import POLICY, REPAIRABLE_ENGINES, Action

# A config another engine's layout needs is a conversion, whatever its severity: "info" when the
# user asked for every engine (the engine is then "not applicable"), "error" when they named it.
CONVERSION_CODES: frozenset[str] = frozenset({"CONFIG_UNREADABLE_BY_ENGINE"})


class StepAction(StrEnum):
    """What a :class:`NextStep` asks the user to do."""

    REPAIR = "repair"  # run the command: an engine-ready copy, verified by re-diagnosing it
    LAUNCH = "launch"  # change the serving command as the fix says
    MANUAL = "manual"  # no command does it; the fix says what to change by hand
    CONFIRM = "confirm"  # check the result (diagnose the copy, probe it)


@dataclass(frozen=True)
class NextStep:
    """One thing to do next. ``command`` is a shell line with this run's paths, ``None`` when no
    command does it (``text`` then says what to do)."""

    action: StepAction
    text: str
    command: str | None = None
    codes: tuple[str, ...] = ()
    engines: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action.value,
            "text": self.text,
            "command": self.command,
            "codes": list(self.codes),
            "engines": list(self.engines),
        }


def repair_out(checkpoint: str, engine: str) -> str:
    """The default ``--out`` of a suggested repair: a sibling of the checkpoint named after the
    engine (``drafters/x`` → ``drafters/x-repaired-sglang``); ``repair`` never writes into the source."""
    base = checkpoint.rstrip("/\\") or checkpoint
    return f"{base}-repaired-{engine.replace('==', '-')}"


def repair_command(checkpoint: str, engine: str, out: str | None = None, target: str | None = None) -> str:
    """``eagle3-forensics repair CKPT --engine E --out DST [--target T]``, shell-quoted."""
    words = ["eagle3-forensics", "repair", checkpoint, "--engine", engine, "--out"]
    words.append(out if out is not None else repair_out(checkpoint, engine))
    if target is not None:
        words += ["--target", target]
    return shlex.join(words)


def diagnose_command(checkpoint: str, engine: str, target: str | None = None) -> str:
    """``eagle3-forensics diagnose PATH --engine E [--target T]``: the check a repaired copy must pass."""
    words = ["eagle3-forensics", "diagnose", checkpoint, "--engine", engine]
    if target is not None:
        words += ["--target", target]
    return shlex.join(words)


def repairs(f: Finding) -> bool:
    """True when ``repair --engine f.engine`` fixes this finding (the policy table says so for the
    code and this evidence, and repair makes copies for that engine)."""
    policy = POLICY.get(f.code)
    if policy is None or policy.action != Action.FIX or policy.refuses(f):
        return False
    if f.engine not in REPAIRABLE_ENGINES:
        return False
    return f.severity is Severity.ERROR or f.code in CONVERSION_CODES


def fix_command(
    f: Finding,
    checkpoint: str,
    *,
    specs: Mapping[str, str] | None = None,
    out: str | None = None,
    target: str | None = None,
) -> str | None:
    """The command that fixes one finding, or ``None`` when no command does (``specs``: engine →
    the ``--engine`` spec of the judged release, e.g. ``{"sglang": "sglang==0.5.11"}``)."""
    if not repairs(f):
        return None
    engine = str(f.engine)
    spec = (specs or {}).get(engine, engine)
    return repair_command(checkpoint, spec, out, target)


def next_steps(
    findings: Iterable[Finding],
    checkpoint: str,
    *,
    specs: Mapping[str, str] | None = None,
    out: str | None = None,
    target: str | None = None,
) -> list[NextStep]:
    """What to do next about ``findings`` of ``checkpoint``, most useful first.

    One ``repair`` step per engine that repair can make a copy for (every error and conversion of
    that engine it fixes, then a ``confirm`` step that diagnoses the copy), one ``launch`` step per
    launch finding, and one ``manual`` step per remaining error or conversion code with the engines
    it hits. Warnings and infos that need no conversion give no step. ``out`` overrides the default
    ``--out`` (:func:`repair_out`) when a single engine is repaired.
    """
    fs = sort_findings(findings)
    by_engine: dict[str, list[Finding]] = {}
    launch: list[Finding] = []
    manual: dict[str, list[Finding]] = {}
    for f in fs:
        if f.code in LAUNCH_CATALOGUE:
            if f.severity is not Severity.INFO:
                launch.append(f)
        elif repairs(f):
            by_engine.setdefault(str(f.engine), []).append(f)
        elif f.severity is Severity.ERROR or f.code in CONVERSION_CODES:
            manual.setdefault(f.code, []).append(f)
    steps: list[NextStep] = []
    single = out if len(by_engine) == 1 else None
    for engine, hits in by_engine.items():
        spec = (specs or {}).get(engine, engine)
        dst = single if single is not None else repair_out(checkpoint, spec)
        codes = tuple(dict.fromkeys(f.code for f in hits))
        steps.append(
            NextStep(
                StepAction.REPAIR,
                f"Write a copy ready for {spec} that fixes {', '.join(codes)} (verified before it is kept).",
                repair_command(checkpoint, spec, dst, target),
                codes,
                (engine,),
            )
        )
        steps.append(
            NextStep(
                StepAction.CONFIRM,
                f"Confirm: the copy for {spec} has no error.",
                diagnose_command(dst, spec, target),
                codes,
                (engine,),
            )
        )
    steps.extend(
        NextStep(StepAction.LAUNCH, f.fix or f.message, None, (f.code,), (f.engine,) if f.engine else ())
        for f in launch
    )
    for code, hits in manual.items():
        engines = tuple(dict.fromkeys(str(f.engine) for f in hits if f.engine))
        steps.append(NextStep(StepAction.MANUAL, hits[0].fix or hits[0].message, None, (code,), engines))
    return steps


def code_commands(
    findings: Iterable[Finding],
    checkpoint: str,
    *,
    specs: Mapping[str, str] | None = None,
    target: str | None = None,
) -> dict[str, list[tuple[str, str]]]:
    """Per finding code, the ``(engine, command)`` pairs that fix it: what a card for that code shows."""
    out: dict[str, list[tuple[str, str]]] = {}
    for f in sort_findings(findings):
        cmd = fix_command(f, checkpoint, specs=specs, target=target)
        if cmd is not None:
            out.setdefault(f.code, []).append((str(f.engine), cmd))
    return out
