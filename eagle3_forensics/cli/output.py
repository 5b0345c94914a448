"""The JSON contract of every command: exactly one object on stdout, on every exit code.

Every object carries ``schema`` (``eagle3-forensics/<command>/<major>``), ``exit_code`` and
``error`` (``null``, or ``{"code", "message", "path"}`` when the command could not do its job);
the command's own fields sit beside them. docs/json.md lists the schemas.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from eagle3_forensics.errors import ForensicsError, one_line

SCHEMA_PREFIX = "eagle3-forensics"


def schema_name(command: str, major: int = 1) -> str:
    """``eagle3-forensics/<command>/<major>``; ``command`` uses dashes (``vocab-classify``)."""
    return f"{SCHEMA_PREFIX}/{command}/{major}"


def error_object(exc: BaseException | None, code: str | None = None) -> dict[str, Any] | None:
    """The ``error`` member for ``exc`` (``None`` when there is no error)."""
    if exc is None:
        return None
    if isinstance(exc, ForensicsError):
        return {"code": code or exc.code, "message": str(exc), "path": exc.path}
    return {
        "code": code or "INTERNAL_ERROR",
        "message": one_line(f"{type(exc).__name__}: {exc}")[:500],
        "path": None,
    }


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


def strict(value: Any) -> Any:
    """``value`` with NaN/Infinity replaced by ``None``: the output is strict JSON that ``jq`` reads."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def emit_json(
    command: str,
    payload: dict[str, Any] | None,
    exit_code: int,
    error: BaseException | dict[str, Any] | None = None,
    *,
    major: int = 1,
) -> None:
    """Print the one JSON object of a command run."""
    obj = envelope(command, payload, exit_code, error, major=major)
    sys.stdout.write(json.dumps(strict(obj), indent=2, default=str, allow_nan=False) + "\n")


def print_json(obj: object) -> None:
    """Print ``obj`` as indented JSON (the commands that do not use the envelope yet)."""
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


__all__ = ["SCHEMA_PREFIX", "emit_json", "envelope", "error_object", "print_json", "schema_name", "strict"]
