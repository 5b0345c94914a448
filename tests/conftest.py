"""Shared set-up for every test tier.

pytest puts this directory on ``sys.path`` (rootdir conftest, prepend import mode), so every tier
imports the shared fixture builders with ``from builders import ...``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "demo"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root (the checkout under test)."""
    return ROOT


@pytest.fixture(scope="session")
def demo_dir() -> Path:
    """``data/demo``: the deterministic demo world shipped with the repository."""
    return DEMO
