"""The target class: can it feed an EAGLE-3 drafter in the judged release, and in which order.

The class is ``architectures[0]`` of ``--target`` (or of the model a ``--launch`` serves, when its
config is readable). Each release's target table (:mod:`eagle3_forensics.engines.targets`) says
whether that class captures aux states at all (``TARGET_NO_EAGLE3_CAPTURE`` when it cannot), and
every engine captures in layer order, so an id list that is not ascending reaches ``fc`` in another
order than the config lists (``AUX_LAYER_IDS_UNSORTED``). A class no judged table lists is said
once, as info (``TARGET_CLASS_UNKNOWN``); its capture range is then the release's general rule.
"""

from __future__ import annotations

from collections.abc import Iterator

from eagle3_forensics.checks.context import Context
from eagle3_forensics.engines.target_tables import TargetReading, capturing_releases, read_target
from eagle3_forensics.engines.targets import Failure, TargetTable
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.config import AUX_FIELD, EAGLE, TOP


def _cited(table: TargetTable) -> list[str]:
    return [f"{c.package}=={c.version} {c.path}" for c in table.citations]


def check_target_capture(ctx: Context) -> Iterator[Finding]:
    arch = ctx.target_architecture
    if arch is None:
        return
    unknown: list[str] = []
    undecided: list[str] = []
    for rules in ctx.releases:
        reading = read_target(rules, arch)
        if reading.table is None:
            continue
        if reading.row is None:
            unknown.append(reading.table.release)
            continue
        if reading.row.capture.captures:
            continue
        if not reading.row.capture.decidable:
            undecided.append(
                f"{reading.table.release} ({reading.row.where}: {reading.row.capture.range_text()})"
            )
            continue
        yield _no_capture(ctx, rules.name, f"{rules.display} ({rules.release}", reading)
    if unknown:
        why = " ".join(
            f"{t.release}: {t.unlisted_why}."
            for r in ctx.releases
            if (t := read_target(r, arch).table) and t.unlisted_why
        )
        yield Finding(
            "TARGET_CLASS_UNKNOWN",
            Severity.INFO,
            f"Target class {arch!r} is not registered in {', '.join(unknown)} as read: whether it captures aux "
            "states is not known here; its capture range is taken as each release's general rule."
            + (f" {why}" if why else ""),
            evidence={"target_architecture": arch, "releases": unknown, "source": _source(ctx)},
        )

    if undecided:
        yield Finding(
            "TARGET_CLASS_UNKNOWN",
            Severity.INFO,
            f"Target class {arch!r} hands the aux-layer ids to a model outside the engine in "
            f"{'; '.join(undecided)}: whether and which layers it captures is decided there, not in the engine's "
            "code, so it is not known here.",
            evidence={"target_architecture": arch, "releases": undecided, "source": _source(ctx)},
        )


def _source(ctx: Context) -> str:
    return "--target" if ctx.target is not None else "--launch"


def _no_capture(ctx: Context, engine: str, display: str, reading: TargetReading) -> Finding:
    table, row = reading.table, reading.row
    assert table is not None and row is not None
    failure = table.failure(row)
    others = [r for r in capturing_releases(str(reading.architecture)) if not r.startswith(f"{engine} ")]
    same = [r for r in capturing_releases(str(reading.architecture)) if r.startswith(f"{engine} ")]
    where = "; ".join(x for x in (", ".join(same), ", ".join(others)) if x)
    fix = (
        f"Serve {reading.architecture} on a release whose class captures aux states ({where})."
        if where
        else f"No release read here captures aux states for {reading.architecture}: serve another target "
        "class (the drafter's fc was trained on that target's states), or retrain for one that captures."
    )
    return Finding(
        "TARGET_NO_EAGLE3_CAPTURE",
        Severity.ERROR,
        f"{display}; target classes as read in {table.release}) cannot feed an EAGLE-3 drafter from target "
        f"class {reading.architecture!r} "
        f"({row.where}): {table.outcome(row)}"
        + (f" — {failure.describe()}." if failure is Failure.SILENT else "."),
        engine=engine,
        evidence={
            "target_architecture": reading.architecture,
            "capture": row.capture.value,
            "failure": failure.value if failure is not None else None,
            "class": row.where,
            "proof": row.proof.value,
            "table": table.release,
            "sources": _cited(table),
            "architecture_source": _source(ctx),
            **ctx.evidence_base(engine),
        },
        fix=fix,
    )


def check_unsorted_ids(ctx: Context) -> Iterator[Finding]:
    """Ids not in ascending order: engines capture ``sorted(set(ids))``, so fc's blocks are permuted."""
    for level in (TOP, EAGLE):
        ids = ctx.cfg.at(level, AUX_FIELD)
        if not isinstance(ids, list) or len(ids) < 2 or not all(isinstance(i, int) for i in ids):
            continue
        if ids == sorted(ids) or len(set(ids)) != len(ids):
            continue  # ascending, or duplicated (AUX_LAYER_IDS_INVALID)
        field = f"eagle_config.{AUX_FIELD}" if level == EAGLE else AUX_FIELD
        order = sorted(ids)
        for rules in ctx.releases:
            reading = read_target(rules, ctx.target_architecture)
            if reading.table is None or not reading.table.sorts_ids:
                continue
            yield Finding(
                "AUX_LAYER_IDS_UNSORTED",
                Severity.WARNING,
                f"{field} = {ids} is not ascending; {rules.display} ({reading.table.release}) captures in layer "
                f"order, once per layer, so fc receives the states of {order}: its input blocks are permuted "
                "unless the trainer also concatenated in layer order.",
                engine=rules.name,
                evidence={
                    "field": field,
                    "ids": ids,
                    "captured_order": order,
                    "sources": _cited(reading.table),
                    **ctx.evidence_base(rules.name),
                },
                fix=f"Check the trainer's concatenation order; if it followed the list, write {order} and "
                "permute fc.weight's input blocks to match, else write the ids ascending.",
            )


CHECKS = (check_target_capture, check_unsorted_ids)
