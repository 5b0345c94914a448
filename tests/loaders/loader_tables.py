"""The one place where the loader tier meets the project's engine knowledge.

Everything the comparison needs from eagle3_forensics goes through these functions. Two table
APIs are understood: one table per engine (``engines.ENGINES``, judged whatever the release), and
release tables (``engines.resolve_release("NAME==VERSION")``, a drafter class chosen per config,
an aux rule per target architecture). The second is used as soon as the package has it.
"""

from __future__ import annotations

from typing import Any

from eagle3_forensics import engines
from eagle3_forensics.engines import simulate as sim
from eagle3_forensics.engines.view import rules_for
from eagle3_forensics.io.checkpoint import Checkpoint
from eagle3_forensics.io.config import DrafterConfig

RELEASE_TABLES = hasattr(engines, "resolve_release")


def table_for(engine: str, version: str) -> Any:
    """The table that judges ``engine`` at release ``version``."""
    if RELEASE_TABLES:
        return engines.resolve_release(f"{engine}=={version}")
    return engines.ENGINES[engine]


def table_label(table: Any) -> str:
    """How the report names the table a release was judged by."""
    return str(getattr(table, "release", None) or table.revision)


def simulate(table: Any, ckpt: Checkpoint) -> Any:
    """The simulation's :class:`LoadReport` for one drafter."""
    return sim.simulate_load(table, ckpt)


def refusal(report: Any) -> str | None:
    """Why the simulated engine cannot build the drafter at all (config or constructor), if it cannot."""
    if not report.config_readable:
        return str(report.config_problem or "config not readable")
    errors = getattr(report, "build_errors", None)
    return "; ".join(errors) if errors else None


def parameters(report: Any) -> set[str]:
    """Every engine parameter the simulated class builds for this drafter."""
    fates = getattr(report, "param_fates", None)
    if fates is not None:
        return set(fates)
    return set(report.unfilled) | set(report.from_target) | set(report.defaulted)


def load_failed(report: Any) -> bool:
    """The simulated load fails loudly for a reason no single key carries (a required tensor absent)."""
    return bool(getattr(report, "load_errors", None))


def load_failure_by_chance(report: Any) -> bool:
    """That failure depends on uninitialised memory: the real load may also succeed (the table says so)."""
    return load_failed(report) and bool(getattr(report, "load_errors_by_chance", False))


def partial(report: Any) -> set[str]:
    """Stacked parameters the simulation says get only some of their shards."""
    return set(getattr(report, "partial", None) or ())


def shared_from_target(report: Any) -> set[str]:
    """The parameters the engine then takes from the target."""
    return set(report.from_target)


def d2t_destinations(table: Any, ckpt: Checkpoint) -> set[str]:
    """Where the table says ``d2t`` goes when it is not an ordinary parameter (``hot_token_id``,
    ``draft_id_to_target_id``): judged by what ``d2t`` became, not as a parameter."""
    rules = rules_for(table, DrafterConfig(ckpt.config)) if RELEASE_TABLES else table
    return {rule.target for rule in rules.consume if rule.target and "d2t" in rule.pattern}


def d2t_encoding(report: Any, table: Any) -> str:
    """How the release reads a ``d2t`` tensor it takes in ("offsets")."""
    value = getattr(report, "d2t_encoding", None) or table.d2t_encoding
    return str(getattr(value, "value", value))


def capture_prediction(
    table: Any, architecture: str, ids: list[int] | None, num_layers: int
) -> list[int] | None:
    """The layers (Hugging Face ``hidden_states`` index) the table says SGLang captures for a
    target of this architecture, given the drafter's nested ``eagle_config`` ids (``None``: no ids)."""
    if RELEASE_TABLES:
        return table.aux_rule_for(architecture).capture(ids, num_layers)
    if ids is None:
        return table.aux_default(num_layers)
    for src in table.aux_sources:  # one rule for every architecture
        if src.level == "eagle_config":
            return [i + src.hf_offset for i in ids]
    return table.aux_default(num_layers)
