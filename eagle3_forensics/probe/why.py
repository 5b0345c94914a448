"""The measured figures notebook 06 ranks causes by: 00's engine gap, the aux sweep, acceptance by length.

:func:`measure` runs the live probe (as :func:`eagle3_forensics.views.triage.triage` does for 00) under
the engine's view of the checkpoint and under the *trained* view: the writer's view, or — when the
checkpoint has errors for that engine — the view of a copy ``repair`` made ready for it (for vLLM where
repair cannot target that engine; in a throw-away directory, the user's files are only read), whichever
accepts more. A ``d2t`` written wrongly is wrong
in the writer's view too, so only the repaired copy shows what the drafter was trained to reach.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle3_forensics.checks.aux_measured import MeasuredAux
from eagle3_forensics.checks.causes import AuxGain, EngineGap
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.probe.core import ProbeResult, probe, read_prompts
from eagle3_forensics.probe.served import probe_served

#: the engines ``repair`` can make a copy ready for (repair.policy.REPAIRABLE_ENGINES, by name)
_REPAIRABLE = ("sglang", "vllm")


@dataclass
class Measured:
    """What the probes measured for one drafter; ``note`` says what was probed or why nothing was."""

    engine: str
    served: ProbeResult | None
    trained: ProbeResult | None
    trained_source: str
    gap: EngineGap | None
    aux_gain: AuxGain | None
    by_length: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""

    @property
    def acceptance_length(self) -> float | None:
        return None if self.served is None else self.served.acceptance_length


def _run(
    checkpoint: str | Path, target: str | Path, texts: Sequence[str], engine: str, **kw: Any
) -> ProbeResult:
    return probe(checkpoint, target, texts, engine=engine, **kw)


def _repaired_probe(
    checkpoint: str | Path,
    target: str | Path,
    texts: Sequence[str],
    engine: str,
    measured_aux: MeasuredAux | None = None,
    **kw: Any,
) -> tuple[ProbeResult | None, str]:
    """The trained view of the copy ``repair`` makes ready for ``engine`` (or why there is none)."""
    from eagle3_forensics.repair.execute import repair  # heavy: torch, safetensors

    if engine.split("==")[0] not in _REPAIRABLE:
        return None, f"repair does not target {engine}"
    with tempfile.TemporaryDirectory(prefix="e3f-why-") as tmp:
        out = Path(tmp) / "repaired"
        try:
            result = repair(checkpoint, engine, out, target=target, measured_aux=measured_aux)
        except (BadArgumentsError, UnusableInputError, ValueError) as exc:
            return None, f"repair refused: {' '.join(str(exc).split())}"
        if result.status != "repaired":
            return None, f"repair {result.status}: {' '.join(result.message.split())}"
        return _run(out, target, texts, "reference", **kw), f"the copy repaired for {engine}"


def measure(
    checkpoint: str | Path,
    target: str | Path,
    prompts: str | Path | Sequence[str],
    engine: str,
    *,
    checkpoint_errors: bool,
    aux_sweep: bool = False,
    max_prompts: int = 4,
    k: int = 3,
    max_new_tokens: int = 24,
    lengths: Sequence[int] = (),
    device: str = "cpu",
    measured_aux: MeasuredAux | None = None,
) -> Measured:
    """Probe under ``engine``'s view and the trained view; the gap is the checkpoint's measured cost.

    ``checkpoint_errors``: diagnose found errors for ``engine`` (then the repaired copy is probed too).
    ``aux_sweep``: run the teacher-forced aux-layer sweep (for the aux-layer codes). ``lengths``: more
    new-token budgets to probe under the engine's view (acceptance by length). An engine view the
    probe cannot build raises :class:`UnusableInputError` with the reason. ``measured_aux``: the aux
    layers measured on the target; the repaired copy pins them.
    """
    texts = (read_prompts(prompts) if isinstance(prompts, (str, Path)) else list(prompts))[
        : max(1, int(max_prompts))
    ]
    kw: dict[str, Any] = {"k": k, "device": device}
    view = "reference" if engine in ("all", "reference") else engine
    # probe_served adds what the server sees: acceptance by segment and, with a draft vocabulary,
    # the structural tokens it cannot propose (VOCAB_SPECIAL_TOKENS_MISSING, measured)
    served = probe_served(
        checkpoint,
        target,
        texts,
        engine=view,
        max_new_tokens=max_new_tokens,
        teacher_forced=aux_sweep,
        sweep=aux_sweep,
        **kw,
    )
    plain = {"max_new_tokens": max_new_tokens, "teacher_forced": False, "sweep": False, **kw}
    trained = served if view == "reference" else _run(checkpoint, target, texts, "reference", **plain)
    source = "the checkpoint as written"
    if checkpoint_errors:
        # the writer's view may share the fault (a d2t written wrongly): probe the repaired copy. The
        # trained view does not depend on the engine, so where repair cannot target it, vLLM's copy shows it
        fix_for = view if view.split("==")[0] in _REPAIRABLE else "vllm"
        repaired, why = _repaired_probe(checkpoint, target, texts, fix_for, measured_aux, **plain)
        if repaired is not None and repaired.acceptance_length > trained.acceptance_length:
            trained, source = repaired, why
    how = (
        f"live probe, {len(texts)} prompts × {max_new_tokens} new tokens, K={k}: acceptance length under "
        f"{'the writer' if view == 'reference' else view}'s view vs. the trained view ({source})"
    )
    gap = EngineGap(view, served.acceptance_length, trained.acceptance_length, how)
    gain = None
    sw = served.aux_sweep
    if sw is not None:
        gain = AuxGain(
            sw.best_offset,
            sw.margin if sw.best_offset != 0 else 0.0,
            f"teacher-forced aux-layer sweep over the same prompts: aux ids shifted by {sw.best_offset:+d}",
        )
    rows = [_length_row(served)]
    for n in sorted({int(x) for x in lengths if int(x) > 0 and int(x) != max_new_tokens}):
        r = _run(checkpoint, target, texts, view, max_new_tokens=n, teacher_forced=False, sweep=False, **kw)
        rows.append(_length_row(r))
    rows.sort(key=lambda r: int(r["length"]))
    rows.extend(segment_rows(served))
    note = (
        f"live probe: {len(texts)} prompts × {max_new_tokens} new tokens, K={k}, {view} view and the trained "
        f"view ({source}), {served.device} ({served.dtype})"
    )
    return Measured(view, served, trained, source, gap, gain, rows, note)


def _length_row(r: ProbeResult) -> dict[str, Any]:
    return {
        "segment": "all",
        "length": r.max_new_tokens,
        "acceptance_length": r.acceptance_length,
        "per_position": r.per_position_cumulative,
        "num_drafts": r.live.num_drafts,
    }


def segment_rows(result: ProbeResult) -> list[dict[str, Any]]:
    """Acceptance per segment (``scaffold``, ``reasoning``, ``answer``, ``tool_call``) from the
    probe's split (:func:`eagle3_forensics.probe.served.segment_acceptance`), segments with verify
    steps only; nothing when the target has no tokenizer to label positions with."""
    split = (getattr(result, "segments", None) or {}).get("by_segment") or {}
    rows = []
    for name, s in split.items():
        al = s.get("acceptance_length")
        if al is None:
            continue
        rows.append(
            {
                "segment": str(name),
                "length": result.max_new_tokens,
                "acceptance_length": float(al),
                "per_position": [],
                "num_drafts": s.get("verify_steps"),
            }
        )
    return rows
