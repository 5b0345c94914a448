"""A released package's source as an AST index: modules, classes, imports followed across files, MROs.

The extractor never imports the engine (its wheel needs CUDA, torch and dozens of dependencies);
it reads the ``.py`` files of the unpacked wheel with :mod:`ast`. Import bindings are followed
across modules and package ``__init__`` re-exports. Platform-split packages bind a name in several
branches (``if current_platform.is_cuda(): from .nvidia.model import X else: ...``): the CUDA branch
is preferred, since a GPU deployment takes it. Every fact points back at its file, line and the
file's sha256 (:class:`Cite`).
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

# an `if` test naming one of these picks the branch a CUDA deployment takes
_CUDA_WORDS = ("is_cuda", "TYPE_CHECKING", "nvidia", "cuda")
_OTHER_PLATFORMS = ("is_rocm", "is_xpu", "is_cpu", "is_tpu", "amd", "rocm")


@dataclass(frozen=True, order=True)
class Cite:
    """Where a fact was read: a file inside the wheel, a line, and the file's sha256."""

    path: str
    line: int
    sha256: str

    def text(self) -> str:
        return f"{self.path}:{self.line}"

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "line": self.line, "sha256": self.sha256}


@dataclass(repr=False)
class Module:
    """One parsed source file."""

    name: str  # dotted module name
    path: str  # path inside the wheel (posix)
    text: str
    tree: ast.Module
    sha256: str
    is_package: bool
    # name -> [(module, attribute or "" for a module, preferred branch)]
    bindings: dict[str, list[tuple[str, str, bool]]] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    aliases: dict[str, ast.expr] = field(default_factory=dict)
    star: list[str] = field(default_factory=list)

    def cite(self, node: ast.AST | None = None) -> Cite:
        return Cite(self.path, getattr(node, "lineno", 1), self.sha256)

    def __repr__(self) -> str:
        return f"Module({self.name})"

    def segment(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or ""


@dataclass(frozen=True, repr=False)
class ClassRef:
    """A class found in the source: its module and definition."""

    module: Module
    node: ast.ClassDef

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def qualname(self) -> str:
        return f"{self.module.name}.{self.node.name}"

    def short(self, strip: str) -> str:
        """``qualname`` without the ``strip`` prefix (``vllm.model_executor.models.``)."""
        q = self.qualname
        return q[len(strip) :] if strip and q.startswith(strip) else q

    def __repr__(self) -> str:
        return f"ClassRef({self.qualname})"

    def method(self, name: str) -> ast.FunctionDef | None:
        for item in self.node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == name:
                return item  # type: ignore[return-value]
        return None

    def cite(self, node: ast.AST | None = None) -> Cite:
        return self.module.cite(node or self.node)

    def __hash__(self) -> int:
        return hash(self.qualname)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClassRef) and other.qualname == self.qualname


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _top_level(body: list[ast.stmt], preferred: bool = True) -> Iterator[tuple[ast.stmt, bool]]:
    """Top-level statements, descending into ``if``/``try`` blocks (the ``else`` of a CUDA test: not preferred)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            test = ast.unparse(stmt.test)
            cuda = any(w in test for w in _CUDA_WORDS)
            other = any(w in test for w in _OTHER_PLATFORMS)
            yield from _top_level(stmt.body, preferred and not other)
            yield from _top_level(stmt.orelse, preferred and not cuda)
        elif isinstance(stmt, ast.Try):
            yield from _top_level(stmt.body, preferred)
            for handler in stmt.handlers:
                yield from _top_level(handler.body, False)
        else:
            yield stmt, preferred


class SourceTree:
    """The ``.py`` files under ``root`` (an unpacked wheel), parsed on demand."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._modules: dict[str, Module | None] = {}

    # -- modules ---------------------------------------------------------------------------------
    def module(self, name: str) -> Module | None:
        if name in self._modules:
            return self._modules[name]
        parts = name.split(".")
        found: Module | None = None
        for rel, package in ((Path(*parts).with_suffix(".py"), False), (Path(*parts, "__init__.py"), True)):
            path = self.root / rel
            if path.is_file():
                found = self._parse(name, path, package)
                break
        self._modules[name] = found
        return found

    def file(self, rel: str) -> Module | None:
        """The module at ``rel`` (a path inside the wheel)."""
        p = Path(rel)
        parts = list(p.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        return self.module(".".join(parts))

    def _parse(self, name: str, path: Path, package: bool) -> Module | None:
        data = path.read_bytes()
        text = data.decode("utf-8", errors="replace")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return None
        rel = path.relative_to(self.root).as_posix()
        mod = Module(name, rel, text, tree, hashlib.sha256(data).hexdigest(), package)
        for stmt, preferred in _top_level(tree.body):
            self._bind(mod, stmt, preferred)
        for node in ast.walk(tree):  # imports inside functions: bound where nothing else binds the name
            if isinstance(node, ast.ImportFrom) and node.col_offset > 0:
                base = self._absolute(mod, node.module, node.level)
                for alias in node.names:
                    local = alias.asname or alias.name
                    if local not in mod.bindings and local not in mod.classes:
                        mod.bindings[local] = [(base, alias.name, False)]
        return mod

    def _bind(self, mod: Module, stmt: ast.stmt, preferred: bool) -> None:
        if isinstance(stmt, ast.ClassDef):
            if preferred or stmt.name not in mod.classes:
                mod.classes[stmt.name] = stmt
        elif isinstance(stmt, ast.FunctionDef):
            mod.functions.setdefault(stmt.name, stmt)
        elif isinstance(stmt, ast.ImportFrom):
            base = self._absolute(mod, stmt.module, stmt.level)
            for alias in stmt.names:
                if alias.name == "*":
                    mod.star.append(base)
                    continue
                pref = preferred and not any(w in base for w in (".amd", ".rocm"))
                mod.bindings.setdefault(alias.asname or alias.name, []).append((base, alias.name, pref))
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                local = alias.asname or alias.name.split(".")[0]
                target = alias.name if alias.asname else alias.name.split(".")[0]
                mod.bindings.setdefault(local, []).append((target, "", preferred))
        elif (
            isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
        ) and isinstance(stmt.value, ast.Name | ast.Attribute):
            mod.aliases.setdefault(stmt.targets[0].id, stmt.value)

    @staticmethod
    def _absolute(mod: Module, name: str | None, level: int) -> str:
        if level == 0:
            return name or ""
        parts = mod.name.split(".")
        if not mod.is_package:
            parts = parts[:-1]
        parts = parts[: len(parts) - (level - 1)] if level > 1 else parts
        return ".".join([*parts, *([name] if name else [])])

    # -- names -----------------------------------------------------------------------------------
    def resolve(
        self, module: str, name: str, _seen: frozenset[tuple[str, str]] = frozenset()
    ) -> ClassRef | None:
        """The class ``name`` means in ``module`` (following imports, re-exports and aliases)."""
        if (module, name) in _seen or len(_seen) > 40:
            return None
        seen = _seen | {(module, name)}
        mod = self.module(module)
        if mod is None:
            return None
        if name in mod.classes:
            return ClassRef(mod, mod.classes[name])
        bindings = sorted(mod.bindings.get(name, []), key=lambda b: not b[2])
        for target, attr, _pref in bindings:
            if attr:
                found = self.resolve(target, attr, seen)
                if found is None and self.module(f"{target}.{attr}") is not None:
                    continue  # a submodule, not a class
                if found is not None:
                    return found
        if name in mod.aliases:
            return self.resolve_expr(mod, mod.aliases[name], seen)
        for star in mod.star:
            found = self.resolve(star, name, seen)
            if found is not None:
                return found
        return None

    def resolve_expr(
        self, mod: Module, expr: ast.expr, _seen: frozenset[tuple[str, str]] = frozenset()
    ) -> ClassRef | None:
        """The class an expression names in ``mod`` (``Name``, ``pkg.Name``, ``Generic[...]``)."""
        if isinstance(expr, ast.Subscript):
            return self.resolve_expr(mod, expr.value, _seen)
        if isinstance(expr, ast.Name):
            return self.resolve(mod.name, expr.id, _seen)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            for target, attr, _pref in mod.bindings.get(expr.value.id, []):
                module = f"{target}.{attr}" if attr else target
                found = self.resolve(module, expr.attr, _seen)
                if found is not None:
                    return found
        return None

    @staticmethod
    def base_name(expr: ast.expr) -> str:
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        if isinstance(expr, ast.Attribute):
            return expr.attr
        return expr.id if isinstance(expr, ast.Name) else ast.unparse(expr)

    def bases(self, cls: ClassRef) -> list[ClassRef | str]:
        """The bases of ``cls``: resolved classes, or the names of those outside the wheel."""
        out: list[ClassRef | str] = []
        for expr in cls.node.bases:
            found = self.resolve_expr(cls.module, expr)
            out.append(found if found is not None else self.base_name(expr))
        return out

    def mro(self, cls: ClassRef) -> list[ClassRef | str]:
        """C3 linearisation over the resolved bases (names outside the wheel are leaves)."""
        return self._mro(cls, frozenset())

    def _mro(self, cls: ClassRef | str, seen: frozenset[str]) -> list[ClassRef | str]:
        if isinstance(cls, str) or cls.qualname in seen:
            return [cls]
        bases = self.bases(cls)
        seqs = [self._mro(b, seen | {cls.qualname}) for b in bases] + [list(bases)]
        out: list[ClassRef | str] = [cls]
        while True:
            seqs = [s for s in seqs if s]
            if not seqs:
                return out
            for seq in seqs:
                head = seq[0]
                if not any(head in s[1:] for s in seqs):
                    break
            else:  # inconsistent hierarchy: fall back to depth-first order
                for seq in seqs:
                    out.extend(x for x in seq if x not in out)
                return out
            out.append(head)
            seqs = [s[1:] if s[0] == head else s for s in seqs]

    def find_method(self, cls: ClassRef, name: str) -> tuple[ClassRef, ast.FunctionDef] | None:
        """The first definition of method ``name`` along the MRO."""
        for c in self.mro(cls):
            if isinstance(c, ClassRef):
                m = c.method(name)
                if m is not None:
                    return c, m
        return None

    def has_base(self, cls: ClassRef, name: str) -> bool:
        return any((c.name if isinstance(c, ClassRef) else c) == name for c in self.mro(cls))
