"""Machine-readable results from notebooks: a JSON sidecar the report runner reads back.

A notebook calls ``record("verdict", d.verdict())``; the value is added under its name to the
JSON object in the file named by the environment variable ``E3F_RECORD``. When the variable
is unset (an interactive session) nothing is written. The file needs no Jupyter to read, is
diff-able, and survives nbconvert.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ENV_VAR = "E3F_RECORD"


def record_path() -> Path | None:
    """The sidecar file this process records into, or ``None`` when recording is off."""
    value = os.environ.get(ENV_VAR, "").strip()
    return Path(value) if value else None


def read_records(path: str | Path) -> dict[str, Any]:
    """The recorded values in ``path`` ({} when the file does not exist)."""
    p = Path(path)
    if not p.exists():
        return {}
    data = json.loads(p.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{p} does not hold a JSON object of records")
    return data


def record(name: str, value: Any) -> None:
    """Add ``name: value`` to the sidecar named by ``$E3F_RECORD`` (a later call with the same name replaces it).

    ``value`` must be JSON-serialisable (``TypeError`` otherwise, even when recording is off,
    so a notebook that works interactively also works under the runner).
    """
    if not isinstance(name, str) or not name:
        raise ValueError("record name must be a non-empty string")
    try:
        encoded = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"record {name!r}: value is not JSON-serialisable ({exc})") from None
    path = record_path()
    if path is None:
        return
    data = read_records(path)
    data[name] = encoded
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
