"""The core install (the wheel, no extras: no torch) passes the suite's torch-free part on every
supported Python: a venv per pyenv interpreter with the wheel and the test tools, the unit and
integration tiers run from the checkout against the installed package. Tests that need torch or
another extra skip (``pytest.importorskip``); the notebook, browser and engine tiers are not run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from pkgtools import ROOT, Dist, pip_env, run

pytestmark = pytest.mark.packaging

PYENV = Path("/root/.pyenv/versions")
TEST_TOOLS = ["pytest>=8", "pytest-timeout>=2.3", "hypothesis>=6.100", "jsonschema>=4.18"]


def _python(minor: str) -> Path:
    found = sorted(PYENV.glob(f"{minor}.*/bin/python{minor}"))
    if not found:
        pytest.skip(f"no Python {minor} under {PYENV}")
    return found[-1]


@pytest.mark.parametrize("minor", ["3.11", "3.12", "3.13"])
def test_core_suite_without_torch(minor: str, dist: Dist, tmp_path: Path, timed: None) -> None:
    venv = tmp_path / "venv"
    run([str(_python(minor)), "-m", "venv", str(venv)], timeout=120)
    py = venv / "bin" / "python"
    run([str(py), "-m", "pip", "install", "-q", str(dist.wheel), *TEST_TOOLS], timeout=900)
    # PYTHONSAFEPATH: neither pytest nor the CLI subprocesses put the checkout's ./eagle3_forensics
    # on sys.path, so the installed wheel is what runs
    env = pip_env(PYTHONSAFEPATH="1")
    where = run(
        [str(py), "-c", "import eagle3_forensics as e; print(e.__file__)"], timeout=60, cwd=ROOT, env=env
    )
    assert str(venv) in where.stdout, where.stdout
    absent = run(
        [str(py), "-c", "import importlib.util as u; print(u.find_spec('torch'))"], timeout=60, env=env
    )
    assert absent.stdout.strip() == "None"
    proc = subprocess.run(
        [str(venv / "bin" / "pytest"), "-q", "-p", "no:cacheprovider", "tests/unit", "tests/integration"],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=ROOT,
        env=env,
    )
    tail = proc.stdout[-4000:]
    assert proc.returncode == 0, tail + proc.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", tail).group(1))  # type: ignore[union-attr]
    assert passed >= 200, tail  # the torch-free part is real, not everything skipped
    assert "could not import 'torch'" in tail  # and the torch tests skipped cleanly
    print(f"Python {minor}: {tail.strip().splitlines()[-1]}", file=sys.stderr)
