"""Engine rule tables and the load simulator that interprets them."""

from __future__ import annotations

from eagle3_forensics.engines import eagle, sglang, speculators, vllm
from eagle3_forensics.engines.rules import EngineRules
from eagle3_forensics.errors import BadArgumentsError

ENGINES: dict[str, EngineRules] = {
    t.name: t for t in (sglang.RULES, vllm.RULES, eagle.RULES, speculators.RULES)
}
ENGINE_NAMES: tuple[str, ...] = tuple(ENGINES)


def resolve_engines(spec: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """``None``/``"all"`` -> every engine; otherwise validate the names."""
    if spec is None or spec == "all":
        return list(ENGINE_NAMES)
    names = [spec] if isinstance(spec, str) else list(spec)
    if "all" in names:
        return list(ENGINE_NAMES)
    unknown = [n for n in names if n not in ENGINES]
    if unknown:
        raise BadArgumentsError(
            f"unknown engine {unknown[0]!r}; choose from {', '.join(ENGINE_NAMES)} or all"
        )
    return names


__all__ = ["ENGINES", "ENGINE_NAMES", "EngineRules", "resolve_engines"]
