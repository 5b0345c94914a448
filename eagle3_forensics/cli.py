"""The ``eagle3-forensics`` command line (also ``python -m eagle3_forensics``).

Exit codes: 0 no error finding / success; 1 at least one error finding; 2 unusable input
or bad arguments (one line on stderr, never a traceback); 3 an internal error (a bug: please report).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import NoReturn

from .engines import ENGINE_NAMES
from .errors import EXIT_UNUSABLE, UnusableInputError

EXIT_INTERNAL = 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {' '.join(message.split())}\n")
        raise SystemExit(EXIT_UNUSABLE)


def _print_json(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def cmd_diagnose(args: argparse.Namespace) -> int:
    from .diagnose import diagnose
    from .render_text import render_diagnosis

    d = diagnose(args.path, target=args.target, engines=args.engine)
    if args.json:
        _print_json(d.to_dict())
    else:
        print(render_diagnosis(d))
    if d.unusable:
        sys.stderr.write(f"eagle3-forensics: {d.findings[0].message}\n")
    return d.exit_code


def cmd_inspect(args: argparse.Namespace) -> int:
    from .diagnose import inspect_checkpoint
    from .render_text import render_inspection

    ins = inspect_checkpoint(args.path)
    if args.json:
        _print_json(ins.to_dict())
    else:
        print(render_inspection(ins))
    return 0


def cmd_make_demo(args: argparse.Namespace) -> int:
    from .demo import make_demo

    paths = make_demo(args.out)
    for name, path in paths.items():
        print(f"{name:20} {path}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .report import build_demo_report

    return build_demo_report(args.out, demo_dir=args.demo, timeout=args.timeout)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="eagle3-forensics", description="Forensic debugging of EAGLE-3 drafters.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    d = sub.add_parser("diagnose", help="run every static check on a drafter checkpoint")
    d.add_argument("path", help="drafter directory (config.json + weights)")
    d.add_argument("--target", help="target model directory for cross-checks")
    d.add_argument("--engine", default="all", choices=[*ENGINE_NAMES, "all"],
                   help="engine to simulate (default: all)")
    d.add_argument("--json", action="store_true", help="print exactly one JSON object")
    d.set_defaults(func=cmd_diagnose)

    i = sub.add_parser("inspect", help="tensor table and detected format (header only)")
    i.add_argument("path")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=cmd_inspect)

    m = sub.add_parser("make-demo", help="regenerate the deterministic demo drafters")
    m.add_argument("out", nargs="?", default="data/demo")
    m.set_defaults(func=cmd_make_demo)

    r = sub.add_parser("report", help="run notebook 01 over every demo drafter and write HTML reports")
    r.add_argument("--out", default="reports")
    r.add_argument("--demo", default="data/demo")
    r.add_argument("--timeout", type=int, default=300, help="per-notebook execution timeout (s)")
    r.set_defaults(func=cmd_report)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except UnusableInputError as exc:
        if getattr(args, "json", False) and args.command == "inspect":
            _print_json({"checkpoint": args.path, "error": str(exc)})
        sys.stderr.write(f"eagle3-forensics: {exc}\n")
        return EXIT_UNUSABLE
    except ValueError as exc:
        sys.stderr.write(f"eagle3-forensics: {' '.join(str(exc).split())}\n")
        return EXIT_UNUSABLE
    except KeyboardInterrupt:
        sys.stderr.write("eagle3-forensics: interrupted\n")
        return 130
    except Exception as exc:  # last resort: one line, never a traceback
        sys.stderr.write(f"eagle3-forensics: internal error ({type(exc).__name__}: {' '.join(str(exc).split())[:300]}); "
                         "please report it\n")
        return EXIT_INTERNAL
