"""Live accept-rate probe against a running vLLM or SGLang server (``eagle3-forensics probe-server``).

The in-process :func:`eagle3_forensics.probe.core.probe` says what acceptance a drafter *should*
deliver; this module measures what a serving engine *does* deliver, on the same prompts, with
greedy sampling (temperature 0, EOS ignored, a fixed budget of new tokens per prompt), and
returns the same :class:`~eagle3_forensics.probe.core.ProbeResult` (a subclass adding the server's
own figures, findings and an optional comparison with an in-process result).

* **vLLM**: ``/metrics`` is read before and after the prompts are sent through the
  OpenAI-compatible ``/v1/completions`` endpoint, parsed with ``prometheus_client``'s text
  parser, and the deltas of ``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``,
  ``..._num_accepted_tokens`` and ``..._num_accepted_tokens_per_pos`` give the acceptance
  (``acceptance.md`` §2.2). A counter that goes backwards, or a changed
  ``process_start_time_seconds``, means the server restarted mid-run: no numbers are reported.
* **SGLang**: ``/generate`` returns per-request ``meta_info``; all three generations of field
  names are read (``spec_accept_token_num`` → ``spec_accepted_drafts`` → ``spec_num_correct_drafts``
  and the matching proposed-draft and histogram names, ``acceptance.md`` §2.3). Sums over
  requests are taken before dividing (a ratio of sums, never a mean of per-request ratios).
  ``/get_server_info`` (``avg_spec_accept_length``) and the ``/metrics`` gauges are reported
  beside, each labelled with its convention.
* **Launch settings** are read from what the server reports (vLLM ``/v1/models``, ``/metrics``
  and, when the server runs with ``VLLM_SERVER_DEV_MODE=1``, ``/server_info``; SGLang's
  ``server_args``) and normalised across engines: a chain of K drafts is vLLM
  ``num_speculative_tokens = K`` ⇔ SGLang ``num_steps K, topk 1, num_draft_tokens K+1``
  (``acceptance.md`` §2.4). When the drafter directory is readable here, its aux-layer ids are
  checked the way :mod:`eagle3_forensics.checks.diagnose` reads them for that engine.

Faults (connection refused, timeouts, HTTP errors, malformed JSON or metrics, a server without
speculative decoding, a restart mid-run) become findings and an exit code, never a traceback.
Requests are retried a bounded number of times: idempotent reads on any transient fault,
generation requests only when the server refused the connection or answered 429/503 (the
request was not processed, so the counters are not double-counted).
"""

from __future__ import annotations

import http.client
import json
import math
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle3_forensics.errors import EXIT_FINDINGS, EXIT_OK, EXIT_SERVER, UnusableInputError
from eagle3_forensics.findings import Finding, Severity, register_codes
from eagle3_forensics.probe.core import CONVENTIONS, LiveRun, ProbeResult, read_prompts

SERVER_ENGINES = ("vllm", "sglang")
"""The server could not be probed: unreachable, timed out, HTTP error, malformed answer."""
DEFAULT_TOLERANCE = 0.10
MAX_RETRIES = 10
MAX_RESPONSE_BYTES = 64 * 1024 * 1024

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
    "accepted_per_pos[i] = Σ hist[i+1:], summed over requests (acceptance.md §2.3).",
    "server.sglang.avg_spec_accept_length": "/get_server_info internal_states[*].avg_spec_accept_length: cumulative "
    "since server start over all traffic (SGLang convention, incl. bonus).",
    "server.sglang.metrics_gauges": "sglang:spec_accept_length / sglang:spec_accept_rate: 'mostrecent' gauges over "
    "the last logging window, not cumulative (needs --enable-metrics).",
    "server.launch.num_speculative_tokens": "K, the draft tokens per verify step of a chain: vLLM "
    "num_speculative_tokens = K ⇔ SGLang speculative_num_steps K with "
    "eagle_topk 1 and num_draft_tokens K+1 (acceptance.md §2.4).",
    "server.launch.aux_layer_ids": "Hugging Face hidden_states indices (input of decoder layer i), as diagnose "
    "computes them for this engine from the drafter's config.",
    "compare.gap": "server minus reference, per number; relative gap = gap / reference acceptance length.",
}

SERVER_CATALOGUE: dict[str, str] = {
    "SERVER_UNREACHABLE": "The server refused or dropped the connection (or the URL does not resolve).",
    "SERVER_TIMEOUT": "The server did not answer within --timeout.",
    "SERVER_HTTP_ERROR": "The server answered with an HTTP error status.",
    "SERVER_BAD_RESPONSE": "The server's answer is not the JSON or Prometheus text the probe expects.",
    "NO_SPEC_DECODING": "The server reports no speculative-decoding counters or fields.",
    "COUNTERS_WENT_BACKWARDS": "A cumulative counter decreased (or the process start time changed): a restart.",
    "NO_DRAFTS": "No verify step carried drafts during the probe.",
    "COUNTERS_INCONSISTENT": "The counters disagree with each other or with the tokens the requests generated.",
    "LAUNCH_NOT_EAGLE3": "The server's speculative method is not EAGLE-3.",
    "LAUNCH_TREE_DRAFTING": "The server drafts a tree; rates and per-position figures are not chain figures.",
    "LAUNCH_SETTINGS_DISAGREE": "Two things the server reports about its launch settings disagree.",
    "LAUNCH_SETTINGS_UNKNOWN": "The server does not report (part of) its speculative launch settings.",
    "DRAFTER_NOT_READABLE": "The drafter the server loaded is not readable here; its config was not checked.",
    "AUX_LAYERS_DIFFER": "The engine reads other aux layers than the drafter was trained on.",
    "DRAFTER_DIAGNOSED_BROKEN": "diagnose finds errors for this engine in the drafter the server serves.",
    "COMPARE_SETTINGS_DIFFER": "The reference result was measured with other settings (K, prompts, tokens).",
    "ENGINE_GAP": "The engine's acceptance length differs from the reference by more than the tolerance.",
}
_FAULT_CODES = ("SERVER_UNREACHABLE", "SERVER_TIMEOUT", "SERVER_HTTP_ERROR", "SERVER_BAD_RESPONSE")


register_codes(SERVER_CATALOGUE)
ServerFinding = Finding  # server findings are ordinary Findings with codes from SERVER_CATALOGUE


class ServerFault(Exception):
    """A request that failed for good (after the bounded retries)."""

    def __init__(self, code: str, message: str, evidence: dict[str, Any] | None = None) -> None:
        super().__init__(" ".join(message.split()))
        self.code = code
        self.evidence = dict(evidence or {})


# ---------------------------------------------------------------------------------------------
# HTTP (standard library only)
# ---------------------------------------------------------------------------------------------


def normalise_url(url: str) -> str:
    if not isinstance(url, str) or not url.strip():
        raise UnusableInputError("no server URL given")
    u = url.strip().rstrip("/")
    if "://" not in u:
        u = "http://" + u
    parts = urllib.parse.urlsplit(u)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UnusableInputError(f"not an http(s) URL: {url!r}")
    try:
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        raise UnusableInputError(f"bad port in URL {url!r}") from None
    return u


def _excerpt(data: bytes, n: int = 300) -> str:
    return " ".join(data[:n].decode("utf-8", "replace").split())


@dataclass
class HttpClient:
    """Bounded-retry JSON/text client for one server."""

    base: str
    timeout: float = 60.0
    retries: int = 3  # extra attempts after the first
    backoff: float = 0.5  # seconds, doubled per attempt, capped at 5 s
    sleep: Callable[[float], None] = time.sleep
    requests: int = 0
    retried: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _count(self, retry: bool) -> None:
        with self._lock:
            self.requests += 1
            if retry:
                self.retried += 1

    def request(
        self,
        method: str,
        path: str,
        payload: Any = None,
        *,
        idempotent: bool = True,
        allow: Sequence[int] = (),
    ) -> tuple[int, bytes]:
        """Send a request; returns (status, body). Statuses in ``allow`` are returned, not raised."""
        data = None if payload is None else json.dumps(payload).encode()
        headers = {"Accept": "application/json, text/plain;q=0.9"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        what = f"{method} {path}"
        attempt = 0
        while True:
            attempt += 1
            self._count(attempt > 1)
            retryable = False
            try:
                # normalise_url admits http(s) only
                req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)  # noqa: S310
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                    body = resp.read(MAX_RESPONSE_BYTES + 1)
                    if len(body) > MAX_RESPONSE_BYTES:
                        raise ServerFault(
                            "SERVER_BAD_RESPONSE",
                            f"{what}: answer larger than {MAX_RESPONSE_BYTES // 2**20} MiB",
                            {"request": what},
                        )
                    return int(resp.status), body
            except urllib.error.HTTPError as exc:
                try:
                    body = exc.read(2000)
                except Exception:
                    body = b""
                if exc.code in allow:
                    return int(exc.code), body
                retryable = exc.code in (429, 503) or (idempotent and exc.code in (500, 502, 504))
                fault = ServerFault(
                    "SERVER_HTTP_ERROR",
                    f"{what}: HTTP {exc.code} {exc.reason}" + (f": {_excerpt(body)}" if body else ""),
                    {"request": what, "status": exc.code, "body": _excerpt(body, 1000)},
                )
            except TimeoutError:  # socket.timeout is TimeoutError
                retryable = idempotent
                fault = ServerFault(
                    "SERVER_TIMEOUT",
                    f"{what}: no answer within {self.timeout:g} s",
                    {"request": what, "timeout_s": self.timeout},
                )
            except urllib.error.URLError as exc:
                reason = exc.reason
                if isinstance(reason, TimeoutError):
                    retryable = idempotent
                    fault = ServerFault(
                        "SERVER_TIMEOUT",
                        f"{what}: no connection within {self.timeout:g} s",
                        {"request": what, "timeout_s": self.timeout},
                    )
                else:
                    refused = isinstance(reason, ConnectionRefusedError)
                    retryable = idempotent or refused
                    fault = ServerFault(
                        "SERVER_UNREACHABLE",
                        f"{what}: {reason}",
                        {"request": what, "reason": str(reason), "refused": refused},
                    )
            except ServerFault:
                raise
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                retryable = idempotent
                fault = ServerFault(
                    "SERVER_UNREACHABLE",
                    f"{what}: connection lost ({type(exc).__name__}: {exc})",
                    {"request": what, "reason": f"{type(exc).__name__}: {exc}"},
                )
            if not retryable or attempt > self.retries:
                fault.evidence["attempts"] = attempt
                raise fault
            self.sleep(min(self.backoff * 2 ** (attempt - 1), 5.0))

    def get_json(self, path: str, *, allow: Sequence[int] = ()) -> tuple[int, Any]:
        status, body = self.request("GET", path, allow=allow)
        return status, (_json(body, f"GET {path}") if status < 400 else None)

    def post_json(self, path: str, payload: Any) -> Any:
        _, body = self.request("POST", path, payload, idempotent=False)
        return _json(body, f"POST {path}")

    def get_text(self, path: str, *, allow: Sequence[int] = ()) -> tuple[int, str]:
        status, body = self.request("GET", path, allow=allow)
        try:
            return status, body.decode("utf-8")
        except UnicodeDecodeError:
            raise ServerFault(
                "SERVER_BAD_RESPONSE", f"GET {path}: answer is not UTF-8 text", {"request": f"GET {path}"}
            ) from None


def _json(body: bytes, what: str) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ServerFault(
            "SERVER_BAD_RESPONSE",
            f"{what}: answer is not JSON ({type(exc).__name__}: {exc}): {_excerpt(body)!r}",
            {"request": what, "body": _excerpt(body, 1000)},
        ) from None


# ---------------------------------------------------------------------------------------------
# Prometheus text
# ---------------------------------------------------------------------------------------------

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse_metrics(text: str, what: str = "GET /metrics") -> Samples:
    """Every sample of a Prometheus text exposition, keyed by (name, sorted labels)."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:  # pragma: no cover - the server extra is part of dev
        raise UnusableInputError(
            "probe-server needs prometheus_client: pip install 'eagle3-forensics[server]'"
        ) from None
    out: Samples = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    except Exception as exc:  # the parser raises ValueError/IndexError/KeyError/TypeError on bad lines
        raise ServerFault(
            "SERVER_BAD_RESPONSE",
            f"{what}: not Prometheus text ({type(exc).__name__}: {exc})",
            {"request": what},
        ) from None
    return out


def _sum(samples: Samples, name: str) -> float | None:
    """Sum of one metric over its label sets (engines, models); ``None`` when absent.

    Accepts the name with or without the ``_total`` suffix counters get on the text endpoint."""
    names = {name, name[:-6]} if name.endswith("_total") else {name, name + "_total"}
    vals = [v for (n, _), v in samples.items() if n in names]
    return sum(vals) if vals else None


def _by_label(samples: Samples, name: str, label: str) -> dict[str, float]:
    names = {name, name[:-6]} if name.endswith("_total") else {name, name + "_total"}
    out: dict[str, float] = {}
    for (n, labels), v in samples.items():
        if n in names:
            lv = dict(labels).get(label)
            if lv is not None:
                out[lv] = out.get(lv, 0.0) + v
    return out


VLLM_METRICS = {
    "num_drafts": "vllm:spec_decode_num_drafts_total",
    "num_draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "num_accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
    "num_accepted_tokens_per_pos": "vllm:spec_decode_num_accepted_tokens_per_pos_total",
    "generation_tokens": "vllm:generation_tokens_total",
    "prompt_tokens": "vllm:prompt_tokens_total",
    "process_start_time_seconds": "process_start_time_seconds",
}


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
        """``None`` when the server exposes no speculative-decoding counters."""
        drafts = _sum(samples, VLLM_METRICS["num_drafts"])
        tokens = _sum(samples, VLLM_METRICS["num_draft_tokens"])
        accepted = _sum(samples, VLLM_METRICS["num_accepted_tokens"])
        if drafts is None or tokens is None or accepted is None:
            return None
        per_pos: dict[int, float] = {}
        for pos, v in _by_label(samples, VLLM_METRICS["num_accepted_tokens_per_pos"], "position").items():
            try:
                per_pos[int(pos)] = v
            except ValueError:
                raise ServerFault(
                    "SERVER_BAD_RESPONSE",
                    f"GET /metrics: per-position counter with position={pos!r}",
                    {"request": "GET /metrics"},
                ) from None
        return cls(
            drafts,
            tokens,
            accepted,
            per_pos,
            _sum(samples, VLLM_METRICS["generation_tokens"]),
            _sum(samples, VLLM_METRICS["prompt_tokens"]),
            _sum(samples, VLLM_METRICS["process_start_time_seconds"]),
        )

    @property
    def k(self) -> int:
        return max(self.per_pos) + 1 if self.per_pos else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_drafts": _num(self.num_drafts),
            "num_draft_tokens": _num(self.num_draft_tokens),
            "num_accepted_tokens": _num(self.num_accepted_tokens),
            "num_accepted_tokens_per_pos": [_num(self.per_pos.get(i, 0.0)) for i in range(self.k)],
            "generation_tokens": _num(self.generation_tokens),
            "prompt_tokens": _num(self.prompt_tokens),
            "process_start_time_seconds": self.start_time,
        }


def _num(x: float | None) -> float | int | None:
    if x is None:
        return None
    return int(x) if float(x).is_integer() else x


def counter_delta(before: VllmCounters, after: VllmCounters) -> tuple[dict[str, Any] | None, list[str]]:
    """Deltas, or ``(None, reasons)`` when a counter went backwards or the process restarted."""
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
            reasons.append(f"{name} went from {_num(b)} to {_num(a)}")
    if reasons:
        return None, reasons

    def d(a: float | None, b: float | None) -> int | float | None:
        return None if a is None or b is None else _num(a - b)

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


# ---------------------------------------------------------------------------------------------
# SGLang meta_info
# ---------------------------------------------------------------------------------------------

# Oldest name first in acceptance.md; here newest first (a server writing aliases writes both).
SGLANG_ACCEPTED = ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
SGLANG_PROPOSED = ("spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")
SGLANG_HISTOGRAM = ("spec_correct_drafts_histogram", "spec_accept_histogram")
SGLANG_BY_POSITION_COUNTS = ("spec_num_correct_drafts_by_position",)
SGLANG_BY_POSITION_RATE = ("spec_accept_rate_by_position",)
SGLANG_GENERATION = {"spec_accept_token_num": 1, "spec_accepted_drafts": 2, "spec_num_correct_drafts": 3}


def _nonneg_int(x: Any, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0 or x != int(x):
        raise ServerFault(
            "SERVER_BAD_RESPONSE",
            f"POST /generate: meta_info.{what} = {x!r} is not a count",
            {"request": "POST /generate", "field": what},
        )
    return int(x)


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
        completion = _nonneg_int(meta["completion_tokens"], "completion_tokens")
        verify = _nonneg_int(meta.get("spec_verify_ct") or 0, "spec_verify_ct")
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
            histogram = [_nonneg_int(h, str(hist_name)) for h in hist] or None
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
            None if acc is None else _nonneg_int(acc, str(acc_name)),
            acc_name,
            None if prop is None else _nonneg_int(prop, "proposed drafts"),
            histogram,
            by_pos,
            kind,
            opt_float("spec_accept_length"),
            opt_float("spec_accept_rate"),
            tuple(n for n in (*SGLANG_ACCEPTED, *SGLANG_PROPOSED, *SGLANG_HISTOGRAM) if n in meta),
        )


# ---------------------------------------------------------------------------------------------
# the result
# ---------------------------------------------------------------------------------------------


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
    findings: list[ServerFinding] = field(default_factory=list)
    server: dict[str, Any] = field(default_factory=dict)
    compare: dict[str, Any] | None = None

    @property
    def faulted(self) -> bool:
        return any(f.code in _FAULT_CODES for f in self.findings)

    @property
    def exit_code(self) -> int:
        if self.faulted:
            return EXIT_SERVER
        if not self.measured or any(f.severity is Severity.ERROR for f in self.findings):
            return EXIT_FINDINGS
        return EXIT_OK

    def add(
        self, code: str, severity: Severity, message: str, fix: str | None = None, **evidence: Any
    ) -> None:
        self.findings.append(ServerFinding(code, severity, message, self.server_engine, evidence, fix))

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
        if not self.measured or not self.per_position_available:
            d["per_position"] = {"cumulative": None, "conditional": None, "accepted": None}
        order = {s: i for i, s in enumerate(("error", "warning", "info"))}
        d.update(
            {
                "status": "measured"
                if self.measured
                else ("server_fault" if self.faulted else "not_measured"),
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


def _new_result(url: str, engine: str, prompts: int, max_new_tokens: int) -> ServerProbeResult:
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


# ---------------------------------------------------------------------------------------------
# the probe
# ---------------------------------------------------------------------------------------------


def probe_server(
    url: str,
    engine: str,
    prompts: str | Path | Sequence[str],
    *,
    max_new_tokens: int = 64,
    concurrency: int = 1,
    timeout: float = 60.0,
    retries: int = 3,
    model: str | None = None,
    drafter: str | Path | None = None,
    target: str | Path | None = None,
    compare_with: str | Path | dict[str, Any] | ProbeResult | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    client: HttpClient | None = None,
) -> ServerProbeResult:
    """Measure a live server's acceptance on ``prompts`` (greedy, ``max_new_tokens`` each).

    Server faults become findings on the result (see :attr:`ServerProbeResult.exit_code`);
    only unusable arguments (a missing prompts file, a bad URL, an unreadable ``compare_with``)
    raise :class:`~eagle3_forensics.errors.UnusableInputError`.

    ``drafter``/``target``: local directories used for the aux-layer and diagnose checks when the
    server does not report a readable drafter path (vLLM without ``/server_info``) or to override it.
    """
    if engine not in SERVER_ENGINES:
        raise UnusableInputError(f"unknown server engine {engine!r}; choose from {', '.join(SERVER_ENGINES)}")
    base = normalise_url(url)
    for name, value, lo in (
        ("max_new_tokens", max_new_tokens, 1),
        ("concurrency", concurrency, 1),
        ("retries", retries, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            raise UnusableInputError(f"{name} must be an integer >= {lo}, got {value!r}")
    if retries > MAX_RETRIES:
        raise UnusableInputError(f"retries must be at most {MAX_RETRIES}, got {retries}")
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not timeout > 0
        or not math.isfinite(timeout)
    ):
        raise UnusableInputError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if not (isinstance(tolerance, (int, float)) and 0 <= tolerance < 10):
        raise UnusableInputError(f"tolerance must be a fraction such as 0.1, got {tolerance!r}")
    texts = read_prompts(prompts) if isinstance(prompts, (str, Path)) else list(prompts)
    if not texts or not all(isinstance(t, str) and t for t in texts):
        raise UnusableInputError("prompts must be non-empty strings")
    reference = load_reference(compare_with) if compare_with is not None else None
    http = client or HttpClient(base, timeout=float(timeout), retries=retries)
    r = _new_result(base, engine, len(texts), max_new_tokens)
    r.server = {
        "url": base,
        "engine": engine,
        "concurrency": concurrency,
        "timeout_s": float(timeout),
        "retries": retries,
    }
    try:
        if engine == "vllm":
            _probe_vllm(r, http, texts, max_new_tokens, concurrency, model)
        else:
            _probe_sglang(r, http, texts, max_new_tokens, concurrency)
    except ServerFault as fault:
        r.measured = False
        r.add(fault.code, Severity.ERROR, str(fault), fix=_FAULT_FIX[fault.code], **fault.evidence)
    r.server["http"] = {"requests": http.requests, "retries": http.retried}
    if r.server.get("launch") is not None and not r.faulted:
        _check_drafter(r, drafter, target)
    if reference is not None and r.measured:
        attach_comparison(r, reference, tolerance)
    return r


_FAULT_FIX = {
    "SERVER_UNREACHABLE": "Check the URL and that the server is up (GET /health); a server that died mid-run "
    "(e.g. an engine crash on the first request) shows here too: read its log.",
    "SERVER_TIMEOUT": "Raise --timeout, lower --concurrency or --max-new-tokens, or check the server's load.",
    "SERVER_HTTP_ERROR": "Read the server log for the cause (a 500 on the first request is often an engine "
    "crash, e.g. a d2t mapping draft ids outside the target vocabulary).",
    "SERVER_BAD_RESPONSE": "Check that the URL points at the engine named by --engine (and not at a proxy or "
    "another service).",
}


def _run_requests(items: Sequence[Any], fn: Callable[[Any], Any], concurrency: int) -> list[Any]:
    """Run ``fn`` over ``items`` with ``concurrency`` workers; the first fault stops new requests."""
    stop = threading.Event()

    def guarded(item: Any) -> Any:
        if stop.is_set():
            return None
        try:
            return fn(item)
        except ServerFault:
            stop.set()
            raise

    if concurrency == 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(guarded, item) for item in items]
        results, first = [], None
        for fut in futures:
            try:
                results.append(fut.result())
            except ServerFault as fault:
                first = first or fault
                results.append(None)
    if first is not None:
        raise first
    return results


# -- vLLM -------------------------------------------------------------------------------------


def _scrape_vllm(http: HttpClient) -> tuple[VllmCounters | None, Samples]:
    _, text = http.get_text("/metrics")
    samples = parse_metrics(text)
    return VllmCounters.read(samples), samples


def _probe_vllm(
    r: ServerProbeResult,
    http: HttpClient,
    texts: Sequence[str],
    max_new_tokens: int,
    concurrency: int,
    model: str | None,
) -> None:
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
            f"GET /v1/models: model {model!r} is not served (serves {ids})",
            {"request": "GET /v1/models", "served": ids},
        )
    entry = data[ids.index(served)]
    r.target = str(entry.get("root") or served)
    r.server["model"] = served
    launch = _vllm_launch(http, r)
    before, _ = _scrape_vllm(http)
    if before is None:
        r.server["launch"] = launch
        r.add(
            "NO_SPEC_DECODING",
            Severity.ERROR,
            "The server exposes no vllm:spec_decode_* counters on /metrics: it runs without speculative "
            "decoding (or with stats logging disabled), so there is no acceptance to measure.",
            fix='Start vLLM with --speculative-config \'{"method": "eagle3", "model": DRAFTER, '
            '"num_speculative_tokens": K}\' and without --disable-log-stats.',
        )
        return
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
    r.server["launch"] = launch
    k = int(launch.get("num_speculative_tokens") or k)

    def one(text: str) -> dict[str, Any]:
        body = {
            "model": served,
            "prompt": text,
            "max_tokens": max_new_tokens,
            "temperature": 0,
            "ignore_eos": True,
        }
        answer = http.post_json("/v1/completions", body)
        usage = answer.get("usage") if isinstance(answer, dict) else None
        if not isinstance(usage, dict):
            raise ServerFault(
                "SERVER_BAD_RESPONSE",
                "POST /v1/completions: no usage object in the answer",
                {"request": "POST /v1/completions"},
            )
        return {
            "completion_tokens": _nonneg_int(usage.get("completion_tokens"), "usage.completion_tokens"),
            "prompt_tokens": _nonneg_int(usage.get("prompt_tokens", 0) or 0, "usage.prompt_tokens"),
        }

    t0 = time.perf_counter()
    answers = _run_requests(texts, one, concurrency)
    seconds = time.perf_counter() - t0
    after, _ = _scrape_vllm(http)
    completion = sum(a["completion_tokens"] for a in answers)
    r.server["requests"] = {
        "count": len(answers),
        "completion_tokens": completion,
        "prompt_tokens": sum(a["prompt_tokens"] for a in answers),
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
    delta, reasons = counter_delta(before, after)
    r.server["counters"] = {
        "before": before.to_dict(),
        "after": after.to_dict(),
        "delta": delta,
        "convention": SERVER_CONVENTIONS["server.vllm.counters"],
    }
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
    per_pos = [int(x or 0) for x in delta["num_accepted_tokens_per_pos"]]
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
    r.measured = True
    _check_vllm_consistency(r, delta, len(answers), completion)


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
            "vLLM does not serve /server_info (it does only with VLLM_SERVER_DEV_MODE=1): the speculative method "
            "and drafter path are unknown; K is read from the per-position counters.",
            fix="Start the server with VLLM_SERVER_DEV_MODE=1 (trusted networks only), or pass --drafter.",
        )
        return launch
    launch["source"] = "/server_info"
    model_cfg = cfg.get("model_config")
    if isinstance(model_cfg, dict):
        r.dtype = str(model_cfg.get("dtype") or "unknown").replace("torch.", "")
    if not isinstance(spec, dict):
        launch["method"] = None
        return launch
    method = spec.get("method")
    k = spec.get("num_speculative_tokens")
    launch.update(
        {
            "method": method if isinstance(method, str) else None,
            "num_speculative_tokens": k if isinstance(k, int) and not isinstance(k, bool) else None,
            "draft_model": spec.get("model") if isinstance(spec.get("model"), str) else None,
        }
    )
    if launch["num_speculative_tokens"] is not None:
        launch["num_draft_tokens"] = launch["num_speculative_tokens"] + 1
    tree = spec.get("speculative_token_tree")
    if isinstance(tree, str) and tree.strip():
        launch["shape"] = "chain" if _is_chain(tree) else "tree"
        launch["token_tree"] = tree
    return launch


def _is_chain(tree: str) -> bool:
    """vLLM's speculative_token_tree ("[(0,), (0, 0), ...]"): a chain when every node only takes child 0."""
    import ast

    try:
        nodes = ast.literal_eval(tree)
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        return False
    return isinstance(nodes, (list, tuple)) and all(
        isinstance(n, (list, tuple)) and all(c == 0 for c in n) for n in nodes
    )


def _check_vllm_consistency(
    r: ServerProbeResult, delta: dict[str, Any], requests: int, completion: int
) -> None:
    k, live = r.k, r.live
    checks: list[dict[str, Any]] = []

    def check(name: str, ok: bool, detail: str) -> None:
        checks.append({"check": name, "ok": ok, "detail": detail})

    if live.num_drafts == 0:
        r.add(
            "NO_DRAFTS",
            Severity.WARNING,
            f"No verify step carried drafts during the probe ({requests} requests, {completion} tokens): "
            "nothing to measure (max_new_tokens too small?).",
        )
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
    check("accepted ≤ draft tokens", live.accepted <= live.drafted, f"{live.accepted} ≤ {live.drafted}")
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
    r.server["consistency"] = checks
    bad = [c for c in checks if not c["ok"]]
    if bad:
        r.add(
            "COUNTERS_INCONSISTENT",
            Severity.WARNING,
            "The counters do not add up: "
            + "; ".join(f"{c['check']} ({c['detail']})" for c in bad)
            + ". Other traffic on the server during the probe, or a counter bug, would explain it.",
            fix="Probe a server nobody else is using, or subtract the other traffic.",
            failed=bad,
        )


# -- SGLang -----------------------------------------------------------------------------------


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
        "spec_accept_length": _sum(samples, "sglang:spec_accept_length"),
        "spec_accept_rate": _sum(samples, "sglang:spec_accept_rate"),
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


def _probe_sglang(
    r: ServerProbeResult, http: HttpClient, texts: Sequence[str], max_new_tokens: int, concurrency: int
) -> None:
    info, path = _sglang_info(http)
    args = _server_args(info) if info is not None else None
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
    reqs: list[SglangRequest] = _run_requests(texts, one, concurrency)
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


# ---------------------------------------------------------------------------------------------
# the drafter behind the server: aux layers and diagnose
# ---------------------------------------------------------------------------------------------


def _check_drafter(r: ServerProbeResult, drafter: str | Path | None, target: str | Path | None) -> None:
    launch = r.server["launch"]
    path = (
        Path(drafter)
        if drafter is not None
        else (Path(launch["draft_model"]) if launch.get("draft_model") else None)
    )
    tpath = Path(target) if target is not None else (Path(r.target) if r.target else None)
    if tpath is not None and not (tpath / "config.json").is_file():
        tpath = None
    method = launch.get("method")
    if method is not None and method.lower() not in ("eagle3",):
        r.add(
            "LAUNCH_NOT_EAGLE3",
            Severity.WARNING,
            f"The server's speculative method is {method!r}, not eagle3: the EAGLE-3 checks below do not apply "
            "and a reference probe of an EAGLE-3 drafter is not comparable.",
            method=method,
        )
        return
    if path is None:
        return
    r.drafter = str(path)
    if not (path / "config.json").is_file():
        r.add(
            "DRAFTER_NOT_READABLE",
            Severity.INFO,
            f"The drafter {str(path)!r} is not readable here: aux layers and load rules were not checked.",
            fix="Pass --drafter DIR (a local copy of the drafter the server loaded).",
            path=str(path),
        )
        return
    from eagle3_forensics.checks import Context
    from eagle3_forensics.checks.aux_layers import engine_ids, trained_ids
    from eagle3_forensics.checks.diagnose import diagnose
    from eagle3_forensics.engines import ENGINES
    from eagle3_forensics.io.checkpoint import open_checkpoint
    from eagle3_forensics.io.target import open_target

    engine = r.server_engine
    try:
        ckpt = open_checkpoint(path)
        ctx = Context(
            ckpt,
            open_target(tpath) if tpath is not None else None,
            engine_names=[engine],
            explicit_engines=True,
        )
        trained, trained_field = trained_ids(ctx)
        read, read_field = engine_ids(ENGINES[engine], ctx)
    except UnusableInputError as exc:
        r.add(
            "DRAFTER_NOT_READABLE",
            Severity.INFO,
            f"The drafter {str(path)!r} cannot be read: {exc}",
            path=str(path),
        )
        return
    n = ctx.target_layers
    rules = ENGINES[engine]
    default = rules.aux_default(n) if n is not None else None
    trained_eff = trained if trained is not None else default
    read_eff = read if read is not None else default
    aux = {
        "drafter_config_hf": trained_eff,
        "drafter_field": trained_field,
        "engine_reads_hf": read_eff,
        "engine_field": read_field or f"default {rules.aux_default_text()}",
        "target_layers": n,
        "agrees": None if trained_eff is None or read_eff is None else trained_eff == read_eff,
        "convention": SERVER_CONVENTIONS["server.launch.aux_layer_ids"],
    }
    launch["aux_layers"] = aux
    d = diagnose(path, target=tpath, engines=[engine])
    errors = sorted(
        {f.code for f in d.findings if f.severity is Severity.ERROR and f.engine in (None, engine)}
    )
    launch["diagnose"] = {
        "verdict": d.verdict(engine),
        "errors": errors,
        "warnings": sorted(
            {f.code for f in d.findings if f.severity is Severity.WARNING and f.engine in (None, engine)}
        ),
    }
    if aux["agrees"] is False:
        r.add(
            "AUX_LAYERS_DIFFER",
            Severity.ERROR,
            f"{rules.display} reads the aux layers as HF {read_eff} ({aux['engine_field']}), but the drafter's "
            f"config says it was trained on {trained_eff}: acceptance is expected to drop.",
            fix="eagle3-forensics diagnose DRAFTER --engine " + engine + " (AUX_LAYER_IDS_*) has the fix.",
            trained=trained_eff,
            engine_reads=read_eff,
        )
    if errors:
        r.add(
            "DRAFTER_DIAGNOSED_BROKEN",
            Severity.WARNING,
            f"diagnose --engine {engine} finds {', '.join(errors)} in the drafter this server serves: a low "
            "acceptance (or an engine crash) is what the static checks predict.",
            fix=f"eagle3-forensics repair DRAFTER --engine {engine} --out FIXED, then restart the server on FIXED.",
            errors=errors,
        )


# ---------------------------------------------------------------------------------------------
# comparison with an in-process probe
# ---------------------------------------------------------------------------------------------


def load_reference(ref: str | Path | dict[str, Any] | ProbeResult) -> dict[str, Any]:
    """A probe result as a dict (``probe --json`` output, a dict, or a :class:`ProbeResult`)."""
    if isinstance(ref, ProbeResult):
        data: Any = ref.to_dict()
    elif isinstance(ref, dict):
        data = ref
    else:
        p = Path(ref)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UnusableInputError(f"--compare-with file not found: {p}", path=str(p)) from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UnusableInputError(
                f"--compare-with {p}: not a JSON probe result ({exc})", path=str(p)
            ) from None
    pp = data.get("per_position") if isinstance(data, dict) else None
    ok = (
        isinstance(data, dict)
        and isinstance(data.get("k"), int)
        and isinstance(data.get("acceptance_length"), (int, float))
        and isinstance(pp, dict)
        and isinstance(pp.get("cumulative"), list)
    )
    if not ok:
        raise UnusableInputError(
            "--compare-with: not a probe result (needs k, acceptance_length and "
            "per_position.cumulative, as written by `eagle3-forensics probe --json`)"
        )
    return data


def attach_comparison(
    r: ServerProbeResult,
    reference: str | Path | dict[str, Any] | ProbeResult,
    tolerance: float = DEFAULT_TOLERANCE,
) -> dict[str, Any] | None:
    """Compare ``r`` with an in-process probe of the same drafter: the engine gap per position.

    Sets ``r.compare`` and adds ENGINE_GAP (error, when the relative acceptance-length gap exceeds
    ``tolerance``) and COMPARE_SETTINGS_DIFFER (warning) findings. Returns the comparison."""
    ref = load_reference(reference)
    r.findings = [f for f in r.findings if f.code not in ("ENGINE_GAP", "COMPARE_SETTINGS_DIFFER")]
    if not r.measured:
        r.compare = None
        return None
    differ = {}
    for key, mine in (("k", r.k), ("prompts", r.prompts), ("max_new_tokens", r.max_new_tokens)):
        if ref.get(key) is not None and ref.get(key) != mine:
            differ[key] = {"server": mine, "reference": ref.get(key)}
    if differ:
        r.add(
            "COMPARE_SETTINGS_DIFFER",
            Severity.WARNING,
            "The reference was measured with other settings: "
            + ", ".join(f"{k} {v['reference']} (server run: {v['server']})" for k, v in differ.items())
            + ".",
            fix="Probe in process with the same prompts file, --k and --max-new-tokens.",
            differ=differ,
        )
    al_s, al_r = r.acceptance_length, float(ref["acceptance_length"])
    rel = (al_s - al_r) / al_r if al_r else None
    rows = []
    ref_cum = [float(x) for x in ref["per_position"]["cumulative"]]
    ref_cond = [float(x) for x in (ref["per_position"].get("conditional") or [])]
    srv_cum = r.per_position_cumulative if r.per_position_available else []
    srv_cond = r.per_position_conditional if r.per_position_available else []
    for i in range(max(len(ref_cum), len(srv_cum) if r.per_position_available else r.k)):
        s_cum = srv_cum[i] if i < len(srv_cum) else None
        r_cum = ref_cum[i] if i < len(ref_cum) else None
        s_cond = srv_cond[i] if i < len(srv_cond) else None
        r_cond = ref_cond[i] if i < len(ref_cond) else None
        rows.append(
            {
                "position": i,
                "server_cumulative": s_cum,
                "reference_cumulative": r_cum,
                "gap_cumulative": None if s_cum is None or r_cum is None else s_cum - r_cum,
                "server_conditional": s_cond,
                "reference_conditional": r_cond,
                "gap_conditional": None if s_cond is None or r_cond is None else s_cond - r_cond,
            }
        )
    within = rel is not None and abs(rel) <= tolerance
    r.compare = {
        "reference": {
            "drafter": ref.get("drafter"),
            "engine": ref.get("engine"),
            "device": ref.get("device"),
            "k": ref.get("k"),
            "prompts": ref.get("prompts"),
            "max_new_tokens": ref.get("max_new_tokens"),
        },
        "acceptance_length": {"server": al_s, "reference": al_r, "gap": al_s - al_r, "relative_gap": rel},
        "acceptance_rate": {
            "server": r.acceptance_rate,
            "reference": ref.get("acceptance_rate"),
            "gap": None
            if ref.get("acceptance_rate") is None
            else r.acceptance_rate - float(ref["acceptance_rate"]),
        },
        "per_position": rows,
        "tolerance": tolerance,
        "within_tolerance": within,
        "settings_differ": differ,
        "convention": SERVER_CONVENTIONS["compare.gap"] + " " + CONVENTIONS["acceptance_length"],
    }
    if not within:
        r.add(
            "ENGINE_GAP",
            Severity.ERROR,
            f"The server's acceptance length {al_s:.3f} differs from the reference's {al_r:.3f} "
            f"({ref.get('engine')} view) by {al_s - al_r:+.3f}"
            + (f" ({rel:+.1%})" if rel is not None else "")
            + f", beyond the {tolerance:.0%} tolerance.",
            fix="Compare per position (compare.per_position): a gap from position 0 points at the drafter as "
            "loaded (keys, d2t, aux layers); a growing gap at later positions points at the draft recurrence "
            "or numerics.",
            acceptance_length=al_s,
            reference=al_r,
            relative_gap=rel,
        )
    return r.compare


def server_vs_reference(
    url: str,
    engine: str,
    drafter: str | Path,
    target: str | Path,
    prompts: str | Path | Sequence[str],
    *,
    max_new_tokens: int = 64,
    device: str = "auto",
    tolerance: float = DEFAULT_TOLERANCE,
    **server_kw: Any,
) -> ServerProbeResult:
    """Probe the server, then the same drafter in process under that engine's view with the
    server's K on the same prompts, and attach the comparison (notebook 04's server section)."""
    from eagle3_forensics.probe.core import probe

    r = probe_server(
        url, engine, prompts, max_new_tokens=max_new_tokens, drafter=drafter, target=target, **server_kw
    )
    if r.measured and r.k:
        ref = probe(
            drafter,
            target,
            prompts,
            k=r.k,
            max_new_tokens=max_new_tokens,
            device=device,
            engine=engine,
            teacher_forced=False,
            sweep=False,
        )
        attach_comparison(r, ref, tolerance)
    return r


# ---------------------------------------------------------------------------------------------
# text and notebook rendering
# ---------------------------------------------------------------------------------------------


def _f(x: Any, nd: int = 3) -> str:
    return "n/a" if x is None else (f"{x:.{nd}f}" if isinstance(x, float) else str(x))


def render_server_probe(r: ServerProbeResult) -> str:
    launch = r.server.get("launch") or {}
    lines = [
        f"probe-server  {r.url}  (engine: {r.server_engine})",
        f"model {r.server.get('model') or r.target or 'n/a'}  K={r.k or 'n/a'}  T=0  prompts={r.prompts}  "
        f"max_new_tokens={r.max_new_tokens}  concurrency={r.server.get('concurrency')}",
    ]
    if launch:
        lines.append(
            f"launch: method {launch.get('method') or 'n/a'}, K {launch.get('num_speculative_tokens') or 'n/a'}"
            f", topk {launch.get('topk') or 'n/a'}, draft tokens {launch.get('num_draft_tokens') or 'n/a'}, "
            f"{launch.get('shape') or 'shape n/a'}; drafter {launch.get('draft_model') or 'n/a'}"
            f" (from {launch.get('source') or 'n/a'})"
        )
        aux = launch.get("aux_layers")
        if aux:
            lines.append(
                f"aux layers (HF): drafter config {aux['drafter_config_hf']}, engine reads "
                f"{aux['engine_reads_hf']} ({'agree' if aux['agrees'] else 'DIFFER'})"
            )
    lines.append("")
    if r.measured:
        lines += [
            f"acceptance length      {_f(r.acceptance_length)}   (vLLM: 1 + accepted/num_drafts, includes the bonus)",
            f"acceptance rate        {_f(r.acceptance_rate)}   (accepted/drafted = {r.live.accepted}/{r.live.drafted})",
            f"drafts (verify steps)  {r.live.num_drafts}   tokens generated {r.live.new_tokens} in "
            f"{r.live.seconds:.2f} s",
        ]
        if r.per_position_available:
            lines.append(
                "per position           cumulative "
                + " ".join(_f(x, 2) for x in r.per_position_cumulative)
                + "   conditional "
                + " ".join(_f(x, 2) for x in r.per_position_conditional)
            )
        else:
            lines.append("per position           not reported by this server")
        rep = r.server.get("engine_reported") or {}
        if "acceptance_length" in rep:
            lines.append(
                f"SGLang accept length   {_f(rep['acceptance_length']['value'])}   "
                "(Σ completion_tokens / Σ spec_verify_ct)"
            )
        avg = rep.get("avg_spec_accept_length")
        if avg and avg.get("after"):
            lines.append(
                f"avg_spec_accept_length {', '.join(_f(x) for x in avg['after'])}   (since server start)"
            )
    else:
        lines.append("no acceptance measured")
    if r.compare:
        c = r.compare
        al = c["acceptance_length"]
        lines += [
            "",
            f"vs reference ({c['reference']['engine']} view)  acceptance length {_f(al['reference'])} → "
            f"gap {al['gap']:+.3f}"
            + (f" ({al['relative_gap']:+.1%})" if al["relative_gap"] is not None else "")
            + f"   {'within' if c['within_tolerance'] else 'OUTSIDE'} ±{c['tolerance']:.0%}",
        ]
        for row in c["per_position"]:
            lines.append(
                f"  position {row['position']}: server {_f(row['server_cumulative'], 3)}  reference "
                f"{_f(row['reference_cumulative'], 3)}  gap "
                + ("n/a" if row["gap_cumulative"] is None else f"{row['gap_cumulative']:+.3f}")
            )
    if r.findings:
        lines.append("")
        for f in sorted(r.findings, key=lambda f: f.severity.rank):
            lines.append(f"{f.severity.value.upper():8}{f.code}: {' '.join(f.message.split())}")
    lines.append(f"\nexit code: {r.exit_code}")
    return "\n".join(lines)


def engine_gap_table(r: ServerProbeResult) -> Any:
    """Per position: the server's cumulative and conditional acceptance beside the reference's."""
    import pandas as pd

    if not r.compare:
        return pd.DataFrame(columns=["position", "server cumulative", "reference cumulative", "gap"])
    rows = [
        {
            "position": row["position"],
            "server cumulative": row["server_cumulative"],
            "reference cumulative": row["reference_cumulative"],
            "gap (cumulative)": row["gap_cumulative"],
            "server conditional": row["server_conditional"],
            "reference conditional": row["reference_conditional"],
            "gap (conditional)": row["gap_conditional"],
        }
        for row in r.compare["per_position"]
    ]
    al = r.compare["acceptance_length"]
    rows.append(
        {
            "position": "acceptance length",
            "server cumulative": al["server"],
            "reference cumulative": al["reference"],
            "gap (cumulative)": al["gap"],
        }
    )
    return pd.DataFrame(rows)


def engine_gap_figure(r: ServerProbeResult) -> Any:
    """Bars: cumulative acceptance per position, server vs reference."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 3.2), layout="constrained")
    ax = fig.subplots()
    rows = (r.compare or {}).get("per_position") or []
    xs = [row["position"] for row in rows]
    ax.bar([x - 0.2 for x in xs], [row["server_cumulative"] or 0 for row in rows], 0.4, label=f"{r.engine}")
    ax.bar(
        [x + 0.2 for x in xs],
        [row["reference_cumulative"] or 0 for row in rows],
        0.4,
        label=f"in-process ({(r.compare or {}).get('reference', {}).get('engine')} view)",
    )
    ax.set_xticks(xs, [f"draft {x}" for x in xs])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("cumulative acceptance")
    if r.compare:
        al = r.compare["acceptance_length"]
        ax.set_title(f"acceptance length: server {al['server']:.2f} vs reference {al['reference']:.2f}")
    ax.legend(fontsize=8, loc="lower left")
    return fig


def findings_table(r: ServerProbeResult) -> Any:
    import pandas as pd

    return pd.DataFrame(
        [f.to_dict() for f in r.findings],
        columns=["code", "severity", "engine", "message", "evidence", "fix"],
    )
