"""``eagle3-forensics probe DRAFTER --target DIR --prompts FILE``: the in-process accept-rate probe."""

from __future__ import annotations

import argparse
import json
from typing import Any

from eagle3_forensics.cli.diagnose import engine_spec_arg
from eagle3_forensics.cli.output import emit_json
from eagle3_forensics.engines import ENGINE_NAMES, resolve_release
from eagle3_forensics.errors import BadArgumentsError


def run(args: argparse.Namespace) -> int:
    if args.engine != "reference":
        resolve_release(args.engine)  # an unknown engine or release: BadArgumentsError, one line, exit 2
    kwargs = _template_kwargs(args.chat_template_kwargs)
    from eagle3_forensics.probe.served import parse_lengths, probe_served  # heavy: torch, transformers
    from eagle3_forensics.views.probe import render_probe  # heavy: torch

    lengths = parse_lengths(args.lengths) if args.lengths else []
    for name in ("trained_length", "length_prompts"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise BadArgumentsError(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
    result = probe_served(
        args.drafter,
        args.target,
        args.prompts,
        chat=args.chat,
        template_kwargs=kwargs,
        lengths=lengths,
        trained_length=args.trained_length,
        dumps=args.dumps,
        prompts_per_length=args.length_prompts or 2,
        k=args.k,
        max_new_tokens=args.max_new_tokens,
        device=args.device,
        engine=args.engine,
        teacher_forced=not args.no_teacher_forced,
        sweep=not args.no_sweep,
    )
    code = 0 if result.lossless else 1
    trained = _trained_aux(args) if args.measure_aux else None
    if args.json:
        payload = result.to_dict()
        if trained is not None:
            payload["trained_aux"] = trained.to_dict()
        emit_json("probe", payload, code)
    else:
        print(render_probe(result))
        if trained is not None:
            print(f"aux layers: {trained.summary(_config_ids(args.drafter, args.target))}")
    return code


def _trained_aux(args: argparse.Namespace) -> Any:
    """``--measure-aux``: the aux layers the drafter was trained on, scored on the target and prompts."""
    from eagle3_forensics.probe.aux_trained import measure_trained_aux  # heavy: torch, transformers

    return measure_trained_aux(args.drafter, args.target, args.prompts, k=args.k, device=args.device)


def _config_ids(drafter: str, target: str) -> list[int] | None:
    """The config's ids (HF index, as written) the summary compares the measured set with."""
    from eagle3_forensics.checks.aux_layers import config_trained_ids  # heavy: numpy, safetensors
    from eagle3_forensics.checks.context import Context  # heavy: numpy, safetensors
    from eagle3_forensics.io.checkpoint import open_checkpoint  # heavy: numpy, safetensors
    from eagle3_forensics.io.target import open_target  # heavy: numpy, safetensors

    return config_trained_ids(Context(open_checkpoint(drafter), open_target(target)))[0]


def _template_kwargs(value: str | None) -> dict[str, Any] | None:
    """``--chat-template-kwargs`` as the object a server's ``chat_template_kwargs`` takes."""
    if value is None:
        return None
    try:
        obj = json.loads(value)
    except json.JSONDecodeError as exc:
        raise BadArgumentsError(f"--chat-template-kwargs is not JSON: {exc.msg}") from None
    if not isinstance(obj, dict):
        raise BadArgumentsError(
            "--chat-template-kwargs must be a JSON object, e.g. '{\"enable_thinking\": false}'"
        )
    return obj


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
    pr.add_argument(
        "--chat",
        action="store_true",
        help="render each prompt as a user turn with the target's chat template and the generation prompt, "
        "as vLLM/SGLang do for chat requests",
    )
    pr.add_argument(
        "--chat-template-kwargs",
        metavar="JSON",
        help="the request's chat_template_kwargs, e.g. '{\"enable_thinking\": false}' (implies --chat)",
    )
    pr.add_argument(
        "--lengths",
        metavar="N,N,...",
        help="acceptance against prompt length: prompts of about N tokens (the prompt texts concatenated)",
    )
    pr.add_argument(
        "--trained-length", type=int, help="the drafter's trained sequence length, marked in --lengths"
    )
    pr.add_argument("--dumps", help="training dumps: the trained length is their longest sample (p99 shown)")
    pr.add_argument("--length-prompts", type=int, help="prompts per length (default 2)")
    pr.add_argument("--no-sweep", action="store_true", help="skip the aux-layer sweep")
    pr.add_argument("--no-teacher-forced", action="store_true", help="skip the teacher-forced estimate")
    pr.add_argument("--json", action="store_true", help="print exactly one JSON object")
    pr.add_argument(
        "--measure-aux",
        action="store_true",
        help="also score candidate aux-layer sets (the config's, each engine's, each trainer's default, "
        "neighbours) by teacher-forced acceptance: the layers the drafter was trained on (trained_aux)",
    )
    pr.set_defaults(func=run, extra="probe", json_command="probe", json_error_payload=_error_payload)
