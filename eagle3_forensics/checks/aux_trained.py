"""The layers a drafter was trained on, as a fact: recorded, presumed from the trainer, or measured.

``AUX_LAYER_IDS_NOT_RECORDED`` (per engine): the config names no aux ids, so each release falls back to
its default for the target class. The recognised trainer's own default (:mod:`.trainers`) is what the
drafter was presumably trained on: where it differs from the engine's fallback the engine captures other
layers (error); where they agree, or the trainer is unknown, the trained layers are still only presumed
(warning) — vllm#50170 (a ModelOpt head trained on other layers than ModelOpt's default) shows why.

``AUX_LAYER_IDS_NOT_TRAINED`` (per engine): the config names ids, but a measurement on the target
(:class:`~eagle3_forensics.checks.aux_measured.MeasuredAux`) finds another set accepting more, beyond the
measurement's noise: the config's ids are not the layers it was trained on.

A measurement, when present, decides both: it sets the severity and carries the measured cost
(``evidence.cost``, the teacher-forced acceptance-length gap) that notebook 06 ranks by.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from eagle3_forensics.checks.aux_layers import aux_fix, config_trained_ids, trainer_default
from eagle3_forensics.checks.aux_measured import MeasuredAux
from eagle3_forensics.checks.context import Context
from eagle3_forensics.checks.trainers import Trainer, recognise_trainer
from eagle3_forensics.engines.aux_capture import AuxReading
from eagle3_forensics.engines.rules import EngineRules
from eagle3_forensics.engines.target_tables import read_target
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.config import AUX_FIELD, EAGLE, TOP

_MEASURE_HINT = (
    "or measure them: eagle3-forensics diagnose PATH --target TARGET --measure-aux PROMPTS "
    "(teacher-forced acceptance of each candidate set on the target)"
)


def _captures(rules: EngineRules, ctx: Context) -> bool:
    row = read_target(rules, ctx.target_architecture).row
    return row is None or row.capture.captures


def _cost(m: MeasuredAux, ids: list[int], gap: float) -> dict[str, Any]:
    return {
        "acceptance_length_drop": round(gap, 6),
        "share_of_positions": None,
        "basis": "measured",
        "how": m.summary(ids),
    }


def _measured(m: MeasuredAux, ids: list[int]) -> dict[str, Any]:
    return {
        "measured_hf_ids": list(m.best.ids),
        "measured_gap": m.gap(ids),
        "measured_noise": m.noise(ids),
        "measurement": m.to_dict(),
    }


def check_aux_not_recorded(ctx: Context) -> Iterator[Finding]:
    """No ids recorded: each engine's fallback against the trainer's default, or the measurement."""
    if config_trained_ids(ctx)[0] is not None or ctx.target_layers is None:
        return
    if any(ctx.cfg.at(level, AUX_FIELD) not in (None, []) for level in (TOP, EAGLE)):
        return  # recorded but malformed: AUX_LAYER_IDS_INVALID says so (an empty list is not recorded)
    if ctx.cfg.at(EAGLE, "use_aux_hidden_state") is False:
        return  # no aux states at all: AUX_HIDDEN_STATE_DISABLED
    trainer = recognise_trainer(ctx.cfg)
    presumed = trainer_default(ctx) if trainer is not None else None
    for rules in ctx.engines:
        if not _captures(rules, ctx):
            continue
        reading = ctx.aux(rules.name)
        if reading.captured is None:
            continue
        yield _not_recorded(ctx, rules, reading, trainer, presumed)


def _not_recorded(
    ctx: Context,
    rules: EngineRules,
    reading: AuxReading,
    trainer: Trainer | None,
    presumed: list[int] | None,
) -> Finding:
    n, fallback = ctx.target_layers, list(reading.captured or [])
    who = f"{rules.display} ({rules.release})"
    head = (
        f"The config records no aux-layer ids: {who} falls back to its default {reading.rule.default_text()} "
        f"= HF {fallback} for this {n}-layer {reading.architecture or 'target'}"
    )
    if trainer is None:
        about = "; the trainer is not recognisable from the config, so the trained layers are unknown"
    else:
        about = f"; {trainer.display} (recognised from the config) captures {trainer.formula} = HF {presumed} by default"
    evidence: dict[str, Any] = {
        "engine_hf_ids": fallback,
        "engine_default": reading.rule.default_text(),
        "trainer": None if trainer is None else trainer.name,
        "trainer_default_hf": presumed,
        "trainer_source": None if trainer is None else trainer.source,
        "target_layers": n,
        "target_architecture": reading.architecture,
        **ctx.evidence_base(rules.name),
    }
    m = ctx.measured_aux
    if m is not None and m.find(fallback) is not None:
        best = list(m.best.ids)
        evidence.update(_measured(m, fallback))
        if m.material(fallback):
            gap = m.gap(fallback) or 0.0
            evidence.update(pin_hf_ids=best, cost=_cost(m, fallback, gap))
            return Finding(
                "AUX_LAYER_IDS_NOT_RECORDED",
                Severity.ERROR,
                f"{head}{about}. Measured on the target: the drafter was trained on HF {best}, not the "
                f"fallback ({m.summary(fallback)}).",
                engine=rules.name,
                evidence=evidence,
                fix=f"Pin the measured ids. {aux_fix(rules, ctx, best)}",
            )
        return Finding(
            "AUX_LAYER_IDS_NOT_RECORDED",
            Severity.INFO,
            f"{head}{about}. Measured on the target: no candidate set beats the fallback beyond the "
            f"measurement's noise ({m.summary(fallback)}).",
            engine=rules.name,
            evidence=evidence,
            fix=f"Pin the ids so every engine reads the same layers. {aux_fix(rules, ctx, fallback)}",
        )
    if presumed is not None and presumed != fallback:
        evidence["pin_hf_ids"] = presumed
        return Finding(
            "AUX_LAYER_IDS_NOT_RECORDED",
            Severity.ERROR,
            f"{head}{about}: the engine captures other layers than the trainer's default.",
            engine=rules.name,
            evidence=evidence,
            fix=f"Pin the trained ids (the trainer's default, unless training set others). "
            f"{aux_fix(rules, ctx, presumed)} — {_MEASURE_HINT}.",
        )
    agree = "" if trainer is None else " — the same layers, but a default is no proof of the trained layers"
    return Finding(
        "AUX_LAYER_IDS_NOT_RECORDED",
        Severity.WARNING,
        f"{head}{about}{agree}: the trained layers are not recorded.",
        engine=rules.name,
        evidence=evidence,
        fix=f"Pin the ids the drafter was trained on where the engine reads them, {_MEASURE_HINT}.",
    )


def check_aux_not_trained(ctx: Context) -> Iterator[Finding]:
    """Recorded ids that a measurement beats beyond its noise: not the layers the drafter was trained on.

    One finding per engine (whatever that engine makes of the ids, the config records the wrong layers,
    and the fix — where to pin the measured ids — is the engine's)."""
    m = ctx.measured_aux
    ids, level = config_trained_ids(ctx)
    if m is None or ids is None or not m.material(ids):
        return
    best = list(m.best.ids)
    gap = m.gap(ids) or 0.0
    field = f"eagle_config.{AUX_FIELD}" if level == EAGLE else AUX_FIELD
    for rules in ctx.engines:
        if not _captures(rules, ctx):
            continue
        captured = ctx.aux(rules.name).captured
        now = (
            "captures them as they are"
            if captured == best
            else f"captures HF {captured}"
            if captured is not None
            else "captures its default"
        )
        yield Finding(
            "AUX_LAYER_IDS_NOT_TRAINED",
            Severity.ERROR,
            f"The config's aux ids ({field} = HF {ids}) are not the layers the drafter was trained on: measured "
            f"on the target, HF {best} accepts more ({m.summary(ids)}); {rules.display} ({rules.release}) "
            f"{now}.",
            engine=rules.name,
            evidence={
                "config_hf_ids": ids,
                "config_field": field,
                "pin_hf_ids": best,
                "engine_hf_ids": captured,
                "target_layers": ctx.target_layers,
                **_measured(m, ids),
                "cost": _cost(m, ids, gap),
                **ctx.evidence_base(rules.name),
            },
            fix=f"Pin the measured ids. {aux_fix(rules, ctx, best)}",
        )


CHECKS = (check_aux_not_recorded, check_aux_not_trained)
