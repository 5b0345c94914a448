"""``audit-data``: checks on a data-prep output (hidden-state dumps and the vocabulary map) before training.

The audit runs in two halves so that it can be split over machines:

* :func:`scan_data` reads the samples (one at a time) and returns an :class:`AuditScan`: plain,
  mergeable counts and example lists, plus the facts every shard computes identically (the map
  files' verdicts and selections, the drafter's and target's sizes). ``shard=(I, N)`` reads every
  N-th file of the sorted list.
* :func:`merge_scans` adds scans of all shards; :func:`finish_audit` turns a (merged) scan into
  findings. A merged scan is the scan a single run makes, so the findings are the same to the last
  digit.

Codes (``findings.CATALOGUE``, ``docs/findings.md``): ``DATA_UNREADABLE`` (exit 2),
``DATA_NOT_EAGLE3``, ``DATA_LAYOUT_BROKEN``, ``DATA_LOSS_MASK_EMPTY``, ``DATA_LOSS_MASK_SUSPICIOUS``,
``DATA_HIDDEN_NONFINITE``, ``DATA_AUX_WIDTH_MISMATCH``, ``DATA_SEQ_TOO_LONG``,
``DATA_TARGET_MISMATCH``, ``DATA_VOCAB_MAP_NOT_FROM_DATA``, ``DATA_COVERAGE_LOW``,
``DATA_DUPLICATE_SAMPLES``; the map files also get the ``D2T_*``/``T2D_*`` identity verdicts of
:func:`eagle3_forensics.vocab.mapping.classify_mapping`.

One concern per module (every name importable from here, resolved lazily): :mod:`.scan` (reading
the samples), :mod:`.merge` (the mergeable :class:`AuditScan`), :mod:`.findings` (a scan to a
:class:`DataAudit`).
"""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "DATA_CODES": "findings",
    "COVERAGE_WARN": "findings",
    "COVERAGE_ERROR": "findings",
    "COVERAGE_GAP": "findings",
    "MASKED_SHARE_SUSPICIOUS": "findings",
    "TIE_BREAKS_AUDITED": "findings",
    "DataAudit": "findings",
    "select_top": "findings",
    "finish_audit": "findings",
    "audit_data": "findings",
    "SCAN_SCHEMA": "merge",
    "POS_BITS": "merge",
    "Examples": "merge",
    "AuditScan": "merge",
    "merge_scans": "merge",
    "check_shards": "merge",
    "parse_shard": "scan",
    "scan_data": "scan",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
