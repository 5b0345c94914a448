"""``eagle3-forensics make-demo [OUT]``: regenerate the deterministic demo world."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def run(args: argparse.Namespace) -> int:
    from eagle3_forensics.demo.world import make_demo  # heavy: torch, transformers

    paths = make_demo(args.out, log=lambda msg: print(msg, file=sys.stderr, flush=True))
    for name, path in paths.items():
        print(f"{name:20} {path}")
    return 0


def add_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    m = sub.add_parser("make-demo", help="regenerate the deterministic demo drafters")
    m.add_argument("out", nargs="?", default="data/demo")
    m.set_defaults(func=run, extra="probe")
