"""Normalisation variants the drafter was trained with versus what each engine implements."""

from __future__ import annotations

from collections.abc import Iterator

from eagle3_forensics.checks.context import Context
from eagle3_forensics.engines import ENGINES
from eagle3_forensics.engines.rules import SUPPORTED_NORM_FLAGS
from eagle3_forensics.engines.simulate import engine_flag
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.config import EAGLE, TOP


def trained_flags(ctx: Context) -> dict[str, bool | None]:
    """Flag -> value the drafter was trained with (``None``: unknown), in speculators/vLLM meaning."""
    cfg, names = ctx.cfg, set(ctx.ckpt.tensors)
    out: dict[str, bool | None] = {}
    for flag in SUPPORTED_NORM_FLAGS:
        value = next(
            (cfg.at(level, flag) for level in (EAGLE, TOP) if isinstance(cfg.at(level, flag), bool)), None
        )
        out[flag] = value
    if "input_norm.weight" in names:
        out["norm_before_fc"] = True
    if any(n.startswith("fc_norm.") for n in names):
        out["fc_norm"] = True
    if cfg.style == "speculators" and out["norm_before_residual"] is None:
        # speculators' own config default (False in every release), what its trainer used
        out["norm_before_residual"] = ENGINES["speculators"].speculators_norm_before_residual_default
    if cfg.style == "flat":
        # Flat (EAGLE/SpecForge) drafters take the residual before hidden_norm and carry the pre-norm state;
        # SpecForge's norm_output means something else (see check_norm_output_meaning).
        if out["norm_before_residual"] is None:
            out["norm_before_residual"] = False
        out["norm_output"] = False
    return out


def check_norm_flags(ctx: Context) -> Iterator[Finding]:
    trained = trained_flags(ctx)
    for rules in ctx.engines:
        unsupported = [f for f, v in trained.items() if v is True and f not in rules.implemented_flags]
        if unsupported:
            yield Finding(
                "NORM_FLAGS_UNSUPPORTED",
                Severity.ERROR,
                f"The drafter was trained with {', '.join(f'{f}=true' for f in unsupported)}; {rules.display} "
                f"({rules.release}) does "
                "not implement it and computes a different function (acceptance degrades silently).",
                engine=rules.name,
                evidence={
                    "unsupported": unsupported,
                    "trained": trained,
                    "engine_implements": sorted(rules.implemented_flags),
                    **ctx.evidence_base(rules.name),
                },
                fix="No weight-space conversion exists: serve on an engine that implements these variants "
                "(vLLM), or retrain with them off for this engine.",
            )
            continue
        # A flat config's norm_output has SpecForge's meaning: check_norm_output_meaning handles it.
        mismatched = [
            f
            for f, v in trained.items()
            if isinstance(v, bool)
            and f in rules.implemented_flags
            and engine_flag(rules, ctx.cfg, f) != v
            and not (f == "norm_output" and ctx.cfg.style == "flat")
        ]
        if mismatched:
            levels = {f: [lv.value for lv in spec.levels] for f in mismatched if (spec := rules.norm_flag(f))}
            assumed = [
                f
                for f in mismatched
                if f == "norm_before_residual"
                and ctx.cfg.style == "speculators"
                and not isinstance(ctx.cfg.at(TOP, f), bool)
                and rules.speculators_norm_before_residual_default is not None
            ]
            clash = (
                f" The speculators config does not say norm_before_residual: speculators trains with its default "
                f"false, {rules.display}'s speculators reader assumes "
                f"{str(rules.speculators_norm_before_residual_default).lower()}."
                if assumed
                else ""
            )
            yield Finding(
                "NORM_FLAGS_UNSUPPORTED",
                Severity.ERROR,
                f"{rules.display} ({rules.release}) will run with "
                f"{', '.join(f'{f}={engine_flag(rules, ctx.cfg, f)}' for f in mismatched)}, not the trained value."
                + clash,
                engine=rules.name,
                evidence={
                    "mismatched": mismatched,
                    "trained": trained,
                    "engine_reads": levels,
                    "engine_default_assumed": dict.fromkeys(
                        assumed, rules.speculators_norm_before_residual_default
                    ),
                    **ctx.evidence_base(rules.name),
                },
                fix="Write the trained values explicitly where the engine reads them ("
                + "; ".join(f"{f}: {' then '.join(lv)}" for f, lv in levels.items())
                + ").",
            )


def check_norm_output_meaning(ctx: Context) -> Iterator[Finding]:
    if ctx.cfg.style != "flat":
        return
    value = ctx.cfg.at(TOP, "norm_output")
    if not isinstance(value, bool):
        return
    for rules in ctx.engines:
        # Every engine applies the final norm before lm_head (whatever its own norm_output means).
        if value is False and rules.final_norm_before_head:
            yield Finding(
                "NORM_FLAGS_UNSUPPORTED",
                Severity.ERROR,
                f"norm_output=false (SpecForge: no final norm before lm_head); {rules.display} ({rules.release}) "
                "always applies it.",
                engine=rules.name,
                evidence={"norm_output": value, **ctx.evidence_base(rules.name)},
                fix="Retrain with norm_output true, or serve on an engine that honours it.",
            )
        if value is True and rules.norm_output_meaning == "post_norm_recurrence":
            yield Finding(
                "NORM_OUTPUT_MEANING_CLASH",
                Severity.WARNING,
                f"norm_output=true in a flat (SpecForge-style) config means 'apply norm before lm_head'; "
                f"{rules.display} reads it as 'carry the post-norm state to the next step', which this drafter "
                "was not trained with (inferred from the two code paths).",
                engine=rules.name,
                evidence={
                    "norm_output": value,
                    "writer_meaning": "norm_before_lm_head",
                    "engine_meaning": rules.norm_output_meaning,
                    **ctx.evidence_base(rules.name),
                },
                fix="Remove norm_output from the config served on this engine (the final norm is applied anyway).",
            )


CHECKS = (check_norm_flags, check_norm_output_meaning)
