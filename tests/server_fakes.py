"""Small fake vLLM and SGLang servers on 127.0.0.1, and the CLI run that checks a refusal's contract
(tests/unit/test_server_hostile*.py): one JSON object, no traceback, bounded time, no figure on refusal."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import eagle3_forensics.probe.server.core  # noqa: F401 - imported (torch) here, not inside the first timed run
from eagle3_forensics.cli.main import main

Handler = Callable[[BaseHTTPRequestHandler, Any], None]
FAST = ("--timeout", "0.6", "--retries", "1", "--budget", "2.5")
BOUND_S = 3.5  # every case, the command's own start included (not torch's import: above)


# -- a fake server whose routes write whatever they like ----------------------------------------


class Fake:
    """``routes[(method, path)](handler, json_body)`` writes the answer itself (or hangs until the end)."""

    def __init__(self, routes: dict[tuple[str, str], Handler]) -> None:
        self.routes = routes
        self.stop = threading.Event()
        self.hits: dict[tuple[str, str], int] = {}
        fake = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def _do(self, method: str) -> None:
                path = self.path.split("?")[0]
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n)) if n else None
                fake.hits[(method, path)] = fake.hits.get((method, path), 0) + 1
                route = fake.routes.get((method, path))
                try:
                    if route is None:
                        send(self, 404, {"detail": "Not Found"})
                    else:
                        route(self, body)
                except OSError:
                    return  # the probe gave up and closed: expected in the transport cases

            def do_GET(self) -> None:
                self._do("GET")

            def do_POST(self) -> None:
                self._do("POST")

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

            def handle_error(self, request: Any, client_address: Any) -> None:
                return None

        self.httpd = Server(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> Fake:
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def send(h: BaseHTTPRequestHandler, status: int, body: Any, ctype: str = "application/json") -> None:
    data = body if isinstance(body, bytes) else (body if isinstance(body, str) else json.dumps(body)).encode()
    h.send_response(status)
    h.send_header("Content-Type", ctype)
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


# -- vLLM- and SGLang-shaped answers (K = 3; each prompt: 2 verify steps accepting 2 each, 7 tokens) ----

K = 3
STEP = {"drafts": 2, "draft_tokens": 6, "accepted": 4, "per_pos": [2, 2, 0], "generation": 7}
TOKENS = 7


class Vllm:
    """Cumulative counters that move by ``step`` per prompt; values may be NaN, inf or negative."""

    def __init__(self, start: dict[str, Any] | None = None, step: dict[str, Any] | None = None) -> None:
        self.c: dict[str, Any] = {
            "drafts": 100,
            "draft_tokens": 300,
            "accepted": 200,
            "per_pos": [90, 70, 40],
        }
        self.c["generation"] = 500
        self.c.update(start or {})
        self.step = dict(STEP, **(step or {}))

    def metrics(self, h: BaseHTTPRequestHandler, body: Any) -> None:
        lab = 'engine="0",model_name="m"'
        lines = ["# TYPE process_start_time_seconds gauge", "process_start_time_seconds 1.7e9"]
        for name in ("drafts", "draft_tokens", "accepted"):
            metric = "accepted_tokens" if name == "accepted" else name
            lines += [
                f"# TYPE vllm:spec_decode_num_{metric} counter",
                f"vllm:spec_decode_num_{metric}_total{{{lab}}} {self.c[name]}",
            ]
        lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
        for p, v in enumerate(self.c["per_pos"]):
            lines.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{p}"}} {v}')
        lines += [
            "# TYPE vllm:generation_tokens counter",
            f"vllm:generation_tokens_total{{{lab}}} {self.c['generation']}",
        ]
        send(h, 200, "\n".join(lines) + "\n", "text/plain; version=0.0.4")

    def completions(self, h: BaseHTTPRequestHandler, body: Any) -> None:
        for name in ("drafts", "draft_tokens", "accepted", "generation"):
            self.c[name] = self.c[name] + self.step[name]
        self.c["per_pos"] = [a + b for a, b in zip(self.c["per_pos"], self.step["per_pos"], strict=True)]
        send(h, 200, {"choices": [{"text": "x"}], "usage": {"prompt_tokens": 5, "completion_tokens": TOKENS}})

    def routes(self) -> dict[tuple[str, str], Handler]:
        return {
            ("GET", "/v1/models"): lambda h, b: send(h, 200, {"data": [{"id": "m", "root": "m"}]}),
            ("GET", "/metrics"): self.metrics,
            ("POST", "/v1/completions"): self.completions,
        }


def sglang(
    meta: dict[str, Any] | None = None, info: dict[str, Any] | None = None, gauge: str = "0.5"
) -> Fake:
    """An SGLang server answering every prompt with the healthy meta_info, overridden by ``meta``."""
    answer = {
        "completion_tokens": TOKENS,
        "spec_verify_ct": 2,
        "spec_num_correct_drafts": 4,
        "spec_num_proposed_drafts": 6,
        "spec_correct_drafts_histogram": [0, 0, 2, 0],
        **(meta or {}),
    }
    server_info = {
        "model_path": "/m",
        "speculative_algorithm": "EAGLE3",
        "speculative_num_steps": K,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": K + 1,
        "enable_metrics": True,
        "internal_states": [{"avg_spec_accept_length": 3.0}],
        **(info or {}),
    }
    metrics = f"# TYPE sglang:spec_accept_rate gauge\nsglang:spec_accept_rate {gauge}\n"
    return Fake(
        {
            ("GET", "/get_server_info"): lambda h, b: send(h, 200, server_info),
            ("GET", "/metrics"): lambda h, b: send(h, 200, metrics, "text/plain"),
            ("POST", "/generate"): lambda h, b: send(h, 200, {"text": "x", "meta_info": answer}),
        }
    )


# -- running the CLI ------------------------------------------------------------------------------


def probe(
    capsys: pytest.CaptureFixture[str], url: str, engine: str, prompts: Path, *extra: str
) -> tuple[int, dict[str, Any], str]:
    """Run the CLI; assert the refusal contract (one JSON object, no traceback, bounded time)."""
    t0 = time.monotonic()
    code = main(["probe-server", url, "--engine", engine, "--prompts", str(prompts), *FAST, *extra, "--json"])
    took = time.monotonic() - t0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    obj, end = json.JSONDecoder().raw_decode(out)
    assert out[end:].strip() == "", "more than one JSON object on stdout"
    assert took < BOUND_S, f"took {took:.1f} s"
    assert code == obj["exit_code"] and code in (0, 1, 4), code
    if code != 0:
        assert obj["acceptance_length"] is None and obj["acceptance_rate"] is None
    return code, obj, err


def codes(obj: dict[str, Any]) -> list[str]:
    """The warnings and errors (a vLLM fake without /server_info also has LAUNCH_SETTINGS_UNKNOWN, an info)."""
    return [f["code"] for f in obj["findings"] if f["severity"] != "info"]


def assert_impossible(obj: dict[str, Any], *fragments: str) -> None:
    assert obj["status"] == "counters_impossible" and "COUNTERS_IMPOSSIBLE" in codes(obj), obj["findings"]
    f = next(f for f in obj["findings"] if f["code"] == "COUNTERS_IMPOSSIBLE")
    assert f["severity"] == "error" and f["evidence"]["problems"]
    text = json.dumps(f["evidence"])
    for frag in fragments:
        assert frag in f["message"] or frag in text, (frag, f)
