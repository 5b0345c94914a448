"""The ``eagle3-forensics`` command line (also ``python -m eagle3_forensics``).

One module per command (``cli/<command>.py``, each with ``add_parser(sub, parser_class)`` that sets
``func``, and ``json_command`` when it has ``--json``); this module builds the parser from
:data:`COMMANDS` and maps errors to exit codes (``errors.ExitCode``, docs/cli.md "Exit codes").
A command line that names a command imports that command's module only: the other fourteen
would add a fifth to the start-up of every call (docs/benchmarks.md "CLI start-up").

Exit codes: 0 no error finding / success; 1 at least one error finding; 2 unusable input
or bad arguments (one line on stderr, never a traceback); 3 an internal error (a bug: please report);
4 a live server could not be probed. A command whose optional dependencies are missing says which
extra to install (``MISSING_EXTRA``, exit 2: :mod:`eagle3_forensics.extras`). Only a :class:`~eagle3_forensics.errors.ForensicsError` maps to
its own code (2 or 4): any other exception that escapes a command — a ``ValueError`` included — is a
bug in eagle3-forensics, so user input must be turned into one of ours where it is read.

With ``--json`` every exit prints exactly one JSON object (:mod:`eagle3_forensics.cli.output`):
argument errors, unusable input, internal errors and interrupts included. Errors are also one
line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NoReturn

from eagle3_forensics import __version__, extras
from eagle3_forensics.cli.output import (
    INTERNAL_ERROR,
    INTERRUPTED,
    emit_json,
    emitted,
    error_dict,
    json_session,
)
from eagle3_forensics.errors import BadArgumentsError, ExitCode, ForensicsError, one_line

# The commands, in the order of `--help`; command `a-b` is the module `cli/a_b.py`.
COMMANDS: tuple[str, ...] = (
    "diagnose",
    "inspect",
    "repair",
    "make-demo",
    "report",
    "run",
    "merge-runs",
    "history",
    "probe",
    "probe-server",
    "vocab",
    "probe-offline",
    "audit-data",
    "merge",
    "schema",
)


def command_module(name: str) -> ModuleType:
    """The module of command ``name`` (one of :data:`COMMANDS`), imported on first use."""
    return importlib.import_module(f"eagle3_forensics.cli.{name.replace('-', '_')}")


NO_COMMAND = "cli"
"""The schema of an argument error outside any command with ``--json`` (``eagle3-forensics/cli/1``)."""


class _ArgumentsExit(SystemExit):
    """argparse's exit on bad arguments, carrying its message (still a ``SystemExit`` with code 2)."""

    def __init__(self, message: str) -> None:
        super().__init__(int(ExitCode.UNUSABLE))
        self.message = message


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        message = one_line(message)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise _ArgumentsExit(f"{self.prog}: {message}")


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """Every command's parser, or only the command's that ``argv`` names (its first word that is not
    an option): parsing that command line gives the same result either way, for less start-up."""
    named = next((a for a in argv if not a.startswith("-")), None)
    p = _Parser(prog="eagle3-forensics", description="Forensic debugging of EAGLE-3 drafters.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in (named,) if named in COMMANDS else COMMANDS:
        command_module(name).add_parser(sub, _Parser)
    return p


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def json_command_of(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str:
    """The schema an argument error of ``argv`` is reported under: the (sub)command's when it has
    ``--json`` output, else :data:`NO_COMMAND`."""
    current, name = parser, NO_COMMAND
    for word in (a for a in argv if not a.startswith("-")):
        subs = _subcommands(current)
        if word not in subs:
            break
        current = subs[word]
        name = current.get_default("json_command") or NO_COMMAND
    return name


def _fail(
    json_mode: bool,
    command: str,
    code: int,
    error: dict[str, Any],
    payload: dict[str, Any] | None = None,
    *,
    line: str | None = None,
) -> int:
    """One stderr line, and the JSON object unless the command already printed its one."""
    sys.stderr.write(f"eagle3-forensics: {line or error['message']}\n")
    if json_mode and not emitted():
        emit_json(command, payload, code, error)
    return int(code)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    options = arguments[: arguments.index("--")] if "--" in arguments else arguments  # after --: operands
    json_mode = "--json" in options
    with json_session(json_mode):
        return _main(arguments, json_mode)


def _main(arguments: list[str], json_mode: bool) -> int:
    parser = build_parser(arguments)
    try:
        args = parser.parse_args(arguments)
    except _ArgumentsExit as exc:  # the message is on stderr already
        if json_mode and not emitted():
            err = BadArgumentsError(exc.message)
            emit_json(json_command_of(parser, arguments), None, ExitCode.UNUSABLE, err)
        return int(ExitCode.UNUSABLE)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    json_mode = bool(getattr(args, "json", False))
    command = getattr(args, "json_command", None) or NO_COMMAND
    args.command_line = ["eagle3-forensics", *arguments]  # partial writers record how to re-make a shard

    def payload_for(exc: BaseException) -> dict[str, Any] | None:
        hook = getattr(args, "json_error_payload", None)
        return hook(args, exc) if hook is not None else None

    try:
        # A command's optional dependencies (its parser's ``extra``, and any optional module it meets
        # later): missing, they are the user's to install, exit 2 naming the extra (extras.py).
        purpose = f"'{command if command != NO_COMMAND else args.command}'"
        with extras.translated(purpose, getattr(args, "extra", None)):
            if getattr(args, "extra", None):
                extras.require(args.extra, purpose)
            return int(args.func(args))
    except ForensicsError as exc:
        path = exc.path or None
        return _fail(
            json_mode, command, exc.exit_code, error_dict(exc.code, str(exc), path), payload_for(exc)
        )
    except KeyboardInterrupt:
        return _fail(json_mode, command, ExitCode.INTERRUPTED, error_dict(INTERRUPTED, "interrupted"))
    except BrokenPipeError:
        return _output_closed()
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:  # any other OSError escaping a command is a bug
            return _internal(json_mode, command, exc)
        # a path argument the file system refuses outright (pathlib's exists() raises instead of False)
        name = str(exc.filename or "")
        message = f"a path is too long for the file system: {name[:60]}{'…' if len(name) > 60 else ''}"
        return _fail(json_mode, command, ExitCode.UNUSABLE, error_dict("BAD_ARGUMENTS", message))
    except Exception as exc:  # last resort: one line, never a traceback
        return _internal(json_mode, command, exc)


def _output_closed() -> int:
    """The reader of stdout went away (``… | head``): not an error of ours, and nobody to tell."""
    try:  # the interpreter flushes stdout at exit: point it at /dev/null so that flush cannot fail
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (captured in-process): nothing is flushed to it
        pass
    return int(ExitCode.OUTPUT_CLOSED)


def _internal(json_mode: bool, command: str, exc: BaseException) -> int:
    """A bug: one line (and the JSON object), never a traceback."""
    detail = one_line(f"{type(exc).__name__}: {exc}")[:300]
    return _fail(
        json_mode,
        command,
        ExitCode.INTERNAL,
        error_dict(INTERNAL_ERROR, f"internal error ({detail}); please report it"),
    )
