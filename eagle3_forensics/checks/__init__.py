"""Every static check, in catalogue order. Each check is ``Context -> Iterator[Finding]``."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from eagle3_forensics.checks import (
    aux_layers,
    aux_trained,
    norms,
    rope,
    special_tokens,
    structure,
    target_capture,
    target_fit,
    vocab_map,
    weights,
)
from eagle3_forensics.checks.context import Context
from eagle3_forensics.findings import Finding

Check = Callable[[Context], Iterator[Finding]]

ALL_CHECKS: tuple[Check, ...] = (
    *structure.CHECKS,
    *vocab_map.CHECKS,
    *special_tokens.CHECKS,
    *target_capture.CHECKS,
    *aux_layers.CHECKS,
    *aux_trained.CHECKS,
    *norms.CHECKS,
    *target_fit.CHECKS,
    *rope.CHECKS,
    *weights.CHECKS,
)


def run_checks(ctx: Context) -> list[Finding]:
    """Run every check. An engine that cannot parse the config stops there: only that finding is kept."""
    out: list[Finding] = []
    for check in ALL_CHECKS:
        out.extend(check(ctx))
    blocked = {name for name, load in ctx.loads.items() if not load.config_readable}
    return [f for f in out if f.engine not in blocked or f.code == "CONFIG_UNREADABLE_BY_ENGINE"]


__all__ = ["ALL_CHECKS", "Context", "run_checks"]
