"""The published API (docs/architecture.md, "The published API"): the lazy package facades.

A facade is a package ``__init__`` whose ``_EXPORTS`` table maps each public name to the module
that defines it, resolved on first use (``eagle3_forensics._lazy``). The tables are the API: every
name resolves to the object its home module holds, no private name is published, and importing the
facades loads no torch (the top-level package not even numpy), so the CLI and ``diagnose`` start fast.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from eagle3_forensics.extras import PROVIDER

PACKAGE = Path(__file__).resolve().parents[2] / "eagle3_forensics"
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


def _resolve(package: ModuleType, name: str) -> object:
    try:
        return getattr(package, name)
    except ModuleNotFoundError as exc:  # the core-only tier (tests/packaging): torch & co. absent
        if (exc.name or "").split(".")[0] not in PROVIDER:
            raise
        pytest.skip(f"{package.__name__}.{name} needs {exc.name} (an extra)")


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
            home = importlib.import_module(f"{facade}.{module}")
            if _resolve(package, name) is not getattr(home, name):
                problems.append(f"{facade}.{name} is not {home.__name__}.{name}")
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
