"""Live accept-rate probe against a running vLLM or SGLang server (``eagle3-forensics probe-server``).

This module holds the entry point and the drafter check; the parts live beside it: :mod:`.http`
(client, retries, faults), :mod:`.prometheus` (metrics text), :mod:`.vllm` and :mod:`.sglang` (one
module per engine), :mod:`.result` (:class:`~.result.ServerProbeResult`), :mod:`.compare` (the gap to
an in-process probe); :mod:`eagle3_forensics.views.server` renders the result.

The in-process :func:`eagle3_forensics.probe.core.probe` says what acceptance a drafter *should*
deliver; this module measures what a serving engine *does* deliver, on the same prompts, with
greedy sampling (temperature 0, EOS ignored, a fixed budget of new tokens per prompt), and
returns the same :class:`~eagle3_forensics.probe.core.ProbeResult` (a subclass adding the server's
own figures, findings and an optional comparison with an in-process result).

* **vLLM**: ``/metrics`` is read before and after the prompts are sent through the
  OpenAI-compatible ``/v1/completions`` endpoint, parsed with ``prometheus_client``'s text
  parser, and the deltas of ``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``,
  ``..._num_accepted_tokens`` and ``..._num_accepted_tokens_per_pos`` give the acceptance
  (``docs/reference/acceptance.md`` §2.2). A counter that goes backwards, or a changed
  ``process_start_time_seconds``, means the server restarted mid-run: no numbers are reported.
* **SGLang**: ``/generate`` returns per-request ``meta_info``; all three generations of field
  names are read (``spec_accept_token_num`` → ``spec_accepted_drafts`` → ``spec_num_correct_drafts``
  and the matching proposed-draft and histogram names, ``docs/reference/acceptance.md`` §2.3). Sums over
  requests are taken before dividing (a ratio of sums, never a mean of per-request ratios).
  ``/get_server_info`` (``avg_spec_accept_length``) and the ``/metrics`` gauges are reported
  beside, each labelled with its convention.
* **Launch settings** are read from what the server reports (vLLM ``/v1/models``, ``/metrics``
  and, when the server runs with ``VLLM_SERVER_DEV_MODE=1``, ``/server_info``; SGLang's
  ``server_args``) and normalised across engines: a chain of K drafts is vLLM
  ``num_speculative_tokens = K`` ⇔ SGLang ``num_steps K, topk 1, num_draft_tokens K+1``
  (``docs/reference/acceptance.md`` §2.4). When the drafter directory is readable here, its aux-layer ids are
  checked the way :mod:`eagle3_forensics.checks.diagnose` reads them for that engine.

Faults (connection refused, timeouts, HTTP errors, malformed JSON or metrics, a server without
speculative decoding, a restart mid-run) become findings and an exit code, never a traceback.
Each request must finish, connect to last byte, within ``timeout``; the whole run within ``budget``.
Requests are retried a bounded number of times with back-off: idempotent reads on any transient
fault, generation requests only when the server refused the connection or answered 429/503 (the
request was not processed, so the counters are not double-counted). Every number the server reports
is checked where it enters (:mod:`.counters`): impossible counters are ``COUNTERS_IMPOSSIBLE`` and
no figure, counters that never move are ``NO_DRAFTS`` and no figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eagle3_forensics.checks import Context
from eagle3_forensics.checks.aux_layers import trained_default, trained_ids
from eagle3_forensics.checks.diagnose import Diagnosis, diagnose
from eagle3_forensics.engines import ENGINE_RELEASES, release_label, resolve_release, split_spec
from eagle3_forensics.engines.launch import LaunchSettings, launch_rules_for, read_launch
from eagle3_forensics.engines.rules import EngineRules
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.findings import Severity
from eagle3_forensics.io.checkpoint import open_checkpoint
from eagle3_forensics.io.launch import split_command
from eagle3_forensics.io.target import open_target
from eagle3_forensics.probe.core import ProbeResult, probe, read_prompts
from eagle3_forensics.probe.server.compare import DEFAULT_TOLERANCE, attach_comparison, load_reference
from eagle3_forensics.probe.server.http import HttpClient, ServerFault, normalise_url
from eagle3_forensics.probe.server.result import SERVER_CONVENTIONS, ServerProbeResult, new_result
from eagle3_forensics.probe.server.sglang import probe_sglang
from eagle3_forensics.probe.server.verify import judge_verify
from eagle3_forensics.probe.server.vllm import probe_vllm
from eagle3_forensics.repair.next_steps import StepAction, diagnose_command, repair_out

MAX_RETRIES = 10
# The run budget's default: a floor for the handful of small reads, plus time for every requested token at
# 20 tokens/s, a floor 14x below the in-process greedy speed measured on the demo models (276.5 tokens/s,
# docs/benchmarks.md) and far below any GPU server; 16 demo prompts x 64 tokens get 111 s.
BUDGET_BASE_S = 60.0
BUDGET_PER_TOKEN_S = 0.05

Progress = Callable[[int, int], None]

# One measuring function per engine, all with the same signature: (result, client, prompts,
# max_new_tokens, concurrency, model, progress). A new engine is a module beside these and one entry here.
ENGINE_PROBES: dict[
    str,
    Callable[[ServerProbeResult, HttpClient, Sequence[str], int, int, str | None, Progress | None], None],
] = {
    "vllm": probe_vllm,
    "sglang": probe_sglang,
}
SERVER_ENGINES: tuple[str, ...] = tuple(ENGINE_PROBES)


def default_budget(prompts: int, max_new_tokens: int) -> float:
    """Seconds the whole run may take unless ``budget`` says otherwise (see ``BUDGET_PER_TOKEN_S``)."""
    return BUDGET_BASE_S + BUDGET_PER_TOKEN_S * prompts * max_new_tokens


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
    launch: str | None = None,
    budget: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> ServerProbeResult:
    """Measure a live server's acceptance on ``prompts`` (greedy, ``max_new_tokens`` each).

    Server faults become findings on the result (see :attr:`ServerProbeResult.exit_code`);
    only unusable arguments (a missing prompts file, a bad URL, an unreadable ``compare_with``)
    raise :class:`~eagle3_forensics.errors.UnusableInputError`.

    ``drafter``/``target``: local directories used for the aux-layer and diagnose checks when the
    server does not report a readable drafter path (vLLM without ``/server_info``) or to override it.
    ``launch``: the command the server was started with; its verification settings stand in for the
    ones a server does not report (vLLM without ``/server_info``).
    ``timeout``: seconds for one request, connect to last byte; ``budget``: seconds for every request of
    the run together (default :func:`default_budget`); either one running out is ``SERVER_TIMEOUT``.
    ``progress``: called with one line per answered prompt.
    """
    engine, asked = split_spec(engine)
    if engine not in SERVER_ENGINES:
        raise BadArgumentsError(f"unknown server engine {engine!r}; choose from {', '.join(SERVER_ENGINES)}")
    if asked is not None:
        resolve_release(f"{engine}=={asked}")  # an unknown release is bad arguments before any request
    base = normalise_url(url)
    _check_numbers(max_new_tokens, concurrency, retries, timeout, budget, tolerance)
    texts = read_prompts(prompts) if isinstance(prompts, (str, Path)) else list(prompts)
    if not texts or not all(isinstance(t, str) and t for t in texts):
        raise UnusableInputError("prompts must be non-empty strings")
    reference = load_reference(compare_with) if compare_with is not None else None
    launched = _read_launch(launch, engine, asked) if launch is not None else None
    run_budget = float(budget) if budget is not None else default_budget(len(texts), max_new_tokens)
    http = client or HttpClient(base, timeout=float(timeout), retries=retries, budget=run_budget)
    r = new_result(base, engine, len(texts), max_new_tokens)
    r.server = {
        "url": base,
        "engine": engine,
        "concurrency": concurrency,
        "timeout_s": float(timeout),
        "budget_s": http.budget,
        "retries": retries,
    }
    try:
        ENGINE_PROBES[engine](r, http, texts, max_new_tokens, concurrency, model, _progress(http, progress))
    except ServerFault as fault:
        r.measured = False
        r.add(fault.code, Severity.ERROR, str(fault), fix=_FAULT_FIX[fault.code], **fault.evidence)
    r.server["http"] = {"requests": http.requests, "retries": http.retried, "seconds": round(http.elapsed, 3)}
    release = _server_release(r, engine, asked)
    # before any comparison: a lossy verification makes the acceptance not the drafter's
    judge_verify(
        r,
        r.reported_spec,
        r.reported_spec_source,
        (launched.speculative_config or {}) if launched is not None else None,
        "--launch" if launched is not None else None,
    )
    if launched is not None:
        r.server["launch_command"] = launched.to_dict()
    if r.server.get("launch") is not None and not r.faulted:
        _check_drafter(r, drafter, target, release)
    if reference is not None and r.measured:
        attach_comparison(r, reference, tolerance)
    return r


def _check_numbers(
    max_new_tokens: int,
    concurrency: int,
    retries: int,
    timeout: float,
    budget: float | None,
    tolerance: float,
) -> None:
    """The numeric arguments, before any request (bad ones are unusable input, exit 2)."""
    for name, value, lo in (
        ("max_new_tokens", max_new_tokens, 1),
        ("concurrency", concurrency, 1),
        ("retries", retries, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            raise UnusableInputError(f"{name} must be an integer >= {lo}, got {value!r}")
    if retries > MAX_RETRIES:
        raise UnusableInputError(f"retries must be at most {MAX_RETRIES}, got {retries}")
    for name, seconds in (("timeout", timeout), ("budget", budget)):
        if name == "budget" and seconds is None:
            continue
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, (int, float))
            or not seconds > 0
            or not math.isfinite(seconds)
        ):
            raise UnusableInputError(f"{name} must be a positive number of seconds, got {seconds!r}")
    if not (isinstance(tolerance, (int, float)) and 0 <= tolerance < 10):
        raise UnusableInputError(f"tolerance must be a fraction such as 0.1, got {tolerance!r}")


def _progress(http: HttpClient, line: Callable[[str], None] | None) -> Progress | None:
    if line is None:
        return None

    def report(done: int, total: int) -> None:
        budget = "" if http.budget is None else f" of the {http.budget:g} s budget"
        line(f"probe-server: {done}/{total} prompts answered, {http.elapsed:.1f} s{budget}")

    return report


_FAULT_FIX = {
    "SERVER_UNREACHABLE": "Check the URL and that the server is up (GET /health); a server that died mid-run "
    "(e.g. an engine crash on the first request) shows here too: read its log.",
    "SERVER_TIMEOUT": "Check the server's load and health; if it is only slow, raise --timeout (one request) or "
    "--budget (the whole run), or lower --max-new-tokens or the number of prompts.",
    "SERVER_HTTP_ERROR": "Read the server log for the cause (a 500 on the first request is often an engine "
    "crash, e.g. a d2t mapping draft ids outside the target vocabulary).",
    "SERVER_BAD_RESPONSE": "Check that the URL points at the engine named by --engine (and not at a proxy or "
    "another service).",
}


def _read_launch(command: str, engine: str, asked: str | None) -> LaunchSettings:
    """``--launch``: the serving command as the engine reads it (the asked release, else the newest;
    the vLLM tables read ``--speculative-config`` alike). Bad commands are bad arguments (exit 2)."""
    rules = resolve_release(f"{engine}=={asked}") if asked is not None else ENGINE_RELEASES[engine][-1]
    return read_launch(split_command(command), launch_rules_for(rules), Path.cwd())


def _server_release(r: ServerProbeResult, engine: str, asked: str | None) -> EngineRules:
    """The release the server is judged by: the one asked for, else the one the server reports, else the newest."""
    reported = r.server.get("version")
    note = None
    if asked is not None:
        release = resolve_release(f"{engine}=={asked}")
        note = "asked on the command line"
    elif isinstance(reported, str) and reported:
        try:
            release = resolve_release(f"{engine}=={reported}")
            note = f"the server reports version {reported}"
        except BadArgumentsError as exc:
            release = ENGINE_RELEASES[engine][-1]
            note = f"the server reports version {reported}, which no table describes ({exc}); judged by the newest"
    else:
        release = ENGINE_RELEASES[engine][-1]
        note = "the server reports no version; judged by the newest release described"
    r.server["release"] = {"judged_by": release_label(release), "why": note, "reported_version": reported}
    return release


def _spec(release: EngineRules) -> str:
    return release.name if release.requested is None else f"{release.name}=={release.requested}"


def _check_drafter(
    r: ServerProbeResult, drafter: str | Path | None, target: str | Path | None, release: EngineRules
) -> None:
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
    engine = r.server_engine
    try:
        ckpt = open_checkpoint(path)
        ctx = Context(
            ckpt,
            open_target(tpath) if tpath is not None else None,
            explicit_engines=True,
            releases=[release],
        )
        trained, trained_field = trained_ids(ctx)
        reading = ctx.aux(engine)
    except UnusableInputError as exc:
        r.add(
            "DRAFTER_NOT_READABLE",
            Severity.INFO,
            f"The drafter {str(path)!r} cannot be read: {exc}",
            path=str(path),
        )
        return
    n = ctx.target_layers
    rules = ctx.rules(engine)
    trained_eff = trained if trained is not None else trained_default(ctx)
    read_eff = reading.captured
    aux = {
        "drafter_config_hf": trained_eff,
        "drafter_field": trained_field,
        "engine_reads_hf": read_eff,
        "engine_field": reading.level or f"default {reading.rule.default_text()}",
        "engine_rule": reading.rule.describe(),
        "engine_rule_assumed": reading.rule_assumed,
        "release": release_label(release),
        "target_layers": n,
        "agrees": None if trained_eff is None or read_eff is None else trained_eff == read_eff,
        "convention": SERVER_CONVENTIONS["server.launch.aux_layer_ids"],
    }
    launch["aux_layers"] = aux
    d = diagnose(path, target=tpath, engines=[_spec(release)])
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
            f"{rules.display} ({release_label(release)}) reads the aux layers as HF {read_eff} ({aux['engine_field']}), but the drafter's "
            f"config says it was trained on {trained_eff}: acceptance is expected to drop.",
            fix=f"{diagnose_command(str(path), _spec(release))} (AUX_LAYER_IDS_*) has the fix.",
            trained=trained_eff,
            engine_reads=read_eff,
        )
    if errors:
        r.add(
            "DRAFTER_DIAGNOSED_BROKEN",
            Severity.WARNING,
            f"diagnose --engine {_spec(release)} finds {', '.join(errors)} in the drafter this server serves: a low "
            "acceptance (or an engine crash) is what the static checks predict.",
            fix=_restart_fix(d, engine, _spec(release)),
            errors=errors,
        )


def _restart_fix(d: Diagnosis, engine: str, spec: str) -> str:
    """The repair command for this drafter and release (with its paths) and the restart, when repair
    fixes every error; otherwise the command that lists the fix of each error."""
    steps = d.next_steps()
    fixed = next((s for s in steps if s.action is StepAction.REPAIR and s.engines == (engine,)), None)
    by_hand = [s for s in steps if s.action in (StepAction.MANUAL, StepAction.LAUNCH)]
    if fixed is not None and fixed.command is not None and not by_hand:
        return f"{fixed.command}, then restart the server on {repair_out(d.checkpoint, spec)}."
    return f"{diagnose_command(d.checkpoint, spec)} gives the fix of each error."


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
