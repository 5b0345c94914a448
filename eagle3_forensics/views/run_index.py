"""The run index's tables as HTML: the drafter rows first (the answer), then every notebook run.

Data comes from :mod:`eagle3_forensics.runs.overview` (what each row says); this module only
renders it, every string escaped. The page is meant to be read at 1,400 px: the run table wraps
finding codes and keeps one narrow column per figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from eagle3_forensics.views.html import VERDICT_COLOURS, esc

#: shown verdicts that are not VERDICT_COLOURS' own (runs.overview.shown_verdict)
_EXTRA_COLOURS = {"loads fine, accepts little": "#ef6c00"}
_NOTEBOOK_SHORT = {
    "00_triage": "00 triage",
    "01_checkpoint_keys": "01 keys",
    "02_vocab_mapping": "02 vocab",
    "03_token_histograms": "03 coverage",
    "04_accept_rate_probe": "04 probe",
    "05_offline_probe": "05 offline",
    "06_why_low_acceptance": "06 why",
}

CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1400px; }
table { border-collapse: collapse; width: 100%; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.5em; vertical-align: top; text-align: left; }
th { background: #f3f3f3; position: sticky; top: 0; }
td.n { text-align: right; white-space: nowrap; }
td.codes { font-size: 0.85em; word-break: break-word; max-width: 18em; }
td.small, .small { font-size: 0.85em; }
tr.row-fail td { background: #fdecea; }
.ok { color: #2e7d32; } .bad { color: #c62828; } .muted { color: #757575; } .warn { color: #ef6c00; }
.err { color: #c62828; font-size: 0.85em; max-width: 36em; }
.note { color: #555; font-size: 0.85em; max-width: 36em; }
.d.up { color: #2e7d32; } .d.down { color: #c62828; } .d.same { color: #757575; }
.banner { padding: 0.6em 1em; border-radius: 6px; }
.banner.pass { background: #e8f5e9; } .banner.fail { background: #fdecea; } .banner.muted { background: #f3f3f3; }
img.trend { max-width: 100%; }
.view { color: #555; font-size: 0.8em; white-space: nowrap; }
.verdicts { white-space: nowrap; font-size: 0.9em; }
.cause b { display: block; }
"""


def _fmt(x: Any, nd: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def verdict_html(verdict: str | None) -> str:
    """A verdict word in its colour; green only for *healthy* (never one beside a low acceptance:
    runs.overview.shown_verdict has renamed that one already)."""
    if not verdict:
        return '<span class="muted">–</span>'
    colour = VERDICT_COLOURS.get(verdict) or _EXTRA_COLOURS.get(verdict, "#555")
    return f'<b style="color:{colour}">{esc(verdict)}</b>'


def acceptance_html(acc: Any, reference: Any = None, comparable: bool = True) -> str:
    """``AL 1.011 · engine view (vllm)``, with the reference drafter's figure of the same notebook."""
    if acc is None:
        return '<span class="muted">not measured</span>'
    out = f'<b>{esc(_fmt(acc.value))}</b> <span class="view">{esc(acc.view)}</span>'
    if reference is not None:
        tail = "" if comparable else " · other prompts"
        out += (
            f'<div class="small">reference {esc(_fmt(reference.value))} '
            f'<span class="view">({esc(reference.view)}{esc(tail)})</span></div>'
        )
    if acc.settings:
        out += f'<div class="view">{esc(acc.notebook[:2])}: {esc(acc.settings)}</div>'
    return out


def _cause_html(row: Any) -> str:
    c = row.cause
    if c is None:
        cls = "ok" if row.cause_note == "no cause found" else "muted"
        return f'<span class="{cls}">{esc(row.cause_note or "–")}</span>'
    sev = "bad" if c.severity == "error" else "warn"
    cost = f'<div class="small">cost: {esc(c.cost)}</div>' if c.cost else ""
    codes = " ".join(f"<code>{esc(x)}</code>" for x in c.codes)
    return (
        f'<div class="cause"><b class="{sev}">{esc(c.category)}</b>{esc(c.explanation)}'
        f'{cost}<div class="small">{codes}</div></div>'
    )


def _links(pairs: Sequence[tuple[str, str]]) -> str:
    return " · ".join(
        f'<a href="{esc(quote(html))}">{esc(_NOTEBOOK_SHORT.get(nb, nb))}</a>' for nb, html in pairs
    )


def drafter_table_html(rows: Sequence[Any], reference: str | None = None) -> str:
    """The drafter rows (runs.overview.DrafterRow): verdict per engine, 06's first cause with its
    cost, acceptance against the reference, gate, pages."""
    body = []
    for r in rows:
        verdicts = "<br>".join(f"{esc(e)}: {verdict_html(v)}" for e, v in r.verdicts.items()) or "–"
        gate_cls = {"pass": "ok", "fail": "bad"}.get(r.gate, "muted")
        body.append(
            f'<tr class="{"row-fail" if r.gate == "fail" else ""}"><td><b>{esc(r.drafter)}</b></td>'
            f'<td class="verdicts">{verdicts}</td><td>{_cause_html(r)}</td>'
            f"<td>{acceptance_html(r.acceptance, r.reference, r.reference_comparable)}</td>"
            f'<td><b class="{gate_cls}">{esc(r.gate)}</b></td><td class="small">{_links(r.links)}</td></tr>'
        )
    ref = f" against <b>{esc(reference)}</b>" if reference else ""
    return (
        f'<h2 id="drafters">Drafters</h2><p class="note">One row per drafter: the verdict of the static '
        f"checks per engine (00), the first cause notebook 06 ranks with its cost, the acceptance length "
        f"of the view served{ref} (each figure names its view), the gate, the drafter's pages.</p>"
        "<table><thead><tr><th>drafter</th><th>verdict per engine</th><th>first cause (06)</th>"
        "<th>acceptance length</th><th>gate</th><th>pages</th></tr></thead><tbody>"
        + "\n".join(body)
        + "</tbody></table>"
    )


def _delta(x: Any, against: str = "previous", nd: int = 3) -> str:
    if not isinstance(x, int | float) or isinstance(x, bool):
        return ""
    x = round(float(x), nd)
    if x == 0:
        return f' <span class="d same">(±0 vs {esc(against)})</span>'
    cls = "up" if x > 0 else "down"
    return f' <span class="d {cls}">({x:+.{nd}f} vs {esc(against)})</span>'


def metrics_html(r: dict[str, Any], acc: Any) -> str:
    """A run's figures: acceptance with its view, per position, coverage, d2t kind; changes."""
    m = r.get("metrics") or {}
    ch = r.get("change") or {}
    parts = []
    if acc is not None:
        delta = _delta(ch.get("acceptance_length"))
        for key, against in (("baseline", "baseline"), ("median", "median")):
            base = (r.get("gate") or {}).get(f"acceptance_length_{key}")
            if isinstance(base, int | float) and not isinstance(base, bool):
                delta += _delta(acc.value - base, against)
        parts.append(f'AL <b>{esc(_fmt(acc.value))}</b> <span class="view">{esc(acc.view)}</span>{delta}')
        pp = m.get("per_position") or []
        if pp:
            parts.append(
                '<span class="small">per pos ' + esc(" / ".join(f"{float(x):.3f}" for x in pp)) + "</span>"
            )
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


def run_table_html(
    runs: Sequence[dict[str, Any]], acceptance: Sequence[Any], verdicts: Sequence[str | None]
) -> str:
    """Every notebook run: ``acceptance`` (runs.overview.acceptance_of) and the shown ``verdicts``
    (runs.overview.shown_verdict) per run, in the order of ``runs``."""
    rows = []
    for r, acc, verdict in zip(runs, acceptance, verdicts, strict=True):
        ok = r.get("status") == "ok"
        status = f'<b class="{"ok" if ok else "bad"}">{esc(r.get("status"))}</b>'
        if r.get("error"):
            status += f'<div class="err">{esc(r["error"])}</div>'
        c = r.get("counts") or {}
        counts = " · ".join(f"{c[k]} {k[0].upper()}" for k in ("error", "warning", "info") if c.get(k)) or "–"
        codes = " ".join(f"<code>{esc(code)}</code>" for code in r.get("codes") or []) or "–"
        link = f'<a href="{esc(quote(r["html"]))}">report</a>' if r.get("html") else "–"
        cls = "row-fail" if (r.get("gate") or {}).get("status") == "fail" else ""
        rows.append(
            f'<tr class="{cls}"><td>{esc(r.get("drafter"))}</td><td>{esc(_NOTEBOOK_SHORT.get(str(r.get("notebook")), r.get("notebook")))}</td>'
            f'<td>{status}<br>{verdict_html(verdict)}</td><td class="n">{esc(counts)}</td>'
            f'<td class="codes">{codes}</td><td>{metrics_html(r, acc)}{_change_cell(r)}</td>'
            f'<td class="small">{_gate_cell(r)}</td><td class="n"><span class="v">{float(r.get("duration_s") or 0):.1f}</span></td>'
            f"<td>{link}</td></tr>"
        )
    return (
        '<h2 id="runs">Every notebook run</h2>'
        "<table><thead><tr><th>drafter</th><th>notebook</th><th>status · verdict</th><th>findings</th>"
        "<th>finding codes</th><th>figures (view)</th><th>gate</th><th>s</th><th>report</th></tr></thead><tbody>"
        + "\n".join(rows)
        + "</tbody></table>"
    )


__all__ = ["CSS", "acceptance_html", "drafter_table_html", "metrics_html", "run_table_html", "verdict_html"]
