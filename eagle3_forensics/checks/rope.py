"""``ROPE_MISMATCH`` and ``CONTEXT_TOO_SHORT``: the RoPE and the context limit each release runs the drafter with.

Every engine builds the draft's rotary embedding from the draft's own config, so a RoPE that differs
from the target's is the one the drafter was trained with (as far as its config says): that is info.
A warning is earned only where a release runs the drafter with another RoPE than its config records:

* the config holds its RoPE only in ``rope_parameters`` and the release reads only the legacy
  ``rope_theta``/``rope_scaling`` (``EngineRules.reads_rope_parameters``): it runs theta 10000, no scaling;
* the release raises a short draft's ``max_position_embeddings`` to the target's limit, and for the
  draft's RoPE type the rotary derives from that value (``StartupRules.rope_changed_by_raise``).

``CONTEXT_TOO_SHORT`` says what each release does with a draft limit below the target's, from its
start-up rules (``StartupRules.context``): raise the draft's limit (info), lower the whole server's
``max_model_len`` to the draft's (warning), or refuse to start unless an environment variable is set
(warning). Releases without a recorded rule share one checkpoint-level warning that says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from eagle3_forensics.checks.context import Context
from eagle3_forensics.checks.startup import draft_max_len, rope_groups, rope_types
from eagle3_forensics.engines.rules import EngineRules
from eagle3_forensics.engines.startup import ContextRule, StartupRules, startup_for
from eagle3_forensics.engines.view import engine_view
from eagle3_forensics.findings import Finding, Severity

_LIMIT_FIELDS = (
    "max_position_embeddings",
    "original_max_position_embeddings",
    "rope_parameters",
    "rope_scaling",
)
LEGACY_THETA = 10000.0  # what a release reading only rope_theta falls back to (the Llama default)


def _nested_theta(params: Any) -> Any:
    return params.get("rope_theta") if isinstance(params, dict) else None


def _number(value: Any) -> float | None:
    """A config value as a float; ``None`` when absent or not a number (a malformed config must not crash)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:  # an int beyond float range
        return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check_rope(ctx: Context) -> Iterator[Finding]:
    yield from _legacy_only(ctx)
    yield from _raised_rope(ctx)
    t = ctx.target
    if t is None:
        return
    cfg = ctx.cfg
    d_theta = cfg.get("rope_theta") or _nested_theta(cfg.get("rope_parameters"))
    trope = t.rope()
    t_theta = trope.get("rope_theta") or _nested_theta(trope.get("rope_parameters"))
    d_num, t_num = _number(d_theta), _number(t_theta)
    if d_num is not None and t_num is not None and d_num != t_num:
        yield Finding(
            "ROPE_MISMATCH",
            Severity.INFO,
            f"The drafter's rope_theta ({d_theta}) differs from the target's ({t_theta}). Every engine builds "
            "the draft's rotary from the draft's own config, so it runs with the theta its config records; "
            "this matters only if that is not the theta it was trained with.",
            evidence={
                "drafter_rope_theta": d_theta,
                "target_rope_theta": t_theta,
                "engines_run": "drafter's",
            },
            fix="Nothing to do if the config records the training RoPE. Caution: speculators v0.3/v0.4 "
            "trained with the Llama default; do not copy the target's over it without checking.",
        )
    yield from _rope_kind(cfg.get("rope_scaling"), cfg.get("rope_parameters"), trope)


def _legacy_only(ctx: Context) -> Iterator[Finding]:
    """RoPE only in ``rope_parameters``, on a release that reads only the legacy fields (runs theta 10000)."""
    cfg = ctx.cfg
    params = cfg.get("rope_parameters")
    if params is None or cfg.get("rope_theta") is not None:
        return
    groups = rope_groups({"rope_parameters": params})
    thetas = [_number(g.get("rope_theta")) for g in groups]
    kinds = rope_types({"rope_parameters": params})
    if all(x in (None, LEGACY_THETA) for x in thetas) and set(kinds) <= {"default"}:
        return  # the fallback is what the config says: the release runs the recorded RoPE
    for rules in ctx.engines:
        if rules.reads_rope_parameters:
            continue
        yield Finding(
            "ROPE_MISMATCH",
            Severity.WARNING,
            f"RoPE is only in rope_parameters (Transformers 5; type {'/'.join(sorted(set(kinds)))}, theta "
            f"{', '.join(str(x) for x in thetas)}); {rules.display} ({rules.release}) reads only "
            "rope_theta/rope_scaling and runs the drafter with the Llama default (theta 10000, no scaling): "
            "another RoPE than its config records.",
            engine=rules.name,
            evidence={
                "rope_parameters": params,
                "engine_runs": {"rope_theta": LEGACY_THETA, "rope_type": "default"},
                **ctx.evidence_base(rules.name),
            },
            fix="Write rope_theta/rope_scaling at top level too (both forms).",
        )


def _short_draft(
    ctx: Context, rules: EngineRules, startup: StartupRules | None
) -> tuple[dict[str, Any], int, int] | None:
    """The config as ``rules`` reads it, and its limit and the target's as the release derives them
    (``StartupRules.limit``; max_position_embeddings without rules), when the draft's is shorter."""
    t = ctx.target
    if t is None or t.max_position_embeddings is None:
        return None
    view = engine_view(rules, ctx.cfg)
    # the fields wherever the config keeps them (a speculators config: transformer_layer_config)
    raw = {k: view.get(k) for k in _LIMIT_FIELDS if view.get(k) is not None}
    dmax = _int(raw.get("max_position_embeddings"))
    if dmax is None:
        return None
    tmax = t.max_position_embeddings
    if startup is not None:
        dmax, tmax = startup.limit(dmax, _rope_dict(raw)), startup.limit(tmax, _rope_dict(t.rope()))
    return (raw, dmax, tmax) if dmax < tmax else None


def _rope_dict(fields: dict[str, Any]) -> Any:
    return fields.get("rope_parameters") or fields.get("rope_scaling")


def _raised_rope(ctx: Context) -> Iterator[Finding]:
    """A release raises a short draft's max_position_embeddings, and its RoPE type derives from it."""
    for rules in ctx.engines:
        if not ctx.loads[rules.name].config_readable:
            continue  # CONFIG_UNREADABLE_BY_ENGINE says it all for that engine
        startup = startup_for(rules)
        short = _short_draft(ctx, rules, startup) if startup is not None else None
        if startup is None or short is None:
            continue
        raw, dmax, tmax = short
        if not startup.raises_draft(rope_types(raw)):
            continue
        changed = [g for g in rope_groups(raw) if startup.changed_by_raise(g)]
        if not changed:
            continue
        kinds = sorted({str(g.get("rope_type", g.get("type"))) for g in changed})
        yield Finding(
            "ROPE_MISMATCH",
            Severity.WARNING,
            f"{rules.display} ({rules.release}) {_raise_phrase(startup)} the draft's max_position_embeddings "
            f"from {dmax} to the target's {tmax} at start-up, and for RoPE type {'/'.join(kinds)} the rotary "
            "derives from that value: the drafter runs with another RoPE than its config (and training) records.",
            engine=rules.name,
            evidence={
                "rope_types": kinds,
                "draft_max_position_embeddings": dmax,
                "raised_to": tmax,
                "sources": list(startup.sources),
                **ctx.evidence_base(rules.name),
            },
            proof=_proof(startup, "rope_changed_by_raise"),
            fix=f"Serve with a context of at most {dmax} tokens (vLLM --max-model-len, SGLang --context-length: no "
            "raise), or on a release that keeps the draft's value, or write the length the drafter was trained at "
            "into its config.",
        )


def _proof(startup: StartupRules, field: str) -> str:
    """How a start-up fact is known: ran where the loader tier runs that rule, else read in the wheel."""
    return "ran" if field in startup.ran else "read"


def _raise_phrase(startup: StartupRules) -> str:
    if startup.context is ContextRule.REFUSED_UNLESS_ENV:
        return f"starts only with {startup.context_env}=1, which raises"
    return "raises"


def _rope_shape(scaling: Any, params: Any) -> dict[str, Any]:
    """RoPE type, factor and mrope sections, from ``rope_scaling`` or else ``rope_parameters``.

    ``"mrope"`` is the legacy spelling of the default type with sections (Transformers rewrites it).
    """
    src = scaling if isinstance(scaling, dict) else params if isinstance(params, dict) else {}
    kind = src.get("rope_type") or src.get("type") or "default"
    return {
        "type": "default" if kind == "mrope" else kind,
        "factor": _number(src.get("factor")),
        "mrope_section": src.get("mrope_section"),
    }


def _rope_kind(scaling: Any, params: Any, trope: dict[str, Any]) -> Iterator[Finding]:
    """The drafter's RoPE type, scaling factor or mrope sections differ from the target's (SpecForge#310)."""
    draft = _rope_shape(scaling, params)
    target = _rope_shape(trope.get("rope_scaling"), trope.get("rope_parameters"))
    differ = [k for k in ("type", "factor", "mrope_section") if draft[k] != target[k]]
    if not differ:
        return
    parts = [f"{k} {draft[k]!r} vs the target's {target[k]!r}" for k in differ]
    yield Finding(
        "ROPE_MISMATCH",
        Severity.INFO,
        "The drafter's RoPE differs from the target's: " + "; ".join(parts) + ". Every engine builds the "
        "draft's rotary from the draft's own config, so it runs the RoPE its config records; this matters "
        "only if the drafter was trained with the target's (for an mrope target: image and video positions).",
        evidence={
            "differs": differ,
            "drafter_rope": draft,
            "target_rope": target,
            "engines_run": "drafter's",
        },
        fix="Nothing to do if the config records the training RoPE; if the drafter was trained with the "
        "target's, write the target's rope_scaling / rope_parameters (type, factor, mrope_section) into it.",
    )


def check_context(ctx: Context) -> Iterator[Finding]:
    """CONTEXT_TOO_SHORT per release with a recorded context rule, else one checkpoint-level warning."""
    unrecorded: list[EngineRules] = []
    limits: tuple[int, int] | None = None
    for rules in ctx.engines:
        if not ctx.loads[rules.name].config_readable:
            continue  # CONFIG_UNREADABLE_BY_ENGINE says it all for that engine
        startup = startup_for(rules)
        short = _short_draft(ctx, rules, startup)
        if short is None:
            continue
        if startup is None:
            unrecorded.append(rules)
            limits = short[1:]
            continue
        yield _context_release(ctx, rules, startup, *short)
    if limits is not None:
        yield _context_unrecorded(unrecorded, *limits)


def _context_release(
    ctx: Context, rules: EngineRules, startup: StartupRules, raw: dict[str, Any], dmax: int, tmax: int
) -> Finding:
    """What the release does with a draft limit ``dmax`` below the target's ``tmax``, in its words."""
    kinds = sorted(set(rope_types(raw)))
    name = f"{rules.display} {rules.versions}"
    ev: dict[str, Any] = {
        "drafter": dmax,
        "target": tmax,
        "rope_types": kinds,
        "sources": list(startup.sources),
        **ctx.evidence_base(rules.name),
    }
    head = f"The drafter's context limit ({dmax}) is below the target's ({tmax}); {name}"
    if startup.context is ContextRule.REFUSED_UNLESS_ENV:
        return Finding(
            "CONTEXT_TOO_SHORT",
            Severity.WARNING,
            f"{head} gives the draft the target's context length and refuses to start ('Target model's "
            f"context_length ({tmax}) is greater than the derived context_length ({dmax})') unless "
            f"{startup.context_env}=1 is set, which raises the draft's max_position_embeddings to the target's.",
            engine=rules.name,
            evidence={**ev, "outcome": "refused_unless_env", "env": startup.context_env},
            proof=_proof(startup, "context"),
            fix=f"Set {startup.context_env}=1 if the drafter's RoPE allows the longer context, or serve with a "
            f"context length of at most {dmax}, or set max_position_embeddings to {tmax} in the drafter config.",
        )
    if startup.raises_draft(kinds):
        why = (
            "for every EAGLE draft"
            if startup.context is ContextRule.RAISES_DRAFT
            else f"since RoPE type {'/'.join(kinds)} only sizes the rotary cache"
        )
        return Finding(
            "CONTEXT_TOO_SHORT",
            Severity.INFO,
            f"{head} raises the draft's max_position_embeddings to the target's max_model_len at start-up "
            f"{why}, so drafting runs on long contexts. Acceptance may still fall beyond the length the drafter "
            "was trained at.",
            engine=rules.name,
            evidence={**ev, "outcome": "raised"},
            proof=_proof(startup, "context"),
        )
    return _context_kept(startup, raw, head, ev, rules.name)


def _context_kept(
    startup: StartupRules, raw: dict[str, Any], head: str, ev: dict[str, Any], engine: str
) -> Finding:
    """A non cache-only draft the release does not raise: the server is lowered to the draft's derived
    max_model_len (``draft_max_len``), or, where that covers the target's, nothing changes."""
    dmax, tmax, kinds = ev["drafter"], ev["target"], "/".join(ev["rope_types"])
    limit = draft_max_len(raw)
    fix = (
        f"Set max_position_embeddings to {tmax} if the drafter's RoPE supports it, or serve with "
        f"--max-model-len {min(dmax, limit or dmax)} knowingly."
    )
    if limit is None or limit >= tmax:
        return Finding(
            "CONTEXT_TOO_SHORT",
            Severity.WARNING,
            f"{head} does not raise it (RoPE type {kinds} is not cache-only), and the draft's derived "
            f"max_model_len ({limit}) does not lower the server's: positions past {dmax} may fall outside the "
            "draft's rotary cache (sized from max_position_embeddings).",
            engine=engine,
            evidence={**ev, "outcome": "not_raised", "draft_max_model_len": limit},
            proof=_proof(startup, "context"),
            fix=fix,
        )
    where = (
        "on the V2 runner (the default)"
        if startup.context is ContextRule.LIMITS_SERVER_V2
        else "on every runner"
    )
    return Finding(
        "CONTEXT_TOO_SHORT",
        Severity.WARNING,
        f"{head} does not raise it (RoPE type {kinds} is not cache-only): it lowers the whole server's "
        f"max_model_len to the draft's ({limit}) {where}, with only a log warning (LAUNCH_CONTEXT_SHRUNK with "
        "--launch).",
        engine=engine,
        evidence={**ev, "outcome": "server_limited", "draft_max_model_len": limit},
        proof=_proof(startup, "context"),
        fix=fix,
    )


def _context_unrecorded(releases: list[EngineRules], dmax: int, tmax: int) -> Finding:
    names = ", ".join(f"{r.display} {r.versions}" for r in releases)
    return Finding(
        "CONTEXT_TOO_SHORT",
        Severity.WARNING,
        f"The drafter's max_position_embeddings ({dmax}) is below the target's ({tmax}). What {names} do "
        "with a shorter draft limit is not recorded: positions past it may fall outside the draft's rotary "
        "cache, and acceptance degrades on long contexts.",
        evidence={"drafter": dmax, "target": tmax, "releases": [r.release for r in releases]},
        fix=f"Set max_position_embeddings to {tmax} if the drafter's RoPE supports it (trained length "
        "matters; consider rope scaling).",
    )


CHECKS = (check_rope, check_context)
