"""The wheel installs beside each engine it diagnoses without moving that engine's pins.

``pip install --dry-run --ignore-installed --report`` resolves the wheel with its engine-side extras
(``probe``, ``server``, ``offline``) next to one engine release from PyPI and nothing is installed.
vLLM 0.34.0 pins ``flashinfer-python==0.7.3``, which PyPI does not carry (vLLM alone fails to
resolve the same way, asserted below), so for vLLM the wheel is resolved beside the requirements of
vLLM's released METADATA (``pip download --no-deps vllm==0.34.0``) less that one pin.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from pkgtools import Dist, pip_env, run

pytestmark = pytest.mark.packaging

EXTRAS = "probe,server,offline"

# release -> (what its own METADATA pins that we also need, requirements PyPI cannot satisfy)
ENGINES: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {
    "sglang==0.5.23": ({"torch": "2.14.1", "transformers": "5.19.0", "tokenizers": "0.23.2"}, ()),
    "vllm==0.34.0": ({"torch": "2.14.0"}, ("flashinfer-python==0.7.3",)),
    # speculators gives ranges (torch>=2.9.0,<=2.14.1; transformers>=5.0.0,<=5.19.0): the newest allowed
    "speculators==0.9.0": ({"torch": "2.14.1", "transformers": "5.19.0"}, ()),
}


def _dry_run(reqs: list[str], report: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
    return subprocess.run(
        [*cmd, "--report", str(report), *reqs], capture_output=True, text=True, timeout=900, env=pip_env()
    )


def _released_requirements(release: str, tmp: Path) -> list[Requirement]:
    """The unconditional requirements (markers true here) in ``release``'s released wheel METADATA."""
    run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(tmp), release], timeout=600)
    wheel = next(tmp.glob("*.whl"))
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    reqs = [Requirement(r) for r in Parser().parsestr(meta).get_all("Requires-Dist") or []]
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})]


@pytest.mark.parametrize("release", list(ENGINES))
def test_wheel_resolves_beside_engine(release: str, dist: Dist, tmp_path: Path, timed: None) -> None:
    pins, unpublished = ENGINES[release]
    name, version = release.split("==")
    ours = f"eagle3-forensics[{EXTRAS}] @ {dist.wheel.as_uri()}"
    engine_reqs = _released_requirements(release, tmp_path / "dl")
    if unpublished:
        alone = _dry_run([release], tmp_path / "alone.json")
        assert alone.returncode != 0 and all(u in alone.stderr for u in unpublished), alone.stderr[-2000:]
        kept = [str(r) for r in engine_reqs if str(r) not in unpublished]
        assert len(kept) == len(engine_reqs) - len(unpublished)
        proc = _dry_run([ours, *kept], tmp_path / "r.json")
    else:
        proc = _dry_run([ours, release], tmp_path / "r.json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    got: dict[str, str] = {
        canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"] for i in report["install"]
    }
    assert got["eagle3-forensics"] == dist.wheel.name.split("-")[1]
    if not unpublished:
        assert got[name] == version
    for package, pinned in pins.items():
        assert got[package] == pinned, f"{release}: {package} {got[package]} instead of {pinned}"
    for req in engine_reqs:  # every requirement of the engine holds in the joint solution
        if str(req) not in unpublished:
            assert got[canonicalize_name(req.name)] in req.specifier, (
                f"{release}: {req} vs {got[canonicalize_name(req.name)]}"
            )
