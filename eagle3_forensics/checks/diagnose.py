"""``diagnose``: every static check on one drafter, as one report."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from eagle3_forensics.checks import Context, run_checks
from eagle3_forensics.checks.aux_measured import MeasuredAux
from eagle3_forensics.checks.launch import check_launch
from eagle3_forensics.checks.launch_window import check_draft_window_static
from eagle3_forensics.engines import release_label, resolve_engines
from eagle3_forensics.engines.launch import (
    LaunchRules,
    LaunchSettings,
    Setting,
    launch_rules_for,
    read_launch,
)
from eagle3_forensics.engines.rules import EngineRules
from eagle3_forensics.engines.simulate import LoadReport
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.findings import LAUNCH_CATALOGUE, Finding, Severity, count_by_severity, sort_findings
from eagle3_forensics.io.checkpoint import Checkpoint, TensorInfo, open_checkpoint
from eagle3_forensics.io.config import DrafterConfig
from eagle3_forensics.io.launch import split_command
from eagle3_forensics.io.layout import FormatInfo, detect_format
from eagle3_forensics.io.target import TargetInfo, open_target
from eagle3_forensics.repair.next_steps import CONVERSION_CODES, NextStep, fix_command, next_steps


@dataclass
class Inspection:
    """``inspect``: the tensor table and the detected format, nothing else."""

    checkpoint: str
    format: FormatInfo
    weight_format: str
    tensors: list[TensorInfo]
    config: DrafterConfig

    @property
    def total_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    def to_dict(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint,
            "format": self.format.label,
            "format_detail": self.format.to_dict(),
            "weight_format": self.weight_format,
            "total_bytes": self.total_bytes,
            "tensors": [t.to_dict() for t in self.tensors],
        }


def inspect_checkpoint(path: str | Path) -> Inspection:
    ckpt = open_checkpoint(path)
    cfg = DrafterConfig(ckpt.config)
    return Inspection(str(path), detect_format(ckpt, cfg), ckpt.weight_format, list(ckpt), cfg)


# per-engine verdict -> its group in ``engine_verdicts`` ("not applicable": the engine cannot read the config)
_VERDICT_GROUPS = {
    "healthy": "healthy",
    "warnings": "warnings",
    "broken": "broken",
    "not applicable": "conversion_needed",
}


@dataclass
class Diagnosis:
    checkpoint: str
    format: str
    engines: list[str]
    findings: list[Finding]
    loads: dict[str, LoadReport] = field(default_factory=dict)
    format_detail: FormatInfo | None = None
    target: TargetInfo | None = None
    unusable: bool = False
    releases: dict[str, str] = field(default_factory=dict)  # engine -> the release it was judged by
    launch: LaunchSettings | None = None  # diagnose --launch: the command as the judged release reads it
    proofs: dict[str, str] = field(default_factory=dict)  # engine -> "ran" | "read" (engines/proof.py)
    # engine -> the --engine spec that names its judged release again (the commands in fixes use it)
    specs: dict[str, str] = field(default_factory=dict)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    @property
    def exit_code(self) -> int:
        if self.unusable:
            return 2
        return 1 if self.errors else 0

    def verdict(self, engine: str | None = None) -> str:
        """'unusable' | 'broken' | 'warnings' | 'healthy' | 'not applicable', overall or for one engine.

        'not applicable' for an engine is an engine that cannot read this config layout and was not
        named by the user: the drafter needs a conversion for it. Overall it means no asked engine can
        read the drafter, so the overall verdict is never 'healthy' when no engine can serve it.
        """
        if self.unusable:
            return "unusable"
        if engine is None and self.loads and all(self.verdict(e) == "not applicable" for e in self.engines):
            return "not applicable"
        load = self.loads.get(engine) if engine else None
        if (
            load is not None
            and not load.config_readable
            and not any(f.engine == engine and f.severity is Severity.ERROR for f in self.findings)
        ):
            return "not applicable"  # an engine that never reads this format, not named by the user
        relevant = [f for f in self.findings if engine is None or f.engine in (None, engine)]
        if any(f.severity is Severity.ERROR for f in relevant):
            return "broken"
        if any(f.severity is Severity.WARNING for f in relevant):
            return "warnings"
        return "healthy"

    def why(self, engine: str) -> list[str]:
        """The finding codes behind one engine's verdict: its errors when broken, its warnings when
        'warnings', the config it cannot read when it needs a conversion; none when healthy."""
        verdict = self.verdict(engine)
        if verdict == "not applicable":
            return [f.code for f in self.findings if f.engine == engine and f.code in CONVERSION_CODES]
        wanted = {"broken": Severity.ERROR, "warnings": Severity.WARNING}.get(verdict)
        codes = [f.code for f in self.findings if f.engine in (None, engine) and f.severity is wanted]
        return list(dict.fromkeys(codes))

    def engine_verdicts(self) -> dict[str, Any]:
        """Where the drafter is healthy, where it has warnings, where it is broken and where the
        engine cannot read it (a conversion is needed), with the codes that say why and one line."""
        groups: dict[str, list[str]] = {key: [] for key in _VERDICT_GROUPS.values()}
        for e in self.engines:
            groups.setdefault(_VERDICT_GROUPS.get(self.verdict(e), self.verdict(e)), []).append(e)
        return {
            **groups,
            "why": {e: self.why(e) for e in self.engines if not self.unusable},
            "servable": bool(groups["healthy"] or groups["warnings"]),
            "summary": self.headline(),
        }

    def headline(self) -> str:
        """The verdict line: ``HEALTHY`` when every asked engine agrees, else per group with its engines,
        e.g. ``HEALTHY on vllm, speculators · CONVERSION NEEDED for sglang, eagle, tensorrt_llm``."""
        if self.unusable or not self.engines:
            return self.verdict().upper()
        by: dict[str, list[str]] = {}
        for e in self.engines:
            by.setdefault(self.verdict(e), []).append(e)
        if len(by) == 1 and "not applicable" not in by:
            return next(iter(by)).upper()
        order = ("healthy", "warnings", "broken", "not applicable")
        parts = []
        for verdict in order:
            if verdict in by:
                label = "CONVERSION NEEDED for" if verdict == "not applicable" else f"{verdict.upper()} on"
                parts.append(f"{label} {', '.join(by[verdict])}")
        return " · ".join(parts)

    def code_counts(self) -> list[dict[str, Any]]:
        """One entry per finding code (severity order): its severity, how many findings and the engines."""
        out: dict[str, dict[str, Any]] = {}
        for f in self.findings:
            entry = out.setdefault(
                f.code, {"code": f.code, "severity": f.severity.value, "count": 0, "engines": []}
            )
            entry["count"] += 1
            if f.engine and f.engine not in entry["engines"]:
                entry["engines"].append(f.engine)
        return list(out.values())

    def next_steps(self, out: str | None = None) -> list[NextStep]:
        """What to do next, with this run's paths (:func:`eagle3_forensics.repair.next_steps.next_steps`)."""
        target = None if self.target is None else str(self.target.path)
        return next_steps(self.findings, self.checkpoint, specs=self.specs, out=out, target=target)

    def counts(self) -> dict[str, int]:
        return count_by_severity(self.findings)

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON shape (extra keys beyond the four are stable additions)."""
        return {
            "checkpoint": self.checkpoint,
            "format": self.format,
            "engines": self.engines,
            "findings": [f.to_dict() for f in self.findings],
            "verdict": {"overall": self.verdict(), **{e: self.verdict(e) for e in self.engines}},
            "counts": self.counts(),
            "codes": self.code_counts(),
            "engine_verdicts": self.engine_verdicts(),
            "load": {e: r.to_dict() for e, r in self.loads.items()},
            "releases": self.releases,
            **({"proofs": self.proofs} if self.proofs else {}),
            **({"launch": self.launch.to_dict()} if self.launch is not None else {}),
        }


def _with_repair_hints(
    findings: list[Finding], path: str, specs: dict[str, str] | None = None, target: str | None = None
) -> list[Finding]:
    """Append the ``repair`` command (with this run's paths) to the fixes ``repair`` handles for that
    engine: errors and config conversions. Which codes it handles is ``repair.POLICY`` (one table,
    read by :func:`eagle3_forensics.repair.next_steps.fix_command`); a refusal keeps the manual fix."""
    out = []
    for f in findings:
        cmd = fix_command(f, path, specs=specs, target=target)
        if cmd is not None:
            hint = f"Automated: {cmd}"
            f = replace(f, fix=f"{f.fix} {hint}" if f.fix else hint)
        out.append(f)
    return out


def unreadable(path: str | Path, engines: list[EngineRules] | list[str], reason: str) -> Diagnosis:
    finding = Finding(
        "CHECKPOINT_UNREADABLE",
        Severity.ERROR,
        reason,
        evidence={"path": str(path), "reason": reason},
        fix="Check the path and re-copy or re-export the checkpoint; see docs/findings.md.",
    )
    names = [e if isinstance(e, str) else e.name for e in engines]
    releases = {e.name: release_label(e) for e in engines if not isinstance(e, str)}
    return Diagnosis(str(path), "unknown", names, [finding], unusable=True, releases=releases)


def diagnose(
    path: str | Path,
    target: str | Path | None = None,
    engines: str | list[str] | tuple[str, ...] | None = "all",
    launch: str | None = None,
    launch_base: Path | None = None,
    measured_aux: MeasuredAux | None = None,
) -> Diagnosis:
    """Run every static check. Unusable input gives a report with one CHECKPOINT_UNREADABLE finding.

    ``engines`` is ``"all"`` or engine specs (``sglang``, ``sglang==1.2.0``, ``vllm``, ``eagle``,
    ``speculators``, ``tensorrt_llm``); an unknown engine or release raises :class:`BadArgumentsError`.
    ``launch`` is a serving command line (``diagnose --launch``): its program picks the engine when
    ``engines`` is ``"all"``, it is read by the release that engine is judged by, and the launch
    checks run too. A malformed command line raises :class:`BadArgumentsError` (an unreadable
    options file :class:`UnusableInputError`) before the checkpoint is opened; relative paths in it
    are taken from ``launch_base`` (default: the current directory). ``measured_aux``: the aux layers
    measured on the target (:func:`eagle3_forensics.probe.aux_trained.measure_trained_aux`); it decides
    the aux findings (``AUX_LAYER_IDS_NOT_TRAINED``, ``AUX_LAYER_IDS_NOT_RECORDED``).
    """
    line = split_command(launch) if launch is not None else None
    everything = engines is None or engines == "all"
    # engines the user named (or the command named) are judged strictly; "all" keeps its leniency
    explicit = not (everything or (not isinstance(engines, str) and engines is not None and "all" in engines))
    if line is not None and everything:
        engines, explicit = [line.engine], True
    releases = resolve_engines(engines)
    names = [r.name for r in releases]
    settings: LaunchSettings | None = None
    lrules: LaunchRules | None = None
    if line is not None:
        judged = next((r for r in releases if r.name == line.engine), None)
        if judged is None:
            raise BadArgumentsError(
                f"--launch is a {line.engine} command ({line.program}) but --engine names {', '.join(names)}; "
                f"add --engine {line.engine} or leave --engine out"
            )
        lrules = launch_rules_for(judged)
        settings = read_launch(line, lrules, launch_base)
        settings.judged_by = release_label(judged)
    try:
        ckpt: Checkpoint = open_checkpoint(path)
        tinfo = open_target(target) if target is not None else None
        served = _served_architecture(settings, launch_base) if tinfo is None else None
        ctx = Context(
            ckpt,
            tinfo,
            explicit_engines=explicit,
            releases=releases,
            served_architecture=served,
            measured_aux=measured_aux,
        )
        judged_labels = ctx.releases_judged()
        specs = {r.name: _spec(r) for r in releases}
        found = run_checks(ctx)
        if settings is not None and lrules is not None:
            found = _with_launch(found, ctx, settings, lrules, path, launch_base)
        else:  # a sliding-window drafter needs its window flag whatever the command: said from the config
            found = [*found, *check_draft_window_static(ctx)]
        proofs = {r.name: r.proof.value for r in releases}
        found = _with_proof(found, proofs, lrules)
        tpath = None if target is None else str(target)
        findings = sort_findings(_with_repair_hints(found, str(path), specs, tpath))
        return Diagnosis(
            str(path),
            ctx.fmt.label,
            names,
            findings,
            ctx.loads,
            ctx.fmt,
            tinfo,
            releases=judged_labels,
            launch=settings,
            proofs=proofs,
            specs=specs,
        )
    except UnusableInputError as exc:
        d = unreadable(path, releases, str(exc))
        d.launch = settings
        return d


def _served_architecture(settings: LaunchSettings | None, base: Path | None) -> str | None:
    """``architectures[0]`` of the model a launch serves, when it is a local directory with a readable config."""
    model = settings.get(Setting.TARGET) if settings is not None else None
    if not isinstance(model, str):
        return None
    config = (base or Path.cwd()) / model / "config.json"
    try:
        archs = json.loads(config.read_text(encoding="utf-8")).get("architectures")
    except (OSError, ValueError, AttributeError):
        return None  # a hub id, or no readable config: the class stays unknown
    return str(archs[0]) if isinstance(archs, list) and archs and isinstance(archs[0], str) else None


def _with_launch(
    findings: list[Finding],
    ctx: Context,
    settings: LaunchSettings,
    rules: LaunchRules,
    path: str | Path,
    base: Path | None,
) -> list[Finding]:
    """The launch findings added; where the command names the captured layers itself, the launch
    check judges them, so the engine's "default capture" finding no longer applies."""
    if settings.get(Setting.CAPTURE_LAYERS) is not None:
        findings = [
            f
            for f in findings
            if not (f.code == "AUX_LAYER_IDS_IGNORED_BY_ENGINE" and f.engine == settings.engine)
        ]
    return findings + check_launch(ctx, settings, rules, path, base)


def _with_proof(findings: list[Finding], proofs: dict[str, str], launch: LaunchRules | None) -> list[Finding]:
    """Each engine finding marked with how its rule is known: the judged table's proof, or for a
    launch finding the launch table's."""
    out = []
    for f in findings:
        proof = (
            launch.proof.value
            if launch is not None and f.code in LAUNCH_CATALOGUE
            else proofs.get(f.engine or "")
        )
        keep = f.proof is not None  # a rule that ran although its table as a whole was read
        out.append(replace(f, proof=proof) if f.engine is not None and proof is not None and not keep else f)
    return out


def _spec(rules: EngineRules) -> str:
    """The --engine spec that names this release again (the newest needs no version)."""
    if rules.requested is None or not rules.pinned:
        return rules.name
    return f"{rules.name}=={rules.requested}"
