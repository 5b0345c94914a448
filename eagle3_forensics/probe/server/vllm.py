"""vLLM: ``/metrics`` counters before and after, the launch settings it reports, and their consistency.

``/metrics`` is read before and after the prompts are sent through the OpenAI-compatible
``/v1/completions`` endpoint, and the deltas of ``vllm:spec_decode_num_drafts``,
``..._num_draft_tokens``, ``..._num_accepted_tokens`` and ``..._num_accepted_tokens_per_pos`` give the
acceptance (``docs/reference/acceptance.md`` §2.2). A counter that goes backwards, or a changed
``process_start_time_seconds``, means the server restarted mid-run: no numbers are reported. Launch
settings come from ``/v1/models``, ``/metrics`` and, with ``VLLM_SERVER_DEV_MODE=1``, ``/server_info``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eagle3_forensics.engines.verify import MAX_TREE_CHARS, is_chain
from eagle3_forensics.findings import Severity
from eagle3_forensics.probe.decode import LiveRun
from eagle3_forensics.probe.server.counters import (
    MAX_POSITIONS,
    Checks,
    Tally,
    as_reported,
    check_tally,
    number,
    refuse,
    report_inconsistent,
    shown,
)
from eagle3_forensics.probe.server.http import HttpClient, ServerFault, run_requests
from eagle3_forensics.probe.server.prometheus import Samples, by_label, parse_metrics, sum_samples
from eagle3_forensics.probe.server.result import SERVER_CONVENTIONS, ServerProbeResult

Progress = Callable[[int, int], None]

VLLM_METRICS = {
    "num_drafts": "vllm:spec_decode_num_drafts_total",
    "num_draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "num_accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
    "num_accepted_tokens_per_pos": "vllm:spec_decode_num_accepted_tokens_per_pos_total",
    "generation_tokens": "vllm:generation_tokens_total",
    "prompt_tokens": "vllm:prompt_tokens_total",
    "process_start_time_seconds": "process_start_time_seconds",
}

_NAMES = {"accepted": "num_accepted_tokens", "drafted": "num_draft_tokens", "verify": "num_drafts"}


@dataclass
class VllmCounters:
    num_drafts: float
    num_draft_tokens: float
    num_accepted_tokens: float
    per_pos: dict[int, float]
    generation_tokens: float | None
    prompt_tokens: float | None
    start_time: float | None

    @classmethod
    def read(cls, samples: Samples) -> VllmCounters | None:
        """``None`` when the server exposes no speculative-decoding counters. The values are as the
        server wrote them (NaN and negatives included): :meth:`check` judges them."""
        drafts = sum_samples(samples, VLLM_METRICS["num_drafts"])
        tokens = sum_samples(samples, VLLM_METRICS["num_draft_tokens"])
        accepted = sum_samples(samples, VLLM_METRICS["num_accepted_tokens"])
        if drafts is None or tokens is None or accepted is None:
            return None
        per_pos: dict[int, float] = {}
        for pos, v in by_label(samples, VLLM_METRICS["num_accepted_tokens_per_pos"], "position").items():
            try:
                p = int(pos)
            except ValueError:
                p = -1
            if not 0 <= p < MAX_POSITIONS:
                raise ServerFault(
                    "SERVER_BAD_RESPONSE",
                    f"GET /metrics: per-position counter with position={pos[:40]!r} (a draft position is "
                    f"0..{MAX_POSITIONS - 1})",
                    {"request": "GET /metrics"},
                )
            per_pos[p] = v
        return cls(
            drafts,
            tokens,
            accepted,
            per_pos,
            sum_samples(samples, VLLM_METRICS["generation_tokens"]),
            sum_samples(samples, VLLM_METRICS["prompt_tokens"]),
            sum_samples(samples, VLLM_METRICS["process_start_time_seconds"]),
        )

    @property
    def k(self) -> int:
        return max(self.per_pos) + 1 if self.per_pos else 0

    def check(self, checks: Checks, when: str) -> None:
        """Every counter is a count; the start time a finite number."""
        checks.counts(
            f"GET /metrics ({when})",
            {
                "num_drafts": self.num_drafts,
                "num_draft_tokens": self.num_draft_tokens,
                "num_accepted_tokens": self.num_accepted_tokens,
                **{f"num_accepted_tokens_per_pos[{i}]": v for i, v in sorted(self.per_pos.items())},
                "generation_tokens": self.generation_tokens,
                "prompt_tokens": self.prompt_tokens,
            },
        )
        if self.start_time is not None and not math.isfinite(self.start_time):
            checks.fail(
                "process_start_time_seconds is finite",
                f"GET /metrics ({when}): {shown(self.start_time)}",
                process_start_time_seconds=self.start_time,
            )

    def check_since_start(self, checks: Checks, when: str) -> None:
        """Counted since the process started, one reading obeys the cross rules a run's deltas do
        (after :meth:`check` passed)."""
        since_start = Tally(
            requests=0,
            completion=self.generation_tokens or 0.0,
            verify=self.num_drafts,
            drafted=self.num_draft_tokens,
            accepted=self.num_accepted_tokens,
            per_pos=[self.per_pos.get(i, 0.0) for i in range(self.k)],
        )
        check_tally(checks, since_start, _NAMES, f"GET /metrics ({when}), since the server started: ")

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_drafts": shown(self.num_drafts),
            "num_draft_tokens": shown(self.num_draft_tokens),
            "num_accepted_tokens": shown(self.num_accepted_tokens),
            "num_accepted_tokens_per_pos": [shown(self.per_pos.get(i, 0.0)) for i in range(self.k)],
            "generation_tokens": shown(self.generation_tokens),
            "prompt_tokens": shown(self.prompt_tokens),
            "process_start_time_seconds": as_reported(self.start_time),
        }


def counter_delta(before: VllmCounters, after: VllmCounters) -> tuple[dict[str, Any] | None, list[str]]:
    """Deltas, or ``(None, reasons)`` when a counter went backwards or the process restarted.
    Both sides must have passed :meth:`VllmCounters.check` (finite counts)."""
    reasons = []
    if (
        before.start_time is not None
        and after.start_time is not None
        and abs(after.start_time - before.start_time) > 1e-3
    ):
        reasons.append(
            f"process_start_time_seconds changed from {before.start_time:.3f} to {after.start_time:.3f}"
        )
    pairs = [
        ("num_drafts", before.num_drafts, after.num_drafts),
        ("num_draft_tokens", before.num_draft_tokens, after.num_draft_tokens),
        ("num_accepted_tokens", before.num_accepted_tokens, after.num_accepted_tokens),
        ("generation_tokens", before.generation_tokens, after.generation_tokens),
    ]
    k = max(before.k, after.k)
    pairs += [
        (f"num_accepted_tokens_per_pos[{i}]", before.per_pos.get(i, 0.0), after.per_pos.get(i, 0.0))
        for i in range(k)
    ]
    for name, b, a in pairs:
        if b is not None and a is not None and a < b:
            reasons.append(f"{name} went from {shown(b)} to {shown(a)}")
    if reasons:
        return None, reasons

    def d(a: float | None, b: float | None) -> Any:
        return None if a is None or b is None else shown(a - b)

    return {
        "num_drafts": d(after.num_drafts, before.num_drafts),
        "num_draft_tokens": d(after.num_draft_tokens, before.num_draft_tokens),
        "num_accepted_tokens": d(after.num_accepted_tokens, before.num_accepted_tokens),
        "num_accepted_tokens_per_pos": [
            d(after.per_pos.get(i, 0.0), before.per_pos.get(i, 0.0)) for i in range(k)
        ],
        "generation_tokens": d(after.generation_tokens, before.generation_tokens),
        "prompt_tokens": d(after.prompt_tokens, before.prompt_tokens),
    }, []


# -- the probe ----------------------------------------------------------------------------------


def _scrape_vllm(http: HttpClient) -> tuple[VllmCounters | None, Samples]:
    _, text = http.get_text("/metrics")
    samples = parse_metrics(text)
    return VllmCounters.read(samples), samples


def probe_vllm(
    r: ServerProbeResult,
    http: HttpClient,
    texts: Sequence[str],
    max_new_tokens: int,
    concurrency: int,
    model: str | None,
    progress: Progress | None = None,
) -> None:
    """Measure a vLLM server into ``r``: counters before and after the prompts, launch settings.

    The steps: the served model, the launch settings, the counters before (checked: a server whose
    counters are impossible gets no load), the prompts, the counters after, their deltas (checked),
    then the figure and its consistency checks."""
    served = _served_model(r, http, model)
    launch = _vllm_launch(http, r)
    r.server["version"] = _vllm_version(http)
    before, _ = _scrape_vllm(http)
    r.server["launch"] = launch
    if before is None:
        r.add(
            "NO_SPEC_DECODING",
            Severity.ERROR,
            "The server exposes no vllm:spec_decode_* counters on /metrics: it runs without speculative "
            "decoding (or with stats logging disabled), so there is no acceptance to measure.",
            fix='Start vLLM with --speculative-config \'{"method": "eagle3", "model": DRAFTER, '
            '"num_speculative_tokens": K}\' and without --disable-log-stats.',
        )
        return
    checks = Checks()
    before.check(checks, "before")
    if not checks:
        before.check_since_start(checks, "before")
    if checks:
        r.server["counters"] = {
            "before": before.to_dict(),
            "convention": SERVER_CONVENTIONS["server.vllm.counters"],
        }
        refuse(r, checks, "GET /metrics before the prompts; no prompt was sent")
        return
    k = _reconcile_k(r, launch, before)
    answers, seconds = _send_prompts(http, served, texts, max_new_tokens, concurrency, progress)
    after, _ = _scrape_vllm(http)
    _measure(r, before, after, answers, seconds, k, max_new_tokens)


def _served_model(r: ServerProbeResult, http: HttpClient, model: str | None) -> str:
    """The model the prompts go to (``--model``, else the first ``/v1/models`` lists); sets ``r.target``."""
    _, models = http.get_json("/v1/models")
    data = models.get("data") if isinstance(models, dict) else None
    if (
        not isinstance(data, list)
        or not data
        or not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in data)
    ):
        raise ServerFault(
            "SERVER_BAD_RESPONSE",
            "GET /v1/models: no model list ({'data': [{'id': ...}]})",
            {"request": "GET /v1/models"},
        )
    ids = [m["id"] for m in data]
    served = model or ids[0]
    if model is not None and model not in ids:
        raise ServerFault(
            "SERVER_BAD_RESPONSE",
            f"GET /v1/models: model {model!r} is not served (serves {ids[:20]})",
            {"request": "GET /v1/models", "served": ids[:20]},
        )
    entry = data[ids.index(served)]
    root = entry.get("root")
    r.target = root if isinstance(root, str) and root else served
    r.server["model"] = served
    return served


def _reconcile_k(r: ServerProbeResult, launch: dict[str, Any], before: VllmCounters) -> int:
    """K from /server_info, else from the per-position labels; a disagreement is a warning."""
    k = before.k
    if launch.get("num_speculative_tokens") is None:
        launch["num_speculative_tokens"] = k or None
        launch["num_draft_tokens"] = k + 1 if k else None
        launch["source"] = launch.get("source") or "/metrics (per-position labels)"
    elif k and launch["num_speculative_tokens"] != k:
        r.add(
            "LAUNCH_SETTINGS_DISAGREE",
            Severity.WARNING,
            f"/server_info says num_speculative_tokens = {launch['num_speculative_tokens']} but /metrics has "
            f"per-position counters for {k} positions.",
            server_info=launch["num_speculative_tokens"],
            metrics_positions=k,
        )
    return int(launch.get("num_speculative_tokens") or k)


def _send_prompts(
    http: HttpClient,
    served: str,
    texts: Sequence[str],
    max_new_tokens: int,
    concurrency: int,
    progress: Progress | None,
) -> tuple[list[dict[str, float]], float]:
    """The prompts through ``/v1/completions``, greedy; each answer's token counts as they entered."""

    def one(text: str) -> dict[str, float]:
        body = {
            "model": served,
            "prompt": text,
            "max_tokens": max_new_tokens,
            "temperature": 0,
            "ignore_eos": True,
        }
        answer = http.post_json("/v1/completions", body)
        usage = answer.get("usage") if isinstance(answer, dict) else None
        completion = (
            number(usage.get("completion_tokens"), _USAGE + ".completion_tokens")
            if isinstance(usage, dict)
            else None
        )
        if completion is None or not isinstance(usage, dict):
            raise ServerFault(
                "SERVER_BAD_RESPONSE",
                "POST /v1/completions: no usage.completion_tokens in the answer",
                {"request": "POST /v1/completions"},
            )
        return {
            "completion_tokens": completion,
            "prompt_tokens": number(usage.get("prompt_tokens"), _USAGE + ".prompt_tokens") or 0.0,
        }

    t0 = time.perf_counter()
    answers = run_requests(texts, one, concurrency, progress)
    return answers, time.perf_counter() - t0


_USAGE = "POST /v1/completions: usage"


def _measure(
    r: ServerProbeResult,
    before: VllmCounters,
    after: VllmCounters | None,
    answers: Sequence[dict[str, float]],
    seconds: float,
    k: int,
    max_new_tokens: int,
) -> None:
    """The deltas, checked; then the figure (or why there is none) and the consistency checks."""
    checks = Checks()
    checks.counts(
        _USAGE,
        {
            f"{key}[{i}]": a[key]
            for i, a in enumerate(answers)
            for key in ("completion_tokens", "prompt_tokens")
        },
    )
    checks.within(
        _USAGE,
        {f"completion_tokens[{i}]": a["completion_tokens"] for i, a in enumerate(answers)},
        max_new_tokens,
        "max_tokens of the request",
    )
    completion = sum(a["completion_tokens"] for a in answers)
    r.server["requests"] = {
        "count": len(answers),
        "completion_tokens": shown(completion),
        "prompt_tokens": shown(sum(a["prompt_tokens"] for a in answers)),
        "seconds": seconds,
    }
    if after is None:
        r.add(
            "COUNTERS_WENT_BACKWARDS",
            Severity.ERROR,
            "The vllm:spec_decode_* counters disappeared from /metrics during the probe: the server restarted "
            "(without speculative decoding?) mid-run.",
            fix="Re-run the probe once the server is stable.",
        )
        return
    after.check(checks, "after")
    counters: dict[str, Any] = {
        "before": before.to_dict(),
        "after": after.to_dict(),
        "delta": None,
        "convention": SERVER_CONVENTIONS["server.vllm.counters"],
    }
    r.server["counters"] = counters
    if checks:
        refuse(r, checks, "GET /metrics after the prompts, or the answers' usage")
        return
    delta, reasons = counter_delta(before, after)
    counters["delta"] = delta
    if delta is None:
        r.add(
            "COUNTERS_WENT_BACKWARDS",
            Severity.ERROR,
            "A cumulative counter went backwards during the probe (" + "; ".join(reasons) + "): the server "
            "restarted mid-run, so the deltas mean nothing.",
            fix="Re-run the probe once the server is stable.",
            reasons=reasons,
        )
        return
    after.check_since_start(checks, "after")  # after a restart is ruled out: a fresh process starts at 0
    if checks:
        refuse(r, checks, "GET /metrics after the prompts")
        return
    per_pos = [int(x or 0) for x in delta["num_accepted_tokens_per_pos"]]
    gen = delta.get("generation_tokens")
    verify, drafted = float(delta["num_drafts"]), float(delta["num_draft_tokens"])
    tally = Tally(
        requests=len(answers),
        completion=float(gen) if gen is not None else completion,
        verify=verify,
        drafted=drafted,
        accepted=float(delta["num_accepted_tokens"]),
        per_pos=per_pos,
        # K unknown (no per-position counters, no /server_info): draft tokens per verify step (a chain's K)
        k=k or (math.ceil(drafted / verify) if verify > 0 else 0),
        server_wide=gen is not None,
    )
    check_tally(checks, tally, _NAMES)
    if checks:
        refuse(r, checks, "the deltas of /metrics across the prompts")
        return
    _figure(r, delta, per_pos, int(completion), seconds, k, len(answers))


def _figure(
    r: ServerProbeResult,
    delta: dict[str, Any],
    per_pos: list[int],
    completion: int,
    seconds: float,
    k: int,
    requests: int,
) -> None:
    """The acceptance from checked deltas; nothing drafted is said, not measured as 1.0."""
    if k and len(per_pos) < k:
        per_pos += [0] * (k - len(per_pos))
    r.k = k or len(per_pos)
    r.live = LiveRun(
        r.k,
        num_drafts=int(delta["num_drafts"]),
        drafted=int(delta["num_draft_tokens"]),
        accepted=int(delta["num_accepted_tokens"]),
        per_pos=per_pos[: r.k] or [0] * r.k,
        new_tokens=completion,
        seconds=seconds,
    )
    r.per_position_available = bool(per_pos)
    if r.live.num_drafts == 0:
        r.add(
            "NO_DRAFTS",
            Severity.WARNING,
            f"No verify step carried drafts during the probe ({requests} requests, {completion} tokens): the "
            "spec-decode counters did not move, so there is no acceptance to report (max_new_tokens too small, "
            "or the server drafts nothing).",
            fix="Probe with more --max-new-tokens; if the counters still do not move, the server is not drafting "
            "(check its log and launch flags).",
            requests=requests,
            completion_tokens=completion,
        )
        return
    r.measured = True
    _check_vllm_consistency(r, delta, requests, completion)


def _vllm_version(http: HttpClient) -> str | None:
    """``GET /version`` -> ``{"version": VLLM_VERSION}`` (entrypoints/serve/instrumentator/basic.py); optional."""
    try:
        status, ver = http.get_json("/version", allow=(404, 405))
    except ServerFault:
        return None  # the version only picks the release table; its absence is not a fault
    if status < 400 and isinstance(ver, dict) and isinstance(ver.get("version"), str):
        return str(ver["version"])
    return None


def _vllm_launch(http: HttpClient, r: ServerProbeResult) -> dict[str, Any]:
    launch: dict[str, Any] = {
        "method": None,
        "num_speculative_tokens": None,
        "topk": 1,
        "num_draft_tokens": None,
        "shape": "chain",
        "draft_model": None,
        "target_model": r.target,
        "source": None,
        "convention": SERVER_CONVENTIONS["server.launch.num_speculative_tokens"],
    }
    status, info = http.get_json("/server_info?config_format=json", allow=(404, 405))
    cfg = info.get("vllm_config") if isinstance(info, dict) else None
    spec = cfg.get("speculative_config") if isinstance(cfg, dict) else None
    if status >= 400 or not isinstance(cfg, dict):
        r.add(
            "LAUNCH_SETTINGS_UNKNOWN",
            Severity.INFO,
            "vLLM does not serve /server_info (it does only with VLLM_SERVER_DEV_MODE=1): the speculative method, "
            "drafter path and verification settings (rejection_sample_method, draft quantization, token tree) are "
            "unknown, so a lossy verification (VERIFY_MODE_LOSSY) cannot be ruled out; K is read from the "
            "per-position counters.",
            fix="Start the server with VLLM_SERVER_DEV_MODE=1 (trusted networks only), or pass --drafter and "
            "--launch COMMAND (the command the server was started with).",
        )
        return launch
    launch["source"] = "/server_info"
    model_cfg = cfg.get("model_config")
    if isinstance(model_cfg, dict):
        r.dtype = str(model_cfg.get("dtype") or "unknown").replace("torch.", "")
    if not isinstance(spec, dict):
        launch["method"] = None
        return launch
    r.reported_spec, r.reported_spec_source = spec, "/server_info vllm_config.speculative_config"
    method = spec.get("method")
    k = spec.get("num_speculative_tokens")
    launch.update(
        {
            "method": method if isinstance(method, str) else None,
            "num_speculative_tokens": k
            if isinstance(k, int) and not isinstance(k, bool) and 0 < k <= MAX_POSITIONS
            else None,
            "draft_model": spec.get("model") if isinstance(spec.get("model"), str) else None,
        }
    )
    if launch["num_speculative_tokens"] is not None:
        launch["num_draft_tokens"] = launch["num_speculative_tokens"] + 1
    tree = spec.get("speculative_token_tree")
    if isinstance(tree, str) and tree.strip():
        launch["shape"] = "chain" if is_chain(tree) else "tree"
        launch["token_tree"] = (
            tree if len(tree) <= MAX_TREE_CHARS else tree[:200] + f"… ({len(tree)} characters)"
        )
    return launch


def _check_vllm_consistency(
    r: ServerProbeResult, delta: dict[str, Any], requests: int, completion: int
) -> None:
    k, live = r.k, r.live
    checks: list[dict[str, Any]] = []

    def check(name: str, ok: bool, detail: str) -> None:
        checks.append({"check": name, "ok": ok, "detail": detail})

    check(
        "draft tokens = K × drafts (chain)",
        live.drafted == k * live.num_drafts,
        f"{live.drafted} vs {k} × {live.num_drafts}",
    )
    check(
        "Σ accepted per position = accepted",
        sum(live.per_pos) == live.accepted,
        f"{sum(live.per_pos)} vs {live.accepted}",
    )
    check(
        "accepted per position never increases",
        all(a >= b for a, b in zip(live.per_pos, live.per_pos[1:], strict=False)),
        str(live.per_pos),
    )
    committed = requests + live.num_drafts + live.accepted  # prefill token + one bonus per verify + accepted
    check(
        "tokens generated ≤ requests + drafts + accepted ≤ tokens + requests × K",
        completion <= committed <= completion + requests * k,
        f"{completion} ≤ {committed} ≤ {completion + requests * k}",
    )
    gen = delta.get("generation_tokens")
    if gen is not None:
        check(
            "vllm:generation_tokens delta = Σ usage.completion_tokens",
            gen == completion,
            f"{gen} vs {completion}",
        )
    report_inconsistent(
        r,
        checks,
        "The counters",
        " Other traffic on the server during the probe, or a counter bug, would explain it.",
        fix="Probe a server nobody else is using, or subtract the other traffic.",
    )
