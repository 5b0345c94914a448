"""Aux-layer ids: valid, read by the engine, and read in the convention they were trained in.

All ids are compared in the Hugging Face ``hidden_states`` index convention (the input of
decoder layer ``i``). How an engine release turns the ids it reads into captured layers depends
on the *target's* class (``AuxRule`` per architecture in each release table): SGLang adds 1 for
Llama-like targets, adds 1 only when the first id is 1 for DeepSeek-V3 / Kimi-K2.5 (newer releases),
keeps a boundary id N for gpt-oss (newer still); vLLM and speculators use the ids as given;
TensorRT-LLM takes them from its launch option. Which ids a class can capture at all (``[0, N]``
or ``[0, N-1]``, and from which lowest id) comes from the release's target table
(:mod:`eagle3_forensics.engines.target_tables`). Without ``--target`` the rule of the engine's
default class is assumed, and every finding says so; a class no table lists is said once
(``TARGET_CLASS_UNKNOWN``, :mod:`.target_capture`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from eagle3_forensics.checks.context import Context
from eagle3_forensics.checks.trainers import recognise_trainer
from eagle3_forensics.engines import ENGINES
from eagle3_forensics.engines.aux_capture import AuxReading
from eagle3_forensics.engines.rules import (
    HF_DEFAULT_AUX,
    AuxConvert,
    AuxDisabled,
    AuxRule,
    EngineRules,
    default_ids,
)
from eagle3_forensics.engines.startup import AuxEffect, startup_for
from eagle3_forensics.engines.target_tables import read_target
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.config import AUX_FIELD, EAGLE, TOP

# How each trainer family wrote the ids it trained with, preferred first: speculators writes HF
# indices at the top level; SpecForge / EAGLE write nested ids that their trainer captured through
# SGLang's own target classes (so they mean what the newest SGLang makes of them).
_WRITER_LEVELS: dict[str, tuple[str, ...]] = {
    "speculators": (TOP, EAGLE),
    "specforge": (EAGLE, TOP),
    "eagle": (EAGLE, TOP),
    "unknown": (EAGLE, TOP),
}
_SPECULATORS_RULE = AuxRule(AuxConvert.AS_IS)
#: the "field" of trained ids that a measurement decided (``trained_ids``)
MEASURED = "measured"


def _field(level: str | None) -> str:
    return f"eagle_config.{AUX_FIELD}" if level == EAGLE else AUX_FIELD


def _valid(ids: Any) -> bool:
    return (
        isinstance(ids, list)
        and bool(ids)
        and all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
        and len(set(ids)) == len(ids)
        and min(ids) >= 0
    )


def writer_rule(ctx: Context, level: str | None) -> tuple[AuxRule, bool]:
    """(the rule the trainer's ids at ``level`` were written in, whether it was assumed)."""
    if level == TOP or (ctx.fmt.family == "speculators" and level is None):
        return _SPECULATORS_RULE, False
    sglang = ENGINES["sglang"]
    known = sglang.aux_rule_known(ctx.target_architecture)
    return (known, False) if known is not None else (sglang.aux_rule_default, True)


def trained_ids(ctx: Context) -> tuple[list[int] | None, str | None]:
    """HF-index ids the drafter was trained with (``None``: trainer default) and the field they came from.

    With a measurement (``ctx.measured_aux``) that beats the config's ids beyond its noise, the measured
    best set wins (field ``"measured"``): the config's ids are then not the layers it was trained on.
    """
    ids, level = config_trained_ids(ctx)
    m = ctx.measured_aux
    if m is not None and ids is not None and m.material(ids):
        return list(m.best.ids), MEASURED
    return ids, level


def config_trained_ids(ctx: Context) -> tuple[list[int] | None, str | None]:
    """The ids the config records, as HF indices in the writer's convention, and their field."""
    n = ctx.target_layers
    for level in _WRITER_LEVELS[ctx.fmt.family]:
        ids = ctx.cfg.at(level, AUX_FIELD)
        if _valid(ids):
            rule, _ = writer_rule(ctx, level)
            hf = rule.capture(ids, n if n is not None else -1)
            return hf, level
    return None, None


def trained_default(ctx: Context) -> list[int] | None:
    """The layers presumed trained when the drafter names none: a material measurement's best set,
    else the recognised trainer's default (:mod:`.trainers`), else SGLang's default for the target class."""
    n = ctx.target_layers
    if n is None:
        return None
    presumed = trainer_default(ctx)
    m = ctx.measured_aux
    if m is not None and (presumed is None or m.material(presumed)):
        return list(m.best.ids)
    return presumed


def trainer_default(ctx: Context) -> list[int] | None:
    """The recognised trainer's default for this target (SpecForge and unknown: SGLang's class default)."""
    n = ctx.target_layers
    if n is None:
        return None
    trainer = recognise_trainer(ctx.cfg)
    if trainer is not None and trainer.default is not None:
        return trainer.default(n)
    rule, _ = writer_rule(ctx, None)
    return rule.default(n) if rule.default_hf is not None else default_ids(HF_DEFAULT_AUX, n)


def _rule_evidence(reading: AuxReading) -> dict[str, Any]:
    return {
        "target_architecture": reading.architecture,
        "aux_rule": reading.rule.describe(),
        "aux_rule_source": reading.rule.source,
        "aux_rule_assumed": reading.rule_assumed,
    }


def _assumed(reading: AuxReading) -> str:
    # a named class no table lists is reported once (TARGET_CLASS_UNKNOWN), not in every message
    if not reading.rule_assumed or reading.architecture:
        return ""
    return f" (no --target: assumed {reading.rule.describe()})"


def _target_evidence(rules: EngineRules, ctx: Context) -> dict[str, Any]:
    """Where the capture range came from: the target table read, and whether its row was run or read."""
    reading = read_target(rules, ctx.target_architecture)
    if reading.table is None:
        return {}
    return {
        "target_table": reading.table.release,
        "target_row": reading.row.where if reading.row else None,
        "target_proof": reading.row.proof.value if reading.row else None,
    }


def _captures(rules: EngineRules, ctx: Context) -> bool:
    """False when the target class cannot capture at all here (TARGET_NO_EAGLE3_CAPTURE says so)."""
    reading = read_target(rules, ctx.target_architecture)
    return reading.row is None or reading.row.capture.captures


def check_aux_valid(ctx: Context) -> Iterator[Finding]:
    """Malformed ids and a count that disagrees with fc (any engine); ids beyond the target (per engine)."""
    for level in (TOP, EAGLE):
        ids = ctx.cfg.at(level, AUX_FIELD)
        if ids is None or ids == []:
            continue  # absent, or empty as ModelOpt exports it: every engine falls back (AUX_LAYER_IDS_NOT_RECORDED)
        field = _field(level)
        problems = []
        if not _valid(ids):
            problems.append("not a non-empty list of distinct non-negative integers")
        else:
            fc = ctx.shape("fc.weight")
            ht = ctx.cfg.target_hidden_size or ctx.cfg.hidden_size
            if fc and ht and len(fc) == 2 and fc[1] % ht == 0 and fc[1] // ht != len(ids):
                problems.append(f"{len(ids)} ids but fc takes {fc[1] // ht} aux states")
        if problems:
            yield Finding(
                "AUX_LAYER_IDS_INVALID",
                Severity.ERROR,
                f"{field} = {ids!r}: " + "; ".join(problems) + ".",
                evidence={
                    "field": field,
                    "ids": ids,
                    "problems": problems,
                    "target_layers": ctx.target_layers,
                },
                fix="Write the ids the drafter was trained with (HF index for vLLM's top-level field; for SGLang's "
                "nested field, what the target's class converts to those layers).",
            )
    n = ctx.target_layers
    if n is None:
        return
    for rules in ctx.engines:
        if not _captures(rules, ctx):
            continue
        for runner, reading in _readings(rules, ctx).items():
            if reading.ids is None or reading.captured is None:
                continue
            limit = n if reading.rule.captures_final else n - 1
            yield from _below_first(rules, ctx, reading, runner)
            beyond = [i for i in reading.captured if i > limit]
            if not beyond:
                continue
            where = f" under the {runner} runner" if runner else ""
            trained = _trained_or_none(ctx)
            yield Finding(
                "AUX_LAYER_IDS_INVALID",
                Severity.ERROR,
                f"{rules.display} ({rules.release}){where} reads {_field(reading.level)} = {reading.ids} as HF "
                f"layers {reading.captured}{_assumed(reading)}, but a target with {n} layers captures at most "
                f"index {limit}: layer(s) {beyond} are never captured and fc gets fewer states than it takes.",
                engine=rules.name,
                evidence={
                    "field": _field(reading.level),
                    "ids": reading.ids,
                    "captured_hf": reading.captured,
                    "target_layers": n,
                    "max_capturable": limit,
                    "runner": runner,
                    **_rule_evidence(reading),
                    **_target_evidence(rules, ctx),
                    **ctx.evidence_base(rules.name),
                },
                fix=_beyond_fix(rules, n, limit, trained)
                if trained is None or max(trained) > limit
                else aux_fix(rules, ctx, trained),
            )


def _below_first(
    rules: EngineRules, ctx: Context, reading: AuxReading, runner: str | None
) -> Iterator[Finding]:
    """Ids below the lowest the class's forward can capture (vLLM's DeepSeek-V2: id 0 raises)."""
    target = read_target(rules, ctx.target_architecture)
    row, table = target.row, target.table
    if row is None or table is None or reading.captured is None:
        return
    below = [i for i in reading.captured if i < row.first_id]
    if not below:
        return
    where = f" under the {runner} runner" if runner else ""
    yield Finding(
        "AUX_LAYER_IDS_INVALID",
        Severity.ERROR,
        f"{rules.display} ({rules.release}){where} captures HF layers {reading.captured} from "
        f"{_field(reading.level)} = {reading.ids}, but {row.where} ({reading.architecture}) captures no id below "
        f"{row.first_id}: {table.below_first_text(row)}.",
        engine=rules.name,
        evidence={
            "field": _field(reading.level),
            "ids": reading.ids,
            "captured_hf": reading.captured,
            "min_capturable": row.first_id,
            "runner": runner,
            **_rule_evidence(reading),
            **_target_evidence(rules, ctx),
            **ctx.evidence_base(rules.name),
        },
        fix=f"Drop id(s) {below}: this target class cannot capture them on {rules.display}; if the drafter was "
        "trained on the embedding output, serve it where the target captures id 0, or retrain.",
    )


def _beyond_fix(rules: EngineRules, n: int, limit: int, trained: list[int] | None) -> str:
    """The trained ids themselves lie beyond what this target can capture: rewriting them cannot help."""
    return (
        f"The ids reach beyond index {limit}, the last a {n}-layer target of this class captures on "
        f"{rules.display} ({rules.release}): check that --target is the model the drafter was trained for "
        f"(trained ids {trained}); for this target, retrain on ids in [0, {limit}]."
    )


def _trained_or_none(ctx: Context) -> list[int] | None:
    ids, _ = trained_ids(ctx)
    return ids if ids is not None else trained_default(ctx)


def _readings(rules: EngineRules, ctx: Context) -> dict[str | None, AuxReading]:
    """The release's reading per model runner (one entry, key ``None``, when it has no runners)."""
    if not rules.runners:
        return {None: ctx.aux(rules.name)}
    return {r.name: ctx.aux(rules.name, r.name) for r in rules.runners}


def _judge(
    rules: EngineRules, ctx: Context, reading: AuxReading, trained: list[int] | None, explicit: bool
) -> tuple[str, bool, str] | None:
    """(code, decided, message) when ``reading`` does not capture the trained layers, else ``None``."""
    read_eff = reading.captured
    if trained is not None and read_eff is not None and trained == read_eff:
        return None
    if not explicit and reading.uses_default and (trained is None or read_eff is None):
        return None  # both defaults, and the target is unknown: nothing to compare
    decided = trained is not None and read_eff is not None
    rule = reading.rule
    if reading.ids is None and explicit:
        if not rule.reads_drafter:
            source = rule.describe()
        else:
            reads = " and ".join(_field(s.level) for s in rules.aux_sources) or "no config field"
            source = (
                f"reads {reads}; the ids are not there, so it falls back to its default {rule.default_text()}"
            )
        return (
            "AUX_LAYER_IDS_IGNORED_BY_ENGINE",
            decided,
            f"{rules.display} ({rules.release}) never sees the drafter's aux ids: {source}"
            + (
                f" = HF {read_eff}, not the trained {trained}."
                if decided
                else "; pass --target to check whether that equals the trained layers."
            ),
        )
    if not decided:
        return None
    assert trained is not None and read_eff is not None
    shift = (
        {r - t for r, t in zip(read_eff, trained, strict=False)} if len(read_eff) == len(trained) else set()
    )
    what = f" ({shift.pop():+d} layer)" if len(shift) == 1 else ""
    source = (
        f"{_field(reading.level)} = {reading.ids}"
        if reading.ids is not None
        else f"its default {rule.default_text()}"
    )
    return (
        "AUX_LAYER_IDS_CONVENTION_SHIFT",
        True,
        f"{rules.display} ({rules.release}) captures HF layers {read_eff} from {source} "
        f"({rule.describe()}{_assumed(reading)}), but the drafter was trained on {trained}{what}.",
    )


def check_aux_engines(ctx: Context) -> Iterator[Finding]:
    n = ctx.target_layers
    trained, trained_level = trained_ids(ctx)
    explicit = trained is not None
    trained_eff = trained if trained is not None else trained_default(ctx)
    if not explicit:
        # no ids recorded: AUX_LAYER_IDS_NOT_RECORDED (.aux_trained) judges each engine's fallback
        yield from _ambiguous(ctx)
        return
    for rules in ctx.engines:
        if not _captures(rules, ctx):
            continue
        readings = _readings(rules, ctx)
        verdicts = {runner: _judge(rules, ctx, r, trained_eff, explicit) for runner, r in readings.items()}
        wrong = {runner: v for runner, v in verdicts.items() if v is not None}
        if not wrong:
            continue
        default_runner = next((r.name for r in rules.runners if r.default), None)
        runner, (code, decided, message) = next(iter(wrong.items()))
        if default_runner in wrong:
            runner, (code, decided, message) = default_runner, wrong[default_runner]
        reading = readings[runner]
        severity = Severity.ERROR if decided else Severity.WARNING
        if len(readings) > 1:
            # One release, two execution paths that read the config differently: name both.
            parts = []
            for r in rules.runners:
                rd = readings[r.name]
                verdict = "the trained layers" if verdicts[r.name] is None else "not the trained layers"
                got = f"HF {rd.captured}" if rd.captured is not None else "its default"
                src = _field(rd.level) if rd.ids is not None else f"default {rd.rule.default_text()}"
                parts.append(f"{r.name} ({r.when}): {got} from {src}, {verdict}")
            message = f"{message} The model runners differ: " + "; ".join(parts) + "."
            if default_runner not in wrong:
                severity = Severity.WARNING  # only the non-default runner is affected
        evidence = {
            "trained_hf_ids": trained_eff,
            "trained_field": trained_level,
            "engine_hf_ids": reading.captured,
            "engine_field": reading.level,
            "engine_default": reading.rule.default_text(),
            "target_layers": n,
            "runners": {r: readings[r].to_dict() for r in readings if r is not None},
            **_rule_evidence(reading),
            **ctx.evidence_base(rules.name),
        }
        yield Finding(
            code,
            severity,
            message,
            engine=rules.name,
            evidence=evidence,
            fix=aux_fix(rules, ctx, trained_eff),
        )
    yield from _ambiguous(ctx)


def check_aux_hidden_state(ctx: Context) -> Iterator[Finding]:
    """``use_aux_hidden_state: false`` on a drafter whose fc was trained over k aux states."""
    if ctx.cfg.at(EAGLE, "use_aux_hidden_state") is not False:
        return
    fc = ctx.shape("fc.weight")
    ht = ctx.cfg.target_hidden_size or ctx.cfg.hidden_size
    if fc is None or len(fc) != 2 or not ht or fc[1] < 2 * ht:
        return
    k = fc[1] // ht
    for rules in ctx.engines:
        if rules.use_aux_hidden_state is AuxDisabled.NOT_READ:
            continue
        effect = (
            "captures no aux states and skips fc at run time (fc is still loaded)"
            if rules.use_aux_hidden_state is AuxDisabled.FC_SKIPPED
            else "captures no aux states and does not even build fc (its tensor is dropped)"
        )
        outcome = "the drafter sees one H-wide state instead of the features it was trained on."
        behaviour = rules.use_aux_hidden_state.value
        startup = startup_for(rules)
        runner = next((r for r in startup.runners if r.default), None) if startup else None
        if runner is not None and runner.aux_disabled is AuxEffect.CRASH:
            # e.g. vLLM 0.32's V2 runner captures for every eagle3 launch while the class builds no fc
            effect = (
                f"builds no fc, but its default {runner.name} runner still captures the aux states "
                f"({runner.when})"
            )
            outcome = (
                "the first drafter step fails the assert 'hidden_states and input_embeds must have the "
                "same last dimension' (a crash at start-up, not a silent drop)."
            )
            behaviour = "crash"
        yield Finding(
            "AUX_HIDDEN_STATE_DISABLED",
            Severity.ERROR,
            f"eagle_config.use_aux_hidden_state is false, but fc.weight is {list(fc)}: trained over {k} fused "
            f"target states. {rules.display} ({rules.release}) {effect}: {outcome}",
            engine=rules.name,
            evidence={
                "use_aux_hidden_state": False,
                "fc_shape": list(fc),
                "aux_states_trained": k,
                "engine_behaviour": behaviour,
                **ctx.evidence_base(rules.name),
            },
            fix="Remove eagle_config.use_aux_hidden_state (or set it true) in config.json.",
        )


def _ambiguous(ctx: Context) -> Iterator[Finding]:
    """speculators ids equal to the output-of-layer default [1, N//2-1, N-4] are suspicious."""
    n = ctx.target_layers
    ids = ctx.cfg.at(TOP, AUX_FIELD)
    if n is None or ctx.fmt.family != "speculators" or not _valid(ids):
        return
    if ids == [1, n // 2 - 1, n - 4]:
        for rules in ctx.engines:
            reading = ctx.aux(rules.name)
            if reading.level == TOP and reading.rule.convert is AuxConvert.AS_IS:
                yield Finding(
                    "AUX_LAYER_IDS_CONVENTION_SHIFT",
                    Severity.WARNING,
                    f"{AUX_FIELD} = {ids} equals the output-of-layer default (1, N//2-1, N-4) for N = {n}; "
                    f"{rules.display} ({rules.release}) reads it as input-of-layer, one layer early if the trainer "
                    "captured layer outputs (speculators convert copies ids verbatim).",
                    engine=rules.name,
                    evidence={"ids": ids, "target_layers": n, **ctx.evidence_base(rules.name)},
                    fix=f"If the drafter was trained on layer outputs, write {[i + 1 for i in ids]}; "
                    "check with the probe's aux sweep.",
                )


def aux_fix(rules: EngineRules, ctx: Context, trained: list[int] | None) -> str:
    """Where and how to write the HF ids ``trained`` so that this release captures them."""
    if trained is None:
        return "Write the trained ids where this engine reads them (run with --target to compute them)."
    reading = ctx.aux(rules.name)
    rule, n = reading.rule, ctx.target_layers
    if rule.convert is AuxConvert.LAUNCH_OPTION:
        value = rule.option_value(trained)
        return f"Launch {rules.display} with {rule.option}: {value} (HF layers {trained}; the option is read, the drafter never)."
    if not rule.reads_drafter:
        return f"{rules.display} ({rules.release}) hard-codes its aux layers; serve on an engine that reads the trained ids {trained}."
    parts = []
    for src in rules.aux_sources:
        stored = rule.stored_for(trained, n)
        if stored is None:
            continue
        only = f" ({' / '.join(src.runners)} runner only)" if src.runners else ""
        parts.append(f"{_field(src.level)} = {stored}{only}")
    if not parts:
        return (
            f"{rules.display} ({rules.release}) cannot be told to capture HF layers {trained} for this target "
            f"({rule.describe()}); retrain on layers it can capture."
        )
    return f"For {rules.display} ({rules.release}) write " + " or ".join(parts) + f" (HF layers {trained})."


CHECKS = (check_aux_valid, check_aux_engines, check_aux_hidden_state)
