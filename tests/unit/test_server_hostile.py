"""probe-server against small hostile servers on 127.0.0.1: each run ends cleanly, in bounded time.

Every case runs the CLI (``probe-server ... --json``) with small deadlines and checks the contract
of a refusal: its documented exit code, exactly one JSON object on stdout, no traceback, the run
over within a few seconds, and no acceptance figure from numbers no run can produce. Transport
cases (a server that never answers, one that trickles a byte at a time, an endless body, a huge
header, a redirect loop) and data cases (NaN, infinite, negative and contradictory counters,
counters that never move) for both engines' forms (vLLM's Prometheus counters, SGLang's
``meta_info``, ``/get_server_info`` and ``/metrics`` gauges). A healthy fake of each engine is the
control: the same fakes measure when nothing is wrong.
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)

from server_fakes import (
    FAST,
    Fake,
    K,
    Vllm,
    assert_impossible,
    codes,
    probe,
    send,
    sglang,
)

from eagle3_forensics.cli.main import main
from eagle3_forensics.probe.server.counters import TOKENS_TOLERANCE
from eagle3_forensics.probe.server.http import MAX_RESPONSE_BYTES

# -- fixtures ------------------------------------------------------------------------------------


pytestmark = pytest.mark.usefixtures("local_no_proxy")  # the fakes live on 127.0.0.1


# -- the controls ---------------------------------------------------------------------------------


def test_healthy_vllm_is_measured(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    with Fake(Vllm().routes()) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 0 and obj["status"] == "measured", obj["findings"]
    assert obj["acceptance_length"] == pytest.approx(1 + 8 / 4) and obj["acceptance_rate"] == pytest.approx(
        8 / 12
    )


def test_healthy_sglang_is_measured(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    with sglang() as srv:
        code, obj, _ = probe(capsys, srv.url, "sglang", prompts)
    assert code == 0 and obj["status"] == "measured", obj["findings"]
    assert obj["acceptance_length"] == pytest.approx(3.0)


# -- transport: hangs, trickles, floods ------------------------------------------------------------


def test_accepts_and_never_answers(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    def hang(h: BaseHTTPRequestHandler, body: Any) -> None:
        srv.stop.wait(10)

    with Fake({("GET", "/v1/models"): hang}) as srv:
        code, obj, err = probe(capsys, srv.url, "vllm", prompts)
        assert srv.hits[("GET", "/v1/models")] == 2  # retried once, with back-off
    assert code == 4 and obj["status"] == "server_fault" and codes(obj) == ["SERVER_TIMEOUT"]
    assert "GET /v1/models" in obj["findings"][0]["message"] and err.count("\n") == 1


def test_a_listener_that_never_accepts(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    """The kernel completes the handshake from the backlog; nobody ever reads."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        code, obj, _ = probe(capsys, f"http://127.0.0.1:{sock.getsockname()[1]}", "sglang", prompts)
    finally:
        sock.close()
    assert code == 4 and codes(obj) == ["SERVER_TIMEOUT"]


@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_byte_at_a_time_is_cut_off(capsys: pytest.CaptureFixture[str], prompts: Path, where: str) -> None:
    """Each byte arrives well within the per-read timeout; the request's deadline still ends it."""

    def trickle(h: BaseHTTPRequestHandler, body: Any) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        if where == "body":
            h.wfile.write(head)
            head = b'{"data": [' + b" " * 99990
        for byte in head:
            if srv.stop.wait(0.1):
                return
            h.wfile.write(bytes([byte]))
            h.wfile.flush()

    with Fake({("GET", "/v1/models"): trickle}) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts, "--retries", "0")
    assert code == 4 and codes(obj) == ["SERVER_TIMEOUT"]
    assert "whole answer" in obj["findings"][0]["message"]


def test_a_tls_handshake_that_trickles(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    """The deadline holds before the first HTTP byte too: a handshake record sent a byte at a time."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    stop = threading.Event()

    def serve() -> None:
        conn, _ = sock.accept()
        conn.recv(4096)  # the ClientHello
        for byte in b"\x16\x03\x03\x10\x00" + b"\x02" * 4096:
            if stop.wait(0.05):
                break
            try:
                conn.send(bytes([byte]))
            except OSError:
                break
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        code, obj, _ = probe(
            capsys, f"https://127.0.0.1:{sock.getsockname()[1]}", "vllm", prompts, "--retries", "0"
        )
    finally:
        stop.set()
        sock.close()
    assert code == 4 and codes(obj) == ["SERVER_TIMEOUT"]


def test_the_run_budget_ends_a_slow_run(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    """Each answer within --timeout, but together beyond --budget: the message names the budget."""
    fake = Vllm()

    def slow(h: BaseHTTPRequestHandler, body: Any) -> None:
        if not srv.stop.wait(0.7):
            fake.completions(h, body)

    with Fake({**fake.routes(), ("POST", "/v1/completions"): slow}) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts, "--timeout", "2", "--budget", "1")
    assert code == 4 and codes(obj) == ["SERVER_TIMEOUT"]
    f = obj["findings"][0]
    assert (
        f["evidence"]["budget_s"] == 1
        and "--budget" in f["message"]
        and "POST /v1/completions" in f["message"]
    )


def test_an_endless_body_stops_at_the_limit(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    chunk = b"# " + b"x" * (1 << 20) + b"\n"

    def endless(h: BaseHTTPRequestHandler, body: Any) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/plain")
        h.end_headers()
        while not srv.stop.is_set():
            h.wfile.write(chunk)

    with Fake({**Vllm().routes(), ("GET", "/metrics"): endless}) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts, "--timeout", "2")
    assert code == 4 and codes(obj) == ["SERVER_BAD_RESPONSE"]
    assert obj["findings"][0]["evidence"]["limit_bytes"] == MAX_RESPONSE_BYTES


@pytest.mark.parametrize(
    "answer",
    [
        b"<html><body>502 Bad Gateway</body></html>",
        b'{"data": [{"id": "m"',
        b"\xff\xfe not utf-8",
        b"[" * 100000,
    ],
    ids=["html", "truncated_json", "not_utf8", "deep_nesting"],
)
def test_not_json(capsys: pytest.CaptureFixture[str], prompts: Path, answer: bytes) -> None:
    with Fake({("GET", "/v1/models"): lambda h, b: send(h, 200, answer, "text/html")}) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 4 and codes(obj) == ["SERVER_BAD_RESPONSE"]


def test_a_redirect_loop(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    def loop(h: BaseHTTPRequestHandler, body: Any) -> None:
        h.send_response(302)
        h.send_header("Location", "/v1/models")
        h.send_header("Content-Length", "0")
        h.end_headers()

    with Fake({("GET", "/v1/models"): loop}) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
        assert srv.hits[("GET", "/v1/models")] <= 12  # urllib's bound, not a loop
    assert code == 4 and codes(obj) == ["SERVER_HTTP_ERROR"]


@pytest.mark.parametrize("shape", ["one_line", "many_lines"])
def test_a_huge_header(capsys: pytest.CaptureFixture[str], prompts: Path, shape: str) -> None:
    def huge(h: BaseHTTPRequestHandler, body: Any) -> None:
        h.wfile.write(b"HTTP/1.1 200 OK\r\n")
        if shape == "one_line":
            h.wfile.write(b"X-Big: " + b"a" * (10 << 20) + b"\r\n\r\n")
        else:
            h.wfile.write(b"".join(b"X-%d: a\r\n" % i for i in range(200_000)) + b"\r\n")

    with Fake({("GET", "/v1/models"): huge}) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
        assert srv.hits[("GET", "/v1/models")] == 1  # not an HTTP answer: not retried
    assert code == 4 and codes(obj) == ["SERVER_BAD_RESPONSE"]


# -- data: counters no run can produce -------------------------------------------------------------


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf"])
def test_vllm_nonfinite_counters(capsys: pytest.CaptureFixture[str], prompts: Path, value: str) -> None:
    with Fake(Vllm({"accepted": value}).routes()) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
        assert srv.hits.get(("POST", "/v1/completions"), 0) == 0  # refused before any load
    assert code == 1
    assert_impossible(obj, "num_accepted_tokens", "not finite")


def test_vllm_nonfinite_after_the_prompts(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    fake = Vllm(step={"per_pos": [2, 2, float("nan")]})
    with Fake(fake.routes()) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 1
    assert_impossible(obj, "num_accepted_tokens_per_pos[2]", "nan")


def test_vllm_accepted_beyond_drafted(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    """The issue's case: 2.52 and an acceptance rate of 1.267 were reported, exit 0."""
    fake = Vllm(step={"drafts": 2, "draft_tokens": 3, "accepted": 4, "per_pos": [2, 2, 0]})
    with Fake(fake.routes()) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 1
    assert_impossible(obj, "num_accepted_tokens ≤ num_draft_tokens", "8 accepted of 6 drafted")


def test_vllm_drafts_without_draft_tokens(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    fake = Vllm(step={"draft_tokens": 0, "accepted": 0, "per_pos": [0, 0, 0]})
    with Fake(fake.routes()) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 1
    assert_impossible(obj, "num_drafts > 0 needs num_draft_tokens > 0")


def test_vllm_more_than_the_tokens_generated(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    """Verify steps and accepted drafts commit tokens; 20 per prompt cannot come from 7 generated."""
    fake = Vllm(step={"drafts": 6, "draft_tokens": 18, "accepted": 14, "per_pos": [6, 5, 3]})
    with Fake(fake.routes()) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 1
    assert_impossible(obj, "tokens generated", f"{TOKENS_TOLERANCE:.0%}")


def test_vllm_within_the_token_tolerance_is_measured(
    capsys: pytest.CaptureFixture[str], prompts: Path
) -> None:
    """The bound's edge: the last verify step of each prompt cut by the token budget (K − 1 drafts over)."""
    fake = Vllm(step={"drafts": 3, "draft_tokens": 9, "accepted": 5, "per_pos": [3, 2, 0]})
    with Fake(fake.routes()) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 0 and obj["status"] == "measured", obj["findings"]


def test_vllm_negative_counters_rising_plausibly(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    fake = Vllm({"drafts": -100, "draft_tokens": -300, "accepted": -200, "per_pos": [-90, -70, -40]})
    with Fake(fake.routes()) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 1
    assert_impossible(obj, "negative", "-200")


def test_vllm_fractional_usage(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    fake = Vllm()

    def answer(h: BaseHTTPRequestHandler, body: Any) -> None:
        send(h, 200, {"usage": {"completion_tokens": float("nan"), "prompt_tokens": 5}})

    with Fake({**fake.routes(), ("POST", "/v1/completions"): answer}) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 1
    assert_impossible(obj, "completion_tokens[0]")


def test_vllm_counters_that_never_move(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    """The issue's case: an acceptance length of 1.0 was reported beside NO_DRAFTS, exit 0."""
    fake = Vllm(step={"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_pos": [0, 0, 0]})
    with Fake(fake.routes()) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 1 and obj["status"] == "nothing_drafted" and codes(obj) == ["NO_DRAFTS"]


def test_vllm_counters_going_backwards(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    fake = Vllm(step={"drafts": -50})
    with Fake(fake.routes()) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 1 and obj["status"] == "not_measured" and codes(obj) == ["COUNTERS_WENT_BACKWARDS"]


def test_vllm_without_speculative_decoding(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    def metrics(h: BaseHTTPRequestHandler, body: Any) -> None:
        send(h, 200, "# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total 5\n", "text/plain")

    with Fake({**Vllm().routes(), ("GET", "/metrics"): metrics}) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 1 and obj["status"] == "not_measured" and codes(obj) == ["NO_SPEC_DECODING"]


def test_vllm_a_position_label_far_out(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    """A per-position label of 10**12 would size a list: refused as a malformed answer."""

    def metrics(h: BaseHTTPRequestHandler, body: Any) -> None:
        text = "".join(
            f"vllm:spec_decode_num_{n}_total 1\n" for n in ("drafts", "draft_tokens", "accepted_tokens")
        )
        send(
            h, 200, text + 'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1000000000000"} 1\n'
        )

    with Fake({**Vllm().routes(), ("GET", "/metrics"): metrics}) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 4 and codes(obj) == ["SERVER_BAD_RESPONSE"]


@pytest.mark.parametrize(
    "meta",
    [
        {"spec_num_correct_drafts": float("nan")},
        {"completion_tokens": float("inf")},
        {"spec_verify_ct": -2},
        {"spec_correct_drafts_histogram": [0, 0, 2.5, 0]},
    ],
    ids=["nan_accepted", "inf_completion", "negative_verify", "fractional_histogram"],
)
def test_sglang_impossible_meta_info(
    capsys: pytest.CaptureFixture[str], prompts: Path, meta: dict[str, Any]
) -> None:
    with sglang(meta) as srv:
        code, obj, _ = probe(capsys, srv.url, "sglang", prompts)
    assert code == 1
    assert_impossible(
        obj, "request 1", next(iter(meta)).replace("spec_correct_drafts_histogram", "histogram")
    )


def test_sglang_accepted_beyond_proposed(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    with sglang({"spec_num_correct_drafts": 8, "spec_num_proposed_drafts": 6}) as srv:
        code, obj, _ = probe(capsys, srv.url, "sglang", prompts)
    assert code == 1
    assert_impossible(obj, "accepted drafts ≤ proposed drafts", "8 accepted of 6 proposed")


def test_sglang_verify_without_proposed(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    with sglang(
        {
            "spec_num_correct_drafts": 0,
            "spec_num_proposed_drafts": 0,
            "spec_correct_drafts_histogram": [2, 0, 0, 0],
        }
    ) as srv:
        code, obj, _ = probe(capsys, srv.url, "sglang", prompts)
    assert code == 1
    assert_impossible(obj, "spec_verify_ct > 0 exactly when proposed drafts > 0")


@pytest.mark.parametrize(
    ("info", "gauge", "fragment"),
    [
        ({"internal_states": [{"avg_spec_accept_length": float("nan")}]}, "0.5", "avg_spec_accept_length[0]"),
        ({"internal_states": [{"avg_spec_accept_length": -1.5}]}, "0.5", "-1.5"),
        ({}, "NaN", "sglang:spec_accept_rate"),
        ({}, "1.7", "at most 1"),
    ],
    ids=["avg_nan", "avg_negative", "gauge_nan", "rate_above_one"],
)
def test_sglang_impossible_reported_figures(
    capsys: pytest.CaptureFixture[str], prompts: Path, info: dict[str, Any], gauge: str, fragment: str
) -> None:
    with sglang(info=info, gauge=gauge) as srv:
        code, obj, _ = probe(capsys, srv.url, "sglang", prompts)
        assert srv.hits.get(("POST", "/generate"), 0) == 0  # refused before any load
    assert code == 1
    assert_impossible(obj, fragment)


def test_sglang_nothing_drafted(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    """Speculation configured, no answer with a verify step: no figure, and the status says so."""
    with sglang({"spec_verify_ct": 0, "spec_num_correct_drafts": 0, "spec_num_proposed_drafts": 0}) as srv:
        code, obj, _ = probe(capsys, srv.url, "sglang", prompts)
    assert code == 1 and obj["status"] == "nothing_drafted" and "NO_DRAFTS" in codes(obj)


def test_sglang_a_count_that_is_not_a_number(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    with sglang({"spec_verify_ct": "2"}) as srv:
        code, obj, _ = probe(capsys, srv.url, "sglang", prompts)
    assert (
        code == 4
        and codes(obj) == ["SERVER_BAD_RESPONSE"]
        and "spec_verify_ct" in obj["findings"][0]["message"]
    )


def test_sglang_a_launch_setting_far_out(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    """speculative_num_steps 10**12 would size the per-position lists: not taken as K."""
    with sglang(info={"speculative_num_steps": 10**12, "speculative_num_draft_tokens": 10**12}) as srv:
        code, obj, _ = probe(capsys, srv.url, "sglang", prompts)
    assert code == 0 and obj["k"] == K  # from the histogram's length


# -- the CLI surface ------------------------------------------------------------------------------


def test_progress_lines_on_stderr(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    with Fake(Vllm().routes()) as srv:
        code, _, err = probe(capsys, srv.url, "vllm", prompts, "--progress")
    assert code == 0
    lines = [ln for ln in err.splitlines() if ln.startswith("probe-server:")]
    assert [ln.split(",")[0] for ln in lines] == [
        "probe-server: 1/2 prompts answered",
        "probe-server: 2/2 prompts answered",
    ]
    assert all("2.5 s budget" in ln for ln in lines)


def test_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe-server", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for fragment in (
        "0 measured",
        "1 no figure",
        "counters_impossible",
        "nothing_drafted",
        "2 bad arguments",
        "3 an internal error",
        "4 the server could not be probed",
        "--budget",
    ):
        assert fragment in text, fragment


@pytest.mark.parametrize("args", [("--budget", "0"), ("--budget", "nan"), ("--timeout", "inf")])
def test_bad_deadlines_are_bad_arguments(
    capsys: pytest.CaptureFixture[str], prompts: Path, args: tuple[str, str]
) -> None:
    code = main(["probe-server", "http://127.0.0.1:9", "--engine", "vllm", "--prompts", str(prompts), *args])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("start", "step", "why"),
    [
        ({"accepted": "NaN"}, {}, "the server reports impossible counters"),
        ({}, {"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_pos": [0, 0, 0]}, "nothing was drafted"),
    ],
    ids=["impossible", "nothing_drafted"],
)
def test_the_text_view_says_why_there_is_no_figure(
    capsys: pytest.CaptureFixture[str], prompts: Path, start: dict[str, Any], step: dict[str, Any], why: str
) -> None:
    with Fake(Vllm(start, step).routes()) as srv:
        code = main(["probe-server", srv.url, "--engine", "vllm", "--prompts", str(prompts), *FAST])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in out + err
    assert f"no acceptance measured: {why}" in out and "acceptance length " not in out
