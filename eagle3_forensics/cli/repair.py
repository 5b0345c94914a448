"""``eagle3-forensics repair PATH --engine E --out DIR``: an engine-ready copy, never touching the source."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from eagle3_forensics.cli.output import emit_json, error_dict
from eagle3_forensics.errors import ExitCode, one_line
from eagle3_forensics.repair.policy import REPAIRABLE_ENGINES


def run(args: argparse.Namespace) -> int:
    from eagle3_forensics.repair.execute import repair  # heavy: torch
    from eagle3_forensics.views.repair import render_repair  # heavy: torch

    trust = "t2d" if args.trust_t2d else "d2t" if args.trust_d2t else None
    result = repair(
        args.path,
        args.engine,
        args.out,
        target=args.target,
        rebuild_vocab_from=args.rebuild_vocab_from,
        trust=trust,
        dry_run=args.dry_run,
        force=args.force,
    )  # bad arguments (RepairArgumentError) and unusable input reach cli.main: json_error_payload
    error = None
    if result.exit_code == ExitCode.UNUSABLE:
        error = error_dict("UNUSABLE_INPUT", result.message, str(args.path))
    if args.json:
        emit_json("repair", result.to_dict(), result.exit_code, error)
    else:
        print(render_repair(result))
    if error is not None:
        sys.stderr.write(f"eagle3-forensics: {error['message']}\n")
    return result.exit_code


def json_error_payload(args: argparse.Namespace, exc: BaseException) -> dict[str, Any]:
    """The members beside the error object when repair could not start: status ``unusable``."""
    return {"status": "unusable", "message": one_line(exc), "dest": None}


def add_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    rp = sub.add_parser("repair", help="write an engine-ready copy of a drafter (never modifies the source)")
    rp.add_argument("path", help="drafter directory (read only)")
    rp.add_argument(
        "--engine",
        required=True,
        metavar="ENGINE[==VERSION]",
        help=f"engine release to make it ready for: {' or '.join(REPAIRABLE_ENGINES)} (the newest release "
        "described) or NAME==VERSION (e.g. sglang==0.5.11)",
    )
    rp.add_argument("--out", required=True, help="output directory (must not exist unless --force)")
    rp.add_argument(
        "--target", help="target model directory (cross-checks; embedding when one must be shipped)"
    )
    rp.add_argument(
        "--rebuild-vocab-from",
        metavar="FILE",
        help="token ids (input_ids [+ loss_mask]) to rebuild d2t/t2d from when t2d cannot be trusted",
    )
    trust = rp.add_mutually_exclusive_group()
    trust.add_argument(
        "--trust-t2d", action="store_true", help="when d2t and t2d disagree, rebuild d2t from t2d"
    )
    trust.add_argument(
        "--trust-d2t", action="store_true", help="when d2t and t2d disagree, rebuild t2d from d2t"
    )
    rp.add_argument("--dry-run", action="store_true", help="print the plan; write nothing")
    rp.add_argument("--force", action="store_true", help="replace an existing --out")
    rp.add_argument("--json", action="store_true", help="print exactly one JSON object")
    # no declared extra: repair needs torch only, and a missing torch is reported as the probe extra
    rp.set_defaults(func=run, json_command="repair", json_error_payload=json_error_payload)
