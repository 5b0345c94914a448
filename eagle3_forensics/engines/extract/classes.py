"""Which class an attribute holds: ``self.model = X(...)`` read along the MRO, for both engines.

A model builds its decoder or language model in ``__init__`` (or a method it calls there, such as
``_init_model``), sometimes through a class attribute (``model_cls = X``) or a factory's
``model_class=X`` keyword. The class it builds decides the capture.
"""

from __future__ import annotations

import ast

from eagle3_forensics.engines.extract.source import ClassRef, Module, SourceTree


def attr_class(tree: SourceTree, cls: ClassRef, attr: str) -> tuple[ClassRef | None, ast.Call | None, Module]:
    """The class assigned to ``self.<attr>`` by a method along ``cls``'s MRO (and the call that built it)."""
    for c in tree.mro(cls):
        if not isinstance(c, ClassRef):
            continue
        for item in c.node.body:
            if not isinstance(item, ast.FunctionDef):
                continue
            for node in ast.walk(item):
                if not isinstance(node, ast.Assign | ast.AnnAssign):
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if not any(ast.unparse(t) == f"self.{attr}" for t in targets):
                    continue
                value, where = _built_by_method(tree, cls, node.value, c.module)
                if isinstance(value, ast.Call):
                    found = _called_class(tree, cls, where, value) or _parameter_default(
                        tree, where, item, value
                    )
                    if found is not None or callee(value) == "init_vllm_registered_model":
                        return found, value, where
    return None, None, cls.module


def _built_by_method(
    tree: SourceTree, cls: ClassRef, value: ast.expr | None, module: Module
) -> tuple[ast.expr | None, Module]:
    """``self._init_model(...)``: the call that method returns and its module (else ``value`` itself)."""
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and ast.unparse(value.func.value) == "self"
    ):
        found = tree.find_method(cls, value.func.attr)
        if found is not None:
            ret = next((n for n in ast.walk(found[1]) if isinstance(n, ast.Return)), None)
            if ret is not None and isinstance(ret.value, ast.Call):
                return ret.value, found[0].module
    return value, module


def _called_class(tree: SourceTree, cls: ClassRef, module: Module, call: ast.Call) -> ClassRef | None:
    """The class a call builds: ``X(...)``, ``self.model_cls(...)`` (a class attribute), or a factory's
    ``model_class=X`` keyword (``initialize_model``)."""
    func = call.func
    if isinstance(func, ast.Attribute) and ast.unparse(func.value) == "self":
        for c in tree.mro(cls):
            if not isinstance(c, ClassRef):
                continue
            for item in c.node.body:
                if isinstance(item, ast.Assign) and any(ast.unparse(t) == func.attr for t in item.targets):
                    return tree.resolve_expr(c.module, item.value)
        return None
    found = tree.resolve_expr(module, func)
    if found is not None:
        return found
    for kw in call.keywords:
        if kw.arg in ("model_class", "model_cls"):
            return tree.resolve_expr(module, kw.value)
    return None


def _parameter_default(
    tree: SourceTree, module: Module, fdef: ast.FunctionDef, call: ast.Call
) -> ClassRef | None:
    """``language_model_cls(...)`` where ``language_model_cls=X`` is a parameter of the method: X."""
    if not isinstance(call.func, ast.Name):
        return None
    args = fdef.args
    pairs = list(zip(args.args[len(args.args) - len(args.defaults) :], args.defaults, strict=True))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
    for arg, default in pairs:
        if arg.arg == call.func.id:
            return tree.resolve_expr(module, default)
    return None


def callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
