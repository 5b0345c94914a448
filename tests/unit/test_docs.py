"""The documentation holds together: every citation of a reference page (``docs/reference/X.md §N``)
names a heading that exists, nothing cites a path outside the repository, the site's nav lists every
page, the README stays short with working links, and the generated pages cover every command and schema.

``make docs`` (``mkdocs build --strict``) checks the links and anchors of the site itself.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from paths import ROOT

DOCS = ROOT / "docs"
THIS = Path(__file__).resolve()

TEXT_SUFFIXES = {".py", ".md", ".yml", ".yaml", ".toml", ".txt", ".ipynb", ".sh", ".cfg", ".ini", ".json"}
TEXT_NAMES = {"Makefile", "run"}

# `docs/reference/acceptance.md §2.2`, `docs/reference/formats.md` §0 and §8 S2/S3, ... §2, §3
CITATION = re.compile(
    r"docs/reference/(?P<page>[\w-]+)\.md`*"
    r"(?P<sections>(?:(?:\s*,\s*|\s+and\s+|\s+)§\d+(?:\.\d+)*(?:\s+S\d+(?:/S\d+)*)?)+)"
)
SECTION = re.compile(r"§(?P<number>\d+(?:\.\d+)*)(?:\s+(?P<items>S\d+(?:/S\d+)*))?")

# Citations no reader of the repository can follow: files outside it (research notes on the machines
# it was written on; /work/eagle3-forensics is the container path of docs/cluster.md's examples), or
# reference texts by a name that is not a page of docs/reference/ (a relative link "(formats.md#..."
# between those pages is fine).
OUTSIDE = re.compile(
    r"/work/(?!eagle3-forensics\b)|shared/reference|eagle3-formats|FACTS\.md|FACTS §"
    r"|(?<![\w/(-])(?:acceptance|formats)\.md"
)

# Files whose citations their owners are rewriting on other branches. The list may only shrink: a
# listed file that is clean (or gone) fails below, so an entry cannot outlive its reason.
PENDING: set[str] = set()  # files allowed to cite outside the repository while being fixed: none


def _repo_files() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
        paths = [ROOT / line for line in out if line]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an sdist): walk the tree
        skip = {".git", ".venv", "build", "data", "reports", "node_modules"}
        paths = [p for p in ROOT.rglob("*") if not skip & set(p.relative_to(ROOT).parts)]
    return sorted(
        p
        for p in paths
        if p.is_file() and (p.suffix in TEXT_SUFFIXES or p.name in TEXT_NAMES) and p.resolve() != THIS
    )


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _headings(page: str) -> list[str]:
    path = DOCS / "reference" / f"{page}.md"
    assert path.is_file(), f"docs/reference/{page}.md does not exist"
    return [line for line in _text(path).splitlines() if line.startswith("#")]


def _citations() -> list[tuple[str, str, str, str | None]]:
    """(file, page, section number, item such as 'S2' or None) for every citation in the repository."""
    found = []
    for path in _repo_files():
        rel = str(path.relative_to(ROOT))
        for match in CITATION.finditer(_text(path)):
            for section in SECTION.finditer(match["sections"]):
                items = section["items"].split("/") if section["items"] else [None]
                found += [(rel, match["page"], section["number"], item) for item in items]
    return found


def test_every_reference_citation_names_a_heading() -> None:
    citations = _citations()
    assert len(citations) >= 14, "the probe and io modules cite the reference pages"
    missing = []
    for rel, page, number, item in citations:
        label = f"§{number} {item}" if item else f"§{number}"
        pattern = re.compile(rf"§{re.escape(number)}(?![\d.])" + (rf"\s+{item}\b" if item else ""))
        if not any(pattern.search(h) for h in _headings(page)):
            missing.append(f"{rel}: docs/reference/{page}.md {label}")
    assert not missing, "citations without a heading:\n" + "\n".join(missing)


def test_the_citation_pattern_reads_every_form() -> None:
    text = (
        "(``docs/reference/acceptance.md`` §2, §3) docs/reference/formats.md §0 and §8 S2/S3; "
        "docs/reference/acceptance.md §2.2."
    )
    found = [
        (m["page"], s["number"], s["items"])
        for m in CITATION.finditer(text)
        for s in SECTION.finditer(m["sections"])
    ]
    assert found == [
        ("acceptance", "2", None),
        ("acceptance", "3", None),
        ("formats", "0", None),
        ("formats", "8", "S2/S3"),
        ("acceptance", "2.2", None),
    ]


def test_nothing_cites_a_path_outside_the_repository() -> None:
    offenders, clean_pending = [], []
    for path in _repo_files():
        rel = str(path.relative_to(ROOT))
        hits = [m.group(0) for m in OUTSIDE.finditer(_text(path))]
        if rel in PENDING:
            if not hits:
                clean_pending.append(rel)
        elif hits:
            offenders.append(f"{rel}: {sorted(set(hits))}")
    assert not offenders, "cite docs/reference/ or the code instead:\n" + "\n".join(offenders)
    gone = sorted(p for p in PENDING if not (ROOT / p).is_file())
    assert not clean_pending and not gone, f"remove from PENDING (clean or gone): {clean_pending + gone}"


def _nav_entries(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [e for item in nav for e in _nav_entries(item)]
    if isinstance(nav, dict):
        return [e for value in nav.values() for e in _nav_entries(value)]
    return []


def test_the_nav_lists_every_page_and_only_pages_that_exist() -> None:
    config = yaml.safe_load(_text(ROOT / "mkdocs.yml"))
    entries = _nav_entries(config["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(e for e in entries if e.endswith(".md")) == pages
    for entry in entries:
        source = ROOT / entry if entry.startswith("notebooks/") else DOCS / entry
        assert source.is_file(), entry
    notebooks = sorted(f"notebooks/{p.name}" for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(e for e in entries if e.endswith(".ipynb")) == notebooks


def test_readme_is_short_and_its_links_resolve() -> None:
    text = _text(ROOT / "README.md")
    assert len(text.splitlines()) <= 200
    links = re.findall(r"\]\((?!https?://)([^)#\s]+)(?:#[^)]*)?\)", text)
    assert links, "the README links the docs pages"
    for link in links:
        assert (ROOT / link).exists(), link
    for extra in ("probe", "notebooks", "models", "server", "offline", "docs", "dev"):
        assert f"`{extra}`" in text, extra
    assert "make report" in text and "make test" in text


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_covers_every_command_and_option() -> None:
    import argparse

    from eagle3_forensics.cli.main import build_parser

    page = _hooks().cli_reference()

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    assert f"`{name} {sub_name}`" in page, f"{name} {sub_name}"
                    walk(sub, f"{name} {sub_name}")
            elif action.option_strings and not isinstance(action, argparse._HelpAction):
                assert f"`{action.option_strings[-1]}`" in page, (name, action.option_strings)

    walk(build_parser(), "eagle3-forensics")


def test_the_schema_page_lists_every_schema() -> None:
    from eagle3_forensics import schemas

    page = _hooks().schema_reference()
    for name in schemas.names():
        assert f"## `{schemas.schema_id(name)}`" in page, name


@pytest.mark.parametrize("marker", ["<!-- cli-reference -->", "<!-- schemas -->"])
def test_the_generated_pages_keep_their_markers(marker: str) -> None:
    assert sum(marker in _text(p) for p in DOCS.glob("*.md")) == 1, marker
