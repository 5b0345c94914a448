"""Is a schema change compatible with the released schema of the same major version?

A change is **breaking** (it needs a new major: ``eagle3-forensics/<name>/<major+1>``) when a file
or pipeline written against the released schema can stop working:

* a property, definition or combinator branch is removed;
* a property becomes required (``required``, ``dependentRequired``);
* a type or an enum is narrowed (a type or value removed), a ``const`` changes, a ``$ref`` points
  elsewhere, ``additionalProperties`` closes, a bound or pattern is added or changed, or a new
  ``allOf`` branch adds constraints.

Adding optional properties, definitions, types, enum values or ``oneOf``/``anyOf`` branches,
dropping a bound and rewording descriptions are compatible. tests/unit/test_schemas.py compares
every schema with its released copy in tests/schemas_released/ (scripts/release_schemas.py).
"""

from __future__ import annotations

from typing import Any

_BOUNDS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "pattern",
    "multipleOf",
    "uniqueItems",
)


def _types(node: dict[str, Any]) -> set[str] | None:
    t = node.get("type")
    if t is None:
        return None
    return {t} if isinstance(t, str) else set(t)


def breaking_changes(old: Any, new: Any, path: str = "#") -> list[str]:
    """Every breaking difference between the released schema ``old`` and ``new`` (empty: compatible)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return [] if old == new or old is True else [f"{path}: changed"]  # true: anything goes
    out: list[str] = []
    old_t, new_t = _types(old), _types(new)
    if old_t is not None and new_t is not None:  # dropping "type" altogether widens
        gone = old_t - new_t - ({"integer"} if "number" in new_t else set())
        if gone:
            out.append(f"{path}: type narrowed ({sorted(gone)} removed)")
    if old_t is None and new_t is not None:
        out.append(f"{path}: type added ({sorted(new_t)})")
    if "enum" in old and "enum" in new:
        dropped = [v for v in old["enum"] if v not in new["enum"]]
        if dropped:
            out.append(f"{path}: enum narrowed ({dropped} removed)")
    elif "enum" in new and "enum" not in old:
        out.append(f"{path}: enum added")
    if "const" in new and new.get("const") != old.get("const"):
        out.append(f"{path}: const changed to {new['const']!r}")
    if "$ref" in new and new["$ref"] != old.get("$ref"):
        out.append(f"{path}: $ref changed to {new['$ref']}")
    added = sorted(set(new.get("required", [])) - set(old.get("required", [])))
    if added:
        out.append(f"{path}: newly required {added}")
    for key, deps in (new.get("dependentRequired") or {}).items():
        extra = sorted(set(deps) - set((old.get("dependentRequired") or {}).get(key, [])))
        if extra:
            out.append(f"{path}: newly required with {key!r}: {extra}")
    for bound in _BOUNDS:
        if bound in new and new[bound] != old.get(bound):
            out.append(f"{path}: {bound} added or changed to {new[bound]!r}")
    old_add, new_add = old.get("additionalProperties", True), new.get("additionalProperties", True)
    if new_add is False and old_add is not False:
        out.append(f"{path}: additionalProperties closed")
    elif isinstance(old_add, dict) and isinstance(new_add, dict):
        out += breaking_changes(old_add, new_add, f"{path}/additionalProperties")
    elif isinstance(new_add, dict) and old_add is True:
        out.append(f"{path}: additionalProperties constrained")
    for group in ("properties", "$defs", "patternProperties"):
        old_g, new_g = old.get(group) or {}, new.get(group) or {}
        for name, sub in old_g.items():
            if name not in new_g:
                out.append(f"{path}/{group}/{name}: removed")
            else:
                out += breaking_changes(sub, new_g[name], f"{path}/{group}/{name}")
    for key in ("items", "if", "then", "else", "not", "contains", "propertyNames"):
        if key in old and key in new:
            out += breaking_changes(old[key], new[key], f"{path}/{key}")
        elif key in new and key != "if":
            out.append(f"{path}: {key} added")  # (dropping a constraint is compatible)
    for key in ("allOf", "oneOf", "anyOf", "prefixItems"):
        old_l, new_l = old.get(key) or [], new.get(key) or []
        if len(new_l) < len(old_l):
            out.append(f"{path}/{key}: branch removed")
        if key in ("allOf", "prefixItems") and len(new_l) > len(old_l):
            out.append(f"{path}/{key}: constraint added")
        for i, (a, b) in enumerate(zip(old_l, new_l, strict=False)):
            out += breaking_changes(a, b, f"{path}/{key}/{i}")
    return out


__all__ = ["breaking_changes"]
