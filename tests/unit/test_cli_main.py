"""``cli.main`` maps only our errors to their exit codes; anything else is a bug (exit 3, one line)."""

from __future__ import annotations

import argparse

import pytest

from eagle3_forensics.cli import diagnose as diagnose_cmd
from eagle3_forensics.cli.main import COMMANDS, build_parser, main
from eagle3_forensics.errors import BadArgumentsError, ExitCode, ServerFaultError, UnusableInputError


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (UnusableInputError("no such file"), ExitCode.UNUSABLE),
        (BadArgumentsError("unknown engine"), ExitCode.UNUSABLE),
        (ServerFaultError("refused"), ExitCode.SERVER),
        (ValueError("unknown finding code 'X'"), ExitCode.INTERNAL),  # a bug, not bad input
        (KeyError("k"), ExitCode.INTERNAL),
        (KeyboardInterrupt(), 130),
    ],
)
def test_exit_code_of_each_error(
    exc: BaseException, code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(args: argparse.Namespace) -> int:
        raise exc

    monkeypatch.setattr(diagnose_cmd, "run", boom)
    assert main(["diagnose", "x"]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("eagle3-forensics: "), err
    assert ("please report it" in err) == (code == ExitCode.INTERNAL), err


def test_every_command_module_registers_a_handler() -> None:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert len(sub.choices) == len(COMMANDS)
    for name, parser in sub.choices.items():
        assert callable(parser.get_default("func")), name


def test_a_reader_that_closes_the_output_early_is_not_an_internal_error() -> None:
    """``eagle3-forensics … | head``: the pipe closes under us; silent, exit 141 (as for SIGPIPE)."""
    import os  # only this test spawns a process
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # no reader left: the first write fails with EPIPE
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "eagle3_forensics", "schema", "diagnose"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == ExitCode.OUTPUT_CLOSED == 141
    assert proc.stderr == ""  # no "internal error", no traceback
