"""``eagle3-forensics probe-server URL --engine E --prompts FILE``: a live vLLM or SGLang server's acceptance."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from eagle3_forensics.cli.output import emit_json, error_dict
from eagle3_forensics.views.server import render_server_probe

# The engines `probe-server` measures (eagle3_forensics.probe.server.core.ENGINE_PROBES has one entry
# each; a test keeps the two equal). Listed here so building the parser does not import the probe.
SERVER_ENGINE_CHOICES = ("vllm", "sglang")


def _server_engine(value: str) -> str:
    name = value.partition("==")[0].strip().lower()
    if name not in SERVER_ENGINE_CHOICES:
        raise argparse.ArgumentTypeError(
            f"invalid choice: {value!r} (choose from {', '.join(SERVER_ENGINE_CHOICES)}, optionally ==VERSION)"
        )
    return value


def _stderr_line(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _show_progress(args: argparse.Namespace) -> bool:
    """``--progress``/``--no-progress``, else on when stderr is a terminal."""
    if args.progress is not None:
        return bool(args.progress)
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def run(args: argparse.Namespace) -> int:
    from eagle3_forensics.probe.server.core import probe_server  # heavy: torch (via probe.core)
    from eagle3_forensics.probe.server.result import FAULT_CODES  # heavy: as above

    result = probe_server(
        args.url,
        args.engine,
        args.prompts,
        max_new_tokens=args.max_new_tokens,
        concurrency=args.concurrency,
        timeout=args.timeout,
        retries=args.retries,
        model=args.model,
        drafter=args.drafter,
        target=args.target,
        compare_with=args.compare_with,
        tolerance=args.tolerance,
        launch=args.launch,
        budget=args.budget,
        progress=_stderr_line if _show_progress(args) else None,
    )
    error = None
    if result.faulted:
        first = next(f for f in result.findings if f.code in FAULT_CODES)
        error = error_dict("SERVER_FAULT", f"{first.code}: {first.message}", args.url)
    if args.json:
        emit_json("probe-server", result.to_dict(), result.exit_code, error)
    else:
        print(render_server_probe(result))
    if error is not None:
        sys.stderr.write(f"eagle3-forensics: {error['message']}\n")
    return result.exit_code


def add_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    ps = sub.add_parser(
        "probe-server",
        help="accept-rate probe against a live vLLM or SGLang server (counters "
        "before/after, launch-settings check, gap to an in-process probe)",
        epilog="exit codes: 0 measured, no error finding; 1 no figure or an error finding (status "
        "counters_impossible: the server reports impossible counters; nothing_drafted: the counters did not "
        "move; not_measured: no speculative decoding or a restart mid-run; or an engine gap beyond "
        "--tolerance, aux layers differ); 2 bad arguments or input files (a --launch command the engine "
        "would refuse); 3 an internal error (a bug: please report it); 4 the server could not be probed "
        "(refused, no complete answer within --timeout, --budget spent, HTTP error, malformed answer); "
        "130 interrupted.",
    )
    ps.add_argument("url", help="server base URL, e.g. http://127.0.0.1:8000")
    ps.add_argument(
        "--engine",
        required=True,
        type=_server_engine,
        metavar="ENGINE[==VERSION]",
        help=f"which engine serves URL ({' or '.join(SERVER_ENGINE_CHOICES)}); judged by the release the server "
        "reports (SGLang /server_info version, vLLM /version) unless ==VERSION names one",
    )
    ps.add_argument(
        "--prompts", required=True, help='.jsonl ({"prompt": ...} per line) or one prompt per line'
    )
    ps.add_argument(
        "--max-new-tokens", type=int, default=64, help="new tokens per prompt, EOS ignored (default 64)"
    )
    ps.add_argument("--concurrency", type=int, default=1, help="requests in flight at once (default 1)")
    ps.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds for one HTTP request: connect, send and the whole answer (a server that trickles "
        "is cut off; default 60)",
    )
    ps.add_argument(
        "--budget",
        type=float,
        metavar="SECONDS",
        help="seconds for the whole run: every request, retry and back-off (default 60 + 0.05 × prompts × "
        "--max-new-tokens, 111 s for the 16 demo prompts × 64 tokens)",
    )
    ps.add_argument(
        "--retries",
        type=int,
        default=3,
        help="extra attempts per request on transient faults, with back-off 0.5, 1, 2 ... 5 s (default 3)",
    )
    ps.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="one line on stderr per answered prompt (default: when stderr is a terminal)",
    )
    ps.add_argument("--model", help="vLLM: served model name (default: the first of /v1/models)")
    ps.add_argument(
        "--drafter",
        help="local drafter directory for the aux-layer/diagnose check (default: the path "
        "the server reports, when readable here)",
    )
    ps.add_argument("--target", help="local target directory for the aux-layer check (default: the server's)")
    ps.add_argument(
        "--compare-with",
        metavar="RESULT.json",
        help="an in-process `probe --json` result on the same prompts: report the engine gap per position",
    )
    ps.add_argument(
        "--tolerance",
        type=float,
        default=0.10,
        help="relative acceptance-length gap to --compare-with that is an error (default 0.10)",
    )
    ps.add_argument(
        "--launch",
        metavar="COMMAND",
        help="the command the server was started with, quoted as one argument (vllm serve ... "
        "--speculative-config JSON): its verification settings (rejection_sample_method, draft_sample_method, "
        "quantization, draft_lm_head_quantization, speculative_token_tree) stand in for the ones the server "
        "does not report (vLLM without VLLM_SERVER_DEV_MODE=1)",
    )
    ps.add_argument("--json", action="store_true", help="print exactly one JSON object")
    ps.set_defaults(func=run, extra="server", json_command="probe-server")
