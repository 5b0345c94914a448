"""``eagle3-forensics repair PATH --engine E --out DIR``: an engine-ready copy, never touching the source."""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import Any

from eagle3_forensics.cli.output import emit_json, error_dict
from eagle3_forensics.errors import ExitCode, UnusableInputError, one_line
from eagle3_forensics.repair.policy import REPAIRABLE_ENGINES


def run(args: argparse.Namespace) -> int:
    from eagle3_forensics.repair.execute import repair  # heavy: torch
    from eagle3_forensics.views.repair import render_repair  # heavy: torch

    trust = "t2d" if args.trust_t2d else "d2t" if args.trust_d2t else None
    measuring = args.target is not None and not args.no_confirm
    measured = _measure(args) if measuring else None
    result = repair(
        args.path,
        args.engine,
        args.out,
        target=args.target,
        rebuild_vocab_from=args.rebuild_vocab_from,
        trust=trust,
        dry_run=args.dry_run,
        force=args.force,
        measured_aux=measured,
    )  # bad arguments (RepairArgumentError) and unusable input reach cli.main: json_error_payload
    if measuring and result.status == "repaired" and result.dest is not None:
        result = _confirm(args, result)
    error = None
    if result.exit_code == ExitCode.UNUSABLE:
        error = error_dict("UNUSABLE_INPUT", result.message, str(args.path))
    if args.json:
        emit_json("repair", result.to_dict(), result.exit_code, error)
    else:
        print(render_repair(result))
    if error is not None:
        sys.stderr.write(f"eagle3-forensics: {error['message']}\n")
    elif result.confirm is not None and result.confirm.get("lowered"):
        sys.stderr.write(f"eagle3-forensics: {result.message}\n")  # loudly: the copy was removed
    return result.exit_code


def _measure(args: argparse.Namespace) -> Any:
    """The aux layers measured on the target (``None`` when they cannot be measured: said on stderr)."""
    from eagle3_forensics.probe.aux_trained import measure_trained_aux  # heavy: torch, transformers

    try:
        return measure_trained_aux(args.path, args.target, args.prompts)
    except UnusableInputError as exc:
        sys.stderr.write(f"eagle3-forensics: the trained aux layers were not measured: {one_line(exc)}\n")
        return None


def _confirm(args: argparse.Namespace, result: Any) -> Any:
    """Measure the copy against the source under the engine; a copy that accepts less is removed and refused."""
    from eagle3_forensics.probe.confirm import confirm_repair  # heavy: torch, transformers

    try:
        c = confirm_repair(args.path, result.dest, args.engine, args.target, args.prompts)
    except UnusableInputError as exc:
        result.message += f"; not confirmed on the target: {one_line(exc)}."
        return result
    result.confirm = c.to_dict()
    if not c.lowered:
        result.message += f"; confirmed on the target: {c.line()}."
        return result
    shutil.rmtree(result.dest, ignore_errors=True)  # the copy this run wrote; the source is untouched
    result.status, result.exit_code, result.record = "refused", ExitCode.FINDINGS, None
    result.message = (
        f"refused: the repaired copy accepts less than the source under {args.engine} ({c.line()}); "
        f"it was removed from {result.dest}. A fix must never lower acceptance: check the aux ids and the "
        "vocabulary map by hand (eagle3-forensics diagnose --target --measure-aux)."
    )
    return result


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
    rp.add_argument(
        "--prompts",
        metavar="FILE",
        help='prompts (.jsonl with {"prompt": ...} or one per line) for the measurements --target makes: the '
        "trained aux layers, and acceptance before and after (default: a few generic prompts)",
    )
    rp.add_argument(
        "--no-confirm",
        action="store_true",
        help="with --target, skip the measurements (no target forward; static cross-checks only)",
    )
    rp.add_argument("--dry-run", action="store_true", help="print the plan; write nothing")
    rp.add_argument("--force", action="store_true", help="replace an existing --out")
    rp.add_argument("--json", action="store_true", help="print exactly one JSON object")
    # no declared extra: repair needs torch only, and a missing torch is reported as the probe extra
    rp.set_defaults(func=run, json_command="repair", json_error_payload=json_error_payload)
