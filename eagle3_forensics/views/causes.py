"""Render the ranking of causes (notebook 06): HTML cards, plain text, and the segment × length explorer.

The ranking itself is data (:class:`eagle3_forensics.checks.causes.Ranking`); this module only shows
it. The explorer follows the other explorers (:class:`eagle3_forensics.views.widgets.Explorer`): a live
segment and length picker in JupyterLab, a static table in papermill runs and HTML reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eagle3_forensics.checks.causes import Cause, Cost, Ranking
from eagle3_forensics.views.html import SEVERITY_BACKGROUNDS, SEVERITY_COLOURS, compact_json, esc, table_html
from eagle3_forensics.views.widgets import STATIC_NOTE, Explorer, live_html, note_html, unavailable

ALL = "all"


def cost_text(cost: Cost | None) -> str:
    """``−1.912 acceptance length (measured)``, a share of positions, or ``cost not measured``."""
    if cost is None:
        return "cost not measured"
    parts = []
    if cost.acceptance_length_drop is not None:
        parts.append(f"−{cost.acceptance_length_drop:.3f} acceptance length")
    if cost.share_of_positions is not None:
        parts.append(f"{cost.share_of_positions:.1%} of positions")
    return f"{', '.join(parts)} ({cost.basis})"


def _headline(r: Ranking) -> str:
    al = "" if r.acceptance_length is None else f"acceptance length {r.acceptance_length:.3f}: "
    if not r.found:
        return f"{al}no cause found"
    top = r.causes[0]
    return f"{al}{len(r.causes)} cause(s); first: {top.code} ({top.category}), {cost_text(top.cost)}"


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


def _evidence_item(e: dict[str, Any]) -> str:
    engine = f" [{esc(e['engine'])}]" if e.get("engine") else ""
    detail = (
        f' <code style="font-size:0.85em">{esc(compact_json(e["evidence"]))}</code>'
        if e.get("evidence")
        else ""
    )
    return f"<li><code>{esc(e['code'])}</code>{engine}: {esc(e['message'])}{detail}</li>"


def _card(n: int, c: Cause) -> str:
    sev = c.severity.value
    colour = SEVERITY_COLOURS.get(sev, "#555")
    how = (
        f'<div style="color:#555;font-size:0.9em">how: {esc(c.cost.how)}</div>'
        if c.cost and c.cost.how
        else ""
    )
    evidence = "".join(_evidence_item(e) for e in c.evidence)
    fix = f'<div style="margin-top:0.3em"><b>fix</b> {esc(c.fix)}</div>' if c.fix else ""
    return (
        f'<div class="e3f-cause e3f-{esc(sev)}" style="border-left:5px solid {colour};'
        f'background:{SEVERITY_BACKGROUNDS.get(sev, "#f5f5f5")};padding:0.5em 0.8em;margin:0.5em 0">'
        f'<div><b style="font-size:1.1em">#{n}</b> &nbsp;<b style="color:{colour}">{esc(sev.upper())}</b> '
        f"&nbsp;<code>{esc(', '.join(c.codes))}</code> &nbsp;<em>{esc(c.category)}</em> &nbsp;"
        f'<b class="e3f-cost">{esc(cost_text(c.cost))}</b></div>'
        f'<div style="margin-top:0.3em">{esc(c.explanation)}</div>{how}'
        f'<ul style="margin:0.3em 0">{evidence}</ul>{fix}</div>'
    )


def ranking_html(r: Ranking) -> str:
    """The headline, one card per cause (rank, codes, category, cost, evidence, fix), then the findings
    set aside and what was not checked."""
    colour = "#2e7d32" if not r.found else "#c62828"
    head = (
        f'<p class="e3f-why-headline" style="font-size:1.15em;color:{colour}"><b>{esc(_headline(r))}</b></p>'
    )
    cards = "".join(_card(n, c) for n, c in enumerate(r.causes, 1))
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
                "per position (cumulative)": ", ".join(f"{x:.2f}" for x in r.get("per_position") or []),
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
    segments = [ALL, *dict.fromkeys(str(r["segment"]) for r in rows)]
    lengths = [ALL, *dict.fromkeys(str(r["length"]) for r in rows)]
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
