"""The browser tier: Playwright for Python driving Debian's Chromium (``make browser`` puts both in place).

Nothing here installs anything or changes the machine: without ``/usr/bin/chromium`` or the
``playwright`` package the tests skip, saying which is missing. Chromium runs headless with its
background networking off, in a fresh profile Playwright deletes on close, in an offline browser
context; it reads ``file://`` pages and talks to Playwright over a pipe (no port is opened).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from browser_page import CHROMIUM, FLAGS, TIMEOUT_MS, ChromiumPage

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture(scope="session")
def chromium() -> Iterator[Browser]:
    """One headless Chromium for the session."""
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} is missing: `make browser` installs Debian's chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        pytest.skip(f"Playwright for Python is missing ({exc}): `make browser` installs it")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS, timeout=60_000)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def chromium_page(chromium: Browser) -> Iterator[ChromiumPage]:
    """A fresh page in a fresh offline context, recording its errors."""
    context = chromium.new_context(offline=True)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    out = ChromiumPage(page)
    page.on("pageerror", lambda exc: out.errors.append(f"exception: {exc}"))
    page.on(
        "console",
        lambda msg: (
            out.errors.append(f"console.{msg.type}: {msg.text}") if msg.type in ("error", "assert") else None
        ),
    )
    page.on("requestfailed", lambda req: out.errors.append(f"request failed: {req.url} ({req.failure})"))
    try:
        yield out
    finally:
        context.close()
