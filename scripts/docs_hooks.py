"""MkDocs hooks (``hooks:`` in mkdocs.yml): pages written from the code at build time, so they cannot drift.

* ``cli.md``: the marker ``<!-- cli-reference -->`` becomes every command's usage and options, read
  from the argparse parsers of :func:`eagle3_forensics.cli.main.build_parser`.
* ``schemas.md``: the marker ``<!-- schemas -->`` becomes every published JSON Schema
  (:func:`eagle3_forensics.schemas.load`), one collapsible block each.
* the demo notebooks ``notebooks/NN_*.ipynb`` (outside ``docs/``) are added to the site as
  ``notebooks/NN_*.ipynb`` for mkdocs-jupyter to render.

The markdown builders are plain functions (no mkdocs import) so tests/unit/test_docs.py checks them.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
CLI_MARKER = "<!-- cli-reference -->"
SCHEMAS_MARKER = "<!-- schemas -->"
WIDTH = "100"  # argparse wraps usage at $COLUMNS: fixed, so the page is the same on every terminal


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """Each subcommand's parser and its one-line help (``add_parser(..., help=...)``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return {name: (sub, helps.get(name, "")) for name, sub in action.choices.items()}
    return {}


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _option_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.option_strings:
            metavar = action.metavar or (action.dest.upper() if action.nargs != 0 else None)
            names = ", ".join(f"`{o}`" + (f" `{metavar}`" if metavar else "") for o in action.option_strings)
        else:
            names = f"`{action.metavar or action.dest}`"
        help_text = (action.help or "").replace("%(default)s", str(action.default))
        if action.choices and not isinstance(action.choices, dict):
            help_text += f" (one of: {', '.join(f'`{c}`' for c in action.choices)})"
        default = action.default
        shown = (
            f"`{default}`"
            if action.option_strings and default not in (None, False, argparse.SUPPRESS) and action.nargs != 0
            else ""
        )
        rows.append(f"| {names} | {_cell(help_text)} | {_cell(shown)} |")
    return rows


def _command_section(name: str, parser: argparse.ArgumentParser, summary: str, level: int) -> list[str]:
    out = [f"{'#' * level} `{name}`", ""]
    if summary:
        out += [summary.strip(), ""]
    if parser.description and parser.description.strip() != summary.strip():
        out += [parser.description.strip(), ""]
    out += ["```text", parser.format_usage().strip().removeprefix("usage: "), "```", ""]
    rows = _option_rows(parser)
    if rows:
        out += ["| argument | meaning | default |", "|---|---|---|", *rows, ""]
    for sub_name, (sub, sub_summary) in _subparsers(parser).items():
        out += _command_section(f"{name} {sub_name}", sub, sub_summary, level + 1)
    return out


def cli_reference() -> str:
    """Markdown for every command of ``eagle3-forensics``, straight from its argparse parsers."""
    from eagle3_forensics.cli.main import build_parser

    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        parser = build_parser()
        out: list[str] = []
        top = _option_rows(parser)  # options of the program itself (--version, ...)
        if top:
            out += [f"## `{parser.prog}`", "", "| argument | meaning | default |", "|---|---|---|", *top, ""]
        for name, (sub, summary) in _subparsers(parser).items():
            out += _command_section(f"{parser.prog} {name}", sub, summary, 2)
    finally:  # the tests call this in-process: leave the terminal width as it was
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before
    return "\n".join(out)


def schema_reference() -> str:
    """Markdown listing every published JSON Schema, self-contained, one collapsible block each."""
    from eagle3_forensics import schemas

    out: list[str] = []
    for name in schemas.names():
        schema: dict[str, Any] = schemas.load(name)
        out += [
            f"## `{schemas.schema_id(name)}`",
            "",
            _cell(str(schema.get("description", ""))),
            "",
            f'??? note "{name}.json (`eagle3-forensics schema {name}`)"',
            "",
            "    ```text",  # not json: highlighting would quadruple the page (1.1 MB)
            *("    " + line for line in json.dumps(schema, indent=2, ensure_ascii=False).splitlines()),
            "    ```",
            "",
        ]
    return "\n".join(out)


def notebook_paths() -> list[Path]:
    """The demo notebooks the site renders, in order."""
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


# --- mkdocs events -------------------------------------------------------------------------------


def _first(func: Any) -> Any:
    """Run this event before the plugins' (mkdocs-jupyter must see the notebooks added here)."""
    try:
        from mkdocs.plugins import event_priority
    except ImportError:  # imported by the tests without mkdocs: the builders need none
        return func
    return event_priority(100)(func)


@_first
def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path in notebook_paths():
        # src_dir is the repository root, so the file is read from notebooks/ where it lives
        files.append(
            File(
                f"notebooks/{path.name}",
                src_dir=str(ROOT),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if SCHEMAS_MARKER in markdown:
        markdown = markdown.replace(SCHEMAS_MARKER, schema_reference())
    return markdown
