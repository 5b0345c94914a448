"""``cli.main`` maps only our errors to their exit codes; anything else is a bug (exit 3, one line)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

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
    assert list(sub.choices) == list(COMMANDS)
    for name, parser in sub.choices.items():
        assert callable(parser.get_default("func")), name


@pytest.mark.parametrize("argv", [["diagnose", "d", "--json"], ["vocab", "classify", "d", "--json"]])
def test_a_command_line_builds_its_command_only_and_parses_the_same(argv: list[str]) -> None:
    one = build_parser(argv)
    sub = next(a for a in one._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == [argv[0]]
    assert vars(one.parse_args(argv)) == vars(build_parser().parse_args(argv))


def test_one_command_imports_no_other_command_module(repo_root: Path) -> None:
    """The start-up of ``inspect`` pays for ``inspect`` alone (docs/benchmarks.md "CLI start-up")."""
    code = (
        "import json, sys\n"
        "from eagle3_forensics.cli.main import main\n"
        "main(['inspect', sys.argv[1]])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('eagle3_forensics.cli.'))), file=sys.stderr)\n"
    )
    drafter = repo_root / "data" / "demo" / "drafters" / "healthy"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(drafter)], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = json.loads(proc.stderr.strip().splitlines()[-1])
    assert loaded == [
        "eagle3_forensics.cli.inspect",
        "eagle3_forensics.cli.main",
        "eagle3_forensics.cli.output",
    ]


def test_a_reader_that_closes_the_output_early_is_not_an_internal_error() -> None:
    """``eagle3-forensics … | head``: the pipe closes under us; silent, exit 141 (as for SIGPIPE)."""
    import os

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
