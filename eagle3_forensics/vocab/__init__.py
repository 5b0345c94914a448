"""Vocabulary-map maths: classify, build, compare, lm_head rows, token inputs, map files, coverage."""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "classify_mapping": "mapping",
    "build_vocab_mapping": "mapping",
    "compare_mappings": "mapping",
    "suggest_d2t_fix": "mapping",
    "select_draft_vocab": "mapping",
    "check_lm_head_rows": "mapping",
    "VocabClassification": "mapping",
    "VocabMapping": "mapping",
    "load_mapping": "inputs",
    "load_token_ids": "inputs",
    "save_mapping": "inputs",
    "tokenize_corpus": "inputs",
    "coverage_report": "coverage",
    "corpus_coverage": "coverage",
    "token_table": "coverage",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
