"""Where the tests find the repository and its demo world: one home for the paths every test module
uses (the ``repo_root`` fixture returns the same root), and a copy of a demo drafter with its config
changed, which several tests need (stdlib only: the torch-free tiers import it too)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "demo"


def demo_drafter_copy(dst: Path, name: str = "healthy", **config: Any) -> Path:
    """A copy of the demo drafter ``name`` at ``dst`` whose config.json has ``config`` set (never the
    committed drafter itself)."""
    shutil.copytree(DEMO / "drafters" / name, dst)
    path = dst / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **config}, indent=2))
    return dst
