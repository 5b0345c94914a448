"""The published JSON Schemas (draft 2020-12) of every machine-readable output.

One file per output, ``<name>.json``, whose ``schema`` member is ``eagle3-forensics/<name>/<major>``:
one per command's ``--json`` (``diagnose``, ``vocab-classify``, ...), ``cli`` for argument errors
outside any command, ``run-summary`` (``summary.json``) and ``baseline`` (the gate baseline).
The definitions every file shares (the envelope, the error object, a finding) live in
``_common.json``; :func:`load` merges them in, so what it returns (and ``eagle3-forensics schema
NAME`` prints) is self-contained. docs/json.md lists them.

Adding an output = adding ``<name>.json`` here (and a line in docs/json.md); nothing else registers it.

This module is a leaf (standard library only): the CLI and the runner use :func:`log_object`,
and ``jsonschema`` is imported only by :func:`validate` (a development dependency).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
from typing import Any

PREFIX = "eagle3-forensics"
DIALECT = "https://json-schema.org/draft/2020-12/schema"
LOG_ENV = "E3F_JSON_LOG"
"""When set to a file path, every contract object printed or written is also appended there, one
per line (the test suite validates them all against their schemas)."""

_COMMON = "_common"


def _files() -> Any:
    from importlib import resources  # heavy: importlib.resources (4 ms of every CLI start; only schema reads)

    return resources.files(__name__)


@functools.cache
def names() -> tuple[str, ...]:
    """Every published schema name, sorted (``diagnose``, ``run-summary``, ...)."""
    return tuple(
        sorted(
            f.name[: -len(".json")]
            for f in _files().iterdir()
            if f.name.endswith(".json") and not f.name.startswith("_")
        )
    )


@functools.cache
def _raw(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((_files() / f"{name}.json").read_text(encoding="utf-8"))
    return data


def load(name: str) -> dict[str, Any]:
    """The self-contained schema ``name`` (the shared ``$defs`` merged in). ``KeyError`` if unknown."""
    if name not in names():
        raise KeyError(name)
    schema = copy.deepcopy(_raw(name))
    common = _raw(_COMMON)["$defs"]
    own = schema.setdefault("$defs", {})
    clash = set(own) & set(common)
    if clash:
        raise ValueError(f"schema {name}: $defs {sorted(clash)} shadow the shared definitions")
    schema["$defs"] = {**copy.deepcopy(common), **own}
    return schema


def schema_id(name: str) -> str:
    """The ``schema`` member of objects following ``name``: ``eagle3-forensics/<name>/<major>``."""
    const = _raw(name)["properties"]["schema"]["const"]
    return str(const)


def major(name: str) -> int:
    return int(schema_id(name).rsplit("/", 1)[1])


def name_of(obj: Any) -> str | None:
    """The schema name an object declares (its ``schema`` member), or ``None``."""
    if not isinstance(obj, dict) or not isinstance(obj.get("schema"), str):
        return None
    parts = obj["schema"].split("/")
    if len(parts) != 3 or parts[0] != PREFIX:
        return None
    return parts[1]


def validate(obj: Any, name: str | None = None) -> str:
    """Validate ``obj`` against its schema (``name``, else the one its ``schema`` member names).

    Returns the schema name; raises ``LookupError`` for an unknown schema and
    ``jsonschema.ValidationError`` for an invalid object. Needs ``jsonschema`` (dev extra).
    """
    name = name or name_of(obj)
    if name is None or name not in names():
        raise LookupError(f"no published schema for {str(obj)[:120]!r} (schema member {name!r})")
    _validator(name).validate(obj)
    return name


@functools.cache
def _validator(name: str) -> Any:
    import jsonschema  # optional: jsonschema (the dev extra; only tests validate)

    schema = load(name)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def strict(value: Any) -> Any:
    """``value`` with NaN/Infinity replaced by ``None``: strict JSON that ``jq`` reads."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def log_object(obj: Any) -> None:
    """Append ``obj`` (one line of JSON) to the file named by ``E3F_JSON_LOG``, when it is set."""
    target = os.environ.get(LOG_ENV)
    if not target:
        return
    line = (json.dumps(obj, default=str) + "\n").encode("utf-8")
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)  # one write with O_APPEND: concurrent writers never interleave lines
    finally:
        os.close(fd)


__all__ = [
    "DIALECT",
    "LOG_ENV",
    "PREFIX",
    "load",
    "log_object",
    "major",
    "name_of",
    "names",
    "schema_id",
    "strict",
    "validate",
]
