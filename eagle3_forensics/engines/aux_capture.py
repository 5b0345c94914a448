"""The aux layers a release captures for a drafter: the ids it reads, and the target class's conversion."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eagle3_forensics.engines.rules import AuxConvert, AuxDisabled, AuxRule, EngineRules
from eagle3_forensics.engines.target_tables import read_target, sharpen
from eagle3_forensics.engines.view import engine_view, rules_for
from eagle3_forensics.io.config import AUX_FIELD, EAGLE, DrafterConfig


def aux_enabled(rules: EngineRules, cfg: DrafterConfig) -> bool:
    """False when the release reads ``eagle_config.use_aux_hidden_state: false`` (no aux capture)."""
    if rules_for(rules, cfg).use_aux_hidden_state is AuxDisabled.NOT_READ:
        return True
    return engine_view(rules, cfg).at(EAGLE, "use_aux_hidden_state") is not False


def _valid_ids(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(i, int) and not isinstance(i, bool) for i in value)
    )


def aux_ids_read(
    rules: EngineRules, cfg: DrafterConfig, runner: str | None = None
) -> tuple[list[int] | None, str | None]:
    """(ids as stored, level read) for the first aux source present under ``runner``; ``None`` ids -> default.

    ``runner`` ``None`` means the release's default runner; the conversion is :func:`aux_capture`'s.
    """
    rules = rules_for(rules, cfg)
    cfg = engine_view(rules, cfg)
    if runner is None:
        runner = next((r.name for r in rules.runners if r.default), None)
    for src in rules.aux_sources:
        if src.runners and runner not in src.runners:
            continue
        value = cfg.at(src.level, AUX_FIELD)
        if isinstance(value, list) and value:
            return value, src.level
    return None, None


@dataclass(frozen=True)
class AuxReading:
    """What one release captures for a drafter: the ids it read, how it converts them, the layers."""

    ids: list[int] | None  # as stored in the config (None: none read)
    level: str | None  # where they were read
    rule: AuxRule
    rule_assumed: bool  # the target class is unknown (no --target) or not in the table
    architecture: str | None
    captured: list[int] | None  # HF indices (None: the target's layer count is unknown)
    runner: str | None = None

    @property
    def uses_default(self) -> bool:
        return self.ids is None or not self.rule.reads_drafter

    def to_dict(self) -> dict[str, Any]:
        return {
            "ids": self.ids,
            "field": self.level,
            "rule": self.rule.describe(),
            "rule_source": self.rule.source,
            "rule_assumed": self.rule_assumed,
            "target_architecture": self.architecture,
            "captured_hf": self.captured,
            "runner": self.runner,
        }


def aux_capture(
    rules: EngineRules,
    cfg: DrafterConfig,
    architecture: str | None,
    n: int | None,
    runner: str | None = None,
) -> AuxReading:
    """The aux layers (HF index) the release captures for this drafter on a target of ``architecture``."""
    rules = rules_for(rules, cfg)
    known = rules.aux_rule_known(architecture)
    target = read_target(rules, architecture)
    rule = sharpen(known if known is not None else rules.aux_rule_default, target)
    ids: list[int] | None = None
    level: str | None = None
    if rule.reads_drafter and aux_enabled(rules, cfg):
        raw, level = aux_ids_read(rules, cfg, runner)
        ids = raw if _valid_ids(raw) else None
        level = level if ids is not None else None
    if runner is None:
        runner = next((r.name for r in rules.runners if r.default), None)
    captured = None
    if n is not None:
        captured = rule.capture(ids, n)
    elif ids is not None and rule.convert is not AuxConvert.AS_IS_IF_MAX_IS_N:
        captured = rule.capture(ids, 0)  # the conversion does not depend on N
    return AuxReading(ids, level, rule, known is None and not target.known, architecture, captured, runner)
