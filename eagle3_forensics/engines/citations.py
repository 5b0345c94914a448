"""Citation rows for the release tables: every wheel file a table names in ``sources``, with its sha256.

A table's ``sources`` are ``"package==version path[:lines] (what)"`` strings; :func:`cite` turns
them into :class:`~eagle3_forensics.engines.proof.Citation` rows with the sha256 recorded in
:mod:`.wheel_sha256` (written by ``scripts/engine_drift.py pin`` from the downloaded wheels).
A source whose wheel was not downloaded (a repository commit, a wheel too large to fetch) gets no
row, so ``citations`` says exactly which files ``make engine-drift`` can compare with a newer release.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from eagle3_forensics.engines.proof import Citation, Proof
from eagle3_forensics.engines.rules import EngineRules
from eagle3_forensics.engines.wheel_sha256 import SHA256

# "vllm==0.34.0 vllm/config/speculative.py:1686-1697 (parallel_drafting)" -> package, version, path
_SOURCE = re.compile(r"^(?P<package>[A-Za-z0-9_.-]+)==(?P<version>[^\s]+) (?P<path>[^\s:(),]+)")
_SHA = re.compile(r"^[0-9a-f]{64}$")


def parse_source(source: str) -> tuple[str, str, str] | None:
    """``(package, version, path)`` of a ``sources`` entry that names a released wheel, else ``None``."""
    m = _SOURCE.match(source.strip())
    if m is None or not m["path"].endswith(".py"):
        return None
    return m["package"], m["version"], m["path"]


def key(package: str, version: str, path: str) -> str:
    """The :data:`SHA256` key of one wheel file."""
    return f"{package}=={version} {path}"


def cite(sources: Iterable[str]) -> tuple[Citation, ...]:
    """A row per distinct wheel file named in ``sources`` whose sha256 is recorded (sorted, no repeats)."""
    rows: dict[str, Citation] = {}
    for source in sources:
        parsed = parse_source(source)
        if parsed is None:
            continue
        sha = SHA256.get(key(*parsed))
        if sha is not None:
            rows[key(*parsed)] = Citation(*parsed, sha256=sha)
    return tuple(rows[k] for k in sorted(rows))


def uncited(sources: Iterable[str]) -> list[str]:
    """Wheel files named in ``sources`` with no recorded sha256 (what ``pin`` still has to read)."""
    return sorted({key(*p) for s in sources if (p := parse_source(s)) is not None and key(*p) not in SHA256})


def invalid(citations: Iterable[Citation]) -> list[str]:
    """Rows that do not validate: a sha256 that is not 64 hex digits, or an empty package, version or path."""
    return [
        f"{c.package}=={c.version} {c.path}"
        for c in citations
        if not (c.package and c.version and c.path and _SHA.match(c.sha256))
    ]


def with_provenance(tables: Iterable[EngineRules], ran: Iterable[str] = ()) -> tuple[EngineRules, ...]:
    """``tables`` marked RAN where their range holds a version in ``ran`` (the releases whose own
    loader the loader tier runs), READ otherwise, each with the citations of its and its classes' sources."""
    ran = tuple(ran)
    out = []
    for table in tables:
        proof = Proof.RAN if table.pinned and any(table.covers(v) for v in ran) else Proof.READ
        sources = [*table.sources, *(s for choice in table.classes for s in choice.rules.sources)]
        out.append(replace(table, proof=proof, citations=cite(sources)))
    return tuple(out)


__all__ = ["cite", "invalid", "key", "parse_source", "uncited", "with_provenance"]
