"""``repair_plan``: the plan for an engine-ready copy of a drafter, computed and checked in memory.

``repair_plan(src, engine)`` diagnoses ``src`` for one serving engine and turns the findings into a
:class:`RepairPlan`: explicit :class:`Step` s (what changes, which tensors, which finding each fixes)
or :class:`Refusal` s (why no conversion can fix it, and the options left). The plan is computed from
the same engine rule tables the load simulator uses: tensor names are mapped to the parameters that
:func:`~eagle3_forensics.engines.simulate.expected_params` lists for the repaired config, renames are
the table's renames (and their inverses), and a tensor the engine would replace with the target's is
stripped because the table says so. Before anything is written, the planned drafter is checked in
memory with every diagnose check; anything left over becomes a refusal.

Every finding code has an entry in :data:`~eagle3_forensics.repair.policy.POLICY`: fixed by which
kinds of step, refused (with the options), or never an error. Nothing a diagnosis reports as an
error is silently ignored. :mod:`.execute` writes a plan; :mod:`eagle3_forensics.views.repair`
renders it.
"""

from __future__ import annotations

import copy
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from eagle3_forensics.checks import run_checks
from eagle3_forensics.checks.aux_layers import trained_ids
from eagle3_forensics.checks.context import Context
from eagle3_forensics.checks.diagnose import Diagnosis
from eagle3_forensics.checks.norms import trained_flags
from eagle3_forensics.engines import ENGINES, release_label, resolve_release, split_spec
from eagle3_forensics.engines.rules import FROM_TARGET, TARGET_IF_ABSENT, ConfigStyle, EngineRules
from eagle3_forensics.engines.simulate import (
    conditions,
    engine_flag,
    expected_params,
    resolve_key,
    rules_for,
    simulate_load,
)
from eagle3_forensics.errors import BadArgumentsError, ForensicsError, UnusableInputError
from eagle3_forensics.findings import Finding, Severity, sort_findings
from eagle3_forensics.io.checkpoint import (
    CONFIG_FILE,
    SAFETENSORS_FILE,
    Checkpoint,
    TensorInfo,
    open_checkpoint,
    st_dtype,
    torch_dtype_of,
)
from eagle3_forensics.io.config import AUX_FIELD, EAGLE, LAYER, NORM_FLAGS, TOP, DrafterConfig
from eagle3_forensics.io.layout import is_drafter_weight
from eagle3_forensics.io.target import TargetInfo, open_target
from eagle3_forensics.repair.policy import (
    _SERVE_VLLM,
    CONFIG,
    DROP,
    FORMAT,
    POLICY,
    PRECONDITION,
    RENAME,
    REPAIRABLE_ENGINES,
    SHIP,
    STRIP,
    UNUSABLE,
    VOCAB,
)
from eagle3_forensics.vocab.inputs import load_token_ids
from eagle3_forensics.vocab.mapping import (
    absolute_to_offsets,
    build_vocab_mapping,
    check_t2d,
    classify_mapping,
    d2t_from_t2d,
    t2d_from_d2t,
    undo_double_offset,
)

RECORD_FILE = "repair.json"


class RepairArgumentError(BadArgumentsError, ValueError):
    """Bad arguments (unknown engine, existing DST without force, DST inside SRC, ...): exit 2."""


# -- result types -----------------------------------------------------------------------------------


@dataclass
class Step:
    """One explicit change. ``tensors`` are the source names affected (or the names added)."""

    kind: str
    description: str
    tensors: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)  # finding codes this step addresses
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "description": self.description,
            "tensors": self.tensors,
            "fixes": self.fixes,
            "detail": self.detail,
        }


@dataclass
class Refusal:
    """Why the repair will not be done, and what the user can do instead."""

    code: str  # a finding code, or PRECONDITION
    reason: str
    options: list[str] = field(default_factory=list)
    finding: str | None = None  # the finding's message, when one triggered it

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "reason": self.reason, "options": self.options, "finding": self.finding}

    def text(self) -> str:
        out = f"{self.code}: {self.reason}."
        if self.finding and self.finding not in self.reason:
            out += f" (Finding: {self.finding.rstrip('.')}.)"
        if self.options:
            out += " Options: " + "; ".join(self.options) + "."
        return out


@dataclass
class _Planned:
    """One tensor of the planned output: copied from the source (bit-exact) or new data."""

    name: str
    info: TensorInfo
    source: str | None = None  # source tensor name (copied bytes)
    data: torch.Tensor | None = None  # new content (rewritten or added)


@dataclass
class RepairPlan:
    """What ``repair`` would do to ``source`` for ``engine``; display it, or pass it to :func:`execute`."""

    source: str
    engine: str
    target: str | None
    options: dict[str, Any]
    release: str = ""  # the release the copy is made ready for (its label)
    spec: str = ""  # the --engine spec naming that release again (verification, hints)
    steps: list[Step] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    coverage: dict[str, dict[str, Any]] = field(default_factory=dict)  # source error code -> how handled
    diagnosis: Diagnosis | None = None  # of the source, for this engine
    predicted: list[Finding] = field(default_factory=list)  # findings of the planned drafter (in memory)
    unusable: str | None = None
    config_before: dict[str, Any] = field(default_factory=dict)
    config_after: dict[str, Any] = field(default_factory=dict)
    files_copied: list[str] = field(default_factory=list)
    files_not_copied: list[str] = field(default_factory=list)
    _planned: dict[str, _Planned] = field(default_factory=dict, repr=False)
    _ckpt: Checkpoint | None = field(default=None, repr=False)
    _target_info: TargetInfo | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.unusable is None and not self.refusals

    @property
    def status(self) -> str:
        if self.unusable is not None:
            return "unusable"
        if self.refusals:
            return "refused"
        return "ready" if self.steps else "nothing to change"

    @property
    def tensors_changed(self) -> bool:
        return any(s.kind in (RENAME, DROP, STRIP, SHIP, VOCAB, FORMAT) for s in self.steps)

    @property
    def config_changed(self) -> bool:
        return self.config_before != self.config_after

    def source_errors(self) -> list[Finding]:
        if self.diagnosis is None:
            return []
        return [
            f
            for f in self.diagnosis.findings
            if f.severity is Severity.ERROR and f.engine in (None, self.engine)
        ]

    def predicted_errors(self) -> list[Finding]:
        return [f for f in self.predicted if f.severity is Severity.ERROR and f.engine in (None, self.engine)]

    def steps_table(self) -> list[dict[str, Any]]:
        """One row per step (for a DataFrame in a notebook)."""
        return [
            {
                "#": i,
                "kind": s.kind,
                "description": s.description,
                "tensors": len(s.tensors),
                "fixes": ", ".join(s.fixes),
            }
            for i, s in enumerate(self.steps, 1)
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "engine": self.engine,
            "release": self.release,
            "engine_spec": self.spec or self.engine,
            "target": self.target,
            "status": self.status,
            "options": self.options,
            "steps": [s.to_dict() for s in self.steps],
            "refusals": [r.to_dict() for r in self.refusals],
            "coverage": self.coverage,
            "source_errors": [f.to_dict() for f in self.source_errors()],
            "predicted_findings": [f.to_dict() for f in self.predicted],
            "unusable": self.unusable,
            "config_after": self.config_after,
            "files_copied": self.files_copied,
            "files_not_copied": self.files_not_copied,
        }


# -- the planned drafter, in memory --------------------------------------------------------------------


class _PlannedCheckpoint(Checkpoint):
    """A checkpoint that exists only as a plan: tensors read from the source or from new data."""

    def __init__(
        self, path: Path, config: dict[str, Any], planned: dict[str, _Planned], src: Checkpoint
    ) -> None:
        super().__init__(
            path=path,
            config=config,
            tensors={n: p.info for n, p in planned.items()},
            weight_format="safetensors",
        )
        self._planned = planned
        self._src = src

    def read_tensor(self, name: str) -> torch.Tensor:
        p = self._planned[name]
        if p.data is not None:
            return p.data
        assert p.source is not None
        return self._src.read_tensor(p.source)

    def read_slice(self, name: str, max_elements: int = 1 << 16) -> torch.Tensor:
        p = self._planned[name]
        if p.data is None:
            assert p.source is not None
            return self._src.read_slice(p.source, max_elements)
        if p.data.numel() <= max_elements:
            return p.data
        row = math.prod(p.data.shape[1:]) or 1
        return p.data[: max(1, max_elements // row)]


def _info(name: str, t: torch.Tensor, shard: str = SAFETENSORS_FILE) -> TensorInfo:
    dtype = st_dtype(t.dtype)
    shape = tuple(int(d) for d in t.shape)
    return TensorInfo(name, shape, dtype, shard, t.numel() * t.element_size())


# -- planning -----------------------------------------------------------------------------------------

_USED = ("loaded", "renamed", "fused", "consumed", "skipped", "overwritten")
_COPYABLE_SUFFIXES = (".json", ".md", ".txt", ".model", ".jinja", ".tiktoken", ".py")
_NEVER_COPY = (CONFIG_FILE, RECORD_FILE)


def _literal(pattern: str) -> str | None:
    """The literal prefix a ``^literal`` regex matches, or ``None`` for anything fancier."""
    if not pattern.startswith("^"):
        return None
    body = pattern[1:]
    lit = re.sub(r"\\(.)", r"\1", body)
    return lit if re.escape(lit) == body else None


def _layout_renames() -> list[tuple[str, str]]:
    """Every engine's layer renames and their inverses: the spellings a tensor name can take."""
    out: list[tuple[str, str]] = [
        (r"^midlayer\.", "layers.0."),
        (r"^layers\.0\.", "midlayer."),
        (r"^midlayer\.(\d+)\.", r"layers.\1."),
        (r"^layers\.(\d+)\.", r"midlayer.\1."),
    ]
    for rules in ENGINES.values():
        for rule in rules.renames:
            src = _literal(rule.pattern)
            if src is None or "layer" not in src:
                continue  # only anchored layer-prefix renames are spellings of the same tensor
            out.append((rule.pattern, rule.target))
            out.append(("^" + re.escape(rule.target), src))
    return out


def _spellings(key: str) -> list[str]:
    """``key`` first, then the same tensor under every other layout's spelling."""
    base = key.removeprefix("model.")
    variants = [base]
    for pattern, repl in _layout_renames():
        new = re.sub(pattern, repl, base, count=1)
        if new != base and new not in variants:
            variants.append(new)
    out = [key]
    for v in variants:
        for cand in (v, "model." + v):
            if cand not in out:
                out.append(cand)
    return out


def _canonical(rules: EngineRules, name: str) -> str:
    name = name.removeprefix("model.")
    for rule in rules.renames:
        name = rule.regex.sub(rule.target, name, count=rule.count)
    return name.removeprefix("model.")


def _rope_both(d: dict[str, Any]) -> tuple[list[str], str | None]:
    """Write RoPE in both forms (legacy ``rope_theta``/``rope_scaling`` and ``rope_parameters``)."""
    changes: list[str] = []
    theta, scaling, params = d.get("rope_theta"), d.get("rope_scaling"), d.get("rope_parameters")
    for value in (theta, params.get("rope_theta") if isinstance(params, dict) else None):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return (
                changes,
                f"rope_theta {value!r} is not a number; which value the drafter was trained with is unknown",
            )
    if isinstance(params, dict):
        p_theta = params.get("rope_theta")
        if p_theta is None:
            return changes, None  # per-layer-type parameters: leave them alone
        if theta is None:
            d["rope_theta"] = p_theta
            changes.append(
                f"rope_theta = {p_theta} (mirrors rope_parameters for revisions that read only the "
                "legacy field)"
            )
        elif float(theta) != float(p_theta):
            return changes, (
                f"rope_theta ({theta}) and rope_parameters.rope_theta ({p_theta}) disagree; "
                "which one the drafter was trained with is unknown"
            )
        rtype = params.get("rope_type", params.get("type", "default"))
        if rtype != "default" and scaling is None:
            d["rope_scaling"] = {k: v for k, v in params.items() if k != "rope_theta"}
            changes.append(f"rope_scaling = {d['rope_scaling']} (mirrors rope_parameters)")
    elif theta is not None:
        new: dict[str, Any] = {"rope_type": "default", "rope_theta": theta}
        if isinstance(scaling, dict):
            new["rope_type"] = scaling.get("rope_type", scaling.get("type", "default"))
            new.update({k: v for k, v in scaling.items() if k not in ("type", "rope_type")})
        d["rope_parameters"] = new
        changes.append(f"rope_parameters = {new} (current form of rope_theta/rope_scaling)")
    return changes, None


class _Planner:
    """Builds one :class:`RepairPlan`. Every decision is recorded as a step or a refusal."""

    def __init__(
        self, plan: RepairPlan, ctx: Context, rebuild_vocab_from: str | Path | None, trust: str | None
    ) -> None:
        self.plan = plan
        self.ctx = ctx
        self.release = ctx.releases[0]
        self.rules = ctx.rules(plan.engine)
        self.display = f"{self.rules.display} ({self.rules.release})"
        self.data_path = rebuild_vocab_from
        self.trust = trust
        self.cfg = ctx.cfg
        self.new_tensors: dict[str, torch.Tensor] = {}  # output name -> new data (rewritten or added)
        self.planned: dict[str, _Planned] = {}

    # -- helpers -----------------------------------------------------------------------------------
    def step(
        self,
        kind: str,
        description: str,
        tensors: list[str] | None = None,
        fixes: tuple[str, ...] = (),
        **detail: Any,
    ) -> None:
        diagnosis = self.plan.diagnosis
        present = (
            {f.code for f in diagnosis.findings if f.engine in (None, self.plan.engine)}
            if diagnosis
            else set()
        )
        relevant = [c for c in fixes if c in present]
        self.plan.steps.append(Step(kind, description, list(tensors or []), relevant, detail))

    def refuse(
        self, code: str, reason: str, options: list[str] | tuple[str, ...] = (), finding: str | None = None
    ) -> None:
        self.plan.refusals.append(
            Refusal(code, reason, [o.format(engine=self.display) for o in options], finding)
        )

    # -- config --------------------------------------------------------------------------------------
    def build_config(self) -> dict[str, Any]:
        raw = copy.deepcopy(self.ctx.ckpt.config)
        # a release that reads no speculators config gets the flat config of its model class
        flatten = (
            self.cfg.style == "speculators" and ConfigStyle.SPECULATORS not in self.release.config_styles
        )
        if flatten:
            out = self._flatten(raw)
        else:
            out = raw
            allowed = self.rules.flat_architectures
            if self.cfg.style == "flat" and allowed and not any(a in allowed for a in self.cfg.architectures):
                out["architectures"] = [allowed[0]]
                self.step(
                    CONFIG,
                    f"architectures = {[allowed[0]]} (the model class {self.display} builds; "
                    f"was {self.cfg.architectures or 'absent'})",
                    fixes=("CONFIG_UNREADABLE_BY_ENGINE",),
                    keys=["architectures"],
                )
        llama = (
            out[LAYER]
            if (not flatten and self.cfg.style == "speculators" and isinstance(out.get(LAYER), dict))
            else out
        )
        self._sizes(out)
        self._tie(out, llama)
        changes, problem = _rope_both(llama)
        if problem:
            self.refuse(
                PRECONDITION,
                problem,
                [
                    "write the RoPE settings the drafter was trained with into a copy "
                    "of config.json and repair that copy"
                ],
            )
        for text in changes:
            self.step(CONFIG, text, fixes=("ROPE_MISMATCH",), keys=["rope"])
        self._aux_enabled(out)
        self._aux(out)
        self._norms(out)
        return out

    def _aux_enabled(self, out: dict[str, Any]) -> None:
        """fc trained over k aux states needs them captured: drop use_aux_hidden_state: false."""
        fc = self.ctx.shape("fc.weight")
        ht = self.cfg.target_hidden_size or self.cfg.hidden_size
        if fc is None or len(fc) != 2 or not ht or fc[1] < 2 * ht:
            return
        for holder_name, holder in (
            (EAGLE, out.get(EAGLE)),
            (f"{LAYER}.{EAGLE}", (out.get(LAYER) or {}).get(EAGLE)),
        ):
            if isinstance(holder, dict) and holder.get("use_aux_hidden_state") is False:
                del holder["use_aux_hidden_state"]
                self.step(
                    CONFIG,
                    f"removed {holder_name}.use_aux_hidden_state = false: fc.weight {list(fc)} was trained over "
                    f"{fc[1] // ht} aux states, which {self.display} captures only when it is true (the default)",
                    fixes=("AUX_HIDDEN_STATE_DISABLED", "FC_WIDTH_MISMATCH"),
                    keys=[f"{holder_name}.use_aux_hidden_state"],
                )
        if isinstance(out.get(EAGLE), dict) and not out[EAGLE]:
            del out[EAGLE]

    def _flatten(self, raw: dict[str, Any]) -> dict[str, Any]:
        """speculators config -> the flat LlamaForCausalLMEagle3 config SGLang's model class reads."""
        layer = raw.get(LAYER) if isinstance(raw.get(LAYER), dict) else {}
        assert isinstance(layer, dict)
        arch = (self.rules.flat_architectures or ("LlamaForCausalLMEagle3",))[0]
        out: dict[str, Any] = {"architectures": [arch]}
        out.update({k: v for k, v in layer.items() if k not in ("architectures", EAGLE)})
        if "model_type" not in out:
            out["model_type"] = "llama"  # speculators' default draft architecture
        carried = []
        skip = {
            "architectures",
            "speculators_model_type",
            "speculators_version",
            "speculators_config",
            LAYER,
            "embed_requires_grad",
            AUX_FIELD,
            EAGLE,
            *NORM_FLAGS,
        }
        for key, value in raw.items():
            if key in skip or value is None:
                continue
            if key in ("draft_vocab_size", "target_hidden_size") or key not in out:
                out[key] = value
                carried.append(key)
        nested = (
            {k: v for k, v in (layer.get(EAGLE) or {}).items() if k != AUX_FIELD}
            if isinstance(layer.get(EAGLE), dict)
            else {}
        )
        nested.update(
            {k: v for k, v in (raw.get(EAGLE) or {}).items() if k != AUX_FIELD}
            if isinstance(raw.get(EAGLE), dict)
            else {}
        )
        if nested:
            out[EAGLE] = nested
        flags = {f: raw.get(f) for f in NORM_FLAGS if f in raw}
        rules = rules_for(self.release, DrafterConfig(out))
        enabled = [f for f, value in flags.items() if value is True]
        unsupported = [f for f in enabled if f not in rules.implemented_flags]
        if unsupported:
            self.refuse(
                "NORM_FLAGS_UNSUPPORTED",
                f"the drafter was trained with {', '.join(unsupported)} = true, which "
                f"{self.display} does not implement",
                POLICY["NORM_FLAGS_UNSUPPORTED"].options,
            )
        carried_flags = [f for f in enabled if f in rules.implemented_flags]
        for flag in carried_flags:
            out[flag] = True  # every SGLang release that implements a flag reads it at the top level
        # A speculators config without norm_before_residual was trained with speculators' default, false
        # (config.py in every release): the residual before hidden_norm, which is what a flat config means.
        dropped_flags = [f"{k}={str(v).lower()}" for k, v in flags.items() if v is False]
        self.step(
            CONFIG,
            f"speculators config → flat {arch} config: transformer_layer_config fields moved to "
            f"the top level, kept {', '.join(carried) or 'no other fields'}; speculators_* fields and "
            f"embed_requires_grad dropped"
            + (f"; {', '.join(f'{f} = true' for f in carried_flags)} kept" if carried_flags else "")
            + (
                f"; norm flags {', '.join(dropped_flags)} dropped ({self.display}'s own behaviour)"
                if dropped_flags
                else ""
            ),
            fixes=("CONFIG_UNREADABLE_BY_ENGINE",),
            keys=sorted(out),
        )
        return out

    def _sizes(self, out: dict[str, Any]) -> None:
        lm = self.ctx.shape("lm_head.weight")
        current = out.get("draft_vocab_size")
        want, source = (lm[0], "lm_head rows") if lm else (current, "")
        if want is None:
            d2t = self.ctx.shape("d2t")
            want, source = (d2t[0], "d2t length") if d2t else (None, "")
        if want is not None and current != want:
            out["draft_vocab_size"] = want
            self.step(
                CONFIG,
                f"draft_vocab_size = {want} ({source}; was {current})",
                fixes=("DRAFT_VOCAB_SIZE_MISSING", "VOCAB_SIZE_INCONSISTENT"),
                keys=["draft_vocab_size"],
            )

    def _tie(self, out: dict[str, Any], llama: dict[str, Any]) -> None:
        if self.ctx.find("lm_head.weight") is None:
            return  # the head is the embedding: tying is what the drafter means
        holders = [
            d for d in (out, llama, out.get(EAGLE)) if isinstance(d, dict) and "tie_word_embeddings" in d
        ]
        changed = False
        for d in holders:
            if d["tie_word_embeddings"] is not False:
                d["tie_word_embeddings"] = False
                changed = True
        if not holders:
            llama["tie_word_embeddings"] = False
            changed = True
        if changed:
            self.step(
                CONFIG,
                "tie_word_embeddings = false (the drafter has its own lm_head)",
                fixes=("TIED_EMBEDDINGS_ON_REDUCED_VOCAB",),
                keys=["tie_word_embeddings"],
            )

    def _aux(self, out: dict[str, Any]) -> None:
        hf, level = trained_ids(self.ctx)
        if hf is None:
            return  # trainer default: the same physical layers on every engine
        fixes = ("AUX_LAYER_IDS_IGNORED_BY_ENGINE", "AUX_LAYER_IDS_CONVENTION_SHIFT", "AUX_LAYER_IDS_INVALID")
        src_field = f"{'eagle_config.' if level == EAGLE else ''}{AUX_FIELD}"
        rules = rules_for(self.release, DrafterConfig(out))
        reading = self.ctx.aux(self.plan.engine)
        rule, n = reading.rule, self.ctx.target_layers
        # write where every runner of the release reads (a runner-only level is not relied on)
        write_levels = [s.level for s in rules.aux_sources if not s.runners]
        if not write_levels or not rule.reads_drafter:
            return
        stored = rule.stored_for(hf, n)
        if stored is None:
            self.refuse(
                PRECONDITION,
                f"the trained aux layers (HF {hf}) cannot be written so that {self.display} captures them "
                f"on this target ({rule.describe()})",
                [_SERVE_VLLM],
            )
            return
        assumed = " (no --target: the target class's rule assumed)" if reading.rule_assumed else ""
        for lvl in write_levels:
            holder = out if lvl == TOP else out.setdefault(EAGLE, {})
            if holder.get(AUX_FIELD) != stored:
                holder[AUX_FIELD] = stored
                where = AUX_FIELD if lvl == TOP else f"eagle_config.{AUX_FIELD}"
                self.step(
                    CONFIG,
                    f"{where} = {stored} ({self.display}: {rule.describe()}{assumed}: HF layers {hf}, as "
                    f"trained; from {src_field})",
                    fixes=fixes,
                    keys=[where],
                )
        # The ids live in one place, in this engine's convention: a field it does not read (or reads only
        # under one runner) is removed, so no other revision or runner can read it in the wrong convention.
        removed = []
        if TOP not in write_levels and AUX_FIELD in out:
            del out[AUX_FIELD]
            removed.append(AUX_FIELD)
        for holder_name, holder in (
            (EAGLE, out.get(EAGLE)),
            (
                f"{LAYER}.{EAGLE}",
                (out.get(LAYER) or {}).get(EAGLE) if isinstance(out.get(LAYER), dict) else None,
            ),
        ):
            if EAGLE in write_levels and holder_name == EAGLE:
                continue
            if isinstance(holder, dict) and AUX_FIELD in holder:
                del holder[AUX_FIELD]
                removed.append(f"{holder_name}.{AUX_FIELD}")
        if isinstance(out.get(EAGLE), dict) and not out[EAGLE]:
            del out[EAGLE]
        if removed:
            self.step(
                CONFIG,
                f"removed {', '.join(removed)}: {self.display} does not read it everywhere; the ids now live "
                f"only where it reads them, in its convention (another reader would shift them)",
                fixes=fixes,
                keys=removed,
            )

    def _norms(self, out: dict[str, Any]) -> None:
        trained = trained_flags(self.ctx)
        view = DrafterConfig(out)
        rules = rules_for(self.release, view)
        if not rules.norm_flags:
            return
        for flag, value in trained.items():
            spec = rules.norm_flag(flag)
            if not isinstance(value, bool) or spec is None:
                continue
            if engine_flag(rules, view, flag) == value:
                continue
            fixes = ("NORM_FLAGS_UNSUPPORTED", "NORM_OUTPUT_MEANING_CLASH")
            if view.style == "flat" and flag == "norm_output" and value is False:
                for holder in (out, out.get(EAGLE)):
                    if isinstance(holder, dict):
                        holder.pop("norm_output", None)
                self.step(
                    CONFIG,
                    "removed norm_output: in a flat (SpecForge) config it means 'norm before "
                    f"lm_head', which {self.display} would read as post-norm recurrence",
                    fixes=fixes,
                    keys=["norm_output"],
                )
            else:
                # write it at the first level the class reads it from (that one wins)
                nested = out.get(EAGLE)
                if spec.levels[0] == EAGLE:
                    holder = out.setdefault(EAGLE, {}) if not isinstance(nested, dict) else nested
                else:
                    holder = out
                holder[flag] = value
                where = flag if holder is out else f"eagle_config.{flag}"
                self.step(
                    CONFIG,
                    f"{where} = {str(value).lower()} (the trained value, where {self.display} reads it)",
                    fixes=fixes,
                    keys=[flag],
                )
            view = DrafterConfig(out)
            rules = rules_for(self.release, view)

    # -- vocabulary ------------------------------------------------------------------------------------
    def build_vocab(self, out_cfg: dict[str, Any]) -> None:
        ctx = self.ctx
        big_v = ctx.target_vocab_size
        view = DrafterConfig(out_cfg)
        v = view.draft_vocab_size or ctx.draft_vocab_size
        if big_v is None or v is None:
            return
        d2t_name, t2d_name = ctx.find("d2t"), ctx.find("t2d")
        d2t = ctx.tensor(d2t_name) if d2t_name else None
        t2d = ctx.tensor(t2d_name) if t2d_name else None
        cast = False
        if d2t is not None and d2t.is_floating_point() and d2t.numel() and bool((d2t == d2t.round()).all()):
            d2t, cast = d2t.to(torch.int64), True
        res = classify_mapping(d2t, t2d, big_v, v)
        reduced = v < big_v
        if res.kind == "missing" and not reduced:
            return
        t2d_problems = check_t2d(t2d, big_v, v) if t2d is not None else []
        t2d_ok = t2d is not None and all("expected bool" in p for p in t2d_problems)
        t2d_default = (
            t2d is not None and t2d.dim() == 1 and (bool(t2d.bool().all()) or not bool(t2d.bool().any()))
        )
        d2t_alone_ok = d2t is not None and classify_mapping(d2t, None, big_v, v).kind == "unverified_offsets"
        new_d2t: torch.Tensor | None = None
        new_t2d: torch.Tensor | None = None
        how = ""
        fixes: tuple[str, ...] = (
            "D2T_MISSING",
            "D2T_ABSOLUTE",
            "D2T_DOUBLE_OFFSET",
            "D2T_T2D_MISMATCH",
            "D2T_INVALID",
            "T2D_INVALID",
            "VOCAB_SIZE_INCONSISTENT",
        )
        code = {
            "missing": "D2T_MISSING",
            "identity_default": "D2T_MISSING",
            "absolute": "D2T_ABSOLUTE",
            "double_offset": "D2T_DOUBLE_OFFSET",
        }.get(res.kind, "D2T_T2D_MISMATCH" if t2d is not None else "D2T_INVALID")
        if res.consistent:
            if cast:
                new_d2t, how = d2t, "d2t cast to int64 (its values were already valid offsets)"
            if t2d is not None and not t2d_ok:
                if res.kind == "consistent_offsets" or t2d_default or self.trust == "d2t":
                    why = (
                        "t2d agrees with d2t but " + "; ".join(t2d_problems)
                        if res.kind == "consistent_offsets"
                        else "t2d was a default buffer"
                        if t2d_default
                        else "--trust-d2t"
                    )
                    new_t2d = t2d_from_d2t(d2t, big_v)
                    how = (how + "; " if how else "") + f"t2d rebuilt from d2t ({why})"
                elif self.data_path is not None:
                    new_d2t, new_t2d, how = self._from_data(v, big_v, t2d)
                else:
                    self.refuse(
                        "T2D_INVALID",
                        "t2d is not a valid mask (" + "; ".join(t2d_problems) + ") and "
                        "d2t cannot be checked against it",
                        POLICY["T2D_INVALID"].options,
                    )
                    return
        elif res.kind == "absolute":
            new_d2t, how = (
                absolute_to_offsets(d2t),
                "d2t converted from absolute ids to offsets (d2t - arange(v))",
            )
        elif res.kind == "double_offset":
            new_d2t, how = undo_double_offset(d2t), "second offset conversion undone (d2t + arange(v))"
        elif res.kind in ("missing", "identity_default"):
            what = "no d2t" if res.kind == "missing" else "d2t is an all-zero default buffer"
            if t2d_ok and not t2d_default:
                new_d2t, how = d2t_from_t2d(t2d), f"d2t rebuilt from t2d ({what}; t2d is a valid mask)"
                if self.data_path is not None:
                    how += "; --rebuild-vocab-from not needed (t2d can be trusted)"
            elif self.data_path is not None:
                new_d2t, new_t2d, how = self._from_data(v, big_v, t2d)
            else:
                self.refuse(
                    code,
                    f"{what} and t2d cannot be trusted to rebuild it"
                    + (f" ({'; '.join(t2d_problems)})" if t2d_problems else " (there is none)"),
                    POLICY["D2T_MISSING"].options,
                )
                return
        else:
            detail = f"d2t classified {res.kind}: {res.meaning}"
            if self.data_path is not None:
                new_d2t, new_t2d, how = self._from_data(v, big_v, t2d)
            elif self.trust == "t2d" and t2d_ok and not t2d_default:
                new_d2t, how = d2t_from_t2d(t2d), f"d2t rebuilt from t2d (--trust-t2d; {detail})"
            elif self.trust == "d2t" and d2t_alone_ok:
                new_t2d, how = t2d_from_d2t(d2t, big_v), f"t2d rebuilt from d2t (--trust-d2t; {detail})"
            else:
                reason = (
                    f"{detail}"
                    + (
                        f", first disagreement at draft id {res.first_bad_index}"
                        if res.first_bad_index is not None
                        else ""
                    )
                    + (
                        "; nothing says which one the weights were trained with, so repair will not guess"
                        if t2d is not None
                        else "; there is no t2d to rebuild it from"
                    )
                )
                options = list(POLICY[code].options)
                if self.trust == "t2d" and not t2d_ok:
                    reason += (
                        " (--trust-t2d given, but there is no t2d)"
                        if t2d is None
                        else " (--trust-t2d given, but t2d itself is not a valid mask)"
                    )
                if self.trust == "d2t" and not d2t_alone_ok:
                    reason += " (--trust-d2t given, but d2t by itself is not a valid offsets map)"
                self.refuse(code, reason, options)
                return
        if new_d2t is None and new_t2d is None:
            return
        final_d2t = new_d2t if new_d2t is not None else d2t
        final_t2d = new_t2d if new_t2d is not None else t2d
        check = classify_mapping(final_d2t, final_t2d, big_v, v)
        if not (
            check.kind == "consistent_offsets" or (final_t2d is None and check.kind == "unverified_offsets")
        ):
            self.refuse(
                code, f"the rewritten map is still not consistent ({check.meaning})", POLICY[code].options
            )
            return
        touched = []
        if new_d2t is not None:
            name = d2t_name or "d2t"
            self.new_tensors[name] = new_d2t.to(torch.int64).contiguous()
            touched.append(name)
        if new_t2d is not None:
            name = t2d_name or "t2d"
            self.new_tensors[name] = new_t2d.to(torch.bool).contiguous()
            touched.append(name)
        self.step(
            VOCAB,
            how + f"; verified: nonzero(t2d) == d2t + arange({v})" if final_t2d is not None else how,
            tensors=touched,
            fixes=fixes,
            kind_before=res.kind,
            kind_after=check.kind,
        )

    def _from_data(
        self, v: int, big_v: int, t2d: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, str]:
        assert self.data_path is not None
        ids, mask = load_token_ids(self.data_path)
        # The writer's own tie-break: speculators (-count, id); SpecForge first row then id; EAGLE first seen.
        tie = {"speculators": "id", "eagle": "first_seen"}.get(self.ctx.fmt.family, "first_row")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # padding is reported in the step itself
                m = build_vocab_mapping(ids, v, big_v, loss_mask=mask, tie_break=tie)
        except (ValueError, ForensicsError) as exc:  # the sizes come from the config: input, not arguments
            raise UnusableInputError(f"cannot build a vocabulary map from {self.data_path}: {exc}") from None
        counted = int(mask.sum()) if mask is not None else int(ids.size)
        note = (
            f"d2t and t2d rebuilt from {Path(self.data_path).name} ({counted} counted tokens, "
            f"tie-break {tie!r} as {self.ctx.fmt.family} does"
        )
        if m.padded:
            note += f", {m.padded} unseen ids padded"
        if t2d is not None and t2d.dim() == 1 and t2d.shape[0] == big_v:
            old = set(np.flatnonzero(t2d.bool().numpy()).tolist())
            new = set(m.selected.tolist())
            note += f", {len(old & new)}/{v} ids shared with the old t2d"
        return m.d2t, m.t2d, note + ")"

    # -- tensors -------------------------------------------------------------------------------------
    def build_tensors(self, out_cfg: dict[str, Any]) -> None:
        ctx = self.ctx
        view = DrafterConfig(out_cfg)
        rules = rules_for(self.release, view)
        names = set(ctx.ckpt.tensors) | set(self.new_tensors)
        cond = conditions(rules, view, names)
        params = expected_params(rules, view, cond)
        present = frozenset(names)
        hidden = view.hidden_size
        renames: dict[str, str] = {}
        canon: dict[str, str] = {}
        for key in sorted(names):
            fate, out_name = None, key
            for cand in _spellings(key):
                f = resolve_key(rules, cand, cond, params, present)
                if f.action in _USED:
                    fate, out_name = f, cand
                    break
            info = ctx.ckpt.tensors.get(key)
            if fate is None:
                f = resolve_key(rules, key, cond, params, present)
                harmless = not is_drafter_weight(key) or (
                    key.removeprefix("model.") in ("d2t", "t2d") and not ctx.reduced_vocab
                )
                verb = {"rejected": "would reject it (load fails)", "warned": "would warn and ignore it"}.get(
                    f.action, "would drop it silently"
                )
                if harmless:
                    self.step(
                        DROP,
                        f"{key} removed: not a drafter weight; {self.display} {verb}",
                        [key],
                        fixes=("KEYS_DROPPED_BY_ENGINE", "KEYS_REJECTED_BY_ENGINE"),
                    )
                else:
                    code = "KEYS_REJECTED_BY_ENGINE" if f.action == "rejected" else "KEYS_DROPPED_BY_ENGINE"
                    self.refuse(
                        code,
                        f"{key} is a trained drafter weight that {self.display} has no parameter for "
                        "under any spelling",
                        POLICY[code].options,
                    )
                continue
            if (
                fate.action == "overwritten" or self._bad_embed(key, hidden, params, fate.param)
            ) and self._strip(key, fate.param):
                continue
            c = _canonical(rules, out_name)
            if c in canon:
                self.refuse(
                    PRECONDITION,
                    f"{canon[c]} and {key} are the same tensor under two spellings; which one "
                    "was trained is unknown",
                    ["remove the stale copy from a copy of the checkpoint"],
                )
                continue
            canon[c] = key
            if out_name != key:
                renames[key] = out_name
            data = self.new_tensors.get(key)
            if data is not None:
                self.planned[out_name] = _Planned(out_name, _info(out_name, data), None, data)
            else:
                assert info is not None
                self.planned[out_name] = _Planned(
                    out_name, TensorInfo(out_name, info.shape, info.dtype, SAFETENSORS_FILE, info.nbytes), key
                )
        if renames:
            self.step(
                RENAME,
                _rename_summary(renames) + f": the names {self.display} looks up; bytes unchanged",
                sorted(renames),
                fixes=("KEYS_DROPPED_BY_ENGINE", "KEYS_REJECTED_BY_ENGINE", "PARAMS_UNFILLED"),
                renames=renames,
            )

    def _bad_embed(self, key: str, hidden: int | None, params: dict[str, str], param: str | None) -> bool:
        """A stored embedding that cannot be the drafter's (wrong width) where the engine can use the target's."""
        info = self.ctx.ckpt.tensors.get(key)
        if info is None or not key.endswith("embed_tokens.weight") or hidden is None or len(info.shape) != 2:
            return False
        return (
            info.shape[1] != hidden
            and param is not None
            and params.get(param) in (FROM_TARGET, TARGET_IF_ABSENT)
        )

    def _strip(self, key: str, param: str | None) -> bool:
        if self.cfg.get("embed_requires_grad") is True and key.endswith("embed_tokens.weight"):
            self.refuse(
                "EMBED_TOKENS_PROBLEM",
                f"the drafter trained its own embedding (embed_requires_grad: true) "
                f"and {self.display} replaces it with the target's",
                ["serve it on vLLM, which keeps a draft embedding that differs from the target's"],
            )
            return True
        info = self.ctx.ckpt.tensors[key]
        why = (
            "its width differs from hidden_size, so it cannot be the drafter's"
            if self.ctx.cfg.hidden_size is not None and info.shape[-1] != self.ctx.cfg.hidden_size
            else "target_hidden_size is absent or equals hidden_size"
            if key.endswith("embed_tokens.weight")
            else ""
        )
        self.step(
            STRIP,
            f"{key} removed: {self.display} overwrites {param} with the target's, so the stored copy "
            "is never used" + (f" ({why})" if why else ""),
            [key],
            fixes=("EMBED_TOKENS_PROBLEM",),
        )
        return True

    def ship_missing(self, out_cfg: dict[str, Any]) -> None:
        """Add tensors the engine must find in the checkpoint and the target can supply (the embedding)."""
        vck = self.virtual(out_cfg)
        view = DrafterConfig(out_cfg)
        rules = rules_for(self.release, view)
        load = simulate_load(rules, vck, view)
        for param in load.unfilled:
            if not param.endswith("embed_tokens.weight"):
                continue
            tinfo = self.plan._target_info
            tname = tinfo.tensor_name("embed_tokens.weight") if tinfo is not None else None
            want = (view.vocab_size, view.hidden_size)
            if tinfo is None or tinfo.weights is None or tname is None:
                self.refuse(
                    "EMBED_TOKENS_PROBLEM",
                    f"{self.display} keeps the checkpoint's embedding "
                    "(target_hidden_size differs from hidden_size) and the checkpoint has none; no --target "
                    "weights were given to ship one from",
                    POLICY["EMBED_TOKENS_PROBLEM"].options,
                )
                continue
            tshape = tinfo.weights.tensors[tname].shape
            if tuple(tshape) != want:
                self.refuse(
                    "EMBED_TOKENS_PROBLEM",
                    f"{self.display} needs an embedding of shape {list(want)} in the "
                    f"checkpoint; the target's {tname} is {list(tshape)}, so it cannot be the one trained "
                    "with",
                    POLICY["EMBED_TOKENS_PROBLEM"].options,
                )
                continue
            name = next(
                (
                    c
                    for c in _spellings("embed_tokens.weight")
                    if resolve_key(
                        rules, c, load.conditions, expected_params(rules, view, load.conditions)
                    ).param
                    == param
                ),
                "embed_tokens.weight",
            )
            emb = tinfo.weights.read_tensor(tname)
            float_dtypes = [p.info.dtype for p in self.planned.values() if p.info.is_float]
            dtype = max(set(float_dtypes), key=float_dtypes.count) if float_dtypes else None
            torch_dtype = (torch_dtype_of(dtype) if dtype else None) or emb.dtype
            emb = emb.to(torch_dtype).contiguous()
            self.planned[name] = _Planned(name, _info(name, emb), None, emb)
            self.step(
                SHIP,
                f"{name} added from the target's {tname} ({self.display} keeps the checkpoint's "
                "embedding because target_hidden_size differs from hidden_size)",
                [name],
                fixes=("EMBED_TOKENS_PROBLEM", "PARAMS_UNFILLED"),
                target_tensor=tname,
            )

    def virtual(self, out_cfg: dict[str, Any]) -> _PlannedCheckpoint:
        return _PlannedCheckpoint(self.ctx.ckpt.path, out_cfg, self.planned, self.ctx.ckpt)


def _rename_summary(renames: dict[str, str]) -> str:
    """``layers.0.* → midlayer.* for 10 tensors`` when every rename swaps one prefix, else a count."""
    pairs = set()
    for old, new in renames.items():
        i = 0  # length of the common suffix
        while i < min(len(old), len(new)) and old[-1 - i] == new[-1 - i]:
            i += 1
        q = len(old) - i  # prefixes end at q (old) / q + delta (new); move q to just after a "."
        while q < len(old) and not (q > 0 and old[q - 1] == "."):
            q += 1
        delta = len(new) - len(old)
        pairs.add((old[:q], new[: q + delta]))
    if len(pairs) == 1:
        a, b = next(iter(pairs))
        return f"{a}* → {b}* for {len(renames)} tensors"
    return f"{len(renames)} tensors renamed"


# -- plan ---------------------------------------------------------------------------------------------


def _check_engine(engine: str) -> EngineRules:
    """The release an ``--engine`` spec names (``sglang``, ``sglang==0.5.11``, ``vllm``)."""
    name, _ = split_spec(engine)
    if name not in REPAIRABLE_ENGINES:
        raise RepairArgumentError(
            f"repair targets one serving engine: {' or '.join(REPAIRABLE_ENGINES)} (optionally ==VERSION), "
            f"not {engine!r}"
        )
    try:
        return resolve_release(engine)
    except BadArgumentsError as exc:
        raise RepairArgumentError(str(exc)) from None


def _check_trust(trust: str | None, rebuild_vocab_from: str | Path | None) -> None:
    if trust not in (None, "t2d", "d2t"):
        raise RepairArgumentError(f"trust must be 't2d', 'd2t' or None, not {trust!r}")
    if trust is not None and rebuild_vocab_from is not None:
        raise RepairArgumentError("--trust-t2d/--trust-d2t and --rebuild-vocab-from exclude each other")


def repair_plan(
    src: str | Path,
    engine: str,
    *,
    target: str | Path | None = None,
    rebuild_vocab_from: str | Path | None = None,
    trust: str | None = None,
) -> RepairPlan:
    """Diagnose ``src`` for ``engine`` and plan the repair; nothing is written.

    ``trust`` (``"t2d"`` / ``"d2t"``) says which half of a disagreeing vocabulary map to rebuild the other
    from; ``rebuild_vocab_from`` is a token-id file (see :mod:`eagle3_forensics.vocab.inputs`) to rebuild
    both. Unreadable input gives a plan whose :attr:`RepairPlan.unusable` says why.
    """
    release = _check_engine(engine)
    _check_trust(trust, rebuild_vocab_from)
    options = {
        "target": None if target is None else str(target),
        "rebuild_vocab_from": None if rebuild_vocab_from is None else str(rebuild_vocab_from),
        "trust": trust,
    }
    spec = (
        engine if release.requested is None or not release.pinned else f"{release.name}=={release.requested}"
    )
    plan = RepairPlan(
        str(src), release.name, options["target"], options, release=release_label(release), spec=spec
    )
    engine = release.name
    if rebuild_vocab_from is not None and not Path(rebuild_vocab_from).is_file():
        plan.unusable = f"token-id file not found: {rebuild_vocab_from}"
        return plan
    try:
        ckpt = open_checkpoint(src)
        tinfo = open_target(target) if target is not None else None
    except UnusableInputError as exc:
        plan.unusable = str(exc)
        return plan
    plan._ckpt, plan._target_info = ckpt, tinfo
    ctx = Context(ckpt, tinfo, explicit_engines=True, releases=[release])
    try:
        findings = sort_findings(run_checks(ctx))
    except UnusableInputError as exc:
        plan.unusable = str(exc)
        return plan
    plan.diagnosis = Diagnosis(
        str(src), ctx.fmt.label, [engine], findings, ctx.loads, ctx.fmt, tinfo, releases=ctx.releases_judged()
    )
    plan.config_before = copy.deepcopy(ckpt.config)
    plan.config_after = copy.deepcopy(ckpt.config)
    display = f"{release.display} ({release.release})"

    errors = plan.source_errors()
    for f in errors:
        pol = POLICY[f.code]
        if pol.action == UNUSABLE:
            plan.unusable = f.message
            return plan
        if pol.refuses(f):
            plan.refusals.append(
                Refusal(
                    f.code,
                    (pol.reason or "no conversion fixes this").format(engine=display),
                    [o.format(engine=display) for o in pol.options],
                    f.message,
                )
            )
            plan.coverage[f.code] = {"status": "refused", "policy": pol.action}
    if plan.refusals:
        return plan  # nothing a conversion could change would make this drafter serve as trained

    planner = _Planner(plan, ctx, rebuild_vocab_from, trust)
    try:
        out_cfg = planner.build_config()
        planner.build_vocab(out_cfg)
        planner.build_tensors(out_cfg)
        if not plan.refusals:
            planner.ship_missing(out_cfg)
    except UnusableInputError as exc:
        plan.unusable = str(exc)
        return plan
    plan.config_after = out_cfg
    plan._planned = planner.planned
    _plan_files(plan, ckpt)
    if not plan.refusals:
        vck = planner.virtual(out_cfg)
        vctx = Context(vck, tinfo, explicit_engines=True, releases=[release])
        plan.predicted = sort_findings(run_checks(vctx))
    _cover(plan, display)
    return plan


def _plan_files(plan: RepairPlan, ckpt: Checkpoint) -> None:
    shards = {t.shard for t in ckpt.tensors.values()}
    single = ckpt.weight_format == "safetensors" and shards <= {SAFETENSORS_FILE}
    if not single:
        plan.steps.append(
            Step(
                FORMAT,
                f"weights written as one {SAFETENSORS_FILE} (source: {ckpt.weight_format}: "
                f"{', '.join(sorted(shards))})",
                sorted(shards),
            )
        )
    for p in sorted(ckpt.path.iterdir()):
        if p.name in _NEVER_COPY or p.name in shards or p.name.endswith(".index.json"):
            continue
        if p.is_file() and p.suffix.lower() in _COPYABLE_SUFFIXES:  # a symlink to a file (HF cache) is copied
            plan.files_copied.append(p.name)
        else:
            plan.files_not_copied.append(p.name + ("/" if p.is_dir() else ""))


def _cover(plan: RepairPlan, display: str) -> None:
    """Every source error must end as fixed (absent from the planned drafter) or refused."""
    predicted = {f.code: f for f in plan.predicted_errors()}
    refused = {r.code for r in plan.refusals}
    for f in plan.source_errors():
        pol = POLICY[f.code]
        steps = [i for i, s in enumerate(plan.steps, 1) if s.kind in pol.fixed_by]
        named = [i for i in steps if f.code in plan.steps[i - 1].fixes]
        steps = named or steps  # the steps that name the code, else every step of a kind that can fix it
        if f.code in refused:
            plan.coverage[f.code] = {"status": "refused", "policy": pol.action}
        elif plan.refusals:
            plan.coverage[f.code] = {"status": "not planned (repair refused)", "steps": steps}
        elif f.code not in predicted and steps:
            plan.coverage[f.code] = {"status": "fixed", "steps": steps}
        else:
            left = predicted.get(f.code)
            plan.refusals.append(
                Refusal(
                    f.code,
                    (pol.reason or "no conversion fixes this").format(engine=display),
                    [o.format(engine=display) for o in pol.options],
                    (left or f).message,
                )
            )
            plan.coverage[f.code] = {"status": "refused", "policy": pol.action, "steps": steps}
    source_codes = {f.code for f in plan.source_errors()}
    for code, f in predicted.items():
        if code in source_codes or code in {r.code for r in plan.refusals}:
            continue
        pol = POLICY[code]
        plan.refusals.append(
            Refusal(
                code,
                "the converted drafter would have this error: "
                + (pol.reason or "no conversion fixes it").format(engine=display),
                [o.format(engine=display) for o in pol.options],
                f.message,
            )
        )
        plan.coverage[code] = {"status": "refused (introduced by the conversion)"}
