"""Headless Chromium driven by Playwright for Python: the flags, and a page that records its errors.

Used by tests/browser/conftest.py (the fixtures) and the browser tests (the type).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM = Path("/usr/bin/chromium")  # Debian's package; `playwright install` is never used
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TIMEOUT_MS = 30_000  # every navigation and wait is bounded


@dataclass
class ChromiumPage:
    """A Playwright page plus everything that went wrong on it: uncaught exceptions, console errors
    (a Content-Security-Policy violation is one) and failed requests."""

    page: Page
    errors: list[str] = field(default_factory=list)

    def open(self, path: Path) -> None:
        """Load a local file, wait for its load event and let late messages and image decodes arrive."""
        self.errors.clear()
        self.page.goto(path.resolve().as_uri(), wait_until="load")
        self.page.wait_for_timeout(300)

    def evaluate(self, expression: str) -> Any:
        return self.page.evaluate(expression)
