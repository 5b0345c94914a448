"""A notebook open in a real JupyterLab, driven in headless Chromium: what a user does and sees.

Used by tests/browser/test_jupyterlab.py. Each method is one user action (open a notebook, Run All,
type into an explorer, click a button) or one observation (the problem outputs, the text of the
rendered tables, the rows of an explorer), so a new assertion is one line. Every wait is bounded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lab_server import Lab
    from playwright.sync_api import Locator, Page

STDERR_MIME = "application/vnd.jupyter.stderr"  # JupyterLab renders stderr streams and errors with it
#: placeholders of the explorers' text boxes (eagle3_forensics.views.widgets)
KEY_FILTER = "filter names (substring, or re:PATTERN)"
TOKEN_QUERY = "token string, target id, or d:<draft id>"
#: what a table cell must never show a reader (issue 14: raw values)
RAW_VALUE = re.compile(r"^(None|NaN|nan)$|\\x[0-9a-fA-F]{2}")


@dataclass
class JupyterLabPage:
    """One browser page on a running JupyterLab, plus everything that went wrong on it."""

    page: Page
    lab: Lab
    errors: list[str] = field(default_factory=list)
    panel: str = ".jp-NotebookPanel"  # the open notebook's panel, by id once open() ran

    # -- actions ------------------------------------------------------------------------------

    def open(self, notebook: str, timeout_ms: int = 60_000) -> None:
        """Open ``notebook`` and wait until its kernel is idle."""
        # reset: a fresh workspace, so no notebook of an earlier visit is restored next to this one
        self.page.goto(f"{self.lab.base}/lab/tree/{notebook}?reset&token={self.lab.token}", wait_until="load")
        tab = self.page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current", has_text=notebook)
        tab.wait_for(timeout=timeout_ms)
        self.panel = f"#{tab.get_attribute('data-id')}"
        self.page.wait_for_selector(f"{self.panel} .jp-Cell", timeout=timeout_ms)
        self.page.wait_for_function(
            """() => Array.from(document.querySelectorAll('.jp-StatusBar-TextItem'))
                     .some(e => / \\| Idle$/.test(e.textContent))""",
            timeout=timeout_ms,
        )

    def kernel_name(self) -> str:
        """The kernel shown in the notebook's toolbar (its display name)."""
        return str(self.page.locator(f"{self.panel} .jp-KernelName").first.inner_text()).strip()

    def run_all(self, timeout_ms: int = 240_000) -> float:
        """Run ▸ Run All Cells; wait until every code cell ran and the kernel is idle, or an error
        stopped the run. Seconds taken."""
        self.page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        self.page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        start = self.page.evaluate("() => performance.now()")
        self.page.wait_for_function(
            """([panel, mime]) => {
                const p = document.querySelector(panel);
                if (!p) return false;
                const idle = p.querySelector('.jp-Notebook-ExecutionIndicator')?.getAttribute('data-status') === 'idle';
                const prompts = Array.from(p.querySelectorAll('.jp-CodeCell .jp-InputPrompt'))
                    .map(e => e.textContent.trim()).filter(t => t);
                const done = prompts.length > 0 && prompts.every(t => /^\\[\\d+\\]:$/.test(t));
                return idle && (done || p.querySelector(`[data-mime-type="${mime}"]`) !== null);
            }""",
            arg=[self.panel, STDERR_MIME],
            timeout=timeout_ms,
            polling=250,
        )
        return float(self.page.evaluate("() => performance.now()") - start) / 1000

    def explorer(self, placeholder: str) -> Locator:
        """The output area of the explorer whose text box has ``placeholder``."""
        box = self.page.locator(f'input[placeholder="{placeholder}"]')  # relative to the output area
        return self.page.locator(f"{self.panel} .jp-Cell-outputArea", has=box).last

    def output_with(self, selector: str) -> Locator:
        """The (last) cell output area that holds an element matching ``selector``."""
        return self.page.locator(f"{self.panel} .jp-Cell-outputArea", has=self.page.locator(selector)).last

    def outputs(self, selector: str) -> Locator:
        """Elements matching ``selector`` inside the cell outputs."""
        return self.page.locator(f"{self.panel} .jp-OutputArea-output {selector}")

    def type_into(self, placeholder: str, text: str) -> None:
        """Type ``text`` into an explorer's text box and press Enter."""
        box = self.page.locator(f'{self.panel} input[placeholder="{placeholder}"]').last
        box.scroll_into_view_if_needed()
        box.fill(text)
        box.press("Enter")

    def click_button(self, label: str) -> None:
        button = self.page.locator(f"{self.panel} button", has_text=label).last
        button.scroll_into_view_if_needed()
        button.click()

    def screenshot(self, path: Path, of: Locator | None = None) -> Path:
        """The visible window, scrolled to ``of`` when given."""
        if of is not None:
            of.scroll_into_view_if_needed()
            self.page.wait_for_timeout(300)
        self.page.screenshot(path=str(path))
        return path

    def screenshot_notebook(self, path: Path, width: int = 1400) -> Path:
        """The whole open notebook from its first cell, as one image: the window is made as tall as
        the notebook (left sidebar closed), scrolled to the top, shot, and restored."""
        before = self.page.viewport_size or {"width": width, "height": 1000}
        self.page.keyboard.press("Control+b")  # close the file browser: the notebook gets the width
        tallest = (
            "(p) => Math.max(...Array.from(document.querySelectorAll(p + ' *')).map(e => e.scrollHeight))"
        )
        height = int(self.page.evaluate(tallest, self.panel))
        self.page.set_viewport_size({"width": width, "height": min(height + 150, 16_000)})
        self.page.wait_for_timeout(800)
        top = "(p) => document.querySelectorAll(p + ' *').forEach(e => { e.scrollTop = 0; })"
        self.page.evaluate(top, self.panel)
        self.page.wait_for_timeout(500)
        self.page.screenshot(path=str(path))
        self.page.set_viewport_size(before)
        self.page.keyboard.press("Control+b")
        self.page.wait_for_timeout(300)
        return path

    def screenshot_first_screen(self, path: Path, width: int = 1100, height: int = 760) -> Path:
        """What a reader sees first after Run All, file browser closed: a small PNG for the docs."""
        before = self.page.viewport_size or {"width": 1400, "height": 1000}
        self.page.keyboard.press("Control+b")
        self.page.set_viewport_size({"width": width, "height": height})
        self.page.wait_for_timeout(800)
        self._to_top()
        self.page.screenshot(path=str(path))
        from PIL import Image  # matplotlib's dependency: a 128-colour PNG is a third of the size

        with Image.open(path) as shot:
            shot.convert("RGB").quantize(colors=128).save(path, optimize=True)
        self.page.set_viewport_size(before)
        self.page.keyboard.press("Control+b")
        self.page.wait_for_timeout(300)
        return path

    def _to_top(self) -> None:
        self.page.evaluate(
            "(p) => document.querySelectorAll(p + ' *').forEach(e => { e.scrollTop = 0; })", self.panel
        )
        self.page.wait_for_timeout(300)

    # -- observations -------------------------------------------------------------------------

    def first_screen(self) -> str:
        """The text of the cell outputs a reader sees without scrolling, the notebook at its top."""
        self._to_top()
        text: str = self.page.evaluate(
            """(panel) => Array.from(document.querySelectorAll(panel + ' .jp-OutputArea-output'))
                .filter(e => e.getBoundingClientRect().top < window.innerHeight - 60)
                .map(e => e.innerText).join('\\n')""",
            self.panel,
        )
        return text

    def wide_tables(self, notebook_px: int = 1000) -> list[tuple[int, int, str]]:
        """Tables that scroll sideways when the notebook panel is ``notebook_px`` wide: each one's
        full width, the width of the box it sits in, and its header (for a failure message)."""
        before = self.page.viewport_size or {"width": 1400, "height": 1000}
        panel = float(
            self.page.evaluate("(p) => document.querySelector(p).getBoundingClientRect().width", self.panel)
        )
        self.page.set_viewport_size(
            {"width": int(before["width"] - (panel - notebook_px)), "height": before["height"]}
        )
        self.page.wait_for_timeout(800)
        try:
            out: list[list[Any]] = self.page.evaluate(
                """(panel) => Array.from(document.querySelectorAll(panel + ' .jp-OutputArea-output table'))
                    .filter(t => t.offsetParent !== null)
                    .map(t => [Math.round(t.getBoundingClientRect().width),
                               Math.round((t.closest('.e3f-table-box') || t.parentElement).clientWidth),
                               Array.from(t.querySelectorAll('th')).slice(0, 8).map(h => h.innerText).join(' | ')])""",
                self.panel,
            )
        finally:
            self.page.set_viewport_size(before)
            self.page.wait_for_timeout(300)
        return [(int(w), int(box), str(h)) for w, box, h in out if w > box + 1]

    def dirty(self) -> bool:
        """The open notebook's tab shows unsaved changes."""
        tab = ".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current.jp-mod-dirty"
        return bool(self.page.locator(tab).count())

    def problems(self) -> list[str]:
        """Every error and stderr output of the open notebook (JupyterLab renders both as stderr)."""
        out: list[str] = self.page.eval_on_selector_all(
            f'{self.panel} [data-mime-type="{STDERR_MIME}"]', "els => els.map(e => e.innerText)"
        )
        return out

    def unrun_cells(self) -> int:
        """Code cells that show no execution count (aborted or never run)."""
        n: int = self.page.evaluate(
            """(panel) => Array.from(document.querySelectorAll(panel + ' .jp-CodeCell .jp-InputPrompt'))
                  .map(e => e.textContent.trim()).filter(t => t && !/^\\[\\d+\\]:$/.test(t)).length""",
            self.panel,
        )
        return n

    def text(self) -> str:
        return str(self.page.locator(self.panel).first.inner_text())

    def live_widgets(self) -> int:
        """Widget views rendered by JupyterLab's widget manager (0 when only static HTML shows)."""
        return int(self.page.locator(f"{self.panel} .jp-OutputArea-output .jupyter-widgets").count())

    def table_cells(self, within: Locator | None = None) -> list[str]:
        """The text of every rendered table cell (header and body) in the outputs, or in ``within``."""
        root = within if within is not None else self.page.locator(f"{self.panel} .jp-OutputArea")
        cells: list[str] = []
        for i in range(root.count()):
            cells += root.nth(i).locator("th, td").all_inner_texts()
        return [c.strip() for c in cells]

    def raw_values(self, within: Locator | None = None) -> list[str]:
        """Table cells that show a raw value (``None``, ``NaN``, ``\\xNN``) instead of a formatted one."""
        return [c for c in self.table_cells(within) if RAW_VALUE.search(c)]

    def rows(self, area: Locator) -> int:
        """Body rows of the tables in ``area`` (an explorer's output)."""
        return int(area.locator("table tbody tr").count())

    def wait_rows(
        self, area: Locator, differ_from: int, timeout_ms: int = 30_000, stable_ms: int = 600
    ) -> int:
        """Wait until the row count of ``area`` is not ``differ_from`` and has held for ``stable_ms``
        (an explorer clears its output before it draws the answer); the new count."""
        now = lambda: float(self.page.evaluate("() => performance.now()"))  # noqa: E731
        deadline, seen, since = now() + timeout_ms, differ_from, now()
        while now() < deadline:
            n = self.rows(area)
            if n != seen:
                seen, since = n, now()
            elif n != differ_from and now() - since >= stable_ms:
                return n
            self.page.wait_for_timeout(100)
        raise AssertionError(f"the row count stayed {differ_from} for {timeout_ms / 1000:.0f} s")

    def mark_stale(self, area: Locator) -> None:
        """Mark what ``area`` shows now, so :meth:`wait_fresh` can tell a redrawn answer from it."""
        area.locator("*").evaluate_all("els => els.forEach(e => e.setAttribute('data-e3f-stale', ''))")

    def wait_fresh(self, area: Locator, selector: str, timeout_ms: int = 120_000) -> Locator:
        """Wait until ``area`` holds an element matching ``selector`` drawn after :meth:`mark_stale`."""
        fresh = area.locator(f"{selector}:not([data-e3f-stale])").first
        fresh.wait_for(timeout=timeout_ms)
        return fresh

    def wait_text(self, area: Locator, pattern: str, timeout_ms: int = 60_000) -> str:
        """Wait until ``area``'s text matches the regular expression ``pattern``; that text."""
        deadline = self.page.evaluate("() => performance.now()") + timeout_ms
        text = ""
        while self.page.evaluate("() => performance.now()") < deadline:
            text = str(area.inner_text())
            if re.search(pattern, text):
                return text
            self.page.wait_for_timeout(200)
        raise AssertionError(f"no {pattern!r} within {timeout_ms / 1000:.0f} s in: {text[-500:]!r}")

    # -- the explorers of notebooks 01-05 (eagle3_forensics.views.explorers) ---------------------

    def widget(self, css_class: str) -> Locator:
        """The live explorer whose widget box carries ``css_class`` (e.g. ``e3f-key-browser``)."""
        box = self.page.locator(f"{self.panel} .jp-OutputArea-output .{css_class}").last
        box.wait_for(timeout=30_000)
        return box

    def choose(self, area: Locator, label: str, nth: int = 0) -> None:
        """Choose the option whose text starts with ``label`` in the ``nth`` drop-down of ``area``."""
        select = area.locator("select").nth(nth)
        select.scroll_into_view_if_needed()
        raw = select.locator("option").all_text_contents()
        match = [i for i, o in enumerate(raw) if _plain(o).startswith(label)]
        assert match, f"no option {label!r} in {[_plain(o) for o in raw]}"
        select.select_option(index=match[0])

    def set_slider(self, area: Locator, value: int, nth: int = 0) -> None:
        """Type ``value`` into the ``nth`` slider's readout of ``area`` (ipywidgets 8: editable) and press Enter."""
        readout = area.locator(".widget-readout").nth(nth)
        readout.scroll_into_view_if_needed()
        readout.click()
        readout.press("Control+A")
        readout.type(str(value))
        readout.press("Enter")

    def options(self, area: Locator, nth: int = 0) -> list[str]:
        """The option texts of the ``nth`` drop-down of ``area`` (as a reader sees them)."""
        return [_plain(o) for o in area.locator("select").nth(nth).locator("option").all_text_contents()]

    def state(self) -> dict[str, Any]:
        """A summary for failure messages."""
        return {"problems": self.problems(), "unrun": self.unrun_cells(), "errors": list(self.errors)}


def _plain(text: str) -> str:
    """An option's text with the no-break spaces ipywidgets puts in its labels made plain spaces."""
    return " ".join(text.replace("\u00a0", " ").split())
