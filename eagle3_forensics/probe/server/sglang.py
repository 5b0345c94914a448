"""SGLang: per-request ``meta_info``, summed over requests, and the launch settings in ``server_args``.

``/generate`` returns per-request ``meta_info``; all three generations of field names are read
(``spec_accept_token_num`` → ``spec_accepted_drafts`` → ``spec_num_correct_drafts`` and the matching
proposed-draft and histogram names, ``docs/reference/acceptance.md`` §2.3). Sums over requests are taken before
dividing (a ratio of sums, never a mean of per-request ratios). ``/get_server_info``
(``avg_spec_accept_length``) and the ``/metrics`` gauges are reported beside, each labelled with its
convention.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eagle3_forensics.findings import Severity
from eagle3_forensics.probe.decode import LiveRun
from eagle3_forensics.probe.server.counters import (
    MAX_DRAFT_TOKENS,
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
from eagle3_forensics.probe.server.prometheus import parse_metrics, sum_samples
from eagle3_forensics.probe.server.result import SERVER_CONVENTIONS, ServerProbeResult

# Oldest name first in docs/reference/acceptance.md §2.3; here newest first (a server writing aliases writes both).
SGLANG_ACCEPTED = ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
SGLANG_PROPOSED = ("spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")
SGLANG_HISTOGRAM = ("spec_correct_drafts_histogram", "spec_accept_histogram")
SGLANG_BY_POSITION_COUNTS = ("spec_num_correct_drafts_by_position",)
SGLANG_BY_POSITION_RATE = ("spec_accept_rate_by_position",)
SGLANG_GENERATION = {"spec_accept_token_num": 1, "spec_accepted_drafts": 2, "spec_num_correct_drafts": 3}


def _first(meta: dict[str, Any], names: Sequence[str]) -> tuple[str | None, Any]:
    for n in names:
        if meta.get(n) is not None:
            return n, meta[n]
    return None, None


_GEN = "POST /generate: meta_info"


def _numbers(meta: dict[str, Any], name: str | None, value: Any) -> list[float] | None:
    """A list field of numbers (histogram, by position), bounded in length; ``None`` when absent."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_POSITIONS + 1:
        raise ServerFault(
            "SERVER_BAD_RESPONSE",
            f"{_GEN}.{name} is not a list of at most {MAX_POSITIONS + 1} numbers",
            {"request": "POST /generate", "field": name},
        )
    return [number(x, f"{_GEN}.{name}") or 0.0 for x in value]


@dataclass
class SglangRequest:
    """The speculative fields of one ``/generate`` answer, as the server wrote them (checked by :meth:`check`)."""

    completion_tokens: float
    verify: float
    accepted: float | None
    accepted_field: str | None
    proposed: float | None
    histogram: list[float] | None
    by_position: list[float] | None
    by_position_kind: str | None  # "counts" | "rate"
    accept_length: float | None
    accept_rate: float | None
    names_present: tuple[str, ...] = ()
    spec_fields: bool = False  # the answer carries spec_verify_ct (generation 1 writes it as 0)

    @classmethod
    def read(cls, meta: Any) -> SglangRequest:
        if not isinstance(meta, dict):
            raise ServerFault(
                "SERVER_BAD_RESPONSE",
                "POST /generate: no meta_info object in the answer",
                {"request": "POST /generate"},
            )
        completion = number(meta.get("completion_tokens"), f"{_GEN}.completion_tokens")
        if completion is None:
            raise ServerFault(
                "SERVER_BAD_RESPONSE",
                "POST /generate: meta_info has no completion_tokens",
                {"request": "POST /generate", "keys": sorted(map(str, meta))[:40]},
            )
        acc_name, acc = _first(meta, SGLANG_ACCEPTED)
        prop_name, prop = _first(meta, SGLANG_PROPOSED)
        hist_name, hist = _first(meta, SGLANG_HISTOGRAM)
        by_pos, kind = None, None
        for names, k in ((SGLANG_BY_POSITION_COUNTS, "counts"), (SGLANG_BY_POSITION_RATE, "rate")):
            n, v = _first(meta, names)
            if v is not None:
                by_pos, kind = _numbers(meta, n, v), k
                break
        return cls(
            completion,
            number(meta.get("spec_verify_ct"), f"{_GEN}.spec_verify_ct") or 0.0,
            number(acc, f"{_GEN}.{acc_name}"),
            acc_name,
            number(prop, f"{_GEN}.{prop_name}"),
            _numbers(meta, hist_name, hist) or None,
            by_pos,
            kind,
            number(meta.get("spec_accept_length"), f"{_GEN}.spec_accept_length"),
            number(meta.get("spec_accept_rate"), f"{_GEN}.spec_accept_rate"),
            tuple(n for n in (*SGLANG_ACCEPTED, *SGLANG_PROPOSED, *SGLANG_HISTOGRAM) if n in meta),
            meta.get("spec_verify_ct") is not None,
        )

    def check(self, checks: Checks, i: int) -> None:
        """Counts are counts, rates are rates, and this request's accepted ≤ proposed."""
        where = f"{_GEN} of request {i + 1}"
        before = len(checks.problems)
        checks.counts(
            where,
            {
                "completion_tokens": self.completion_tokens,
                "spec_verify_ct": self.verify,
                str(self.accepted_field or "accepted"): self.accepted,
                "proposed drafts": self.proposed,
                **{f"histogram[{j}]": h for j, h in enumerate(self.histogram or [])},
                **(
                    {f"by_position[{j}]": v for j, v in enumerate(self.by_position or [])}
                    if self.by_position_kind == "counts"
                    else {}
                ),
            },
        )
        checks.finite(where, {"spec_accept_length": self.accept_length})
        rates = (
            {f"by_position[{j}]": v for j, v in enumerate(self.by_position or [])}
            if self.by_position_kind == "rate"
            else {}
        )
        checks.finite(where, {"spec_accept_rate": self.accept_rate, **rates}, at_most=1.0)
        if len(checks.problems) > before:
            return
        if self.proposed is not None and self.accepted is not None and self.accepted > self.proposed:
            checks.fail(
                "accepted drafts ≤ proposed drafts",
                f"request {i + 1}: {shown(self.accepted)} accepted of {shown(self.proposed)} proposed",
                accepted=self.accepted,
                proposed=self.proposed,
                request=i + 1,
            )
        if self.proposed is not None and (self.verify > 0) != (self.proposed > 0):
            checks.fail(
                "spec_verify_ct > 0 exactly when proposed drafts > 0",
                f"request {i + 1}: {shown(self.verify)} verify steps, {shown(self.proposed)} proposed drafts",
                verify=self.verify,
                proposed=self.proposed,
                request=i + 1,
            )
        if self.accepted and self.verify == 0:
            checks.fail(
                "accepted drafts > 0 needs spec_verify_ct > 0",
                f"request {i + 1}: {shown(self.accepted)} accepted drafts without a verify step",
                accepted=self.accepted,
                verify=self.verify,
                request=i + 1,
            )


# -- the probe ----------------------------------------------------------------------------------


def _sglang_info(http: HttpClient) -> tuple[dict[str, Any] | None, str | None]:
    for path in ("/get_server_info", "/server_info"):
        status, info = http.get_json(path, allow=(404, 405))
        if status < 400:
            if not isinstance(info, dict):
                raise ServerFault(
                    "SERVER_BAD_RESPONSE", f"GET {path}: not a JSON object", {"request": f"GET {path}"}
                )
            return info, path
    return None, None


def _server_args(info: dict[str, Any]) -> dict[str, Any]:
    nested = info.get("server_args")
    return nested if isinstance(nested, dict) else info


def _avg_accept_length(info: dict[str, Any] | None) -> list[float] | None:
    states = info.get("internal_states") if isinstance(info, dict) else None
    if not isinstance(states, list):
        return None
    vals = [
        number(s.get("avg_spec_accept_length"), "/get_server_info internal_states[].avg_spec_accept_length")
        for s in states[:MAX_POSITIONS]
        if isinstance(s, dict)
    ]
    return [v for v in vals if v is not None] or None


def _sglang_gauges(http: HttpClient) -> dict[str, Any] | None:
    """The optional /metrics gauges (``None`` when /metrics is not served); a broken /metrics is
    reported beside the numbers, not fatal: the per-request meta_info carries the measurement."""
    try:
        status, text = http.get_text("/metrics", allow=(404, 405))
        if status >= 400:
            return None
        samples = parse_metrics(text)
    except ServerFault as fault:
        if fault.code == "SERVER_TIMEOUT" and "budget_s" in fault.evidence:
            raise  # the run's budget is spent: nothing else may be asked
        return {"error": str(fault)}
    return {
        "spec_accept_length": sum_samples(samples, "sglang:spec_accept_length"),
        "spec_accept_rate": sum_samples(samples, "sglang:spec_accept_rate"),
    }


def _check_reported(
    checks: Checks, avg: list[float] | None, gauges: dict[str, Any] | None, when: str
) -> None:
    """The figures SGLang reports beside the measurement obey the same rules: finite, not negative,
    a rate at most 1."""
    checks.finite(
        f"/get_server_info ({when})",
        {f"avg_spec_accept_length[{i}]": v for i, v in enumerate(avg or [])},
    )
    if gauges is not None and "error" not in gauges:
        checks.finite(f"GET /metrics ({when})", {"sglang:spec_accept_length": gauges["spec_accept_length"]})
        checks.finite(
            f"GET /metrics ({when})", {"sglang:spec_accept_rate": gauges["spec_accept_rate"]}, at_most=1.0
        )


def _sglang_launch(args: dict[str, Any] | None, path: str | None) -> dict[str, Any]:
    launch: dict[str, Any] = {
        "method": None,
        "num_speculative_tokens": None,
        "topk": None,
        "num_draft_tokens": None,
        "shape": None,
        "draft_model": None,
        "target_model": None,
        "source": path,
        "convention": SERVER_CONVENTIONS["server.launch.num_speculative_tokens"],
    }
    if args is None:
        return launch

    def int_arg(name: str, most: int) -> int | None:
        v = args.get(name)
        return v if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= most else None

    def str_arg(name: str) -> str | None:
        v = args.get(name)
        return v if isinstance(v, str) and v else None

    algo = str_arg("speculative_algorithm")
    steps, topk, ndt = (
        int_arg("speculative_num_steps", MAX_POSITIONS),
        int_arg("speculative_eagle_topk", MAX_DRAFT_TOKENS),
        int_arg("speculative_num_draft_tokens", MAX_DRAFT_TOKENS),
    )
    launch.update(
        {
            "method": algo.lower() if algo else None,
            "num_speculative_tokens": steps,
            "topk": topk,
            "num_draft_tokens": ndt,
            "shape": None if topk is None else ("chain" if topk == 1 else "tree"),
            "draft_model": str_arg("speculative_draft_model_path"),
            "target_model": str_arg("model_path"),
            "sglang": {
                "speculative_num_steps": steps,
                "speculative_eagle_topk": topk,
                "speculative_num_draft_tokens": ndt,
            },
        }
    )
    return launch


Progress = Callable[[int, int], None]


def probe_sglang(
    r: ServerProbeResult,
    http: HttpClient,
    texts: Sequence[str],
    max_new_tokens: int,
    concurrency: int,
    model: str | None = None,
    progress: Progress | None = None,
) -> None:
    """Measure an SGLang server into ``r``. ``model`` is unused: an SGLang server serves one model.

    The steps: the launch settings, the reported figures before (checked: impossible ones get no
    load), the prompts, every answer's counts (checked), then the figure and its consistency checks."""
    info, path = _sglang_info(http)
    launch = _read_launch(r, info, path)
    if launch is None:
        return
    args = _server_args(info) if info is not None else None
    gauges_before = _sglang_gauges(http) if args is None or args.get("enable_metrics") else None
    avg_before = _avg_accept_length(info)
    checks = Checks()
    _check_reported(checks, avg_before, gauges_before, "before the prompts")
    if checks:
        refuse(r, checks, "the figures it reports before the prompts; no prompt was sent")
        return

    def one(text: str) -> SglangRequest:
        body = {
            "text": text,
            "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens, "ignore_eos": True},
        }
        answer = http.post_json("/generate", body)
        if isinstance(answer, list) and len(answer) == 1:
            answer = answer[0]
        return SglangRequest.read(answer.get("meta_info") if isinstance(answer, dict) else None)

    t0 = time.perf_counter()
    reqs: list[SglangRequest] = run_requests(texts, one, concurrency, progress)
    seconds = time.perf_counter() - t0
    info_after, _ = _sglang_info(http) if info is not None else (None, None)
    gauges_after = _sglang_gauges(http) if gauges_before is not None else None
    avg_after = _avg_accept_length(info_after)
    r.server["engine_reported"] = {
        "avg_spec_accept_length": {
            "before": [as_reported(v) for v in avg_before or []] or None,
            "after": [as_reported(v) for v in avg_after or []] or None,
            "convention": SERVER_CONVENTIONS["server.sglang.avg_spec_accept_length"],
        },
        "metrics_gauges": None
        if gauges_after is None
        else {
            **{k: as_reported(v) if isinstance(v, float) else v for k, v in gauges_after.items()},
            "convention": SERVER_CONVENTIONS["server.sglang.metrics_gauges"],
        },
    }
    for i, q in enumerate(reqs):
        q.check(checks, i)
    checks.within(
        _GEN,
        {f"completion_tokens[{i}]": q.completion_tokens for i, q in enumerate(reqs)},
        max_new_tokens,
        "max_new_tokens of the request",
    )
    _check_reported(checks, avg_after, gauges_after, "after the prompts")
    if checks:
        r.server["requests"] = {"count": len(reqs), "seconds": seconds}
        refuse(r, checks, "the answers' meta_info, or the figures it reports")
        return
    _sglang_aggregate(r, reqs, seconds, launch)


def _read_launch(
    r: ServerProbeResult, info: dict[str, Any] | None, path: str | None
) -> dict[str, Any] | None:
    """The launch settings from ``server_args`` into ``r``; ``None`` when the server runs without
    speculative decoding (NO_SPEC_DECODING: nothing to measure, no load sent)."""
    if info is not None and isinstance(info.get("version"), str):
        r.server["version"] = info["version"]  # /server_info: "version": __version__
    args = _server_args(info) if info is not None else None
    if args is not None and args.get("speculative_algorithm"):
        r.reported_spec, r.reported_spec_source = args, f"{path} server_args"
    launch = _sglang_launch(args, path)
    r.server["launch"] = launch
    if args is None:
        r.add(
            "LAUNCH_SETTINGS_UNKNOWN",
            Severity.INFO,
            "The server answers neither /get_server_info nor /server_info: launch settings unknown.",
        )
        return launch
    r.target = launch.get("target_model") or ""
    if isinstance(args.get("dtype"), str):
        r.dtype = args["dtype"]
    if launch["method"] is None:
        r.add(
            "NO_SPEC_DECODING",
            Severity.ERROR,
            "server_args.speculative_algorithm is null: the server runs without speculative decoding.",
            fix="Start SGLang with --speculative-algorithm EAGLE3 --speculative-draft-model-path DRAFTER "
            "--speculative-num-steps K --speculative-eagle-topk 1 --speculative-num-draft-tokens K+1.",
        )
        return None
    if (
        launch["shape"] == "chain"
        and None not in (launch["num_speculative_tokens"], launch["num_draft_tokens"])
        and launch["num_draft_tokens"] != launch["num_speculative_tokens"] + 1
    ):
        r.add(
            "LAUNCH_SETTINGS_DISAGREE",
            Severity.WARNING,
            f"topk 1 (a chain) with num_steps {launch['num_speculative_tokens']} should verify "
            f"num_steps + 1 = {launch['num_speculative_tokens'] + 1} tokens, but num_draft_tokens is "
            f"{launch['num_draft_tokens']}.",
        )
    return launch


def _no_verify_step(r: ServerProbeResult, reqs: Sequence[SglangRequest], launch: dict[str, Any]) -> None:
    """No answer carries a verify step: nothing drafted (the server speculates) or no speculation at all."""
    completion = int(sum(q.completion_tokens for q in reqs))
    if launch.get("method") is not None or any(q.spec_fields for q in reqs):
        r.add(
            "NO_DRAFTS",
            Severity.WARNING,
            f"None of the {len(reqs)} answers carries spec_verify_ct > 0 ({completion} tokens): nothing was "
            "drafted, so there is no acceptance to report (max_new_tokens too small, or the server drafts "
            "nothing).",
            fix="Probe with more --max-new-tokens; if still nothing is drafted, check the launch flags and the log.",
            requests=len(reqs),
            completion_tokens=completion,
        )
        return
    r.add(
        "NO_SPEC_DECODING",
        Severity.ERROR,
        f"None of the {len(reqs)} answers carries spec_verify_ct: the server ran no verify step "
        "(no speculative decoding, or max_new_tokens too small).",
        fix="Check the launch flags (--speculative-algorithm EAGLE3 ...) and --max-new-tokens.",
    )


def _sglang_k(launch: dict[str, Any], spec: Sequence[SglangRequest], verify: float) -> int:
    """K from server_args, else from the histogram length, the by-position length or proposed per verify."""
    k = launch.get("num_speculative_tokens")
    if isinstance(k, int) and k > 0:
        return k
    hist_len = max((len(q.histogram) for q in spec if q.histogram), default=0)
    bp_len = max((len(q.by_position) for q in spec if q.by_position), default=0)
    k = hist_len - 1 if hist_len > 1 else bp_len
    if not k and all(q.proposed is not None for q in spec):
        k = min(round(sum(q.proposed or 0 for q in spec) / verify), MAX_POSITIONS)
    launch["num_speculative_tokens"] = k or None
    return int(k)


def _sglang_aggregate(
    r: ServerProbeResult, reqs: Sequence[SglangRequest], seconds: float, launch: dict[str, Any]
) -> None:
    completion = int(sum(q.completion_tokens for q in reqs))
    verify = int(sum(q.verify for q in reqs))
    r.server["requests"] = {"count": len(reqs), "completion_tokens": completion, "seconds": seconds}
    spec = [q for q in reqs if q.verify > 0]
    if not spec:
        _no_verify_step(r, reqs, launch)
        return
    fields = sorted({q.accepted_field for q in spec if q.accepted_field})
    k = _sglang_k(launch, spec, verify)
    if not k:
        r.add(
            "LAUNCH_SETTINGS_UNKNOWN",
            Severity.WARNING,
            "K (draft tokens per verify) is neither in server_args nor derivable from the answers: per-position "
            "figures are unavailable.",
        )
    derived = [q for q in spec if q.accepted is None]
    accepted = int(
        sum(
            q.accepted if q.accepted is not None else max(0, q.completion_tokens - q.verify - 1) for q in spec
        )
    )
    reported = all(q.proposed is not None for q in spec)
    proposed = int(sum(q.proposed or 0 for q in spec) if reported else verify * (k or 0))
    per_pos, source = _per_position(spec, k)
    checks = Checks()
    # neither reported nor derivable (no K): unknown, not zero, so no rule on proposed drafts applies
    drafted = float(proposed) if reported or k else math.inf
    tally = Tally(
        len(spec), float(sum(q.completion_tokens for q in spec)), verify, drafted, accepted, per_pos or (), k
    )
    check_tally(checks, tally, _NAMES)
    if checks:
        refuse(r, checks, "the answers' meta_info summed over the requests")
        return
    r.k = int(k or 0)
    r.live = LiveRun(
        r.k,
        num_drafts=verify,
        drafted=proposed,
        accepted=accepted,
        per_pos=per_pos if per_pos is not None else [0] * r.k,
        new_tokens=completion,
        seconds=seconds,
    )
    r.per_position_available = per_pos is not None
    r.measured = True
    _engine_reported(r, spec, completion, verify, accepted, proposed, fields, len(derived), source)
    if launch.get("shape") == "tree":
        r.add(
            "LAUNCH_TREE_DRAFTING",
            Severity.WARNING,
            f"The server drafts a tree (topk {launch.get('topk')}, {launch.get('num_draft_tokens')} draft tokens): "
            "the acceptance rate counts tree nodes and is not comparable with a chain's; acceptance length is.",
        )
    _check_sglang_consistency(r, spec, k or 0)


_NAMES = {"accepted": "accepted drafts", "drafted": "proposed drafts", "verify": "spec_verify_ct"}


def _per_position(spec: Sequence[SglangRequest], k: int) -> tuple[list[int] | None, str | None]:
    """Accepted per draft position: from the histogram, else the by-position counts, else rates × verify."""
    if k and all(q.histogram for q in spec):
        counts = [0] * k
        for q in spec:
            h = q.histogram or []
            for i in range(k):
                counts[i] += int(sum(h[i + 1 :]))
        return counts, "histogram"
    if k and all(q.by_position is not None and q.by_position_kind == "counts" for q in spec):
        return [round(sum(_at(q.by_position, i) for q in spec)) for i in range(k)], (
            "spec_num_correct_drafts_by_position"
        )
    if k and all(q.by_position is not None for q in spec):
        return [round(sum(_at(q.by_position, i) * q.verify for q in spec)) for i in range(k)], (
            "spec_accept_rate_by_position × spec_verify_ct"
        )
    return None, None


def _engine_reported(
    r: ServerProbeResult,
    spec: Sequence[SglangRequest],
    completion: int,
    verify: int,
    accepted: int,
    proposed: int,
    fields: list[str],
    derived: int,
    source: str | None,
) -> None:
    present = {n for q in spec for n in q.names_present}
    generations = sorted({SGLANG_GENERATION[n] for n in present if n in SGLANG_GENERATION})
    r.server["engine_reported"] = {
        **r.server.get("engine_reported", {}),
        "acceptance_length": {
            "value": completion / verify,
            "convention": SERVER_CONVENTIONS["server.sglang.acceptance_length"],
        },
        "accepted": {
            "value": accepted,
            "fields": fields,
            "field_generations": generations,
            "fields_present": sorted(present),
            "derived_for_requests": derived,
            "convention": SERVER_CONVENTIONS["server.sglang.accepted"],
        },
        "proposed": {
            "value": proposed,
            "convention": "Σ proposed drafts (spec_num_proposed_drafts / "
            "spec_proposed_drafts / spec_draft_token_num), else spec_verify_ct × K",
        },
        "spec_verify_ct": {"value": verify, "convention": "Σ verify forwards (= vLLM num_drafts)"},
        "per_position_source": source,
        "per_position": {"convention": SERVER_CONVENTIONS["server.sglang.per_position"]},
    }


def _at(values: Sequence[float] | None, i: int) -> float:
    return float(values[i]) if values is not None and i < len(values) else 0.0


def _check_sglang_consistency(r: ServerProbeResult, spec: Sequence[SglangRequest], k: int) -> None:
    checks: list[dict[str, Any]] = []

    def check(name: str, ok: bool, detail: str) -> None:
        checks.append({"check": name, "ok": ok, "detail": detail})

    live = r.live
    with_hist = [q for q in spec if q.histogram]
    if with_hist:
        bad_sum = [i for i, q in enumerate(with_hist) if sum(q.histogram or []) != q.verify]
        check("Σ histogram = spec_verify_ct (per request)", not bad_sum, f"{len(bad_sum)} request(s) differ")
        with_acc = [q for q in with_hist if q.accepted is not None]
        bad_w = [q for q in with_acc if sum(i * h for i, h in enumerate(q.histogram or [])) != q.accepted]
        check("Σ i·hist[i] = accepted drafts (per request)", not bad_w, f"{len(bad_w)} request(s) differ")
    if r.per_position_available:
        check(
            "Σ accepted per position = accepted",
            sum(live.per_pos) == live.accepted,
            f"{sum(live.per_pos)} vs {live.accepted}",
        )
    if k and r.server.get("launch", {}).get("shape") != "tree":
        check(
            "proposed = K × spec_verify_ct (chain)",
            live.drafted == k * live.num_drafts,
            f"{live.drafted} vs {k} × {live.num_drafts}",
        )
    committed = len(spec) + live.num_drafts + live.accepted
    completion = sum(q.completion_tokens for q in spec)
    check(
        "completion ≤ requests + verify + accepted ≤ completion + requests × K",
        completion <= committed <= completion + len(spec) * max(k, 1),
        f"{shown(completion)} ≤ {committed} ≤ {shown(completion + len(spec) * max(k, 1))}",
    )
    report_inconsistent(r, checks, "The meta_info fields")
