"""An extraction as a record's ``targets`` section, and its difference with a stored record.

Rows the extractor decides carry proof ``derived``; a class it cannot decide keeps the stored
row (a hand entry, ``read`` or ``ran``) or, when there is none, is listed as needing one. A stored
``ran`` row on which the extraction agrees stays ``ran`` (the run is the stronger proof). The
section has the shape docs/architecture.md ("Engine records") gives: rows of architectures with
``capture``, ``where``, ``proof``, ``first_id`` and the release's messages, plus ``citations``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eagle3_forensics.engines.extract.facts import (
    CAPTURES,
    CRASH_FIRST_FORWARD,
    DELEGATED,
    NO_INTERFACE,
    STARTUP_REFUSAL,
    Extraction,
    TargetVerdict,
)
from eagle3_forensics.engines.rules import version_key

DERIVED = "derived"
# the record's capture kinds for each verdict kind
_CAPTURE = {NO_INTERFACE: "no_interface", STARTUP_REFUSAL: "never", CRASH_FIRST_FORWARD: "bypassed"}
_MESSAGE = {"no_interface": NO_INTERFACE, "never": STARTUP_REFUSAL, "bypassed": CRASH_FIRST_FORWARD}
# what the extractor does not derive: kept from the stored section as written by hand
_HAND_KEYS = ("unlisted", "unlisted_where", "unlisted_why", "default_ids", "conversion", "sorts_ids")
_NO_INTERFACE_WHERE = {
    "vllm": "registered without SupportsEagle3",
    "sglang": "registered without set_eagle3_layers_to_capture",
}


def view(v: TargetVerdict) -> tuple[str, int] | None:
    """(capture, first id) as a record row states it; None when the extraction did not decide."""
    if v.kind == CAPTURES:
        return ("through_n" if v.last == "N" else "below_n", v.first_id or 0)
    if v.kind == DELEGATED:
        return ("through_n", 0)
    if v.kind in _CAPTURE:
        return (_CAPTURE[v.kind], 0)
    return None


def row_view(row: dict[str, Any]) -> tuple[str, int]:
    return (str(row["capture"]), int(row.get("first_id", 0)))


def stored_rows(section: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """architecture -> its stored row."""
    out: dict[str, dict[str, Any]] = {}
    for row in (section or {}).get("rows", []):
        for arch in row["architectures"]:
            out[arch] = row
    return out


@dataclass
class TargetDiff:
    """Per architecture: where the extraction and a stored targets section agree and differ."""

    agree: list[str] = field(default_factory=list)
    differ: list[tuple[str, tuple[str, int], tuple[str, int], str]] = field(default_factory=list)
    new: list[tuple[str, tuple[str, int] | None]] = field(default_factory=list)  # registered, not stored
    gone: list[str] = field(default_factory=list)  # stored, no longer registered
    hand: list[str] = field(default_factory=list)  # undecided, a stored hand row covers it
    needs_hand: list[str] = field(default_factory=list)  # undecided and no stored row

    @property
    def clean(self) -> bool:
        return not (self.differ or self.new or self.gone or self.needs_hand)

    def to_dict(self) -> dict[str, Any]:
        return {
            "agree": len(self.agree),
            "differ": [
                {"architecture": a, "stored": list(s), "extracted": list(e), "why": w}
                for a, s, e, w in self.differ
            ],
            "new": [{"architecture": a, "extracted": list(e) if e else None} for a, e in self.new],
            "gone": self.gone,
            "hand": self.hand,
            "needs_hand": self.needs_hand,
        }

    def lines(self) -> list[str]:
        out = [
            f"agree {len(self.agree)}, differ {len(self.differ)}, new {len(self.new)}, gone {len(self.gone)}, "
            f"hand rows kept {len(self.hand)}, hand rows needed {len(self.needs_hand)}"
        ]
        out += [
            f"  differ {a}: stored {s[0]} from {s[1]}, extracted {e[0]} from {e[1]} ({w})"
            for a, s, e, w in self.differ
        ]
        out += [f"  new    {a}: {e[0] + ' from ' + str(e[1]) if e else 'undecided'}" for a, e in self.new]
        out += [f"  gone   {a}" for a in self.gone]
        out += [f"  hand   {a}: needs a hand entry (read)" for a in self.needs_hand]
        return out


def compare_targets(ex: Extraction, section: dict[str, Any] | None) -> TargetDiff:
    """The extraction's verdicts against a stored ``targets`` section, architecture by architecture."""
    stored = stored_rows(section)
    diff = TargetDiff()
    for arch, v in sorted(ex.targets.items()):
        mine, row = view(v), stored.get(arch)
        if row is None:
            diff.new.append((arch, mine))
            if mine is None:
                diff.needs_hand.append(arch)
        elif mine is None:
            diff.hand.append(arch)
        elif mine == row_view(row):
            diff.agree.append(arch)
        else:
            why = v.failure or v.below_first or v.how or v.where
            diff.differ.append((arch, row_view(row), mine, why))
    diff.gone = sorted(a for a in stored if a not in ex.targets)
    return diff


def _where(ex: Extraction, v: TargetVerdict) -> str:
    if v.kind == NO_INTERFACE:
        return _NO_INTERFACE_WHERE.get(ex.engine, v.where)
    return v.where or v.cls


Group = tuple[str, str, str, int, str, str, str]


def _grouped(ex: Extraction, old: dict[str, dict[str, Any]]) -> dict[Group, list[str]]:
    """Architectures by (capture, where, proof, first id, failure text, since, before): derived, or the
    stored hand row; a stored row's ``since``/``before`` (a change inside the record's range) stays
    while the extraction agrees with the row."""
    groups: dict[Group, list[str]] = {}
    for arch, v in sorted(ex.targets.items()):
        mine, row = view(v), old.get(arch)
        if mine is None:
            if row is not None:  # keep the hand entry as it is
                hand = (
                    row["capture"],
                    row["where"],
                    row.get("proof", "read"),
                    row.get("first_id", 0),
                    row.get("failure_text", ""),
                    row.get("since", ""),
                    row.get("before", ""),
                )
                groups.setdefault(hand, []).append(arch)
            continue
        agrees = row is not None and row_view(row) == mine
        ran = agrees and row is not None and row.get("proof") == "ran"
        since, before = (row.get("since", ""), row.get("before", "")) if agrees and row else ("", "")
        # a run's row, or one that says what changed inside the range, keeps its hand-written where
        where = str(row["where"]) if (ran or since) and row is not None else _where(ex, v)
        key = (mine[0], where, "ran" if ran else DERIVED, mine[1], "", since, before)
        groups.setdefault(key, []).append(arch)
    return groups


def targets_section(ex: Extraction, stored: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``targets`` section for ``ex``: derived rows, stored hand rows for what it cannot decide."""
    before = stored or {}
    rows: list[dict[str, Any]] = []
    for (capture, where, proof, first_id, failure, since, was), archs in sorted(
        _grouped(ex, stored_rows(stored)).items()
    ):
        row: dict[str, Any] = {
            "architectures": sorted(archs),
            "capture": capture,
            "where": where,
            "proof": proof,
        }
        if first_id:
            row["first_id"] = first_id
        if failure:
            row["failure_text"] = failure
        if since:
            row["since"] = since
        if was:
            row["before"] = was
        rows.append(row)
    section: dict[str, Any] = {"version": ex.version, "rows": rows}
    used = {r["capture"] for r in rows}
    for capture, kind in _MESSAGE.items():
        if capture in used:
            derived = next((v.failure for v in ex.targets.values() if v.kind == kind), "")
            section[capture] = before.get(capture) or derived
    if any(r.get("first_id") for r in rows):
        derived = next((v.below_first for v in ex.targets.values() if v.below_first), "")
        section["below_first"] = before.get("below_first") or derived
    for key in _HAND_KEYS:
        if key in before:
            section[key] = before[key]
    release = f"{ex.package}=={ex.version} "
    found = {release + c.path for v in ex.targets.values() for c in v.cites}
    # the hand entries' own citations (unlisted_where's files, a since row's older release) stay
    hand = {c for c in before.get("cites", []) if c.startswith(f"{ex.package}==")}
    section["cites"] = sorted(found | hand)
    return section


def settle(section: dict[str, Any], first: str) -> dict[str, Any]:
    """``section`` for a record whose range starts at ``first``: a row's ``since``/``before`` that a
    new release's record carried over from the previous one, no longer inside the range, is dropped."""
    for row in section.get("rows", []):
        if row.get("since") and version_key(row["since"]) <= version_key(first):
            row.pop("since")
            row.pop("before", None)
    return section


def citations(ex: Extraction) -> dict[str, str]:
    """The record's ``citations`` entries for every file the extraction cites."""
    ex.close()
    return {f"{ex.package}=={ex.version} {path}": sha for path, sha in sorted(ex.files.items())}
