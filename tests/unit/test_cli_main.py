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
