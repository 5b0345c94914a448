"""One engine release as one data file: the record format, its validation and its (lazy) loading.

A record (``engines/records/<engine>-<first>.json``) holds everything the tool knows about one
engine release range: the drafter ``loader``, the serving command's ``launch`` rules and the
``startup`` validation, the ``targets`` (every target class: captures or not, valid ids, the
failure the user sees), the drafter ``knobs``, the ``verify`` settings, and in one place the
``citations``: ``"package==version path"`` -> sha256 of that wheel file. Sections name the
citations they rest on (``cites``); each rule carries its proof (``ran``/``read``/``derived``).
Sections are the JSON form (:mod:`.codec`) of the dataclass that interprets them; :mod:`.catalog`
turns them into those objects. Nothing is read at import: :func:`records` loads on first use.
The format is described in docs/architecture.md ("Engine records").
"""

from __future__ import annotations

import itertools
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle3_forensics.engines.proof import Citation
from eagle3_forensics.engines.rules import version_key

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

FORMAT = 1
RECORDS_DIR = Path(__file__).with_name("records")
SECTIONS = ("loader", "launch", "startup", "targets", "knobs", "verify")
_TOP = {"format", "engine", "package", "first", "last", "pinned", "notes", "citations", "listings", *SECTIONS}
_REQUIRED = ("format", "engine", "package", "first", "last", "citations")
_KEY = re.compile(r"^(?P<package>[A-Za-z0-9_./-]+)[=@]=?(?P<version>\S+) (?P<path>\S+)$")
_SHA = re.compile(r"^[0-9a-f]{64}$")


class RecordError(ValueError):
    """A record file that does not follow the format (names the file and the field)."""


def citation_key(c: Citation) -> str:
    """The key of a citation in a record's ``citations`` (``vllm==1.2.0 vllm/config/speculative.py``)."""
    return f"{c.package}=={c.version} {c.path}"


def parse_key(key: str, sha256: str) -> Citation:
    m = _KEY.match(key)
    if m is None:
        raise ValueError(f"citation key {key!r} is not 'package==version path'")
    return Citation(m["package"], m["version"], m["path"], sha256)


@dataclass(frozen=True)
class Record:
    """One release record as read from its file (sections still JSON; see :mod:`.catalog`)."""

    engine: str
    package: str
    first: str
    last: str
    citations: dict[str, str]  # "package==version path" -> sha256
    sections: dict[str, Any] = field(default_factory=dict)  # section name -> its JSON (absent: none)
    pinned: bool = True
    notes: tuple[str, ...] = ()
    # "package==version dir" -> the .py files in it (make engine-drift: files appearing next to cited ones)
    listings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    path: Path | None = None

    @property
    def versions(self) -> str:
        return self.first if self.first == self.last else f"{self.first}–{self.last}"

    @property
    def label(self) -> str:
        return f"{self.engine} {self.versions}"

    def section(self, name: str) -> Any:
        return self.sections.get(name)

    def cited(self, keys: list[str] | tuple[str, ...]) -> tuple[Citation, ...]:
        """The :class:`Citation` rows of ``keys`` (each key validated when the record was read)."""
        return tuple(parse_key(k, self.citations[k]) for k in keys)

    def sort_key(self) -> tuple[Any, ...]:
        return version_key(self.first) if self.pinned else ((0,), (0,), 0)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": FORMAT, "engine": self.engine, "package": self.package}
        out.update(first=self.first, last=self.last)
        if not self.pinned:
            out["pinned"] = False
        if self.notes:
            out["notes"] = list(self.notes)
        out.update({s: self.sections[s] for s in SECTIONS if self.sections.get(s) is not None})
        out["citations"] = dict(sorted(self.citations.items()))
        if self.listings:
            out["listings"] = {k: list(v) for k, v in sorted(self.listings.items())}
        return out


def _cite_keys(value: Any) -> list[str]:
    """Every citation key a section names (``cites`` lists and ``cite`` strings, at any depth)."""
    out: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "cites" and isinstance(v, list):
                out += [str(x) for x in v]
            elif k == "cite" and isinstance(v, str):
                out.append(v)
            else:
                out += _cite_keys(v)
    elif isinstance(value, list):
        for v in value:
            out += _cite_keys(v)
    return out


def validate(data: Any, where: str = "record") -> Record:
    """A :class:`Record` from a parsed file, or :class:`RecordError` saying what is wrong."""
    if not isinstance(data, dict):
        raise RecordError(f"{where}: not a JSON object")
    missing = [k for k in _REQUIRED if k not in data]
    unknown = sorted(set(data) - _TOP)
    if missing or unknown:
        raise RecordError(f"{where}: missing {missing}, unknown {unknown}")
    if data["format"] != FORMAT:
        raise RecordError(f"{where}: format {data['format']!r}, this version reads {FORMAT}")
    pinned = data.get("pinned", True)
    if not isinstance(pinned, bool):
        raise RecordError(f"{where}: pinned must be true or false")
    for k in ("engine", "package", "first", "last"):
        if not isinstance(data[k], str) or not data[k]:
            raise RecordError(f"{where}: {k} must be a non-empty string")
    if pinned:
        try:
            if version_key(data["first"]) > version_key(data["last"]):
                raise RecordError(f"{where}: first {data['first']} is after last {data['last']}")
        except ValueError as exc:
            raise RecordError(f"{where}: {exc}") from None
    cites = data["citations"]
    if not isinstance(cites, dict):
        raise RecordError(f"{where}: citations must map 'package==version path' to sha256")
    for key, sha in cites.items():
        if not _KEY.match(key) or not isinstance(sha, str) or not _SHA.match(sha):
            raise RecordError(f"{where}: citation {key!r}: not 'package==version path' -> 64 hex digits")
    sections = {s: data[s] for s in SECTIONS if data.get(s) is not None}
    for name, body in sections.items():
        if not isinstance(body, dict):
            raise RecordError(f"{where}: section {name} must be an object")
        dangling = sorted(set(_cite_keys(body)) - set(cites))
        if dangling:
            raise RecordError(f"{where}: section {name} cites {dangling}, not in citations")
    listings = data.get("listings", {})
    if not isinstance(listings, dict) or not all(
        isinstance(v, list) and all(isinstance(n, str) for n in v) for v in listings.values()
    ):
        raise RecordError(f"{where}: listings must map 'package==version dir' to file names")
    notes = data.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise RecordError(f"{where}: notes must be a list of strings")
    return Record(
        engine=data["engine"],
        package=data["package"],
        first=data["first"],
        last=data["last"],
        citations=dict(cites),
        sections=sections,
        pinned=pinned,
        notes=tuple(notes),
        listings={k: tuple(v) for k, v in listings.items()},
    )


def read_record(path: Path | Traversable) -> Record:
    """One record file, validated (:class:`RecordError` for a file that does not follow the format).

    ``path`` may be a package resource inside a zip (a wheel on ``sys.path``); such a record has no
    ``path`` to write back to."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RecordError(f"{path}: {exc}") from None
    rec = validate(data, path.name)
    return Record(**{**rec.__dict__, "path": path if isinstance(path, Path) else None})


def write_record(record: Record, path: Path) -> None:
    """Write ``record`` atomically (a temporary file renamed over ``path``), validated first."""
    data = record.to_json()
    validate(data, str(path))
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(dir=Path(path).parent, prefix=".record-", suffix=".json")
    os.chmod(tmp, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _packaged() -> Traversable:
    from importlib import resources  # heavy: importlib.resources (as in schemas), only where records are read

    return resources.files(__package__ or "eagle3_forensics.engines") / "records"


def _is_record(name: str) -> bool:
    return name.endswith(".json") and not name.startswith(".")  # not an interrupted write's temporary


@cache
def all_records(folder: Path | None = None) -> dict[str, tuple[Record, ...]]:
    """Every record in ``folder`` (default: the package's) by engine, oldest first (read once, on first use).

    The package's records are read as package resources, so a wheel run from a zip reads them too."""
    root: Path | Traversable = folder if folder is not None else _packaged()
    by_engine: dict[str, list[Record]] = {}
    for path in sorted((e for e in root.iterdir() if _is_record(e.name)), key=lambda e: e.name):
        rec = read_record(path)
        by_engine.setdefault(rec.engine, []).append(rec)
    out = {}
    for engine, recs in by_engine.items():
        recs.sort(key=Record.sort_key)
        for a, b in itertools.pairwise(recs):
            if a.pinned and b.pinned and version_key(a.last) >= version_key(b.first):
                raise RecordError(f"{engine}: records {a.versions} and {b.versions} overlap")
        out[engine] = tuple(recs)
    return out


def cited_releases(folder: Path | None = None) -> list[tuple[str, str]]:
    """Every ``(package, version)`` whose released files the pinned records (default: the package's)
    cite, sorted: wheels the extractor check (and ``make engine-drift``) reads."""
    keys = {
        key.split(" ", 1)[0]
        for recs in all_records(folder).values()
        for r in recs
        if r.pinned
        for key in r.citations
    }
    return sorted((k.split("==")[0], k.split("==")[1]) for k in keys if "==" in k)


def records(engine: str) -> tuple[Record, ...]:
    """The records of one engine, oldest first (empty for an engine without records)."""
    return all_records().get(engine, ())


__all__ = [
    "FORMAT",
    "RECORDS_DIR",
    "SECTIONS",
    "Record",
    "RecordError",
    "all_records",
    "citation_key",
    "cited_releases",
    "parse_key",
    "read_record",
    "records",
    "validate",
    "write_record",
]
