"""How a drafter is read: the writer's own meaning or one engine's (:class:`DrafterView`).

EAGLE/SpecForge ``midlayer.*``, TRT-LLM ``midlayer.{i}.*``, SGLang ``additional_layers.{j}.*`` and
any ``model.`` prefix map onto the canonical names of :mod:`.model` (:func:`canonical_name`).
Engine views come only from the rule tables in :mod:`eagle3_forensics.engines`
(:func:`~eagle3_forensics.engines.simulate.simulate_load`,
:func:`~eagle3_forensics.engines.aux_capture.aux_ids_read`,
:func:`~eagle3_forensics.engines.simulate.engine_flag`): keys an engine drops are listed as
unfilled (the loader seeds a stand-in), tensors it takes from the target come from the target,
``d2t`` is read in the table's encoding, aux ids and norm flags are read where and as that engine
reads them. There are no per-engine branches here. Also the target side a loader needs
(:class:`TargetSide`, :func:`target_files`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from eagle3_forensics.checks.aux_layers import trained_ids
from eagle3_forensics.checks.context import Context
from eagle3_forensics.checks.norms import trained_flags
from eagle3_forensics.engines import ENGINE_NAMES, release_label
from eagle3_forensics.engines.aux_capture import aux_capture
from eagle3_forensics.engines.rules import HF_DEFAULT_AUX, EngineRules
from eagle3_forensics.engines.simulate import (
    LoadReport,
    effective_draft_vocab,
    engine_flag,
    expected_params,
    fc_count,
    num_layers,
    simulate_load,
)
from eagle3_forensics.engines.view import rules_for
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.io.checkpoint import Checkpoint
from eagle3_forensics.io.config import DrafterConfig
from eagle3_forensics.io.layout import detect_format
from eagle3_forensics.io.target import open_target

REFERENCE = "reference"
#: every view :func:`load_drafter` can build: the writer's own meaning, then each engine's
VIEW_NAMES: tuple[str, ...] = (REFERENCE, *ENGINE_NAMES)


# ---------------------------------------------------------------------------------------------
# the target side a loader needs
# ---------------------------------------------------------------------------------------------


class TargetSide(Protocol):
    """What :func:`load_drafter` needs from the target (``TargetModel`` and :class:`TargetFiles` have it)."""

    @property
    def num_layers(self) -> int: ...

    @property
    def hidden_size(self) -> int: ...

    @property
    def vocab_size(self) -> int: ...

    def embedding_weight(self) -> torch.Tensor | None: ...

    def lm_head_weight(self) -> torch.Tensor | None: ...


@dataclass
class TargetFiles:
    """A target directory read header-first (no model is built): enough to load a drafter."""

    path: Path
    num_layers: int
    hidden_size: int
    vocab_size: int
    _info: Any = field(repr=False, default=None)

    @property
    def architecture(self) -> str | None:
        archs = self._info.architectures if self._info is not None else []
        return archs[0] if archs else None

    def embedding_weight(self) -> torch.Tensor | None:
        return None if self._info is None else self._info.embedding()

    def lm_head_weight(self) -> torch.Tensor | None:
        return None if self._info is None else self._info.lm_head()


def target_files(path: str | Path) -> TargetFiles:
    info = open_target(path)
    n, h, v = info.num_hidden_layers, info.hidden_size, info.vocab_size
    if n is None or h is None or v is None:
        raise UnusableInputError(f"target config lacks num_hidden_layers/hidden_size/vocab_size: {path}")
    return TargetFiles(Path(path), n, h, v, info)


# ---------------------------------------------------------------------------------------------
# views: how a drafter is read
# ---------------------------------------------------------------------------------------------


@dataclass
class DrafterView:
    """How one view (the writer's meaning or one engine) built the drafter, for reports."""

    engine: str
    family: str
    aux_ids: list[int]  # HF hidden_states indices fed to fc
    aux_source: str
    flags: dict[str, bool]
    d2t_source: str
    from_checkpoint: list[str] = field(default_factory=list)
    from_target: list[str] = field(default_factory=list)
    unfilled: list[str] = field(default_factory=list)  # left uninitialised (stand-in: N(0, 1))
    defaulted: list[str] = field(default_factory=list)
    ignored_keys: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    revision: str | None = None
    release: str | None = None  # the engine release this view follows

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "release": self.release,
            "revision": self.revision,
            "family": self.family,
            "aux_ids_hf": self.aux_ids,
            "aux_source": self.aux_source,
            "flags": self.flags,
            "d2t_source": self.d2t_source,
            "from_checkpoint": self.from_checkpoint,
            "from_target": self.from_target,
            "unfilled": self.unfilled,
            "defaulted": self.defaulted,
            "ignored_keys": self.ignored_keys,
            "notes": self.notes,
        }


_ALIASES = {"draft_id_to_target_id": "d2t", "hot_token_id": "d2t"}


def canonical_name(name: str) -> str:
    """Any trainer's or engine's spelling -> this module's parameter name."""
    n = name.removeprefix("model.")
    n = _ALIASES.get(n, n)
    n = re.sub(r"^midlayer\.(\d+)\.", r"layers.\1.", n)
    n = re.sub(r"^midlayer\.", "layers.0.", n)
    return re.sub(r"^additional_layers\.(\d+)\.", lambda m: f"layers.{int(m.group(1)) + 1}.", n)


_FUSED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


_REST_LAYER = re.compile(r"^layers\.([1-9]\d*)\.(hidden_norm|input_layernorm)\.weight$")


def _engine_role(name: str, rules: EngineRules) -> str | None:
    """The canonical parameter an engine tensor plays (``None``: built but unused by the engine).

    SGLang 0.5.12+ normalises the input of layers >= 1 with their ``hidden_norm`` (fused with the
    residual) and never uses their ``input_layernorm``; the reference drafter's layers >= 1 have
    one input norm, ``input_layernorm`` (vLLM / speculators semantics).
    """
    m = _REST_LAYER.match(name)
    if m is None or rules.rest_layer_input_norm == "input_layernorm":
        return name
    if m.group(2) == rules.rest_layer_input_norm:
        return f"layers.{m.group(1)}.input_layernorm.weight"
    return None


def _param_components(param: str, rules: EngineRules) -> list[str]:
    """An engine parameter (possibly fused, possibly a consumed buffer) -> canonical names."""
    consumed = {r.target: r.pattern.strip("^$").replace("\\", "") for r in rules.consume}
    name = consumed.get(param.removeprefix("model."), param)
    name = canonical_name(name)
    for fused, parts in _FUSED.items():
        if f".{fused}." in name:
            return [name.replace(f".{fused}.", f".{p}.") for p in parts]
    return [name]


def _int(cfg: DrafterConfig, key: str) -> int | None:
    return cfg.int_field(key)


def _flag(cfg: DrafterConfig, key: str) -> bool:
    return cfg.get(key) is True


def rope_settings(cfg: DrafterConfig) -> tuple[float, dict[str, Any] | None]:
    """``(rope_theta, scaling parameters or None)`` from either config spelling (``rope_parameters``, ``rope_scaling``)."""
    theta = cfg.get("rope_theta")
    params: dict[str, Any] | None = None
    rp = cfg.get("rope_parameters")
    if isinstance(rp, dict):
        theta = rp.get("rope_theta", theta)
        if str(rp.get("rope_type", rp.get("type", "default"))) != "default":
            params = dict(rp)
    rs = cfg.get("rope_scaling")
    if (
        params is None
        and isinstance(rs, dict)
        and str(rs.get("rope_type", rs.get("type", "default"))) != "default"
    ):
        params = dict(rs)
    return float(theta) if isinstance(theta, (int, float)) else 10000.0, params


@dataclass
class LoadPlan:
    """Where each canonical tensor comes from, under one view."""

    view: DrafterView
    spec_flags: dict[str, bool]
    num_layers: int
    num_aux: int
    draft_vocab_size: int | None  # what the view expects (None: take lm_head rows)
    tensors: dict[str, torch.Tensor]  # canonical name -> tensor (checkpoint or target)
    zeros: set[str]  # canonical names set to an engine default of zeros
    qk_norm: bool = False  # the view builds Qwen3 q_norm/k_norm
    fc_bias: bool = False  # the view builds fc.bias


def reference_plan(
    ckpt: Checkpoint, cfg: DrafterConfig, raw: dict[str, torch.Tensor], target: TargetSide | None
) -> LoadPlan:
    """The plan under the writer's own view: the trained aux layers, the checkpoint's tensors as saved."""
    ctx = Context(ckpt)
    family = ctx.fmt.family
    ids, level = trained_ids(ctx)
    if ids is None:
        if target is None:
            raise UnusableInputError(
                "the drafter names no aux layers: pass the target to resolve the default"
            )
        ids = [target.num_layers * a // b + c for a, b, c in HF_DEFAULT_AUX]
        source = "trainer default [2, N//2, N-3]"
    else:
        field_name = (
            "eagle_config.eagle_aux_hidden_state_layer_ids"
            if level == "eagle_config"
            else "eagle_aux_hidden_state_layer_ids"
        )
        source = f"{field_name} as the {family} writer meant it" + (
            " (output-of-layer ids, +1)" if level == "eagle_config" else " (HF index)"
        )
    trained = trained_flags(ctx)
    notes: list[str] = []
    nbr = trained.get("norm_before_residual")
    if cfg.style == "speculators" and not isinstance(cfg.at("top", "norm_before_residual"), bool):
        notes.append(
            f"norm_before_residual not stated in the speculators config: {str(bool(nbr)).lower()}, "
            "speculators' own default (vLLM's speculators reader assumes true)"
        )
    flags = {
        "norm_before_residual": bool(nbr),
        "norm_before_fc": trained.get("norm_before_fc") is True,
        "fc_norm": trained.get("fc_norm") is True,
        "norm_output": trained.get("norm_output") is True,
        # SpecForge's norm_output=false: no final norm before lm_head
        "final_norm": not (cfg.style == "flat" and cfg.at("top", "norm_output") is False),
    }
    tensors: dict[str, torch.Tensor] = {}
    for key, t in raw.items():
        name = canonical_name(key)
        if name != "t2d":
            tensors[name] = t
    from_target: list[str] = []
    zeros: set[str] = set()
    if "embed_tokens.weight" not in tensors:
        emb = target.embedding_weight() if target is not None else None
        if emb is None:
            raise UnusableInputError(
                "the drafter has no embed_tokens and the target's embedding is unavailable"
            )
        tensors["embed_tokens.weight"] = emb
        from_target.append("embed_tokens.weight")
    if "lm_head.weight" not in tensors:
        head = target.lm_head_weight() if target is not None else None
        if head is None:
            raise UnusableInputError("the drafter has no lm_head and the target's is unavailable")
        tensors["lm_head.weight"] = head
        from_target.append("lm_head.weight")
    rows = int(tensors["lm_head.weight"].shape[0])
    vocab = _int(cfg, "vocab_size") or (target.vocab_size if target is not None else rows)
    if "d2t" in tensors:
        d2t_source = "checkpoint d2t, read as offsets (every trainer writes offsets)"
    elif rows < vocab:
        zeros.add("d2t")
        d2t_source = "no d2t in the checkpoint: zero offsets (identity), as the writers' loaders leave it"
    else:
        d2t_source = "full vocabulary: no mapping"
    view = DrafterView(
        REFERENCE,
        family,
        list(ids),
        source,
        flags,
        d2t_source,
        from_target=from_target,
        ignored_keys=sorted(k for k in raw if canonical_name(k) == "t2d"),
        notes=notes,
    )
    layers = _int(cfg, "num_hidden_layers") or 1
    qk = cfg.get("model_type") == "qwen3" or any(n.endswith("self_attn.q_norm.weight") for n in tensors)
    fc_bias = _flag(cfg, "bias") or "fc.bias" in tensors
    return LoadPlan(view, flags, layers, len(ids), _int(cfg, "draft_vocab_size"), tensors, zeros, qk, fc_bias)


def engine_plan(
    rules: EngineRules,
    ckpt: Checkpoint,
    cfg: DrafterConfig,
    raw: dict[str, torch.Tensor],
    target: TargetSide | None,
) -> LoadPlan:
    """The plan under one engine release's view: what its loader keeps, drops, defaults and captures."""
    release = rules
    rules = rules_for(release, cfg)
    report: LoadReport = simulate_load(release, ckpt, cfg)
    params = expected_params(rules, cfg, report.conditions)
    who = f"{rules.display} ({rules.release})"
    _refuse_unloadable(report, who)
    src = _engine_sources(report, rules, raw, target)
    tensors = src.tensors
    hf, source = _engine_aux(rules, cfg, target, who)
    flags = {f: engine_flag(rules, cfg, f) for f in ("norm_before_residual", "norm_before_fc", "fc_norm")}
    flags["norm_output"] = rules.norm_output_meaning == "post_norm_recurrence" and engine_flag(
        rules, cfg, "norm_output"
    )
    flags["final_norm"] = True  # engines always apply the final norm before lm_head
    n_aux, _ = fc_count(rules, cfg)
    if n_aux != len(hf):
        raise UnusableInputError(
            f"{who} captures {len(hf)} aux layers {hf} but builds fc for {n_aux} aux states: the draft step "
            "fails on the shape"
        )
    layers, v_cfg = num_layers(rules, cfg), effective_draft_vocab(rules, cfg)
    if "d2t" in tensors:
        d2t_source = f"checkpoint d2t read as {rules.d2t_encoding} ({who})"
    elif "d2t" in src.zeros:
        d2t_source = f"no d2t: {rules.missing_d2t}"
    else:
        d2t_source = "full vocabulary: no mapping"
    view = DrafterView(
        rules.name,
        detect_format(ckpt, cfg).family,
        hf,
        source,
        flags,
        d2t_source,
        from_checkpoint=sorted(src.from_ckpt),
        from_target=sorted(set(src.from_target)),
        unfilled=src.fresh,
        defaulted=sorted(src.defaulted),
        ignored_keys=sorted(src.ignored),
        notes=list(rules.notes),
        revision=rules.revision,
        release=release_label(rules),
    )
    if rules.d2t_encoding not in ("offsets", "absolute"):
        raise UnusableInputError(f"unknown d2t encoding {rules.d2t_encoding!r} in the {rules.name} table")
    if rules.d2t_encoding == "absolute" and "d2t" in tensors:
        d2t = tensors["d2t"].to(torch.int64)
        tensors["d2t"] = d2t - torch.arange(d2t.shape[0], dtype=torch.int64)
    qk = any(".q_norm." in p for p in params)
    fc_bias = any(p.endswith("fc.bias") for p in params)
    return LoadPlan(view, flags, layers, n_aux, v_cfg, tensors, src.zeros, qk, fc_bias)


def _refuse_unloadable(report: LoadReport, who: str) -> None:
    """A drafter the release would not start, build or load has no engine view: one error saying why."""
    if not report.config_readable:
        raise UnusableInputError(f"{who} would refuse this drafter at start-up: {report.config_problem}")
    if report.build_errors:
        raise UnusableInputError(f"{who} would fail to build this drafter: {report.build_errors[0]}")
    if report.load_errors:
        chance = " (unless uninitialised memory happens to be valid)" if report.load_errors_by_chance else ""
        raise UnusableInputError(f"{who} would fail to load this drafter{chance}: {report.load_errors[0][1]}")
    rejected = report.keys_with("rejected")
    if rejected:
        raise UnusableInputError(
            f"{who} would refuse this drafter at load (key "
            f"{rejected[0]!r}{f' and {len(rejected) - 1} more' if len(rejected) > 1 else ''})"
        )


@dataclass
class _Sources:
    """Where each canonical tensor comes from under an engine's view, and what it leaves out."""

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    from_ckpt: list[str] = field(default_factory=list)
    from_target: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    zeros: set[str] = field(default_factory=set)
    defaulted: list[str] = field(default_factory=list)
    fresh: list[str] = field(default_factory=list)


def _target_tensor(rules: EngineRules, target: TargetSide | None, name: str) -> torch.Tensor:
    src: torch.Tensor | None = None
    if target is not None and name == "embed_tokens.weight":
        src = target.embedding_weight()
    elif target is not None and name == "lm_head.weight":
        src = target.lm_head_weight()
    if src is None:
        raise UnusableInputError(f"{rules.display} takes {name} from the target, which is unavailable")
    return src


def _engine_sources(
    report: LoadReport, rules: EngineRules, raw: dict[str, torch.Tensor], target: TargetSide | None
) -> _Sources:
    """Each key's fate as a tensor source: the checkpoint, the target, an engine default, or ignored."""
    out = _Sources()
    for fate in report.fates:
        role = _engine_role(canonical_name(fate.key), rules)
        name = role or canonical_name(fate.key)
        if fate.action in ("loaded", "renamed", "fused", "consumed") and role is None:
            out.ignored.append(fate.key)  # loaded into a parameter the engine never uses
        elif fate.action in ("loaded", "renamed", "fused", "consumed"):
            out.tensors[name] = raw[fate.key]
            out.from_ckpt.append(fate.key)
        elif fate.action == "overwritten":
            out.tensors[name] = _target_tensor(rules, target, name)
            out.from_target.append(name)
        else:  # dropped, skipped, warned
            out.ignored.append(fate.key)
    for param in report.from_target:
        for name in _param_components(param, rules):
            if name.startswith("verifier_"):
                continue  # speculators' verifier_lm_head / verifier_norm: not part of the drafter's forward
            if name not in out.tensors:
                out.tensors[name] = _target_tensor(rules, target, name)
                out.from_target.append(name)
    for param in report.defaulted:
        for name in _param_components(param, rules):
            if name == "t2d" or name in out.tensors:
                continue
            if name == "d2t":
                out.zeros.add(name)
            out.defaulted.append(name)
    out.fresh = sorted(
        {r for p in report.unfilled for n in _param_components(p, rules) if (r := _engine_role(n, rules))}
    )
    return out


def _engine_aux(
    rules: EngineRules, cfg: DrafterConfig, target: TargetSide | None, who: str
) -> tuple[list[int], str]:
    """The HF layers the release captures for this drafter and target, and where that comes from."""
    n_layers = target.num_layers if target is not None else None
    arch = getattr(target, "architecture", None) if target is not None else None
    reading = aux_capture(rules, cfg, arch, n_layers)
    assumed = "; target class assumed" if reading.rule_assumed else ""
    if reading.ids is not None and reading.captured is not None:
        field_name = (
            "eagle_config.eagle_aux_hidden_state_layer_ids"
            if reading.level == "eagle_config"
            else "eagle_aux_hidden_state_layer_ids"
        )
        return list(reading.captured), f"{field_name} read by {who} ({reading.rule.describe()}{assumed})"
    if n_layers is None:
        raise UnusableInputError(f"{who} uses its default aux layers: pass the target to resolve them")
    captured = reading.rule.capture(None, n_layers)
    if captured is None:
        raise UnusableInputError(f"{who} lets an external model choose the aux layers for this target")
    return captured, f"{who} {reading.rule.describe()}{assumed}"
