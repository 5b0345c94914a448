"""``eagle3-forensics probe DRAFTER --target DIR --prompts FILE``: the in-process accept-rate probe."""

from __future__ import annotations

import argparse
from typing import Any

from eagle3_forensics.cli.diagnose import engine_spec_arg
from eagle3_forensics.cli.output import emit_json
from eagle3_forensics.engines import ENGINE_NAMES, resolve_release


def run(args: argparse.Namespace) -> int:
    if args.engine != "reference":
        resolve_release(args.engine)  # an unknown engine or release: BadArgumentsError, one line, exit 2
    from eagle3_forensics.probe.core import probe  # heavy: torch, transformers
    from eagle3_forensics.views.probe import render_probe  # heavy: torch

    result = probe(
        args.drafter,
        args.target,
        args.prompts,
        k=args.k,
        max_new_tokens=args.max_new_tokens,
        device=args.device,
        engine=args.engine,
        teacher_forced=not args.no_teacher_forced,
        sweep=not args.no_sweep,
    )
    code = 0 if result.lossless else 1
    if args.json:
        emit_json("probe", result.to_dict(), code)
    else:
        print(render_probe(result))
    return code


def _engine_arg(value: str) -> str:
    """argparse ``type`` of ``--engine``: ``reference`` or a described release (else exit 2, one line)."""
    return value if value == "reference" else engine_spec_arg(value)


def _error_payload(args: argparse.Namespace, exc: BaseException) -> dict[str, Any]:
    """The members a ``--json`` argument error still carries: what was asked."""
    return {"drafter": args.drafter, "engine": args.engine}


def add_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    pr = sub.add_parser(
        "probe",
        help="live speculative decoding with an EAGLE-3 drafter: acceptance, lossless "
        "check, speed, teacher-forced estimate, aux-layer sweep",
    )
    pr.add_argument("drafter", help="drafter directory (config.json + weights)")
    pr.add_argument("--target", required=True, help="target model directory (local Hugging Face causal LM)")
    pr.add_argument(
        "--prompts", required=True, help='.jsonl ({"prompt": ...} per line) or one prompt per line'
    )
    pr.add_argument("--k", type=int, default=3, help="draft tokens per cycle (default 3)")
    pr.add_argument("--max-new-tokens", type=int, default=64, help="new tokens per prompt (default 64)")
    pr.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cpu", "cuda"],
        help="auto: CUDA (bf16) when present, else the CPU (fp32)",
    )
    pr.add_argument(
        "--engine",
        default="reference",
        type=_engine_arg,
        metavar="reference|ENGINE[==VERSION]",
        help="load the drafter as its writer meant it (reference) or as this engine release would "
        f"({', '.join(ENGINE_NAMES)}, e.g. sglang==0.5.11)",
    )
    pr.add_argument("--no-sweep", action="store_true", help="skip the aux-layer sweep")
    pr.add_argument("--no-teacher-forced", action="store_true", help="skip the teacher-forced estimate")
    pr.add_argument("--json", action="store_true", help="print exactly one JSON object")
    pr.set_defaults(func=run, extra="probe", json_command="probe", json_error_payload=_error_payload)
