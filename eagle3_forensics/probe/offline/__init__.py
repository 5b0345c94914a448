"""``probe-offline``: teacher-forced acceptance of a drafter over trainers' hidden-state dumps.

Only the drafter runs. Each dumped sample gives the target's aux states (what the drafter's ``fc``
eats) and its last hidden state; the **teacher** for draft step ``j`` at slot ``t`` (the feature of
position ``t`` paired with token ``t+1``, as every trainer pairs them) is

* with ``--target``: the target's greedy token at position ``t+1+j``, ``argmax lm_head(h)`` of the
  dumped last hidden state, with the target's final norm applied first when the dump holds the
  state *before* the norm (speculators v0.3+) — decided from the layout and checked on the data
  (``rms(h / norm.weight) = 1`` holds for a normed state); ``lm_head`` and the norm weight are read
  header-first from the target checkpoint, nothing else of it is loaded;
* without: the next data token ``t+2+j``.

A slot is scored when the token it is fed (``t+1``) is loss-masked and every step has a teacher,
so on a dump of the target's own greedy continuations (mask = the continuation) the slots are
exactly the in-process probe's. Every figure comes from plain counts (slots, hits per step, slots
whose steps ``0..j`` all hit) through :meth:`~eagle3_forensics.probe.teacher_forced.TeacherForced.from_counts`,
the same code and names as ``probe``'s ``teacher_forced`` block, so shards add up exactly
(:func:`merge_counts`). Added: the counts along the sequence (position buckets), by the class of
the teacher token, and the worst samples.

One concern per module (every name importable from here, resolved lazily): :mod:`.scan` (opening
and scanning), :mod:`.teacher` (the teacher tokens), :mod:`.counts` (the mergeable counts),
:mod:`.result` (figures from counts).
"""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "PARTIAL_SCHEMA": "counts",
    "WORST": "counts",
    "OfflineCounts": "counts",
    "merge_counts": "counts",
    "OfflineProbeResult": "result",
    "finish_probe": "result",
    "load_worst_sample": "result",
    "DEFAULT_BUCKET": "scan",
    "SMALL_MODEL_PARAMS": "scan",
    "parse_engine": "scan",
    "OfflineSetup": "scan",
    "open_offline": "scan",
    "scan_offline": "scan",
    "probe_offline": "scan",
    "LABEL_CHUNK": "teacher",
    "RMS_TOLERANCE": "teacher",
    "OFFLINE_CONVENTIONS": "teacher",
    "Teacher": "teacher",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
