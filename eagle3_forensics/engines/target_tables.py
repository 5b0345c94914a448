"""Which target table judges a release, and what it says about one target class.

:data:`TABLES` holds every engine's target tables (the ``targets`` sections of its release records),
oldest first; :func:`read_target` looks a class up in the table read inside a release table's range
and :func:`sharpen` gives the release's aux rule that class's capture range.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from eagle3_forensics.engines.catalog import META, each
from eagle3_forensics.engines.codec import decode
from eagle3_forensics.engines.proof import Proof
from eagle3_forensics.engines.releases import EngineMap
from eagle3_forensics.engines.rules import AuxRule, EngineRules
from eagle3_forensics.engines.targets import Capture, TargetRow, TargetTable


def _tables(engine: str) -> tuple[TargetTable, ...]:
    """``engine``'s target tables from the ``targets`` sections of its records, oldest first."""
    return tuple(
        decode(
            TargetTable,
            {k: v for k, v in body.items() if k not in META},
            f"{record.label} targets",
            engine=engine,
            citations=record.cited(body.get("cites", ())),
        )
        for record, body in each(engine, "targets")
    )


# engine -> its target tables, one per release read (read from the records on first use)
TABLES: EngineMap[tuple[TargetTable, ...]] = EngineMap(_tables)


def capturing_releases(architecture: str) -> list[str]:
    """Every release read whose table lets ``architecture`` capture aux states."""
    return [
        t.release
        for tables in TABLES.values()
        for t in tables
        if (r := t.row(architecture)) and r.capture.captures
    ]


def table_for(rules: EngineRules) -> TargetTable | None:
    """The target table read inside the range of the release table ``rules`` (the newest such).

    A version asked for between two tables is judged by the nearest older release table, and so by
    the target table read inside that table's range; a release table read from no wheel has none.
    """
    tables = TABLES.get(rules.name, ())
    if not rules.pinned:
        return None
    inside = [t for t in tables if rules.covers(t.version)]
    return inside[-1] if inside else None


@dataclass(frozen=True)
class TargetReading:
    """One release's verdict on one target class."""

    table: TargetTable | None
    row: TargetRow | None
    architecture: str | None

    @property
    def known(self) -> bool:
        return self.row is not None

    @property
    def capture(self) -> Capture | None:
        if self.row is not None:
            return self.row.capture
        return self.table.unlisted if self.table is not None else None

    @property
    def proof(self) -> Proof | None:
        return self.row.proof if self.row is not None else None


def read_target(rules: EngineRules, architecture: str | None) -> TargetReading:
    table = table_for(rules)
    row = table.row(architecture, rules.requested or rules.last) if table is not None else None
    return TargetReading(table, row, architecture)


def sharpen(rule: AuxRule, reading: TargetReading) -> AuxRule:
    """``rule`` with the capture range the target table gives the class (unchanged without one)."""
    capture = reading.capture
    if capture is None or not capture.captures or not rule.reads_drafter:
        return rule
    final = capture is Capture.THROUGH_N
    if final == rule.captures_final:
        return rule
    return replace(rule, captures_final=final)
