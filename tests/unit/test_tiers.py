"""The test tiers: `make test` (fast) is `make test-all` less the slow markers, and nothing else.

A test is in exactly one of the two selections because the fast tier's marker expression is test-all's
(pyproject addopts) plus ``not slow and not notebooks and not browser``; these tests keep the Makefile,
pyproject, .ci/run and conftest's directory markers in step so that stays true.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

from paths import ROOT
from tiers import TIER_DIRS

SLOW_MARKERS = {"slow", "notebooks", "browser"}


def _excluded(expr: str) -> set[str]:
    """The markers of an ``not a and not b ...`` expression (the only form the tiers use)."""
    terms = [t.strip() for t in expr.split(" and ")]
    assert all(re.fullmatch(r"not \w+", t) for t in terms), expr
    return {t[4:] for t in terms}


def _ini() -> dict[str, Any]:
    ini: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"][
        "ini_options"
    ]
    return ini


def _recipe(makefile: str, target: str) -> str:
    m = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert m, f"no recipe for {target}"
    return m.group(1)


def test_fast_tier_is_test_all_less_the_slow_markers() -> None:
    makefile = (ROOT / "Makefile").read_text()
    fast = re.search(r"^FAST_TIER := (.+)$", makefile, re.M)
    assert fast, "Makefile: FAST_TIER is gone"
    addopts = str(_ini()["addopts"])
    all_expr = re.search(r"-m '([^']+)'", addopts)
    assert all_expr, addopts
    assert _excluded(fast.group(1)) == _excluded(all_expr.group(1)) | SLOW_MARKERS
    assert '-m "$(FAST_TIER)"' in _recipe(makefile, "test")
    assert " -m " not in _recipe(makefile, "test-all")  # addopts' own selection: every tier but its own
    assert "--strict-markers" in addopts  # a misspelt tier marker is an error, not a test in the wrong tier


def test_tier_markers_are_registered_and_ci_runs_test_all() -> None:
    registered = {str(m).split(":")[0] for m in _ini()["markers"]}
    assert registered >= SLOW_MARKERS
    assert {m for marks in TIER_DIRS.values() for m in marks} <= registered
    assert all((ROOT / "tests" / d).is_dir() for d in TIER_DIRS)
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test-all\b.*--durations=", ci, re.M), "CI runs make test-all with --durations"
    assert not re.search(r"^make test\s*$", ci, re.M)
