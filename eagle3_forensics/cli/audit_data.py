"""``eagle3-forensics audit-data``: check a data-prep output (dumps, loss masks, vocabulary map) before training."""

from __future__ import annotations

import argparse
import json
from typing import Any

from eagle3_forensics.cli.offline_common import (
    add_progress,
    add_sample_options,
    report,
    scan_options,
)
from eagle3_forensics.errors import BadArgumentsError

COMMAND = "audit-data"


def run(args: argparse.Namespace) -> int:
    # arguments first: a bad one is refused before torch is imported
    options = scan_options(args)
    kwargs = _template_kwargs(args.chat_template_kwargs)
    if (kwargs or args.launch) and not args.target:
        raise BadArgumentsError(
            "--chat-template-kwargs and --launch need --target (the serving template and model)"
        )
    if args.launch:
        from eagle3_forensics.checks.data.target_scan import served_context  # heavy: torch

        served_context(args.launch)
    from eagle3_forensics.checks.data.findings import finish_audit  # heavy: numpy, torch
    from eagle3_forensics.checks.data.scan import scan_data  # heavy: numpy, torch
    from eagle3_forensics.probe.offline.teacher import greedy_labeller  # heavy: torch
    from eagle3_forensics.views.offline import render_audit  # heavy: numpy, safetensors

    labeller = greedy_labeller(args.target)
    scan = scan_data(
        args.path,
        options,
        map_path=args.map,
        drafter=args.drafter,
        launch=args.launch,
        template_kwargs=kwargs,
        labeller=labeller,
    )
    audit = finish_audit(scan)
    return report(args, COMMAND, scan.to_dict(), audit, "dir", lambda: render_audit(audit))


def _template_kwargs(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise BadArgumentsError(f"--chat-template-kwargs is not valid JSON: {text[:80]!r}") from None
    if not isinstance(value, dict):
        raise BadArgumentsError(f"--chat-template-kwargs must be a JSON object, got {type(value).__name__}")
    return value


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
    p.add_argument(
        "--target",
        help="target model directory: hidden size, vocabulary, max positions; with its weights and chat "
        "template also provenance (greedy agreement), template mode and trained length",
    )
    p.add_argument(
        "--chat-template-kwargs",
        metavar="JSON",
        help="the serving chat_template_kwargs (e.g. '{\"enable_thinking\": false}'); default: the template's default mode",
    )
    p.add_argument(
        "--launch",
        metavar="COMMAND",
        help="the serving command line: its --max-model-len / --context-length / --max_seq_len is the serving context "
        "(default: the target's max_position_embeddings)",
    )
    p.add_argument("--format", default="auto", choices=["auto", "specforge", "speculators", "eagle"])
    add_sample_options(p, "audit")
    p.add_argument("--out", metavar="PART.json", help="write the mergeable partial result here")
    add_progress(p)
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.set_defaults(func=run, json_command=COMMAND)
