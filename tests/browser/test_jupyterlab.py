"""The notebooks in a real JupyterLab, as a new user meets them: headless Chromium on ``make lab``.

JupyterLab is what ``make lab`` starts (scripts/lab.py via :func:`lab_server.start_lab`), on a free
loopback port, serving copies of the notebooks under ``…/eagle3-forensics/notebooks`` (the name
the old substring test took for a headless executor) next to a ``data`` link to the demo world, so
the repository's files are never touched. JupyterLab's own settings (no news fetch, every cell
rendered into the page) live in a temporary settings folder. The browser may reach 127.0.0.1 only:
any other request is aborted and recorded as an error.

Per notebook: open it, Run All, wait for the kernel to go idle; no error output, no stderr output,
every code cell ran on the project's kernel; the explorers are live widgets (not the static
fallback), and answer when used; a screenshot goes to the test's ``tmp_path``. Skipped with the
reason when Chromium or Playwright is missing (``make browser``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from jupyterlab_page import KEY_FILTER, TOKEN_QUERY, JupyterLabPage
from lab_server import Lab, start_lab

pytest.importorskip("jupyterlab")
pytest.importorskip("ipywidgets")

from paths import ROOT

from eagle3_forensics.views.widgets import STATIC_NOTE

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Route

pytestmark = pytest.mark.notebooks

NOTEBOOKS = (
    "00_triage.ipynb",
    "01_checkpoint_keys.ipynb",
    "02_vocab_mapping.ipynb",
    "03_token_histograms.ipynb",
    "04_accept_rate_probe.ipynb",
    "05_offline_probe.ipynb",
    "06_why_low_acceptance.ipynb",
)
#: JupyterLab user settings for a test: every cell is in the DOM (autosave, news and update checks are
#: off by make lab's own defaults, scripts/jupyter_config: not set here, so the test checks them)
SETTINGS = {"@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"}}
#: JupyterLab's autosave interval when autosave is on (its schema default, seconds)
AUTOSAVE_INTERVAL_S = 120
#: the width a notebook's output area has in a 1,000 px window (the issue's "1,000 px notebook")
NOTEBOOK_PX = 1000
#: what each notebook answers on its first screen, and where the docs' screenshot of it goes
FIRST_SCREEN = {
    "00_triage.ipynb": r"verdict\s+(BROKEN|HEALTHY|WARNINGS|UNUSABLE)",
    "01_checkpoint_keys.ipynb": r"verdict\s+(BROKEN|HEALTHY|WARNINGS|UNUSABLE)",
    "02_vocab_mapping.ipynb": r"kind\s+double_offset",
    "03_token_histograms.ipynb": r"coverage",
    "04_accept_rate_probe.ipynb": r"acceptance length",
    "05_offline_probe.ipynb": r"simulated acceptance length",
    # the answer: the acceptance length and the first cause (or none), with the reference beside it
    "06_why_low_acceptance.ipynb": r"acceptance length \d\.\d{3}: (no cause found|\d+ cause\(s\); first: )",
}
DOCS_IMG = ROOT / "docs" / "img"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, timeout=60
    ).stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository holding the notebooks as the project tracks them (and its .gitignore), named
    ``eagle3-forensics``; ``data`` links to the demo world (excluded, as the real one is tracked)."""
    base = tmp_path_factory.mktemp("jupyterlab") / "eagle3-forensics"
    notebooks = base / "notebooks"
    notebooks.mkdir(parents=True)
    for name in NOTEBOOKS:  # copies: running and saving them never touches the repository
        shutil.copy(ROOT / "notebooks" / name, notebooks)
        shutil.copy(ROOT / "notebooks" / name.replace(".ipynb", ".py"), notebooks)
    shutil.copy(ROOT / ".gitignore", base)
    (base / "data").symlink_to(ROOT / "data", target_is_directory=True)  # ../data/demo/... as in the repo
    git(base, "init", "-q")
    (base / ".git" / "info" / "exclude").write_text("/data\n", encoding="utf-8")
    git(base, "add", "-A")
    git(base, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "notebooks")
    return base


@pytest.fixture(scope="module")
def lab(repo: Path) -> Iterator[Lab]:
    settings = repo.parent / "lab-settings"  # JupyterLab's own state stays outside the repository
    for plugin, values in SETTINGS.items():
        path = settings / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")
    extra = [
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={repo.parent / 'workspaces'}",
    ]
    with start_lab(repo / "notebooks", extra=extra) as server:
        yield server


@pytest.fixture
def jl(chromium: Browser, lab: Lab) -> Iterator[JupyterLabPage]:
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(30_000)
    page = context.new_page()
    out = JupyterLabPage(page, lab)

    def loopback_only(route: Route) -> None:
        if route.request.url.startswith(lab.base + "/"):
            route.continue_()
        else:
            out.errors.append(f"request off the machine: {route.request.url}")
            route.abort()

    context.route("**/*", loopback_only)
    page.on("pageerror", lambda exc: out.errors.append(f"exception: {exc}"))
    page.on(
        "console",
        lambda msg: out.errors.append(f"console.{msg.type}: {msg.text}") if msg.type == "error" else None,
    )
    try:
        yield out
    finally:
        context.close()


def run_clean(jl: JupyterLabPage, notebook: str) -> float:
    """Open ``notebook``, Run All, and check the run: the project's kernel, every cell ran, no
    error or stderr output, no browser error, the answer on the first screen, every table within
    a 1,000 px notebook; the first screen goes to the docs (``E3F_DOC_SCREENSHOTS=1``). Seconds
    Run All took."""
    jl.open(notebook)
    assert jl.kernel_name() == "eagle3-forensics (.venv)"
    took = jl.run_all()
    assert jl.problems() == [], jl.state()
    assert jl.unrun_cells() == 0, jl.state()
    assert jl.errors == [], jl.state()
    first = jl.first_screen()
    assert re.search(FIRST_SCREEN[notebook], first), f"{notebook}: first screen shows {first[-800:]!r}"
    wide = jl.wide_tables(NOTEBOOK_PX)  # (table px, box px, header) of each that scrolls sideways
    assert not wide, f"{notebook}: tables that scroll in a {NOTEBOOK_PX} px notebook: {wide}"
    if os.environ.get("E3F_DOC_SCREENSHOTS") == "1":  # Build 6: the docs' pictures, after Run All
        jl.screenshot_first_screen(DOCS_IMG / notebook.replace(".ipynb", ".png"))
    return took


def assert_clean_after_autosave(jl: JupyterLabPage, repo: Path, since: float) -> None:
    """With the notebook still open (unsaved outputs in it), wait past JupyterLab's autosave
    interval; nothing in the repository changed: no output saved, no paired .py rewritten, no
    checkpoint folder showing."""
    assert jl.dirty(), "the notebook shows no unsaved changes: nothing for autosave to write"
    left = AUTOSAVE_INTERVAL_S + 15 - (time.monotonic() - since)
    if left > 0:
        jl.page.wait_for_timeout(left * 1000)
    assert git(repo, "status", "--porcelain") == "", git(repo, "status")
    assert jl.dirty()


@pytest.mark.timeout(660)
def test_00_triage_runs_clean_with_live_explorers(jl: JupyterLabPage, repo: Path, tmp_path: Path) -> None:
    t0 = time.monotonic()
    took = run_clean(jl, "00_triage.ipynb")
    ran = time.monotonic()
    assert jl.live_widgets() >= 3  # the three explorers, rendered by the widget manager
    assert STATIC_NOTE not in jl.text()  # not the static fallback, though the path says eagle3-forensics
    assert jl.table_cells() and jl.raw_values() == []  # issue 14: no None / NaN / \xNN in any table
    page = jl.screenshot_notebook(tmp_path / "00_triage_full.png")  # what a user sees after Run All

    keys = jl.explorer(KEY_FILTER)
    before = jl.rows(keys)
    assert before > 5
    box = keys.locator(".e3f-table-box").first  # a tall table scrolls inside its own box, header kept
    sticky = box.evaluate("b => getComputedStyle(b.querySelector('thead th')).position")
    assert sticky == "sticky"
    jl.type_into(KEY_FILTER, "self_attn")
    after = jl.wait_rows(keys, before)
    assert 0 < after < before
    names = keys.locator("table tbody tr td:first-child").all_inner_texts()
    assert len(names) == after == 4 and all("self_attn" in name for name in names), names

    lookup = jl.explorer(TOKEN_QUERY)
    shown = jl.rows(lookup)  # the most frequent corpus tokens
    jl.type_into(TOKEN_QUERY, "d:3")  # draft id 3: what it is, and where each engine maps it
    assert jl.wait_rows(lookup, shown) == 1
    header = lookup.locator("table thead th").all_inner_texts()
    row = lookup.locator("table tbody tr").first.locator("td").all_inner_texts()
    cells = dict(zip(header[-len(row) :], row, strict=True))
    assert cells["draft id"] == "3", cells
    jl.type_into(TOKEN_QUERY, "zzzqqq")  # six tokens, two distinct: the split once, then one row each
    assert jl.wait_rows(lookup, 1) == 2
    assert "6 tokens: z · z · z · q · q · q" in jl.wait_text(lookup, "6 tokens")
    assert jl.raw_values(lookup) == []

    probe = jl.output_with("button:has-text('Run probe')")
    jl.mark_stale(probe)  # the notebook's own probe result is shown until the new one replaces it
    jl.click_button("Run probe")
    jl.wait_fresh(probe, "table")  # the tables of the new run
    # d2t_absolute accepts (almost) nothing under vLLM's view: 1 token of 369 on the chat demo; with
    # none accepted the explorer says so in words instead of drawing an empty chart
    text = jl.wait_text(probe, "drafted / accepted tokens")
    assert "acceptance length" in text
    accepted = int(text.split("drafted / accepted tokens")[1].split("/")[1].split()[0])
    assert accepted <= 3, text
    if accepted == 0:
        assert "No per-position chart" in jl.wait_text(probe, "No per-position chart")
        assert probe.locator("img").count() == 0
    assert jl.raw_values(probe) == []
    assert jl.problems() == [] and jl.errors == [], jl.state()

    shot = jl.screenshot(tmp_path / "00_triage.png", of=lookup)
    assert shot.stat().st_size > 10_000
    assert_clean_after_autosave(jl, repo, ran)  # exploring left the repository as it was
    print(
        f"00_triage: Run All {took:.1f} s, whole test {time.monotonic() - t0:.1f} s, screenshots {shot} {page}"
    )


@pytest.mark.timeout(420)
def test_04_probe_runs_clean(jl: JupyterLabPage, tmp_path: Path) -> None:
    t0 = time.monotonic()
    took = run_clean(jl, "04_accept_rate_probe.ipynb")
    figures = jl.outputs("img")
    assert figures.count() >= 1  # the per-position acceptance chart
    shot = jl.screenshot(tmp_path / "04_accept_rate_probe.png", of=figures.first)
    assert shot.stat().st_size > 10_000

    # the Explore section: the probe explorer is live and re-runs with another K (one Run All for both)
    assert STATIC_NOTE not in jl.text()
    probe = jl.widget("e3f-probe")
    assert any(o.startswith("sglang 0.5.10.post1") for o in jl.options(probe, nth=0))  # releases offered
    jl.set_slider(probe, 2)  # K: a slider, as in 00's probe controls
    jl.mark_stale(probe)  # the notebook's own result is shown until the new run replaces it
    jl.click_button("Run probe")
    jl.wait_fresh(probe, "img")  # the per-position figure of the new run
    text = probe.inner_text()
    assert "K=2, reference" in text and "acceptance length" in text
    assert jl.problems() == [] and jl.errors == [], jl.state()
    print(f"04_accept_rate_probe: Run All {took:.1f} s, whole test {time.monotonic() - t0:.1f} s")


# -- notebooks 01-05: Run All clean, the explorer live, one interaction answers ------------------------


def run_live(jl: JupyterLabPage, notebook: str, css_class: str) -> tuple[float, Locator]:
    """:func:`run_clean`, then the explorer with ``css_class`` is a live widget (no static note)."""
    took = run_clean(jl, notebook)
    assert jl.live_widgets() >= 1
    assert STATIC_NOTE not in jl.text()
    return took, jl.widget(css_class)


@pytest.mark.timeout(300)
def test_01_keys_fate_filter(jl: JupyterLabPage) -> None:
    t0 = time.monotonic()
    took, keys = run_live(jl, "01_checkpoint_keys.ipynb", "e3f-key-browser")
    before = jl.rows(keys)  # every key of speculators_layout
    assert before > 10
    dropped = next(o for o in jl.options(keys) if o.startswith("eagle: dropped"))
    jl.choose(keys, "eagle: dropped")
    after = jl.wait_rows(keys, before)
    assert after == int(dropped.rsplit("(", 1)[1].rstrip(")")) < before, dropped
    header = keys.locator("table thead th").all_inner_texts()
    eagle = header.index("eagle") + 1
    fates = keys.locator(f"table tbody tr td:nth-child({eagle})").all_inner_texts()
    assert len(fates) == after and all(f.startswith("dropped") for f in fates), fates
    assert jl.problems() == [] and jl.errors == [], jl.state()
    print(f"01_checkpoint_keys: Run All {took:.1f} s, whole test {time.monotonic() - t0:.1f} s")


@pytest.mark.timeout(300)
def test_02_map_compare_and_lookup(jl: JupyterLabPage) -> None:
    t0 = time.monotonic()
    took, maps = run_live(jl, "02_vocab_mapping.ipynb", "e3f-map-compare")
    assert jl.live_widgets() >= 2  # the token lookup too
    assert "against rebuilt from the data" in maps.inner_text()
    jl.choose(maps, "reference: healthy", nth=1)
    text = jl.wait_text(maps, r"checkpoint \(stored\) against reference: healthy")
    assert "Jaccard" in text or "the same selection" in text

    lookup = jl.explorer(TOKEN_QUERY)
    shown = jl.rows(lookup)
    jl.type_into(TOKEN_QUERY, "d:3")
    assert jl.wait_rows(lookup, shown) == 1
    assert jl.problems() == [] and jl.errors == [], jl.state()
    print(f"02_vocab_mapping: Run All {took:.1f} s, whole test {time.monotonic() - t0:.1f} s")


@pytest.mark.timeout(300)
def test_03_coverage_by_class_and_size(jl: JupyterLabPage) -> None:
    t0 = time.monotonic()
    took, cov = run_live(jl, "03_token_histograms.ipynb", "e3f-coverage")
    assert "token class all" in cov.inner_text()
    all_counted = cov.locator("table tbody tr td:nth-child(4)").first.inner_text()
    jl.choose(cov, "ordinary")
    jl.wait_text(cov, "token class ordinary")
    counted = cov.locator("table tbody tr td:nth-child(4)").first.inner_text()
    assert int(counted) < int(all_counted)  # the ordinary tokens are a part of the corpus

    def best_covered() -> int:  # the row of the best draft vocabulary of the slider's size
        return int(cov.locator("table tbody tr").nth(1).locator("td").nth(4).inner_text())

    covered = best_covered()  # at the checkpoint's own size
    jl.set_slider(cov, 10)
    jl.wait_text(cov, "size 10, token class ordinary")
    assert best_covered() < covered  # ten ids cover fewer ordinary tokens
    assert jl.problems() == [] and jl.errors == [], jl.state()
    print(f"03_token_histograms: Run All {took:.1f} s, whole test {time.monotonic() - t0:.1f} s")


@pytest.mark.timeout(300)
def test_05_sample_browser(jl: JupyterLabPage) -> None:
    t0 = time.monotonic()
    took, samples = run_live(jl, "05_offline_probe.ipynb", "e3f-sample-browser")
    options = jl.options(samples)
    assert len(options) > 2 and "worst" in options[0]
    first = samples.locator("p b").first.inner_text()
    assert options[0].startswith(first)
    other = options[-1]
    jl.choose(samples, other)
    jl.wait_text(samples, re.escape(f"{other} (sample"))
    assert samples.locator("p b").first.inner_text() == other
    assert jl.rows(samples) > 10 and "✓" in samples.inner_text()
    assert jl.problems() == [] and jl.errors == [], jl.state()
    print(f"05_offline_probe: Run All {took:.1f} s, whole test {time.monotonic() - t0:.1f} s")


@pytest.mark.timeout(420)
def test_06_why_answers_first_and_ends_with_next(jl: JupyterLabPage) -> None:
    """06 over its default drafter (d2t_absolute, served on vLLM): the answer and its reference on the
    first screen, evidence folded, a Next section whose repair command carries this run's paths, the
    answer again where Run All leaves the view, the segment picker live with "all" once."""
    took, why = run_live(jl, "06_why_low_acceptance.ipynb", "e3f-why")
    first = jl.first_screen()
    assert "D2T_ABSOLUTE" in first and "Reference:" in first and "trained view" in first, first[-800:]
    text = jl.text()
    assert "evidence (full JSON)" in text  # folded: a <details> summary
    assert "eagle3-forensics repair ../data/demo/drafters/d2t_absolute --engine vllm" in text
    assert "papermill 06_why_low_acceptance.ipynb ../build/notebooks/why.ipynb" in text
    assert re.search(r"answer: acceptance length \d\.\d{3}: 1 cause", text)
    segments = jl.options(why, nth=0)
    assert segments.count("all") == 1, segments
    assert jl.problems() == [] and jl.errors == [], jl.state()
    print(f"06_why_low_acceptance: Run All {took:.1f} s")
