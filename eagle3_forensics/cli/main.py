"""The ``eagle3-forensics`` command line (also ``python -m eagle3_forensics``).

One module per command (``cli/<command>.py``, each with ``add_parser(sub, parser_class)`` that sets
``func``); this module builds the parser from :data:`COMMANDS` and maps errors to exit codes.

Exit codes: 0 no error finding / success; 1 at least one error finding; 2 unusable input
or bad arguments (one line on stderr, never a traceback); 3 an internal error (a bug: please report);
4 a live server could not be probed. Only a :class:`~eagle3_forensics.errors.ForensicsError` maps to
its own code (2 or 4): any other exception that escapes a command — a ``ValueError`` included — is a
bug in eagle3-forensics, so user input must be turned into one of ours where it is read.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from eagle3_forensics.cli import (
    diagnose,
    history,
    inspect,
    make_demo,
    merge_runs,
    probe,
    probe_server,
    repair,
    report,
    run,
    vocab,
)
from eagle3_forensics.cli.output import print_json
from eagle3_forensics.errors import EXIT_INTERNAL, EXIT_UNUSABLE, ForensicsError

# The commands, in the order of `--help`.
COMMANDS: tuple[ModuleType, ...] = (
    diagnose,
    inspect,
    repair,
    make_demo,
    report,
    run,
    merge_runs,
    history,
    probe,
    probe_server,
    vocab,
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {' '.join(message.split())}\n")
        raise SystemExit(EXIT_UNUSABLE)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="eagle3-forensics", description="Forensic debugging of EAGLE-3 drafters.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in COMMANDS:
        command.add_parser(sub, _Parser)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ForensicsError as exc:
        json_error = getattr(args, "json_error", None)
        if getattr(args, "json", False) and json_error is not None:
            print_json(json_error(args, exc))
        sys.stderr.write(f"eagle3-forensics: {exc}\n")
        return int(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("eagle3-forensics: interrupted\n")
        return 130
    except Exception as exc:  # last resort: one line, never a traceback
        sys.stderr.write(
            f"eagle3-forensics: internal error ({type(exc).__name__}: {' '.join(str(exc).split())[:300]}); "
            "please report it\n"
        )
        return EXIT_INTERNAL
