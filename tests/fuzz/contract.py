"""One harness for the JSON contract of every command (docs/json.md).

:func:`run_cli` runs ``eagle3_forensics.cli.main(argv)`` in process (a subprocess per example would
cost a torch import each) with stdout and stderr captured and a hard time limit, then
:func:`check` asserts the contract: a documented exit code, exactly one JSON object on stdout
that validates against its published schema and agrees with the exit code, no traceback, and
within the time bound. :func:`run_subprocess` does the same through a real process.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from jsoncontract import FUZZ_RUNS, FUZZ_SECONDS, validate_contract
from paths import ROOT

from eagle3_forensics import schemas
from eagle3_forensics.cli import main
from eagle3_forensics.errors import ExitCode

TIME_LIMIT_S = float(os.environ.get("FUZZ_TIME_LIMIT_S", "10"))
"""A single in-process run on the tiny fixtures takes milliseconds to a second; far beyond is a hang."""
HARD_LIMIT_S = 60  # SIGALRM: a hang fails the example instead of blocking the run

DOCUMENTED = frozenset(int(c) for c in ExitCode) - {int(ExitCode.INTERNAL)}
"""Every exit code a run may end with: an internal error (3) is a bug, never a documented outcome."""


@dataclass
class Outcome:
    argv: list[str]
    code: int
    stdout: str
    stderr: str
    seconds: float
    obj: dict[str, Any] | None = None

    def __str__(self) -> str:
        return (
            f"argv {self.argv}\nexit {self.code} after {self.seconds:.2f} s\n"
            f"stderr: {self.stderr[-2000:]}\nstdout: {self.stdout[:2000]}"
        )


class _Hang(BaseException):  # BaseException: no `except Exception` in the package can swallow it
    pass


@contextlib.contextmanager
def alarm(seconds: int) -> Iterator[None]:
    def on_alarm(signum: int, frame: object) -> None:
        raise _Hang(f"still running after {seconds} s")

    if threading.current_thread() is not threading.main_thread():
        yield  # signals only reach the main thread; the elapsed-time assertion still applies
        return
    old = signal.signal(signal.SIGALRM, on_alarm)
    pending = signal.alarm(seconds)  # another alarm (e.g. pytest-timeout's) is re-armed afterwards
    start = time.monotonic()
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        if pending:
            signal.alarm(max(1, pending - int(time.monotonic() - start)))


@contextlib.contextmanager
def _no_json_log() -> Iterator[None]:
    """The harness validates what it runs itself; the session log (tests/conftest.py) would do it twice."""
    saved = os.environ.pop(schemas.LOG_ENV, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[schemas.LOG_ENV] = saved


def run_cli(argv: Sequence[object]) -> Outcome:
    """``eagle3-forensics ARGV`` in process: exit code, stdout, stderr and wall time."""
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    try:
        with (
            _no_json_log(),
            alarm(HARD_LIMIT_S),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            code = main([str(a) for a in argv])
    except _Hang as exc:  # an AssertionError, so hypothesis reports the example that hung
        raise AssertionError(
            f"{exc}: argv {list(map(str, argv))}\nstderr: {err.getvalue()[-2000:]}"
        ) from None
    return Outcome(list(map(str, argv)), code, out.getvalue(), err.getvalue(), time.perf_counter() - start)


def run_subprocess(argv: Sequence[str], cwd: Path = ROOT, timeout: float = 180) -> Outcome:
    """``python -m eagle3_forensics ARGV`` as a real process."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "eagle3_forensics", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        check=False,
    )
    return Outcome(
        list(map(str, argv)), proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - start
    )


def one_object(stdout: str) -> dict[str, Any]:
    """The single JSON object that is the whole of ``stdout`` (nothing before or after it)."""
    text = stdout.strip()
    assert text.startswith("{"), "stdout does not start with a JSON object"
    obj, end = json.JSONDecoder().raw_decode(text)
    assert text[end:].strip() == "", f"more than one JSON value on stdout: {text[end:][:200]!r}"
    assert isinstance(obj, dict)
    return obj


def check(
    outcome: Outcome,
    schema: str,
    codes: frozenset[int] | set[int] = DOCUMENTED,
    *,
    time_limit: float = TIME_LIMIT_S,
    json_output: bool = True,
) -> Outcome:
    """Assert the contract on one run (``schema``: the schema name its object must declare)."""
    info = str(outcome)
    assert outcome.code in codes, f"undocumented exit code {outcome.code}\n{info}"
    assert "Traceback" not in outcome.stderr, info
    assert outcome.seconds < time_limit, f"took {outcome.seconds:.1f} s (limit {time_limit} s)\n{info}"
    if outcome.code >= 2:  # unusable input, bad arguments, server fault: one line saying why
        assert any(ln.startswith("eagle3-forensics") for ln in outcome.stderr.splitlines()), info
    FUZZ_RUNS[schema] += 1
    FUZZ_SECONDS[schema] += outcome.seconds
    if not json_output:
        return outcome
    try:
        obj = one_object(outcome.stdout)
    except (AssertionError, ValueError) as exc:
        raise AssertionError(f"{exc}\n{info}") from None
    try:
        name = validate_contract(obj)
    except Exception as exc:
        raise AssertionError(f"not valid against its schema: {str(exc)[:1500]}\n{info}") from None
    assert name == schema, f"schema {obj.get('schema')}, expected {schema}\n{info}"
    assert obj["exit_code"] == outcome.code, info
    assert (obj["error"] is None) == (outcome.code in (0, 1)), info
    outcome.obj = obj
    return outcome


def files_digest(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (symlinks followed): to prove a run left them alone."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


FUZZ_SCALE = float(os.environ.get("FUZZ_SCALE", "1"))
FUZZ_RANDOM = os.environ.get("FUZZ_RANDOM") == "1"
"""CI runs a fixed (derandomized) set of examples, so a red build is the code's, not the dice's;
``FUZZ_RANDOM=1 FUZZ_SCALE=5`` explores new ones (what found the bugs fixed alongside this harness)."""


def examples(n: int) -> int:
    """``n`` examples scaled by ``FUZZ_SCALE`` (at least one)."""
    return max(1, round(n * FUZZ_SCALE))


def FUZZ_SETTINGS(max_examples: int) -> settings:  # noqa: N802 - reads as the settings constant it replaced
    """hypothesis settings of the contract fuzz: ``max_examples`` runs, no per-example deadline
    (the harness has its own time bound), no shrinking past a found failure's first report."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=not FUZZ_RANDOM,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
