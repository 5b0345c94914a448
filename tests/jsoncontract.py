"""Validation of every contract object the test suite produces (docs/json.md).

tests/conftest.py sets ``E3F_JSON_LOG`` for the session, so every object a command prints with
``--json`` (in process or in a subprocess) and every ``summary.json``/baseline the runner writes is
also appended to one log; after each test the new objects are validated against their published
schemas. Tests that parse JSON themselves (the contract fuzz) call :func:`validate_contract`.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from eagle3_forensics import schemas

VALIDATED: Counter[str] = Counter()
"""Objects validated in this session, per schema name."""
FUZZ_RUNS: Counter[str] = Counter()
"""Contract-fuzz runs in this session, per schema name (tests/fuzz/contract.py)."""
FUZZ_SECONDS: dict[str, float] = defaultdict(float)


def validate_contract(obj: Any) -> str:
    """Validate one contract object against its published schema; returns the schema name."""
    name = schemas.validate(obj)
    VALIDATED[name] += 1
    return name


class JsonLog:
    """The session's ``E3F_JSON_LOG`` file and how far it has been validated."""

    def __init__(self) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="e3f-json-log-")
        self.path = Path(self.dir.name) / "objects.jsonl"
        self.path.touch()
        self.offset = 0

    def new_objects(self) -> list[Any]:
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            data = fh.read()
        end = data.rfind(b"\n") + 1  # a line still being written by a subprocess waits for the next test
        self.offset += end
        return [json.loads(line) for line in data[:end].splitlines() if line.strip()]

    def problems(self) -> list[str]:
        """Validate the objects logged since the last call; one line per invalid one."""
        out = []
        for obj in self.new_objects():
            try:
                validate_contract(obj)
            except Exception as exc:  # jsonschema.ValidationError, or no published schema
                where = "/".join(str(p) for p in getattr(exc, "absolute_path", []))
                label = obj.get("schema") if isinstance(obj, dict) else repr(obj)[:80]
                out.append(f"{label} at /{where}: {exc}"[:1500])
        return out

    def close(self) -> None:
        self.dir.cleanup()


def summary_lines() -> list[str]:
    lines = []
    if VALIDATED:
        per = ", ".join(f"{name} {n}" for name, n in sorted(VALIDATED.items()))
        lines.append(
            f"JSON contract: {sum(VALIDATED.values())} objects validated against their schemas ({per})"
        )
    if FUZZ_RUNS:
        per = ", ".join(f"{name} {n} ({FUZZ_SECONDS[name]:.0f} s)" for name, n in sorted(FUZZ_RUNS.items()))
        lines.append(f"contract fuzz: {sum(FUZZ_RUNS.values())} runs ({per})")
    return lines
