"""``eagle3-forensics schema NAME`` / ``schema --list``: the published JSON Schemas (docs/json.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from eagle3_forensics import schemas
from eagle3_forensics.errors import BadArgumentsError


def run(args: argparse.Namespace) -> int:
    if args.list or args.name is None:
        for name in schemas.names():
            title = schemas.load(name).get("title", "")
            sys.stdout.write(f"{name:16} {schemas.schema_id(name):40} {title}\n")
        return 0
    if args.name not in schemas.names():
        raise BadArgumentsError(f"no schema {args.name!r}; known: {', '.join(schemas.names())}")
    sys.stdout.write(json.dumps(schemas.load(args.name), indent=2) + "\n")
    return 0


def add_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "schema",
        help="print the JSON Schema (draft 2020-12) of a command's --json output, summary.json or the baseline",
    )
    s.add_argument(
        "name", nargs="?", help="schema name (see --list), e.g. diagnose, vocab-classify, run-summary"
    )
    s.add_argument("--list", action="store_true", help="list the schema names, their ids and titles")
    s.set_defaults(func=run)
