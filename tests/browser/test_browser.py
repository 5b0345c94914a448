"""The rendered reports in a real browser: Playwright for Python driving headless Chromium.

A run over the hostile drafter (a directory name and a tensor name that are script-injection
payloads; the ``hostile_drafter`` fixture) is rendered, then the index and the reports are opened
in Chromium (``chromium_page``, tests/browser/conftest.py; skipped, with the reason, when
Chromium or Playwright is missing: ``make browser`` installs them). Asserted per page: no
JavaScript exception, no console error (a CSP violation would be one), no failed request, every
inline figure decoded, the payloads shown as text, and no trace of their scripts running (the
``data-xss`` attribute is what they would set).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from browser_page import ChromiumPage
from builders import DIR_PAYLOAD, TENSOR_PAYLOAD
from paths import DEMO

pytest.importorskip("papermill")
pytest.importorskip("nbconvert")
yaml = pytest.importorskip("yaml")


from eagle3_forensics.cli.main import main  # noqa: E402

pytestmark = pytest.mark.notebooks


def open_page(cp: ChromiumPage, path: Path) -> dict[str, Any]:
    """Open ``path`` and report its errors and what it holds."""
    cp.open(path)
    state = cp.evaluate("""() => ({
        title: document.title,
        xss: document.documentElement.getAttribute('data-xss'),
        handlers: document.querySelectorAll('[onerror],[onload],[onclick]').length,
        scripts: document.scripts.length,
        text: document.body.innerText,
        images: Array.from(document.images).map(i => ({src: i.src.slice(0, 22), complete: i.complete,
                                                       width: i.naturalWidth}))
    })""")
    return {**state, "errors": list(cp.errors)}


# -- the run --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered(hostile_drafter: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("xss-run")
    data = {
        "name": "browser check",
        "workers": 2,
        "timeout": 120,
        "env": {"OMP_NUM_THREADS": "1"},
        "parameters": {"target": str(DEMO / "target")},
        "notebooks": {
            "00_triage": {
                "prompts": str(DEMO / "prompts.jsonl"),
                "max_prompts": 1,
                "max_new_tokens": 8,
                "device": "cpu",
                "ids": str(DEMO / "corpus_ids.safetensors"),
                "key_filter": "img",
            },
            "01_checkpoint_keys": {},
        },
        "drafters": {DIR_PAYLOAD: str(hostile_drafter)},
    }
    cfg = base / "run.yaml"
    cfg.write_text(yaml.safe_dump(data, allow_unicode=True))
    out = base / "out"
    assert main(["run", "--config", str(cfg), "--out", str(out), "--no-progress"]) == 0
    return out


@pytest.mark.timeout(300)
def test_index_and_reports_render_without_errors_or_script_execution(
    rendered: Path, chromium_page: ChromiumPage
) -> None:
    summary = json.loads((rendered / "summary.json").read_text())
    reports = {r["notebook"]: rendered / r["html"] for r in summary["runs"]}
    assert set(reports) == {"00_triage", "01_checkpoint_keys"}

    index = open_page(chromium_page, rendered / "index.html")
    assert index["errors"] == []
    assert index["title"] == "eagle3-forensics · browser check"
    assert index["xss"] is None and index["handlers"] == 0 and index["scripts"] == 0
    assert DIR_PAYLOAD in index["text"]  # shown as text, not parsed as markup
    assert sum(1 for _ in reports) == 2

    for name, path in reports.items():
        page = open_page(chromium_page, path)
        assert page["errors"] == [], name
        assert page["title"] != "XSS" and page["xss"] is None, name
        assert page["handlers"] == 0 and page["scripts"] == 0, name
        assert TENSOR_PAYLOAD in page["text"], name  # the tensor name, escaped, in the tables
        assert DIR_PAYLOAD in page["text"], name  # the drafter in the run header
        if name == "00_triage":
            figures = [i for i in page["images"] if i["src"].startswith("data:image/png")]
            assert figures, "the triage report has the per-position acceptance figure"
            assert all(i["complete"] and i["width"] > 0 for i in figures), figures


def test_the_harness_sees_what_it_guards_against(tmp_path: Path, chromium_page: ChromiumPage) -> None:
    """An unescaped payload runs and is seen, an exception and a failed request are recorded: the
    checks above can fail."""
    page = tmp_path / "unescaped.html"
    page.write_text(
        f"<!doctype html><title>t</title><body>{TENSOR_PAYLOAD}<script>throw new Error('boom')</script>"
        "<img src='http://127.0.0.1:9/x.png'></body>",
        encoding="utf-8",
    )
    state = open_page(chromium_page, page)
    assert state["xss"] == "1" and state["handlers"] == 1 and state["scripts"] == 1
    assert any("boom" in e for e in state["errors"]), state["errors"]
    assert any("request failed" in e for e in state["errors"]), state["errors"]
