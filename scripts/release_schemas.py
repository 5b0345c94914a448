"""Record the published JSON Schemas as released: tests/schemas_released/<name>-<major>.json.

tests/unit/test_schemas.py fails when a schema has no released copy of its major version, or when
it changed incompatibly with that copy (eagle3_forensics/schemas/compat.py says what breaks). Run
this after adding a schema, after a compatible change (the copy is refreshed) or after a major
bump (a new copy; the old major's copy stays). It refuses to overwrite a copy incompatibly.

    python scripts/release_schemas.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from eagle3_forensics import schemas
from eagle3_forensics.schemas.compat import breaking_changes

RELEASED = Path(__file__).resolve().parents[1] / "tests" / "schemas_released"


def released_path(name: str) -> Path:
    return RELEASED / f"{name}-{schemas.major(name)}.json"


def text(name: str) -> str:
    return json.dumps(schemas.load(name), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only report; write nothing (exit 1 if out of date)")
    args = ap.parse_args(argv)
    RELEASED.mkdir(parents=True, exist_ok=True)
    status = 0
    for name in schemas.names():
        path = released_path(name)
        new = text(name)
        if path.is_file():
            if path.read_text() == new:
                continue
            broken = breaking_changes(json.loads(path.read_text()), json.loads(new))
            if broken:
                print(
                    f"{name}: breaking change against {path.name}; bump the major version:", file=sys.stderr
                )
                for b in broken:
                    print(f"  {b}", file=sys.stderr)
                status = 1
                continue
            what = "refreshed (compatible change)"
        else:
            what = "released"
        if args.check:
            print(f"{name}: would be {what}: {path.name}")
            status = 1
        else:
            path.write_text(new)
            print(f"{name}: {what}: {path.name}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
