"""The verification settings a live server runs, judged by the release's table (:mod:`eagle3_forensics.engines.verify`).

A server's acceptance is its drafter's only when it verifies exactly (greedy match at the probe's
temperature 0) with the drafter as trained. :func:`judge_verify` reads what the server reports
(vLLM ``/server_info``) or, where it reports nothing, what ``--launch`` says it was started with,
writes ``server.verify`` and adds ``VERIFY_MODE_LOSSY`` before any comparison is made;
:func:`settings_differ` is what :mod:`.compare` lists in ``COMPARE_SETTINGS_DIFFER``.
"""

from __future__ import annotations

from typing import Any

from eagle3_forensics.engines.verify import IN_PROCESS, Effect, VerifyRules, verify_rules_for
from eagle3_forensics.findings import Severity
from eagle3_forensics.probe.server.counters import MAX_POSITIONS
from eagle3_forensics.probe.server.result import ServerProbeResult

GREEDY_TEMPERATURE = 0.0  # what probe-server sends (and the in-process probe runs)


def judge_verify(
    r: ServerProbeResult,
    reported: dict[str, Any] | None,
    reported_from: str | None,
    launched: dict[str, Any] | None,
    launched_from: str | None,
) -> dict[str, Any] | None:
    """Fill ``r.server["verify"]`` from the server's speculative config (``reported``) or the
    ``--launch`` command's (``launched``), and add ``VERIFY_MODE_LOSSY`` / ``LAUNCH_SETTINGS_DISAGREE``.

    ``None`` (nothing written) for an engine without a verification table."""
    version = r.server.get("version")
    rules = verify_rules_for(r.server_engine, version if isinstance(version, str) else None)
    if rules is None:
        return None
    settings: dict[str, Any] = {}
    disagree: dict[str, Any] = {}
    for knob in rules.knobs:
        source: str | None = None
        raw: Any = None
        if reported is not None:
            # a key the server's config lacks: a release without that knob runs its default
            raw, source = reported.get(knob.key, knob.default), f"{reported_from}: {knob.key}"
        elif launched is not None:
            raw, source = launched.get(knob.key, knob.default), f"{launched_from}: {knob.key}"
        if reported is not None and launched is not None:
            other = knob.normalise(launched.get(knob.key, knob.default))
            if knob.normalise(raw) != other and not (knob.key == "quantization" and knob.key not in launched):
                disagree[knob.setting] = {"server": knob.normalise(raw), "launch": other}
        if source is None:
            settings[knob.setting] = {"value": None, "effect": "unknown", "source": None, "key": knob.key}
            continue
        v = knob.judge(raw)
        settings[knob.setting] = {
            "value": v.value,
            "effect": v.effect.value,
            "greedy_requests": v.greedy,
            "why": v.why,
            "source": source,
            "key": knob.key,
            "default": knob.default,
        }
        given = reported if reported is not None else launched
        if knob.setting == "rejection_sample_method" and v.value == "synthetic" and given is not None:
            settings[knob.setting].update(_preset(given))
    unknown = [s for s, v in settings.items() if v["effect"] == "unknown"]
    lossy = [s for s, v in settings.items() if v["effect"] == Effect.LOSSY.value]
    # what the probe's greedy requests see: ENGINE_GAP is undecidable only under these
    lossy_greedy = [s for s in lossy if settings[s].get("greedy_requests", True)]
    verify: dict[str, Any] = {
        "release": rules.release,
        "settings": settings,
        "sampling": {"temperature": GREEDY_TEMPERATURE, "source": "the probe's requests"},
        "lossy": lossy,
        "lossy_for_greedy_requests": lossy_greedy,
        "unknown": unknown,
        "known": not unknown,
        "live": rules.live,
        "sources": list(rules.sources),
    }
    if unknown:
        verify["why_unknown"] = rules.not_live
    r.server["verify"] = verify
    if disagree:
        r.add(
            "LAUNCH_SETTINGS_DISAGREE",
            Severity.WARNING,
            "The server reports other verification settings than --launch: "
            + ", ".join(f"{s} {v['server']!r} (--launch: {v['launch']!r})" for s, v in disagree.items())
            + "; the server's are used.",
            verify=disagree,
        )
    if lossy:
        _lossy_finding(r, rules, settings, lossy)
    return verify


def _preset(spec: dict[str, Any]) -> dict[str, Any]:
    """vLLM synthetic mode: the acceptance length the preset rates (or length) impose (1 + Σ rates).
    Rates for more than ``MAX_POSITIONS`` positions are not a preset anyone runs: not taken."""
    rates, length = spec.get("synthetic_acceptance_rates"), spec.get("synthetic_acceptance_length")
    if (
        isinstance(rates, list)
        and 0 < len(rates) <= MAX_POSITIONS
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in rates)
    ):
        return {
            "synthetic_acceptance_rates": [float(x) for x in rates],
            "preset_acceptance_length": 1.0 + float(sum(rates)),
        }
    if isinstance(length, (int, float)) and not isinstance(length, bool):
        return {"preset_acceptance_length": float(length)}
    return {}


def _lossy_finding(
    r: ServerProbeResult, rules: VerifyRules, settings: dict[str, Any], lossy: list[str]
) -> None:
    parts, fixes = [], []
    for name in lossy:
        s = settings[name]
        parts.append(f"{s['key']}={s['value']!r} ({s['why']})")
        knob = rules.knob(name)
        if knob is not None and knob.fix:
            fixes.append(knob.fix)
    preset = settings.get("rejection_sample_method", {}).get("preset_acceptance_length")
    greedy = [n for n in lossy if settings[n].get("greedy_requests", True)]
    consequence = (
        "Its acceptance is not the drafter's: no comparison with the drafter's expected acceptance (ENGINE_GAP) "
        "is decidable, and a low or high figure says nothing about the drafter."
        if greedy
        else "The probe's greedy requests do not take that path, so the figures measured here are the drafter's; "
        "the server's own figures over sampled traffic (e.g. avg_spec_accept_length) are not."
    )
    r.add(
        "VERIFY_MODE_LOSSY",
        Severity.WARNING,
        f"{rules.release} verifies lossily here: " + "; ".join(parts) + ". " + consequence,
        fix="Restart the server with " + " and ".join(fixes) + " to measure the drafter.",
        settings={n: settings[n] for n in lossy},
        affects_greedy_requests=bool(greedy),
        preset_acceptance_length=preset,
        cost={
            "acceptance_length_drop": None,
            "share_of_positions": 1.0 if greedy else None,
            "basis": "estimated",
            "how": "every verify step of the probe runs the lossy setting (none does when only sampled requests "
            "are affected); the drop is measured only against a reference (--compare-with), and then filled in",
        },
    )


def verify_settings(result: dict[str, Any]) -> dict[str, Any]:
    """The verification settings of a result dict: a probe-server result's ``server.verify``, else an
    in-process probe's (exact greedy verification of a chain, the checkpoint as stored)."""
    server = result.get("server")
    verify = server.get("verify") if isinstance(server, dict) else None
    if result.get("source") == "server" or isinstance(verify, dict):
        settings = verify.get("settings") if isinstance(verify, dict) else None
        out = {
            name: (entry.get("value") if entry.get("effect") != "unknown" else "unknown")
            for name, entry in (settings or {}).items()
            if isinstance(entry, dict)
        }
        sampling = verify.get("sampling") if isinstance(verify, dict) else None
        out["temperature"] = sampling.get("temperature") if isinstance(sampling, dict) else GREEDY_TEMPERATURE
        return out
    temperature = result.get("temperature")
    return {
        **IN_PROCESS,
        "temperature": float(temperature) if isinstance(temperature, (int, float)) else GREEDY_TEMPERATURE,
    }


def settings_differ(r: ServerProbeResult, reference: dict[str, Any]) -> dict[str, Any]:
    """Verification settings known on both sides that differ in a way that matters for the requests
    both ran (a draft-sampling difference does not, when both sides were greedy)."""
    mine = verify_settings({"source": "server", "server": r.server})
    theirs = verify_settings(reference)
    version = r.server.get("version")
    rules = verify_rules_for(r.server_engine, version if isinstance(version, str) else None)
    greedy = mine.get("temperature") == GREEDY_TEMPERATURE and theirs.get("temperature") == GREEDY_TEMPERATURE
    differ = {}
    for name in sorted(set(mine) & set(theirs)):
        a, b = mine[name], theirs[name]
        if "unknown" in (a, b) or a == b:
            continue
        knob = rules.knob(name) if rules is not None else None
        if knob is not None:
            ja, jb = knob.judge(a), knob.judge(b)
            if ja.effect == jb.effect == Effect.EXACT:
                continue  # e.g. no tree vs a chain-shaped tree
            if greedy and all(j.effect is Effect.EXACT or not j.greedy for j in (ja, jb)):
                continue  # only sampled requests see it; both sides were greedy
        differ[name] = {"server": a, "reference": b}
    return differ


__all__ = ["GREEDY_TEMPERATURE", "judge_verify", "settings_differ", "verify_settings"]
