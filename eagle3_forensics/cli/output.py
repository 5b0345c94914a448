"""The JSON contract of every command: exactly one object on stdout, on every exit code.

Every object carries ``schema`` (``eagle3-forensics/<command>/<major>``), ``exit_code`` and
``error`` (``null``, or ``{"code", "message", "path"}`` when the command could not do its job);
the command's own members sit beside them. Each has a published JSON Schema
(:mod:`eagle3_forensics.schemas`, docs/json.md).

:func:`json_session` (entered by ``cli.main`` for ``--json`` runs) sends anything else printed to
stdout to stderr, so stdout holds the one object and nothing else; ``cli.main`` prints the error
object itself when a command fails before emitting.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from eagle3_forensics.errors import ForensicsError, one_line
from eagle3_forensics.schemas import PREFIX, log_object, strict

SCHEMA_PREFIX = PREFIX

INTERNAL_ERROR = "INTERNAL_ERROR"
INTERRUPTED = "INTERRUPTED"


def schema_name(command: str, major: int = 1) -> str:
    """``eagle3-forensics/<command>/<major>``; ``command`` uses dashes (``vocab-classify``)."""
    return f"{SCHEMA_PREFIX}/{command}/{major}"


def error_object(
    exc: BaseException | None, code: str | None = None, path: str | None = None
) -> dict[str, Any] | None:
    """The ``error`` member for ``exc`` (``None`` when there is no error)."""
    if exc is None:
        return None
    if isinstance(exc, ForensicsError):
        message = str(exc) or type(exc).__name__
        return {"code": code or exc.code, "message": message, "path": exc.path or path}
    return {
        "code": code or INTERNAL_ERROR,
        "message": one_line(f"{type(exc).__name__}: {exc}")[:500],
        "path": path,
    }


def error_dict(code: str, message: str, path: str | None = None) -> dict[str, Any]:
    """An ``error`` member built from parts (a non-empty one-line message)."""
    return {"code": code, "message": one_line(message) or code, "path": path}


def envelope(
    command: str,
    payload: dict[str, Any] | None,
    exit_code: int,
    error: BaseException | dict[str, Any] | None = None,
    *,
    major: int = 1,
) -> dict[str, Any]:
    """``payload`` wrapped in the contract's members (they come first; the payload cannot override them)."""
    err = error if isinstance(error, dict) or error is None else error_object(error)
    body = {k: v for k, v in (payload or {}).items() if k not in ("schema", "exit_code", "error")}
    return {"schema": schema_name(command, major), "exit_code": int(exit_code), "error": err, **body}


class _Session:
    """Where the one object goes (the real stdout of a ``--json`` run) and how many were printed."""

    stream: TextIO | None = None
    emitted: int = 0


_session = _Session()


@contextlib.contextmanager
def json_session(active: bool) -> Iterator[None]:
    """One CLI run: count the objects printed; with ``active`` (``--json``), everything else that is
    printed to stdout goes to stderr instead."""
    saved = (_session.stream, _session.emitted)
    _session.stream, _session.emitted = sys.stdout, 0
    try:
        if active:
            with contextlib.redirect_stdout(sys.stderr):
                yield
        else:
            yield
    finally:
        _session.stream, _session.emitted = saved


def emitted() -> int:
    """How many JSON objects the current CLI run has printed."""
    return _session.emitted


def dumps(obj: Any) -> str:
    """Strict JSON text (NaN/Infinity as ``null``) of ``obj``, indented, with a final newline."""
    return json.dumps(strict(obj), indent=2, default=str, allow_nan=False) + "\n"


def emit_json(
    command: str,
    payload: dict[str, Any] | None,
    exit_code: int,
    error: BaseException | dict[str, Any] | None = None,
    *,
    major: int = 1,
) -> None:
    """Print the one JSON object of a command run."""
    obj = strict(
        json.loads(json.dumps(envelope(command, payload, exit_code, error, major=major), default=str))
    )
    stream = _session.stream or sys.stdout
    stream.write(json.dumps(obj, indent=2, allow_nan=False) + "\n")
    stream.flush()
    _session.emitted += 1
    log_object(obj)


__all__ = [
    "INTERNAL_ERROR",
    "INTERRUPTED",
    "SCHEMA_PREFIX",
    "dumps",
    "emit_json",
    "emitted",
    "envelope",
    "error_dict",
    "error_object",
    "json_session",
    "schema_name",
    "strict",
]
