"""``diagnose --launch`` on vLLM: what the release does at start-up with the command's speculative settings.

The release's :class:`~eagle3_forensics.engines.startup.StartupRules` decide it: keys
``SpeculativeConfig`` refuses (``extra="forbid"``), P-EAGLE and ``parallel_drafting``, the removed V1
runner, the speculators verifier rule (``LAUNCH_FAILS_AT_STARTUP``), and the RoPE-type context rule
that silently lowers the server's ``max_model_len`` (``LAUNCH_CONTEXT_SHRUNK``). Each message says
what the release really does: a refusal, a crash, or a silent change.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eagle3_forensics.checks.context import Context
from eagle3_forensics.engines.launch import LaunchRules, LaunchSettings, Setting
from eagle3_forensics.engines.startup import (
    AuxEffect,
    ContextRule,
    ParallelDrafting,
    RunnerRule,
    StartupRules,
)
from eagle3_forensics.engines.verify import Effect, verify_rules_for
from eagle3_forensics.engines.view import engine_view
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.config import EAGLE

# huggingface_hub validate_repo_id (what vLLM calls on the verifier): "name" or "org/name"
_REPO_ID = re.compile(r"^(\b[\w\-.]{1,96}\b/)?\b[\w\-.]{1,96}\b$")


def check_startup(
    ctx: Context, launch: LaunchSettings, rules: LaunchRules, base: Path | None = None
) -> list[Finding]:
    """Every start-up finding for ``launch`` under ``rules`` (none for a release without start-up rules)."""
    startup = rules.startup
    if launch.method_used is None:
        return []
    lossy = list(_lossy_verification(launch, rules))
    if startup is None:
        return lossy
    runner, why = runner_for(startup, launch, rules)
    found = [
        *lossy,
        *_refused_keys(startup, launch, rules),
        *_refused_values(startup, launch, rules),
        *_method_options(startup, launch, rules),
        *_environment(startup, launch, rules),
        *_parallel_drafting(ctx, startup, launch, rules),
        *_speculators(ctx, startup, launch, rules, base or Path.cwd()),
        *_aux_disabled(ctx, runner, launch, rules),
        *_context(ctx, startup, runner, launch, rules),
    ]
    return [_with_runner(f, runner, why) for f in found]


def runner_for(
    startup: StartupRules, launch: LaunchSettings, rules: LaunchRules
) -> tuple[RunnerRule | None, str]:
    """The model runner the command gets, and why (the default unless the environment or a key forces V1)."""
    default = startup.default_runner
    if len(startup.runners) < 2:
        return default, "the only model runner"
    v1 = startup.runner("V1")
    env = launch.environment.get(startup.runner_env)
    if env is not None and env.lower() in ("0", "false"):
        return v1, f"{startup.runner_env}={env}"
    config = launch.speculative_config or {}
    for key in startup.v1_forced_by:
        if config.get(key) is True and (key != "parallel_drafting" or _eagle(launch, rules)):
            return v1, f"{key}: true (a feature the V2 runner lacks: it falls back to V1 with a log warning)"
    return default, "the default on GPU builds with Triton"


def _eagle(launch: LaunchSettings, rules: LaunchRules) -> bool:
    return launch.method_used in (*rules.eagle3_methods, *rules.eagle_methods)


def _with_runner(f: Finding, runner: RunnerRule | None, why: str) -> Finding:
    if runner is not None:
        f.evidence.setdefault("runner", runner.name)
        f.evidence.setdefault("runner_why", why)
    return f


def _name(rules: LaunchRules) -> str:
    return f"{rules.display} {rules.versions}"


def _fail(
    launch: LaunchSettings, rules: LaunchRules, rule: str, message: str, fix: str, **evidence: Any
) -> Finding:
    """A start-up failure from the StartupRules field ``rule`` (its proof: ran when the loader tier runs it)."""
    ran = rules.startup is not None and rule in rules.startup.ran
    return Finding(
        "LAUNCH_FAILS_AT_STARTUP",
        Severity.ERROR,
        message,
        engine=launch.engine,
        evidence={"launch_release": launch.launch_release, "engine_release": launch.judged_by, **evidence},
        fix=fix,
        proof="ran" if ran else None,
    )


def _refused_keys(startup: StartupRules, launch: LaunchSettings, rules: LaunchRules) -> Iterator[Finding]:
    if not startup.forbids_extra_keys or not launch.speculative_config:
        return
    removed = dict(startup.removed_keys)
    for key in sorted(k for k in launch.speculative_config if k not in startup.config_keys):
        why = (
            f"'{key}' was removed in {removed[key]} (older releases accepted it)"
            if key in removed
            else f"'{key}' is not a field of its SpeculativeConfig"
        )
        yield _fail(
            launch,
            rules,
            "config_keys",
            f"{_name(rules)} refuses to start: {why}, and SpeculativeConfig forbids extra keys "
            "(pydantic extra='forbid': a validation error before anything loads).",
            f"Remove '{key}' from --speculative-config.",
            key=key,
            outcome="refused",
        )


def _refused_values(startup: StartupRules, launch: LaunchSettings, rules: LaunchRules) -> Iterator[Finding]:
    """Fields SpeculativeConfig has but refuses when set (vLLM: ``tensor_parallel_size``)."""
    config = launch.speculative_config or {}
    for key, error in startup.refused_values:
        if config.get(key) is not None:
            yield _fail(
                launch,
                rules,
                "refused_values",
                f"{_name(rules)} refuses to start: '{key}' is set in --speculative-config, and its "
                f"SpeculativeConfig raises ({error}).",
                f"Remove '{key}' from --speculative-config (for the draft's tensor parallelism: "
                "draft_tensor_parallel_size)."
                if key == "tensor_parallel_size"
                else f"Remove '{key}'.",
                key=key,
                outcome="refused",
            )


def _method_options(startup: StartupRules, launch: LaunchSettings, rules: LaunchRules) -> Iterator[Finding]:
    """Method-specific options an EAGLE-3 launch may not set (the eagle3 speculator does not support them)."""
    if launch.method_used not in rules.eagle3_methods:
        return
    config = launch.speculative_config or {}
    for key in startup.eagle3_refused_options:
        if config.get(key) is not None:
            yield _fail(
                launch,
                rules,
                "method_options",
                f"{_name(rules)} refuses to start: '{key}' is an option of other speculative methods, and "
                f"the eagle3 speculator does not list it in its supported_options "
                f"(ValueError: {key} is not supported with speculative method '{launch.method_used}').",
                f"Remove '{key}' from --speculative-config.",
                key=key,
                outcome="refused",
            )


def _lossy_verification(launch: LaunchSettings, rules: LaunchRules) -> Iterator[Finding]:
    """Verification settings of the command whose acceptance is not the drafter's (engines/verify.py)."""
    verify = verify_rules_for(launch.engine, rules.last if rules.pinned else None)
    config = launch.speculative_config or {}
    if verify is None or not config:
        return
    for knob in verify.knobs:
        if knob.key not in config:
            continue
        value = knob.judge(config[knob.key])
        if value.effect is not Effect.LOSSY:
            continue
        yield Finding(
            "VERIFY_MODE_LOSSY",
            Severity.WARNING,
            f"{_name(rules)} verifies lossily with this command: {knob.key}={value.value!r} ({value.why}). "
            "Its acceptance will not be the drafter's: no figure the server reports measures the drafter.",
            engine=launch.engine,
            evidence={
                "launch_release": launch.launch_release,
                "verify_release": verify.release,
                "setting": knob.setting,
                "key": knob.key,
                "value": value.value,
                "affects_greedy_requests": value.greedy,
                "sources": list(verify.sources),
            },
            fix=f"Launch with {knob.fix} to measure the drafter." if knob.fix else None,
        )


def _environment(startup: StartupRules, launch: LaunchSettings, rules: LaunchRules) -> Iterator[Finding]:
    value = launch.environment.get(startup.runner_env)
    if value is None or startup.env_must_be is None or value == startup.env_must_be:
        return
    yield _fail(
        launch,
        rules,
        "env_must_be",
        f"{_name(rules)} refuses to start: {startup.runner_env}={value} is no longer supported "
        "(Model Runner V1 has been removed).",
        f"Unset {startup.runner_env} in the command's environment.",
        environment={startup.runner_env: value},
        outcome="refused",
    )


def _parallel_drafting(
    ctx: Context, startup: StartupRules, launch: LaunchSettings, rules: LaunchRules
) -> Iterator[Finding]:
    config = launch.speculative_config or {}
    if config.get("parallel_drafting") is not True or not _eagle(launch, rules):
        return
    if startup.parallel_drafting is ParallelDrafting.REFUSED:
        yield _fail(
            launch,
            rules,
            "parallel_drafting",
            f"{_name(rules)} refuses to start: parallel_drafting is only supported by the dflash and dspark "
            f"methods, not {launch.method_used!r} (P-EAGLE was removed; SpeculativeConfig raises ValueError).",
            "Remove 'parallel_drafting' from --speculative-config (or serve on vLLM 0.33 for P-EAGLE).",
            key="parallel_drafting",
            outcome="refused",
        )
    elif ctx.find("mask_hidden") is None:
        yield _fail(
            launch,
            rules,
            "parallel_drafting",
            f"{_name(rules)}: parallel_drafting: true makes the server fall back to the V1 runner (P-EAGLE), and "
            "the drafter has no mask_hidden tensor: loading fails with 'mask_hidden not found in weights but "
            "model is configured for parallel drafting' (a crash at start-up).",
            "Remove 'parallel_drafting' from --speculative-config: this drafter is a plain EAGLE-3 head.",
            key="parallel_drafting",
            outcome="crash",
        )


def _speculators(
    ctx: Context, startup: StartupRules, launch: LaunchSettings, rules: LaunchRules, base: Path
) -> Iterator[Finding]:
    refused = dict(startup.speculators_refused)
    # the served checkpoint's type, else the diagnosed drafter's: vLLM reads a speculators draft named
    # in --speculative-config through the same registry (transformers_utils/configs/speculators)
    drafter_type = ctx.cfg.raw.get("speculators_model_type")
    kind = launch.speculators_type or (drafter_type if isinstance(drafter_type, str) else None)
    if kind is None:
        return
    if kind in refused:
        yield _fail(
            launch,
            rules,
            "speculators_refused",
            f"{_name(rules)} refuses to start: the drafter is a speculators '{kind}' checkpoint: "
            f"{refused[kind]}",
            "Serve it on a release that supports it, or convert the drafter to plain EAGLE-3.",
            speculators_model_type=kind,
            outcome="refused",
        )
    verifier = launch.verifier
    if (
        launch.speculators_type is not None
        and startup.verifier_must_be_remote
        and not _remote(verifier, base)
    ):
        yield _fail(
            launch,
            rules,
            "verifier_must_be_remote",
            f"{_name(rules)} refuses to start `{launch.program} <speculators checkpoint>`: the checkpoint's "
            f"speculators_config.verifier.name_or_path {verifier!r} is not a remote repository id (a local path "
            "or an id that exists as a local directory): 'Speculators verifier must name a remote model "
            "repository'.",
            "Name the target with --model and the drafter in --speculative-config "
            '(\'{"method": "eagle3", "model": "<this drafter>", "num_speculative_tokens": K}\'), '
            "or set the verifier to a Hub id.",
            verifier=verifier,
            outcome="refused",
        )


def _remote(verifier: Any, base: Path) -> bool:
    """vLLM's test: a string that is a valid Hub repo id and names nothing on the local disk."""
    if not isinstance(verifier, str) or verifier.count("/") > 1 or not _REPO_ID.fullmatch(verifier):
        return False
    if "--" in verifier or ".." in verifier or verifier.endswith(".git"):
        return False
    local = Path(verifier) if Path(verifier).is_absolute() else base / verifier
    return not (local.exists() or local.is_symlink())


def _aux_disabled(
    ctx: Context, runner: RunnerRule | None, launch: LaunchSettings, rules: LaunchRules
) -> Iterator[Finding]:
    if runner is None or runner.aux_disabled is not AuxEffect.CRASH:
        return
    if (
        launch.method_used not in rules.eagle3_methods
        or ctx.cfg.at(EAGLE, "use_aux_hidden_state") is not False
    ):
        return
    yield _fail(
        launch,
        rules,
        "runners",
        f"{_name(rules)}, {runner.name} runner: eagle_config.use_aux_hidden_state is false, so the drafter "
        "builds no fc, but this runner captures the aux states for every eagle3 launch: the drafter gets a "
        "k×H-wide input and fails the assert 'hidden_states and input_embeds must have the same last "
        "dimension' when it first runs (a crash, not a silent fallback).",
        "Remove eagle_config.use_aux_hidden_state from the drafter's config.json (or set it true).",
        use_aux_hidden_state=False,
        outcome="crash",
    )


def rope_groups(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """The RoPE parameter dicts of a config (rope_parameters or rope_scaling; one per layer type if nested)."""
    rope = raw.get("rope_parameters") or raw.get("rope_scaling")
    if not isinstance(rope, dict) or not rope:
        return []
    nested = [v for v in rope.values() if isinstance(v, dict)]
    return nested or [rope]


def rope_types(raw: dict[str, Any]) -> list[str]:
    """The RoPE types a config declares ("default" when it declares none)."""
    groups = rope_groups(raw)
    return [str(g.get("rope_type", g.get("type", "default"))) for g in groups] or ["default"]


def draft_max_len(raw: dict[str, Any]) -> int | None:
    """The draft's own max_model_len as vLLM derives it (config/model.py _get_and_verify_max_len)."""
    mpe = raw.get("max_position_embeddings")
    if not isinstance(mpe, int) or isinstance(mpe, bool):
        return None
    groups = rope_groups(raw)
    types = rope_types(raw) if groups else []
    original = raw.get("original_max_position_embeddings")
    if "longrope" in types and isinstance(original, int):
        return original  # LongRoPE defaults to original_max_position_embeddings
    factor = 1.0
    for group, kind in zip(groups, types, strict=True):
        # these types leave max_position_embeddings as the scaled length; the others multiply by factor
        if kind not in ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"):
            value = group.get("factor", factor)
            factor = (
                float(value) if isinstance(value, int | float) and not isinstance(value, bool) else factor
            )
    return int(mpe * factor)


def _context(
    ctx: Context, startup: StartupRules, runner: RunnerRule | None, launch: LaunchSettings, rules: LaunchRules
) -> Iterator[Finding]:
    if startup.context is ContextRule.RAISES_DRAFT or launch.method_used == "draft_model":
        return
    if startup.context is ContextRule.LIMITS_SERVER_V2 and (runner is None or runner.name != "V2"):
        return
    view = engine_view(ctx.rules(launch.engine), ctx.cfg) if launch.engine in ctx.engine_names else ctx.cfg
    types = rope_types(view.raw)
    if startup.raises_draft(types):
        return  # the release raises the draft's max_position_embeddings to the target's
    draft = draft_max_len(view.raw)
    spec_len = (launch.speculative_config or {}).get("max_model_len")
    if isinstance(spec_len, int) and not isinstance(spec_len, bool) and (draft is None or spec_len < draft):
        draft = spec_len
    if draft is None:
        return
    asked = launch.get(Setting.MAX_MODEL_LEN)
    target = asked if isinstance(asked, int) and asked > 0 else None
    source = "--max-model-len" if target is not None else ""
    if target is None and ctx.target is not None:
        target, source = ctx.target.max_position_embeddings, "the target's max_position_embeddings"
    if target is not None and draft >= target:
        return
    where = f"{runner.name} runner" if runner is not None else "model runner"
    got = (
        f"comes up with max_model_len {draft} instead of {target} ({source})"
        if target is not None
        else f"comes up with max_model_len at most {draft} (lower than any longer target context)"
    )
    yield Finding(
        "LAUNCH_CONTEXT_SHRUNK",
        Severity.WARNING,
        f"{_name(rules)}: the drafter's RoPE type {'/'.join(sorted(set(types)))} is not cache-only, so the "
        f"draft's limit ({draft} tokens) is not raised to the target's; the {where} lowers the whole server's "
        f"max_model_len to the draft's instead: the server {got}, with only a log warning (a silent shrink).",
        engine=launch.engine,
        evidence={
            "launch_release": launch.launch_release,
            "engine_release": launch.judged_by,
            "rope_types": sorted(set(types)),
            "draft_max_model_len": draft,
            "target_max_model_len": target,
            "server_max_model_len": draft,
            "outcome": "shrunk",
        },
        fix="Give the drafter a max_position_embeddings of at least the served context (the draft's rotary "
        "cache is sized from it), or serve with --max-model-len "
        f"{draft} knowingly.",
    )


__all__ = ["check_startup", "draft_max_len", "rope_groups", "rope_types", "runner_for"]
