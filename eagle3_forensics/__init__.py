"""eagle3-forensics: find why an EAGLE-3 drafter accepts nothing, before spending GPU time.

Layers, lowest first (a module imports only from its own layer or below; see docs/architecture.md):
``errors``/``findings`` → ``io`` → ``engines``, ``vocab`` → ``checks`` → ``reference``, ``repair``,
``demo`` → ``probe`` → ``views`` → ``runs`` → ``cli``.
"""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

__version__ = "0.2.0"

# Public names resolved on first use, so ``import eagle3_forensics`` stays fast: numpy and torch
# load only when one of them is touched.
_EXPORTS = {
    "build_vocab_mapping": "vocab.mapping.build",
    "classify_mapping": "vocab.mapping.classify",
    "compare_mappings": "vocab.mapping.compare",
    "suggest_d2t_fix": "vocab.mapping.convert",
    "load_mapping": "vocab.inputs.maps",
    "load_token_ids": "vocab.inputs.tokens",
    "coverage_report": "vocab.coverage",
    "diagnose": "checks.diagnose",
    "inspect_checkpoint": "checks.diagnose",
}
__all__ = ["__version__", *_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
