"""One dumped sample at a time: its tokens, loss mask and, per slot, which draft steps hit.

``probe-offline`` (:mod:`eagle3_forensics.probe.offline`) only keeps counts; a reader who wants to
see *where* a drafter fails in one sample needs the per-position answers. :class:`SampleScorer`
loads the drafter and the teacher once (as :func:`~eagle3_forensics.probe.offline.scan_offline`
does, with the same slots, teacher and :func:`~eagle3_forensics.probe.teacher_forced.score_sequence`),
then scores any sample on demand, so an explorer can switch samples without reloading anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from eagle3_forensics.errors import BadArgumentsError
from eagle3_forensics.io.dumps.layouts import LAYOUTS
from eagle3_forensics.io.dumps.options import DEFAULT_SCAN, ScanOptions
from eagle3_forensics.io.dumps.read import Item
from eagle3_forensics.probe.offline.scan import open_offline, scored_slots
from eagle3_forensics.probe.teacher_forced import score_sequence


@dataclass
class SampleScores:
    """One sample scored: ``correct[j][n]`` says whether draft step ``j`` hit at ``slots[n]``."""

    index: int
    file: str
    layout: str
    k: int
    input_ids: list[int]
    loss_mask: list[bool]
    slots: list[int]  # slot t: the feature of position t paired with token t+1
    correct: list[list[bool]]  # [k][len(slots)]
    teacher: list[int]  # step-0 teacher (target id) per slot
    problem: str | None = None  # why the sample could not be scored (then slots is empty)

    def accepted(self) -> list[int]:
        """Per slot, the draft steps a chain accepts there (leading hits, 0..k)."""
        out = []
        for n in range(len(self.slots)):
            a = 0
            while a < self.k and self.correct[a][n]:
                a += 1
            out.append(a)
        return out

    def step_accuracy(self) -> list[float | None]:
        """Share of slots where step ``j`` hit (``None`` without slots)."""
        n = len(self.slots)
        return [sum(c) / n if n else None for c in self.correct] if n else [None] * self.k

    @property
    def simulated_acceptance_length(self) -> float | None:
        """``1 + mean accepted drafts`` over the slots (bonus token included, as ``probe`` reports)."""
        acc = self.accepted()
        return 1 + sum(acc) / len(acc) if acc else None


class SampleScorer:
    """The drafter and teacher of a probe-offline run, loaded once; :meth:`score` one sample."""

    def __init__(
        self,
        drafter: str | Path,
        data: str | Path,
        options: ScanOptions = DEFAULT_SCAN,
        *,
        engine: str = "reference",
        k: int = 3,
        device: str = "cpu",
    ) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise BadArgumentsError(f"k must be a positive integer, got {k!r}")
        setup = open_offline(drafter, data, options, engine=engine, device=device)
        max_samples = options.max_samples
        self.k = k
        self.engine, self.device, self.dumps = setup.engine, setup.device, setup.dumps
        self.model, self.fc_in, self.teacher = setup.model, setup.fc_in, setup.teacher
        self.items: list[Item] = self.dumps.select(max_samples)

    def score(self, index: int) -> SampleScores:
        """Score the sample at ``index`` of the sorted dump list (``Item.index``)."""
        item = next((it for it in self.items if it.index == index), None)
        if item is None:
            raise BadArgumentsError(f"no sample with index {index} (0..{len(self.items) - 1})")
        s = self.dumps.read(item)
        ids = [int(x) for x in s.input_ids.tolist()]
        mask = [bool(x) for x in s.loss_mask.tolist()]
        empty: list[list[bool]] = [[] for _ in range(self.k)]
        layout = LAYOUTS[s.layout]
        problem = None
        if not layout.eagle3 or s.aux_hidden is None:
            problem = f"a {s.layout} file: {layout.problem}"
        elif s.aux_width != self.fc_in:
            problem = f"aux width {s.aux_width}, the drafter's fc takes {self.fc_in}"
        elif self.teacher.kind == "target" and s.last_hidden is None:
            problem = "no last hidden state"
        elif s.nonfinite():
            problem = f"{s.nonfinite()} non-finite values"
        if problem is not None:
            return SampleScores(item.index, item.rel, s.layout, self.k, ids, mask, [], empty, [], problem)
        assert s.aux_hidden is not None  # checked above
        with torch.inference_mode():
            labels = self.teacher.labels(s, self.device)
            slots = scored_slots(s, labels, self.k)
            correct = (
                score_sequence(self.model, s.aux_hidden, s.input_ids, slots, labels, self.k)
                if slots.numel()
                else []
            )
        return SampleScores(
            item.index,
            item.rel,
            s.layout,
            self.k,
            ids,
            mask,
            [int(t) for t in slots.tolist()],
            [[bool(x) for x in c.tolist()] for c in correct] or empty,
            [int(x) for x in labels[slots + 1].tolist()] if slots.numel() else [],
        )


__all__ = ["SampleScorer", "SampleScores"]
