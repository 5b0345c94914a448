"""Shared set-up for every test tier.

pytest puts this directory on ``sys.path`` (rootdir conftest, prepend import mode), so every tier
imports the shared fixture builders with ``from builders import ...``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import build_hostile_drafter

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


@pytest.fixture(scope="session")
def hostile_drafter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's healthy drafter in a directory named ``builders.DIR_PAYLOAD``, with an extra
    tensor named ``builders.TENSOR_PAYLOAD``: script-injection payloads every view must escape.
    Shared read-only; a test that needs it inside its own tree links to it."""
    return build_hostile_drafter(tmp_path_factory.mktemp("hostile"), DEMO / "drafters" / "healthy")
