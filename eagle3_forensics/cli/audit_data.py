"""``eagle3-forensics audit-data``: check a data-prep output (dumps, loss masks, vocabulary map) before training."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from eagle3_forensics.cli.offline_common import (
    add_progress,
    add_sample_options,
    progress_on,
    unusable_error,
    write_partial,
)
from eagle3_forensics.cli.output import emit_json
from eagle3_forensics.errors import BadArgumentsError
from eagle3_forensics.io.shard import parse_pair

COMMAND = "audit-data"


def run(args: argparse.Namespace) -> int:
    from eagle3_forensics.checks.data.findings import finish_audit  # heavy: numpy, torch
    from eagle3_forensics.checks.data.scan import scan_data  # heavy: numpy, torch
    from eagle3_forensics.views.offline import render_audit  # heavy: numpy, safetensors

    shard = parse_pair(args.shard)
    if shard is not None and not args.out:
        raise BadArgumentsError("--shard needs --out PART.json (the partial result merge combines)")
    scan = scan_data(
        args.path,
        map_path=args.map,
        drafter=args.drafter,
        target=args.target,
        fmt=args.format,
        max_samples=args.max_samples,
        shard=shard,
        max_sample_bytes=args.max_sample_bytes,
        progress=progress_on(args),
    )
    if args.out:
        write_partial(args.out, COMMAND, scan.to_dict(), getattr(args, "command_line", None))
    audit = finish_audit(scan)
    payload: dict[str, Any] = audit.to_dict()
    if args.out:
        payload["partial"] = {"path": str(args.out), "shard": args.shard or "0/1"}
    error = unusable_error(audit, payload["dir"])
    if args.json:
        emit_json(COMMAND, payload, audit.exit_code, error)
    else:
        print(render_audit(audit))
    if error is not None:
        sys.stderr.write(f"eagle3-forensics: {error['message']}\n")
    return audit.exit_code


def add_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        COMMAND,
        help="audit a data-prep output (hidden-state dumps, loss masks, vocabulary map) before training",
        epilog="exit codes: 0 no error finding; 1 an error finding; 2 a file cannot be read or bad arguments.",
    )
    p.add_argument("path", help="data-prep output directory (dumps, token_freq.pt, d2t/t2d; recursive)")
    p.add_argument(
        "--map", help="vocabulary map to judge (d2t.npy/t2d.npy directory, .pt/.safetensors, drafter)"
    )
    p.add_argument(
        "--drafter", help="drafter directory: fc width, max positions (and its map when none is found)"
    )
    p.add_argument("--target", help="target model directory: hidden size, vocabulary, max positions")
    p.add_argument("--format", default="auto", choices=["auto", "specforge", "speculators", "eagle"])
    add_sample_options(p, "audit")
    p.add_argument("--out", metavar="PART.json", help="write the mergeable partial result here")
    add_progress(p)
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.set_defaults(func=run, json_command=COMMAND)
