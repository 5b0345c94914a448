"""The result of ``probe-offline`` (:class:`OfflineProbeResult`): every figure from the counts through
:meth:`~eagle3_forensics.probe.teacher_forced.TeacherForced.from_counts` (:func:`finish_probe`), and
the worst samples re-read for decoding (:func:`load_worst_sample`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eagle3_forensics.errors import ExitCode, UnusableInputError
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.dumps.read import Sample, open_dumps
from eagle3_forensics.probe.offline.counts import OfflineCounts
from eagle3_forensics.probe.offline.teacher import OFFLINE_CONVENTIONS
from eagle3_forensics.probe.teacher_forced import TeacherForced

# ---------------------------------------------------------------------------------------------
# the result
# ---------------------------------------------------------------------------------------------


@dataclass
class OfflineProbeResult:
    counts: OfflineCounts
    teacher_forced: TeacherForced | None
    findings: list[Finding]

    @property
    def exit_code(self) -> int:
        if self.teacher_forced is None:
            return int(ExitCode.UNUSABLE)
        return (
            int(ExitCode.FINDINGS)
            if any(f.severity is Severity.ERROR for f in self.findings)
            else int(ExitCode.OK)
        )

    @property
    def unusable_reason(self) -> str | None:
        """Why nothing could be measured (exit 2), or ``None``."""
        if self.teacher_forced is None:
            return "no slot could be scored (no usable sample with a loss-masked token)"
        return None

    @property
    def tokens_per_s(self) -> float | None:
        c = self.counts
        return c.tokens / c.seconds if c.seconds else None

    @property
    def bytes_per_s(self) -> float | None:
        c = self.counts
        return c.bytes / c.seconds if c.seconds else None

    def groups(self, which: str) -> list[dict[str, Any]]:
        c = self.counts
        src = c.along if which == "along" else c.classes
        width = int(c.settings["bucket"])
        rows = []
        for key, (slots, hits, prefix) in src.items():
            if not slots:
                continue
            tf = TeacherForced.from_counts(c.k, c.settings["aux_ids_hf"], slots, hits, prefix)
            row: dict[str, Any] = (
                {"from": int(key) * width, "to": int(key) * width + width - 1}
                if which == "along"
                else {"class": key}
            )
            row.update(
                {
                    "positions": slots,
                    "accuracy": tf.accuracy,
                    "conditional_accuracy": tf.conditional_accuracy,
                    "cumulative": tf.cumulative,
                    "simulated_acceptance_length": tf.simulated_acceptance_length,
                }
            )
            rows.append(row)
        if which == "classes":
            rows.sort(key=lambda r: (-r["positions"], r["class"]))
        return rows

    def to_dict(self) -> dict[str, Any]:
        c = self.counts
        s = c.settings
        tf = self.teacher_forced
        return {
            "drafter": s["drafter"],
            "data": s["data"],
            "format": s["format"],
            "layouts": c.layouts,
            "target": s["target"],
            "engine": s["engine"],
            "k": c.k,
            "device": s["device"],
            "dtype": s["dtype"],
            "teacher": s["teacher"],
            "samples": {
                "files": s["total_files"],
                "used": c.used,
                "skipped": c.skipped.count,
                "tokens": c.tokens,
                "bytes": c.bytes,
                "max_samples": s["max_samples"],
            },
            "teacher_forced": None if tf is None else tf.to_dict(),
            "greedy_agreement": None
            if not c.slots or s["teacher"]["kind"] != "target"
            else c.greedy_agree / c.slots,
            "out_of_draft_vocabulary": None if not c.slots else c.out_of_draft_vocab / c.slots,
            "along_sequence": {"bucket": s["bucket"], "rows": self.groups("along")},
            "by_token_class": {"classes_from": s["classes_from"], "rows": self.groups("classes")},
            "worst_samples": [
                {
                    "index": w[1],
                    "file": w[2],
                    "positions": w[3],
                    "step0_accuracy": w[4] / w[3] if w[3] else None,
                    "all_steps_accuracy": w[5] / w[3] if w[3] else None,
                    "simulated_acceptance_length": w[0],
                }
                for w in c.worst
            ],
            "skipped": c.skipped.evidence(),
            "findings": [f.to_dict() for f in self.findings],
            "view": s["view"],
            "conventions": OFFLINE_CONVENTIONS,
        }


def finish_probe(counts: OfflineCounts) -> OfflineProbeResult:
    """The figures of a run (one shard, or all of them merged)."""
    findings: list[Finding] = []
    if counts.skipped.count:
        first = counts.skipped.items[0]
        findings.append(
            Finding(
                "DATA_UNREADABLE",
                Severity.ERROR,
                f"{counts.skipped.count} of {counts.files} samples were skipped: {first[1]}: {first[2]}",
                evidence=counts.skipped.evidence(),
                fix="Run eagle3-forensics audit-data on the directory; regenerate the files it lists.",
            )
        )
    if counts.nonfinite.count:
        findings.append(
            Finding(
                "DATA_HIDDEN_NONFINITE",
                Severity.ERROR,
                f"{counts.nonfinite.count} samples hold NaN/Inf hidden states and were skipped.",
                evidence=counts.nonfinite.evidence(),
                fix="Regenerate these samples (capture in bf16/fp32).",
            )
        )
    tf = None
    if counts.slots:
        tf = TeacherForced.from_counts(
            counts.k, counts.settings["aux_ids_hf"], counts.slots, counts.hits, counts.prefix
        )
    return OfflineProbeResult(counts, tf, findings)


def load_worst_sample(result: OfflineProbeResult, n: int = 0) -> Sample:
    """Re-read the ``n``-th worst sample of a result (for decoding it in a notebook)."""
    w = result.counts.worst[n]
    ds = open_dumps(result.counts.settings["data"], result.counts.settings["format"])
    item = next((it for it in ds.items if it.index == w[1] and it.rel == w[2]), None)
    if item is None:
        raise UnusableInputError(f"sample {w[2]} is no longer under {result.counts.settings['data']}")
    return ds.read(item)
