"""A release against its record: the extraction, the diff a maintainer reviews, the re-derived record.

The baseline is the record that describes the release (re-extraction), or for a new release the
newest record before it. The report lists, over every file the baseline cites, which changed
sha256 or are gone in the new wheel; the target rows that differ, appeared or went; the launch
facts that changed (against the baseline release's own extraction when its wheel is at hand);
and what needs a hand entry. The re-derived record is the baseline with the derived ``targets``
section, its citations moved to the new release (with the new files' sha256) and ``first``/
``last`` set to it: for a new release, the one file the loop adds.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from eagle3_forensics.engines.extract.facts import Extraction
from eagle3_forensics.engines.extract.records import (
    TargetDiff,
    citations,
    compare_targets,
    settle,
    targets_section,
)
from eagle3_forensics.engines.extract.run import ENGINES, extract
from eagle3_forensics.engines.extract.wheel import WheelError, sources
from eagle3_forensics.engines.record import (
    RECORDS_DIR,
    Record,
    all_records,
    cited_releases,
    read_record,
    validate,
    write_record,
)
from eagle3_forensics.engines.rules import version_key


@dataclass
class Report:
    """One release extracted and compared with its baseline record."""

    extraction: Extraction
    baseline: Record | None
    targets: TargetDiff
    files: dict[str, list[str]] = field(default_factory=dict)  # changed / missing / same
    facts: list[str] = field(default_factory=list)  # launch facts that changed
    record: dict[str, Any] = field(default_factory=dict)  # the re-derived record (JSON)

    @property
    def clean(self) -> bool:
        return (
            self.targets.clean
            and not self.facts
            and not self.files.get("changed")
            and not self.files.get("missing")
            and not self.extraction.undecided()
        )

    def lines(self) -> list[str]:
        ex = self.extraction
        base = self.baseline.label if self.baseline else "no record"
        c = ex.counts()
        out = [
            f"== {ex.package} {ex.version} against {base}",
            f"surface: {c['targets']} classes: {c['captures']} capture, {c['no_interface']} no interface, "
            f"{c['startup_refusal']} refused at start-up, {c['crash_first_forward']} crash at the first forward, "
            f"{c['delegated']} delegated, {c['unknown']} undecided; {c['facts']} launch facts",
            f"cited files: {len(self.files.get('same', []))} same, {len(self.files.get('changed', []))} changed, "
            f"{len(self.files.get('missing', []))} missing",
        ]
        out += [f"  changed {p}" for p in self.files.get("changed", [])]
        out += [f"  missing {p}" for p in self.files.get("missing", [])]
        out += ["targets: " + line for line in self.targets.lines()]
        out += [f"launch: {line}" for line in self.facts]
        out += [f"hand entry needed (read): {u}" for u in ex.undecided()]
        return out


def pinned_records(engine: str, folder: Path = RECORDS_DIR) -> list[Record]:
    """The pinned records of ``engine`` in ``folder``, oldest first, read now (a record just written counts)."""
    recs = [
        r
        for r in (read_record(p) for p in sorted(Path(folder).glob("*.json")))
        if r.engine == engine and r.pinned
    ]
    return sorted(recs, key=Record.sort_key)


def baseline(engine: str, version: str, folder: Path = RECORDS_DIR) -> Record | None:
    """The record describing ``version``, else the newest record before it."""
    recs = pinned_records(engine, folder)
    key = version_key(version)
    covering = [r for r in recs if version_key(r.first) <= key <= version_key(r.last)]
    older = [r for r in recs if version_key(r.last) < key]
    return covering[0] if covering else (older[-1] if older else None)


def _targets_of(engine: str, rec: Record | None, folder: Path) -> tuple[Record | None, dict[str, Any] | None]:
    """The record holding the targets section in effect at ``rec`` (it or the newest before it with one)."""
    if rec is None:
        return None, None
    recs = [r for r in pinned_records(engine, folder) if r.sort_key() <= rec.sort_key()]
    for r in reversed(recs):
        if r.section("targets") is not None:
            return r, r.section("targets")
    return None, None


def file_changes(rec: Record, root: Path) -> dict[str, list[str]]:
    """Every file the record cites against the wheel at ``root``: per path, the newest citation
    no later than the record's last release (citations of later releases look ahead, not back)."""
    last = version_key(rec.last)
    best: dict[str, tuple[tuple[int, ...], str]] = {}
    for key, sha in rec.citations.items():
        _package, rest = key.split("==", 1)
        ver, path = rest.split(" ", 1)
        vkey = version_key(ver)
        if vkey <= last and (path not in best or vkey > best[path][0]):
            best[path] = (vkey, sha)
    out: dict[str, list[str]] = {"same": [], "changed": [], "missing": []}
    for path, (_vkey, sha) in sorted(best.items()):
        file = root / PurePosixPath(path)
        if not file.is_file():
            out["missing"].append(path)
        elif hashlib.sha256(file.read_bytes()).hexdigest() != sha:
            out["changed"].append(path)
        else:
            out["same"].append(path)
    return out


def fact_changes(old: Extraction, new: Extraction) -> list[str]:
    """Launch facts whose values differ between two extractions (lists: what was added and removed)."""
    out = []
    for name in sorted(set(old.facts) | set(new.facts)):
        a = old.facts[name].value if name in old.facts else None
        b = new.facts[name].value if name in new.facts else None
        if a == b:
            continue
        if isinstance(a, list) and isinstance(b, list):
            added, removed = sorted(set(b) - set(a)), sorted(set(a) - set(b))
            out.append(f"{name}: +{added} -{removed}" if added or removed else f"{name}: order changed")
        else:
            out.append(f"{name}: {a!r} -> {b!r}")
    return out


def _moved(rec: Record, version: str, root: Path, ex: Extraction) -> dict[str, Any]:
    """``rec`` as JSON, moved to ``version``: its citations re-keyed with the new files' sha256."""
    data = rec.to_json()
    if version_key(version) > version_key(rec.last):  # a new release: its own record
        data["first"] = data["last"] = version
        text = json.dumps(data)
        for key in list(rec.citations):
            package, rest = key.split("==", 1)
            old_ver, path = rest.split(" ", 1)
            file = root / PurePosixPath(path)
            if package in (ex.package, rec.package) and old_ver == rec.last and file.is_file():
                text = text.replace(f"{package}=={old_ver} {path}", f"{package}=={version} {path}")
        data = json.loads(text)
        for k in data["citations"]:
            file = root / PurePosixPath(k.split(" ", 1)[1])
            if f"=={version} " in k and file.is_file():
                data["citations"][k] = hashlib.sha256(file.read_bytes()).hexdigest()
    return data


def _cited(cites: list[str], known: dict[str, str], version: str) -> list[str]:
    """``cites`` that the record hashes; a hand entry's citation of the release before, moved to
    ``version`` when the record re-keyed it (the file is in the new wheel), else dropped."""
    out = set()
    for c in cites:
        package, rest = c.split("==", 1)
        moved = f"{package}=={version} {rest.split(' ', 1)[1]}"
        out |= {k for k in (c, moved) if k in known}
    return sorted(out)


def extract_release(
    package: str, version: str, cache: Path, offline: bool = False, folder: Path = RECORDS_DIR
) -> Report:
    """Extract ``package==version`` and compare it with its baseline record."""
    engine = ENGINES.get(package)
    if engine is None:
        raise ValueError(f"no extractor for {package!r} (known: {', '.join(ENGINES)})")
    root = sources(package, version, cache, offline)
    ex = extract(package, version, root)
    base = baseline(engine, version, folder)
    _trec, stored = _targets_of(engine, base, folder)
    report = Report(ex, base, compare_targets(ex, stored) if ex.targets else TargetDiff())
    if base is None:
        return report
    report.files = file_changes(base, root)
    old_version = base.last if version_key(base.last) < version_key(version) else None
    if old_version is not None:
        try:
            old_root = sources(base.package, old_version, cache, offline)
            report.facts = fact_changes(extract(base.package, old_version, old_root), ex)
        except WheelError as exc:
            report.facts = [f"baseline {base.package}=={old_version} not extracted: {exc}"]
    record = _moved(base, version, root, ex)
    if ex.targets and stored is not None:
        section = settle(targets_section(ex, stored), record["first"])
        record["targets"] = section
        record["citations"] = {**record["citations"], **citations(ex)}
        section["cites"] = _cited(section["cites"], record["citations"], version)
    fields = ex.facts.get("speculative_config.fields")
    startup = record.get("startup")
    if isinstance(startup, dict) and "config_keys" in startup and fields is not None and fields.decided:
        startup["config_keys"] = sorted(fields.value)  # mechanical: SpeculativeConfig's fields
    report.record = record
    return report


def write(report: Report, folder: Path = RECORDS_DIR) -> Path:
    """Write the re-derived record (a new file for a new release, else over the baseline's)."""
    if not report.record:
        raise ValueError("no record to write (no baseline record)")
    rec = validate(report.record, "re-derived record")
    path = folder / f"{rec.engine}-{rec.first}.json"
    if report.baseline is not None and report.baseline.first == rec.first and report.baseline.path:
        path = report.baseline.path
    write_record(rec, path)
    return path


def pypi_versions(package: str) -> list[str]:
    """Every version PyPI lists for ``package`` (``pip index versions``)."""
    cmd = [sys.executable, "-m", "pip", "index", "versions", package, "--disable-pip-version-check"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)  # noqa: S603
    except subprocess.TimeoutExpired as exc:
        raise WheelError(f"pip index versions {package}: timed out") from exc
    for line in done.stdout.splitlines():
        if line.strip().startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    raise WheelError(
        f"pip index versions {package}: {(done.stderr.strip().splitlines() or ['no answer'])[-1]}"
    )


def newer_releases(cache: Path, offline: bool = False, folder: Path = RECORDS_DIR) -> list[Report]:
    """A report for every PyPI release newer than the newest record of each extractable engine."""
    out = []
    for engine in sorted({ENGINES[p] for p in ENGINES}):
        pinned = pinned_records(engine, folder)
        if not pinned:
            continue
        newest = pinned[-1]
        for version in sorted(pypi_versions(newest.package), key=version_key):
            if version_key(version) > version_key(newest.last) and _is_release(version):
                out.append(extract_release(newest.package, version, cache, offline, folder))
    return out


def covered_releases(folder: Path = RECORDS_DIR) -> list[tuple[str, str]]:
    """Every ``(package, version)`` the records stand for: each release PyPI lists inside a pinned
    record's range, and every release a record cites (a loader file read in another package)."""
    wanted = set(cited_releases(folder))
    ranges: dict[str, list[Record]] = {}
    for rec in (r for recs in all_records(folder).values() for r in recs if r.pinned):
        ranges.setdefault(rec.package, []).append(rec)
    for package, recs in sorted(ranges.items()):
        for version in pypi_versions(package):
            if _is_release(version) and any(
                version_key(r.first) <= version_key(version) <= version_key(r.last) for r in recs
            ):
                wanted.add((package, version))
    return sorted(wanted, key=lambda pv: (pv[0], version_key(pv[1])))


def _is_release(version: str) -> bool:
    try:
        version_key(version)
    except ValueError:
        return False
    return not any(tag in version for tag in ("rc", "a", "b", "dev"))
