"""environment.yml mirrors pyproject.toml: every runtime and extra dependency appears in both."""

from __future__ import annotations

import re
import tomllib

import yaml
from paths import ROOT

# pip names whose conda-forge package is spelled differently
CONDA_NAMES = {
    "torch": "pytorch-cpu",
    "matplotlib": "matplotlib-base",
    "types-pyyaml": "types-pyyaml",
    "build": "python-build",
}


def _name(spec: str) -> str:
    return re.split(r"[<>=!~\[ ;]", spec.strip(), maxsplit=1)[0].lower()


def test_environment_mirrors_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(s) for s in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        wanted |= {_name(s) for s in extra if not s.startswith("eagle3-forensics")}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda, pip = set(), set()
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            pip |= {_name(s) for s in dep["pip"]}
        else:
            conda.add(_name(dep.replace("=", "==", 1) if "=" in dep and ">" not in dep else dep))
    missing = [w for w in wanted if CONDA_NAMES.get(w, w) not in conda and w not in pip]
    assert not missing, f"in pyproject.toml but not environment.yml: {missing}"


def test_torch_build_is_in_the_probe_range() -> None:
    """The core has no torch; environment.yml's torch (the build the tests run) is one the probe extra admits."""
    from packaging.specifiers import SpecifierSet

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(_name(s) == "torch" for s in project["dependencies"])
    torch_spec = next(s for s in project["optional-dependencies"]["probe"] if _name(s) == "torch")
    assert "2.13.0" in SpecifierSet(torch_spec.removeprefix("torch"))
    assert "pytorch-cpu=2.13" in (ROOT / "environment.yml").read_text()
