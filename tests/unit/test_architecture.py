"""The package tree shows its layers: no import circle, and no lower layer importing an upper one.

Every ``import`` counts — module-level, function-local and ``TYPE_CHECKING`` ones alike — because a
function-local import hides a dependency without removing it. docs/architecture.md explains the
layers; this test is their definition.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "eagle3_forensics"

# Lowest first. A module may import from its own layer or any layer below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "findings", "_lazy", "schemas", "extras"),
    ("io",),
    ("engines", "vocab", "repair.policy"),
    ("checks",),
    ("reference", "repair", "demo"),
    ("probe",),
    ("views",),
    ("runs",),
    ("cli", "__main__"),
)


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path  # "" is the package itself
    return out


MODULES = _modules()


def layer_of(module: str) -> int:
    """The layer of a module: the longest matching prefix in LAYERS (``repair.policy`` before ``repair``)."""
    best: tuple[int, int] | None = None
    for rank, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and (best is None or len(name) > best[1]):
                best = (rank, len(name))
    if best is None:
        raise AssertionError(f"module {module!r} is in no layer: add it to LAYERS and docs/architecture.md")
    return best[0]


def _resolve(target: str) -> str | None:
    """The project module an absolute import name refers to (``a.b.name`` -> ``a.b``)."""
    if target != "eagle3_forensics" and not target.startswith("eagle3_forensics."):
        return None
    rel = target.removeprefix("eagle3_forensics").removeprefix(".")
    while rel and rel not in MODULES:
        rel = rel.rsplit(".", 1)[0] if "." in rel else ""
    return rel


def imports_of(module: str) -> set[str]:
    path = MODULES[module]
    is_pkg = path.name == "__init__.py"
    package = module if is_pkg else module.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ["eagle3_forensics", *[p for p in package.split(".") if p]]
                base = base[: len(base) - (node.level - 1)]
                src = ".".join(base + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            names = [src] + [f"{src}.{a.name}" for a in node.names]
        for name in names:
            dep = _resolve(name)
            if dep is not None and dep != module and not (is_pkg and dep.startswith(module + ".")):
                found.add(dep)
    return found


GRAPH = {m: imports_of(m) for m in MODULES if m}


def test_every_module_has_a_layer() -> None:
    for module in GRAPH:
        layer_of(module)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_upward_import(module: str) -> None:
    upward = sorted(d for d in GRAPH[module] if d and layer_of(d) > layer_of(module))
    assert not upward, f"{module} (layer {layer_of(module)}) imports upper-layer modules {upward}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of size > 1 (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle() -> None:
    assert _cycles(GRAPH) == []


def test_the_checker_sees_a_circle_and_an_upward_import() -> None:
    """The rules above can fail: a made-up graph with a circle and an io -> cli import."""
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    assert layer_of("io.checkpoint") < layer_of("cli.main")
    assert layer_of("repair.policy") < layer_of("checks.diagnose") < layer_of("repair.execute")


# -- function-local imports ------------------------------------------------------------------------

# A function-local import is kept only for an expensive or optional dependency, and says which with
# a trailing comment: `# heavy: torch` (deferred: costly to import) or `# optional: pandas` (an extra
# that may be absent). Anything else belongs at module level, where the layering test sees it plainly.
LOCAL_IMPORT_REASON = re.compile(r"#\s*(heavy|optional):\s*\S")


def uncommented_local_imports(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every import inside a function body without a ``# heavy:``/``# optional:`` reason."""
    tree = ast.parse(source)
    lines = source.splitlines()
    seen: set[int] = set()
    out: list[tuple[int, str]] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import | ast.ImportFrom) and node.lineno not in seen:
                seen.add(node.lineno)
                span = lines[node.lineno - 1 : (node.end_lineno or node.lineno)]
                if not any(LOCAL_IMPORT_REASON.search(line) for line in span):
                    out.append((node.lineno, span[0].strip()))
    return sorted(out)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m))
def test_function_local_imports_say_why(module: str) -> None:
    bad = uncommented_local_imports(MODULES[module].read_text())
    assert not bad, (
        f"{module}: function-local imports without a '# heavy: ...' or '# optional: ...' reason "
        f"(move them to module level, or say why they are deferred): {bad}"
    )


def test_the_checker_sees_an_uncommented_local_import() -> None:
    source = (
        "def f():\n"
        "    from eagle3_forensics.io import checkpoint\n"
        "    import torch  # heavy: torch\n"
        "    from x import (  # optional: x\n"
        "        y,\n"
        "    )\n"
    )
    assert uncommented_local_imports(source) == [(2, "from eagle3_forensics.io import checkpoint")]


# -- docs/architecture.md: one hop from a finding code to its check, and to every view -----------

DOC = ROOT / "docs" / "architecture.md"


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _table_rows(section: str) -> list[tuple[str, str]]:
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 2 and not set(cells[0]) <= {"-"} and cells[0] != "module":
            rows.append((cells[0], cells[1]))
    return rows


def _paths(cell: str) -> list[Path]:
    """``a/b.py``, ``c.py`` -> [a/b.py, a/c.py] (a bare name is a sibling of the previous one)."""
    out: list[Path] = []
    for name in re.findall(r"`([^`]+\.py)`", cell):
        out.append(PKG / name if "/" in name or not out else out[-1].parent / name)
    return out


def test_architecture_doc_maps_every_finding_code_to_the_module_that_emits_it() -> None:
    from eagle3_forensics.findings import CATALOGUE

    where: dict[str, list[Path]] = {}
    for modules, codes in _table_rows(_section("Finding codes")):
        for code in re.findall(r"`([A-Z0-9_]+)`", codes):
            where.setdefault(code, []).extend(_paths(modules))
    assert set(where) == set(CATALOGUE), set(CATALOGUE) ^ set(where)
    for code, paths in where.items():
        assert any(p.is_file() and f'"{code}"' in p.read_text() for p in paths), (code, paths)


def test_architecture_doc_lists_every_view_module() -> None:
    listed = {p.name for cell, _ in _table_rows(_section("Views")) for p in _paths(cell)}
    modules = {p.name for p in (PKG / "views").glob("*.py") if p.name != "__init__.py"}
    assert listed == modules
