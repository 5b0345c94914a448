"""Triage: the page to open first for one drafter (notebook ``00_triage``).

:func:`triage` runs every static check (``diagnose``) and, when a target and prompts are given,
a short live acceptance probe; the helpers below turn the result into the verdict, the top
findings with their fixes (one card per finding code, listing the engines it hits), the
per-engine load summary and the acceptance figures. A checkpoint that cannot be read still
gives a page (verdict ``unusable``); a probe an engine view refuses gives its reason instead of
numbers. Nothing here raises for a bad drafter: the notebook always completes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle3_forensics.checks.diagnose import diagnose, inspect_checkpoint
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.views import format as fmt
from eagle3_forensics.views.html import (
    SEVERITY_BACKGROUNDS,
    SEVERITY_COLOURS,
    command_html,
    compact_json,
    esc,
    split_fix,
    table_html,
    visible,
)
from eagle3_forensics.views.text import verdict_word

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd

    from eagle3_forensics.checks.diagnose import Diagnosis, Inspection
    from eagle3_forensics.probe.core import ProbeResult


@dataclass
class Triage:
    checkpoint: str
    target: str | None
    diagnosis: Diagnosis
    inspection: Inspection | None
    probe: ProbeResult | None
    probe_note: str  # why there is no probe, or what was probed


def triage(
    checkpoint: str | Path,
    target: str | Path | None = None,
    engine: str = "all",
    prompts: str | Path | None = None,
    *,
    max_prompts: int = 4,
    k: int = 3,
    max_new_tokens: int = 32,
    probe_engine: str = "reference",
    device: str = "auto",
) -> Triage:
    """Static checks, plus the live acceptance on the first ``max_prompts`` prompts when a target
    and prompts are given (no teacher-forced estimate or aux sweep: notebook 04 has those)."""
    d = diagnose(checkpoint, target=target, engines=engine)
    ins: Inspection | None = None
    if not d.unusable:
        try:
            ins = inspect_checkpoint(checkpoint)
        except UnusableInputError:
            ins = None
    result: ProbeResult | None = None
    if d.unusable:
        note = "probe skipped: the checkpoint cannot be read"
    elif target is None:
        note = "probe skipped: no target given"
    elif prompts is None:
        note = "probe skipped: no prompts given"
    else:
        from eagle3_forensics.probe.core import probe, read_prompts  # heavy: torch, transformers

        try:
            texts = read_prompts(prompts)[: max(1, int(max_prompts))]
            result = probe(
                checkpoint,
                target,
                texts,
                k=k,
                max_new_tokens=max_new_tokens,
                device=device,
                engine=probe_engine,
                teacher_forced=False,
                sweep=False,
            )
            note = (
                f"live probe: {result.prompts} prompts × {result.max_new_tokens} new tokens, K={result.k}, "
                f"{result.engine} view, {result.device} ({result.dtype})"
            )
        except UnusableInputError as exc:
            note = f"probe not possible: {' '.join(str(exc).split())}"
    return Triage(str(checkpoint), None if target is None else str(target), d, ins, result, note)


def top_findings_html(diagnosis: Diagnosis, n: int = 5) -> str:
    """The ``n`` most severe findings, one card per code (engines listed), each with its fix."""
    if not diagnosis.findings:
        return '<p class="e3f-no-findings" style="color:#2e7d32"><b>No findings.</b></p>'
    groups: dict[str, list[Any]] = {}
    for f in diagnosis.findings:  # already sorted: errors first
        groups.setdefault(f.code, []).append(f)
    cards = []
    for code, fs in list(groups.items())[: max(0, n)]:
        f = fs[0]
        sev = f.severity.value
        colour = SEVERITY_COLOURS.get(sev, "#555")
        engines = [x.engine for x in fs if x.engine]
        where = f' &nbsp;<span style="color:#555">[{esc(", ".join(engines))}]</span>' if engines else ""
        evidence = (
            f'<div style="margin-top:0.3em"><b>evidence</b> <code>{esc(compact_json(f.evidence))}</code></div>'
            if f.evidence
            else ""
        )
        fix = _card_fix_html(fs)
        cards.append(
            f'<div class="e3f-finding e3f-{esc(sev)}" style="border-left:5px solid {colour};'
            f'background:{SEVERITY_BACKGROUNDS.get(sev, "#f5f5f5")};padding:0.5em 0.8em;margin:0.5em 0">'
            f'<div><b style="color:{colour}">{esc(sev.upper())}</b> &nbsp;<code>{esc(code)}</code>{where}</div>'
            f'<div style="margin-top:0.3em">{esc(f.message)}</div>{evidence}{fix}</div>'
        )
    rest = len(groups) - len(cards)
    more = (
        f"<p><em>{rest} more finding code(s): see notebook 01 for all of them.</em></p>" if rest > 0 else ""
    )
    return "".join(cards) + more


def _card_fix_html(fs: list[Any]) -> str:
    """The fix of a card for one code: the manual fix once (by hand for the engines no command
    serves), then each command that does it with its engine (diagnose wrote them into the fixes)."""
    manual = ""
    by_hand: list[str] = []
    commands: list[tuple[str, str]] = []
    for f in fs:
        text, command = split_fix(f.fix)
        manual = manual or text
        if command is not None:
            commands.append((command, f.engine or ""))
        elif f.engine:
            by_hand.append(f.engine)
    label = "fix" if not commands or not by_hand else f"fix by hand ({', '.join(by_hand)})"
    out = f'<div style="margin-top:0.3em"><b>{esc(label)}</b> {esc(manual)}</div>' if manual else ""
    return out + "".join(command_html(command, engine) for command, engine in commands)


def load_summary_table(diagnosis: Diagnosis) -> pd.DataFrame:
    """Per engine: verdict, tensors used / dropped / rejected, parameters left unfilled, config problem."""
    import pandas as pd  # optional: pandas

    rows = []
    for name, load in diagnosis.loads.items():
        c = load.counts()
        rows.append(
            {
                "engine": name,
                "release": diagnosis.releases.get(name, load.release),
                "verdict": verdict_word(diagnosis, name),  # with the codes that make it so
                "used": c["loaded"] + c["renamed"] + c["fused"] + c["consumed"],
                "dropped": c["dropped"] + c["warned"],
                "rejected": c["rejected"],
                "overwritten by target": c["overwritten"],
                "unfilled params": c["unfilled"],
                "config problem": visible(load.config_problem or "; ".join(load.build_errors)),
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "engine",
            "release",
            "verdict",
            "used",
            "dropped",
            "rejected",
            "overwritten by target",
            "unfilled params",
            "config problem",
        ],
    )


def acceptance_html(t: Triage) -> str:
    """The live acceptance (length, per-position cumulative and conditional, lossless) or why there is none."""
    note = f'<p style="color:#555">{esc(t.probe_note)}</p>'
    r = t.probe
    if r is None:
        return note
    import pandas as pd  # optional: pandas

    head = pd.DataFrame(
        [
            (
                "acceptance length",
                fmt.acceptance_length(r.acceptance_length),
                "vLLM: 1 + accepted / num_drafts (incl. bonus)",
            ),
            ("acceptance rate", fmt.rate(r.acceptance_rate), "accepted / drafted"),
            ("lossless", fmt.yes_no(r.lossless), "committed tokens == plain greedy decoding"),
            ("tokens/s speculative", fmt.speed(r.tokens_per_s), f"{r.device} ({r.dtype})"),
            (
                "speedup vs greedy",
                fmt.ratio(r.speedup_vs_greedy, "greedy not timed"),
                f"{r.device}, tokens per second",
            ),
        ],
        columns=["metric", "value", "convention"],
    )
    per_pos = pd.DataFrame(
        {
            "draft position": list(range(r.k)),
            "cumulative (vLLM)": [fmt.rate(x) for x in r.per_position_cumulative],
            "conditional": [fmt.rate(x) for x in r.per_position_conditional],
        }
    )
    return note + table_html(head) + table_html(per_pos)


def acceptance_figure(t: Triage) -> Any:
    """Per-position acceptance bars; when nothing was accepted, a line saying so instead of an empty
    frame (:func:`eagle3_forensics.views.probe.acceptance_chart`); ``None`` when there is no probe."""
    if t.probe is None:
        return None
    from eagle3_forensics.views.probe import acceptance_chart  # heavy: torch

    return acceptance_chart(t.probe)
