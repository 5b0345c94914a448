"""The test tiers by directory: `make test` runs the fast tier, `make test-all` every tier but engine and loaders.

``tests/conftest.py`` gives every test under these directories their markers (a file may add more of
its own); ``tests/unit/test_tiers.py`` keeps them, the Makefile and pyproject in step.
"""

from __future__ import annotations

TIER_DIRS: dict[str, tuple[str, ...]] = {
    "browser": ("browser",),  # Chromium through Playwright (`make browser`)
    "fuzz": ("slow",),  # the contract fuzz at full size (hypothesis, minutes)
}
