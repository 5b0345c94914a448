"""Fixtures of the packaging tier (``make test-packaging``, marker ``packaging``; pkgtools.py says why
pip runs with ``PIP_CONSTRAINT`` emptied): one wheel and sdist per session, and each test's wall time."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import pytest
from pkgtools import ROOT, Dist, record_time, run


@pytest.fixture
def timed(request: pytest.FixtureRequest) -> Iterator[None]:
    """Record the test's wall time under its id."""
    start = time.monotonic()
    yield
    record_time(request.node.name, time.monotonic() - start)


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """The wheel and sdist of this checkout, built once (isolated build env from PyPI)."""
    out = tmp_path_factory.mktemp("dist")
    start = time.monotonic()
    run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], timeout=600, cwd=ROOT)
    record_time("build", time.monotonic() - start)
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(out.iterdir())
    return Dist(wheels[0], sdists[0])
