"""Notebook display layer: package results as pandas tables and escaped HTML (no computation).

Every string that comes from a checkpoint (tensor names, shard names, config values, messages
and evidence that quote them) is untrusted: nbconvert copies ``text/html`` outputs into reports
unsanitised, so each one is passed through :func:`html.escape` here, at the source. Tables go
through ``DataFrame.to_html(escape=True)`` (:func:`table_html` / :func:`show_table`). Control and
bidirectional-override characters are additionally shown as ``\\uXXXX`` so a crafted name cannot
hide or reorder text.

pandas and IPython are imported inside the functions, so ``import eagle3_forensics`` stays light.
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from eagle3_forensics.engines import split_spec
from eagle3_forensics.errors import BadArgumentsError
from eagle3_forensics.views.format import MISSING, tidy
from eagle3_forensics.views.text import code_summary, verdict_word
from eagle3_forensics.views.text import human_bytes as _human_bytes

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd
    from IPython.display import HTML

    from eagle3_forensics.checks.diagnose import Diagnosis, Inspection
    from eagle3_forensics.findings import Finding

VERDICT_COLOURS = {
    "healthy": "#2e7d32",
    "warnings": "#ef6c00",
    "broken": "#c62828",
    "unusable": "#6a1b1a",
    "not applicable": "#757575",  # the engine cannot read the config: a conversion is needed
}
# the verdict line's groups (Diagnosis.headline) -> colour; only a group of healthy engines is green
_HEADLINE_COLOURS = {
    "HEALTHY": VERDICT_COLOURS["healthy"],
    "WARNINGS": VERDICT_COLOURS["warnings"],
    "BROKEN": VERDICT_COLOURS["broken"],
    "UNUSABLE": VERDICT_COLOURS["unusable"],
    "CONVERSION": VERDICT_COLOURS["not applicable"],
    "NOT": VERDICT_COLOURS["not applicable"],
}
SEVERITY_COLOURS = {"error": "#c62828", "warning": "#ef6c00", "info": "#1565c0"}
SEVERITY_BACKGROUNDS = {"error": "#fdecea", "warning": "#fff4e5", "info": "#e8f1fb"}
EVIDENCE_LIMIT = 220
_TABLE_CLASSES = "e3f-table"


# -- strings -----------------------------------------------------------------------------------


def visible(text: object) -> str:
    """``str(text)`` with control, format (bidi overrides, zero-width) and separator chars as ``\\uXXXX``."""
    s = "" if text is None else str(text)
    if s.isprintable():
        return s
    return "".join(ch if ch.isprintable() or ch == " " else _u_escape(ch) for ch in s)


def _u_escape(ch: str) -> str:
    code = ord(ch)
    if unicodedata.category(ch) == "Cc" and ch in "\t\n\r":
        return {"\t": "\\t", "\n": "\\n", "\r": "\\r"}[ch]
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def esc(text: object) -> str:
    """Escape one untrusted value for interpolation into HTML (text or attribute)."""
    return html.escape(visible(text), quote=True)


def compact_json(value: Any, limit: int | None = EVIDENCE_LIMIT) -> str:
    """One-line JSON, truncated to ``limit`` characters. Non-ASCII text stays as written (``–``, not
    ``\\u2013``); every caller renders it through :func:`esc` / :func:`visible`, which spell out control and
    bidi-override characters, so no hidden text survives."""
    text = json.dumps(value, separators=(", ", ": "), default=str, ensure_ascii=False)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def finding_codes(diagnosis: Diagnosis) -> list[str]:
    """Distinct finding codes, in report order (errors first)."""
    return list(dict.fromkeys(f.code for f in diagnosis.findings))


def engines_of(diagnosis: Diagnosis, engine: str | list[str] | None = "all") -> list[str]:
    """The engines a notebook parameter names: ``"all"``/``None`` -> every simulated engine; a
    release spec (``"sglang==0.5.11"``) names its engine."""
    if engine is None or engine == "all" or (isinstance(engine, list) and "all" in engine):
        return list(diagnosis.loads)
    specs = engine if isinstance(engine, list) else [s for s in engine.split(",") if s.strip()]
    names = [split_spec(s)[0] for s in specs]
    missing = [n for n in names if n not in diagnosis.loads]
    if missing:
        known = ", ".join(diagnosis.loads) or "none (the checkpoint is unusable)"
        raise BadArgumentsError(f"no load simulation for engine {missing[0]!r}; simulated: {known}")
    return list(dict.fromkeys(names))


# -- tables ------------------------------------------------------------------------------------


def tensor_table(inspection: Inspection) -> pd.DataFrame:
    """One row per tensor, from the header only: name, shape, dtype, elements, bytes, shard."""
    import pandas as pd  # optional: pandas

    rows = [
        {
            "name": visible(t.name),
            "shape": str(list(t.shape)),
            "dtype": visible(t.dtype),
            "elements": t.numel,
            "bytes": t.nbytes,
            "size": _human_bytes(t.nbytes),
            "shard": visible(t.shard),
        }
        for t in inspection.tensors
    ]
    return pd.DataFrame(rows, columns=["name", "shape", "dtype", "elements", "bytes", "size", "shard"])


def load_table(diagnosis: Diagnosis) -> pd.DataFrame:
    """One row per simulated engine: what its loader does with the checkpoint's tensors."""
    import pandas as pd  # optional: pandas

    rows = []
    for name, load in diagnosis.loads.items():
        c = load.counts()
        rows.append(
            {
                "engine": name,
                "config readable": bool(load.config_readable),
                "used": c["loaded"] + c["renamed"] + c["fused"],
                "renamed": c["renamed"],
                "fused": c["fused"],
                "overwritten": c["overwritten"],
                "dropped": c["dropped"] + c["warned"],
                "rejected": c["rejected"],
                "consumed": c["consumed"],
                "skipped": c["skipped"],
                "unfilled": c["unfilled"],
                "verdict": verdict_word(diagnosis, name),
                "config problem": visible(load.config_problem or ""),
            }
        )
    columns = [
        "engine",
        "config readable",
        "used",
        "renamed",
        "fused",
        "overwritten",
        "dropped",
        "rejected",
        "consumed",
        "skipped",
        "unfilled",
        "verdict",
        "config problem",
    ]
    return pd.DataFrame(rows, columns=columns)


def key_fate_table(diagnosis: Diagnosis, engine: str) -> pd.DataFrame:
    """Every checkpoint key and what ``engine`` does with it; then the parameters nothing fills."""
    import pandas as pd  # optional: pandas

    if engine in (None, "all"):
        raise BadArgumentsError(
            "key_fate_table shows one engine; use key_fates_html(diagnosis, 'all') for every engine"
        )
    name = engines_of(diagnosis, engine)[0]
    load = diagnosis.loads[name]
    rows = [
        {
            "key": visible(f.key),
            "action": f.action,
            "engine parameter": visible(f.param or ""),
            "note": visible(f.note),
        }
        for f in load.fates
    ]
    rows += [
        {
            "key": "",
            "action": "unfilled",
            "engine parameter": visible(p),
            "note": "no checkpoint tensor fills this parameter; it stays at initialisation",
        }
        for p in load.unfilled
    ]
    return pd.DataFrame(rows, columns=["key", "action", "engine parameter", "note"])


def findings_table(diagnosis: Diagnosis) -> pd.DataFrame:
    """One row per finding: severity, code, engine, message, evidence (compact JSON), fix."""
    import pandas as pd  # optional: pandas

    rows = [
        {
            "severity": f.severity.value,
            "code": f.code,
            "engine": f.engine or "",
            "message": visible(f.message),
            "evidence": compact_json(f.evidence) if f.evidence else "",
            "fix": visible(f.fix or ""),
        }
        for f in diagnosis.findings
    ]
    return pd.DataFrame(rows, columns=["severity", "code", "engine", "message", "evidence", "fix"])


#: a table taller or wider than this box scrolls inside it, header row kept in view (CSS only: no script)
TABLE_BOX = "max-height:36em;max-width:100%;overflow:auto;margin:0.3em 0"
_STICKY_TH = "position:sticky;top:0;z-index:1;background:var(--jp-layout-color0, #fff)"


def table_html(df: pd.DataFrame) -> str:
    """``df`` as an HTML table a reader can read: every cell and header escaped, values formatted by
    :func:`eagle3_forensics.views.format.tidy` (``–`` for missing, no meaningless index), all rows
    shown, inside a bounded box that scrolls both ways with the header row sticky. Columns of
    numbers are right-aligned and every other column left-aligned (JupyterLab's own stylesheet
    right-aligns every cell); a 64-hex-digit fingerprint (``sha256:`` or bare) shows its first 12
    digits, the full value on hover (``title``)."""
    t = tidy(df)
    right = [_numeric(t.iloc[:, j].tolist()) for j in range(t.shape[1])]
    head = "".join(
        f'<th style="{_STICKY_TH};{_PAD};text-align:{"right" if r else "left"}{_header_wrap(c, t[c])}">'
        f"{html.escape(str(c))}</th>"
        for c, r in zip(t.columns, right, strict=True)
    )
    body = "".join(
        "<tr>" + "".join(_td(v, r) for v, r in zip(row, right, strict=True)) + "</tr>"
        for row in t.itertuples(index=False, name=None)
    )
    table = (
        f'<table border="0" class="dataframe {_TABLE_CLASSES}">'
        f'<thead><tr style="vertical-align:bottom">{head}</tr></thead><tbody>{body}</tbody></table>'
    )
    return f'<div class="e3f-table-box" style="{TABLE_BOX}">{table}</div>'


#: a cell a reader reads as a number (the spellings of views.format): 12, -3, 0.873, 87.3%, 0.66×,
#: 297.6 tok/s, 1,024, 1.5e-05, 12.0 MiB
_NUMBER = re.compile(r"^[-+−]?(\d[\d,]*)?(\.\d+)?(e[-+]?\d+)?( ?(%|×|tok/s|s|ms|B|KiB|MiB|GiB))?$")
_FINGERPRINT = re.compile(r"^(sha256:)?[0-9a-f]{64}$")
FINGERPRINT_SHOWN = 12  # hex digits a fingerprint cell shows; the rest is in its title


def _numeric(cells: list[Any]) -> bool:
    """A column of numbers: every present cell reads as one (missing ``–`` cells do not count)."""
    present = [str(c) for c in cells if str(c) and not str(c).startswith(MISSING)]
    return bool(present) and all(_NUMBER.match(c) and any(ch.isdigit() for ch in c) for c in present)


def _longest_word(text: object) -> int:
    return max((len(w) for w in str(text).split()), default=0)


def _header_wrap(name: object, column: Any) -> str:
    """A header may break inside a word only when that long word is much wider than anything in its
    column (``overwritten`` over counts): else the cells set the column's width and the header stays
    whole (``value`` over ``3.10``)."""
    cells = max((_longest_word(v) for v in column), default=0)
    return ";overflow-wrap:anywhere" if _longest_word(name) > max(cells + 3, 8) else ""


def _td(value: Any, right: bool) -> str:
    text = str(value)
    # long text may break inside a word when the notebook is too narrow for its column; a number,
    # a header or a short cell never does (their words set the columns' least widths)
    align = f"{_PAD};text-align:{'right' if right else 'left'}"
    if not right and len(text) > _BREAK_AFTER:
        align += ";overflow-wrap:anywhere"
    if _FINGERPRINT.match(text):
        short = text[: text.index(":") + 1 + FINGERPRINT_SHOWN] if ":" in text else text[:FINGERPRINT_SHOWN]
        return f'<td style="{align}" title="{text}"><code>{short}…</code></td>'
    shown = html.escape(text)
    return f'<td style="{align}">{shown}</td>'


_BREAK_AFTER = 20  # characters: shorter cells never break
#: cell padding: JupyterLab's 0.5em all round costs a 13-column table 170 px of a 1,000 px notebook
_PAD = "padding:0.3em 0.35em"


@lru_cache(maxsize=1)
def _shown_frame() -> type:
    import pandas as pd  # optional: pandas

    class ShownFrame(pd.DataFrame):
        """A DataFrame that a notebook renders as :func:`table_html` does (``–`` for missing, no
        meaningless index, a bounded scrolling box), so a cell that just returns it reads well."""

        @property
        def _constructor(self) -> type:
            return ShownFrame

        def _repr_html_(self) -> str:
            return "<p><em>(no rows)</em></p>" if self.empty else table_html(self)

        def __repr__(self) -> str:
            return "(no rows)" if self.empty else str(tidy(self).to_string(index=False))

    return ShownFrame


def shown(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (same data, same DataFrame API) displayed in a notebook like :func:`show_table`."""
    out: pd.DataFrame = _shown_frame()(df)
    out.attrs.update(df.attrs)
    return out


def show_table(df: pd.DataFrame) -> HTML:
    """Display object for a notebook cell: the escaped table of :func:`table_html`."""
    from IPython.display import HTML  # optional: IPython

    if df.empty:
        return HTML("<p><em>(no rows)</em></p>")
    return HTML(table_html(df))


# -- HTML fragments ----------------------------------------------------------------------------


def badge(text: str, colour: str, big: bool = False) -> str:
    """A coloured pill with ``text`` (escaped): verdicts and engine states."""
    return _badge(text, colour, big)


def _badge(text: str, colour: str, big: bool = False) -> str:
    size = "1.25em" if big else "0.9em"
    return (
        f'<span style="display:inline-block;padding:0.15em 0.6em;border-radius:0.8em;'
        f'background:{colour};color:#fff;font-weight:600;font-size:{size}">{esc(text)}</span>'
    )


def verdict_html(diagnosis: Diagnosis) -> str:
    """The verdict line (one badge per group of engines: healthy on …, broken on …, conversion needed
    for …), counts per finding code with its engines, each engine's verdict and why, what was examined."""
    headline = " ".join(
        _badge(part, _HEADLINE_COLOURS.get(part.split(" ", 1)[0], "#555"), big=True)
        for part in diagnosis.headline().split(" · ")
    )
    codes = esc(code_summary(diagnosis))
    engine_badges = " ".join(
        f'<span style="margin-right:0.8em">{esc(e)} '
        f"{_badge(verdict_word(diagnosis, e), VERDICT_COLOURS.get(diagnosis.verdict(e), '#555'))}</span>"
        for e in diagnosis.engines
    )
    target = (
        str(diagnosis.target.path) if diagnosis.target is not None else "none (target cross-checks skipped)"
    )
    return (
        '<div class="e3f-verdict" style="border:1px solid #ccc;border-radius:6px;padding:0.8em 1em;margin:0.4em 0">'
        f'<div class="e3f-headline">verdict {headline}</div>'
        f'<div style="margin-top:0.4em">findings: {codes}</div>'
        f'<div style="margin-top:0.5em">per engine: {engine_badges or "<em>none</em>"}</div>'
        '<table style="margin-top:0.5em;border:0">'
        f"<tr><td><b>checkpoint</b></td><td><code>{esc(diagnosis.checkpoint)}</code></td></tr>"
        f"<tr><td><b>target</b></td><td><code>{esc(target)}</code></td></tr>"
        f"<tr><td><b>format</b></td><td>{esc(diagnosis.format)}</td></tr>"
        f"<tr><td><b>engines</b></td><td>{esc(', '.join(diagnosis.engines))}</td></tr>"
        "</table></div>"
    )


def format_html(inspection: Inspection) -> str:
    """The detected checkpoint format (trainer family, config style, key layout) and size."""
    fmt = inspection.format
    rows = [
        ("format", fmt.label),
        ("trainer family", fmt.family),
        ("config style", fmt.config_style),
        ("key layout", fmt.key_layout),
        ("decoder layers", str(fmt.decoder_layers)),
        (
            "weights",
            f"{inspection.weight_format}, {len(inspection.tensors)} tensors, "
            f"{_human_bytes(inspection.total_bytes)}",
        ),
    ]
    body = "".join(
        f'<tr><td style="text-align:left"><b>{esc(k)}</b></td><td style="text-align:left">{esc(v)}</td></tr>'
        for k, v in rows
    )
    return f'<table class="e3f-format" style="border:0">{body}</table>'


def finding_card_html(f: Finding) -> str:
    """One finding as a severity-coloured card: code, engine, message, evidence, fix."""
    sev = f.severity.value
    colour = SEVERITY_COLOURS.get(sev, "#555")
    engine = f' &nbsp;<span style="color:#555">[{esc(f.engine)}]</span>' if f.engine else ""
    parts = [
        f'<div class="e3f-finding e3f-{esc(sev)}" style="border-left:5px solid {colour};'
        f'background:{SEVERITY_BACKGROUNDS.get(sev, "#f5f5f5")};padding:0.5em 0.8em;margin:0.5em 0;border-radius:3px">',
        f'<div><b style="color:{colour}">{esc(sev.upper())}</b> &nbsp;<code>{esc(f.code)}</code>{engine}</div>',
        f'<div style="margin-top:0.3em">{esc(f.message)}</div>',
    ]
    if f.evidence:
        short = compact_json(f.evidence)
        parts.append(f'<div style="margin-top:0.3em"><b>evidence</b> <code>{esc(short)}</code></div>')
        full = compact_json(f.evidence, limit=None)
        if full != short:
            pretty = json.dumps(f.evidence, indent=1, default=str, ensure_ascii=False)
            parts.append(f"<details><summary>full evidence</summary><pre>{esc(pretty)}</pre></details>")
    parts.append(fix_html(f.fix))
    parts.append("</div>")
    return "".join(parts)


AUTOMATED = " Automated: "  # how diagnose appends the repair command to a fix (checks/diagnose.py)


def split_fix(fix: str | None) -> tuple[str, str | None]:
    """A fix line as (the manual fix, the command that does it or ``None``)."""
    text = fix or ""
    if text.startswith(AUTOMATED.lstrip()):
        return "", text[len(AUTOMATED.lstrip()) :]
    manual, sep, command = text.partition(AUTOMATED)
    return manual, (command or None) if sep else None


def command_html(command: str, engines: str = "") -> str:
    """One command to run, copyable (``user-select:all``), with the engines it is for."""
    where = f' <span style="color:#555">({esc(engines)})</span>' if engines else ""
    return (
        f'<div class="e3f-command" style="margin-top:0.3em"><b>run</b> '
        f'<code style="user-select:all">{esc(command)}</code>{where}</div>'
    )


def fix_html(fix: str | None) -> str:
    """A finding's fix: the manual fix, then the command that does it when one exists."""
    manual, command = split_fix(fix)
    out = f'<div style="margin-top:0.3em"><b>fix</b> {esc(manual)}</div>' if manual else ""
    return out + (command_html(command) if command else "")


def findings_html(diagnosis: Diagnosis) -> str:
    """Every finding as a card (errors first), or a line saying there are none."""
    if not diagnosis.findings:
        return '<p class="e3f-no-findings" style="color:#2e7d32"><b>No findings.</b></p>'
    return "".join(finding_card_html(f) for f in diagnosis.findings)


def key_fates_html(diagnosis: Diagnosis, engine: str | None = "all") -> str:
    """A heading and an escaped key-fate table per engine (``"all"`` -> every simulated engine)."""
    names = engines_of(diagnosis, engine)
    if not names:
        return "<p><em>No load simulation: the checkpoint could not be read.</em></p>"
    out = []
    for name in names:
        load = diagnosis.loads[name]
        verdict = diagnosis.verdict(name)
        out.append(
            f"<h3>{esc(name)} {_badge(verdict_word(diagnosis, name), VERDICT_COLOURS.get(verdict, '#555'))}</h3>"
        )
        if not load.config_readable:
            out.append(f"<p><b>config not readable:</b> {esc(load.config_problem or 'unknown reason')}</p>")
        out.append(f'<p style="color:#555">engine rules revision: {esc(load.revision)}</p>')
        out.append(table_html(key_fate_table(diagnosis, name)))
    return "".join(out)
