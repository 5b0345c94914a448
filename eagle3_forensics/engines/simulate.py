"""Simulate how an engine release would load a drafter, by interpreting its rule table.

Only names, shapes and the config are needed: no tensor data is read. The result says, for
each checkpoint tensor, what the engine does with it (loaded, renamed, fused, overwritten by
the target, consumed, skipped by design, dropped silently, rejected loudly, warned about), the
fate of every engine parameter (filled, unfilled, from the target, defaulted, unused), and the
loud build-time failures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from eagle3_forensics.engines.aux_capture import aux_enabled
from eagle3_forensics.engines.rules import (
    ConfigStyle,
    EngineRules,
    FcCount,
    FcWidth,
    Fill,
    Layers,
    Level,
    MissingDraftVocab,
    OverLimit,
    Prefix,
    UnknownKeys,
)
from eagle3_forensics.engines.view import engine_view, layer_model_type, rules_for
from eagle3_forensics.io.checkpoint import Checkpoint
from eagle3_forensics.io.config import AUX_FIELD, EAGLE, TOP, DrafterConfig

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
FILLED_ACTIONS = ("loaded", "renamed", "fused", "consumed")

# Parameter fates in LoadReport.param_fates.
FILLED = "filled"
UNFILLED = "unfilled"  # stays at initialisation and is used
PARTIAL = "partial"  # a stacked parameter (qkv_proj, gate_up_proj) with some shards missing
UNUSED = "unused"  # stays at initialisation, never used (harmless)
FROM_TARGET = "from_target"
DEFAULTED = "defaulted"
BY_CHANCE = "verifier_if_nan"  # nondeterministic: uninitialised memory, copied only when NaN


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
    """What one engine release would make of one checkpoint."""

    engine: str
    revision: str
    config_readable: bool
    config_problem: str | None
    fates: list[KeyFate]
    unfilled: list[str] = field(default_factory=list)
    from_target: list[str] = field(default_factory=list)
    defaulted: list[str] = field(default_factory=list)
    conditions: dict[str, bool] = field(default_factory=dict)
    release: str = ""
    drafter_class: str = ""
    unused: list[str] = field(default_factory=list)  # unfilled but never used: harmless
    loaded_unused: list[str] = field(default_factory=list)  # filled, but never used by the engine
    by_chance: list[str] = field(default_factory=list)  # filled only if uninitialised memory is NaN
    param_fates: dict[str, str] = field(default_factory=dict)  # every engine parameter -> its fate
    # stacked parameters only some of whose shards arrive: those slices stay at initialisation
    partial: dict[str, list[str]] = field(default_factory=dict)  # param -> missing shards
    build_errors: list[str] = field(default_factory=list)  # loud failures while building the model
    # loud failures of the load not caused by one key: (finding code, what happens, fix)
    load_errors: list[tuple[str, str, str]] = field(default_factory=list)
    # every load error depends on uninitialised memory (the load then succeeds by chance)
    load_errors_by_chance: bool = False
    # where a loud failure happens: "config" | "class" | "build" (None: config and build succeed)
    failure_stage: str | None = None
    d2t: str = "none"  # "offsets" / "absolute" (read from the checkpoint), "identity", "none" (full vocab)
    d2t_encoding: str = "offsets"  # how the release reads a d2t tensor
    missing_d2t: str = "identity"  # what the release does without one

    def keys_with(self, *actions: str) -> list[str]:
        return [f.key for f in self.fates if f.action in actions]

    @property
    def loads(self) -> bool:
        """True when the engine would start with this drafter (no loud failure)."""
        return (
            self.config_readable
            and not self.build_errors
            and not self.load_errors
            and not self.keys_with("rejected")
        )

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(ACTIONS, 0)
        for f in self.fates:
            out[f.action] += 1
        return {**out, "unfilled": len(self.unfilled)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "release": self.release,
            "revision": self.revision,
            "drafter_class": self.drafter_class,
            "config_readable": self.config_readable,
            "config_problem": self.config_problem,
            "build_errors": self.build_errors,
            "load_errors": [{"finding": code, "message": msg} for code, msg, _ in self.load_errors],
            "load_errors_by_chance": self.load_errors_by_chance,
            "failure_stage": self.failure_stage,
            "counts": self.counts(),
            "keys": [f.to_dict() for f in self.fates],
            "unfilled": self.unfilled,
            "unused": self.unused,
            "loaded_unused": self.loaded_unused,
            "from_target": self.from_target,
            "defaulted": self.defaulted,
            "by_chance": self.by_chance,
            "partial": self.partial,
            "d2t": self.d2t,
        }


# -- how an engine reads the config ------------------------------------------------------------


def config_problem(rules: EngineRules, cfg: DrafterConfig) -> str | None:
    """Why the release cannot build a drafter from this config, or ``None`` when it can."""
    return config_failure(rules, cfg)[0]


def config_failure(rules: EngineRules, cfg: DrafterConfig) -> tuple[str | None, str | None]:
    """(why the release cannot use this config, the stage it fails at) or ``(None, None)``.

    Stages, as the real loaders fail: ``"config"`` (the engine's config parsing refuses it),
    ``"class"`` (no EAGLE-3 drafter class for it: another model class, or none, would be built),
    ``"build"`` (the drafter class's constructor raises).
    """
    rules = rules_for(rules, cfg)
    if cfg.style not in rules.config_styles:
        wanted = " or ".join(sorted(rules.config_styles))
        return f"it reads {wanted} configs; this one is {cfg.style}", "config"
    model_type = layer_model_type(cfg)
    for rejected, what in rules.rejected_model_types:
        if model_type == rejected:
            return f"a draft config with model_type {rejected!r} is {what}", "config"
    archs = cfg.architectures
    if cfg.style == ConfigStyle.SPECULATORS:
        allowed_types = rules.speculators_model_types
        if allowed_types is not None and model_type not in allowed_types:
            return (
                "it converts a speculators config only for transformer_layer_config model_type "
                f"{' or '.join(allowed_types)}; this one has {model_type!r}"
            ), "config"
    else:
        allowed = rules.flat_architectures
        if allowed is not None and not any(a in allowed for a in archs[:1]):
            return (
                f"it has no EAGLE-3 drafter class for architectures {archs or 'none'} (it reads {list(allowed)})",
                "class",
            )
    null_refused = [k for k in rules.null_rejected if cfg.fields.get(k) and cfg.at(TOP, k, 0) is None]
    if null_refused:
        return f"its config parser refuses a null {', '.join(null_refused)}", "config"
    for a, b in rules.exclusive_flags:
        if engine_flag(rules, cfg, a) and engine_flag(rules, cfg, b):
            return f"its config parser refuses {a} and {b} together (mutually exclusive)", "config"
    missing = (
        [f for f in rules.flat_required_fields if cfg.get(f) is None] if cfg.style == ConfigStyle.FLAT else []
    )
    if missing:
        return f"it needs config fields missing here: {', '.join(missing)}", "build"
    absent = [k for k in rules.required_keys if not cfg.fields.get(k)]
    if absent:
        why = (
            f"it reads {', '.join(absent)} unconditionally; without the key the build fails (AttributeError)"
        )
        return why, "build"
    # read as the class reads the config: a speculators shim copies such fields only when not null
    cond = conditions(rules, cfg, set())
    fatal = all(cond[name] != negate for name, negate in _tokens(rules.null_fatal_when))
    view = engine_view(rules, cfg)
    null = [k for k in rules.null_fatal if fatal and view.fields.get(k) and view.get(k) is None]
    if null:
        return f"{', '.join(null)} is null, and the build multiplies it (TypeError)", "build"
    for key, when, what in rules.null_fatal_if:
        holds = all(cond[name] != negate for name, negate in _tokens(when))
        if holds and view.fields.get(key) and view.get(key) is None:
            return f"{key} is null: {what}", "build"
    return None, None


def engine_flag(rules: EngineRules, cfg: DrafterConfig, flag: str) -> bool:
    """The value the release acts on for a normalisation flag (False when unimplemented)."""
    rules = rules_for(rules, cfg)
    cfg = engine_view(rules, cfg)
    spec = rules.norm_flag(flag)
    if spec is None:
        return False
    for level in spec.levels:
        for name in (flag, *spec.aliases):
            value = cfg.at(level, name)
            if isinstance(value, bool):
                return value
            if value is not None and level == Level.TOP:
                return bool(value)  # getattr(config, ...) truthiness
    if (
        flag == "norm_before_residual"
        and cfg.style == ConfigStyle.SPECULATORS
        and rules.speculators_norm_before_residual_default is not None
    ):
        return rules.speculators_norm_before_residual_default
    return False


def fc_count(rules: EngineRules, cfg: DrafterConfig) -> tuple[int, str]:
    """(aux states ``fc`` takes, where that number came from) for this release's class."""
    rules = rules_for(rules, cfg)
    cfg = engine_view(rules, cfg)
    return _count(rules.fc_count_from, cfg)


def buffer_count(rules: EngineRules, cfg: DrafterConfig) -> tuple[int, str] | None:
    """(aux states the draft-input buffer holds, source), when the release sizes it apart from ``fc``."""
    rules = rules_for(rules, cfg)
    cfg = engine_view(rules, cfg)
    if rules.buffer_count_from is None:
        return None
    return _count(rules.buffer_count_from, cfg)


def _count(sources: tuple[FcCount, ...], cfg: DrafterConfig) -> tuple[int, str]:
    for src in sources:
        if src in (FcCount.NUM_AUX_LAYERS, FcCount.NUM_AUX_HIDDEN_STATES):
            value = cfg.at(TOP, src.value)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value, src.value
        elif src is FcCount.NESTED_IDS:
            value = cfg.at(EAGLE, AUX_FIELD)
            if isinstance(value, list) and value:
                return len(value), src.value
        elif src is FcCount.TOP_IDS:
            value = cfg.at(TOP, AUX_FIELD)
            if isinstance(value, list) and value:
                return len(value), src.value
        elif src is FcCount.LAUNCH_OPTION:
            return 3, "the launch option's default (3 layers)"
    return 3, "default 3"


def fc_input_width(rules: EngineRules, cfg: DrafterConfig) -> int | None:
    """The width of one aux state as the class sizes fc (``None`` when the config lacks it)."""
    rules = rules_for(rules, cfg)
    cfg = engine_view(rules, cfg)
    h = cfg.hidden_size
    if rules.fc_width is FcWidth.HIDDEN_SIZE:
        return h
    return cfg.target_hidden_size or h


def effective_draft_vocab(rules: EngineRules, cfg: DrafterConfig) -> int | None:
    """The draft vocabulary the class builds lm_head with (``None``: borrowed / unknown)."""
    rules = rules_for(rules, cfg)
    cfg = engine_view(rules, cfg)
    v = cfg.draft_vocab_size
    if v is not None:
        return v
    present = bool(cfg.fields.get("draft_vocab_size"))
    how = rules.null_draft_vocab_size if present else rules.missing_draft_vocab_size
    if how is MissingDraftVocab.VOCAB_SIZE:
        return cfg.vocab_size
    if how is MissingDraftVocab.DEFAULT_32000:
        return 32000
    return None


def conditions(rules: EngineRules, cfg: DrafterConfig, names: set[str]) -> dict[str, bool]:
    rules = rules_for(rules, cfg)
    cfg = engine_view(rules, cfg)
    h, ht = cfg.hidden_size, cfg.target_hidden_size
    big_v = cfg.vocab_size
    v = effective_draft_vocab(rules, cfg)
    dvs_present = bool(cfg.fields.get("draft_vocab_size"))
    bias = cfg.get("bias") is True
    attention_bias = cfg.get("attention_bias") is True
    return {
        "bias": bias,
        "attention_bias": attention_bias,
        "o_proj_bias": bias or attention_bias,
        "hidden_differs": ht is not None and h is not None and ht != h,
        "has_target_hidden_size": ht is not None,
        "tied": rules.honours_tie_word_embeddings and cfg.flag("tie_word_embeddings") is True,
        "has_draft_vocab_size": cfg.draft_vocab_size is not None,
        "draft_vocab_size_null": dvs_present and cfg.get("draft_vocab_size") is None,
        "reduced_vocab": v is not None and big_v is not None and v < big_v,
        "vocab_differs": v is not None and big_v is not None and v != big_v,
        "norm_before_fc": engine_flag(rules, cfg, "norm_before_fc"),
        "fc_norm": engine_flag(rules, cfg, "fc_norm"),
        "qwen3": layer_model_type(cfg) == "qwen3",
        "has_embed": any(n.endswith("embed_tokens.weight") for n in names),
        "has_d2t": any(re.search(r"(^|\.)d2t$", n) for n in names),
        "aux_enabled": aux_enabled(rules, cfg),
        "multi_layer": (cfg.num_hidden_layers or 1) > 1,
    }


def _tokens(when: str) -> list[tuple[str, bool]]:
    return [(t.lstrip("!"), t.startswith("!")) for t in (x.strip() for x in when.split("&")) if t]


def _holds(rule: Any, cond: dict[str, bool]) -> bool:
    return all(cond[name] != negate for name, negate in rule.tokens)


def num_layers(rules: EngineRules, cfg: DrafterConfig) -> int:
    """Decoder layers the class builds for this config."""
    rules = rules_for(rules, cfg)
    cfg = engine_view(rules, cfg)
    layers = cfg.num_hidden_layers or 1
    if rules.max_layers is not None:
        layers = min(layers, rules.max_layers)
    return layers


def expected_params(rules: EngineRules, cfg: DrafterConfig, cond: dict[str, bool]) -> dict[str, str]:
    """Engine parameter name -> how it is filled (a :class:`Fill` value), for this config."""
    rules = rules_for(rules, cfg)
    layers = num_layers(rules, cfg)
    k, _ = fc_count(rules, cfg)
    out: dict[str, str] = {}
    for p in rules.params:
        if not _holds(p, cond):
            continue
        names = [p.name]
        if "{layer}" in p.name:
            idx = {
                Layers.ALL: range(layers),
                Layers.FIRST: range(min(1, layers)),
                Layers.REST: range(1, layers),
            }
            names = [p.name.replace("{layer}", str(i)) for i in idx[p.layers]]
        if "{j}" in p.name:
            names = [n.replace("{j}", str(j)) for n in names for j in range(k)]
        for n in names:
            out[n] = p.filled_by.value
    return out


def expected_shapes(rules: EngineRules, cfg: DrafterConfig, params: dict[str, str]) -> dict[str, list[int]]:
    """Shapes of the parameters whose size the config decides and loaders assert (fc and its norms)."""
    rules = rules_for(rules, cfg)
    h, w = cfg.hidden_size, fc_input_width(rules, cfg)
    if h is None or w is None:
        return {}
    k, _ = fc_count(rules, cfg)
    out: dict[str, list[int]] = {}
    for p in params:
        if p.endswith("fc.weight"):
            out[p] = [h, k * w]
        elif p.endswith("input_norm.weight"):
            out[p] = [k * w]
        elif re.search(r"fc_norm\.\d+\.weight$", p):
            out[p] = [w]
    if rules.vocab_shapes_checked:
        dv, big_v = effective_draft_vocab(rules, cfg), cfg.vocab_size
        for p in params:
            if dv is not None and re.search(r"(^|\.)lm_head\.weight$", p):
                out[p] = [dv, h]
            elif dv is not None and re.search(r"(^|\.)d2t$", p):
                out[p] = [dv]
            elif big_v is not None and re.search(r"(^|\.)t2d$", p):
                out[p] = [big_v]
    return out


# -- key resolution ----------------------------------------------------------------------------


def candidates(rules: EngineRules, name: str) -> list[str]:
    """The parameter names a (renamed, fused) checkpoint name is looked up as."""
    if rules.prefix is Prefix.NAME_THEN_MODEL:
        return [name, "model." + name]
    if rules.prefix is Prefix.MODEL_UNLESS_LM_HEAD:
        if "lm_head" in name or "draft_id_to_target_id" in name:
            return [name]
        return ["model." + name]
    if rules.prefix is Prefix.MODEL_UNLESS_LEADING_LM_HEAD:
        return [name] if name.startswith("lm_head.") else ["model." + name]
    return [name]


def _module_exists(cand: str, params: dict[str, str]) -> bool:
    module = cand.rsplit(".", 1)[0] + "."
    return any(p.startswith(module) for p in params)


def resolve_key(
    rules: EngineRules,
    key: str,
    cond: dict[str, bool],
    params: dict[str, str],
    present: frozenset[str] | set[str] = frozenset(),
) -> KeyFate:
    """What the release does with one checkpoint key (``present``: every key, for paired fusions)."""
    for rule in rules.skip:
        if rule.regex.search(key) and _holds(rule, cond):
            return KeyFate(key, "skipped", None, rule.note)
    for rule in rules.consume:
        if rule.regex.search(key) and _holds(rule, cond):
            return KeyFate(key, "consumed", rule.target, rule.note)
    for rule in rules.drop:
        if rule.regex.search(key) and _holds(rule, cond):
            action = {UnknownKeys.REJECT: "rejected", UnknownKeys.WARN: "warned"}.get(
                rules.unknown_keys, "dropped"
            )
            return KeyFate(key, action, None, rule.note)
    name, notes = key, []
    for rule in rules.renames:
        if not _holds(rule, cond):
            continue
        new = rule.regex.sub(rule.target, name, count=rule.count)
        if new != name:
            notes.append(rule.note or f"{name} -> {new}")
            name = new
    renamed = name != key
    fused = False
    for rule in rules.fuse:
        new = rule.regex.sub(rule.target, name, count=1)
        if new != name:
            fused, name = True, new
            break
    if not fused:
        for pair in rules.pair_fuse:
            if pair.first not in name and pair.second not in name:
                continue
            # the partner is the same name with first/second swapped; both must be in the checkpoint
            partner = (
                name.replace(pair.first, pair.second)
                if pair.first in name
                else name.replace(pair.second, pair.first)
            )
            partner_keys = {_rename(rules, k, cond) for k in present}
            q_name = name if pair.first in name else partner
            target = candidates(rules, q_name.replace(pair.first, pair.target))[-1]
            if partner in partner_keys and partner != name and target in params:
                return KeyFate(key, "fused", target, pair.note)
            return KeyFate(
                key, "dropped", None, f"{pair.note}: no partner {partner!r} (dropped without a log)"
            )
    for cand in candidates(rules, name):
        if cand in params:
            how = params[cand]
            if how == Fill.TARGET:
                return KeyFate(key, "overwritten", cand, "the engine replaces it with the target's tensor")
            action = "fused" if fused else ("renamed" if renamed else "loaded")
            return KeyFate(key, action, cand, "; ".join(notes))
    last = candidates(rules, name)[-1]
    if any(last.endswith(s) for s in rules.ignored_suffixes) and _module_exists(last, params):
        return KeyFate(
            key,
            "dropped",
            None,
            f"no parameter {last!r}; an unexpected bias of an existing module is ignored",
        )
    action = {UnknownKeys.REJECT: "rejected", UnknownKeys.WARN: "warned"}.get(rules.unknown_keys, "dropped")
    return KeyFate(key, action, None, f"no parameter {last!r}")


def _rename(rules: EngineRules, key: str, cond: dict[str, bool]) -> str:
    name = key
    for rule in rules.renames:
        if _holds(rule, cond):
            name = rule.regex.sub(rule.target, name, count=rule.count)
    return name


def _partially_fused(rules: EngineRules, fates: list[KeyFate], cond: dict[str, bool]) -> dict[str, list[str]]:
    """Stacked parameters some of whose shards arrived and some not (param -> missing shards)."""
    seen: dict[str, set[str]] = {}
    wanted: dict[str, tuple[str, ...]] = {}
    for fate in fates:
        if fate.action != "fused" or not fate.param:
            continue
        name = _rename(rules, fate.key, cond)
        for rule in rules.fuse:
            m = rule.regex.search(name)
            if m is not None and rule.parts:
                seen.setdefault(fate.param, set()).add(m.group(1))
                wanted[fate.param] = rule.parts
                break
    return {p: [s for s in wanted[p] if s not in got] for p, got in seen.items() if set(wanted[p]) - got}


# Over 100 lines on purpose: one ordered pass over the loader's decisions per tensor (rename, drop,
# fill, reject); split, the order that decides each tensor's fate would be spread over several functions.
def simulate_load(rules: EngineRules, ckpt: Checkpoint, cfg: DrafterConfig | None = None) -> LoadReport:
    """Apply the release's table (the class it builds for this config) to the checkpoint's names and config."""
    cfg = cfg or DrafterConfig(ckpt.config)
    release = rules
    rules = rules_for(rules, cfg)
    names = set(ckpt.tensors)
    cond = conditions(rules, cfg, names)
    params = expected_params(rules, cfg, cond)
    shapes = expected_shapes(rules, cfg, params)
    present = frozenset(names)
    fates = []
    for key in sorted(names):
        fate = resolve_key(rules, key, cond, params, present)
        want = shapes.get(fate.param or "")
        info = ckpt.tensors.get(key)
        if (
            want is not None
            and fate.action in FILLED_ACTIONS
            and info is not None
            and list(info.shape) != want
        ):
            fate = KeyFate(
                key, "rejected", fate.param, f"shape {list(info.shape)} != {want}: a loud assertion at load"
            )
        fates.append(fate)
    filled = {f.param for f in fates if f.param and f.action in FILLED_ACTIONS}
    partial = _partially_fused(rules, fates, cond)
    param_fates: dict[str, str] = {}
    unfilled, unused, from_target, defaulted, by_chance = [], [], [], [], []
    loaded_unused = [p for p, how in params.items() if how == Fill.UNUSED and p in filled]
    for param, how in params.items():
        if how == Fill.TARGET:
            param_fates[param] = FROM_TARGET
            from_target.append(param)
        elif param in partial:
            param_fates[param] = PARTIAL
        elif param in filled:
            param_fates[param] = FILLED
        elif how == Fill.CHECKPOINT:
            param_fates[param] = UNFILLED
            unfilled.append(param)
        elif how == Fill.UNUSED:
            param_fates[param] = UNUSED
            unused.append(param)
        elif how == Fill.TARGET_IF_ABSENT:
            param_fates[param] = FROM_TARGET
            from_target.append(param)
        elif how == Fill.DEFAULT_IF_ABSENT:
            param_fates[param] = DEFAULTED
            defaulted.append(param)
        elif how == Fill.VERIFIER_IF_NAN:
            param_fates[param] = BY_CHANCE
            by_chance.append(param)
    problem, stage = config_failure(release, cfg)
    build_errors = []
    configured = cfg.num_hidden_layers or 1
    if (
        rules.max_layers is not None
        and configured > rules.max_layers
        and rules.over_max is OverLimit.BUILD_ERROR
    ):
        build_errors.append(
            f"num_hidden_layers {configured} > {rules.max_layers}: the {rules.drafter_class} constructor raises"
        )
    missing_required = [
        req
        for req in rules.required_tensors
        if _holds(req, cond) and not any(req.regex.search(n) for n in names)
    ]
    load_errors = [
        (req.finding, req.note or f"the load fails without a tensor matching {req.pattern!r}", req.fix)
        for req in missing_required
    ]
    d2t_fate = next((f for f in fates if re.search(r"(^|\.)d2t$", f.key)), None)
    if d2t_fate is not None and d2t_fate.action in FILLED_ACTIONS:
        d2t = rules.d2t_encoding.value
    elif cond["reduced_vocab"]:
        d2t = "identity"
    else:
        d2t = "none"
    return LoadReport(
        engine=rules.name,
        revision=rules.revision,
        config_readable=problem is None,
        config_problem=problem,
        fates=fates,
        unfilled=unfilled,
        from_target=from_target,
        defaulted=defaulted,
        conditions=cond,
        release=rules.release,
        drafter_class=rules.drafter_class,
        unused=unused,
        loaded_unused=loaded_unused,
        by_chance=by_chance,
        partial=partial,
        param_fates=param_fates,
        build_errors=build_errors,
        load_errors=load_errors if problem is None and not build_errors else [],
        load_errors_by_chance=bool(missing_required) and all(req.by_chance for req in missing_required),
        failure_stage=stage if problem else ("build" if build_errors else ("load" if load_errors else None)),
        d2t=d2t,
        d2t_encoding=rules.d2t_encoding.value,
        missing_d2t=rules.missing_d2t,
    )


__all__ = [
    "ACTIONS",
    "KeyFate",
    "LoadReport",
    "buffer_count",
    "candidates",
    "conditions",
    "config_failure",
    "config_problem",
    "effective_draft_vocab",
    "engine_flag",
    "expected_params",
    "expected_shapes",
    "fc_count",
    "fc_input_width",
    "loadable_spelling",
    "num_layers",
    "resolve_key",
    "simulate_load",
]


# -- what would load instead -------------------------------------------------------------------

_SPELLINGS: tuple[tuple[str, str], ...] = (
    (r"^model\.", ""),
    (r"^layers\.0\.", "midlayer."),
    (r"^midlayer\.(\d+)\.", r"layers.\1."),
    (r"^midlayer\.", "layers.0."),
    (r"^layers\.(\d+)\.", r"midlayer.\1."),
    (r"^(?!model\.)", "model."),
)


def loadable_spelling(rules: EngineRules, ckpt: Checkpoint, cfg: DrafterConfig, key: str) -> str | None:
    """Another trainer's spelling of ``key`` that this release would load into a parameter, if any."""
    rules = rules_for(rules, cfg)
    names = set(ckpt.tensors)
    cond = conditions(rules, cfg, names)
    params = expected_params(rules, cfg, cond)
    for pattern, repl in _SPELLINGS:
        alt = re.sub(pattern, repl, key, count=1)
        if alt == key or alt in names:
            continue
        fate = resolve_key(rules, alt, cond, params, frozenset(names - {key} | {alt}))
        if fate.action in FILLED_ACTIONS and fate.param is not None:
            return alt
    return None
