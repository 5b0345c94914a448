"""``eagle3-forensics inspect PATH``: the tensor table and the detected format (header only)."""

from __future__ import annotations

import argparse
from typing import Any

from eagle3_forensics.cli.output import emit_json


def run(args: argparse.Namespace) -> int:
    from eagle3_forensics.checks.diagnose import inspect_checkpoint  # heavy: numpy, safetensors, torch
    from eagle3_forensics.views.text import render_inspection  # heavy: numpy, safetensors, torch

    ins = inspect_checkpoint(args.path)
    if args.json:
        emit_json("inspect", ins.to_dict(), 0)
    else:
        print(render_inspection(ins))
    return 0


def json_error_payload(args: argparse.Namespace, exc: BaseException) -> dict[str, Any]:
    """The members beside the error object when the checkpoint cannot be inspected."""
    return {"checkpoint": args.path}


def add_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    i = sub.add_parser("inspect", help="tensor table and detected format (header only)")
    i.add_argument("path")
    i.add_argument("--json", action="store_true", help="print exactly one JSON object")
    i.set_defaults(func=run, json_command="inspect", json_error_payload=json_error_payload)
