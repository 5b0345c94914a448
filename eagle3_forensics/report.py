"""``eagle3-forensics report``: run the notebooks over every demo drafter and write HTML reports.

For each drafter directory under ``<demo_dir>/drafters/`` and each report notebook, the runner
executes the notebook with papermill (kernel ``python3``, working directory ``notebooks/``,
the drafter and target as absolute paths), reads back the JSON sidecar the notebook writes via
:func:`eagle3_forensics.record.record`, renders the executed notebook to one self-contained HTML
file with the code hidden (failed runs included, so the papermill error banner is visible),
and writes ``index.html`` and ``summary.json`` over all runs.

Findings in the deliberately broken demo drafters are results, not failures: the exit code is
0 when every notebook ran and 1 when any notebook failed to execute.
"""

from __future__ import annotations

import html
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .errors import UnusableInputError
from .record import ENV_VAR, read_records

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
REPORT_NOTEBOOKS = ("01_checkpoint_keys",)
KERNEL_NAME = "python3"

# Defence in depth behind the escaping in eagle3_forensics.display: no script, no remote fetch.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:"
_CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
# The lab template minus the scripts it loads from CDNs (require.js, MathJax, Mermaid): the
# reports hold only escaped HTML tables and text, so each file works offline as one attachment.
_TEMPLATE_NAME = "e3f_report.html.j2"
_TEMPLATE = (
    "{%- extends 'lab/index.html.j2' -%}\n"
    "{%- block html_head_js_requirejs -%}" + _CSP_META + "{%- endblock html_head_js_requirejs -%}\n"
    "{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}\n"
    "{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}\n"
)


@dataclass
class RunResult:
    drafter: str
    notebook: str
    parameters: dict[str, Any]
    status: str = "failed"  # ok | failed
    duration_s: float = 0.0
    verdict: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    codes: list[str] = field(default_factory=list)
    error: str | None = None
    html: str | None = None
    executed_notebook: str | None = None
    record: str | None = None


def _one_line(exc: BaseException) -> str:
    ename = getattr(exc, "ename", None) or type(exc).__name__
    evalue = getattr(exc, "evalue", None)
    text = str(evalue) if evalue is not None else str(exc)
    return " ".join(f"{ename}: {text}".split())[:500]


@contextmanager
def _env(**values: str) -> Iterator[None]:
    """Set environment variables for kernels started inside the block (they inherit ours)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_notebook(
    notebook: Path,
    output: Path,
    parameters: dict[str, Any],
    record_file: Path,
    timeout: int = 300,
    cwd: Path | None = None,
) -> None:
    """Execute one notebook with papermill; raises on any failure (the output is still written)."""
    import papermill

    record_file = record_file.resolve()  # the kernel's cwd is ``cwd``, not ours
    record_file.unlink(missing_ok=True)
    env = {ENV_VAR: str(record_file), "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    with _env(**env):
        papermill.execute_notebook(
            str(notebook),
            str(output),
            parameters=parameters,
            cwd=str(cwd or notebook.parent),
            kernel_name=KERNEL_NAME,
            execution_timeout=timeout,
            progress_bar=False,
            # kernel log lines (TCP-transport warning, shutdown noise) would interleave with the progress lines
            extra_arguments=["--IPKernelApp.log_level=CRITICAL"],
        )


def render_html(executed: Path, destination: Path, title: str) -> None:
    """Render an executed notebook to one self-contained HTML file with code cells hidden."""
    import jinja2
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        extra_loaders=[jinja2.DictLoader({_TEMPLATE_NAME: _TEMPLATE})], template_file=_TEMPLATE_NAME
    )
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    exporter.embed_images = True
    nb = nbformat.read(str(executed), as_version=4)
    # the lab template escapes the title itself (escape_html_keep_quotes): pass it raw
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    destination.write_text(body, encoding="utf-8")


def _drafters(demo: Path) -> list[Path]:
    root = demo / "drafters"
    if not root.is_dir():
        raise UnusableInputError(f"no drafters directory at {root} (create the demo with `make data`)")
    found = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not found:
        raise UnusableInputError(f"no drafter directories under {root}")
    return found


def build_demo_report(
    out_dir: str | Path,
    demo_dir: str | Path = "data/demo",
    timeout: int = 300,
    notebooks: tuple[str, ...] = REPORT_NOTEBOOKS,
    notebooks_dir: str | Path | None = None,
) -> int:
    """Run every report notebook over every demo drafter; write HTML, index.html and summary.json.

    Returns 0 when every notebook ran, 1 when any failed (failures are recorded, and the
    remaining runs still happen).
    """
    out = Path(out_dir).resolve()  # absolute: the kernel runs in notebooks/, not in our cwd
    demo = Path(demo_dir).resolve()
    nb_dir = Path(notebooks_dir).resolve() if notebooks_dir is not None else NOTEBOOKS_DIR
    drafters = _drafters(demo)
    for name in notebooks:
        if not (nb_dir / f"{name}.ipynb").is_file():
            raise UnusableInputError(f"notebook {nb_dir / f'{name}.ipynb'} not found")
    target = demo / "target"
    runs_dir = out / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)

    results: list[RunResult] = []
    total = len(drafters) * len(notebooks)
    for drafter in drafters:
        for name in notebooks:
            params = {
                "checkpoint": str(drafter),
                "target": str(target) if target.is_dir() else None,
                "engine": "all",
            }
            res = RunResult(drafter.name, name, params)
            stem = f"{drafter.name}__{name}"
            executed, sidecar = runs_dir / f"{stem}.ipynb", runs_dir / f"{stem}.record.json"
            start = time.perf_counter()
            try:
                run_notebook(nb_dir / f"{name}.ipynb", executed, params, sidecar, timeout=timeout, cwd=nb_dir)
                rec = read_records(sidecar)
                if "verdict" not in rec:
                    raise RuntimeError("the notebook finished but recorded no verdict")
                res.status = "ok"
                res.verdict = rec.get("verdict")
                res.counts = dict(rec.get("counts") or {})
                res.codes = list(rec.get("codes") or [])
            except Exception as exc:  # any failure is recorded; the other runs go on
                res.error = _one_line(exc)
            res.duration_s = round(time.perf_counter() - start, 2)
            if sidecar.exists():
                res.record = sidecar.relative_to(out).as_posix()
            if executed.exists():
                res.executed_notebook = executed.relative_to(out).as_posix()
                html_path = out / f"{stem}.html"
                try:
                    render_html(executed, html_path, f"{drafter.name} · {name}")
                    res.html = html_path.name
                except Exception as exc:
                    res.status = "failed"
                    res.error = (res.error + "; " if res.error else "") + "HTML rendering: " + _one_line(exc)
            results.append(res)
            verdict = res.verdict or "-"
            detail = f" · {res.error}" if res.error else ""
            sys.stderr.write(
                f"[{len(results)}/{total}] {drafter.name} · {name} · {res.status} · "
                f"{verdict} · {res.duration_s:.1f}s{detail}\n"
            )

    (out / "summary.json").write_text(
        json.dumps([asdict(r) for r in results], indent=2) + "\n", encoding="utf-8"
    )
    (out / "index.html").write_text(index_html(results, demo), encoding="utf-8")
    failed = sum(r.status != "ok" for r in results)
    sys.stderr.write(
        f"{len(results) - failed}/{len(results)} notebook runs ok; report: {out / 'index.html'}\n"
    )
    return 1 if failed else 0


_VERDICT_COLOURS = {
    "healthy": "#2e7d32",
    "warnings": "#ef6c00",
    "broken": "#c62828",
    "unusable": "#6a1b1a",
    "not applicable": "#757575",
}


def index_html(results: list[RunResult], demo: Path) -> str:
    """The overview page: one row per drafter × notebook; every string escaped."""
    e = html.escape
    rows = []
    for r in results:
        colour = _VERDICT_COLOURS.get(r.verdict or "", "#555")
        verdict = f'<b style="color:{colour}">{e(r.verdict)}</b>' if r.verdict else "–"
        link = f'<a href="{e(quote(r.html))}">report</a>' if r.html else "–"
        status_colour = "#2e7d32" if r.status == "ok" else "#c62828"
        status = f'<b style="color:{status_colour}">{e(r.status)}</b>'
        if r.error:
            status += f'<div class="err">{e(r.error)}</div>'
        codes = "<br>".join(f"<code>{e(c)}</code>" for c in r.codes) or "–"
        c = r.counts
        rows.append(
            f"<tr><td>{e(r.drafter)}</td><td>{e(r.notebook)}</td><td>{verdict}</td>"
            f'<td class="n">{e(str(c.get("error", "–")))}</td><td class="n">{e(str(c.get("warning", "–")))}</td>'
            f'<td class="n">{e(str(c.get("info", "–")))}</td><td>{codes}</td><td>{link}</td>'
            f'<td>{status}</td><td class="n">{r.duration_s:.1f}</td></tr>'
        )
    ok = sum(r.status == "ok" for r in results)
    generated = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
{_CSP_META}
<title>eagle3-forensics · demo drafter reports</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #ccc; padding: 0.35em 0.7em; vertical-align: top; text-align: left; }}
th {{ background: #f3f3f3; }}
td.n {{ text-align: right; }}
.err {{ color: #c62828; font-size: 0.85em; max-width: 40em; }}
</style></head><body>
<h1>eagle3-forensics · demo drafter reports</h1>
<p>{ok}/{len(results)} notebook runs ok · demo data <code>{e(str(demo))}</code> · generated {e(generated)}.
Findings in the deliberately broken demo drafters are expected; <code>summary.json</code> has the same data.</p>
<table>
<thead><tr><th>drafter</th><th>notebook</th><th>verdict</th><th>errors</th><th>warnings</th><th>info</th>
<th>finding codes</th><th>report</th><th>status</th><th>seconds</th></tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody></table>
</body></html>
"""
