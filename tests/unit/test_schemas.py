"""The published JSON Schemas (eagle3_forensics/schemas, docs/json.md) and the envelope rules.

Every JSON object the test suite produces is validated by tests/conftest.py; here: the schemas are
valid draft 2020-12 documents, named consistently, listed in docs/json.md, compatible with their
released copies (tests/schemas_released/), strict enough to reject a broken object, and every
command's failure paths (argument errors, internal errors, interrupts) print one envelope.
"""

from __future__ import annotations

import copy
import errno
import json
import sys
from typing import Any

import jsonschema
import pytest
from jsoncontract import validate_contract
from paths import ROOT

from eagle3_forensics import schemas
from eagle3_forensics.cli import main
from eagle3_forensics.cli.main import _subcommands, build_parser
from eagle3_forensics.cli.output import emit_json, envelope
from eagle3_forensics.errors import ExitCode, ForensicsError
from eagle3_forensics.findings import CATALOGUE
from eagle3_forensics.schemas.compat import breaking_changes

RELEASED = ROOT / "tests" / "schemas_released"
FILES_NOT_ENVELOPES = {"run-summary", "run-part", "baseline"}  # files with a schema name, not --json output


def _json_commands() -> dict[str, list[str]]:
    """schema name -> the argv prefix of every (sub)command that prints --json."""
    out: dict[str, list[str]] = {}

    def walk(parser: Any, prefix: list[str]) -> None:
        for word, sub in _subcommands(parser).items():
            name = sub.get_default("json_command")
            if name:
                out[name] = [*prefix, word]
            walk(sub, [*prefix, word])

    walk(build_parser(), [])
    return out


JSON_COMMANDS = _json_commands()


@pytest.mark.parametrize("name", schemas.names())
def test_schema_is_valid_and_named(name: str) -> None:
    schema = schemas.load(name)
    assert schema["$schema"] == schemas.DIALECT
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schemas.schema_id(name) == f"eagle3-forensics/{name}/{schemas.major(name)}"
    assert schema["$id"] == f"urn:eagle3-forensics:{name}:{schemas.major(name)}"
    assert schema.get("title") and schema.get("description")
    if name not in FILES_NOT_ENVELOPES:  # every --json output is an envelope
        assert {"$ref": "#/$defs/envelope"} in schema["allOf"]
        assert set(schema["properties"]["exit_code"]["enum"]) <= {int(c) for c in ExitCode}


def test_every_json_command_has_a_schema_and_docs_list_them() -> None:
    assert set(JSON_COMMANDS) | {"cli"} | FILES_NOT_ENVELOPES == set(schemas.names())
    docs = (ROOT / "docs" / "json.md").read_text()
    assert "docs/json.md" in (ROOT / "README.md").read_text()  # the README points pipelines there
    for name in schemas.names():
        assert f"`eagle3-forensics/{name}/{schemas.major(name)}`" in docs, name
    for code in ("BAD_ARGUMENTS", "UNUSABLE_INPUT", "SERVER_FAULT", "INTERNAL_ERROR", "INTERRUPTED"):
        assert f"`{code}`" in docs, code


def _subclasses(cls: type[ForensicsError]) -> list[type[ForensicsError]]:
    return [cls, *(s for sub in cls.__subclasses__() for s in _subclasses(sub))]


def test_error_and_finding_codes_fit_the_schema() -> None:
    docs = (ROOT / "docs" / "json.md").read_text()
    pattern = schemas.load("cli")["$defs"]["error"]["properties"]["code"]["pattern"]
    for cls in _subclasses(ForensicsError):
        assert jsonschema.Draft202012Validator({"pattern": pattern}).is_valid(cls.code), cls
        assert f"`{cls.code}`" in docs, f"{cls.__name__}.code {cls.code} is not documented in docs/json.md"
    finding_pattern = schemas.load("diagnose")["$defs"]["finding"]["properties"]["code"]["pattern"]
    for code in CATALOGUE:
        assert jsonschema.Draft202012Validator({"pattern": finding_pattern}).is_valid(code), code


# -- released schemas: a breaking change needs a major bump ------------------------------------------


@pytest.mark.parametrize("name", schemas.names())
def test_schema_is_compatible_with_its_release(name: str) -> None:
    released = RELEASED / f"{name}-{schemas.major(name)}.json"
    assert released.is_file(), (
        f"{name} major {schemas.major(name)} has no released copy: run `python scripts/release_schemas.py`"
    )
    broken = breaking_changes(json.loads(released.read_text()), schemas.load(name))
    assert not broken, (
        f"{name}: incompatible with {released.name}; bump the major version "
        f"(eagle3-forensics/{name}/{schemas.major(name) + 1}) and release it:\n" + "\n".join(broken)
    )


def _diagnose() -> dict[str, Any]:
    return schemas.load("diagnose")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: s["properties"].pop("findings"), "findings: removed"),
        (lambda s: s["$defs"]["load_report"]["properties"].pop("keys"), "keys: removed"),
        (lambda s: s["then"]["required"].append("format_detail"), "newly required ['format_detail']"),
        (lambda s: s["$defs"]["finding"]["required"].append("hint"), "newly required ['hint']"),
        (lambda s: s["properties"]["checkpoint"].update(type="integer"), "type narrowed"),
        (
            lambda s: s["$defs"]["error"]["properties"]["path"].update(type="string"),
            "type narrowed (['null']",
        ),
        (lambda s: s["$defs"]["severity"].update(enum=["error", "warning"]), "enum narrowed (['info']"),
        (lambda s: s["properties"]["exit_code"]["enum"].remove(2), "enum narrowed ([2]"),
        (lambda s: s["properties"]["schema"].update(const="eagle3-forensics/diagnose/2"), "const changed"),
        (lambda s: s.update(additionalProperties=False), "additionalProperties closed"),
        (lambda s: s["properties"]["engines"].update(minItems=1), "minItems added"),
    ],
)
def test_breaking_changes_are_detected(change: Any, expected: str) -> None:
    old = _diagnose()
    new = copy.deepcopy(old)
    change(new)
    found = breaking_changes(old, new)
    assert any(expected in b for b in found), found


def test_compatible_changes_pass() -> None:
    old = _diagnose()
    new = copy.deepcopy(old)
    new["properties"]["target"] = {"type": ["object", "null"]}  # a new optional member
    new["$defs"]["severity"]["enum"].append("hint")  # a wider enum
    new["$defs"]["error"]["properties"]["path"]["type"] = ["string", "null", "array"]  # a wider type
    new["properties"]["engines"].pop("items")  # a dropped constraint
    new["description"] = "reworded"
    assert breaking_changes(old, new) == []


# -- the schemas mean something --------------------------------------------------------------------


def test_schemas_reject_broken_objects() -> None:
    ok = envelope("inspect", None, 2, {"code": "UNUSABLE_INPUT", "message": "truncated", "path": "x"})
    validate_contract(ok)
    bad = [
        envelope("inspect", None, 2, None),  # a failure without an error object
        envelope("inspect", None, 0, {"code": "UNUSABLE_INPUT", "message": "x", "path": None}),
        envelope("inspect", None, 1, None),  # inspect never exits 1
        envelope("inspect", {"checkpoint": "x"}, 0, None),  # success without the tensor table
        envelope("inspect", None, 2, {"code": "unusable", "message": "x", "path": None}),
        {
            **envelope("diagnose", None, 2, {"code": "BAD_ARGUMENTS", "message": "x", "path": None}),
            "findings": [],
        },
        envelope("vocab-build", None, 9, {"code": "BAD_ARGUMENTS", "message": "x", "path": None}),
        {"schema": "eagle3-forensics/run-summary/1", "runs": []},
    ]
    for obj in bad:
        with pytest.raises(jsonschema.ValidationError):
            schemas.validate(obj)
    with pytest.raises(LookupError):
        schemas.validate({"schema": "eagle3-forensics/no-such-command/1"})


def test_demo_baseline_follows_its_schema() -> None:
    baseline = json.loads((ROOT / "configs" / "demo_baseline.json").read_text())
    assert validate_contract(baseline) == "baseline"


def test_emit_json_is_strict_and_keeps_the_envelope_first(capsys: pytest.CaptureFixture[str]) -> None:
    emit_json(
        "vocab-coverage",
        {"schema": "x", "exit_code": 7, "coverage": float("nan")},
        2,
        ValueError("bad\nthing"),
    )
    text = capsys.readouterr().out
    assert "NaN" not in text
    obj = json.loads(text)
    assert list(obj)[:3] == ["schema", "exit_code", "error"]
    assert obj["schema"] == "eagle3-forensics/vocab-coverage/1" and obj["exit_code"] == 2
    assert obj["coverage"] is None
    assert obj["error"] == {"code": "INTERNAL_ERROR", "message": "ValueError: bad thing", "path": None}


# -- every command's failure paths print one envelope ------------------------------------------------


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any], str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, json.loads(out), err


@pytest.mark.parametrize("name", sorted(JSON_COMMANDS))
def test_argument_errors_print_the_commands_envelope(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, obj, err = _run(capsys, [*JSON_COMMANDS[name], "--json", "--no-such-flag"])
    assert code == 2 and obj["schema"] == f"eagle3-forensics/{name}/1" and obj["exit_code"] == 2
    assert obj["error"]["code"] == "BAD_ARGUMENTS" and obj["error"]["message"].startswith("eagle3-forensics")
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--json"],
        ["no-such-command", "--json"],
        ["vocab", "--json"],
        ["report", "--json"],
        ["schema", "--json"],
    ],
)
def test_argument_errors_outside_a_json_command(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, obj, _ = _run(capsys, argv)
    assert code == 2 and obj["schema"] == "eagle3-forensics/cli/1" and obj["error"]["code"] == "BAD_ARGUMENTS"


@pytest.mark.parametrize(
    ("raised", "code", "error"),
    [
        (RuntimeError("boom"), 3, "INTERNAL_ERROR"),
        (KeyboardInterrupt(), 130, "INTERRUPTED"),
        (ForensicsError("the file is gone", path="/x"), 2, "UNUSABLE_INPUT"),
        (OSError(errno.ENAMETOOLONG, "File name too long", "x" * 5000), 2, "BAD_ARGUMENTS"),
        (OSError(errno.EIO, "I/O error", "/x"), 3, "INTERNAL_ERROR"),
    ],
)
def test_failures_inside_a_command_print_one_envelope(
    raised: BaseException,
    code: int,
    error: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import eagle3_forensics.cli.vocab as vocab_cli

    def classify(args: Any) -> int:
        print("stray text a library printed")  # must not reach stdout in --json mode
        raise raised

    monkeypatch.setitem(vocab_cli.COMMANDS, "classify", classify)
    got, obj, err = _run(capsys, ["vocab", "classify", "somewhere", "--json"])
    assert got == code and obj["exit_code"] == code and obj["error"]["code"] == error
    assert obj["schema"] == "eagle3-forensics/vocab-classify/1"
    assert "stray text" in err and "Traceback" not in err


def test_schema_command_prints_and_lists(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "diagnose"]) == 0
    assert json.loads(capsys.readouterr().out) == schemas.load("diagnose")
    assert main(["schema", "--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(schemas.names())
    assert main(["schema", "nope"]) == 2
    assert "known:" in capsys.readouterr().err


def test_schema_files_ship_with_the_package() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"schemas/*.json"' in pyproject
    assert sys.modules["eagle3_forensics.schemas"].__file__ is not None
