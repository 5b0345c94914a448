"""Read a vLLM wheel's target classes: which capture EAGLE-3 aux states, and where (an AST pass, no import).

    pip download --no-deps vllm==0.34.0 -d /tmp/w && unzip -q /tmp/w/vllm-*.whl 'vllm/*.py' -d /tmp/w/v
    python scripts/read_vllm_targets.py /tmp/w/v > v0340.json

For every architecture of ``_TEXT_GENERATION_MODELS`` / ``_MULTIMODAL_MODELS`` in
``vllm/model_executor/models/registry.py``: whether its class implements ``SupportsEagle3`` (through
its bases), and the first ``forward`` that captures, found breadth-first over the classes it builds:
``mixin`` (``_maybe_add_hidden_state``: ids ``[0, N]``), ``explicit`` (``aux_hidden_state_layers``
tested in the loop; ``before`` / ``end`` say whether before each layer and at ``end_layer``),
``delegated`` (the language model comes from ``init_vllm_registered_model``) or ``none``.
``eagle3: null``: the class was not found (vLLM's platform-split ``vllm/models/*`` packages). The
tables in ``eagle3_forensics/engines/targets_vllm*.py`` group this output by capture and decoder
class (``mixin``, ``delegated`` and ``explicit`` with both checks: THROUGH_N; ``explicit`` before
only: BELOW_N; ``none``: NEVER; no ``SupportsEagle3``: NO_INTERFACE).
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any

Key = tuple[str, str]  # (module, class)


def _module(f: Path, vroot: Path) -> str:
    parts = list(f.relative_to(vroot).with_suffix("").parts)
    if parts[:2] == ["model_executor", "models"]:
        return parts[2]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return "vllm." + ".".join(parts)


def _imports(tree: ast.AST) -> dict[str, Key]:
    out: dict[str, Key] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.module:
            continue
        if node.module.startswith("vllm.model_executor.models."):
            mod = node.module.rsplit(".", 1)[1]
        elif node.module.startswith("vllm.models"):
            mod = node.module
        elif node.level == 1:
            mod = node.module.rsplit(".", 1)[-1]
        else:
            continue
        for alias in node.names:
            out[alias.asname or alias.name] = (mod, alias.name)
    return out


def _built(node: ast.ClassDef, mod: str, imports: dict[str, Key]) -> list[Key]:
    """Classes a class builds: ``model_cls = X`` attributes and calls of capitalised names outside forward."""
    out: list[Key] = []
    for item in node.body:
        if isinstance(item, ast.Assign) and isinstance(item.value, ast.Name) and item.value.id[0].isupper():
            out.append(imports.get(item.value.id, (mod, item.value.id)))
    for fdef in node.body:
        if not isinstance(fdef, ast.FunctionDef) or fdef.name == "forward":
            continue
        for sub in ast.walk(fdef):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
                name = sub.func.id
                if name == "init_vllm_registered_model":
                    out.append(("*", "registered"))
                elif name[0].isupper():
                    out.append(imports.get(name, (mod, name)))
            if isinstance(sub, ast.keyword) and sub.arg == "model_class" and isinstance(sub.value, ast.Name):
                out.append(imports.get(sub.value.id, (mod, sub.value.id)))
    return out


def read_classes(vroot: Path) -> dict[Key, dict[str, Any]]:
    root = vroot / "model_executor" / "models"
    files = [*root.glob("*.py"), *(vroot / "models").rglob("*.py")]
    classes: dict[Key, dict[str, Any]] = {}
    for f in files:
        text = f.read_text()
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        mod, imports = _module(f, vroot), _imports(tree)
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            bases = []
            for b in node.bases:
                name = b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else None
                if isinstance(b, ast.Subscript) and isinstance(b.value, ast.Name):
                    name = b.value.id
                if name:
                    bases.append(imports.get(name, (mod, name)))
            methods = {
                i.name: ast.get_source_segment(text, i) or ""
                for i in node.body
                if isinstance(i, ast.FunctionDef)
            }
            classes[(mod, node.name)] = {
                "bases": bases,
                "methods": methods,
                "built": _built(node, mod, imports),
            }
    return classes


def read_registry(vroot: Path) -> dict[str, Key]:
    tree = ast.parse((vroot / "model_executor" / "models" / "registry.py").read_text())
    out: dict[str, Key] = {}
    for node in tree.body:
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign)
            else node.target
            if isinstance(node, ast.AnnAssign)
            else None
        )
        if getattr(target, "id", "") not in ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS"):
            continue
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if not isinstance(value, ast.Dict):
            continue
        for k, v in zip(value.keys, value.values, strict=True):
            if isinstance(k, ast.Constant) and isinstance(v, ast.Tuple) and len(v.elts) >= 2:
                a, b = v.elts[0], v.elts[1]
                if isinstance(a, ast.Constant) and isinstance(b, ast.Constant):
                    out[str(k.value)] = (str(a.value), str(b.value))
    return out


class Reader:
    def __init__(self, classes: dict[Key, dict[str, Any]]) -> None:
        self.classes = classes
        self.memo: dict[Key, tuple[str | None, str, str]] = {}

    def mro(self, key: Key) -> list[Key]:
        seen: list[Key] = []
        stack = [key]
        while stack:
            k = stack.pop(0)
            if k in seen or k not in self.classes:
                continue
            seen.append(k)
            stack.extend(self.classes[k]["bases"])
        return seen

    def has_base(self, key: Key, name: str) -> bool:
        return any(b[1] == name for k in self.mro(key) for b in [k, *self.classes[k]["bases"]])

    def find(self, key: Key, method: str) -> tuple[Key | None, str]:
        for k in self.mro(key):
            if method in self.classes[k]["methods"]:
                return k, self.classes[k]["methods"][method]
        return None, ""

    def capture(self, key: Key) -> tuple[str | None, str, str]:
        """(where, how, forward source) of the first capturing forward over the classes ``key`` builds."""
        if key in self.memo:
            return self.memo[key]
        own, own_fwd = self.find(key, "forward")
        queue, seen, delegated = [key], {key}, False
        result: tuple[str | None, str, str] | None = None
        while queue and result is None:
            cur = queue.pop(0)
            k, fwd = self.find(cur, "forward")
            if k is not None and "_maybe_add_hidden_state" in fwd:
                result = (f"{k[0]}.{k[1]}", "mixin", fwd)
            elif k is not None and "aux_hidden_state_layers" in fwd:
                result = (f"{k[0]}.{k[1]}", "explicit", fwd)
            for kk in self.mro(cur):
                for inner in self.classes[kk]["built"]:
                    if inner == ("*", "registered"):
                        delegated = True
                    elif inner in self.classes and inner not in seen:
                        seen.add(inner)
                        queue.append(inner)
        if result is None:
            where = f"{own[0]}.{own[1]}" if own else None
            result = (
                ("init_vllm_registered_model", "delegated", "") if delegated else (where, "none", own_fwd)
            )
        self.memo[key] = result
        return result


def read(vroot: Path) -> dict[str, dict[str, Any]]:
    classes, registry = read_classes(vroot), read_registry(vroot)
    reader = Reader(classes)
    out: dict[str, dict[str, Any]] = {}
    for arch, (mod, cls) in sorted(registry.items()):
        key = (mod, cls)
        if key not in classes:
            key = next((k for k in classes if k[1] == cls and k[0].startswith(mod)), key)
        if key not in classes:
            out[arch] = {"cls": f"{mod}.{cls}", "eagle3": None}
            continue
        row: dict[str, Any] = {"cls": f"{key[0]}.{key[1]}", "eagle3": reader.has_base(key, "SupportsEagle3")}
        if row["eagle3"]:
            where, how, fwd = reader.capture(key)
            row.update(capture=how, forward=where)
            if how == "explicit":
                row["end"] = "end_layer in self.aux_hidden_state_layers" in fwd
                row["before"] = any(
                    f"if {v} in self.aux_hidden_state_layers" in fwd for v in ("idx", "layer_idx")
                )
        out[arch] = row
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not (Path(argv[0]) / "vllm").is_dir():
        print("usage: read_vllm_targets.py UNPACKED_WHEEL_DIR (holding vllm/)", file=sys.stderr)
        return 2
    json.dump(read(Path(argv[0]) / "vllm"), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
