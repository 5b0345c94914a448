"""The release records: every file follows the format, and a broken one fails with its reason."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from paths import ROOT

from eagle3_forensics.engines.codec import decode, encode
from eagle3_forensics.engines.record import (
    RECORDS_DIR,
    RecordError,
    all_records,
    read_record,
    validate,
    write_record,
)
from eagle3_forensics.engines.releases import ENGINE_NAMES, engine_releases
from eagle3_forensics.engines.rules import AuxRule, EngineRules


def _one() -> dict:
    return json.loads((RECORDS_DIR / "vllm-0.34.0.json").read_text())


def test_every_engine_has_records_and_every_record_reads() -> None:
    found = all_records()
    assert set(found) == set(ENGINE_NAMES)
    for engine in ENGINE_NAMES:
        assert engine_releases(engine)  # every loader section decodes into EngineRules


def test_records_read_from_a_wheel_on_sys_path(tmp_path: Path) -> None:
    """A wheel put on sys.path unpacked (PYTHONPATH=the .whl) serves the records as zip members:
    read as package resources, the same records, with no path to write back to."""
    wheel = tmp_path / "e3f.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for f in sorted(RECORDS_DIR.glob("*.json")):
            zf.write(f, f"eagle3_forensics/engines/records/{f.name}")
    members = zipfile.Path(wheel, "eagle3_forensics/engines/records/")
    from_zip = [read_record(m) for m in sorted(members.iterdir(), key=lambda m: m.name)]
    packaged = sorted((r for recs in all_records().values() for r in recs), key=lambda r: r.path.name)  # type: ignore[union-attr]
    assert [r.to_json() for r in from_zip] == [r.to_json() for r in packaged]
    assert all(r.path is None for r in from_zip) and all(r.path is not None for r in packaged)


def test_a_written_record_reads_back_identically(tmp_path: Path) -> None:
    rec = read_record(RECORDS_DIR / "vllm-0.34.0.json")
    out = tmp_path / "r.json"
    write_record(rec, out)
    assert out.read_text() == (RECORDS_DIR / "vllm-0.34.0.json").read_text()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(format=2), "format 2"),
        (lambda d: d.update(colour="red"), "unknown ['colour']"),
        (lambda d: d["citations"].update({"vllm==0.34.0 x.py": "abc"}), "64 hex digits"),
        (lambda d: d["loader"]["cites"].append("vllm==9.9.9 nowhere.py"), "not in citations"),
        (lambda d: d.update(first="0.35.0"), "is after last"),
    ],
)
def test_a_broken_record_says_why(change, message) -> None:
    data = _one()
    change(data)
    with pytest.raises(RecordError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate(data)


def test_a_section_that_does_not_decode_names_the_field() -> None:
    body = {k: v for k, v in _one()["loader"].items() if k not in ("cites", "classes")}
    with pytest.raises(ValueError, match="prefix"):
        decode(
            EngineRules,
            {**body, "prefix": "sideways"},
            "loader",
            name="vllm",
            package="vllm",
            first="1",
            last="1",
        )
    with pytest.raises(ValueError, match="unknown fields"):
        decode(AuxRule, {"convert": "as_is", "colour": 1}, "aux")


def test_codec_round_trips_a_table() -> None:
    table = engine_releases("vllm")[-1]
    assert encode(table, base=table) == {}
    again = decode(EngineRules, encode(table))
    assert again == table


def test_no_record_is_read_when_the_cli_is_imported() -> None:
    """The CLI starts fast: importing it and the engine modules reads no record file."""
    code = (
        "import eagle3_forensics.cli.main, eagle3_forensics.engines, eagle3_forensics.checks.diagnose\n"
        "from eagle3_forensics.engines.record import all_records\n"
        "print(all_records.cache_info().currsize)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "0"


def test_no_engine_module_names_a_release_its_record_describes() -> None:
    """A release is described in one place: its record. No module of engines/ or checks/ names its
    version, and no package module names the newest vLLM release's."""
    package = ROOT / "eagle3_forensics"
    versions = {v for recs in all_records().values() for r in recs if r.pinned for v in (r.first, r.last)}
    newest_vllm = engine_releases("vllm")[-1].last
    found = []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        scoped = path.parent.name in ("engines", "checks") or "engines" in path.parts
        for v in versions if scoped else {newest_vllm}:
            if re.search(rf"(?<![\w.]){re.escape(v)}(?![\w]|\.\d)", text):
                found.append(f"{path.relative_to(package)}: {v}")
    assert found == []
