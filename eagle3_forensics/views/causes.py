"""Render the ranking of causes (notebook 06): HTML cards, plain text, and the segment × length explorer.

The ranking itself is data (:class:`eagle3_forensics.checks.causes.Ranking`); this module only shows
it. The explorer follows the other explorers (:class:`eagle3_forensics.views.widgets.Explorer`): a live
segment and length picker in JupyterLab, a static table in papermill runs and HTML reports.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from eagle3_forensics.checks.causes import Cause, Cost, Ranking
from eagle3_forensics.probe.why_next import WhyStep, estimated_drop
from eagle3_forensics.views.html import SEVERITY_BACKGROUNDS, SEVERITY_COLOURS, esc, table_html
from eagle3_forensics.views.widgets import STATIC_NOTE, Explorer, live_html, note_html, unavailable

ALL = "all"


def cost_text(cost: Cost | None, trained: float | None = None) -> str:
    """``−1.912 acceptance length (measured)``; a share of positions with its acceptance-length
    estimate beside it when the trained view's acceptance length is known
    (:func:`eagle3_forensics.probe.why_next.estimated_drop`); or ``cost not measured``."""
    if cost is None:
        return "cost not measured"
    parts = []
    if cost.acceptance_length_drop is not None:
        parts.append(f"−{cost.acceptance_length_drop:.3f} acceptance length")
    if cost.share_of_positions is not None:
        est = (
            None
            if cost.acceptance_length_drop is not None
            else estimated_drop(cost.share_of_positions, trained)
        )
        approx = "" if est is None else f" ≈ −{est:.3f} acceptance length"
        parts.append(f"{cost.share_of_positions:.1%} of positions{approx}")
    return f"{', '.join(parts)} ({cost.basis})"


#: how a share of positions becomes an acceptance length, under every card that shows one
SHARE_NOTE = (
    "≈ acceptance length: the share × (trained view − 1), the accepted drafts per cycle lost if every "
    "such position were rejected (a first-order estimate, not a measurement)"
)


def _headline(r: Ranking, trained: float | None = None) -> str:
    al = "" if r.acceptance_length is None else f"acceptance length {r.acceptance_length:.3f}: "
    if not r.found:
        return f"{al}no cause found"
    top = r.causes[0]
    return f"{al}{len(r.causes)} cause(s); first: {top.code} ({top.category}), {cost_text(top.cost, trained)}"


def ranking_text(r: Ranking) -> str:
    """The ranking as plain text: one numbered line per cause, then what was set aside and not checked."""
    lines = [_headline(r)]
    for n, c in enumerate(r.causes, 1):
        lines.append(f"{n}. [{c.severity.value}] {', '.join(c.codes)} — {c.category}: {cost_text(c.cost)}")
        lines.append(f"   {c.explanation}")
        if c.cost is not None and c.cost.how:
            lines.append(f"   how: {c.cost.how}")
        if c.fix:
            lines.append(f"   fix: {c.fix}")
    for f, why in r.set_aside:
        lines.append(f"not a cause: {f.code}{f' ({f.engine})' if f.engine else ''}: {why}")
    for item in r.not_checked:
        lines.append(f"not checked: {item}")
    return "\n".join(lines)


def _evidence_table(items: Sequence[dict[str, Any]]) -> str:
    """The evidence as a small table (code, engine, message), the full JSON folded under it."""
    if not items:
        return ""
    rows = "".join(
        f'<tr><td style="text-align:left"><code>{esc(e.get("code"))}</code></td>'
        f'<td style="text-align:left">{esc(e.get("engine") or "–")}</td>'
        f'<td style="text-align:left">{esc(e.get("message"))}</td></tr>'
        for e in items
    )
    full = json.dumps([e.get("evidence") for e in items], indent=1, sort_keys=True, default=str)
    return (
        '<table class="e3f-evidence" style="font-size:0.9em;margin:0.3em 0"><thead><tr><th>code</th>'
        f"<th>engine</th><th>what</th></tr></thead><tbody>{rows}</tbody></table>"
        '<details><summary style="font-size:0.85em;color:#555">evidence (full JSON)</summary>'
        f'<pre style="font-size:0.8em;max-height:20em;overflow:auto">{esc(full)}</pre></details>'
    )


def _card(n: int, c: Cause, trained: float | None = None) -> str:
    sev = c.severity.value
    colour = SEVERITY_COLOURS.get(sev, "#555")
    how = (
        f'<div style="color:#555;font-size:0.9em">how: {esc(c.cost.how)}</div>'
        if c.cost and c.cost.how
        else ""
    )
    evidence = _evidence_table(c.evidence)
    share = (
        f'<div style="color:#555;font-size:0.85em">{esc(SHARE_NOTE)}</div>'
        if c.cost
        and c.cost.share_of_positions is not None
        and c.cost.acceptance_length_drop is None
        and trained
        else ""
    )
    fix = f'<div style="margin-top:0.3em"><b>fix</b> {esc(c.fix)}</div>' if c.fix else ""
    return (
        f'<div class="e3f-cause e3f-{esc(sev)}" style="border-left:5px solid {colour};'
        f'background:{SEVERITY_BACKGROUNDS.get(sev, "#f5f5f5")};padding:0.5em 0.8em;margin:0.5em 0">'
        f'<div><b style="font-size:1.1em">#{n}</b> &nbsp;<b style="color:{colour}">{esc(sev.upper())}</b> '
        f"&nbsp;<code>{esc(', '.join(c.codes))}</code> &nbsp;<em>{esc(c.category)}</em> &nbsp;"
        f'<b class="e3f-cost">{esc(cost_text(c.cost, trained))}</b></div>'
        f'<div style="margin-top:0.3em">{esc(c.explanation)}</div>{how}{share}'
        f"{evidence}{fix}</div>"
    )


def reference_html(r: Ranking, trained: float | None, source: str = "") -> str:
    """The figure to read the acceptance length against: the trained view's (what the drafter was
    trained to reach, 06's reference), beside the served one."""
    if trained is None:
        return '<p class="e3f-why-reference" style="color:#555">Reference: not measured (no probe).</p>'
    served = "" if r.acceptance_length is None else f"served {r.acceptance_length:.3f} against "
    src = f" ({esc(source)})" if source else ""
    return (
        f'<p class="e3f-why-reference">Reference: {esc(served)}the trained view\'s <b>{trained:.3f}</b>{src}, '
        "the acceptance the drafter was trained to reach (K drafts + 1 at most).</p>"
    )


def why_next_html(steps: Sequence[WhyStep]) -> str:
    """Notebook 06's Next section: per cause the action, the commands (run in ``notebooks/``, e.g. a
    ``make lab`` terminal) and how to confirm the fix (the command, and which number should move)."""
    if not steps:
        return (
            '<ol class="e3f-next"><li>No cause to fix. To check another drafter, set <code>checkpoint</code> '
            "in the folded parameters cell and <i>Run All</i>.</li></ol>"
        )

    def code(cmd: str) -> str:
        return f'<pre class="e3f-command" style="white-space:pre-wrap;margin:0.3em 0">{esc(cmd)}</pre>'

    items = "".join(
        f"<li><b>{esc(s.category)}</b> <code>{esc(', '.join(s.codes))}</code>: {esc(s.action)}"
        f"{''.join(code(c) for c in s.commands)}<div><b>Confirm</b>: {esc(s.expect)}</div>{code(s.confirm)}</li>"
        for s in steps
    )
    return f'<ol class="e3f-next e3f-why-next">{items}</ol>'


def ranking_html(r: Ranking, trained: float | None = None) -> str:
    """The headline, one card per cause (rank, codes, category, cost, evidence, fix), then the findings
    set aside and what was not checked. ``trained``: the trained view's acceptance length, which
    converts a share of positions into acceptance length beside it."""
    colour = "#2e7d32" if not r.found else "#c62828"
    head = f'<p class="e3f-why-headline" style="font-size:1.15em;color:{colour}"><b>{esc(_headline(r, trained))}</b></p>'
    cards = "".join(_card(n, c, trained) for n, c in enumerate(r.causes, 1))
    aside = (
        "<p><b>Found, not ranked as causes</b></p><ul>"
        + "".join(
            f"<li><code>{esc(f.code)}</code>{f' [{esc(f.engine)}]' if f.engine else ''}: {esc(why)}</li>"
            for f, why in r.set_aside
        )
        + "</ul>"
        if r.set_aside
        else ""
    )
    unchecked = (
        '<p><b>Not checked</b></p><ul class="e3f-not-checked">'
        + "".join(f"<li>{esc(x)}</li>" for x in r.not_checked)
        + "</ul>"
        if r.not_checked
        else ""
    )
    return head + cards + aside + unchecked


# -- the segment × length explorer ----------------------------------------------------------------


def _rows_html(rows: Sequence[dict[str, Any]], segment: str, length: str) -> str:
    import pandas as pd  # optional: pandas

    shown = [
        r
        for r in rows
        if (segment == ALL or r["segment"] == segment) and (length == ALL or str(r["length"]) == str(length))
    ]
    if not shown:
        return note_html(f"no measurement for segment {segment!r} and length {length!r}")
    df = pd.DataFrame(
        [
            {
                "segment": r["segment"],
                "new tokens per prompt": r["length"],
                "acceptance length": round(float(r["acceptance_length"]), 3),
                "per position (cumulative)": ", ".join(f"{x:.3f}" for x in r.get("per_position") or []),
                "drafts": r.get("num_drafts"),
            }
            for r in shown
        ]
    )
    return table_html(df)


def acceptance_explorer(
    rows: Sequence[dict[str, Any]],
    *,
    segment: str = ALL,
    length: str | int = ALL,
    interactive: bool | None = None,
) -> Explorer:
    """Acceptance by segment and length (rows of :func:`eagle3_forensics.probe.why.measure`): pick a
    segment and a length; the static view shows the picked ones (the parameters choose)."""
    title = "Acceptance by segment and length"
    if not rows:
        return unavailable(title, "nothing was probed (no target or prompts, or the probe was not possible)")
    # the by-length rows are themselves segment "all": offered once
    segments = [ALL, *dict.fromkeys(str(r["segment"]) for r in rows if str(r["segment"]) != ALL)]
    lengths = [ALL, *dict.fromkeys(str(r["length"]) for r in rows if str(r["length"]) != ALL)]
    seg0 = segment if segment in segments else ALL
    len0 = str(length) if str(length) in lengths else ALL

    def static() -> str:
        choices = (
            f"segments: {', '.join(segments[1:])}; lengths (new tokens per prompt): {', '.join(lengths[1:])}"
        )
        return _rows_html(rows, seg0, len0) + note_html(choices) + note_html(STATIC_NOTE)

    def build() -> Any:
        import ipywidgets as w  # optional: ipywidgets

        seg = w.Dropdown(options=segments, value=seg0, description="segment")
        ln = w.Dropdown(options=lengths, value=len0, description="length")
        return live_html(
            w.HBox([seg, ln]), [seg, ln], lambda: _rows_html(rows, seg.value, ln.value), "e3f-why"
        )

    return Explorer(title, static, build, interactive)
