"""Aux-layer ids: valid, read by the engine, and read in the convention they were trained in.

All ids are compared in the Hugging Face ``hidden_states`` index convention (the input of
decoder layer ``i``): vLLM/speculators ids as-is, SGLang-nested / SpecForge ids + 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from eagle3_forensics.checks.context import Context
from eagle3_forensics.engines.rules import HF_DEFAULT_AUX, EngineRules
from eagle3_forensics.engines.simulate import aux_ids_read
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.config import AUX_FIELD, EAGLE, TOP

# How each trainer family wrote the ids it trained with: (level, HF offset), preferred first.
_WRITER_SOURCES: dict[str, tuple[tuple[str, int], ...]] = {
    "speculators": ((TOP, 0), (EAGLE, 1)),
    "specforge": ((EAGLE, 1), (TOP, 0)),
    "eagle": ((EAGLE, 1), (TOP, 0)),
    "unknown": ((EAGLE, 1), (TOP, 0)),
}


def _default(n: int | None) -> list[int] | None:
    return None if n is None else [n * a // b + c for a, b, c in HF_DEFAULT_AUX]


def _valid(ids: Any) -> bool:
    return (
        isinstance(ids, list)
        and bool(ids)
        and all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
        and len(set(ids)) == len(ids)
        and min(ids) >= 0
    )


def trained_ids(ctx: Context) -> tuple[list[int] | None, str | None]:
    """HF-index ids the drafter was trained with (``None``: trainer default) and the field they came from."""
    for level, off in _WRITER_SOURCES[ctx.fmt.family]:
        ids = ctx.cfg.at(level, AUX_FIELD)
        if _valid(ids):
            return [i + off for i in ids], level
    return None, None


def engine_ids(rules: EngineRules, ctx: Context) -> tuple[list[int] | None, str | None]:
    ids, level, off = aux_ids_read(rules, ctx.cfg)
    if ids is None or not _valid(ids):
        return None, None
    return [i + off for i in ids], level


def check_aux_valid(ctx: Context) -> Iterator[Finding]:
    n = ctx.target_layers
    for level in (TOP, EAGLE):
        ids = ctx.cfg.at(level, AUX_FIELD)
        if ids is None:
            continue
        field = AUX_FIELD if level == TOP else f"eagle_config.{AUX_FIELD}"
        problems = []
        if not _valid(ids):
            problems.append("not a non-empty list of distinct non-negative integers")
        else:
            hf = [i + (1 if level == EAGLE else 0) for i in ids]
            if n is not None and max(hf) > n:
                problems.append(f"ids reach HF index {max(hf)} but the target has {n} layers")
            fc = ctx.shape("fc.weight")
            ht = ctx.cfg.target_hidden_size or ctx.cfg.hidden_size
            if fc and ht and len(fc) == 2 and fc[1] % ht == 0 and fc[1] // ht != len(ids):
                problems.append(f"{len(ids)} ids but fc takes {fc[1] // ht} aux states")
        if problems:
            yield Finding(
                "AUX_LAYER_IDS_INVALID",
                Severity.ERROR,
                f"{field} = {ids!r}: " + "; ".join(problems) + ".",
                evidence={"field": field, "ids": ids, "problems": problems, "target_layers": n},
                fix="Write the ids the drafter was trained with (HF index for vLLM's top-level field, "
                "HF index − 1 for SGLang's nested field).",
            )


def check_aux_engines(ctx: Context) -> Iterator[Finding]:
    n = ctx.target_layers
    trained, trained_level = trained_ids(ctx)
    for rules in ctx.engines:
        read, read_level = engine_ids(rules, ctx)
        trained_eff = trained if trained is not None else _default(n)
        read_eff = read if read is not None else (rules.aux_default(n) if n is not None else None)
        if trained is None and read is None:
            continue  # both defaults: the same physical layers on every engine
        evidence = {
            "trained_hf_ids": trained_eff,
            "trained_field": trained_level,
            "engine_hf_ids": read_eff,
            "engine_field": read_level,
            "engine_default": rules.aux_default_text(),
            "target_layers": n,
            "engine_revision": rules.revision,
        }
        if trained_eff is not None and read_eff is not None and trained_eff == read_eff:
            continue
        if read is None:
            where = f"{'nested eagle_config' if trained_level == EAGLE else 'top-level'} {AUX_FIELD}"
            reads = (
                " and ".join(
                    f"{'eagle_config.' if s.level == EAGLE else ''}{AUX_FIELD}" for s in rules.aux_sources
                )
                or "no config field (hard-coded)"
            )
            decided = trained_eff is not None and read_eff is not None
            yield Finding(
                "AUX_LAYER_IDS_IGNORED_BY_ENGINE",
                Severity.ERROR if decided else Severity.WARNING,
                f"The drafter's aux ids are in {where}, which {rules.display} does not read (it reads {reads}); "
                f"it falls back to its default {rules.aux_default_text()}"
                + (
                    f" = {read_eff}, not the trained {trained_eff}."
                    if decided
                    else "; pass --target to check whether that equals the trained layers."
                ),
                engine=rules.name,
                evidence=evidence,
                fix=_aux_fix(rules, trained_eff),
            )
            continue
        if trained_eff is not None and len(read) == len(trained_eff):
            shift = {r - t for r, t in zip(read, trained_eff, strict=True)}
            kind = "shifted" if len(shift) == 1 else "different"
            yield Finding(
                "AUX_LAYER_IDS_CONVENTION_SHIFT",
                Severity.ERROR,
                f"{rules.display} reads {read_level} ids as HF layers {read}, but the drafter was trained on "
                f"{trained_eff}" + (f" ({shift.pop():+d} layer)" if kind == "shifted" else "") + ".",
                engine=rules.name,
                evidence=evidence,
                fix=_aux_fix(rules, trained_eff),
            )
    yield from _ambiguous(ctx)


def _ambiguous(ctx: Context) -> Iterator[Finding]:
    """speculators ids equal to the output-of-layer default [1, N//2-1, N-4] are suspicious."""
    n = ctx.target_layers
    ids = ctx.cfg.at(TOP, AUX_FIELD)
    if n is None or ctx.fmt.family != "speculators" or not _valid(ids):
        return
    if ids == [1, n // 2 - 1, n - 4]:
        for rules in ctx.engines:
            if any(s.level == TOP for s in rules.aux_sources):
                yield Finding(
                    "AUX_LAYER_IDS_CONVENTION_SHIFT",
                    Severity.WARNING,
                    f"{AUX_FIELD} = {ids} equals the output-of-layer default (1, N//2-1, N-4) for N = {n}; "
                    f"{rules.display} reads it as input-of-layer, one layer early if the trainer captured "
                    "layer outputs (speculators convert copies ids verbatim).",
                    engine=rules.name,
                    evidence={"ids": ids, "target_layers": n, "engine_revision": rules.revision},
                    fix=f"If the drafter was trained on layer outputs, write {[i + 1 for i in ids]}; "
                    "check with the probe's aux sweep.",
                )


def _aux_fix(rules: EngineRules, trained: list[int] | None) -> str:
    if trained is None:
        return "Write the trained ids where this engine reads them (run with --target to compute them)."
    parts = []
    for src in rules.aux_sources:
        stored = [i - src.hf_offset for i in trained]
        field = f"eagle_config.{AUX_FIELD}" if src.level == EAGLE else AUX_FIELD
        parts.append(f"{field} = {stored}")
    if not parts:
        return f"{rules.display} hard-codes its aux layers; serve on an engine that reads the trained ids {trained}."
    return f"For {rules.display} write " + " or ".join(parts) + f" (HF layers {trained})."


CHECKS = (check_aux_valid, check_aux_engines)
