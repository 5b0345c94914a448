"""How a scan over trainers' hidden-state dumps reads them (:class:`ScanOptions`).

``probe-offline`` (:func:`~eagle3_forensics.probe.offline.scan_offline`, ``probe_offline``, the
sample browser's ``SampleScorer``) and ``audit-data`` (``scan_data``, ``audit_data``) read the same
dumps the same way; one value says how, and each function keeps only its own few keywords. Plain
data (no numpy, no torch): the CLI builds it before anything heavy is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eagle3_forensics.errors import BadArgumentsError


@dataclass(frozen=True)
class ScanOptions:
    """Which samples a scan reads and against which target; checked when built (exit 2 when bad)."""

    target: str | Path | None = None  # the target model directory (teacher, fit, provenance)
    fmt: str = "auto"  # the dump layout: auto, specforge, speculators, eagle
    max_samples: int | None = None  # the first N files of the sorted list
    shard: tuple[int, int] | None = None  # (I, N): every N-th file from I (0-based)
    max_sample_bytes: int | None = None  # the size cap of one sample (None: from the configs)
    progress: bool = False  # a progress bar on stderr

    def __post_init__(self) -> None:
        if self.max_samples is not None and self.max_samples < 1:
            raise BadArgumentsError("--max-samples must be at least 1")


DEFAULT_SCAN = ScanOptions()  # every sample, the layout detected, no target (frozen: a safe default argument)
