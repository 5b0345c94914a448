"""Fixtures the unit tests of probe-server share (tests/unit/test_server_hostile*.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    """A prompts file of two prompts, as `probe-server --prompts` reads it."""
    p = tmp_path / "prompts.txt"
    p.write_text("first prompt\nsecond prompt\n", encoding="utf-8")
    return p
