"""``--bundle FILE.zip``: a run's report directory as one archive that opens offline.

The archive holds one folder (named after the archive) with ``index.html``, ``summary.json``, every
run's HTML report and, under ``runs/``, the executed notebooks and their record sidecars — exactly
the files the summary names, nothing else that happens to lie in the output directory. Every link
in the pages is relative and every figure is an inline PNG, so unzipping it anywhere and opening
``index.html`` shows the whole run with no server and no network. Entries are stored in a fixed
order with a fixed timestamp, so the same reports give the same archive.
"""

from __future__ import annotations

import os
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from eagle3_forensics.errors import UnusableInputError

_FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # the zip format's epoch: reproducible archives
_RUN_FILES = ("html", "executed_notebook", "record")


def _safe_relative(rel: str) -> bool:
    p = PurePosixPath(rel)
    return bool(rel) and not p.is_absolute() and ".." not in p.parts and "\\" not in rel


def bundle_members(out: Path, summary: dict[str, Any]) -> Iterator[str]:
    """The files of a report directory that go into its bundle, relative to ``out``."""
    yield "index.html"
    yield "summary.json"
    later: list[str] = []
    for r in summary.get("runs") or []:
        for key in _RUN_FILES:
            rel = r.get(key)
            if isinstance(rel, str) and _safe_relative(rel) and (out / rel).is_file():
                if key == "html":
                    yield rel
                else:
                    later.append(rel)
    yield from later


def write_bundle(out: str | Path, destination: str | Path, summary: dict[str, Any]) -> Path:
    """Pack the report directory ``out`` into ``destination`` (a .zip, written atomically)."""
    out = Path(out)
    dest = Path(destination).resolve()
    dest.parent.mkdir(parents=True, exist_ok=True)
    top = re.sub(r"[^A-Za-z0-9._-]+", "_", dest.stem).strip("._") or "report"
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    seen: set[str] = set()
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            for rel in bundle_members(out, summary):
                if rel in seen:
                    continue
                seen.add(rel)
                src = out / rel
                if not src.is_file():
                    raise UnusableInputError(f"cannot bundle {src}: not written", path=str(src))
                info = zipfile.ZipInfo(f"{top}/{rel}", date_time=_FIXED_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, src.read_bytes())
        os.replace(tmp, dest)
    except OSError as exc:
        raise UnusableInputError(f"cannot write bundle {dest}: {exc}", path=str(dest)) from None
    finally:
        tmp.unlink(missing_ok=True)
    return dest


__all__ = ["bundle_members", "write_bundle"]
