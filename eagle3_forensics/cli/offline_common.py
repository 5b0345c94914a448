"""What probe-offline, audit-data and merge share: reading options, partial files, the unusable-result error, progress."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eagle3_forensics.cli.output import emit_json, envelope, error_object, strict
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.io.dumps.options import ScanOptions
from eagle3_forensics.io.shard import parse_pair
from eagle3_forensics.schemas import log_object

PARTIAL_KIND = "eagle3-forensics/partial/1"


def add_progress(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )


def byte_count(text: str) -> int:
    """``--max-sample-bytes``: a positive byte count, with an optional K/M/G suffix (powers of 1024)."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    try:
        n = int(t[:-1] if scale > 1 else t) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a byte count such as 500M, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte, got {text!r}")
    return n


def add_sample_options(p: argparse.ArgumentParser, verb: str) -> None:
    """``--max-samples``, ``--shard`` and ``--max-sample-bytes``: how probe-offline and audit-data pick samples."""
    p.add_argument("--max-samples", type=int, help="only the first N files (sorted by path)")
    p.add_argument(
        "--shard", metavar="I/N", help=f"{verb} every N-th file from I (0-based: 0 ≤ I < N); needs --out"
    )
    p.add_argument(
        "--max-sample-bytes",
        type=byte_count,
        metavar="BYTES",
        help="skip (unread, counted) a sample that holds or decompresses to more than this; default: what one "
        "sample of the drafter's/target's widths can occupy at 32768 tokens in fp32 (suffixes K, M, G)",
    )


def progress_on(args: argparse.Namespace) -> bool:
    return bool(args.progress) if args.progress is not None else sys.stderr.isatty()


def scan_options(args: argparse.Namespace) -> ScanOptions:
    """How probe-offline and audit-data read the dumps, from their shared options; refused (exit 2)
    before anything heavy is imported. A ``--shard`` needs ``--out``: only a partial file can be merged."""
    shard = parse_pair(args.shard)
    if shard is not None and not args.out:
        raise BadArgumentsError("--shard needs --out PART.json (the partial result merge combines)")
    return ScanOptions(
        target=args.target,
        fmt=args.format,
        max_samples=args.max_samples,
        shard=shard,
        max_sample_bytes=args.max_sample_bytes,
        progress=progress_on(args),
    )


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


def write_partial(
    path: str | Path, command: str, payload: dict[str, Any], argv: list[str] | None = None
) -> None:
    """Write a partial result atomically (a killed shard leaves none); ``argv``, the command line
    that made it, lets ``merge`` say how to re-make a missing shard."""
    doc: dict[str, Any] = {"schema": PARTIAL_KIND, "command": command, "counts": payload}
    if argv:
        doc["argv"] = [str(a) for a in argv]
    write_atomic(path, dumps(doc))


def read_partial(path: str | Path) -> tuple[str, dict[str, Any], list[str] | None]:
    """``(command, counts, argv)`` of a partial file (``argv``: the command line that wrote it, if recorded)."""
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
    argv = obj.get("argv")
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        argv = None
    return str(command), obj["counts"], argv


def unusable_error(result: Any, path: str | None) -> dict[str, Any] | None:
    """The ``error`` member of a result that measured nothing (exit 2), else ``None``.

    ``result`` is an ``OfflineProbeResult`` or a ``DataAudit``: both say why in ``unusable_reason``.
    """
    reason = result.unusable_reason
    return None if reason is None else error_object(UnusableInputError(reason, path=path))


def report(
    args: argparse.Namespace,
    command: str,
    counts: dict[str, Any],
    result: Any,
    where: str,
    render: Callable[[], str],
) -> int:
    """The end both commands share: the partial file (``--out``), then the JSON envelope or the
    rendered text, and a result that measured nothing named on stderr. Returns the exit code."""
    if args.out:
        write_partial(args.out, command, counts, getattr(args, "command_line", None))
    payload: dict[str, Any] = result.to_dict()
    if args.out:
        payload["partial"] = {"path": str(args.out), "shard": args.shard or "0/1"}
    error = unusable_error(result, payload[where])
    if args.json:
        emit_json(command, payload, result.exit_code, error)
    else:
        print(render())
    if error is not None:
        sys.stderr.write(f"eagle3-forensics: {error['message']}\n")
    return int(result.exit_code)


def single_run_json(
    command: str, payload: dict[str, Any], exit_code: int, error: dict[str, Any] | None
) -> str:
    """The exact text ``COMMAND --json`` prints for this result (what ``merge --out`` writes); the
    object is also logged for the test suite's schema validation."""
    doc = strict(json.loads(json.dumps(envelope(command, payload, exit_code, error), default=str)))
    log_object(doc)
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"
