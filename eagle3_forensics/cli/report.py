"""``eagle3-forensics report``: notebook 01 over every demo drafter, as HTML reports."""

from __future__ import annotations

import argparse
from typing import Any


def run(args: argparse.Namespace) -> int:
    from eagle3_forensics.runs.runner import build_demo_report  # heavy: papermill, nbformat, jinja2

    return build_demo_report(args.out, demo_dir=args.demo, timeout=args.timeout)


def add_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    r = sub.add_parser("report", help="run notebook 01 over every demo drafter and write HTML reports")
    r.add_argument("--out", default="reports")
    r.add_argument("--demo", default="data/demo")
    r.add_argument("--timeout", type=int, default=300, help="per-notebook execution timeout (s)")
    r.set_defaults(func=run, extra="notebooks")
