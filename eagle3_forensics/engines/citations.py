"""Citation rows of the release records: the wheel files a rule names in ``sources``, with their sha256.

A rule's ``sources`` are ``"package==version path[:lines] (what)"`` strings; the record that holds
the rule maps each cited file (``package==version path``) to its sha256 in ``citations``
(:mod:`.record`). :func:`uncited` says which named files a record does not hash, so a test can keep
``sources`` and ``citations`` in step; a source whose wheel was not downloaded (a repository commit)
names no wheel file and needs none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from eagle3_forensics.engines.proof import Citation

# "vllm==1.2.0 vllm/config/speculative.py:1686-1697 (parallel_drafting)" -> package, version, path
_SOURCE = re.compile(r"^(?P<package>[A-Za-z0-9_.-]+)==(?P<version>[^\s]+) (?P<path>[^\s:(),]+)")
_SHA = re.compile(r"^[0-9a-f]{64}$")


def parse_source(source: str) -> tuple[str, str, str] | None:
    """``(package, version, path)`` of a ``sources`` entry that names a released wheel, else ``None``."""
    m = _SOURCE.match(source.strip())
    if m is None or not m["path"].endswith(".py"):
        return None
    return m["package"], m["version"], m["path"]


def key(package: str, version: str, path: str) -> str:
    """The key of one wheel file in a record's ``citations``."""
    return f"{package}=={version} {path}"


def cite(sources: Iterable[str], sha256: Mapping[str, str]) -> tuple[Citation, ...]:
    """A row per distinct wheel file named in ``sources`` whose sha256 ``sha256`` holds (sorted, no repeats)."""
    rows: dict[str, Citation] = {}
    for source in sources:
        parsed = parse_source(source)
        if parsed is not None and (sha := sha256.get(key(*parsed))) is not None:
            rows[key(*parsed)] = Citation(*parsed, sha256=sha)
    return tuple(rows[k] for k in sorted(rows))


def uncited(sources: Iterable[str], sha256: Mapping[str, str]) -> list[str]:
    """Wheel files named in ``sources`` that ``sha256`` does not hash (what a record still has to pin)."""
    return sorted({key(*p) for s in sources if (p := parse_source(s)) is not None and key(*p) not in sha256})


def invalid(citations: Iterable[Citation]) -> list[str]:
    """Rows that do not validate: a sha256 that is not 64 hex digits, or an empty package, version or path."""
    return [
        f"{c.package}=={c.version} {c.path}"
        for c in citations
        if not (c.package and c.version and c.path and _SHA.match(c.sha256))
    ]


__all__ = ["cite", "invalid", "key", "parse_source", "uncited"]
