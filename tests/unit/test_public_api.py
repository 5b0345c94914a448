"""The published API (docs/architecture.md, "The published API"): the lazy package facades.

A facade is a package ``__init__`` whose ``_EXPORTS`` table maps each public name to the module
that defines it, resolved on first use (``eagle3_forensics._lazy``). The tables are the API: every
name resolves to the object its home module holds, no private name is published, and importing the
facades loads no torch (the top-level package not even numpy), so the CLI and ``diagnose`` start fast.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from types import ModuleType

import pytest
from paths import ROOT

from eagle3_forensics.extras import PROVIDER

PACKAGE = ROOT / "eagle3_forensics"
FACADES = sorted(
    ".".join(p.parent.relative_to(PACKAGE.parent).parts)
    for p in PACKAGE.rglob("__init__.py")
    if "lazy_exports(" in p.read_text(encoding="utf-8")
)
TOP_LEVEL = (
    "build_vocab_mapping",
    "classify_mapping",
    "compare_mappings",
    "suggest_d2t_fix",
    "load_mapping",
    "load_token_ids",
    "coverage_report",
    "diagnose",
    "inspect_checkpoint",
)


NEEDS_EXTRA = object()  # what a name resolves to in the core-only tier when its home needs an extra


def _resolve(package: ModuleType, name: str, module: str) -> tuple[object, object]:
    """The facade's object and its home module's, or :data:`NEEDS_EXTRA` twice where the home module
    imports an extra that is absent (the core-only tier, tests/packaging: torch & co.)."""
    try:
        home = importlib.import_module(f"{package.__name__}.{module}")
        return getattr(package, name), getattr(home, name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in PROVIDER:
            raise
        return NEEDS_EXTRA, NEEDS_EXTRA


def test_the_facades_are_found() -> None:
    assert "eagle3_forensics" in FACADES and "eagle3_forensics.vocab.mapping" in FACADES
    assert len(FACADES) >= 10, FACADES


def test_the_top_level_api_is_the_documented_one() -> None:
    import eagle3_forensics

    assert eagle3_forensics.__all__ == ["__version__", *TOP_LEVEL]
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("## The published API", 1)[1].split("\n## ", 1)[0]
    missing = [n for n in TOP_LEVEL if f"`{n}`" not in section]
    assert not missing, f"docs/architecture.md 'The published API' does not name {missing}"


def test_every_facade_name_resolves_to_its_home_modules_object() -> None:
    problems = []
    for facade in FACADES:
        package = importlib.import_module(facade)
        table: dict[str, str] = package._EXPORTS
        published = sorted(n for n in package.__all__ if n != "__version__")
        if published != sorted(table):
            problems.append(f"{facade}: __all__ {published} is not its table {sorted(table)}")
        problems += [f"{facade}: publishes the private name {n}" for n in table if n.startswith("_")]
        # a name that is also a submodule's is the module or the object depending on import order
        here = PACKAGE.parent.joinpath(*facade.split("."))
        problems += [f"{facade}: {n} is also a submodule" for n in table if (here / f"{n}.py").exists()]
        for name, module in table.items():
            via_facade, at_home = _resolve(package, name, module)
            if via_facade is not at_home:
                problems.append(f"{facade}.{name} is not {facade}.{module}.{name}")
        if not set(table) <= set(dir(package)):
            problems.append(f"{facade}: dir() lacks {sorted(set(table) - set(dir(package)))}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("facade", ["eagle3_forensics", "eagle3_forensics.vocab.mapping"])
def test_an_unknown_name_is_an_attribute_error(facade: str) -> None:
    package = importlib.import_module(facade)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        package.no_such_name  # noqa: B018


def test_importing_the_facades_loads_no_torch_and_the_top_level_no_numpy() -> None:
    code = (
        "import sys, importlib\n"
        "import eagle3_forensics\n"
        "top = sorted(m for m in ('numpy', 'torch') if m in sys.modules)\n"
        f"for f in {FACADES!r}: importlib.import_module(f)\n"
        "print(top, 'torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PACKAGE.parent
    ).stdout.split()
    assert out == ["[]", "False"], out


# -- what the facades stand for inside the package -------------------------------------------------

#: cross-module ``_private`` imports still allowed, each with its reason
PRIVATE_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {}
#: functions over 100 lines still allowed (at most three), each with its reason
LONG_FUNCTIONS_ALLOWED = {
    # one loop over every tensor the engine would load, deciding its fate in order (rename, drop,
    # fill, reject); split, the order of those decisions would be spread over several functions
    ("eagle3_forensics/engines/simulate.py", "simulate_load"): "one ordered pass over the loader's decisions",
}
MAX_FUNCTION_LINES = 100


def _modules() -> list[tuple[str, ast.Module]]:
    root = PACKAGE.parent
    return [
        (p.relative_to(root).as_posix(), ast.parse(p.read_text(encoding="utf-8")))
        for p in sorted(PACKAGE.rglob("*.py"))
    ]


def private_imports(modules: list[tuple[str, ast.Module]]) -> set[tuple[str, str]]:
    """``(file, name)`` for every ``from <package module> import _name`` (relative imports included)."""
    out = set()
    for path, tree in modules:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (
                node.level or (node.module or "").startswith("eagle3_forensics")
            ):
                out |= {
                    (path, a.name)
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                }
    return out


def long_functions(modules: list[tuple[str, ast.Module]]) -> set[tuple[str, str]]:
    """``(file, function)`` for every function longer than :data:`MAX_FUNCTION_LINES` (decorators included)."""
    out = set()
    for path, tree in modules:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([d.lineno for d in node.decorator_list] + [node.lineno])
                if (node.end_lineno or start) - start + 1 > MAX_FUNCTION_LINES:
                    out.add((path, node.name))
    return out


def test_no_module_imports_another_modules_private_name() -> None:
    found = private_imports(_modules())
    assert found <= set(PRIVATE_IMPORTS_ALLOWED), sorted(found - set(PRIVATE_IMPORTS_ALLOWED))
    stale = set(PRIVATE_IMPORTS_ALLOWED) - found
    assert not stale, f"no longer needed, remove from PRIVATE_IMPORTS_ALLOWED: {sorted(stale)}"


def test_functions_are_at_most_100_lines() -> None:
    assert len(LONG_FUNCTIONS_ALLOWED) <= 3
    found = long_functions(_modules())
    assert found <= set(LONG_FUNCTIONS_ALLOWED), sorted(found - set(LONG_FUNCTIONS_ALLOWED))
    stale = set(LONG_FUNCTIONS_ALLOWED) - found
    assert not stale, f"no longer needed, remove from LONG_FUNCTIONS_ALLOWED: {sorted(stale)}"


def test_the_checkers_see_an_offender() -> None:
    body = "\n".join(f"    x = {i}" for i in range(MAX_FUNCTION_LINES))
    tree = ast.parse(f"from eagle3_forensics.errors import _hidden\nfrom . import _near\ndef f():\n{body}\n")
    assert private_imports([("m.py", tree)]) == {("m.py", "_hidden"), ("m.py", "_near")}
    assert long_functions([("m.py", tree)]) == {("m.py", "f")}
