"""Fetch a release's wheel without its dependencies and unpack its ``.py`` files, both cached.

``pip download --no-deps --only-binary=:all: NAME==VERSION`` into the cache folder
(``$EAGLE3_WHEELS``, default ``~/.cache/eagle3-forensics/wheels``); the sources go to ``<cache>/extracted/<name>-<version>/``,
written to a temporary folder first and renamed, so an interrupted unpack never looks complete.
Nothing is downloaded when the wheel is already in the cache (the loader test runs offline).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

DEFAULT_CACHE = Path(
    os.environ.get("EAGLE3_WHEELS") or Path.home() / ".cache" / "eagle3-forensics" / "wheels"
)


class WheelError(RuntimeError):
    """The wheel could not be found, downloaded or unpacked."""


def wheel_stem(package: str, version: str) -> str:
    return f"{package.replace('-', '_').replace('.', '_').lower()}-{version}-"


def cached_wheel(cache: Path, package: str, version: str) -> Path | None:
    stem = wheel_stem(package, version)
    found = sorted(p for p in Path(cache).glob("*.whl") if p.name.lower().startswith(stem))
    return found[0] if found else None


def download(package: str, version: str, cache: Path = DEFAULT_CACHE, timeout: int = 1800) -> Path:
    """The wheel of ``package==version`` in ``cache`` (downloaded when absent)."""
    found = cached_wheel(cache, package, version)
    if found is not None:
        return found
    Path(cache).mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
    ]
    try:
        done = subprocess.run(  # noqa: S603 - pip with fixed arguments
            [*cmd, f"{package}=={version}", "-d", str(cache)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise WheelError(f"pip download {package}=={version}: timed out") from exc
    found = cached_wheel(cache, package, version)
    if done.returncode != 0 or found is None:
        tail = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise WheelError(f"pip download {package}=={version}: {tail}")
    return found


def unpack(wheel: Path, cache: Path = DEFAULT_CACHE) -> Path:
    """The folder holding the wheel's ``.py`` files (unpacked once, atomically)."""
    name = wheel.name.split("-")
    dest = Path(cache) / "extracted" / f"{name[0]}-{name[1]}"
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                if info.filename.endswith(".py") and not info.is_dir() and ".." not in info.filename:
                    zf.extract(info, tmp)
        tmp.rename(dest)
    except (OSError, zipfile.BadZipFile) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if dest.is_dir():  # another process finished first
            return dest
        raise WheelError(f"unpack {wheel.name}: {exc}") from exc
    return dest


def sources(package: str, version: str, cache: Path = DEFAULT_CACHE, offline: bool = False) -> Path:
    """The unpacked sources of ``package==version`` (``offline``: only from the cache)."""
    extracted = Path(cache) / "extracted" / f"{package.replace('-', '_')}-{version}"
    if extracted.is_dir():
        return extracted
    wheel = cached_wheel(cache, package, version)
    if wheel is None:
        if offline:
            raise WheelError(f"{package}=={version}: no wheel in {cache}")
        wheel = download(package, version, cache)
    return unpack(wheel, cache)
