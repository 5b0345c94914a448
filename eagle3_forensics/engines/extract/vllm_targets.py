"""vLLM's target surface: every registered architecture -> class -> MRO -> ``SupportsEagle3`` -> capture.

The registries are ``_TEXT_GENERATION_MODELS``, ``_MULTIMODAL_MODELS`` and
``_TRANSFORMERS_SUPPORTED_MODELS`` of ``model_executor/models/registry.py`` (platform packages
under ``vllm/models/`` are named there by absolute module). The runner refuses a class without
``SupportsEagle3``; the interface's own ``set_aux_hidden_state_layers`` asserts that the language
model's decoder is an ``EagleModelMixin``; a class may override it (DeepSeek-V2 sets the ids on its
decoder, the Transformers backend records ``_layer_names[layer - 1]``). The decoder's ``forward``
then decides the valid ids (:mod:`.vllm_capture`).
"""

from __future__ import annotations

import ast

from eagle3_forensics.engines.extract.classes import attr_class, callee
from eagle3_forensics.engines.extract.facts import (
    CAPTURES,
    CRASH_FIRST_FORWARD,
    DELEGATED,
    INTERFACE_DEFAULT,
    NO_INTERFACE,
    STARTUP_REFUSAL,
    UNKNOWN,
    TargetVerdict,
    Term,
    term,
)
from eagle3_forensics.engines.extract.source import Cite, ClassRef, SourceTree
from eagle3_forensics.engines.extract.vllm_capture import forward_sites, passes_ids_on

MODELS = "vllm.model_executor.models"
REGISTRIES = ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS", "_TRANSFORMERS_SUPPORTED_MODELS")
ALL_REGISTRIES = (
    *REGISTRIES,
    "_EMBEDDING_MODELS",
    "_SPECULATIVE_DECODING_MODELS",
    "_TRANSFORMERS_BACKEND_MODELS",
)


def read_registry(tree: SourceTree, names: tuple[str, ...] = REGISTRIES) -> dict[str, tuple[str, str, Cite]]:
    """architecture -> (absolute module, class name, citation) for the registries ``names``."""
    mod = tree.module(f"{MODELS}.registry")
    if mod is None:
        raise FileNotFoundError("vllm/model_executor/models/registry.py not in the wheel")
    out: dict[str, tuple[str, str, Cite]] = {}
    for stmt in mod.tree.body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) else getattr(stmt, "target", None)
        value = getattr(stmt, "value", None)
        if getattr(target, "id", None) not in names or not isinstance(value, ast.Dict):
            continue
        for k, v in zip(value.keys, value.values, strict=True):
            if not (isinstance(k, ast.Constant) and isinstance(v, ast.Tuple) and len(v.elts) >= 2):
                continue
            a, b = v.elts[0], v.elts[1]
            if isinstance(a, ast.Constant) and isinstance(b, ast.Constant):
                module = str(a.value)
                module = module if module.startswith("vllm.") else f"{MODELS}.{module}"
                out[str(k.value)] = (module, str(b.value), mod.cite(k))
    return out


def _delegated_arch(call: ast.Call) -> str | None:
    """The literal architecture ``init_vllm_registered_model(..., architectures=["X"])`` builds."""
    for kw in call.keywords:
        if kw.arg == "architectures" and isinstance(kw.value, ast.List | ast.Tuple) and kw.value.elts:
            first = kw.value.elts[0]
            if isinstance(first, ast.Constant):
                return str(first.value)
    return None


class VllmTargets:
    """Verdicts for one unpacked vLLM wheel."""

    def __init__(self, tree: SourceTree, failures: dict[str, tuple[str, Cite | None]]) -> None:
        self.tree = tree
        self.failures = failures  # what the user sees, by kind, with where the engine says it
        self.registry = read_registry(tree)
        self.everything = read_registry(tree, ALL_REGISTRIES)
        self._memo: dict[str, TargetVerdict] = {}

    def all(self) -> dict[str, TargetVerdict]:
        return {arch: self.verdict(arch) for arch in sorted(self.registry)}

    def verdict(self, arch: str, depth: int = 0) -> TargetVerdict:
        if arch in self._memo:
            return self._memo[arch]
        module, name, cite = self.everything.get(arch) or self.registry[arch]
        v = TargetVerdict(arch, f"{module.removeprefix(MODELS + '.')}.{name}")
        v.cite(cite)
        cls = self.tree.resolve(module, name)
        if cls is None:
            v.reason = f"class {module}.{name} not found in the wheel"
        elif depth > 3:
            v.reason = "language models nest too deep"
        else:
            self._classify(v, cls, depth)
        self._memo[arch] = v
        return v

    def _fail(self, v: TargetVerdict, kind: str, where: ClassRef, detail: str = "") -> None:
        text, cite = self.failures.get(kind, ("", None))
        v.kind, v.where = kind, self._short(where)
        v.failure = f"{text}{': ' + detail if detail else ''}"
        if cite is not None:
            v.cite(cite)

    def _short(self, cls: ClassRef) -> str:
        return cls.short(f"{MODELS}.")

    def _classify(self, v: TargetVerdict, cls: ClassRef, depth: int) -> None:
        tree = self.tree
        if not tree.has_base(cls, "SupportsEagle3"):
            unresolved = [b for b in tree.mro(cls) if isinstance(b, str) and b not in _EXTERNAL]
            if unresolved:
                v.reason = f"bases outside the wheel: {', '.join(unresolved)}"
                return
            self._fail(v, NO_INTERFACE, cls)
            return
        found = tree.find_method(cls, "set_aux_hidden_state_layers")
        if found is None:
            v.reason = "set_aux_hidden_state_layers not found along the MRO"
            return
        owner, method = found
        v.cite(owner.cite(method))
        self._defaults(v, cls)
        text = owner.module.segment(method)
        if owner.name == "SupportsEagle3":
            self._interface_path(v, cls, depth)
        elif "_layer_names[" in text:
            self._layer_names(v, owner, method)
        elif ".set_aux_hidden_state_layers(" in text:
            attr = _delegate_attr(method, "set_aux_hidden_state_layers")
            self._language_model(v, cls, attr or "language_model", depth, check_mixin=False)
        elif _AUX_SET in text or "._set_aux_hidden_state_layers(" in text:
            attr = _assigned_holder(method)
            holder, _call, _mod = attr_class(tree, cls, attr) if attr else (None, None, cls.module)
            if holder is None:
                v.reason = f"the class of self.{attr} (holding the ids) was not found"
                return
            self._capture(v, holder)
        else:
            v.reason = f"{self._short(owner)}.set_aux_hidden_state_layers does something the pass cannot read"

    def _interface_path(self, v: TargetVerdict, cls: ClassRef, depth: int) -> None:
        """The interface's own method: language model (if any) -> ``.model`` -> EagleModelMixin."""
        lm, call, _mod = attr_class(self.tree, cls, "language_model")
        if lm is not None or call is not None:
            self._language_model(v, cls, "language_model", depth, check_mixin=True)
            return
        self._holder(v, cls, cls, check_mixin=True)

    def _language_model(
        self, v: TargetVerdict, cls: ClassRef, attr: str, depth: int, check_mixin: bool
    ) -> None:
        lm, call, mod = attr_class(self.tree, cls, attr)
        if call is not None and callee(call) == "init_vllm_registered_model":
            v.cite(mod.cite(call))
            arch = _delegated_arch(call)
            if arch is None or arch not in self.everything:
                v.kind, v.how = DELEGATED, "-> language model (the text config's architecture)"
                v.where = f"{self._short(cls)} -> language model"
                return
            if check_mixin:  # the interface's own method asserts on the built model's decoder
                module, name, _cite = self.everything[arch]
                lm = self.tree.resolve(module, name)
                if lm is None:
                    v.reason = f"the language model {arch} was not found"
                    return
                self._holder(v, cls, lm, check_mixin)
                return
            inner = self.verdict(arch, depth + 1)
            self._copy(v, inner, f"-> {arch}")
            return
        if lm is None:
            v.reason = f"the class of self.{attr} was not found"
            return
        self._holder(v, cls, lm, check_mixin)

    def _holder(self, v: TargetVerdict, cls: ClassRef, parent: ClassRef, check_mixin: bool) -> None:
        """``parent.model`` (or ``parent`` itself) holds the ids: the interface asserts it is a mixin."""
        inner, _call, _mod = attr_class(self.tree, parent, "model")
        holder = inner or parent
        if check_mixin and not self.tree.has_base(holder, "EagleModelMixin"):
            self._fail(v, STARTUP_REFUSAL, holder, f"{self._short(holder)} is no EagleModelMixin")
            return
        self._capture(v, holder)

    def _capture(self, v: TargetVerdict, holder: ClassRef) -> None:
        for _ in range(3):  # a decoder that hands the ids to an inner one (Plamo3Model -> Plamo3Decoder)
            found = self.tree.find_method(holder, "_set_aux_hidden_state_layers")
            if found is None or found[0].name == "EagleModelMixin":
                break
            attr = _assigned_holder(found[1])
            inner = attr_class(self.tree, holder, attr)[0] if attr else None
            if inner is None:
                break
            v.cite(found[0].cite(found[1]))
            holder = inner
        sites, owner = forward_sites(self.tree, holder)
        v.cite(*sites.cites)
        if owner is None:
            v.reason = f"{self._short(holder)} has no forward"
            return
        v.where = self._short(owner)
        fwd = owner.method("forward")
        if not sites.found:
            if fwd is not None and passes_ids_on(owner.module.segment(fwd)):
                v.reason = f"{v.where}.forward hands the ids on; the capture is elsewhere"
                return
            if fwd is not None:
                v.cite(owner.cite(fwd))
            self._fail(v, CRASH_FIRST_FORWARD, owner, f"{v.where}.forward never captures")
            return
        valid = sites.valid()
        if sites.unplaced or valid is None:
            v.reason = f"{v.where}.forward: capture sites not placed ({', '.join(sites.unplaced) or 'a gap'})"
            return
        v.kind, (v.first_id, v.last) = CAPTURES, valid
        parts = sorted(sites.segments, key=["pre0", "before", "after", "end"].index)
        v.how = ("EagleModelMixin " if sites.mixin else "explicit ") + "+".join(parts)
        if sites.crash_at_zero:
            v.below_first = "TypeError at the first forward: residual is None before layer 0"
        elif v.first_id == 1:
            v.below_first = "id 0 is never captured"

    def _layer_names(self, v: TargetVerdict, owner: ClassRef, method: ast.FunctionDef) -> None:
        """Transformers backend: ``self._layer_names[layer - k]`` over layers 0..N-1: ids k..N-1+k."""
        for node in ast.walk(method):
            if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("_layer_names"):
                sl = node.slice
                k = 0
                if (
                    isinstance(sl, ast.BinOp)
                    and isinstance(sl.op, ast.Sub)
                    and isinstance(sl.right, ast.Constant)
                ):
                    k = sl.right.value if isinstance(sl.right.value, int) else -1
                elif not isinstance(sl, ast.Name):
                    break
                v.cite(owner.cite(node))
                v.kind, v.first_id, v.last = CAPTURES, k, "N" if k == 1 else "N-1" if k == 0 else None
                if v.last is None:
                    break
                v.how, v.where = f"output hooks on _layer_names[id - {k}]", self._short(owner)
                if k:
                    v.below_first = "KeyError at start-up: _layer_names has no layer -1"
                return
        v.kind, v.reason = UNKNOWN, "the _layer_names index is not `id - k`"

    def _copy(self, v: TargetVerdict, inner: TargetVerdict, via: str) -> None:
        for name in ("kind", "first_id", "last", "below_first", "how", "failure", "reason"):
            setattr(v, name, getattr(inner, name))
        v.where = f"{via} ({inner.where})" if inner.where else via
        if inner.default_ids is not None and v.default_ids is None:
            v.default_ids = inner.default_ids
        v.cite(*inner.cites)

    def _defaults(self, v: TargetVerdict, cls: ClassRef) -> None:
        found = self.tree.find_method(cls, "get_eagle3_default_aux_hidden_state_layers")
        if found is None:
            return
        owner, method = found
        v.cite(owner.cite(method))
        v.default_ids = INTERFACE_DEFAULT if owner.name == "SupportsEagle3" else default_terms(method)


_AUX_SET = "aux_hidden_state_layers ="
# bases from outside the wheel that cannot carry vLLM's interface
_EXTERNAL = {"Module", "nn.Module", "Protocol", "object", "Generic", "ABC", "PreTrainedModel"}


def _delegate_attr(method: ast.FunctionDef, name: str) -> str | None:
    for node in ast.walk(method):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == name:
            recv = node.func.value
            if (
                isinstance(recv, ast.Attribute)
                and isinstance(recv.value, ast.Name)
                and recv.value.id == "self"
            ):
                return recv.attr
            if isinstance(recv, ast.Call) and callee(recv) == "get_language_model":
                return "language_model"
    return None


def _assigned_holder(method: ast.FunctionDef) -> str | None:
    """``self.X.aux_hidden_state_layers = ...`` -> ``X``."""
    for node in ast.walk(method):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            recv = node.func.value
            named = node.func.attr == "_set_aux_hidden_state_layers" and isinstance(recv, ast.Attribute)
            if named and isinstance(recv, ast.Attribute) and ast.unparse(recv.value) == "self":
                return recv.attr
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Attribute) and t.attr == "aux_hidden_state_layers":
                    recv = t.value
                    if isinstance(recv, ast.Attribute) and ast.unparse(recv.value) == "self":
                        return recv.attr
    return None


def default_terms(method: ast.FunctionDef) -> tuple[Term, ...] | None:
    """The returned ``(2, n // 2, n - 3)``-style tuple as terms, ``None`` when it is not of that form."""
    ret = next((n for n in ast.walk(method) if isinstance(n, ast.Return)), None)
    if ret is None or not isinstance(ret.value, ast.Tuple | ast.List):
        return None
    out: list[Term] = []
    for elt in ret.value.elts:
        t = term(elt)
        if t is None:
            return None
        out.append(t)
    return tuple(out)
