"""Plain-text rendering of reports for the terminal (computation lives elsewhere)."""

from __future__ import annotations

import json
from typing import Any

from eagle3_forensics.checks.diagnose import Diagnosis, Inspection
from eagle3_forensics.engines.launch import LaunchSettings
from eagle3_forensics.findings import Finding


def human_bytes(n: float) -> str:
    """1536 -> "1.5 KB"."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _compact(value: Any, limit: int = 220) -> str:
    text = json.dumps(
        value, separators=(", ", "="), default=str, ensure_ascii=False
    )  # – and × as written; control characters stay escaped
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_finding(f: Finding) -> str:
    engine = f" [{f.engine}]" if f.engine else ""
    lines = [f"{f.severity.value.upper():7} {f.code}{engine}", f"        {f.message}"]
    if f.evidence:
        ev = {k: v for k, v in f.evidence.items() if k not in ("engine_revision", "engine_release")}
        if ev:
            lines.append(f"        evidence: {_compact(ev)}")
    if f.fix:
        lines.append(f"        fix: {f.fix}")
    return "\n".join(lines)


def render_launch_line(launch: LaunchSettings) -> str:
    """One line: the command's engine, the release that read it and what it runs with."""
    shown = {k: v for k, v in launch.settings.items() if k != "target"}
    method = launch.method_used if launch.method_used is not None else "no speculative decoding"
    if launch.method_source not in ("flag", "absent"):
        method += f" (from the {launch.method_source})"
    settings = ", ".join(f"{k} {v}" for k, v in shown.items() if k != "method")
    return (
        f"launch:     {launch.program} judged by {launch.judged_by} (launch flags of {launch.launch_release}): "
        f"{method}" + (f"; {settings}" if settings else "")
    )


def _judged(d: Diagnosis, engine: str) -> str:
    """``vllm 1.2.0 (read)``: the release and whether its rules ran here or were read."""
    proof = d.proofs.get(engine)
    return f"{d.releases[engine]} ({proof})" if proof else d.releases[engine]


def code_summary(d: Diagnosis) -> str:
    """Counts per finding code with the engines it hits, errors first:
    ``error D2T_ABSOLUTE [eagle, sglang]; info CONFIG_UNREADABLE_BY_ENGINE [speculators]``."""
    parts = []
    for c in d.code_counts():
        where = f" [{', '.join(c['engines'])}]" if c["engines"] else ""
        parts.append(f"{c['severity']} {c['code']}{where}")
    return "; ".join(parts) if parts else "none"


def verdict_word(d: Diagnosis, engine: str) -> str:
    """One engine's verdict as the text and HTML show it, with the codes behind it:
    ``broken (D2T_ABSOLUTE)``, ``conversion needed (CONFIG_UNREADABLE_BY_ENGINE)``, ``healthy``."""
    verdict = d.verdict(engine)
    word = "conversion needed" if verdict == "not applicable" else verdict
    why = d.why(engine) if verdict != "unusable" else []
    return f"{word} ({', '.join(why)})" if why else word


def render_diagnosis(d: Diagnosis) -> str:
    out = [
        f"checkpoint: {d.checkpoint}",
        f"format:     {d.format}",
        f"engines:    {', '.join(d.engines)}",
        *(
            [f"judged by:  {'; '.join(_judged(d, e) for e in d.engines if e in d.releases)}"]
            if d.releases
            else []
        ),
        *([render_launch_line(d.launch)] if d.launch is not None else []),
        f"verdict:    {d.headline()}",
        f"findings:   {code_summary(d)}",
    ]
    if d.loads:
        out.append("")
        out.append(
            "load simulation (tensors: loaded/renamed/fused · overwritten by target · dropped · rejected;"
            " engine params unfilled):"
        )
        for name, load in d.loads.items():
            c = load.counts()
            used = c["loaded"] + c["renamed"] + c["fused"]
            status = (
                "CONFIG UNREADABLE"
                if not load.config_readable
                else "BUILD FAILS"
                if load.build_errors
                else "config OK"
            )
            out.append(
                f"  {name:12} {used:4} used · {c['overwritten']:2} from target · "
                f"{c['dropped'] + c['warned']:3} dropped · {c['rejected']:3} rejected · "
                f"{c['unfilled']:3} unfilled · {status} · verdict {verdict_word(d, name)}"
            )
    if d.findings:
        out.append("")
        out.extend(render_finding(f) for f in d.findings)
    else:
        out.append("\nno findings")
    return "\n".join(out)


def render_inspection(ins: Inspection) -> str:
    out = [
        f"checkpoint: {ins.checkpoint}",
        f"format:     {ins.format.label}",
        f"weights:    {ins.weight_format}, {len(ins.tensors)} tensors, {human_bytes(ins.total_bytes)}",
        "",
    ]
    width = max((len(t.name) for t in ins.tensors), default=10)
    out.append(f"{'name':{width}}  {'shape':>18}  {'dtype':5}  {'bytes':>10}  shard")
    for t in ins.tensors:
        out.append(
            f"{t.name:{width}}  {list(t.shape)!s:>18}  {t.dtype:5}  {human_bytes(t.nbytes):>10}  {t.shard}"
        )
    return "\n".join(out)
