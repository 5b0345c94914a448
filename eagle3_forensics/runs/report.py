"""HTML reports: executed notebooks -> self-contained HTML, the run index, ``eagle3-forensics report``.

:func:`render_html` turns one executed notebook into one HTML file that works offline as a single
attachment: code cells hidden (unless asked for), figures as inline PNG, no scripts at all (the
CDN scripts of the lab template are removed, widget views and widget state and JavaScript
outputs are dropped — widgets in the notebooks render a static fallback, see
:mod:`eagle3_forensics.views.widgets`), and a Content-Security-Policy that forbids scripts and remote
fetches as defence in depth behind the escaping in :mod:`eagle3_forensics.views.html`. A header with
the drafter, notebook, status, duration and parameters (all escaped) replaces the invisible
injected-parameters cell.

:func:`index_html` renders a run summary (see :mod:`eagle3_forensics.runs.runner`) as the overview
page. :func:`~eagle3_forensics.runs.runner.build_demo_report` is the older ``eagle3-forensics report`` command: notebook 01 over
every demo drafter, through the same runner.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from eagle3_forensics.runs.overview import (
    LOW_ACCEPTANCE_LENGTH,
    REFERENCE_DRAFTER,
    acceptance_of,
    drafter_rows,
    shown_verdict,
)
from eagle3_forensics.views.html import esc
from eagle3_forensics.views.run_index import CSS, drafter_table_html, run_table_html

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"

# Defence in depth behind the escaping in eagle3_forensics.views.html: no script, no remote fetch.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:"
_CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
# The lab template minus the scripts it loads from CDNs (require.js, MathJax, Mermaid, the widget
# manager), plus a header with what ran.
_TEMPLATE_NAME = "e3f_report.html.j2"
_TEMPLATE = (
    "{%- extends 'lab/index.html.j2' -%}\n"
    "{%- block html_head_js_requirejs -%}" + _CSP_META + "{%- endblock html_head_js_requirejs -%}\n"
    "{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}\n"
    "{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}\n"
    "{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}\n"
    "{%- block body_header -%}{{ super() }}{{ resources.e3f_header or '' }}{%- endblock body_header -%}\n"
)
_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_SCRIPT_MIMES = ("application/javascript", "text/javascript", "application/vnd.jupyter.widget-state+json")


def _strip_interactive(nb: Any) -> None:
    """Drop widget state, widget views and JavaScript outputs (the report is static and script-free)."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            data = out.get("data")
            if isinstance(data, dict):
                is_widget = _WIDGET_VIEW in data
                for mime in (_WIDGET_VIEW, *_SCRIPT_MIMES):
                    data.pop(mime, None)
                if is_widget and set(data) <= {"text/plain"}:
                    continue  # a bare widget repr ("VBox(children=...)") is an empty box in a report
                if not data:
                    continue
            kept.append(out)
        cell["outputs"] = kept


def render_html(
    executed: Path, destination: Path, title: str, header_html: str | None = None, show_code: bool = False
) -> None:
    """Render an executed notebook to one self-contained HTML file (code cells hidden by default).

    ``header_html`` must already be escaped (see :func:`run_header_html`).
    """
    import jinja2  # optional: jinja2 (the notebooks extra)
    import nbformat  # optional: nbformat (the notebooks extra)
    from nbconvert import HTMLExporter  # optional: nbconvert (the notebooks extra)

    exporter = HTMLExporter(
        extra_loaders=[jinja2.DictLoader({_TEMPLATE_NAME: _TEMPLATE})], template_file=_TEMPLATE_NAME
    )
    exporter.exclude_input = not show_code
    exporter.exclude_input_prompt = not show_code
    exporter.exclude_output_prompt = True
    exporter.embed_images = True
    nb = nbformat.read(str(executed), as_version=4)
    _strip_interactive(nb)
    # the lab template escapes the title itself (escape_html_keep_quotes): pass it raw
    body, _ = exporter.from_notebook_node(
        nb, resources={"metadata": {"name": title}, "e3f_header": header_html or ""}
    )
    destination.write_text(body, encoding="utf-8")


def _param_value(v: Any) -> str:
    return repr(v) if not isinstance(v, str) else v


def run_header_html(res: dict[str, Any], run_name: str = "") -> str:
    """The escaped header of one report page: what ran, with which parameters, and how it went."""
    ok = res.get("status") == "ok"
    colour = "#2e7d32" if ok else "#c62828"
    rows = "".join(
        f"<tr><td><code>{esc(k)}</code></td><td><code>{esc(_param_value(v))}</code></td></tr>"
        for k, v in (res.get("parameters") or {}).items()
    )
    err = (
        f'<div style="color:#c62828;margin-top:0.4em"><b>error</b> {esc(res["error"])}</div>'
        if res.get("error")
        else ""
    )
    return (
        '<div class="e3f-run-header" style="font-family:system-ui,sans-serif;border:1px solid #ccc;'
        'border-radius:6px;padding:0.6em 1em;margin:1em 2em">'
        f'<div><a href="index.html">← index</a>{" · " + esc(run_name) if run_name else ""}</div>'
        f'<div style="margin-top:0.3em"><b>{esc(res.get("drafter"))}</b> · {esc(res.get("notebook"))} · '
        f'<b style="color:{colour}">{esc(res.get("status"))}</b> · '
        f'<span class="v">{float(res.get("duration_s") or 0):.1f}</span> s</div>'
        f"{err}<details><summary>parameters</summary><table>{rows}</table></details></div>"
    )


# -- the index page ------------------------------------------------------------------------------


def _fmt(x: Any, nd: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def _banner(gate: dict[str, Any]) -> str:
    e = esc
    if not gate.get("baseline"):
        return '<p class="banner muted">No baseline given: only notebook failures are gated.</p>'
    if gate.get("passed"):
        return f'<p class="banner pass">Regression gate <b>passed</b> against <code>{e(gate["baseline"])}</code>.</p>'
    items = "".join(
        f"<li>{e(p['drafter'])} · {e(p.get('notebook') or '–')}: {e(p['message'])}</li>"
        for p in gate.get("problems") or []
    )
    return (
        f'<div class="banner fail"><b>Regression gate FAILED</b> against <code>{e(gate["baseline"])}'
        f"</code>:<ul>{items}</ul></div>"
    )


def _notes(gate: dict[str, Any]) -> str:
    """The gate's notes (runs.gate keeps only those that tell something: a better figure, a
    finding none of a drafter's notebooks reports, a drafter without a baseline entry)."""
    notes = gate.get("notes") or []
    if not notes:
        return ""
    items = "".join(
        f"<li>{esc(n['drafter'])} · {esc(n.get('notebook') or 'all notebooks')}: {esc(n['message'])}</li>"
        for n in notes
    )
    return f"<details><summary>{len(notes)} gate note(s)</summary><ul>{items}</ul></details>"


def index_html(
    summary: dict[str, Any], trend: dict[str, Any] | None = None, out: str | Path | None = None
) -> str:
    """The overview page of a run: one row per drafter (:func:`~eagle3_forensics.runs.overview.drafter_rows`;
    ``out``, the run's directory, holds the records it reads: 06's causes, 00's verdicts per engine),
    then one row per drafter × notebook, then (with ``trend``, see
    :func:`eagle3_forensics.runs.history.trend`) the trend over the last runs; every string escaped.

    What differs between two runs of the same config on the same inputs (timings, workers,
    shards) sits in ``<span class="v">`` so runs can be compared (``runs.shard.comparable_html``).
    """
    e = esc
    runs = summary.get("runs") or []
    gate = summary.get("gate") or {}
    rows = drafter_rows(summary, out)
    accs = [acceptance_of(r) for r in runs]
    verdicts = [
        shown_verdict(r.get("verdict"), None if a is None else a.value)
        for r, a in zip(runs, accs, strict=True)
    ]
    reference = REFERENCE_DRAFTER if REFERENCE_DRAFTER in {r.drafter for r in rows} else None
    n_ok = sum(r.get("status") == "ok" for r in runs)
    name = summary.get("name") or "run"
    title = f"eagle3-forensics · {name}"
    generated = summary.get("generated") or time.strftime("%Y-%m-%dT%H:%M:%S%z")
    versions = ", ".join(f"{k} {v}" for k, v in (summary.get("versions") or {}).items() if v)
    trend_section = trend_html(trend) if trend is not None else ""
    trend_link = ' · <a href="#trend">trend</a>' if trend is not None else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
{_CSP_META}
<title>{e(title)}</title>
<style>{CSS}</style></head><body>
<h1>{e(title)}</h1>
<p>{e(summary.get("description") or "")}</p>
{_banner(gate)}
{drafter_table_html(rows, reference)}
<p class="note">{n_ok}/{len(runs)} notebook runs ok · {len(summary.get("drafters") or [])} drafters ×
{len(summary.get("notebooks") or [])} notebooks · config <code>{e(summary.get("config") or "–")}</code> ·
generated <span class="v">{e(generated)}</span> · wall time <span class="v">{e(_fmt(summary.get("wall_s"), 1))}</span> s ·
<span class="v">{e(summary.get("workers") or 1)}</span> worker(s){_shards_note(summary)} ·
git <code>{e((summary.get("git") or "–")[:12])}</code> · <a href="summary.json">summary.json</a> ·
<a href="#runs">every run</a>{trend_link}</p>
{_notes(gate)}
{run_table_html(runs, accs, verdicts)}
{trend_section}
<p class="note">{e(versions)}. Findings in deliberately broken drafters are results, not failures: the gate fails
on notebook failures, acceptance below baseline − tolerance and error findings the baseline does not expect.
Acceptance lengths name their view: the <i>engine view</i> loads the drafter as that engine does, the
<i>trained view</i> as its writer meant it, <i>offline</i> scores it on its training dumps. A verdict
beside an acceptance length below {LOW_ACCEPTANCE_LENGTH} reads <i>loads fine, accepts little</i>, never healthy.</p>
</body></html>
"""


def _shards_note(summary: dict[str, Any]) -> str:
    """Where a merged run ran; an empty volatile span for a single run, so both compare equal."""
    shards = summary.get("shards")
    if not shards:
        return '<span class="v"></span>'
    hosts = sorted({str(x.get("host")) for x in shards if x.get("host")})
    where = f" on {len(hosts)} host{'s' if len(hosts) != 1 else ''}" if hosts else ""
    return f'<span class="v"> · merged from {len(shards)} shard{"s" if len(shards) != 1 else ""}{esc(where)}</span>'


# -- the trend section -----------------------------------------------------------------------------


def _figure_img(fig: Any, alt: str) -> str:
    from eagle3_forensics.views.widgets import figure_html  # heavy: numpy, torch

    return figure_html(fig, alt).replace("<img ", '<img class="trend" ', 1)


def trend_html(trend: dict[str, Any]) -> str:
    """The index's trend section: acceptance length and per-position acceptance per drafter over
    the last runs (inline PNGs, the numbers in a table), the findings that appeared or went away
    and the run in which they did, and the history entries that were skipped."""
    from eagle3_forensics.views.trends import (  # optional: matplotlib (the notebooks extra)
        plot_acceptance_trend,
        plot_per_position_trend,
    )

    e = esc
    entries = trend.get("entries") or []
    current = trend.get("current")
    label = {x["id"]: x.get("label") or x["id"] for x in entries}
    parts = [
        f'<h2 id="trend">Trend: the last {len(entries)} run{"s" if len(entries) != 1 else ""}</h2>',
        f'<p class="note">history <code>{e(trend.get("directory"))}</code>: {e(trend.get("total_entries"))} '
        f"usable entr{'y' if trend.get('total_entries') == 1 else 'ies'}, this run included; the trend shows "
        f"at most the last {e(trend.get('last'))} (<code>--trend-runs</code>).</p>",
    ]
    figs = [
        (plot_acceptance_trend(trend), "acceptance length per drafter over the last runs"),
        (plot_per_position_trend(trend), "per-position acceptance per drafter over the last runs"),
    ]
    if figs[0][0] is None:
        parts.append("<p>No run in the history measured acceptance (no probe notebook ran).</p>")
    for fig, alt in figs:
        if fig is not None:
            parts.append(f"<div>{_figure_img(fig, alt)}</div>")
    measured = [s for s in trend.get("series") or [] if s.get("measured")]
    if measured:
        head = "".join(
            f"<th>{e(label[x['id']])}{' (this run)' if x['id'] == current else ''}</th>" for x in entries
        )
        rows = []
        for s in measured:
            by_entry = {p["entry"]: p for p in s["points"]}
            cells = []
            for x in entries:
                p = by_entry.get(x["id"])
                if p is None:
                    cells.append('<td class="muted">·</td>')
                elif p["acceptance_length"] is None:
                    cells.append(f'<td class="muted">{e(p["status"])}</td>')
                else:
                    pp = " / ".join(f"{v:.2f}" for v in p["per_position"] or [])
                    cells.append(
                        f'<td class="n">{p["acceptance_length"]:.3f}<div class="note">{e(pp)}</div></td>'
                    )
            rows.append(f"<tr><td>{e(s['drafter'])}</td><td>{e(s['notebook'])}</td>{''.join(cells)}</tr>")
        parts.append(
            "<details><summary>acceptance length (and per position) per run</summary>"
            f"<table><thead><tr><th>drafter</th><th>notebook</th>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></details>"
        )
    changes = trend.get("findings_changes") or []
    parts.append("<h3>Findings that appeared or went away</h3>")
    if changes:
        rows = [
            f"<tr><td>{e(label.get(c['entry'], c['entry']))}{' (this run)' if c['entry'] == current else ''}</td>"
            f"<td>{e(c['drafter'])}</td><td><code>{e(c['code'])}</code></td>"
            f'<td class="{"bad" if c["change"] == "appeared" else "ok"}">{e(c["change"])}</td>'
            f"<td>{e(', '.join(c['notebooks']))}</td></tr>"
            for c in changes
        ]
        parts.append(
            "<table><thead><tr><th>run</th><th>drafter</th><th>finding</th><th>change</th><th>seen by</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    else:
        parts.append(f"<p>No finding appeared or went away in these {len(entries)} runs.</p>")
    warnings = trend.get("warnings") or []
    if warnings:
        items = "".join(f"<li><code>{e(w['file'])}</code>: {e(w['message'])}</li>" for w in warnings)
        parts.append(
            f'<details class="err"><summary>{len(warnings)} history entr{"y" if len(warnings) == 1 else "ies"} '
            f"skipped</summary><ul>{items}</ul></details>"
        )
    return '<section class="trend">' + "\n".join(parts) + "</section>"


__all__ = ["CSP", "index_html", "render_html", "run_header_html", "trend_html"]
