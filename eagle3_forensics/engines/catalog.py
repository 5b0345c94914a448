"""The sections of the release records, as each rule module reads them.

A section that is the same in consecutive records (a launch parser unchanged over three releases)
is one rule table covering their joint range: :func:`runs` merges them, so a record never names a
neighbour's version and a table still spans every release it describes. A section may narrow its
range with its own ``first`` / ``last`` (read from a later release than its record's first).
Each rule module turns a section into its own dataclass with :mod:`.codec`; nothing here knows
their shapes, so the modules import this one and never the other way round.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from eagle3_forensics.engines.proof import Citation
from eagle3_forensics.engines.record import Record, records

# The fields a section holds for the record machinery, not for its dataclass.
META = ("cites", "cite", "first", "last")


@dataclass(frozen=True)
class Run:
    """One section over consecutive records: its body, and the range and citations it covers."""

    body: dict[str, Any]
    first: str
    last: str
    records: tuple[Record, ...]

    @property
    def record(self) -> Record:
        return self.records[-1]

    @property
    def pinned(self) -> bool:
        return self.records[0].pinned

    def citations(self) -> tuple[Citation, ...]:
        return self.records[0].cited(self.body.get("cites", ()))

    def fields(self, *drop: str) -> dict[str, Any]:
        """The body without the record's own keys (what the section's dataclass decodes)."""
        return {k: v for k, v in self.body.items() if k not in META and k not in drop}


def runs(engine: str, section: str, also: tuple[str, ...] = ()) -> tuple[Run, ...]:
    """The section of ``engine``'s records, consecutive equal bodies merged, oldest first.

    ``also``: sections read together with this one (launch and startup): records merge only when
    those are equal too.
    """
    out: list[Run] = []
    group: list[Record] = []

    def key(rec: Record) -> tuple[Any, ...]:
        return tuple(rec.section(s) for s in (section, *also))

    for rec in (*records(engine), None):
        if group and (rec is None or key(rec) != key(group[0])):
            body = group[0].section(section)
            out.append(
                Run(body, body.get("first", group[0].first), body.get("last", group[-1].last), tuple(group))
            )
            group = []
        if rec is not None and rec.section(section) is not None:
            group.append(rec)
    return tuple(out)


def each(engine: str, section: str) -> Iterator[tuple[Record, dict[str, Any]]]:
    """``(record, section body)`` of every record of ``engine`` that has the section."""
    for rec in records(engine):
        body = rec.section(section)
        if body is not None:
            yield rec, body


__all__ = ["META", "Run", "each", "runs"]
