"""The result of a server probe: a :class:`~eagle3_forensics.probe.core.ProbeResult` plus the
server's own figures and findings, and the conventions of the numbers only a server reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eagle3_forensics.errors import ExitCode
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.probe.core import ProbeResult
from eagle3_forensics.probe.decode import LiveRun
from eagle3_forensics.probe.teacher_forced import CONVENTIONS

SERVER_CONVENTIONS: dict[str, str] = {
    "server.vllm.counters": "deltas of vLLM's cumulative /metrics counters (*_total) across the probe; they include "
    "any other traffic the server handled meanwhile (see the generation-token check).",
    "server.sglang.acceptance_length": "SGLang spec_accept_length convention: Σ completion_tokens / Σ spec_verify_ct "
    "(a ratio of sums over the probe's requests; includes the bonus token and the "
    "prefill token, so it sits above 1 + accepted/verify by about "
    "requests/Σ verify).",
    "server.sglang.accepted": "Σ accepted drafts from meta_info (spec_num_correct_drafts / spec_accepted_drafts / "
    "spec_accept_token_num, whichever the server writes); when none is written, "
    "completion_tokens − spec_verify_ct − 1 per request [inference].",
    "server.sglang.per_position": "from the acceptance histogram (bucket i = verify steps that accepted i drafts): "
    "accepted_per_pos[i] = Σ hist[i+1:], summed over requests (docs/reference/acceptance.md §2.3).",
    "server.sglang.avg_spec_accept_length": "/get_server_info internal_states[*].avg_spec_accept_length: cumulative "
    "since server start over all traffic (SGLang convention, incl. bonus).",
    "server.sglang.metrics_gauges": "sglang:spec_accept_length / sglang:spec_accept_rate: 'mostrecent' gauges over "
    "the last logging window, not cumulative (needs --enable-metrics).",
    "server.launch.num_speculative_tokens": "K, the draft tokens per verify step of a chain: vLLM "
    "num_speculative_tokens = K ⇔ SGLang speculative_num_steps K with "
    "eagle_topk 1 and num_draft_tokens K+1 (docs/reference/acceptance.md §2.4).",
    "server.launch.aux_layer_ids": "Hugging Face hidden_states indices (input of decoder layer i), as diagnose "
    "computes them for this engine from the drafter's config.",
    "compare.gap": "server minus reference, per number; relative gap = gap / reference acceptance length.",
}

FAULT_CODES = ("SERVER_UNREACHABLE", "SERVER_TIMEOUT", "SERVER_HTTP_ERROR", "SERVER_BAD_RESPONSE")


@dataclass
class ServerProbeResult(ProbeResult):
    """A :class:`ProbeResult` measured on a live server, plus the server's own figures.

    ``measured`` is False when no acceptance could be measured (a fault, no speculative
    decoding, a restart): the numeric fields of :meth:`to_dict` are then ``None``.
    """

    url: str = ""
    server_engine: str = ""
    measured: bool = False
    per_position_available: bool = True
    findings: list[Finding] = field(default_factory=list)
    server: dict[str, Any] = field(default_factory=dict)
    compare: dict[str, Any] | None = None
    # the speculative config the server reported (vLLM /server_info), judged by probe.server.verify;
    # not serialised (server.verify carries what was read from it)
    reported_spec: dict[str, Any] | None = field(default=None, repr=False)
    reported_spec_source: str | None = field(default=None, repr=False)

    @property
    def faulted(self) -> bool:
        return any(f.code in FAULT_CODES for f in self.findings)

    @property
    def status(self) -> str:
        """``measured``, or why not: ``server_fault`` (exit 4), ``counters_impossible`` (the server's
        numbers break the counting rules), ``nothing_drafted`` (no verify step carried drafts) or
        ``not_measured`` (no speculative decoding, a restart)."""
        if self.measured:
            return "measured"
        if self.faulted:
            return "server_fault"
        codes = {f.code for f in self.findings}
        if "COUNTERS_IMPOSSIBLE" in codes:
            return "counters_impossible"
        if "NO_DRAFTS" in codes:
            return "nothing_drafted"
        return "not_measured"

    @property
    def exit_code(self) -> int:
        if self.faulted:
            return ExitCode.SERVER
        if not self.measured or any(f.severity is Severity.ERROR for f in self.findings):
            return ExitCode.FINDINGS
        return ExitCode.OK

    def add(
        self, code: str, severity: Severity, message: str, fix: str | None = None, **evidence: Any
    ) -> None:
        self.findings.append(Finding(code, severity, message, self.server_engine, evidence, fix))

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["source"] = "server"
        if not self.measured:
            for key in (
                "acceptance_length",
                "mean_accepted_drafts",
                "acceptance_rate",
                "num_drafts",
                "drafted",
                "accepted",
                "tokens_per_s",
            ):
                d[key] = None
        elif not self.live.drafted:  # SGLang without proposed drafts or K: no rate, rather than 0.0
            d["acceptance_rate"] = d["drafted"] = None
        if not self.measured or not self.per_position_available:
            d["per_position"] = {"cumulative": None, "conditional": None, "accepted": None}
        order = {s: i for i, s in enumerate(("error", "warning", "info"))}
        d.update(
            {
                "status": self.status,
                "exit_code": self.exit_code,
                "findings": [
                    f.to_dict() for f in sorted(self.findings, key=lambda f: order[f.severity.value])
                ],
                "server": self.server,
                "compare": self.compare,
                "conventions": {**CONVENTIONS, **SERVER_CONVENTIONS},
            }
        )
        return d


def new_result(url: str, engine: str, prompts: int, max_new_tokens: int) -> ServerProbeResult:
    return ServerProbeResult(
        drafter="",
        target="",
        engine=f"{engine}-server",
        k=0,
        device=url,
        dtype="unknown",
        prompts=prompts,
        max_new_tokens=max_new_tokens,
        live=LiveRun(0),
        greedy=None,
        lossless=None,
        mismatched_prompts=[],
        teacher_forced=None,
        aux_sweep=None,
        view=None,
        url=url,
        server_engine=engine,
    )
