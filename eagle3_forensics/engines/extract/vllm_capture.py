"""Where a vLLM decoder's ``forward`` captures EAGLE-3 aux states, read from its AST.

vLLM stores the configured ids on the decoder (``aux_hidden_state_layers``) and its ``forward``
captures them at one or more sites: ``_maybe_add_hidden_state(aux, i, ...)`` (``EagleModelMixin``)
or ``if i in self.aux_hidden_state_layers: aux.append(...)``. Each site is placed relative to the
loop over the layers: before the loop (id 0), inside it before the layer call (ids 0..N-1) or after
it with ``i + 1`` (ids 1..N), after the loop at ``end_layer`` (id N). A site that adds ``residual``
unguarded while ``residual = None`` before layer 0 makes id 0 crash the first forward (DeepSeek-V2).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from eagle3_forensics.engines.extract.source import Cite, ClassRef, SourceTree

_AUX_ATTR = "aux_hidden_state_layers"
_MIXIN_CALL = "_maybe_add_hidden_state"
_FLAG = "_is_layer_to_capture"


@dataclass
class Sites:
    """The capture sites of one ``forward``: segments ``pre0``, ``before``, ``after``, ``end``."""

    segments: set[str] = field(default_factory=set)
    crash_at_zero: bool = False
    unplaced: list[str] = field(default_factory=list)  # sites the pass could not place
    cites: list[Cite] = field(default_factory=list)
    mixin: bool = False

    @property
    def found(self) -> bool:
        return bool(self.segments or self.unplaced)

    def valid(self) -> tuple[int, str] | None:
        """(first valid id, "N" or "N-1"), or None when the sites leave a gap."""
        seg = self.segments
        if not seg:
            return None
        lo = 0 if seg & {"pre0", "before"} else 1 if "after" in seg else None
        hi = "N" if seg & {"after", "end"} else "N-1" if "before" in seg else None
        if lo is None or hi is None:
            return None
        if self.crash_at_zero and lo == 0:
            lo = 1
        return lo, hi


def _is_layer_loop(node: ast.For) -> bool:
    return "layer" in ast.unparse(node.iter)


def _loop_vars(node: ast.For) -> set[str]:
    return {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}


def _layer_call_line(loop: ast.For) -> int | None:
    """The line of the layer call inside the loop (the first call of the loop's layer variable)."""
    layer_names = _loop_vars(loop) | {"layer"}
    for stmt in loop.body:
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Call):
                f = sub.func
                if isinstance(f, ast.Name) and f.id in layer_names:
                    return sub.lineno
                if isinstance(f, ast.Subscript) and "layers" in ast.unparse(f.value):
                    return sub.lineno
    return None


def _id_expr_kind(expr: ast.expr, loop_vars: set[str]) -> str:
    """``var`` (a loop variable), ``var+1``, ``zero``, ``end`` or ``other``."""
    text = ast.unparse(expr).replace(" ", "")
    if isinstance(expr, ast.Name) and expr.id in loop_vars:
        return "var"
    if (
        isinstance(expr, ast.BinOp)
        and isinstance(expr.op, ast.Add)
        and isinstance(expr.left, ast.Name)
        and expr.left.id in loop_vars
        and ast.unparse(expr.right) == "1"
    ):
        return "var+1"
    if text in ("0", "self.start_layer"):
        return "zero"
    if text in (
        "self.end_layer",
        "len(self.layers)",
        "self.config.num_hidden_layers",
        "self.num_layers",
        "num_layers",
    ):
        return "end"
    return "other"


def _site_expr(node: ast.AST, attr: str = _AUX_ATTR) -> tuple[ast.expr, ast.AST] | None:
    """(id expression, capture node) when ``node`` is a capture site (``if i in self.<attr>``,
    ``x if i in self.<attr> else None``, or the mixin's call)."""
    mixin = (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == _MIXIN_CALL
    )
    if mixin and isinstance(node, ast.Call) and len(node.args) >= 2:
        return node.args[1], node
    test = node.test if isinstance(node, ast.If | ast.IfExp) else None
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):  # `cond and i in self.<attr>` too
        test = next((t for t in test.values if isinstance(t, ast.Compare) and attr in ast.unparse(t)), None)
    if isinstance(test, ast.Compare) and (
        len(test.ops) == 1 and isinstance(test.ops[0], ast.In) and attr in ast.unparse(test.comparators[0])
    ):
        return test.left, node
    return None


def _adds_residual_unguarded(node: ast.AST) -> bool:
    text = ast.unparse(node)
    return "+ residual" in text and "residual is not None" not in text and "residual is None" not in text


class _Walker:
    def __init__(self, sites: Sites, owner: ClassRef, assigns_none: bool, attr: str) -> None:
        self.sites, self.owner, self.assigns_none, self.attr = sites, owner, assigns_none, attr

    def visit(self, body: list[ast.stmt], loop: ast.For | None, after_loop: bool) -> bool:
        """Walk ``body``; True when it ran the layer loop (what follows is after the loop)."""
        for stmt in body:
            if isinstance(stmt, ast.For) and _is_layer_loop(stmt):
                self.visit(stmt.body, stmt, False)
                after_loop = True
                continue
            if isinstance(stmt, ast.If) and _site_expr(stmt, self.attr):
                self._site(stmt, loop, after_loop)
                continue
            compound = isinstance(stmt, ast.If | ast.For | ast.While | ast.With | ast.Try)
            headers = [getattr(stmt, a) for a in ("test", "iter") if hasattr(stmt, a)]
            headers += [i.context_expr for i in getattr(stmt, "items", [])]
            for node in headers if compound else [stmt]:
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Call | ast.IfExp) and _site_expr(sub, self.attr):
                        self._site(sub, loop, after_loop)
                    elif isinstance(sub, ast.IfExp) and loop is not None and _FLAG in ast.unparse(sub.test):
                        self.sites.segments.add("before")  # SGLang MiniMax-M3: a per-layer flag
                        self.sites.cites.append(self.owner.cite(sub))
            ran = False
            for name in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, name, None) if compound else None
                if inner:
                    ran |= self.visit(inner, loop, after_loop)
            for handler in getattr(stmt, "handlers", []) if compound else []:
                ran |= self.visit(handler.body, loop, after_loop)
            after_loop |= ran and loop is None
        return after_loop

    def _site(self, node: ast.AST, loop: ast.For | None, after_loop: bool) -> None:
        found = _site_expr(node, self.attr)
        assert found is not None
        expr, site = found
        self.sites.cites.append(self.owner.cite(site))
        self.sites.mixin |= isinstance(site, ast.Call)
        self._place(expr, site, loop, after_loop)

    def _place(self, expr: ast.expr, site: ast.AST, loop: ast.For | None, after_loop: bool) -> None:
        kind = _id_expr_kind(expr, _loop_vars(loop) if loop else set())
        unguarded = isinstance(site, ast.If) and _adds_residual_unguarded(site)
        if loop is not None:
            call_line = _layer_call_line(loop)
            # a conditional handed to the layer call captures that layer's input
            before = (
                isinstance(site, ast.IfExp) or call_line is None or getattr(site, "lineno", 0) < call_line
            )
            if kind == "var" and before:
                self.sites.segments.add("before")
                self.sites.crash_at_zero |= unguarded and self.assigns_none
            elif kind == "var+1" and not before:
                self.sites.segments.add("after")
            else:
                self.sites.unplaced.append(f"in-loop id {ast.unparse(expr)}")
        elif not after_loop and kind == "zero":
            self.sites.segments.add("pre0")
            self.sites.crash_at_zero |= unguarded and self.assigns_none
        elif after_loop and kind == "end":
            self.sites.segments.add("end")
        else:
            self.sites.unplaced.append(f"id {ast.unparse(expr)} outside the layer loop")


def forward_sites(tree: SourceTree, holder: ClassRef, attr: str = _AUX_ATTR) -> tuple[Sites, ClassRef | None]:
    """The capture sites of the ``forward`` ``holder`` runs (along its MRO, through ``super().forward``)."""
    sites = Sites()
    first: ClassRef | None = None
    for owner in tree.mro(holder):
        if not isinstance(owner, ClassRef):
            continue
        fwd = owner.method("forward")
        if fwd is None:
            continue
        first = first or owner
        text = owner.module.segment(fwd)
        _Walker(sites, owner, "residual = None" in text, attr).visit(fwd.body, None, False)
        if sites.found:
            return sites, owner
        if "super().forward(" not in text:
            break
    return sites, first


def passes_ids_on(fwd_text: str) -> bool:
    """The forward hands the configured ids to something else (capture happens elsewhere)."""
    return f"self.{_AUX_ATTR}" in fwd_text
