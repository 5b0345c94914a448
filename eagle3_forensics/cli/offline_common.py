"""What probe-offline, audit-data and merge share: JSON on argument errors, partial files, progress."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eagle3_forensics.cli.output import emit_json, envelope, strict
from eagle3_forensics.errors import BadArgumentsError, ExitCode, ForensicsError, UnusableInputError

PARTIAL_KIND = "eagle3-forensics/partial/1"


def json_on_errors(parser: argparse.ArgumentParser, command: str) -> None:
    """Make ``parser`` print one JSON object (exit 2) for an argument error when ``--json`` was given."""
    plain_error = parser.error
    plain_parse = parser.parse_known_args
    wants = {"json": False}

    def parse_known_args(
        self: argparse.ArgumentParser, args: Sequence[str] | None = None, namespace: Any = None
    ) -> Any:
        wants["json"] = "--json" in (sys.argv[1:] if args is None else list(args))
        return plain_parse(args, namespace)

    def error(self: argparse.ArgumentParser, message: str) -> Any:
        if wants["json"]:
            emit_json(command, None, ExitCode.UNUSABLE, BadArgumentsError(" ".join(message.split())))
        plain_error(message)

    parser.parse_known_args = types.MethodType(parse_known_args, parser)  # type: ignore[method-assign]
    parser.error = types.MethodType(error, parser)  # type: ignore[method-assign]


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


def single_run_json(command: str, payload: dict[str, Any], exit_code: int) -> str:
    """The exact text ``COMMAND --json`` prints for this result (what ``merge --out`` writes)."""
    return dumps(envelope(command, payload, exit_code))


def run_guarded(command: str, args: argparse.Namespace, body: Callable[[], int]) -> int:
    """Run ``body``; a ForensicsError becomes one stderr line (and one JSON object with --json)."""
    try:
        return body()
    except ForensicsError as exc:
        if getattr(args, "json", False):
            emit_json(command, None, exc.exit_code, exc)
        sys.stderr.write(f"eagle3-forensics: {exc}\n")
        return int(exc.exit_code)
