"""The engine gap: a server probe beside an in-process probe of the same drafter, per position."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.findings import Severity
from eagle3_forensics.probe.core import ProbeResult
from eagle3_forensics.probe.server.result import SERVER_CONVENTIONS, ServerProbeResult
from eagle3_forensics.probe.server.verify import settings_differ
from eagle3_forensics.probe.teacher_forced import CONVENTIONS

DEFAULT_TOLERANCE = 0.10


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
    ``tolerance``; a warning that says it is not decidable when the server verifies lossily,
    VERIFY_MODE_LOSSY) and COMPARE_SETTINGS_DIFFER (warning: K, prompts, tokens or verification
    settings differ) findings. Returns the comparison."""
    ref = load_reference(reference)
    r.findings = [f for f in r.findings if f.code not in ("ENGINE_GAP", "COMPARE_SETTINGS_DIFFER")]
    if not r.measured:
        r.compare = None
        return None
    al_s, al_r = r.acceptance_length, float(ref["acceptance_length"])
    rel = (al_s - al_r) / al_r if al_r else None
    measured_cost = {
        "acceptance_length_drop": al_r - al_s,
        "share_of_positions": None,
        "basis": "measured",
        "how": "the reference's acceptance length minus the server's, same prompts; it includes whatever the "
        "differing settings do",
    }
    differ = _settings_differ(r, ref, measured_cost)
    verify = r.server.get("verify") if isinstance(r.server, dict) else None
    lossy = list(verify.get("lossy_for_greedy_requests") or []) if isinstance(verify, dict) else []
    for f in r.findings:
        if f.code == "VERIFY_MODE_LOSSY" and lossy:
            f.evidence["cost"] = measured_cost
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
        "per_position": _per_position_rows(r, ref),
        "tolerance": tolerance,
        "within_tolerance": within,
        "settings_differ": differ,
        "convention": SERVER_CONVENTIONS["compare.gap"] + " " + CONVENTIONS["acceptance_length"],
    }
    r.compare["decidable"] = not lossy
    if lossy:
        r.compare["not_decidable_because"] = {"verify_mode_lossy": lossy}
    if not within:
        _engine_gap(r, ref, al_s, al_r, rel, tolerance, lossy, measured_cost)
    return r.compare


def _settings_differ(r: ServerProbeResult, ref: dict[str, Any], cost: dict[str, Any]) -> dict[str, Any]:
    """K, prompts, tokens and verification settings that differ (COMPARE_SETTINGS_DIFFER when any)."""
    differ = {}
    for key, mine in (("k", r.k), ("prompts", r.prompts), ("max_new_tokens", r.max_new_tokens)):
        if ref.get(key) is not None and ref.get(key) != mine:
            differ[key] = {"server": mine, "reference": ref.get(key)}
    verify_differ = settings_differ(r, ref)
    differ.update(verify_differ)
    if differ:
        r.add(
            "COMPARE_SETTINGS_DIFFER",
            Severity.WARNING,
            "The two sides ran different settings, so their acceptance is not comparable: "
            + ", ".join(f"{k} {v['reference']!r} (server run: {v['server']!r})" for k, v in differ.items())
            + ".",
            fix="Probe both sides with the same prompts file, --k and --max-new-tokens"
            + (
                ", and the same verification settings (server.verify; the in-process probe verifies exactly, "
                "greedy, a chain)"
                if verify_differ
                else ""
            )
            + ".",
            differ=differ,
            cost=cost,
        )
    return differ


def _per_position_rows(r: ServerProbeResult, ref: dict[str, Any]) -> list[dict[str, Any]]:
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
    return rows


def _engine_gap(
    r: ServerProbeResult,
    ref: dict[str, Any],
    al_s: float,
    al_r: float,
    rel: float | None,
    tolerance: float,
    lossy: list[str],
    cost: dict[str, Any],
) -> None:
    """ENGINE_GAP: an error, or a warning that it is not decidable when the server verifies lossily."""
    gap = (
        f"The server's acceptance length {al_s:.3f} differs from the reference's {al_r:.3f} "
        f"({ref.get('engine')} view) by {al_s - al_r:+.3f}"
        + (f" ({rel:+.1%})" if rel is not None else "")
        + f", beyond the {tolerance:.0%} tolerance"
    )
    if lossy:  # the server's figure is not the drafter's: the gap says nothing about the engine
        r.add(
            "ENGINE_GAP",
            Severity.WARNING,
            gap + f"; not decidable: the server verifies lossily ({', '.join(lossy)}; VERIFY_MODE_LOSSY).",
            fix="Restart the server with exact verification (VERIFY_MODE_LOSSY's fix), then probe again.",
            acceptance_length=al_s,
            reference=al_r,
            relative_gap=rel,
            decidable=False,
            verify_mode_lossy=lossy,
            cost=cost,
        )
    else:
        r.add(
            "ENGINE_GAP",
            Severity.ERROR,
            gap + ".",
            fix="Compare per position (compare.per_position): a gap from position 0 points at the drafter as "
            "loaded (keys, d2t, aux layers); a growing gap at later positions points at the draft recurrence "
            "or numerics.",
            acceptance_length=al_s,
            reference=al_r,
            relative_gap=rel,
            decidable=True,
            cost=cost,
        )
