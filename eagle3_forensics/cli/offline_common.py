"""What probe-offline, audit-data and merge share: partial files, the unusable-result error, progress."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from eagle3_forensics.cli.output import envelope, error_object, strict
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.schemas import log_object

PARTIAL_KIND = "eagle3-forensics/partial/1"


def add_progress(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )


def progress_on(args: argparse.Namespace) -> bool:
    return bool(args.progress) if args.progress is not None else sys.stderr.isatty()


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and a rename."""
    p = Path(path)
    if p.parent and not p.parent.is_dir():
        raise UnusableInputError(f"output directory not found: {p.parent}", path=str(p))
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=str(p.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dumps(obj: Any) -> str:
    return json.dumps(strict(obj), indent=2, default=str, allow_nan=False) + "\n"


def write_partial(path: str | Path, command: str, payload: dict[str, Any]) -> None:
    write_atomic(path, dumps({"schema": PARTIAL_KIND, "command": command, "counts": payload}))


def read_partial(path: str | Path) -> tuple[str, dict[str, Any]]:
    from eagle3_forensics.io.checkpoint import read_json  # heavy: numpy, safetensors

    obj = read_json(Path(path), "partial result")
    if (
        not isinstance(obj, dict)
        or obj.get("schema") != PARTIAL_KIND
        or not isinstance(obj.get("counts"), dict)
    ):
        raise UnusableInputError(
            f"{path} is not a partial result (written by --shard I/N --out)", path=str(path)
        )
    command = obj.get("command")
    if command not in ("probe-offline", "audit-data"):
        raise UnusableInputError(f"{path}: partial result of an unknown command {command!r}", path=str(path))
    return str(command), obj["counts"]


def unusable_error(result: Any, path: str | None) -> dict[str, Any] | None:
    """The ``error`` member of a result that measured nothing (exit 2), else ``None``.

    ``result`` is an ``OfflineProbeResult`` or a ``DataAudit``: both say why in ``unusable_reason``.
    """
    reason = result.unusable_reason
    return None if reason is None else error_object(UnusableInputError(reason, path=path))


def single_run_json(
    command: str, payload: dict[str, Any], exit_code: int, error: dict[str, Any] | None
) -> str:
    """The exact text ``COMMAND --json`` prints for this result (what ``merge --out`` writes); the
    object is also logged for the test suite's schema validation."""
    doc = strict(json.loads(json.dumps(envelope(command, payload, exit_code, error), default=str)))
    log_object(doc)
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"
