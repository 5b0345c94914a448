"""``eagle3-forensics probe-offline``: teacher-forced acceptance of a drafter over hidden-state dumps."""

from __future__ import annotations

import argparse
from typing import Any

from eagle3_forensics.cli.offline_common import (
    add_progress,
    add_sample_options,
    report,
    scan_options,
)

COMMAND = "probe-offline"


def run(args: argparse.Namespace) -> int:
    from eagle3_forensics.probe.offline.result import finish_probe  # heavy: torch
    from eagle3_forensics.probe.offline.scan import parse_engine, scan_offline  # heavy: torch
    from eagle3_forensics.views.offline import render_offline_probe  # heavy: numpy, safetensors

    counts = scan_offline(
        args.drafter,
        args.data,
        scan_options(args),
        engine=parse_engine(args.engine),
        k=args.k,
        device=args.device,
        bucket=args.bucket,
    )
    result = finish_probe(counts)
    return report(
        args, COMMAND, counts.to_dict(), result, "data", lambda: render_offline_probe(result, counts.seconds)
    )


def add_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        COMMAND,
        help="teacher-forced acceptance of a drafter over trainers' hidden-state dumps (only the drafter runs)",
        epilog="exit codes: 0 measured; 1 an error finding (samples skipped); 2 unusable input or bad arguments.",
    )
    p.add_argument("drafter", help="drafter directory (config.json + weights)")
    p.add_argument(
        "--data", required=True, help="dump directory (SpecForge, speculators or EAGLE layout; recursive)"
    )
    p.add_argument(
        "--target",
        help="target model directory: the teacher is its greedy token from the dumped last hidden state "
        "(config, lm_head and final norm read header-first); without it, the next data token",
    )
    p.add_argument(
        "--engine",
        default="reference",
        help="load the drafter as reference (as its writer meant it) or as an engine release loads it: NAME[==VERSION], e.g. sglang, sglang==0.5.11, vllm",
    )
    p.add_argument("--k", type=int, default=3, help="draft steps (default 3)")
    p.add_argument("--format", default="auto", choices=["auto", "specforge", "speculators", "eagle"])
    add_sample_options(p, "score")
    p.add_argument("--out", metavar="PART.json", help="write the mergeable partial result here")
    p.add_argument(
        "--device", default="auto", choices=["auto", "cpu", "cuda"], help="auto: CUDA (bf16) when present"
    )
    p.add_argument("--bucket", type=int, default=32, help="tokens per bucket of the along-the-sequence table")
    add_progress(p)
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.set_defaults(func=run, extra="offline", json_command=COMMAND)
