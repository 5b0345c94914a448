"""``diagnose --launch``: the serving command a user is about to run, checked against the drafter.

The command is read by the release the drafter is judged by (:mod:`eagle3_forensics.engines.launch`
turns it into :class:`LaunchSettings`); these checks compare those settings with the drafter:
the speculative method (``LAUNCH_ALGORITHM_MISMATCH``), the draft path (``LAUNCH_DRAFT_PATH_MISSING``,
``LAUNCH_DRAFT_PATH_OTHER``), the draft-length settings under the release's own validation
(``LAUNCH_SPEC_PARAMS_INCONSISTENT``) and the captured target layers where the launch names them
(``LAUNCH_CAPTURE_LAYERS_MISMATCH``, reusing the trained layers of :mod:`.aux_layers`).
A consistent command gives no finding.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eagle3_forensics.checks.aux_layers import trained_default, trained_ids
from eagle3_forensics.checks.context import Context
from eagle3_forensics.checks.launch_window import check_draft_window
from eagle3_forensics.checks.startup import check_startup
from eagle3_forensics.engines.launch import DraftMissing, LaunchRules, LaunchSettings, Params, Setting
from eagle3_forensics.engines.rules import AuxConvert
from eagle3_forensics.findings import Finding, Severity

# `org/name` with no leading `/`, `.` or `~`: what a Hugging Face Hub id looks like
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SGLANG_EAGLE_ISSUE = "sglang#21272"
_SGLANG_DRAFT_ISSUE = "sglang#36528"


def check_launch(
    ctx: Context, launch: LaunchSettings, rules: LaunchRules, drafter: str | Path, base: Path | None = None
) -> list[Finding]:
    """Every launch finding for ``launch`` (read under ``rules``) against the drafter at ``drafter``."""
    out: list[Finding] = []
    out += _algorithm(launch, rules)
    out += _draft_path(launch, rules, Path(drafter), base or Path.cwd())
    out += _params(ctx, launch, rules)
    out += _capture(ctx, launch, rules)
    out += check_startup(ctx, launch, rules, base)
    out += check_draft_window(ctx, launch)
    return out


def _evidence(launch: LaunchSettings, **extra: Any) -> dict[str, Any]:
    return {
        "launch_release": launch.launch_release,
        "engine_release": launch.judged_by,
        "program": launch.program,
        **extra,
    }


def _method_where(rules: LaunchRules, launch: LaunchSettings) -> str:
    given = launch.given.get(Setting.METHOD.value)
    if given:
        return given
    flag = next((f.names[0] for f in rules.flags if f.setting is Setting.METHOD), None)
    if flag is not None:
        return flag
    key = next((k.keys[0] for k in rules.config_keys if k.setting is Setting.METHOD), "method")
    return f"{rules.config_section}.{key}" if rules.config_section else key


def _speculative(launch: LaunchSettings, rules: LaunchRules) -> bool:
    """The command runs an EAGLE-family drafter (or vLLM's guessed draft model) that needs a draft path."""
    used = launch.method_used
    return used is not None and (
        used in rules.eagle3_methods or used in rules.eagle_methods or launch.method_source != "flag"
    )


def _algorithm(launch: LaunchSettings, rules: LaunchRules) -> Iterator[Finding]:
    written = launch.get(Setting.METHOD)
    where = _method_where(rules, launch)
    used = launch.method_used
    name = f"{rules.display} ({launch.launch_release})"
    if launch.method_refused is not None:
        message = f"{name} refuses {where} {written!r} at startup: {launch.method_refused}."
    elif used is None:
        draft = launch.get(Setting.DRAFT)
        ignored = f"; the draft path {draft!r} is ignored" if draft is not None else ""
        message = (
            f"The command starts {rules.display} without speculative decoding (no {where}){ignored}: "
            "the drafter is never loaded."
        )
    elif used in rules.eagle3_methods:
        return
    elif used in rules.eagle_methods:
        how = (
            f"{where} {written!r} runs as {used!r}"
            if written is not None and written != used
            else f"{where} {used!r}"
            if written is not None
            else f"without a method, {rules.display} guesses {used!r} from the draft name "
            f"{launch.get(Setting.DRAFT)!r}"
        )
        message = (
            f"{name}: {how}: an EAGLE-3 drafter served with the EAGLE (1/2) worker reads no aux hidden states "
            f"and accepts almost nothing (acceptance length ≈ 1.0, {_SGLANG_EAGLE_ISSUE})."
        )
    else:
        how = (
            f"{where} {written!r} runs {used!r}"
            if launch.method_source == "flag"
            else f"without a method, {rules.display} picks {used!r} "
            + (
                f"from the draft name {launch.get(Setting.DRAFT)!r}"
                if launch.method_source == "draft name"
                else "(nothing in the draft name matches its EAGLE patterns)"
            )
        )
        message = (
            f"{name}: {how}, not EAGLE-3 (it serves EAGLE-3 as {' or '.join(map(repr, rules.eagle3_methods))}): "
            "the drafter is not run as an EAGLE-3 head."
        )
    yield Finding(
        "LAUNCH_ALGORITHM_MISMATCH",
        Severity.ERROR,
        message,
        engine=launch.engine,
        evidence=_evidence(
            launch,
            written=written,
            method_used=used,
            method_source=launch.method_source,
            refused=launch.method_refused,
            eagle3_methods=list(rules.eagle3_methods),
        ),
        fix=f"Launch with {rules.method_fix}.",
    )


def _draft_path(launch: LaunchSettings, rules: LaunchRules, drafter: Path, base: Path) -> Iterator[Finding]:
    if not _speculative(launch, rules):
        return
    draft = launch.get(Setting.DRAFT)
    fix = f"Name the drafter: {rules.draft_fix.format(path=drafter)}."
    if draft is None:
        issue = f" ({_SGLANG_DRAFT_ISSUE})" if rules.draft_missing is DraftMissing.TARGET_AS_DRAFTER else ""
        severity = Severity.ERROR
        yield Finding(
            "LAUNCH_DRAFT_PATH_MISSING",
            severity,
            f"The command asks for speculative decoding ({launch.method_used}) without a draft path: "
            f"{rules.display} ({launch.launch_release}) {rules.draft_missing_effect}{issue}.",
            engine=launch.engine,
            evidence=_evidence(launch, effect=rules.draft_missing.value, method_used=launch.method_used),
            fix=fix,
        )
        return
    verdict = _compare(str(draft), drafter, base)
    if verdict is None:
        return
    severity, why, detail = verdict
    yield Finding(
        "LAUNCH_DRAFT_PATH_OTHER",
        severity,
        f"The command serves the drafter {draft!r}, {why} (diagnosed: {str(drafter)!r}); "
        "this report is about the diagnosed one.",
        engine=launch.engine,
        evidence=_evidence(launch, draft=draft, diagnosed=str(drafter), **detail),
        fix=f"Serve the diagnosed drafter ({rules.draft_fix.format(path=drafter)}), or diagnose {draft!r}.",
    )


def _compare(draft: str, drafter: Path, base: Path) -> tuple[Severity, str, dict[str, Any]] | None:
    """``None`` when ``draft`` is the diagnosed drafter; else (severity, why, evidence)."""
    mine = drafter.expanduser().resolve()
    candidate = Path(os.path.expanduser(draft))
    if not candidate.is_absolute():
        candidate = base / candidate
    if candidate.is_dir():
        theirs = candidate.resolve()
        if theirs == mine or _same_files(theirs, mine):
            return None
        return (
            Severity.ERROR,
            f"resolved to {str(theirs)!r}, another directory with other files",
            {
                "draft_resolved": str(theirs),
                "diagnosed_resolved": str(mine),
            },
        )
    if _HUB_ID.match(draft) and not draft.startswith((".", "~")):
        org, _, name = draft.partition("/")
        if f"models--{org}--{name}" in str(mine):
            return None  # the diagnosed directory is that id's Hugging Face cache snapshot
        return (
            Severity.INFO,
            "which looks like a Hugging Face Hub id, not a directory here: the engine downloads it, and "
            "nothing here tells whether it holds the same files as the diagnosed directory",
            {"hub_id": True},
        )
    same_name = candidate.name == mine.name
    return (
        Severity.WARNING,
        f"a path that does not exist on this machine (looked for {str(candidate)!r}; the command may be "
        f"meant for another machine{', and its last component matches' if same_name else ''})",
        {"draft_resolved": str(candidate), "exists": False, "same_name": same_name},
    )


def _same_files(a: Path, b: Path) -> bool:
    """Two directories holding the same drafter: the same config.json bytes and weight file sizes."""

    def fingerprint(d: Path) -> tuple[bytes, list[tuple[str, int]]] | None:
        cfg = d / "config.json"
        try:
            files = sorted(
                (p.name, p.stat().st_size)
                for p in d.iterdir()
                if p.suffix in (".safetensors", ".bin", ".json", ".pt") and p.is_file()
            )
            return cfg.read_bytes(), files
        except OSError:
            return None

    fa, fb = fingerprint(a), fingerprint(b)
    return fa is not None and fa == fb


def _params(ctx: Context, launch: LaunchSettings, rules: LaunchRules) -> Iterator[Finding]:
    if not _speculative(launch, rules) or launch.method_refused is not None:
        return  # no EAGLE-family drafting (or a refused method): these settings are not read
    problems: list[tuple[Severity, str, str]] = []  # (severity, what, fix)
    name = f"{rules.display} ({launch.launch_release})"
    if rules.params is Params.STEPS_TOPK_TOKENS:
        steps, topk, tokens = (
            launch.get(s) for s in (Setting.NUM_STEPS, Setting.TOPK, Setting.NUM_DRAFT_TOKENS)
        )
        if steps is None and (topk is not None or tokens is not None):
            problems.append(
                (
                    Severity.ERROR,
                    f"--speculative-eagle-topk / --speculative-num-draft-tokens without --speculative-num-steps: "
                    f"{name} asserts that both are unset before choosing all three itself, so startup fails",
                    "Give --speculative-num-steps K with them (or none of the three).",
                )
            )
        elif steps is not None and topk is None:
            problems.append(
                (
                    Severity.ERROR,
                    f"--speculative-num-steps {steps} without --speculative-eagle-topk: {name} compares "
                    "speculative_eagle_topk (None) with 1 while validating and fails at startup with a TypeError "
                    "(read in its code, not run)",
                    f"Add --speculative-eagle-topk 1 --speculative-num-draft-tokens {steps + 1} (a chain).",
                )
            )
        elif steps is not None and topk == 1 and tokens is not None and tokens != steps + 1:
            problems.append(
                (
                    Severity.WARNING,
                    f"topk 1 (a chain) with {steps} steps verifies {steps + 1} tokens, but "
                    f"--speculative-num-draft-tokens is {tokens}: {name} silently resets it to {steps + 1} "
                    "(one log warning), so the server does not run the command as written",
                    f"Write --speculative-num-draft-tokens {steps + 1} (steps + 1 when topk is 1).",
                )
            )
    elif rules.params is Params.NUM_SPECULATIVE_TOKENS:
        k = launch.get(Setting.NUM_SPECULATIVE_TOKENS)
        if k is None and launch.get(Setting.DRAFT) is not None and ctx.cfg.raw.get("n_predict") is None:
            problems.append(
                (
                    Severity.ERROR,
                    f"no num_speculative_tokens: {name} refuses to start ('A speculative model was provided, but "
                    "num_speculative_tokens was not provided'; the drafter's config has no n_predict)",
                    'Add "num_speculative_tokens": K to --speculative-config.',
                )
            )
        elif k is not None and k <= 0:
            problems.append(
                (
                    Severity.ERROR,
                    f"num_speculative_tokens = {k}: {name} requires it > 0 and refuses to start",
                    'Write "num_speculative_tokens": K with K >= 1.',
                )
            )
        dtp, tp = (
            launch.get(Setting.DRAFT_TENSOR_PARALLEL_SIZE),
            launch.get(Setting.TENSOR_PARALLEL_SIZE) or 1,
        )
        if dtp is not None and dtp not in (1, tp):
            problems.append(
                (
                    Severity.ERROR,
                    f"draft_tensor_parallel_size = {dtp} with tensor-parallel size {tp}: {name} accepts only 1 or "
                    "the target's size and refuses to start",
                    f'Write "draft_tensor_parallel_size": 1 (or {tp}).',
                )
            )
    elif rules.params is Params.MAX_DRAFT_LEN:
        m = launch.get(Setting.MAX_DRAFT_LEN)
        if m is None or m <= 0:
            problems.append(
                (
                    Severity.ERROR,
                    f"max_draft_len is {m if m is not None else 'absent'}: {name} refuses to start "
                    "('max_draft_len must be > 0 for Eagle')",
                    "Write max_draft_len: K (K >= 1) under speculative_config.",
                )
            )
    for severity, what, fix in problems:
        yield Finding(
            "LAUNCH_SPEC_PARAMS_INCONSISTENT",
            severity,
            f"The command's draft settings cannot hold together: {what}.",
            engine=launch.engine,
            evidence=_evidence(
                launch,
                settings={
                    k: v
                    for k, v in launch.settings.items()
                    if k not in (Setting.TARGET.value, Setting.DRAFT.value, Setting.METHOD.value)
                },
                outcome="adjusted" if severity is Severity.WARNING else "refused",
            ),
            fix=fix,
        )


def _capture(ctx: Context, launch: LaunchSettings, rules: LaunchRules) -> Iterator[Finding]:
    option = launch.get(Setting.CAPTURE_LAYERS)
    if option is None or rules.capture_option is None or launch.engine not in ctx.engine_names:
        return
    aux = ctx.rules(launch.engine).aux_rule_for(ctx.target_architecture)
    if aux.convert is not AuxConvert.LAUNCH_OPTION:
        return
    captured = sorted(v + aux.option_offset for v in option)
    trained, _ = trained_ids(ctx)
    trained = trained if trained is not None else trained_default(ctx)
    fc = ctx.shape("fc.weight")
    ht = ctx.cfg.target_hidden_size or ctx.cfg.hidden_size
    k = fc[1] // ht if fc and len(fc) == 2 and ht and fc[1] % ht == 0 else None
    name = f"{rules.display} ({launch.launch_release})"
    if trained is not None and captured == sorted(trained):
        return
    if trained is not None:
        message = (
            f"{rules.capture_option} = {option} makes {name} capture HF layers {captured} "
            f"(value + {aux.option_offset}), but the drafter was trained on {sorted(trained)}."
        )
        fix = f"Write {rules.capture_option}: {aux.option_value(trained)} (HF layers {sorted(trained)})."
    elif k is not None and len(option) != k:
        message = (
            f"{rules.capture_option} = {option} captures {len(option)} layer(s), but fc takes {k} aux states: "
            f"{name} builds fc for {len(option)}."
        )
        fix = f"Write the {k} layers the drafter was trained on (pass --target to compute them)."
    else:
        return  # the trained layers are unknown (no ids, no --target) and the count agrees
    yield Finding(
        "LAUNCH_CAPTURE_LAYERS_MISMATCH",
        Severity.ERROR,
        message,
        engine=launch.engine,
        evidence=_evidence(
            launch,
            option=rules.capture_option,
            value=option,
            captured_hf=captured,
            trained_hf=sorted(trained) if trained is not None else None,
            fc_aux_states=k,
            target_layers=ctx.target_layers,
        ),
        fix=fix,
    )


__all__ = ["check_launch"]
