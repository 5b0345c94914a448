"""Draft↔target vocabulary maths, one concern per module (every name importable from here, resolved lazily).

This is the one vocabulary package (``diagnose``'s vocab check, ``repair``, the CLI and the
notebooks all call it):

* :mod:`.classify` — :func:`classify_mapping` and :func:`check_t2d`, the verdict and its evidence
  (numpy only: the ``diagnose`` path stays torch-free);
* :mod:`.convert` — :func:`d2t_from_t2d`, :func:`t2d_from_d2t`, :func:`absolute_to_offsets`,
  :func:`offsets_to_absolute`, :func:`undo_double_offset`; :func:`suggest_d2t_fix` picks and
  verifies the right one for a classification;
* :mod:`.counts` — :func:`count_token_ids`, one streaming ``bincount`` pass, and the trainers'
  tie-breaks (:data:`TIE_BREAKS`);
* :mod:`.build` — :func:`build_vocab_mapping` (= :func:`count_token_ids` + :func:`select_draft_vocab`);
* :mod:`.compare` — :func:`selected_ids`, :func:`mapping_fingerprint`, :func:`compare_mappings`: provenance;
* :mod:`.lm_head` — :func:`check_lm_head_rows`: ``lm_head[i]`` against ``target_lm_head[target(i)]``.

File inputs (token ids, JSONL corpora, maps on disk) live in :mod:`eagle3_forensics.vocab.inputs`.
"""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "VocabPaddingWarning": "build",
    "padding_note": "build",
    "VocabMapping": "build",
    "select_draft_vocab": "build",
    "build_vocab_mapping": "build",
    "KINDS": "classify",
    "CONSISTENT_KINDS": "classify",
    "VocabClassification": "classify",
    "check_t2d": "classify",
    "classify_mapping": "classify",
    "selected_ids": "compare",
    "mapping_fingerprint": "compare",
    "MappingComparison": "compare",
    "compare_mappings": "compare",
    "d2t_from_t2d": "convert",
    "t2d_from_d2t": "convert",
    "absolute_to_offsets": "convert",
    "offsets_to_absolute": "convert",
    "undo_double_offset": "convert",
    "D2TFix": "convert",
    "suggest_d2t_fix": "convert",
    "TIE_BREAKS": "counts",
    "BLOCK_TOKENS": "counts",
    "PROGRESS_MIN_TOKENS": "counts",
    "TokenCounts": "counts",
    "count_token_ids": "counts",
    "LmHeadRowCheck": "lm_head",
    "check_lm_head_rows": "lm_head",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
