"""One exception hierarchy and one exit-code table for every surface.

Surfaces (the CLI, the runner) turn a :class:`ForensicsError` into its one-line message and its
:attr:`~ForensicsError.exit_code`; anything else that escapes is a bug: exit
:attr:`ExitCode.INTERNAL` with one line and a request to report it. Never a traceback.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The documented exit codes of every command (docs/cli.md "Exit codes")."""

    OK = 0
    """No error-severity finding, or the command succeeded."""
    FINDINGS = 1
    """At least one error-severity finding, a refused or unverified operation, or a failed gate."""
    UNUSABLE = 2
    """Unusable input (missing, truncated or unparseable file, refused pickle, missing shard), bad arguments,
    or a missing optional dependency (``extras.MissingExtraError``: the line names the extra)."""
    INTERNAL = 3
    """An internal error: a bug in eagle3-forensics. Please report it."""
    SERVER = 4
    """A live server could not be probed (refused, timed out, HTTP error, malformed answer)."""
    INTERRUPTED = 130
    """Interrupted (Ctrl-C), as shells report a SIGINT."""
    OUTPUT_CLOSED = 141
    """The reader closed the output early (``… | head``), as shells report a SIGPIPE; silent."""


def one_line(text: object) -> str:
    """``text`` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(str(text).split())


def error_line(exc: BaseException, limit: int = 200) -> str:
    """An exception as the tail of a one-line error message (its type when it says nothing), cut at ``limit``."""
    return one_line(str(exc) or type(exc).__name__)[:limit]


class ForensicsError(Exception):
    """Base of every error a surface reports as a one-line message with a documented exit code."""

    exit_code: ExitCode = ExitCode.UNUSABLE
    code: str = "UNUSABLE_INPUT"
    """A stable, machine-readable name for the JSON ``error`` object."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path

    def __str__(self) -> str:
        return one_line(super().__str__())  # guarantee one line


class UnusableInputError(ForensicsError):
    """The input cannot be analysed at all. Its message is one line meant for the user."""


class BadArgumentsError(ForensicsError):
    """The command line (or the API call) asks for something impossible: unknown engine, bad range."""

    code = "BAD_ARGUMENTS"


class ServerFaultError(ForensicsError):
    """A live server could not be probed."""

    exit_code = ExitCode.SERVER
    code = "SERVER_FAULT"


__all__ = [
    "BadArgumentsError",
    "ExitCode",
    "ForensicsError",
    "ServerFaultError",
    "UnusableInputError",
    "error_line",
    "one_line",
]
