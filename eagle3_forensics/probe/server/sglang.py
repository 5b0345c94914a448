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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eagle3_forensics.findings import Severity
from eagle3_forensics.probe.decode import LiveRun
from eagle3_forensics.probe.server.http import HttpClient, ServerFault, nonneg_int, run_requests
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


@dataclass
class SglangRequest:
    """The speculative fields of one ``/generate`` answer."""

    completion_tokens: int
    verify: int
    accepted: int | None
    accepted_field: str | None
    proposed: int | None
    histogram: list[int] | None
    by_position: list[float] | None
    by_position_kind: str | None  # "counts" | "rate"
    accept_length: float | None
    accept_rate: float | None
    names_present: tuple[str, ...] = ()

    @classmethod
    def read(cls, meta: Any) -> SglangRequest:
        if not isinstance(meta, dict):
            raise ServerFault(
                "SERVER_BAD_RESPONSE",
                "POST /generate: no meta_info object in the answer",
                {"request": "POST /generate"},
            )
        if "completion_tokens" not in meta:
            raise ServerFault(
                "SERVER_BAD_RESPONSE",
                "POST /generate: meta_info has no completion_tokens",
                {"request": "POST /generate", "keys": sorted(meta)[:40]},
            )
        completion = nonneg_int(meta["completion_tokens"], "completion_tokens")
        verify = nonneg_int(meta.get("spec_verify_ct") or 0, "spec_verify_ct")
        acc_name, acc = _first(meta, SGLANG_ACCEPTED)
        _, prop = _first(meta, SGLANG_PROPOSED)
        hist_name, hist = _first(meta, SGLANG_HISTOGRAM)
        histogram = None
        if hist is not None:
            if not isinstance(hist, list):
                raise ServerFault(
                    "SERVER_BAD_RESPONSE",
                    f"POST /generate: meta_info.{hist_name} is not a list",
                    {"request": "POST /generate"},
                )
            histogram = [nonneg_int(h, str(hist_name)) for h in hist] or None
        by_pos, kind = None, None
        for names, k in ((SGLANG_BY_POSITION_COUNTS, "counts"), (SGLANG_BY_POSITION_RATE, "rate")):
            n, v = _first(meta, names)
            if v is not None:
                if not isinstance(v, list) or not all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
                    for x in v
                ):
                    raise ServerFault(
                        "SERVER_BAD_RESPONSE",
                        f"POST /generate: meta_info.{n} is not a list of numbers",
                        {"request": "POST /generate"},
                    )
                by_pos, kind = [float(x) for x in v], k
                break

        def opt_float(name: str) -> float | None:
            v = meta.get(name)
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

        return cls(
            completion,
            verify,
            None if acc is None else nonneg_int(acc, str(acc_name)),
            acc_name,
            None if prop is None else nonneg_int(prop, "proposed drafts"),
            histogram,
            by_pos,
            kind,
            opt_float("spec_accept_length"),
            opt_float("spec_accept_rate"),
            tuple(n for n in (*SGLANG_ACCEPTED, *SGLANG_PROPOSED, *SGLANG_HISTOGRAM) if n in meta),
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
        float(s["avg_spec_accept_length"])
        for s in states
        if isinstance(s, dict)
        and isinstance(s.get("avg_spec_accept_length"), (int, float))
        and not isinstance(s.get("avg_spec_accept_length"), bool)
    ]
    return vals or None


def _sglang_gauges(http: HttpClient) -> dict[str, Any] | None:
    """The optional /metrics gauges (``None`` when /metrics is not served); a broken /metrics is
    reported beside the numbers, not fatal: the per-request meta_info carries the measurement."""
    try:
        status, text = http.get_text("/metrics", allow=(404, 405))
        if status >= 400:
            return None
        samples = parse_metrics(text)
    except ServerFault as fault:
        return {"error": str(fault)}
    return {
        "spec_accept_length": sum_samples(samples, "sglang:spec_accept_length"),
        "spec_accept_rate": sum_samples(samples, "sglang:spec_accept_rate"),
    }


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

    def int_arg(name: str) -> int | None:
        v = args.get(name)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    algo = args.get("speculative_algorithm")
    steps, topk, ndt = (
        int_arg("speculative_num_steps"),
        int_arg("speculative_eagle_topk"),
        int_arg("speculative_num_draft_tokens"),
    )
    launch.update(
        {
            "method": algo.lower() if isinstance(algo, str) else None,
            "num_speculative_tokens": steps,
            "topk": topk,
            "num_draft_tokens": ndt,
            "shape": None if topk is None else ("chain" if topk == 1 else "tree"),
            "draft_model": args.get("speculative_draft_model_path"),
            "target_model": args.get("model_path"),
            "sglang": {
                "speculative_num_steps": steps,
                "speculative_eagle_topk": topk,
                "speculative_num_draft_tokens": ndt,
            },
        }
    )
    return launch


def probe_sglang(
    r: ServerProbeResult,
    http: HttpClient,
    texts: Sequence[str],
    max_new_tokens: int,
    concurrency: int,
    model: str | None = None,
) -> None:
    """Measure an SGLang server into ``r``. ``model`` is unused: an SGLang server serves one model."""
    info, path = _sglang_info(http)
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
    else:
        r.target = str(launch.get("target_model") or "")
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
            return
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
    gauges_before = _sglang_gauges(http) if args is None or args.get("enable_metrics") else None
    avg_before = _avg_accept_length(info)

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
    reqs: list[SglangRequest] = run_requests(texts, one, concurrency)
    seconds = time.perf_counter() - t0
    info_after, _ = _sglang_info(http) if info is not None else (None, None)
    gauges_after = _sglang_gauges(http) if gauges_before is not None else None
    _sglang_aggregate(r, reqs, seconds, launch)
    r.server["engine_reported"] = {
        **r.server.get("engine_reported", {}),
        "avg_spec_accept_length": {
            "before": avg_before,
            "after": _avg_accept_length(info_after),
            "convention": SERVER_CONVENTIONS["server.sglang.avg_spec_accept_length"],
        },
        "metrics_gauges": None
        if gauges_after is None
        else {**gauges_after, "convention": SERVER_CONVENTIONS["server.sglang.metrics_gauges"]},
    }


def _sglang_aggregate(
    r: ServerProbeResult, reqs: Sequence[SglangRequest], seconds: float, launch: dict[str, Any]
) -> None:
    completion = sum(q.completion_tokens for q in reqs)
    verify = sum(q.verify for q in reqs)
    r.server["requests"] = {"count": len(reqs), "completion_tokens": completion, "seconds": seconds}
    spec = [q for q in reqs if q.verify > 0]
    if not spec:
        r.add(
            "NO_SPEC_DECODING",
            Severity.ERROR,
            f"None of the {len(reqs)} answers carries spec_verify_ct > 0: the server ran no verify step "
            "(no speculative decoding, or max_new_tokens too small).",
            fix="Check the launch flags (--speculative-algorithm EAGLE3 ...) and --max-new-tokens.",
        )
        return
    fields = sorted({q.accepted_field for q in spec if q.accepted_field})
    k = launch.get("num_speculative_tokens")
    if not isinstance(k, int) or k <= 0:
        hist_len = max((len(q.histogram) for q in spec if q.histogram), default=0)
        bp_len = max((len(q.by_position) for q in spec if q.by_position), default=0)
        k = hist_len - 1 if hist_len > 1 else bp_len
        if not k and all(q.proposed is not None for q in spec):
            k = round(sum(q.proposed or 0 for q in spec) / verify)
        launch["num_speculative_tokens"] = k or None
    if not k:
        r.add(
            "LAUNCH_SETTINGS_UNKNOWN",
            Severity.WARNING,
            "K (draft tokens per verify) is neither in server_args nor derivable from the answers: per-position "
            "figures are unavailable.",
        )
    derived = [q for q in spec if q.accepted is None]
    accepted = sum(
        q.accepted if q.accepted is not None else max(0, q.completion_tokens - q.verify - 1) for q in spec
    )
    proposed = (
        sum(q.proposed or 0 for q in spec) if all(q.proposed is not None for q in spec) else verify * (k or 0)
    )
    per_pos: list[int] | None = None
    source = None
    if k and all(q.histogram for q in spec):
        counts = [0] * k
        for q in spec:
            h = q.histogram or []
            for i in range(k):
                counts[i] += sum(h[i + 1 :])
        per_pos, source = counts, "histogram"
    elif k and all(q.by_position is not None and q.by_position_kind == "counts" for q in spec):
        per_pos = [round(sum(_at(q.by_position, i) for q in spec)) for i in range(k)]
        source = "spec_num_correct_drafts_by_position"
    elif k and all(q.by_position is not None for q in spec):
        per_pos = [round(sum(_at(q.by_position, i) * q.verify for q in spec)) for i in range(k)]
        source = "spec_accept_rate_by_position × spec_verify_ct"
    r.k = int(k or 0)
    r.live = LiveRun(
        r.k,
        num_drafts=verify,
        drafted=int(proposed),
        accepted=int(accepted),
        per_pos=per_pos if per_pos is not None else [0] * r.k,
        new_tokens=completion,
        seconds=seconds,
    )
    r.per_position_available = per_pos is not None
    r.measured = True
    present = {n for q in spec for n in q.names_present}
    generations = sorted({SGLANG_GENERATION[n] for n in present if n in SGLANG_GENERATION})
    r.server["engine_reported"] = {
        "acceptance_length": {
            "value": completion / verify,
            "convention": SERVER_CONVENTIONS["server.sglang.acceptance_length"],
        },
        "accepted": {
            "value": accepted,
            "fields": fields,
            "field_generations": generations,
            "fields_present": sorted(present),
            "derived_for_requests": len(derived),
            "convention": SERVER_CONVENTIONS["server.sglang.accepted"],
        },
        "proposed": {
            "value": int(proposed),
            "convention": "Σ proposed drafts (spec_num_proposed_drafts / "
            "spec_proposed_drafts / spec_draft_token_num), else spec_verify_ct × K",
        },
        "spec_verify_ct": {"value": verify, "convention": "Σ verify forwards (= vLLM num_drafts)"},
        "per_position_source": source,
        "per_position": {"convention": SERVER_CONVENTIONS["server.sglang.per_position"]},
    }
    if launch.get("shape") == "tree":
        r.add(
            "LAUNCH_TREE_DRAFTING",
            Severity.WARNING,
            f"The server drafts a tree (topk {launch.get('topk')}, {launch.get('num_draft_tokens')} draft tokens): "
            "the acceptance rate counts tree nodes and is not comparable with a chain's; acceptance length is.",
        )
    _check_sglang_consistency(r, spec, k or 0)


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
    check("accepted ≤ proposed", live.accepted <= live.drafted, f"{live.accepted} ≤ {live.drafted}")
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
        f"{completion} ≤ {committed} ≤ {completion + len(spec) * max(k, 1)}",
    )
    r.server["consistency"] = checks
    bad = [c for c in checks if not c["ok"]]
    if bad:
        r.add(
            "COUNTERS_INCONSISTENT",
            Severity.WARNING,
            "The meta_info fields do not add up: "
            + "; ".join(f"{c['check']} ({c['detail']})" for c in bad)
            + ".",
            failed=bad,
        )
