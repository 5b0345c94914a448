"""``diagnose`` runs from the wheel inside the SGLang loader venv (``make loaders-env``) and installing
the wheel there would change none of its packages: the core's requirements are already met.

Skips where ``.venv-sglang`` has not been built. Nothing is installed into that venv: pip only plans
(``--dry-run``), and the CLI runs with the wheel itself on ``PYTHONPATH`` (a pure-Python wheel is
importable as a zip, the JSON Schemas included).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pkgtools import ROOT, Dist, pip_env, run

pytestmark = pytest.mark.packaging
VENV = ROOT / ".venv-sglang"
DEMO = ROOT / "data" / "demo"


def test_wheel_fits_the_sglang_loader_venv(dist: Dist, tmp_path: Path, timed: None) -> None:
    py = VENV / "bin" / "python"
    if not py.exists():
        pytest.skip("no .venv-sglang (make loaders-env builds it)")
    freeze = [str(py), "-m", "pip", "freeze", "--all"]
    before = run(freeze, timeout=120).stdout
    report = tmp_path / "r.json"
    run(
        [str(py), "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report), str(dist.wheel)],
        timeout=600,
    )
    planned = [i["metadata"]["name"] for i in json.loads(report.read_text())["install"]]
    assert planned == ["eagle3-forensics"], planned  # torch, transformers, numpy... stay as they are
    env = pip_env(PYTHONPATH=str(dist.wheel), PYTHONSAFEPATH="1")
    proc = subprocess.run(
        [
            str(py),
            "-m",
            "eagle3_forensics",
            "diagnose",
            str(DEMO / "drafters" / "d2t_absolute"),
            "--engine",
            "sglang==0.5.23",
            "--target",
            str(DEMO / "target"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stdout.startswith("{"), proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["error"] is None and "D2T_ABSOLUTE" in {f["code"] for f in out["findings"]}
    where = run(
        [str(py), "-c", "import eagle3_forensics as e; print(e.__file__)"], timeout=60, env=env, cwd=tmp_path
    )
    assert str(dist.wheel) in where.stdout
    assert run(freeze, timeout=120).stdout == before
