"""What a server counts is checked before any figure is computed from it (both engines, one set of rules).

A speculative-decoding counter is a count of events since the process started: finite, whole, never
negative and at most 2^53 (beyond it a float64 cannot count by one). Over a run, and since the start
in any one reading, accepted drafts cannot outnumber the draft tokens proposed, verify steps cannot
carry drafts without draft tokens (nor draft tokens without a verify step), and a draft position cannot
be accepted more often than there were verify steps, nor the positions' acceptances add up to other
than the accepted drafts (within the token tolerance); over a run, every verify step commits at least one
generated token (checked where K is known) and no answer holds more tokens than it asked for. A server
whose numbers break one of these is refused (``COUNTERS_IMPOSSIBLE``, an error, exit 1, the numbers as
evidence): an acceptance figure computed from them would be a number from nonsense. Numbers that are
possible but do not add up (other traffic, a counter bug) stay the warning ``COUNTERS_INCONSISTENT``
beside the figure.

A value of the wrong *type* (a string where a count belongs) is a malformed answer,
``SERVER_BAD_RESPONSE`` (exit 4), raised where it enters (:func:`number`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eagle3_forensics.findings import Severity
from eagle3_forensics.probe.server.http import ServerFault
from eagle3_forensics.probe.server.result import ServerProbeResult

# Generated-token bound: per request, verify steps + accepted drafts = completion tokens − 1 (the prefill
# token) + the drafts cut off by the token budget (≤ K − 1 beyond the last token). The counters may
# exceed that bound by this fraction of the generated tokens before they are called impossible: room
# for a little other traffic on a vLLM server (its counters are server-wide) without letting through
# counters that claim more tokens than were generated.
TOKENS_TOLERANCE = 0.10
# A draft position, a histogram bucket or K beyond this is not a speculative setting anyone runs (K is
# single digits; SGLang trees verify tens of tokens): refused before it sizes a list or a loop.
MAX_POSITIONS = 64
MAX_DRAFT_TOKENS = 1024
# Beyond 2**53 a float64 (Prometheus' value type, JSON's number in most engines) cannot count by one: a
# delta of two such counters is rounding, not events. No server counts that far (9e15 tokens).
MAX_COUNT = 2.0**53
_SHOWN = 8  # offending items listed per check


def number(value: Any, what: str) -> float | None:
    """A numeric field as it entered (``None`` when absent); a non-number is a malformed answer.

    NaN, infinities and negatives pass here (JSON and Prometheus text both carry them): they are
    impossible counts, judged by :func:`count_problem` with the other counters, not malformed text."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        request = what.split(":")[0]
        raise ServerFault(
            "SERVER_BAD_RESPONSE",
            f"{what} = {_short(value)} is not a number",
            {"request": request, "field": what, "value": _short(value)},
        )
    return float(value)  # http reads an integer beyond float range as an infinite float


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "…"


def count_problem(value: float | None) -> str | None:
    """Why ``value`` cannot be a count of events (``None`` when it can, or is absent)."""
    if value is None:
        return None
    if not math.isfinite(value):
        return "not finite"
    if value < 0:
        return "negative"
    if value != math.floor(value):
        return "not a whole number"
    if value > MAX_COUNT:
        return "beyond 2^53, where a float64 no longer counts by one"
    return None


def as_reported(value: float | None) -> float | str | None:
    """A figure unchanged for JSON, but NaN and infinities as text (strict JSON has neither)."""
    return value if value is None or math.isfinite(value) else str(value)


def shown(value: float | None) -> float | int | str | None:
    """A value as JSON evidence can carry it (NaN and infinities as text, whole floats as ints)."""
    if value is None:
        return None
    if not math.isfinite(value):
        return str(value)
    return int(value) if float(value).is_integer() else value


@dataclass
class Checks:
    """Collects what makes a server's numbers impossible, with the values that show it."""

    problems: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.problems)

    def fail(self, check: str, detail: str, **values: Any) -> None:
        self.problems.append(
            {"check": check, "detail": detail, "values": {k: _evidence(v) for k, v in values.items()}}
        )

    def counts(self, where: str, values: Mapping[str, float | None]) -> None:
        """Each value must be a count: finite, whole, not negative, at most 2^53."""
        bad = {name: (v, why) for name, v in values.items() if (why := count_problem(v)) is not None}
        if bad:
            first = list(bad.items())[:_SHOWN]
            self.fail(
                "a count is finite, whole, not negative and at most 2^53",
                f"{where}: " + ", ".join(f"{n} = {shown(v)} ({why})" for n, (v, why) in first),
                **{n: v for n, (v, _) in bad.items()},
            )

    def within(self, where: str, values: Mapping[str, float | None], most: int, why: str) -> None:
        """Each count must be at most ``most`` (e.g. the tokens a request asked for)."""
        bad = {n: v for n, v in values.items() if v is not None and v > most}
        if bad:
            self.fail(
                f"at most {most} ({why})",
                f"{where}: " + ", ".join(f"{n} = {shown(v)}" for n, v in list(bad.items())[:_SHOWN]),
                **bad,
            )

    def finite(self, where: str, values: Mapping[str, float | None], *, at_most: float | None = None) -> None:
        """Each figure must be finite and not negative (and not above ``at_most``, when given)."""
        bad = {
            n: v
            for n, v in values.items()
            if v is not None and (not math.isfinite(v) or v < 0 or (at_most is not None and v > at_most))
        }
        if bad:
            bound = "" if at_most is None else f" and at most {at_most:g}"
            self.fail(
                f"a reported figure is finite, not negative{bound}",
                f"{where}: " + ", ".join(f"{n} = {shown(v)}" for n, v in list(bad.items())[:_SHOWN]),
                **bad,
            )


def _evidence(v: Any) -> Any:
    if isinstance(v, float):
        return shown(v)
    if isinstance(v, (list, tuple)):
        return [_evidence(x) for x in v]
    return v


@dataclass(frozen=True)
class Tally:
    """The run's counts as one engine reports them (vLLM deltas, SGLang sums over requests)."""

    requests: int
    completion: float  # tokens generated: vLLM generation_tokens delta (server-wide), else Σ completion
    verify: float  # verify steps that carried drafts (vLLM num_drafts, SGLang spec_verify_ct)
    drafted: float  # draft tokens proposed
    accepted: float  # draft tokens accepted
    per_pos: Sequence[float] = ()
    k: int = 0
    server_wide: bool = False  # counters include other traffic (vLLM): the token bound allows for it


def check_tally(checks: Checks, t: Tally, names: Mapping[str, str], where: str = "") -> None:
    """The cross rules over one run's counts; ``names`` gives each quantity the engine's own name,
    ``where`` leads each detail. The token rule needs K (``t.k``); without it, and over a run, only
    the verify steps are bounded by the tokens generated."""
    acc, drf, ver = names["accepted"], names["drafted"], names["verify"]
    if t.accepted > t.drafted:
        checks.fail(
            f"{acc} ≤ {drf}",
            where + f"{shown(t.accepted)} accepted of {shown(t.drafted)} drafted",
            accepted=t.accepted,
            drafted=t.drafted,
        )
    if t.verify > 0 and t.drafted == 0:
        checks.fail(
            f"{ver} > 0 needs {drf} > 0",
            where + f"{shown(t.verify)} verify steps, no draft tokens",
            verify=t.verify,
            drafted=t.drafted,
        )
    if t.drafted > 0 and t.verify == 0:
        checks.fail(
            f"{drf} > 0 needs {ver} > 0",
            where + f"{shown(t.drafted)} draft tokens, no verify step",
            verify=t.verify,
            drafted=t.drafted,
        )
    over = [i for i, v in enumerate(t.per_pos) if v > t.verify]
    if over:
        checks.fail(
            f"accepted at each position ≤ {ver}",
            where + f"positions {over[:_SHOWN]} accepted more often than {shown(t.verify)} verify steps",
            per_pos=list(t.per_pos),
            verify=t.verify,
        )
    slack = TOKENS_TOLERANCE * max(t.completion, 1.0)
    if t.per_pos and abs(sum(t.per_pos) - t.accepted) > slack + t.k:
        # both count the same accepted drafts in the same step (vLLM's one observe call; SGLang's one
        # answer): a scrape between the two increments differs by a step (≤ K per request), not more
        checks.fail(
            f"Σ accepted per position = {acc}, within {TOKENS_TOLERANCE:.0%} of the tokens generated + K",
            where + f"{shown(float(sum(t.per_pos)))} accepted by position, {shown(t.accepted)} in all",
            per_pos=list(t.per_pos),
            accepted=t.accepted,
            generated=t.completion,
        )
    wide = " (server-wide)" if t.server_wide else ""
    bound = t.completion + t.requests * max(t.k - 1, 0)
    committed = t.verify + t.accepted
    if t.k and committed > bound + slack:
        checks.fail(
            f"{ver} + {acc} ≤ tokens generated + requests × (K − 1), within {TOKENS_TOLERANCE:.0%}",
            where
            + f"{shown(committed)} committed by the counters, {shown(t.completion)} tokens generated{wide}"
            + f", {t.requests} requests, K {t.k}",
            verify=t.verify,
            accepted=t.accepted,
            generated=t.completion,
            requests=t.requests,
            k=t.k,
        )
    elif not t.k and t.requests and t.verify > t.completion + slack:
        # K unknown: each verify step still commits at least one generated token
        checks.fail(
            f"{ver} ≤ tokens generated (K unknown), within {TOKENS_TOLERANCE:.0%}",
            where + f"{shown(t.verify)} verify steps, {shown(t.completion)} tokens generated{wide}",
            verify=t.verify,
            generated=t.completion,
            requests=t.requests,
        )


def refuse(r: ServerProbeResult, checks: Checks, source: str) -> None:
    """Refuse the measurement: ``COUNTERS_IMPOSSIBLE`` with the numbers, and no figure."""
    r.measured = False
    r.server["counters_impossible"] = checks.problems
    r.add(
        "COUNTERS_IMPOSSIBLE",
        Severity.ERROR,
        f"The server reports impossible counters ({source}): "
        + "; ".join(f"{p['check']}: {p['detail']}" for p in checks.problems[:_SHOWN])
        + ". No acceptance is reported from them.",
        fix="The server's speculative-decoding statistics are broken (a metrics bug, a proxy rewriting the "
        "answers, or not the engine named by --engine): read them at the source, or report them to the "
        "engine; probe again once they count.",
        problems=checks.problems,
    )


def report_inconsistent(
    r: ServerProbeResult, checks: list[dict[str, Any]], lead: str, tail: str = "", fix: str | None = None
) -> None:
    """Record the consistency checks; ``COUNTERS_INCONSISTENT`` (a warning) names the ones that fail."""
    r.server["consistency"] = checks
    bad = [c for c in checks if not c["ok"]]
    if bad:
        r.add(
            "COUNTERS_INCONSISTENT",
            Severity.WARNING,
            f"{lead} do not add up: " + "; ".join(f"{c['check']} ({c['detail']})" for c in bad) + "." + tail,
            fix=fix,
            failed=bad,
        )
