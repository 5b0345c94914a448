"""Helpers of the packaging tier (``make test-packaging``, marker ``packaging``): needs PyPI, so not in ``make test``.

One wheel and sdist are built per session (``python -m build``) and every test installs or resolves
that wheel. pip runs with ``PIP_CONSTRAINT`` emptied: this machine's pip configuration caps torch at
the releases on its disk (``/etc/xdg/pip``), and the resolver checks must reflect PyPI, where
SGLang 0.5.23 pins ``torch==2.14.1`` and torch 2.15 is out. Each test records its wall time in
``build/packaging-times.json`` (docs/development.md quotes it).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from paths import ROOT

TIMES = ROOT / "build" / "packaging-times.json"


def pip_env(**extra: str) -> dict[str, str]:
    """The environment of a pip run that sees PyPI as it is (no machine cap, no local wheel dir)."""
    env = dict(os.environ)
    env.update(
        PIP_CONSTRAINT="", PIP_FIND_LINKS="", PIP_EXTRA_INDEX_URL="", PIP_DISABLE_PIP_VERSION_CHECK="1"
    )
    env.pop("PYTHONPATH", None)  # the checkout must not shadow what is installed (unless asked)
    env.update(extra)
    return env


def run(cmd: list[str], *, timeout: float, **kw: object) -> subprocess.CompletedProcess[str]:
    """``cmd`` with its output captured; a failure shows the tail of both streams."""
    kw.setdefault("env", pip_env())
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload]
    assert proc.returncode == 0, (
        f"{cmd[:4]} exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc


def record_time(name: str, seconds: float) -> None:
    """Keep ``name``'s wall time in build/packaging-times.json (merged across tests and runs)."""
    TIMES.parent.mkdir(exist_ok=True)
    times = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    times[name] = round(seconds, 1)
    TIMES.write_text(json.dumps(dict(sorted(times.items())), indent=2) + "\n")


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path
