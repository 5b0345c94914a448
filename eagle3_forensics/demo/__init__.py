"""The deterministic demo world: a trained tiny target, drafters (healthy and broken) and a corpus."""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "make_demo": "world",
    "VARIANTS": "world",
    "write_demo_corpus": "corpus",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
