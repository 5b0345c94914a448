"""SGLang's target surface: every ``EntryClass`` -> ``set_eagle3_layers_to_capture`` -> id conversion.

SGLang registers each class of ``sglang/srt/models/*.py`` listed in the module's ``EntryClass``,
under its class name. A class that lacks ``set_eagle3_layers_to_capture`` (itself or through a
base) is refused when the server sets up the aux capture. The method converts the drafter's ids
into ``layers_to_capture`` (most add 1: SGLang captures the *input* of layer i, the HF state i);
the decoder's ``forward`` captures before each layer (ids 0..N-1) and, where it tests
``end_layer``, after the last (id N).
"""

from __future__ import annotations

import ast

from eagle3_forensics.engines.extract.classes import attr_class
from eagle3_forensics.engines.extract.facts import CAPTURES, NO_INTERFACE, TargetVerdict, Term, term
from eagle3_forensics.engines.extract.source import Cite, ClassRef, SourceTree
from eagle3_forensics.engines.extract.vllm_capture import forward_sites

MODELS = "sglang.srt.models"
METHOD = "set_eagle3_layers_to_capture"

# conversions, as the records name them (AuxConvert values)
AS_IS = "as_is"
PLUS_ONE = "plus_one"
PLUS_ONE_IF_FIRST_IS_ONE = "plus_one_if_first_is_one"
AS_IS_IF_MAX_IS_N = "as_is_if_max_is_n"
UNTOUCHED = "untouched"


def entry_classes(tree: SourceTree) -> dict[str, tuple[ClassRef, Cite]]:
    """Class name -> (class, where ``EntryClass`` lists it) over ``sglang/srt/models/*.py``."""
    out: dict[str, tuple[ClassRef, Cite]] = {}
    folder = tree.root / "sglang" / "srt" / "models"
    for path in sorted(folder.glob("*.py")):
        mod = tree.module(f"{MODELS}.{path.stem}")
        if mod is None:
            continue
        for stmt in mod.tree.body:
            if not (
                isinstance(stmt, ast.Assign) and any(ast.unparse(t) == "EntryClass" for t in stmt.targets)
            ):
                continue
            elts = stmt.value.elts if isinstance(stmt.value, ast.List | ast.Tuple) else [stmt.value]
            for e in elts:
                cls = tree.resolve_expr(mod, e)
                if cls is not None:
                    out.setdefault(cls.name, (cls, mod.cite(e)))
    return out


def _conversion(text: str) -> str | None:
    if "max(layer_ids) ==" in text:
        return AS_IS_IF_MAX_IS_N
    if "layer_ids[0] == 1" in text:
        return PLUS_ONE_IF_FIRST_IS_ONE
    if "+ 1 for val in layer_ids" in text:
        return PLUS_ONE
    if "list(layer_ids)" in text or "layers_to_capture = layer_ids" in text:
        return AS_IS
    return None


def _default(method: ast.FunctionDef) -> tuple[tuple[Term, ...] | None, bool]:
    """The default ids (``layer_ids is None``) and whether they go through the conversion after."""
    for node in ast.walk(method):
        if isinstance(node, ast.List) and len(node.elts) >= 2:
            terms = [term(e) for e in node.elts]
            if all(t is not None for t in terms):
                shifted = any(
                    isinstance(a, ast.Assign)
                    and a.value is node
                    and any(ast.unparse(t) == "layer_ids" for t in a.targets)
                    for a in ast.walk(method)
                )
                return tuple(t for t in terms if t is not None), shifted
    return None, False


def _delegate(method: ast.FunctionDef) -> str | None:
    """``self.X.set_eagle3_layers_to_capture(...)`` -> ``X``."""
    for node in ast.walk(method):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == METHOD:
            recv = node.func.value
            if isinstance(recv, ast.Attribute) and ast.unparse(recv.value) == "self":
                return recv.attr
    return None


def _stored_on(method: ast.FunctionDef) -> str:
    """``self.X.layers_to_capture = ...`` -> ``X`` (the decoder; ``model`` when not found)."""
    for node in ast.walk(method):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if (
                    isinstance(t, ast.Attribute)
                    and t.attr == "layers_to_capture"
                    and isinstance(t.value, ast.Attribute)
                ) and ast.unparse(t.value.value) == "self":
                    return t.value.attr
    return "model"


def _stores_as_given(text: str) -> bool:
    """A decoder's own method that stores what it is handed (``self.layers_to_capture = layers_to_capture``)."""
    return "self.layers_to_capture = layers_to_capture" in text


class SglangTargets:
    """Verdicts for one unpacked SGLang wheel."""

    def __init__(self, tree: SourceTree, refusal: tuple[str, Cite | None]) -> None:
        self.tree, self.refusal = tree, refusal
        self.entries = entry_classes(tree)

    def all(self) -> dict[str, TargetVerdict]:
        return {name: self.verdict(name) for name in sorted(self.entries)}

    def verdict(self, name: str) -> TargetVerdict:
        cls, cite = self.entries[name]
        v = TargetVerdict(name, cls.short(f"{MODELS}."))
        v.cite(cite)
        self._classify(v, cls, 0)
        return v

    def _classify(self, v: TargetVerdict, cls: ClassRef, depth: int) -> None:
        found = self.tree.find_method(cls, METHOD)
        if found is None:
            text, where = self.refusal
            v.kind, v.where, v.failure = NO_INTERFACE, v.cls, text
            if where is not None:
                v.cite(where)
            return
        owner, method = found
        v.cite(owner.cite(method))
        text = owner.module.segment(method)
        v.where = f"{owner.short(MODELS + '.')} ({owner.module.path.rsplit('/', 1)[-1]}:{method.lineno})"
        delegate = _delegate(method)
        conversion = _conversion(text)
        if delegate is not None and conversion is None and depth < 3:  # the inner class converts
            inner = attr_class(self.tree, owner, delegate)[0]
            if inner is None:
                v.reason = f"self.{delegate} is built outside the wheel (its ids go untouched to it)"
                v.conversion = UNTOUCHED
                return
            self._classify(v, inner, depth + 1)
            return
        if conversion is None and _stores_as_given(text):
            conversion = AS_IS
        if conversion is None:
            v.reason = f"{v.where}: the id conversion is not one the pass knows"
            return
        self._decoder(v, owner, delegate or _stored_on(method), None)
        if not v.decided:
            return
        v.conversion = v.conversion or conversion or PLUS_ONE
        terms, shifted = _default(method)
        if terms is not None and shifted and v.conversion == PLUS_ONE:
            terms = tuple((a, b, c + 1) for a, b, c in terms)
        v.default_ids = terms

    def _decoder(self, v: TargetVerdict, owner: ClassRef, attr: str, inner: ClassRef | None) -> None:
        """Captured ids from the decoder's ``forward``: ``if i in self.layers_to_capture`` sites."""
        decoder = inner or attr_class(self.tree, owner, attr)[0] or owner
        sites, where = forward_sites(self.tree, decoder, "layers_to_capture")
        v.cite(*sites.cites)
        valid = sites.valid()
        if sites.unplaced or valid is None:
            found = "no capture site" if not sites.found else ", ".join(sites.unplaced) or "a gap"
            v.reason = f"{where.short(MODELS + '.') if where else decoder.name}.forward: {found}"
            return
        v.kind, (v.first_id, v.last) = CAPTURES, valid
        v.how = "+".join(sorted(sites.segments, key=["pre0", "before", "after", "end"].index))
        if sites.crash_at_zero:  # the captured index 0 is layer 0's input, where residual is still None
            v.below_first = "TypeError at the first forward: residual is None before layer 0"
