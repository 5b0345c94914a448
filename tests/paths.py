"""Where the tests find the repository and its demo world: one home for the paths every test module
uses (the ``repo_root`` fixture returns the same root)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "demo"
