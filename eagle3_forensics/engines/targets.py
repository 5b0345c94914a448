"""The target side of each engine release: which target classes can feed an EAGLE-3 drafter.

A drafter is only as good as the states the *target* hands it. Per release read, a
:class:`TargetTable` lists the registered target architectures (``architectures[0]`` of a target
config) and, for each, how its ``forward`` captures aux states:

- ``THROUGH_N``: ids ``0..N`` (vLLM's ``EagleModelMixin``: id 0 before the first layer, id ``i+1``
  after layer ``i``, so id N is the last layer's output before the final norm);
- ``BELOW_N``: ids ``0..N-1`` (captured before each layer only; an id >= N is never captured);
- ``NO_INTERFACE``: registered, but no EAGLE-3 capture interface: the server refuses to start;
- ``NEVER``: the class declares the interface but its ``forward`` never captures.

Every engine captures in layer order and once per layer, so the drafter's ``fc`` sees
``sorted(set(ids))`` whatever order the config lists (``sorts_ids``). The id conversion and default
ids stay in the release tables (:class:`~eagle3_forensics.engines.rules.AuxRule`); this module only
sharpens their capture range per class. The rows are data in ``targets_vllm`` / ``targets_sglang``
(read from the wheels with the AST reader in those modules' docstrings), validated here at import.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from eagle3_forensics.engines.proof import Citation, Proof
from eagle3_forensics.engines.rules import AuxRule, EngineRules, version_key


class Capture(StrEnum):
    """How one target class captures aux states in one release."""

    THROUGH_N = "through_n"
    BELOW_N = "below_n"
    NO_INTERFACE = "no_interface"
    NEVER = "never"

    @property
    def captures(self) -> bool:
        return self in (Capture.THROUGH_N, Capture.BELOW_N)

    def range_text(self) -> str:
        return {
            Capture.THROUGH_N: "[0, N]",
            Capture.BELOW_N: "[0, N-1]",
            Capture.NO_INTERFACE: "none (no EAGLE-3 capture interface)",
            Capture.NEVER: "none (declared, never captured)",
        }[self]


@dataclass(frozen=True)
class TargetRow:
    """Target architectures registered to one class, with how that class captures."""

    architectures: tuple[str, ...]
    capture: Capture
    where: str  # module.Class whose forward captures (or that lacks the interface)
    proof: Proof = Proof.READ

    def __post_init__(self) -> None:
        object.__setattr__(self, "capture", Capture(self.capture))
        object.__setattr__(self, "proof", Proof(self.proof))
        if not self.architectures or len(set(self.architectures)) != len(self.architectures):
            raise ValueError(f"target row {self.where!r}: architectures empty or repeated")


@dataclass(frozen=True)
class TargetTable:
    """The target classes of one engine release, as read from its wheel (``version``)."""

    engine: str
    version: str
    rows: tuple[TargetRow, ...]
    citations: tuple[Citation, ...]
    no_interface: str  # what the release does for a NO_INTERFACE class (quoted error)
    never: str = ""  # what it does for a NEVER class
    unlisted: Capture = Capture.THROUGH_N  # assumed for a class the release does not register
    sorts_ids: bool = True
    _index: dict[str, TargetRow] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        version_key(self.version)  # a version, or ValueError at import
        index: dict[str, TargetRow] = {}
        for row in self.rows:
            for arch in row.architectures:
                if arch in index:
                    raise ValueError(f"{self.engine} {self.version}: {arch} listed twice")
                index[arch] = row
        if not self.citations or any(len(c.sha256) != 64 for c in self.citations):
            raise ValueError(f"{self.engine} {self.version}: every table cites files with their sha256")
        if any(r.capture is Capture.NEVER for r in self.rows) and not self.never:
            raise ValueError(f"{self.engine} {self.version}: NEVER rows need the release's behaviour")
        object.__setattr__(self, "_index", index)

    def row(self, architecture: str | None) -> TargetRow | None:
        return self._index.get(architecture) if architecture else None

    @property
    def release(self) -> str:
        return f"{self.engine} {self.version}"

    def outcome(self, row: TargetRow) -> str:
        """What serving an EAGLE-3 drafter on this class does, in words."""
        if row.capture is Capture.NO_INTERFACE:
            return self.no_interface
        if row.capture is Capture.NEVER:
            return self.never
        return f"captures ids in {row.capture.range_text()}"


def amend(
    table: TargetTable,
    version: str,
    citations: tuple[Citation, ...],
    *rows: TargetRow,
    removed: tuple[str, ...] = (),
) -> TargetTable:
    """``table`` for a later release: ``rows`` replace the architectures they name; ``removed`` go."""
    named = {a for r in rows for a in r.architectures} | set(removed)
    kept = []
    for row in table.rows:
        rest = tuple(a for a in row.architectures if a not in named)
        if rest:
            kept.append(replace(row, architectures=rest))
    return replace(table, version=version, citations=citations, rows=(*kept, *rows))


def table_for(rules: EngineRules) -> TargetTable | None:
    """The target table read inside the range of the release table ``rules`` (the newest such).

    A version asked for between two tables is judged by the nearest older release table, and so by
    the target table read inside that table's range; a release table read from no wheel has none.
    """
    from eagle3_forensics.engines.targets_sglang import TABLES as SGLANG
    from eagle3_forensics.engines.targets_vllm import TABLES as VLLM

    tables = {"vllm": VLLM, "sglang": SGLANG}.get(rules.name, ())
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
    row = table.row(architecture) if table is not None else None
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
