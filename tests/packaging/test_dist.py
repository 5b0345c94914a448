"""The wheel and sdist: ``twine check`` accepts them, the metadata has a torch-free core, and
``pipx install`` of the wheel gives a working ``eagle3-forensics`` (core only: probe names its extra)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from pkgtools import ROOT, Dist, pip_env, run

from eagle3_forensics import __version__

pytestmark = pytest.mark.packaging
DEMO = ROOT / "data" / "demo"


def _metadata(wheel: Path) -> tuple[str, list[str]]:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        msg = Parser().parsestr(z.read(name).decode())
    return msg["Version"], msg.get_all("Requires-Dist") or []


def test_build_and_twine_check(dist: Dist, timed: None) -> None:
    assert dist.wheel.name == f"eagle3_forensics-{__version__}-py3-none-any.whl"
    assert dist.sdist.name == f"eagle3_forensics-{__version__}.tar.gz"
    run([sys.executable, "-m", "twine", "check", "--strict", str(dist.wheel), str(dist.sdist)], timeout=120)
    version, requires = _metadata(dist.wheel)
    assert version == __version__  # the one version source reached the metadata
    core = [r for r in requires if "extra ==" not in r]
    assert sorted(r.split(">")[0] for r in core) == ["numpy", "pyyaml", "safetensors", "tqdm"]
    assert any(r.startswith("torch>=") and 'extra == "probe"' in r for r in requires)
    with zipfile.ZipFile(dist.wheel) as z:
        names = set(z.namelist())
    assert "eagle3_forensics/py.typed" in names and "eagle3_forensics/schemas/diagnose.json" in names


def test_pipx_install_gives_a_working_command(dist: Dist, tmp_path: Path, timed: None) -> None:
    tools = tmp_path / "tools"
    run([sys.executable, "-m", "venv", str(tools)], timeout=120)
    run([str(tools / "bin" / "python"), "-m", "pip", "install", "-q", "pipx>=1.5"], timeout=300)
    env = pip_env(PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(tmp_path / "bin"))
    run(
        [str(tools / "bin" / "pipx"), "install", "--python", sys.executable, str(dist.wheel)],
        timeout=600,
        env=env,
    )
    exe = tmp_path / "bin" / "eagle3-forensics"
    assert exe.exists() and shutil.which("eagle3-forensics", path=str(tmp_path / "bin"))
    assert "diagnose" in run([str(exe), "--help"], timeout=60, env=env).stdout
    assert run([str(exe), "--version"], timeout=60, env=env).stdout.split() == [
        "eagle3-forensics",
        __version__,
    ]
    cwd = tmp_path  # not the checkout: the installed package answers, not ./eagle3_forensics
    proc = subprocess.run(
        [
            str(exe),
            "diagnose",
            str(DEMO / "drafters" / "d2t_absolute"),
            "--target",
            str(DEMO / "target"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd,
    )
    assert proc.returncode == 1, proc.stderr  # an error finding
    report = json.loads(proc.stdout)
    assert report["schema"] == "eagle3-forensics/diagnose/1" and report["error"] is None
    assert "D2T_ABSOLUTE" in {f["code"] for f in report["findings"]}
    # the pipx install is the core: torch is not there, and the probe says which extra brings it
    probe = subprocess.run(
        [
            str(exe),
            "probe",
            str(DEMO / "drafters" / "healthy"),
            "--target",
            str(DEMO / "target"),
            "--prompts",
            str(DEMO / "prompts.jsonl"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd,
    )
    assert probe.returncode == 2 and json.loads(probe.stdout)["error"]["code"] == "MISSING_EXTRA"
    assert probe.stderr.strip().endswith("pip install 'eagle3-forensics[probe]'")
