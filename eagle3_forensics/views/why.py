"""Notebook 06, "Why is acceptance low?": run every source over one drafter and rank the causes.

:func:`why_low_acceptance` gathers the findings of ``diagnose`` (checkpoint and engine, and the launch
command when given), ``audit-data`` (when the drafter's training data is given), the live probe (00's
engine gap, the aux sweep, acceptance by length and segment) and a live server (when given), and hands
them to :func:`eagle3_forensics.checks.causes.rank_causes`. What could not be checked is said, never
guessed. Nothing here raises for a bad drafter: the notebook always completes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle3_forensics.checks.causes import AUX_CODES, Ranking, rank_causes
from eagle3_forensics.checks.diagnose import diagnose
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.dumps.options import ScanOptions

if TYPE_CHECKING:  # pragma: no cover - typing only
    from eagle3_forensics.checks.aux_measured import MeasuredAux
    from eagle3_forensics.checks.data.findings import DataAudit
    from eagle3_forensics.checks.diagnose import Diagnosis
    from eagle3_forensics.probe.why import Measured


@dataclass
class WhyReport:
    checkpoint: str
    engine: str
    diagnosis: Diagnosis
    audit: DataAudit | None
    measured: Measured | None
    ranking: Ranking
    server_findings: list[Finding] = field(default_factory=list)
    measured_aux: MeasuredAux | None = None  # the aux layers measured on the target (trained on)

    @property
    def by_length(self) -> list[dict[str, Any]]:
        return [] if self.measured is None else self.measured.by_length

    @property
    def served_acceptance_length(self) -> float | None:
        """Acceptance length under the engine's view of the checkpoint (``None``: not probed)."""
        m = self.measured
        return m.served.acceptance_length if m is not None and m.served is not None else None

    @property
    def trained_acceptance_length(self) -> float | None:
        """Acceptance length of the trained view: 06's reference (``None``: not probed)."""
        m = self.measured
        return m.trained.acceptance_length if m is not None and m.trained is not None else None

    @property
    def trained_source(self) -> str:
        """What the trained view ran: the checkpoint as written, or its repaired copy."""
        return self.measured.trained_source if self.measured is not None else ""


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _probe_findings(measured: Measured | None) -> list[Finding]:
    """The probe's own findings (VOCAB_SPECIAL_TOKENS_MISSING with its measured cost)."""
    found = getattr(measured.served, "findings", None) if measured is not None else None
    return [f for f in (found or []) if isinstance(f, Finding)]


def why_low_acceptance(
    checkpoint: str | Path,
    target: str | Path | None = None,
    *,
    engine: str = "vllm",
    data: str | Path | None = None,
    launch: str | None = None,
    server: str | None = None,
    prompts: str | Path | None = None,
    max_prompts: int = 4,
    k: int = 3,
    max_new_tokens: int = 24,
    lengths: Sequence[int] = (),
    device: str = "cpu",
) -> WhyReport:
    """Every source over one drafter, ranked. ``engine``: the engine (or release) the drafter is served
    on; ``data``: its training data (a directory ``audit-data`` reads); ``launch``: the serving command;
    ``server``: a live server's URL (probed with ``prompts``)."""
    not_checked: list[str] = []
    aux = _measure_aux(checkpoint, target, prompts, k, device, not_checked)
    try:
        d = diagnose(checkpoint, target=target, engines=engine, launch=launch, measured_aux=aux)
    except BadArgumentsError as exc:  # a malformed launch command: judge the checkpoint without it
        not_checked.append(f"server settings: the launch command cannot be read ({_one_line(exc)})")
        d = diagnose(checkpoint, target=target, engines=engine, measured_aux=aux)
        launch = None
    if launch is None and server is None:
        not_checked.append("server settings: no launch command (launch=...) and no server (server=...) given")

    audit = None if data is None else _audit(data, checkpoint, target, launch, not_checked)
    if data is None:
        not_checked.append(
            "data provenance, template and mode, trained lengths: no training data given (data=...)"
        )
    measured = None
    if d.unusable:
        not_checked.append("acceptance: the checkpoint cannot be read, so nothing was probed")
    elif target is None or prompts is None:
        not_checked.append("acceptance (00's engine gap, by length and segment): no target or prompts given")
    else:
        measured = _measure(
            d,
            checkpoint,
            target,
            prompts,
            engine,
            not_checked,
            max_prompts,
            k,
            max_new_tokens,
            lengths,
            device,
            aux,
        )
    server_findings: list[Finding] = []
    if server is not None and prompts is None:
        not_checked.append("server: no prompts given")
    elif server is not None and prompts is not None:
        server_findings = _served(
            server, engine, prompts, max_new_tokens, checkpoint, target, measured, not_checked
        )
    ranking = rank_causes(
        d.findings,
        [] if audit is None else audit.findings,
        _probe_findings(measured),
        server_findings,
        engine=engine,
        engine_gap=None if measured is None else measured.gap,
        aux_gain=None if measured is None else measured.aux_gain,
        not_checked=not_checked,
        acceptance_length=None if measured is None else measured.acceptance_length,
    )
    return WhyReport(str(checkpoint), engine, d, audit, measured, ranking, server_findings, aux)


def _audit(
    data: str | Path,
    checkpoint: str | Path,
    target: str | Path | None,
    launch: str | None,
    not_checked: list[str],
) -> DataAudit | None:
    """audit-data over the training data, or None (the reason added to ``not_checked``).

    With a target it reports DATA_NOT_FROM_TARGET (the target's greedy token as the labeller),
    DATA_TEMPLATE_MISMATCH, DATA_TRAINED_LENGTH and CONTEXT_BEYOND_TRAINING (the serving context
    from the launch line), each with its cost block."""
    from eagle3_forensics.checks.data.findings import audit_data  # heavy: numpy, torch
    from eagle3_forensics.probe.offline.teacher import greedy_labeller  # heavy: torch

    try:
        audit = audit_data(
            data,
            ScanOptions(target=target),
            drafter=checkpoint,
            launch=launch,
            labeller=greedy_labeller(target),
        )
    except UnusableInputError as exc:
        not_checked.append(f"data: {_one_line(exc)}")
        return None
    if audit.unusable:
        not_checked.append(f"data: {audit.unusable_reason}")
    return audit


def _measure(
    d: Diagnosis,
    checkpoint: str | Path,
    target: str | Path,
    prompts: str | Path,
    engine: str,
    not_checked: list[str],
    max_prompts: int,
    k: int,
    max_new_tokens: int,
    lengths: Sequence[int],
    device: str,
    measured_aux: MeasuredAux | None,
) -> Measured | None:
    """The in-process measurement (00's engine gap, the aux gain, acceptance by length and segment)."""
    from eagle3_forensics.probe.why import measure  # heavy: torch, transformers

    errors = any(f.severity is Severity.ERROR and f.engine is not None for f in d.findings)
    try:
        measured = measure(
            checkpoint,
            target,
            prompts,
            engine,
            checkpoint_errors=errors,
            aux_sweep=any(f.code in AUX_CODES for f in d.findings),
            max_prompts=max_prompts,
            k=k,
            max_new_tokens=max_new_tokens,
            lengths=lengths,
            device=device,
            measured_aux=measured_aux,
        )
    except UnusableInputError as exc:
        not_checked.append(f"acceptance: the probe is not possible ({_one_line(exc)})")
        return None
    if not any(r["segment"] != "all" for r in measured.by_length):
        not_checked.append("acceptance per segment (scaffold, reasoning, answer): the probe gives no split")
    return measured


def _served(
    server: str,
    engine: str,
    prompts: str | Path,
    max_new_tokens: int,
    checkpoint: str | Path,
    target: str | Path | None,
    measured: Measured | None,
    not_checked: list[str],
) -> list[Finding]:
    """The live server's findings. Integration point (issue 22, engineer `verify`): the server's
    verification settings (VERIFY_MODE_LOSSY, COMPARE_SETTINGS_DIFFER) arrive as findings of probe_server."""
    from eagle3_forensics.probe.server.core import probe_server  # heavy: http client

    try:
        sp = probe_server(
            server,
            engine.split("==")[0] if engine not in ("all", "reference") else "vllm",
            prompts,
            max_new_tokens=max_new_tokens,
            drafter=checkpoint,
            target=target,
            compare_with=None if measured is None else measured.trained,
        )
    except UnusableInputError as exc:
        not_checked.append(f"server: {_one_line(exc)}")
        return []
    return list(sp.findings)


def _measure_aux(
    checkpoint: str | Path,
    target: str | Path | None,
    prompts: str | Path | None,
    k: int,
    device: str,
    not_checked: list[str],
) -> MeasuredAux | None:
    """The aux layers the drafter was trained on, measured on the target (``None``: not measurable)."""
    if target is None or prompts is None:
        not_checked.append("trained aux layers: measured only with a target and prompts")
        return None
    from eagle3_forensics.probe.aux_trained import measure_trained_aux  # heavy: torch, transformers

    try:
        return measure_trained_aux(checkpoint, target, prompts, k=k, device=device)
    except UnusableInputError as exc:
        not_checked.append(f"trained aux layers: not measurable ({_one_line(exc)})")
        return None
