"""Simulate how an engine would load a drafter, by interpreting its rule table.

Only names, shapes and the config are needed: no tensor data is read. The result says, for
each checkpoint tensor, what the engine does with it (loaded, renamed, fused, overwritten by
the target, consumed, skipped by design, dropped silently, rejected loudly, warned about),
and which engine parameters nothing fills.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from eagle3_forensics.engines.rules import (
    AS_IS,
    DEFAULT_IF_ABSENT,
    FROM_CHECKPOINT,
    FROM_TARGET,
    MODEL_EXCEPT_LM_HEAD,
    NAME_THEN_MODEL,
    REJECT,
    TARGET_IF_ABSENT,
    WARN,
    EngineRules,
)
from eagle3_forensics.io.checkpoint import Checkpoint
from eagle3_forensics.io.config import EAGLE, TOP, DrafterConfig

ACTIONS = (
    "loaded",
    "renamed",
    "fused",
    "overwritten",
    "consumed",
    "skipped",
    "dropped",
    "rejected",
    "warned",
)


@dataclass(frozen=True)
class KeyFate:
    key: str
    action: str
    param: str | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "action": self.action, "param": self.param, "note": self.note}


@dataclass
class LoadReport:
    """What one engine would make of one checkpoint."""

    engine: str
    revision: str
    config_readable: bool
    config_problem: str | None
    fates: list[KeyFate]
    unfilled: list[str] = field(default_factory=list)
    from_target: list[str] = field(default_factory=list)
    defaulted: list[str] = field(default_factory=list)
    conditions: dict[str, bool] = field(default_factory=dict)

    def keys_with(self, *actions: str) -> list[str]:
        return [f.key for f in self.fates if f.action in actions]

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(ACTIONS, 0)
        for f in self.fates:
            out[f.action] += 1
        return {**out, "unfilled": len(self.unfilled)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "revision": self.revision,
            "config_readable": self.config_readable,
            "config_problem": self.config_problem,
            "counts": self.counts(),
            "keys": [f.to_dict() for f in self.fates],
            "unfilled": self.unfilled,
            "from_target": self.from_target,
            "defaulted": self.defaulted,
        }


# -- how an engine reads the config ------------------------------------------------------------


def config_problem(rules: EngineRules, cfg: DrafterConfig) -> str | None:
    """Why the engine cannot parse this config, or ``None`` when it can."""
    if cfg.style not in rules.config_styles:
        wanted = " or ".join(sorted(rules.config_styles))
        return f"{rules.display} reads {wanted} configs; this one is {cfg.style}"
    archs = cfg.architectures
    if cfg.style == "speculators":
        allowed = rules.speculators_architectures
        if allowed is not None and (not archs or archs[0] not in allowed):
            return (
                f"{rules.display} converts a speculators config only when architectures[0] is "
                f"{' or '.join(allowed) or 'never'}; this one has {archs or 'none'}"
            )
        return None
    allowed = rules.flat_architectures
    if allowed is not None and not any(a in allowed for a in archs):
        return f"{rules.display} needs architectures {list(allowed)}; this config has {archs or 'none'}"
    missing = [f for f in rules.flat_required_fields if cfg.get(f) is None]
    if missing:
        return f"{rules.display} needs config fields missing here: {', '.join(missing)}"
    return None


def engine_flag(rules: EngineRules, cfg: DrafterConfig, flag: str) -> bool:
    """The value the engine acts on for a normalisation flag (False when unimplemented)."""
    if flag not in rules.norm_flags:
        return False
    # vLLM reads norm_before_fc from nested eagle_config first (PR #42143); nested wins generally.
    for level in (EAGLE, TOP):
        value = cfg.at(level, flag)
        if isinstance(value, bool):
            return value
    if (
        flag == "norm_before_residual"
        and cfg.style == "speculators"
        and rules.speculators_norm_before_residual_default is not None
    ):
        return rules.speculators_norm_before_residual_default
    return False


def aux_ids_read(rules: EngineRules, cfg: DrafterConfig) -> tuple[list[int] | None, str | None, int]:
    """(ids as stored, level read, HF offset) for the first aux source present; ``None`` ids -> default."""
    for src in rules.aux_sources:
        value = cfg.at(src.level, "eagle_aux_hidden_state_layer_ids")
        if isinstance(value, list) and value:
            return value, src.level, src.hf_offset
    return None, None, 0


def conditions(rules: EngineRules, cfg: DrafterConfig, names: set[str]) -> dict[str, bool]:
    h, ht = cfg.hidden_size, cfg.target_hidden_size
    v, big_v = cfg.draft_vocab_size, cfg.vocab_size
    return {
        "bias": cfg.get("bias") is True,
        "hidden_differs": ht is not None and h is not None and ht != h,
        "has_target_hidden_size": ht is not None,
        "tied": rules.honours_tie_word_embeddings and cfg.flag("tie_word_embeddings") is True,
        "has_draft_vocab_size": v is not None,
        "reduced_vocab": v is not None and big_v is not None and v < big_v,
        "norm_before_fc": engine_flag(rules, cfg, "norm_before_fc"),
        "fc_norm": engine_flag(rules, cfg, "fc_norm"),
        "qwen3": cfg.get("model_type") == "qwen3",
        "has_embed": "embed_tokens.weight" in names or "model.embed_tokens.weight" in names,
    }


def _holds(when: str, cond: dict[str, bool]) -> bool:
    for token in filter(None, (t.strip() for t in when.split("&"))):
        negate = token.startswith("!")
        value = cond[token.lstrip("!")]
        if value == negate:
            return False
    return True


def expected_params(rules: EngineRules, cfg: DrafterConfig, cond: dict[str, bool]) -> dict[str, str]:
    """Engine parameter name -> how it is filled, for this config."""
    layers = cfg.num_hidden_layers or 1
    if rules.max_layers is not None:
        layers = min(layers, rules.max_layers)
    ids, _, _ = aux_ids_read(rules, cfg)
    k = len(ids) if (rules.aux_count_from_ids and ids) else 3
    out: dict[str, str] = {}
    for p in rules.params:
        if not _holds(p.when, cond):
            continue
        names = [p.name]
        if "{layer}" in p.name:
            names = [p.name.replace("{layer}", str(i)) for i in range(1 if p.first_layer_only else layers)]
        if "{j}" in p.name:
            names = [n.replace("{j}", str(j)) for n in names for j in range(k)]
        for n in names:
            out[n] = p.filled_by
    return out


# -- key resolution ----------------------------------------------------------------------------


def _candidates(rules: EngineRules, name: str) -> list[str]:
    if rules.prefix == NAME_THEN_MODEL:
        return [name, "model." + name]
    if rules.prefix == MODEL_EXCEPT_LM_HEAD:
        if name.startswith("lm_head") or name.startswith("model.") or name == "draft_id_to_target_id":
            return [name]
        return ["model." + name]
    assert rules.prefix == AS_IS, rules.prefix
    return [name]


def resolve_key(rules: EngineRules, key: str, cond: dict[str, bool], params: dict[str, str]) -> KeyFate:
    for rule in rules.skip:
        if re.search(rule.pattern, key) and _holds(rule.when, cond):
            return KeyFate(key, "skipped", None, rule.note)
    for rule in rules.consume:
        if re.search(rule.pattern, key):
            return KeyFate(key, "consumed", rule.target, rule.note)
    name, notes = key, []
    for rule in rules.renames:
        new = re.sub(rule.pattern, rule.target, name, count=1)
        if new != name:
            notes.append(rule.note or f"{name} -> {new}")
            name = new
    renamed = name != key
    fused = False
    for rule in rules.fuse:
        new = re.sub(rule.pattern, rule.target, name, count=1)
        if new != name:
            fused, name = True, new
    for cand in _candidates(rules, name):
        if cand in params:
            how = params[cand]
            if how == FROM_TARGET:
                return KeyFate(key, "overwritten", cand, "the engine replaces it with the target's tensor")
            action = "fused" if fused else ("renamed" if renamed else "loaded")
            return KeyFate(key, action, cand, "; ".join(notes))
    action = {REJECT: "rejected", WARN: "warned"}.get(rules.unknown_keys, "dropped")
    return KeyFate(key, action, None, f"no parameter {_candidates(rules, name)[-1]!r}")


def simulate_load(rules: EngineRules, ckpt: Checkpoint, cfg: DrafterConfig | None = None) -> LoadReport:
    """Apply ``rules`` to the checkpoint's names and config."""
    cfg = cfg or DrafterConfig(ckpt.config)
    names = set(ckpt.tensors)
    cond = conditions(rules, cfg, names)
    params = expected_params(rules, cfg, cond)
    fates = [resolve_key(rules, key, cond, params) for key in sorted(names)]
    filled = {f.param for f in fates if f.param and f.action in ("loaded", "renamed", "fused", "consumed")}
    unfilled, from_target, defaulted = [], [], []
    for param, how in params.items():
        if param in filled:
            continue
        if how == FROM_CHECKPOINT:
            unfilled.append(param)
        elif how in (FROM_TARGET, TARGET_IF_ABSENT):
            from_target.append(param)
        elif how == DEFAULT_IF_ABSENT:
            defaulted.append(param)
    problem = config_problem(rules, cfg)
    return LoadReport(
        rules.name, rules.revision, problem is None, problem, fates, unfilled, from_target, defaulted, cond
    )
