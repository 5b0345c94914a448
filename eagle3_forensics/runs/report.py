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
from urllib.parse import quote

from eagle3_forensics.views.html import VERDICT_COLOURS, esc

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
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def _delta(x: Any, against: str = "previous", nd: int = 3) -> str:
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return ""
    x = round(float(x), nd)
    if x == 0:
        return f' <span class="d same">(±0 vs {esc(against)})</span>'
    cls = "up" if x > 0 else "down"
    return f' <span class="d {cls}">({x:+.{nd}f} vs {esc(against)})</span>'


def _metrics_cell(r: dict[str, Any]) -> str:
    m = r.get("metrics") or {}
    ch = r.get("change") or {}
    parts = []
    if m.get("acceptance_length") is not None:
        delta = _delta(ch.get("acceptance_length"))
        for key, against in (("baseline", "baseline"), ("median", "median")):
            base = (r.get("gate") or {}).get(f"acceptance_length_{key}")
            if isinstance(base, (int, float)) and not isinstance(base, bool):
                delta += _delta(float(m["acceptance_length"]) - base, against)
        parts.append(f"AL <b>{esc(_fmt(m['acceptance_length']))}</b>{delta}")
        pp = m.get("per_position") or []
        if pp:
            parts.append("per pos " + esc(" / ".join(f"{float(x):.2f}" for x in pp)))
        if m.get("lossless") is False:
            parts.append('<b class="bad">not lossless</b>')
    if m.get("coverage") is not None:
        parts.append(f"coverage {esc(_fmt(m['coverage']))}{_delta(ch.get('coverage'))}")
    if m.get("vocab_kind") is not None:
        parts.append(f"d2t <code>{esc(m['vocab_kind'])}</code>")
    return "<br>".join(parts) or "–"


def _gate_cell(r: dict[str, Any]) -> str:
    g = r.get("gate") or {}
    status = g.get("status", "not gated")
    cls = {"pass": "ok", "fail": "bad"}.get(status, "muted")
    out = f'<b class="{cls}">{esc(status)}</b>'
    for p in g.get("problems") or []:
        out += f'<div class="err">{esc(p)}</div>'
    for n in g.get("notes") or []:
        out += f'<div class="note">{esc(n)}</div>'
    return out


def _change_cell(r: dict[str, Any]) -> str:
    ch = r.get("change")
    if ch is None:
        return ""
    if ch.get("new"):
        return '<div class="note">new in this run</div>'
    out = []
    if ch.get("status"):
        out.append(f"status {esc(ch['status'])}")
    if ch.get("errors"):
        out.append(f"errors {ch['errors']:+d}")
    if ch.get("codes_added"):
        out.append("+ " + esc(", ".join(ch["codes_added"])))
    if ch.get("codes_removed"):
        out.append("− " + esc(", ".join(ch["codes_removed"])))
    return f'<div class="note">{"<br>".join(out)}</div>' if out else ""


def index_html(summary: dict[str, Any], trend: dict[str, Any] | None = None) -> str:
    """The overview page of a run: one row per drafter × notebook, then (with ``trend``, see
    :func:`eagle3_forensics.runs.history.trend`) the trend over the last runs; every string escaped.

    What differs between two runs of the same config on the same inputs (timings, workers,
    shards) sits in ``<span class="v">`` so runs can be compared (``runs.shard.comparable_html``).
    """
    e = esc
    runs = summary.get("runs") or []
    gate = summary.get("gate") or {}
    rows = []
    for r in runs:
        verdict = r.get("verdict")
        colour = VERDICT_COLOURS.get(verdict or "", "#555")
        v_html = f'<b style="color:{colour}">{e(verdict)}</b>' if verdict else "–"
        link = f'<a href="{e(quote(r["html"]))}">report</a>' if r.get("html") else "–"
        ok = r.get("status") == "ok"
        status = f'<b class="{"ok" if ok else "bad"}">{e(r.get("status"))}</b>'
        if r.get("error"):
            status += f'<div class="err">{e(r["error"])}</div>'
        c = r.get("counts") or {}
        codes = "<br>".join(f"<code>{e(code)}</code>" for code in r.get("codes") or []) or "–"
        cls = "row-fail" if (r.get("gate") or {}).get("status") == "fail" else ""
        rows.append(
            f'<tr class="{cls}"><td>{e(r.get("drafter"))}</td><td>{e(r.get("notebook"))}</td><td>{status}</td>'
            f"<td>{v_html}</td>"
            f'<td class="n">{e(_fmt(c.get("error")))}</td><td class="n">{e(_fmt(c.get("warning")))}</td>'
            f'<td class="n">{e(_fmt(c.get("info")))}</td><td>{codes}</td><td>{_metrics_cell(r)}{_change_cell(r)}</td>'
            f'<td>{_gate_cell(r)}</td><td class="n"><span class="v">{float(r.get("duration_s") or 0):.1f}</span></td>'
            f"<td>{link}</td></tr>"
        )
    n_ok = sum(r.get("status") == "ok" for r in runs)
    if gate.get("baseline"):
        if gate.get("passed"):
            banner = f'<p class="banner pass">Regression gate <b>passed</b> against <code>{e(gate["baseline"])}</code>.</p>'
        else:
            items = "".join(
                f"<li>{e(p['drafter'])} · {e(p.get('notebook') or '–')}: {e(p['message'])}</li>"
                for p in gate.get("problems") or []
            )
            banner = (
                f'<div class="banner fail"><b>Regression gate FAILED</b> against <code>{e(gate["baseline"])}'
                f"</code>:<ul>{items}</ul></div>"
            )
    else:
        banner = '<p class="banner muted">No baseline given: only notebook failures are gated.</p>'
    notes = gate.get("notes") or []
    notes_html = ""
    if notes:
        items = "".join(
            f"<li>{e(n['drafter'])} · {e(n.get('notebook') or '–')}: {e(n['message'])}</li>" for n in notes
        )
        notes_html = f"<details><summary>{len(notes)} gate note(s)</summary><ul>{items}</ul></details>"
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
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #ccc; padding: 0.35em 0.6em; vertical-align: top; text-align: left; }}
th {{ background: #f3f3f3; position: sticky; top: 0; }}
td.n {{ text-align: right; }}
tr.row-fail td {{ background: #fdecea; }}
.ok {{ color: #2e7d32; }} .bad {{ color: #c62828; }} .muted {{ color: #757575; }}
.err {{ color: #c62828; font-size: 0.85em; max-width: 36em; }}
.note {{ color: #555; font-size: 0.85em; max-width: 36em; }}
.d.up {{ color: #2e7d32; }} .d.down {{ color: #c62828; }} .d.same {{ color: #757575; }}
.banner {{ padding: 0.6em 1em; border-radius: 6px; }}
img.trend {{ max-width: 100%; }}
.banner.pass {{ background: #e8f5e9; }} .banner.fail {{ background: #fdecea; }} .banner.muted {{ background: #f3f3f3; }}
</style></head><body>
<h1>{e(title)}</h1>
<p>{e(summary.get("description") or "")}</p>
<p>{n_ok}/{len(runs)} notebook runs ok · {len(summary.get("drafters") or [])} drafters ×
{len(summary.get("notebooks") or [])} notebooks · config <code>{e(summary.get("config") or "–")}</code> ·
generated <span class="v">{e(generated)}</span> · wall time <span class="v">{e(_fmt(summary.get("wall_s"), 1))}</span> s ·
<span class="v">{e(summary.get("workers") or 1)}</span> worker(s){_shards_note(summary)} ·
git <code>{e((summary.get("git") or "–")[:12])}</code> · <a href="summary.json">summary.json</a>{trend_link}</p>
{banner}
{notes_html}
<table>
<thead><tr><th>drafter</th><th>notebook</th><th>status</th><th>verdict</th><th>errors</th><th>warnings</th><th>info</th>
<th>finding codes</th><th>key metrics (change)</th><th>gate</th><th>seconds</th><th>report</th></tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody></table>
{trend_section}
<p class="note">{e(versions)}. Findings in deliberately broken drafters are results, not failures: the gate fails
on notebook failures, acceptance below baseline − tolerance and error findings the baseline does not expect.</p>
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
