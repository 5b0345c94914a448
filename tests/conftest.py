"""Shared set-up for every test tier.

pytest puts this directory on ``sys.path`` (rootdir conftest, prepend import mode), so every tier
imports the shared fixture builders with ``from builders import ...``.

The JSON contract (docs/json.md, tests/jsoncontract.py): every object any command prints with
``--json`` (in process or in a subprocess) and every ``summary.json``/baseline the runner writes is
validated against its published schema after each test; the terminal summary says how many.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsoncontract import JsonLog, summary_lines
from paths import DEMO, ROOT
from tiers import TIER_DIRS

from eagle3_forensics import schemas


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root (the checkout under test)."""
    return ROOT


@pytest.fixture(scope="session")
def demo_dir() -> Path:
    """``data/demo``: the deterministic demo world shipped with the repository."""
    return DEMO


@pytest.fixture(scope="session")
def hostile_drafter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's healthy drafter in a directory named ``builders.DIR_PAYLOAD``, with an extra
    tensor named ``builders.TENSOR_PAYLOAD``: script-injection payloads every view must escape.
    Shared read-only; a test that needs it inside its own tree links to it."""
    from builders import build_hostile_drafter  # imports torch: skips where it is absent

    return build_hostile_drafter(tmp_path_factory.mktemp("hostile"), DEMO / "drafters" / "healthy")


# -- every contract object the suite produces is validated against its schema -----------------------

_LOG: JsonLog | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _LOG
    if importlib.util.find_spec("jsonschema") is None:  # an environment without the dev extra
        return
    _LOG = JsonLog()
    os.environ[schemas.LOG_ENV] = str(_LOG.path)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _LOG is not None:
        os.environ.pop(schemas.LOG_ENV, None)
        _LOG.close()


@pytest.fixture
def local_no_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """urllib honours *_proxy variables; a test's fake servers live on 127.0.0.1."""
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    yield


@pytest.fixture(autouse=True)
def _contract_json() -> Iterator[None]:
    """After each test: every JSON object printed or written meanwhile matches its schema."""
    yield
    problems = _LOG.problems() if _LOG is not None else []
    if problems:
        pytest.fail(
            f"{len(problems)} JSON object(s) do not match their published schema:\n"
            + "\n".join(problems[:3]),
            pytrace=False,
        )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in summary_lines():
        terminalreporter.write_line(line)


# -- test tiers: `make test` runs the fast tier, `make test-all` every tier but engine and loaders --


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            top = Path(str(item.path)).resolve().relative_to(ROOT / "tests").parts[0]
        except (ValueError, IndexError):
            continue
        for marker in TIER_DIRS.get(top, ()):
            item.add_marker(marker)
