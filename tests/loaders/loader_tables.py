"""The one place where the loader tier meets the project's engine knowledge.

Everything the comparison needs from eagle3_forensics goes through these functions, so moving to
another table API (per-release tables, per-architecture aux rules) is an edit here only.
"""

from __future__ import annotations

from typing import Any

from eagle3_forensics.engines import ENGINES
from eagle3_forensics.engines.rules import EngineRules
from eagle3_forensics.engines.simulate import LoadReport, simulate_load
from eagle3_forensics.io.checkpoint import Checkpoint


def table_for(engine: str, version: str) -> EngineRules:
    """The table that judges ``engine`` at release ``version``.

    Today there is one table per engine, whatever the release.
    """
    return ENGINES[engine]


def table_label(table: EngineRules) -> str:
    """How the report names the table a release was judged by."""
    return table.revision


def simulate(table: EngineRules, ckpt: Checkpoint) -> LoadReport:
    return simulate_load(table, ckpt)


def d2t_destinations(table: EngineRules) -> set[str]:
    """Where the table says ``d2t`` goes when it is not an ordinary parameter (``hot_token_id``,
    ``draft_id_to_target_id``): judged by what ``d2t`` became, not as a parameter."""
    return {rule.target for rule in table.consume if rule.target and "d2t" in rule.pattern}


def d2t_encoding(table: EngineRules) -> str:
    return table.d2t_encoding


def capture_prediction(
    table: EngineRules, architecture: str, ids: list[int] | None, num_layers: int
) -> list[int] | None:
    """The layers (Hugging Face ``hidden_states`` index) the table says SGLang captures for a
    target of this architecture, given the drafter's nested ``eagle_config`` ids (``None``: no ids).

    Today the table has one rule for every architecture.
    """
    if ids is None:
        return table.aux_default(num_layers)
    for src in table.aux_sources:
        if src.level == "eagle_config":
            return [i + src.hf_offset for i in ids]
    return table.aux_default(num_layers)  # the table reads no nested ids: the default applies


def describe(table: EngineRules) -> dict[str, Any]:
    return {"name": table.name, "revision": table.revision}
