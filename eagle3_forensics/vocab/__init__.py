"""Vocabulary-map maths: classify, build, compare, lm_head rows, token inputs, map files, coverage."""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "classify_mapping": "mapping.classify",
    "build_vocab_mapping": "mapping.build",
    "compare_mappings": "mapping.compare",
    "suggest_d2t_fix": "mapping.convert",
    "select_draft_vocab": "mapping.build",
    "check_lm_head_rows": "mapping.lm_head",
    "VocabClassification": "mapping.classify",
    "VocabMapping": "mapping.build",
    "load_mapping": "inputs.maps",
    "load_token_ids": "inputs.tokens",
    "save_mapping": "inputs.maps",
    "tokenize_corpus": "inputs.corpus",
    "coverage_report": "coverage",
    "corpus_coverage": "coverage",
    "token_table": "coverage",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
