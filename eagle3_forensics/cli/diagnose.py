"""``eagle3-forensics diagnose PATH``: every static check on a drafter checkpoint."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from eagle3_forensics.cli.output import emit_json, error_dict
from eagle3_forensics.engines import ENGINE_NAMES, resolve_engines, resolve_release
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError, one_line
from eagle3_forensics.extras import require


def engine_spec_arg(value: str) -> str:
    """argparse ``type`` of ``--engine``: every comma-separated NAME[==VERSION] must name a described
    release (else the one-line argument error, exit 2, naming what is known)."""
    for part in (s.strip() for s in value.split(",")):
        if part and part != "all":
            try:
                resolve_release(part)
            except BadArgumentsError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def engine_specs(values: list[str] | None) -> list[str] | str:
    """``--engine`` values (repeatable, comma-separated) -> the specs diagnose takes ("all" when none)."""
    specs = [s.strip() for v in values or [] for s in v.split(",") if s.strip()]
    return specs or "all"


def run(args: argparse.Namespace) -> int:
    specs = engine_specs(args.engine)
    # an unknown engine or release raises BadArgumentsError: one line (one JSON object), exit 2
    resolve_engines(specs)

    from eagle3_forensics.checks.diagnose import diagnose  # heavy: numpy, safetensors, torch
    from eagle3_forensics.views.text import render_diagnosis  # heavy: numpy, safetensors, torch

    measured = _measure(args) if args.measure_aux is not None else None
    d = diagnose(args.path, target=args.target, engines=specs, launch=args.launch, measured_aux=measured)
    # unusable input: the error object, and (for pipelines written before it) the report members
    # with the one CHECKPOINT_UNREADABLE finding
    error = error_dict("UNUSABLE_INPUT", d.findings[0].message, str(args.path)) if d.unusable else None
    if args.json:
        emit_json("diagnose", d.to_dict(), d.exit_code, error)
    else:
        print(render_diagnosis(d))
    if error is not None:
        sys.stderr.write(f"eagle3-forensics: {error['message']}\n")
    return d.exit_code


def _measure(args: argparse.Namespace) -> Any:
    """``--measure-aux``: the aux layers scored on the target (``None``, said on stderr, when not measurable)."""
    if args.target is None:
        raise BadArgumentsError("--measure-aux needs --target (the layers are measured on the target)")
    require("probe", "diagnose --measure-aux")
    require("models", "diagnose --measure-aux")
    from eagle3_forensics.probe.aux_trained import measure_trained_aux  # heavy: torch, transformers

    try:
        return measure_trained_aux(args.path, args.target, args.measure_aux)
    except UnusableInputError as exc:
        sys.stderr.write(f"eagle3-forensics: the trained aux layers were not measured: {one_line(exc)}\n")
        return None


def _error_payload(args: argparse.Namespace, exc: BaseException) -> dict[str, Any]:
    """The members a ``--json`` argument error still carries: what was asked."""
    specs = engine_specs(args.engine)
    return {"checkpoint": args.path, "engines": [specs] if isinstance(specs, str) else specs}


def add_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    d = sub.add_parser("diagnose", help="run every static check on a drafter checkpoint")
    d.add_argument("path", help="drafter directory (config.json + weights)")
    d.add_argument("--target", help="target model directory for cross-checks (its class picks the aux rule)")
    d.add_argument(
        "--engine",
        action="append",
        type=engine_spec_arg,
        metavar="ENGINE[==VERSION]",
        help=f"engine release to simulate: {', '.join(ENGINE_NAMES)} (the newest release described) or "
        "NAME==VERSION (e.g. sglang==0.5.11); repeat or comma-separate for several; default: all",
    )
    d.add_argument(
        "--launch",
        metavar="COMMAND",
        help="the serving command to check against the drafter, quoted as one argument: "
        "python -m sglang.launch_server / sglang serve ..., vllm serve ... --speculative-config JSON, "
        "trtllm-serve ... --extra_llm_api_options FILE.yaml; its program picks the engine when --engine "
        "is not given (relative paths in it are taken from the current directory)",
    )
    d.add_argument(
        "--measure-aux",
        metavar="PROMPTS",
        help="with --target: score candidate aux-layer sets (the config's, each engine's, each trainer's "
        "default, neighbours) by teacher-forced acceptance on these prompts (.jsonl or one per line); the "
        "measurement decides AUX_LAYER_IDS_NOT_TRAINED / _NOT_RECORDED (needs the probe and models extras)",
    )
    d.add_argument("--json", action="store_true", help="print exactly one JSON object")
    d.set_defaults(func=run, json_command="diagnose", json_error_payload=_error_payload)
