"""The target side of each engine release: which target classes can feed an EAGLE-3 drafter.

A drafter is only as good as the states the *target* hands it. Per release read, a
:class:`TargetTable` lists the registered target architectures (``architectures[0]`` of a target
config) and, for each, how its ``forward`` captures aux states:

- ``THROUGH_N``: ids ``0..N`` (vLLM's ``EagleModelMixin``: id 0 before the first layer, id ``i+1``
  after layer ``i``, so id N is the last layer's output before the final norm);
- ``BELOW_N``: ids ``0..N-1`` (captured before each layer only; an id >= N is never captured);
- ``NO_INTERFACE``: registered, but no EAGLE-3 capture interface: the server refuses to start;
- ``NEVER``: the class declares the interface but its decoder never captures;
- ``BYPASSED``: the class declares the interface and its decoder captures, but the class overrides
  ``forward`` without capturing (vLLM's MiMo): the model runner's assert fails at the first forward.

Each row says what the user sees (:class:`Failure`): a start-up refusal, a crash at the first
forward, or a server that runs with acceptance near 1; an id below a row's ``first_id`` fails as
the row's ``failure_text`` (else the table's ``below_first``) says.

Every engine captures in layer order and once per layer, so the drafter's ``fc`` sees
``sorted(set(ids))`` whatever order the config lists (``sorts_ids``). The id conversion and default
ids stay in the release tables (:class:`~eagle3_forensics.engines.rules.AuxRule`); this module only
sharpens their capture range per class. The rows are the ``targets`` section of each release record
(``engines/records/``), validated here when a record is read; :mod:`.target_tables` picks the table
of a release.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from eagle3_forensics.engines.proof import Citation, Proof
from eagle3_forensics.engines.rules import HF_DEFAULT_AUX, AuxTerm, version_key


class Capture(StrEnum):
    """How one target class captures aux states in one release."""

    THROUGH_N = "through_n"
    BELOW_N = "below_n"
    NO_INTERFACE = "no_interface"
    NEVER = "never"
    BYPASSED = "bypassed"
    # the ids are handed to a model outside the engine (SGLang's MindSpore backend): it may capture, but
    # which range is not decidable from the engine's code
    EXTERNAL = "external"

    @property
    def captures(self) -> bool:
        return self in (Capture.THROUGH_N, Capture.BELOW_N)

    @property
    def decidable(self) -> bool:
        return self is not Capture.EXTERNAL

    def range_text(self) -> str:
        return {
            Capture.THROUGH_N: "[0, N]",
            Capture.BELOW_N: "[0, N-1]",
            Capture.NO_INTERFACE: "none (no EAGLE-3 capture interface)",
            Capture.NEVER: "none (declared, never captured)",
            Capture.BYPASSED: "none (the class's own forward skips the capture)",
            Capture.EXTERNAL: "decided by the external model the ids are handed to",
        }[self]


class Failure(StrEnum):
    """What the user sees when a target class cannot feed an EAGLE-3 drafter."""

    STARTUP_REFUSAL = "startup_refusal"  # the server does not start
    FIRST_FORWARD_CRASH = "first_forward_crash"  # it starts, then the first forward raises
    SILENT = "silent"  # it runs without aux states: acceptance stays near 1

    def describe(self) -> str:
        return {
            Failure.STARTUP_REFUSAL: "the server refuses to start",
            Failure.FIRST_FORWARD_CRASH: "the server crashes at the first forward",
            Failure.SILENT: "no error is raised and acceptance stays near 1.0",
        }[self]


@dataclass(frozen=True)
class TargetRow:
    """Target architectures registered to one class, with how that class captures."""

    architectures: tuple[str, ...]
    capture: Capture
    where: str  # module.Class whose forward captures (or that lacks the interface)
    proof: Proof = Proof.READ
    # the lowest id the forward can capture: below it the first forward raises (vLLM's DeepSeek-V2
    # computes ``hidden_states + residual`` before layer 0, where ``residual`` is still None)
    first_id: int = 0
    # what an id below first_id does for this class, when it differs from the table's below_first
    failure_text: str = ""
    # the first release inside the record's range where the row holds (empty: the whole range) ...
    since: str = ""
    # ... and what the classes are before it (None: not registered yet; below_n: no final-layer capture yet)
    before: Capture | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "capture", Capture(self.capture))
        object.__setattr__(self, "proof", Proof(self.proof))
        if not self.architectures or len(set(self.architectures)) != len(self.architectures):
            raise ValueError(f"target row {self.where!r}: architectures empty or repeated")
        if self.first_id not in (0, 1) or (self.first_id and not self.capture.captures):
            raise ValueError(f"target row {self.where!r}: first_id is 0, or 1 for a capturing class")
        if self.since:
            version_key(self.since)  # a version, or ValueError when the record is read
        if self.before is not None:
            object.__setattr__(self, "before", Capture(self.before))
            # before: not registered or refused (a class added in the range), or a narrower capture
            # (a release in the range starts capturing the final layer)
            narrower = self.before is Capture.BELOW_N and self.capture is Capture.THROUGH_N
            if not self.since or (self.before.captures and not narrower):
                raise ValueError(
                    f"target row {self.where!r}: 'before' needs 'since' and names a non-capturing state "
                    "or below_n before through_n"
                )


@dataclass(frozen=True)
class TargetTable:
    """The target classes of one engine release, as read from its wheel (``version``)."""

    engine: str
    version: str
    rows: tuple[TargetRow, ...]
    citations: tuple[Citation, ...]
    no_interface: str  # what the release does for a NO_INTERFACE class (quoted error)
    never: str = ""  # what it does for a NEVER class
    never_failure: Failure = Failure.STARTUP_REFUSAL  # how a NEVER class fails (SGLang-style: SILENT)
    bypassed: str = ""  # what it does for a BYPASSED class
    below_first: str = ""  # what it does for an id below a row's first_id
    unlisted: Capture = Capture.THROUGH_N  # assumed for a class the release does not register
    sorts_ids: bool = True
    # ids used when the drafter names none (the interface's default; SGLang: per class in its aux rules)
    default_ids: tuple[AuxTerm, ...] = HF_DEFAULT_AUX
    conversion: str = "ids used as given"  # how the ids read become captured ids
    # why a class the release does not register cannot be judged (what the release would do instead)
    unlisted_why: str = ""
    # where an unregistered class ends up when that is decidable (SGLang: its Transformers backend, which
    # has no capture interface): such a class is judged as ``unlisted`` there instead of unknown
    unlisted_where: str = ""
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
        if any(r.capture is Capture.BYPASSED for r in self.rows) and not self.bypassed:
            raise ValueError(f"{self.engine} {self.version}: BYPASSED rows need the release's behaviour")
        if any(r.first_id and not r.failure_text for r in self.rows) and not self.below_first:
            raise ValueError(f"{self.engine} {self.version}: rows with first_id need the release's behaviour")
        object.__setattr__(self, "_index", index)

    def row(self, architecture: str | None, version: str | None = None) -> TargetRow | None:
        """The row of ``architecture`` (``None``: not registered, or not yet at ``version``)."""
        row = self._index.get(architecture) if architecture else None
        if row is None and architecture and self.unlisted_where and not self.unlisted.captures:
            return TargetRow((architecture,), self.unlisted, self.unlisted_where)
        if row is not None and row.since and version and version_key(version) < version_key(row.since):
            if row.before is None:
                return None
            where = f"{row.where}, before {row.since}"
            return replace(
                row, capture=row.before, first_id=0, failure_text="", since="", before=None, where=where
            )
        return row

    def failure(self, row: TargetRow) -> Failure | None:
        """What the user sees for a class that cannot capture (``None``: it captures, or it is not decidable)."""
        if row.capture.captures or not row.capture.decidable:
            return None
        if row.capture is Capture.NEVER:
            return self.never_failure
        if row.capture is Capture.BYPASSED:
            return Failure.FIRST_FORWARD_CRASH
        return Failure.STARTUP_REFUSAL

    def below_first_text(self, row: TargetRow) -> str:
        return row.failure_text or self.below_first

    @property
    def release(self) -> str:
        return f"{self.engine} {self.version}"

    def outcome(self, row: TargetRow) -> str:
        """What serving an EAGLE-3 drafter on this class does, in words."""
        if row.capture is Capture.NO_INTERFACE:
            return self.no_interface
        if row.capture is Capture.NEVER:
            return self.never
        if row.capture is Capture.BYPASSED:
            return self.bypassed
        return f"captures ids in {row.capture.range_text()}"
