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
error is silently ignored. :mod:`eagle3_forensics.repair.execute` writes a plan;
:mod:`eagle3_forensics.views.repair` renders it.
"""

from __future__ import annotations

import copy
from pathlib import Path

from eagle3_forensics.checks import run_checks
from eagle3_forensics.checks.aux_measured import MeasuredAux
from eagle3_forensics.checks.context import Context
from eagle3_forensics.checks.diagnose import Diagnosis
from eagle3_forensics.engines import release_label, resolve_release, split_spec
from eagle3_forensics.engines.rules import EngineRules
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.findings import sort_findings
from eagle3_forensics.io.checkpoint import CONFIG_FILE, SAFETENSORS_FILE, Checkpoint, open_checkpoint
from eagle3_forensics.io.target import open_target
from eagle3_forensics.repair.plan.config import build_config
from eagle3_forensics.repair.plan.result import RECORD_FILE, Refusal, RepairArgumentError, RepairPlan, Step
from eagle3_forensics.repair.plan.state import PlanState, planned_checkpoint
from eagle3_forensics.repair.plan.tensors import build_tensors, ship_missing
from eagle3_forensics.repair.plan.vocab import build_vocab
from eagle3_forensics.repair.policy import POLICY, REPAIRABLE_ENGINES, Action, StepKind

_COPYABLE_SUFFIXES = (".json", ".md", ".txt", ".model", ".jinja", ".tiktoken", ".py")
_NEVER_COPY = (CONFIG_FILE, RECORD_FILE)


# -- plan ---------------------------------------------------------------------------------------------


def check_engine(engine: str) -> EngineRules:
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


def check_trust(trust: str | None, rebuild_vocab_from: str | Path | None) -> None:
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
    measured_aux: MeasuredAux | None = None,
) -> RepairPlan:
    """Diagnose ``src`` for ``engine`` and plan the repair; nothing is written.

    ``trust`` (``"t2d"`` / ``"d2t"``) says which half of a disagreeing vocabulary map to rebuild the other
    from; ``rebuild_vocab_from`` is a token-id file (see :mod:`eagle3_forensics.vocab.inputs`) to rebuild
    both. Unreadable input gives a plan whose :attr:`RepairPlan.unusable` says why.
    """
    release = check_engine(engine)
    check_trust(trust, rebuild_vocab_from)
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
    ctx = Context(ckpt, tinfo, explicit_engines=True, releases=[release], measured_aux=measured_aux)
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
        if pol.action == Action.UNUSABLE:
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

    state = PlanState(plan, ctx, rebuild_vocab_from, trust)
    try:
        out_cfg = build_config(state)
        build_vocab(state, out_cfg)
        build_tensors(state, out_cfg)
        if not plan.refusals:
            ship_missing(state, out_cfg)
    except UnusableInputError as exc:
        plan.unusable = str(exc)
        return plan
    plan.config_after = out_cfg
    plan._planned = state.planned
    _plan_files(plan, ckpt)
    if not plan.refusals:
        vck = planned_checkpoint(state, out_cfg)
        vctx = Context(vck, tinfo, explicit_engines=True, releases=[release], measured_aux=measured_aux)
        plan.predicted = sort_findings(run_checks(vctx))
    _cover(plan, display)
    return plan


def _plan_files(plan: RepairPlan, ckpt: Checkpoint) -> None:
    shards = {t.shard for t in ckpt.tensors.values()}
    single = ckpt.weight_format == "safetensors" and shards <= {SAFETENSORS_FILE}
    if not single:
        plan.steps.append(
            Step(
                StepKind.FORMAT,
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
