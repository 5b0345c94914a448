"""`make engine-drift`: compare the newest release tables with the releases PyPI holds today.

    python scripts/engine_drift.py [--out build] [--cache /tmp/engine-drift-wheels]
    python scripts/engine_drift.py pin --wheels DIR [DIR ...]

The default command lists, per cited PyPI package, the releases newer than the newest one the
tables read (``pip index versions``), downloads each wheel without dependencies (``pip download
--no-deps``), and reports the cited files whose sha256 changed or that are gone, and the files
that appeared or disappeared next to them. It writes ``OUT/engine-drift.json`` and prints a table.
Exit 0: nothing cited changed; 1: a newer release changed cited files (read them, then write a new
table); 2: PyPI or a wheel could not be reached.

``pin`` rewrites the sha256 ``citations`` and ``listings`` of the release records
(eagle3_forensics/engines/records/) from wheels already downloaded (after a record cites new files). It depends on PyPI, so it is not part of .ci/run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from eagle3_forensics.engines import drift

ROOT = Path(__file__).resolve().parents[1]


def _pip(*args: str, timeout: int = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - pip with fixed arguments and a PyPI name from our own tables
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def pypi_versions(package: str) -> list[str]:
    done = _pip("index", "versions", package, "--disable-pip-version-check", timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"pip index versions {package}: {done.stderr.strip().splitlines()[-1:]}")
    return drift.parse_pip_index(done.stdout)


def download(package: str, version: str, dest: Path) -> Path:
    found = drift.find_wheel([dest], package, version)
    if found is not None:
        return found
    done = _pip("download", "--no-deps", "--only-binary=:all:", f"{package}=={version}", "-d", str(dest))
    found = drift.find_wheel([dest], package, version)
    if done.returncode != 0 or found is None:
        tail = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise RuntimeError(f"pip download {package}=={version}: {tail}")
    return found


def check(out: Path, cache: Path) -> int:
    cache.mkdir(parents=True, exist_ok=True)
    drifts: list[drift.Drift] = []
    uncompared: list[str] = []
    failed = False
    for package, rows in sorted(drift.newest_citations(drift.all_citations()).items()):
        read = rows[0].version
        try:
            versions = drift.newer(pypi_versions(package), read)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            uncompared.append(f"{package}: {exc}")
            failed = True
            continue
        for version in versions:
            try:
                files = drift.wheel_files(download(package, version, cache))
                drifts.append(drift.compare(rows, files, version, drift.recorded_listings()))
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                drifts.append(drift.Drift(package, read, version, error=str(exc)[:300]))
                failed = True
    out.mkdir(parents=True, exist_ok=True)
    report = {
        "packages": {p: rows[0].version for p, rows in drift.newest_citations(drift.all_citations()).items()},
        "newer": [d.to_dict() for d in drifts],
        "uncompared": uncompared,
        "unreviewed": [f"{d.package}=={d.version}" for d in drifts if not d.reviewed],
    }
    (out / "engine-drift.json").write_text(json.dumps(report, indent=2) + "\n")
    print(drift.render_table(drifts, uncompared))
    print(f"\nwrote {out / 'engine-drift.json'}")
    if failed:
        return 2
    return 0 if all(d.reviewed for d in drifts) else 1


def pin_command(wheels: list[Path]) -> int:
    count, missing = drift.pin_records(wheels)
    print(f"re-pinned {count} release records from {len(wheels)} wheel folders")
    for m in missing:
        print(f"  not pinned (wheel or file not found): {m}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "engine-drift-wheels")
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("pin", help="rewrite the records' sha256 citations from downloaded wheels")
    p.add_argument("--wheels", type=Path, nargs="+", required=True)
    args = parser.parse_args(argv)
    if args.command == "pin":
        return pin_command(args.wheels)
    return check(args.out, args.cache)


if __name__ == "__main__":
    sys.exit(main())
