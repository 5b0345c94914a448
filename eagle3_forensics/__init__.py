"""eagle3-forensics: find why an EAGLE-3 drafter accepts nothing, before spending GPU time."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

# Public names resolved on first use (module __getattr__), so ``import eagle3_forensics`` stays
# fast: numpy and torch load only when one of them is touched.
_LAZY: dict[str, str] = {
    "build_vocab_mapping": "vocab",
    "classify_mapping": "vocab",
    "compare_mappings": "vocab",
    "suggest_d2t_fix": "vocab",
    "load_mapping": "vocab_inputs",
    "load_token_ids": "vocab_inputs",
    "coverage_report": "coverage",
}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'eagle3_forensics' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
