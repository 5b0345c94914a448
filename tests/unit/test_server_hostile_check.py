"""probe-server against hostile servers an independent check of issue 33 found (each failed before its fix).

An internal error from a JSON integer of hundreds or thousands of digits (a count, or a verification
setting); a redirect to ``ftp://``, whose reads no deadline bounded; a ``/metrics`` page parsed for
seconds past the budget; a token tree whose syntax tree took gigabytes; and figures from counters no
run can produce: counts beyond 2^53, a reading impossible since the start, an answer with more
tokens than it asked for, more than the tokens generated allow with K unknown. The contract is
``server_fakes.probe``'s: the documented exit code, one JSON object, no traceback, bounded time.
"""

from __future__ import annotations

import json
import socket
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)

from server_fakes import Fake, Handler, Vllm, assert_impossible, codes, probe, send, sglang

from eagle3_forensics.probe.server.prometheus import MAX_METRIC_LINES

pytestmark = pytest.mark.usefixtures("local_no_proxy")  # the fakes live on 127.0.0.1


def test_a_redirect_to_ftp_is_refused(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    """urllib follows a redirect to ftp://, whose reads the request deadline does not bound (an FTP
    server that trickles held the probe past its --budget 4 until killed at 77 s): refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)

    def away(h: BaseHTTPRequestHandler, body: Any) -> None:
        h.send_response(302)
        h.send_header("Location", f"ftp://127.0.0.1:{sock.getsockname()[1]}/x")
        h.send_header("Content-Length", "0")
        h.end_headers()

    try:
        with Fake({("GET", "/v1/models"): away}) as srv:
            code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    finally:
        sock.close()
    assert code == 4 and codes(obj) == ["SERVER_HTTP_ERROR"]
    assert "not an http(s) URL" in obj["error"]["message"]


def test_metrics_too_long_to_parse_in_time(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    """Under the size limit, but a million short lines would take the text parser half a minute."""
    page = "".join(f'vllm:spec_decode_num_drafts_total{{x="{i}"}} 1\n' for i in range(MAX_METRIC_LINES + 1))
    routes = {**Vllm().routes(), ("GET", "/metrics"): lambda h, b: send(h, 200, page, "text/plain")}
    with Fake(routes) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 4 and codes(obj) == ["SERVER_BAD_RESPONSE"]
    assert "lines of metrics" in obj["error"]["message"]


@pytest.mark.parametrize("digits", [400, 5000], ids=["beyond_float", "beyond_int_parsing"])
def test_a_count_with_hundreds_of_digits(
    capsys: pytest.CaptureFixture[str], prompts: Path, digits: int
) -> None:
    """JSON bounds no number: 400 digits overflowed float(), 5000 Python would not read (internal errors)."""
    answer = b'{"usage": {"prompt_tokens": 5, "completion_tokens": ' + b"9" * digits + b"}}"
    routes = {**Vllm().routes(), ("POST", "/v1/completions"): lambda h, b: send(h, 200, answer)}
    with Fake(routes) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 1
    assert_impossible(obj, "completion_tokens[0]", "not finite")


def server_info(spec: dict[str, Any]) -> Handler:
    """vLLM's /server_info (VLLM_SERVER_DEV_MODE=1) with this speculative config; BIG is 400 digits."""
    text = json.dumps({"vllm_config": {"speculative_config": {"method": "eagle3", **spec}}})
    return lambda h, b: send(h, 200, text.replace('"BIG"', "9" * 400))


@pytest.mark.parametrize(
    "spec",
    [
        {"speculative_token_tree": "[" + "(0,), " * 600_000 + "]"},  # 3.6 MB: gigabytes of syntax tree
        {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": ["BIG"]},
        {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": "BIG"},
        {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.5] * 500_000},
    ],
    ids=["huge_tree", "rate_400_digits", "length_400_digits", "half_a_million_rates"],
)
def test_vllm_absurd_verification_settings(
    capsys: pytest.CaptureFixture[str], prompts: Path, spec: dict[str, Any]
) -> None:
    """Settings are judged, not measured: no internal error, bounded time, and the figure stands."""
    with Fake({**Vllm().routes(), ("GET", "/server_info"): server_info(spec)}) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 0 and obj["status"] == "measured", obj["findings"]
    assert len(json.dumps(obj)) < 100_000


def test_vllm_more_than_generated_without_per_position_counters(
    capsys: pytest.CaptureFixture[str], prompts: Path
) -> None:
    """K unknown (no per-position counters, no /server_info): draft tokens per verify step stand in."""
    fake = Vllm({"per_pos": []}, {"drafts": 6, "draft_tokens": 18, "accepted": 14, "per_pos": []})
    with Fake(fake.routes()) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 1
    assert_impossible(obj, "tokens generated", "K 3")


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_counts_beyond_2_53(capsys: pytest.CaptureFixture[str], prompts: Path, engine: str) -> None:
    """Past 2^53 a float64 cannot count by one: deltas would be rounding (2^70 + 8 − 2^70 = 0)."""
    big = 2**70
    fake = (
        Fake(Vllm({"drafts": big, "draft_tokens": 3 * big, "accepted": big, "per_pos": [big, 0, 0]}).routes())
        if engine == "vllm"
        else sglang({"spec_verify_ct": 1e308, "spec_num_proposed_drafts": 3e308 / 10})
    )
    with fake as srv:
        code, obj, _ = probe(capsys, srv.url, engine, prompts)
    assert code == 1
    assert_impossible(obj, "2^53")


def test_vllm_impossible_since_the_start(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    """Counters that never move, but one reading already has more accepted than drafted since the start."""
    still = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_pos": [0, 0, 0]}
    with Fake(Vllm({"accepted": 900}, still).routes()) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
        assert srv.hits.get(("POST", "/v1/completions"), 0) == 0  # refused before any load
    assert code == 1
    assert_impossible(obj, "since the server started", "900 accepted of 300 drafted")


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_more_tokens_than_asked_for(capsys: pytest.CaptureFixture[str], prompts: Path, engine: str) -> None:
    """An answer cannot hold more tokens than its max_tokens; the counters alone would still fit."""
    if engine == "vllm":
        usage = {"usage": {"prompt_tokens": 5, "completion_tokens": 10**6}}
        fake = Vllm(step={"generation": 10**6})
        srv_cm = Fake({**fake.routes(), ("POST", "/v1/completions"): lambda h, b: send(h, 200, usage)})
    else:
        srv_cm = sglang({"completion_tokens": 10**6})
    with srv_cm as srv:
        code, obj, _ = probe(capsys, srv.url, engine, prompts, "--max-new-tokens", "8")
    assert code == 1
    assert_impossible(obj, "at most 8", "1000000")


GENERATION_1 = {  # spec_verify_ct and spec_accept_token_num only: no proposed drafts, no histogram
    "spec_num_correct_drafts": None,
    "spec_num_proposed_drafts": None,
    "spec_correct_drafts_histogram": None,
    "spec_accept_token_num": 4,
}


@pytest.mark.parametrize(("verify", "measured"), [(2, True), (20, False)], ids=["possible", "impossible"])
def test_sglang_k_unknown(
    capsys: pytest.CaptureFixture[str], prompts: Path, verify: int, measured: bool
) -> None:
    """No server_args and no proposed drafts: K is unknown, so proposed drafts are unknown, not 0 (that
    refused a possible server); verify steps beyond the tokens generated are still impossible."""
    fake = sglang({**GENERATION_1, "spec_verify_ct": verify})
    fake.routes.pop(("GET", "/get_server_info"))
    with fake as srv:
        code, obj, _ = probe(capsys, srv.url, "sglang", prompts)
    if measured:
        assert code == 0 and obj["status"] == "measured", obj["findings"]
        assert obj["acceptance_length"] == 3.0 and obj["acceptance_rate"] is None  # no rate without proposed
    else:
        assert code == 1
        assert_impossible(obj, "K unknown", "40 verify steps")


def test_vllm_accepted_frozen_while_positions_move(capsys: pytest.CaptureFixture[str], prompts: Path) -> None:
    """The total stays at 0 while the per-position counters, which count the same drafts in the same
    step, rise by 8: 1.0 was measured beside a warning. Refused."""
    fake = Vllm(start={"accepted": 0, "per_pos": [0, 0, 0]}, step={"accepted": 0})
    with Fake(fake.routes()) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 1
    assert_impossible(
        obj, "Σ accepted per position = num_accepted_tokens", "8 accepted by position, 0 in all"
    )


def test_vllm_positions_a_step_apart_stay_a_warning(
    capsys: pytest.CaptureFixture[str], prompts: Path
) -> None:
    """A scrape between the two increments of one step: the figure stands, with the warning."""
    fake = Vllm(step={"accepted": 4, "per_pos": [2, 1, 0]})
    with Fake(fake.routes()) as srv:
        code, obj, _ = probe(capsys, srv.url, "vllm", prompts)
    assert code == 0 and obj["status"] == "measured"
    assert codes(obj) == ["COUNTERS_INCONSISTENT"]
