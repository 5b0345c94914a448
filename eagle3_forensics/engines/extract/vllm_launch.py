"""vLLM's launch rules read from ``vllm/config/speculative.py``: fields, methods, mechanical refusals.

``SpeculativeConfig`` is a pydantic dataclass (``@config``: ``extra="forbid"``), so a key that is
not a field refuses the launch. Its validators refuse more: a method outside ``SpeculativeMethod``
(``_validate_method``, 0.34), ``if self.X is not None: raise`` (``tensor_parallel_size``), the
method-specific options the eagle3 speculator config does not list in ``supported_options``.
A ``rejection_sample_method`` whose branch warns "lossy" changes the output distribution.
"""

from __future__ import annotations

import ast

from eagle3_forensics.engines.extract.facts import Extraction, Fact
from eagle3_forensics.engines.extract.source import Cite, ClassRef, Module, SourceTree

SPEC = "vllm.config.speculative"


def _assign(mod: Module, name: str) -> ast.Assign | ast.AnnAssign | None:
    for s in mod.tree.body:
        if isinstance(s, ast.Assign) and any(ast.unparse(t) == name for t in s.targets):
            return s
        if isinstance(s, ast.AnnAssign) and ast.unparse(s.target) == name and s.value is not None:
            return s
    return None


def _literal_values(mod: Module, name: str, seen: frozenset[str] = frozenset()) -> list[str] | None:
    """The strings of ``Name = Literal[...]`` in ``mod``, nested Literal aliases flattened."""
    found = _assign(mod, name)
    node = found.value if found is not None else None
    if not (isinstance(node, ast.Subscript) and ast.unparse(node.value) == "Literal") or name in seen:
        return None
    elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    out: list[str] = []
    for e in elts:
        if isinstance(e, ast.Constant):
            out.append(str(e.value))
        elif isinstance(e, ast.Name):
            out.extend(_literal_values(mod, e.id, seen | {name}) or [])
    return out


def _fields(cls: ClassRef) -> list[str]:
    out = []
    for item in cls.node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            ann = ast.unparse(item.annotation)
            value = ast.unparse(item.value) if item.value is not None else ""
            if "ClassVar" in ann or "init=False" in value:
                continue
            out.append(item.target.id)
    return out


def _refusals(cls: ClassRef) -> list[tuple[str, str, ast.AST]]:
    """``if self.X is not None: raise ValueError(msg)`` anywhere in the class: (X, message, node)."""
    out: list[tuple[str, str, ast.AST]] = []
    for node in ast.walk(cls.node):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)):
            continue
        test = node.test
        left = ast.unparse(test.left)
        if not (
            left.startswith("self.")
            and isinstance(test.ops[0], ast.IsNot)
            and ast.unparse(test.comparators[0]) == "None"
        ):
            continue
        first = node.body[0] if node.body else None
        if isinstance(first, ast.Raise) and first.exc is not None:
            msg = " ".join(
                str(c.value)
                for c in ast.walk(first.exc)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            )
            out.append((left.removeprefix("self."), msg, node))
    return out


def _lossy(cls: ClassRef, values: list[str]) -> list[tuple[str, ast.AST]]:
    """Values of ``rejection_sample_method`` whose branch says the method is lossy."""
    out: list[tuple[str, ast.AST]] = []
    for node in ast.walk(cls.node):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            if ast.unparse(node.test.left) != "self.rejection_sample_method":
                continue
            comp = node.test.comparators[0]
            if (
                isinstance(comp, ast.Constant)
                and comp.value in values
                and "lossy" in ast.unparse(node).lower()
            ):
                out.append((str(comp.value), node))
    return out


def _supported_options(tree: SourceTree, method: str) -> tuple[set[str], Cite] | None:
    """``supported_options`` of the speculator config class registered for ``method`` (0.34)."""
    mod = tree.module("vllm.v1.worker.gpu.spec_decode.speculator_config")
    reg = _assign(mod, "_CONFIG_BY_METHOD") if mod else None
    if reg is None or not isinstance(reg.value, ast.Dict):
        return None
    for k, v in zip(reg.value.keys, reg.value.values, strict=True):
        if not (isinstance(k, ast.Constant) and k.value == method and isinstance(v, ast.Call)):
            continue
        names = [str(a.value) for a in v.args if isinstance(a, ast.Constant)]
        cls = (
            tree.resolve(f"vllm.v1.worker.gpu.spec_decode.{names[0]}", names[1]) if len(names) == 2 else None
        )
        for c in tree.mro(cls) if cls else []:
            for item in c.node.body if isinstance(c, ClassRef) else []:
                target = item.targets[0] if isinstance(item, ast.Assign) else getattr(item, "target", None)
                if target is not None and ast.unparse(target) == "supported_options":
                    assert isinstance(c, ClassRef)
                    strings = (n.value for n in ast.walk(item) if isinstance(n, ast.Constant))
                    return {s for s in strings if isinstance(s, str)}, c.cite(item)
    return None


def extract_launch(tree: SourceTree, out: Extraction) -> None:
    """The launch facts of one vLLM wheel into ``out.facts`` (a missing piece: a fact with a reason)."""
    mod = tree.module(SPEC)
    cls = tree.resolve(SPEC, "SpeculativeConfig") if mod else None
    if mod is None or cls is None:
        out.add_fact(
            Fact("speculative_config", None, reason="vllm/config/speculative.py has no SpeculativeConfig")
        )
        return
    out.add_fact(Fact("speculative_config.fields", _fields(cls), [cls.cite()]))
    forbid = tree.module("vllm.config.utils")
    decorated = any(ast.unparse(d).startswith("config") for d in cls.node.decorator_list)
    if forbid is not None and decorated and 'extra="forbid"' in forbid.text:
        line = next(i for i, t in enumerate(forbid.text.splitlines(), 1) if 'extra="forbid"' in t)
        out.add_fact(
            Fact("speculative_config.extra", "forbid", [cls.cite(), forbid.cite(ast.Pass(lineno=line))])
        )
    else:
        out.add_fact(
            Fact("speculative_config.extra", None, [cls.cite()], reason="extra keys: no forbid found")
        )
    methods = _literal_values(mod, "SpeculativeMethod")
    node = _assign(mod, "SpeculativeMethod")
    out.add_fact(
        Fact("methods", methods, [mod.cite(node)] if node else [], "" if methods else "no SpeculativeMethod")
    )
    validator = cls.method("_validate_method")
    if validator is not None:
        out.add_fact(Fact("methods.unknown", "refused: Unknown speculative method", [cls.cite(validator)]))
    else:
        out.add_fact(
            Fact(
                "methods.unknown",
                None,
                [cls.cite()],
                reason="no _validate_method: what an unknown method does",
            )
        )
    for name, msg, site in _refusals(cls):
        out.add_fact(Fact(f"refuses.{name}", msg, [cls.cite(site)]))
    options = _assign(mod, "_METHOD_SPECIFIC_OPTIONS")
    supported = _supported_options(tree, "eagle3")
    if options is not None and options.value is not None and supported is not None:
        listed = [str(n.value) for n in ast.walk(options.value) if isinstance(n, ast.Constant)]
        refused = sorted(o for o in listed if o not in supported[0])
        out.add_fact(Fact("refuses.eagle3_options", refused, [mod.cite(options), supported[1]]))
    values = _literal_values(mod, "RejectionSampleMethod")
    rs_node = _assign(mod, "RejectionSampleMethod")
    if values is not None and rs_node is not None:
        out.add_fact(Fact("rejection_sample_methods", values, [mod.cite(rs_node)]))
        lossy = _lossy(cls, values)
        out.add_fact(
            Fact(
                "rejection_sample_methods.lossy",
                [v for v, _ in lossy],
                [cls.cite(n) for _, n in lossy] or [mod.cite(rs_node)],
            )
        )
