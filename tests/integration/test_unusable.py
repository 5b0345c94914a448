"""Unusable input: every path ends in one CHECKPOINT_UNREADABLE finding and exit code 2.

Every case is checked through the Python API (``diagnose``) and one case of each kind through
the CLI as a real subprocess (``--json``, and plain text for some): exit 2, exactly one line on
stderr, never a traceback, and with ``--json`` one JSON object holding that single finding.
Also: a malicious pickle is refused and never executed, and the weight formats that should
work (``.bin`` through ``weights_only``, sharded safetensors, sharded ``.bin``) do.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
from paths import ROOT
from safetensors.torch import load_file, save_file

from eagle3_forensics.checks.diagnose import diagnose
from eagle3_forensics.engines import ENGINE_NAMES
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.io.checkpoint import open_checkpoint

HEALTHY = ROOT / "data" / "demo" / "drafters" / "healthy"
ST = "model.safetensors"
SENTINEL_NAME = "PICKLE_PAYLOAD_RAN"


# -- builders ------------------------------------------------------------------------------------


def _copy_healthy(dst: Path) -> Path:
    shutil.copytree(HEALTHY, dst)
    return dst


def _header_len(file: Path) -> int:
    return int(struct.unpack("<Q", file.read_bytes()[:8])[0])


def _healthy_tensors() -> dict[str, torch.Tensor]:
    return load_file(str(HEALTHY / ST))


def _split(tensors: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    names = sorted(tensors)
    half = len(names) // 2
    return {n: tensors[n] for n in names[:half]}, {n: tensors[n] for n in names[half:]}


def write_sharded_safetensors(dst: Path) -> Path:
    dst.mkdir()
    shutil.copy(HEALTHY / "config.json", dst / "config.json")
    a, b = _split(_healthy_tensors())
    save_file(a, str(dst / "model-00001-of-00002.safetensors"))
    save_file(b, str(dst / "model-00002-of-00002.safetensors"))
    weight_map = dict.fromkeys(a, "model-00001-of-00002.safetensors")
    weight_map.update(dict.fromkeys(b, "model-00002-of-00002.safetensors"))
    (dst / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return dst


def write_bin(dst: Path, legacy: bool = False) -> Path:
    dst.mkdir()
    shutil.copy(HEALTHY / "config.json", dst / "config.json")
    torch.save(_healthy_tensors(), dst / "pytorch_model.bin", _use_new_zipfile_serialization=not legacy)
    return dst


def write_sharded_bin(dst: Path) -> Path:
    dst.mkdir()
    shutil.copy(HEALTHY / "config.json", dst / "config.json")
    a, b = _split(_healthy_tensors())
    torch.save(a, dst / "pytorch_model-00001-of-00002.bin")
    torch.save(b, dst / "pytorch_model-00002-of-00002.bin")
    weight_map = dict.fromkeys(a, "pytorch_model-00001-of-00002.bin")
    weight_map.update(dict.fromkeys(b, "pytorch_model-00002-of-00002.bin"))
    (dst / "pytorch_model.bin.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return dst


class _OpenPayload:
    """Unpickling this calls ``open(path, "w")``: creates the sentinel file if ever executed."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


class _SystemPayload:
    """Unpickling this runs ``touch path`` through ``os.system``."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.path}",))


def write_malicious_bin(dst: Path, payload: str, how: str) -> Path:
    """A pytorch_model.bin whose pickle would create ``<tmp>/PICKLE_PAYLOAD_RAN`` if executed."""
    dst.mkdir()
    shutil.copy(HEALTHY / "config.json", dst / "config.json")
    sentinel = dst.parent / SENTINEL_NAME
    bomb = _OpenPayload(sentinel) if payload == "open" else _SystemPayload(sentinel)
    obj = {"fc.weight": torch.zeros(2, 2), "evil": bomb}
    if how == "torch.save":
        torch.save(obj, dst / "pytorch_model.bin")
    else:
        with (dst / "pytorch_model.bin").open("wb") as fh:
            pickle.dump(obj, fh)
    return dst


def _corrupt_safetensors(dst: Path, edit: Callable[[bytes, int], bytes]) -> Path:
    _copy_healthy(dst)
    file = dst / ST
    data = file.read_bytes()
    file.write_bytes(edit(data, _header_len(file)))
    return dst


def _with_config(dst: Path, text: bytes) -> Path:
    _copy_healthy(dst)
    (dst / "config.json").write_bytes(text)
    return dst


def _index_case(dst: Path, mutate: Callable[[dict[str, str], Path], None]) -> Path:
    write_sharded_safetensors(dst)
    index_file = dst / "model.safetensors.index.json"
    index = json.loads(index_file.read_text())
    mutate(index["weight_map"], dst)
    index_file.write_text(json.dumps(index))
    return dst


def _missing_shard(wm: dict[str, str], dst: Path) -> None:
    wm["fc.weight"] = "model-00003-of-00003.safetensors"


def _absent_tensor(wm: dict[str, str], dst: Path) -> None:
    wm["midlayer.self_attn.extra_proj.weight"] = "model-00001-of-00002.safetensors"


def _escaping_shard(wm: dict[str, str], dst: Path) -> None:
    # The escaping file exists and is a valid safetensors file: it must be refused anyway.
    save_file({"fc.weight": torch.zeros(2, 2)}, str(dst.parent / "x.safetensors"))
    wm["fc.weight"] = "../x.safetensors"


def _absolute_shard(wm: dict[str, str], dst: Path) -> None:
    save_file({"fc.weight": torch.zeros(2, 2)}, str(dst.parent / "abs.safetensors"))
    wm["fc.weight"] = str(dst.parent / "abs.safetensors")


def _nested_index_path(wm: dict[str, str], dst: Path) -> None:
    wm["fc.weight"] = "sub/../model-00001-of-00002.safetensors"


def _list_bin(dst: Path) -> Path:
    dst.mkdir()
    shutil.copy(HEALTHY / "config.json", dst / "config.json")
    torch.save([torch.zeros(2)], dst / "pytorch_model.bin")
    return dst


def _garbage_bin(dst: Path) -> Path:
    dst.mkdir()
    shutil.copy(HEALTHY / "config.json", dst / "config.json")
    (dst / "pytorch_model.bin").write_bytes(b"PK\x03\x04 this is not a zip or a pickle")
    return dst


def _no_weights(dst: Path) -> Path:
    dst.mkdir()
    shutil.copy(HEALTHY / "config.json", dst / "config.json")
    return dst


def _unsupported_file(dst: Path) -> Path:
    _copy_healthy(dst)
    (dst / "weights.txt").write_text("hello")
    return dst / "weights.txt"


def _truncated_single_file(dst: Path) -> Path:
    _corrupt_safetensors(dst, lambda d, h: d[: len(d) // 2])
    return dst / ST


def _bad_index_json(dst: Path) -> Path:
    write_sharded_safetensors(dst)
    (dst / "model.safetensors.index.json").write_text('{"weight_map": ')
    return dst


def _index_without_weight_map(dst: Path) -> Path:
    write_sharded_safetensors(dst)
    (dst / "model.safetensors.index.json").write_text('{"metadata": {}, "weight_map": ["a"]}')
    return dst


# name -> (builder, substring expected in the one-line message)
CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "nonexistent_path": (lambda d: d / "does-not-exist", "no such checkpoint"),
    "empty_directory": (lambda d: (d.mkdir(), d)[1], "empty"),
    "missing_config": (
        lambda d: (_copy_healthy(d), (d / "config.json").unlink(), d)[2],
        "config.json not found",
    ),
    "config_not_json": (lambda d: _with_config(d, b'{"hidden_size": 128,'), "not valid JSON"),
    "config_not_utf8": (lambda d: _with_config(d, b"\xff\xfe{\x00}\x00"), "not valid JSON"),
    "config_json_list": (lambda d: _with_config(d, b"[1, 2, 3]"), "not a JSON object"),
    "config_json_string": (lambda d: _with_config(d, b'"config"'), "not a JSON object"),
    "config_json_null": (lambda d: _with_config(d, b"null"), "not a JSON object"),
    "config_huge_int": (
        lambda d: _with_config(d, b'{"hidden_size": ' + b"9" * 5000 + b"}"),
        "not valid JSON",
    ),
    "config_deep_nesting": (lambda d: _with_config(d, b"[" * 100_000 + b"]" * 100_000), "not valid JSON"),
    "config_is_directory": (
        lambda d: (_copy_healthy(d), (d / "config.json").unlink(), (d / "config.json").mkdir(), d)[3],
        "config.json",
    ),
    "safetensors_cut_in_data": (
        lambda d: _corrupt_safetensors(d, lambda b, h: b[: len(b) - 1000]),
        "safetensors",
    ),
    "safetensors_cut_in_header": (
        lambda d: _corrupt_safetensors(d, lambda b, h: b[: 8 + h // 2]),
        "safetensors",
    ),
    "safetensors_shorter_than_8": (lambda d: _corrupt_safetensors(d, lambda b, h: b[:5]), "truncated"),
    "safetensors_empty_file": (lambda d: _corrupt_safetensors(d, lambda b, h: b""), "truncated"),
    "header_length_past_eof": (
        lambda d: _corrupt_safetensors(d, lambda b, h: struct.pack("<Q", len(b) * 2) + b[8:]),
        "safetensors",
    ),
    "header_length_huge": (
        lambda d: _corrupt_safetensors(d, lambda b, h: struct.pack("<Q", 2**64 - 1) + b[8:]),
        "safetensors",
    ),
    "header_invalid_json": (
        lambda d: _corrupt_safetensors(d, lambda b, h: b[:8] + b"X" + b[9:]),
        "safetensors",
    ),
    "header_offsets_out_of_range": (
        lambda d: _corrupt_safetensors(
            d,
            lambda b, h: (
                b[:8] + b[8 : 8 + h].replace(b'"data_offsets":[0,', b'"data_offsets":[9,', 1) + b[8 + h :]
            ),
        ),
        "safetensors",
    ),
    "index_missing_shard": (lambda d: _index_case(d, _missing_shard), "missing"),
    "index_tensor_absent_from_shard": (lambda d: _index_case(d, _absent_tensor), "absent from their shard"),
    "index_shard_escapes_directory": (lambda d: _index_case(d, _escaping_shard), "outside the checkpoint"),
    "index_shard_absolute_path": (lambda d: _index_case(d, _absolute_shard), "outside the checkpoint"),
    "index_shard_with_subdirectory": (lambda d: _index_case(d, _nested_index_path), "outside the checkpoint"),
    "index_not_json": (_bad_index_json, "not valid JSON"),
    "index_without_weight_map": (_index_without_weight_map, "weight_map"),
    "pickle_open_torch_save": (lambda d: write_malicious_bin(d, "open", "torch.save"), "refused to unpickle"),
    "pickle_open_plain_pickle": (lambda d: write_malicious_bin(d, "open", "pickle"), "refused to unpickle"),
    "pickle_system_torch_save": (
        lambda d: write_malicious_bin(d, "system", "torch.save"),
        "refused to unpickle",
    ),
    "pickle_system_plain_pickle": (
        lambda d: write_malicious_bin(d, "system", "pickle"),
        "refused to unpickle",
    ),
    "pickle_bin_file_path": (
        lambda d: write_malicious_bin(d, "open", "torch.save") / "pytorch_model.bin",
        "refused to unpickle",
    ),
    "bin_not_a_state_dict": (_list_bin, "flat tensor state dict"),
    "bin_garbage": (_garbage_bin, "pytorch_model.bin"),
    "no_weights": (_no_weights, "no weights"),
    "unsupported_weights_file": (_unsupported_file, "unsupported weights file"),
    "truncated_single_file_path": (_truncated_single_file, "safetensors"),
}
PICKLE_CASES = [name for name in CASES if name.startswith("pickle_")]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every case in its own parent directory (the pickle sentinel lands beside the drafter)."""
    out = {}
    for name, (build, _) in CASES.items():
        out[name] = build(tmp_path_factory.mktemp(name) / "drafter")
    return out


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eagle3_forensics", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


# The CLI pays a torch import (~1.5 s CPU) per process, so it runs on one case of each kind (every
# case runs through the API above): with --json on these, plain text (the same code path apart
# from rendering) on a few of them.
CLI_CASES = [
    "nonexistent_path",
    "empty_directory",
    "missing_config",
    "config_not_json",
    "config_json_list",
    "config_huge_int",
    "safetensors_cut_in_data",
    "safetensors_cut_in_header",
    "safetensors_shorter_than_8",
    "header_length_past_eof",
    "header_invalid_json",
    "index_missing_shard",
    "index_tensor_absent_from_shard",
    "index_shard_escapes_directory",
    "pickle_open_torch_save",
    "pickle_system_plain_pickle",
    "bin_not_a_state_dict",
    "no_weights",
]
PLAIN_CASES = [
    "nonexistent_path",
    "config_not_json",
    "safetensors_cut_in_header",
    "index_shard_escapes_directory",
    "pickle_open_plain_pickle",
]
INSPECT_CASES = ["safetensors_cut_in_header", "pickle_open_torch_save"]

CliResults = dict[tuple[str, ...], subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def cli_results(built: dict[str, Path]) -> CliResults:
    """Every CLI run of this module, two processes at a time; keyed by (command, case, flags...)."""
    jobs = [("diagnose", name, "--json") for name in CLI_CASES] + [("diagnose", name) for name in PLAIN_CASES]
    jobs += [
        (cmd, name, *flags) for cmd in ("inspect",) for name in INSPECT_CASES for flags in ((), ("--json",))
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        procs = pool.map(lambda job: _cli(job[0], str(built[job[1]]), *job[2:]), jobs)
        return dict(zip(jobs, procs, strict=True))


def _sentinels(built: dict[str, Path]) -> list[Path]:
    return [built[name].parent / SENTINEL_NAME for name in PICKLE_CASES] + [
        built[name].parent.parent / SENTINEL_NAME for name in PICKLE_CASES
    ]


# -- the Python API --------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_api_unusable(case: str, built: dict[str, Path]) -> None:
    d = diagnose(built[case])
    assert d.exit_code == 2
    assert d.unusable
    assert [f.code for f in d.findings] == ["CHECKPOINT_UNREADABLE"]
    finding = d.findings[0]
    assert finding.severity.value == "error"
    assert "\n" not in finding.message and finding.message.strip() == finding.message
    assert CASES[case][1] in finding.message, finding.message
    assert d.to_dict()["findings"][0]["code"] == "CHECKPOINT_UNREADABLE"
    assert d.engines == list(ENGINE_NAMES)


# -- the CLI ---------------------------------------------------------------------------------------


def _assert_one_line_exit_2(proc: subprocess.CompletedProcess[str], expected: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and proc.stderr.endswith("\n"), proc.stderr
    assert lines[0].startswith("eagle3-forensics: ")
    assert expected in lines[0], lines[0]
    return lines[0]


@pytest.mark.slow  # one CLI subprocess per case (test_api_unusable covers the same cases in process)
@pytest.mark.parametrize("case", CLI_CASES)
def test_cli_unusable_json(case: str, cli_results: CliResults) -> None:
    proc = cli_results[("diagnose", case, "--json")]
    line = _assert_one_line_exit_2(proc, CASES[case][1])
    report = json.loads(proc.stdout)  # the whole of stdout is one JSON object
    assert isinstance(report, dict)
    assert {"checkpoint", "format", "engines", "findings"} <= set(report)
    assert isinstance(report["checkpoint"], str) and isinstance(report["format"], str)
    assert report["engines"] == list(ENGINE_NAMES)
    assert [f["code"] for f in report["findings"]] == ["CHECKPOINT_UNREADABLE"]
    assert report["findings"][0]["severity"] == "error"
    assert line == "eagle3-forensics: " + report["findings"][0]["message"]


@pytest.mark.slow  # one CLI subprocess per case (test_api_unusable covers the same cases in process)
@pytest.mark.parametrize("case", PLAIN_CASES)
def test_cli_unusable_plain(case: str, cli_results: CliResults) -> None:
    proc = cli_results[("diagnose", case)]
    _assert_one_line_exit_2(proc, CASES[case][1])
    assert "CHECKPOINT_UNREADABLE" in proc.stdout and "UNUSABLE" in proc.stdout


@pytest.mark.slow  # one CLI subprocess per case (test_api_unusable covers the same cases in process)
@pytest.mark.parametrize("case", INSPECT_CASES)
def test_cli_inspect_unusable(case: str, cli_results: CliResults, built: dict[str, Path]) -> None:
    _assert_one_line_exit_2(cli_results[("inspect", case)], CASES[case][1])
    as_json = cli_results[("inspect", case, "--json")]
    _assert_one_line_exit_2(as_json, CASES[case][1])
    report = json.loads(as_json.stdout)
    assert isinstance(report, dict) and report["checkpoint"] == str(built[case]) and report["error"]


# -- pickles are refused, never executed -----------------------------------------------------------


@pytest.mark.slow  # one CLI subprocess per case (test_api_unusable covers the same cases in process)
def test_malicious_pickle_never_executed(built: dict[str, Path], cli_results: CliResults) -> None:
    for name in PICKLE_CASES:
        for _ in range(2):  # reading again (cached state, a second open) must not run it either
            with pytest.raises(UnusableInputError, match="refused to unpickle"):
                open_checkpoint(built[name])
            assert diagnose(built[name]).exit_code == 2
    for key in cli_results:
        if key[1] in PICKLE_CASES:
            assert "refused to unpickle" in cli_results[key].stderr
    leaked = [p for p in _sentinels(built) if p.exists()]
    assert leaked == [], f"pickle payload executed: {leaked}"
    assert not (ROOT / SENTINEL_NAME).exists()


def test_payloads_would_run_without_weights_only(tmp_path: Path) -> None:
    """Control: the payload really creates the file when unpickled unsafely (so the test above means something)."""
    sentinel = tmp_path / "control"
    blob = pickle.dumps({"evil": _OpenPayload(sentinel)})
    pickle.loads(blob)  # deliberate: our own payload, to prove it is live
    assert sentinel.exists()


def test_bin_only_loaded_with_weights_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    real_load = torch.load

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    for variant, path in (
        ("bin", write_bin(tmp_path / "bin")),
        ("sharded", write_sharded_bin(tmp_path / "sh")),
        ("pickle", write_malicious_bin(tmp_path / "evil", "open", "torch.save")),
    ):
        d = diagnose(path)
        assert d.exit_code == (2 if variant == "pickle" else 0)
    assert calls, "torch.load was never called"
    assert all(c.get("weights_only") is True for c in calls), calls
    assert not (tmp_path / SENTINEL_NAME).exists()


# -- formats that must work ------------------------------------------------------------------------


def _summary(path: Path) -> list[tuple[str, str | None, str]]:
    d = diagnose(path)
    return [(f.code, f.engine, f.severity.value) for f in d.findings]


@pytest.fixture(scope="module")
def reference() -> list[tuple[str, str | None, str]]:
    return _summary(HEALTHY)


@pytest.mark.slow  # CLI subprocesses over torch-pickled weights
@pytest.mark.parametrize(
    ("builder", "weight_format"),
    [
        (write_bin, "bin"),
        (lambda d: write_bin(d, legacy=True), "bin"),
        (write_sharded_safetensors, "safetensors-sharded"),
        (write_sharded_bin, "bin-sharded"),
    ],
    ids=["bin", "bin_legacy_format", "sharded_safetensors", "sharded_bin"],
)
def test_other_weight_formats_work(
    builder: Callable[[Path], Path],
    weight_format: str,
    tmp_path: Path,
    reference: list[tuple[str, str | None, str]],
) -> None:
    path = builder(tmp_path / "drafter")
    ckpt = open_checkpoint(path)
    assert ckpt.weight_format == weight_format
    assert sorted(ckpt.tensors) == sorted(open_checkpoint(HEALTHY).tensors)
    for name, info in open_checkpoint(HEALTHY).tensors.items():
        assert (ckpt.tensors[name].shape, ckpt.tensors[name].dtype) == (info.shape, info.dtype)
    d = diagnose(path)
    assert d.exit_code == 0, [f.to_dict() for f in d.errors]
    assert _summary(path) == reference
    proc = _cli("diagnose", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert json.loads(proc.stdout)["findings"] == json.loads(json.dumps(d.to_dict(), default=str))["findings"]


def test_weights_file_path_beside_config(
    tmp_path: Path, reference: list[tuple[str, str | None, str]]
) -> None:
    """PATH may be the weights file or config.json itself instead of the directory."""
    drafter = write_bin(tmp_path / "drafter")
    assert _summary(drafter / "pytorch_model.bin") == reference
    assert _summary(HEALTHY / ST) == reference
    assert _summary(HEALTHY / "config.json") == reference


# -- bad arguments ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["diagnose", str(HEALTHY), "--engine", "tensorrt"],
        ["diagnose"],
        ["diagnose", "--json"],
        ["diagnose", str(HEALTHY), "--no-such-flag"],
        ["inspect"],
        ["no-such-command"],
        [],
    ],
    ids=[
        "unknown_engine",
        "missing_path",
        "missing_path_json",
        "unknown_flag",
        "inspect_missing_path",
        "unknown_command",
        "no_command",
    ],
)
def test_bad_arguments(args: list[str]) -> None:
    proc = _cli(*args)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "error" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    if "--json" in args:  # the contract: one JSON object on every exit, argument errors included
        report = json.loads(proc.stdout)
        assert report["schema"] == "eagle3-forensics/diagnose/1" and report["exit_code"] == 2
        assert report["error"]["code"] == "BAD_ARGUMENTS" and "path" in report["error"]["message"]
    else:
        assert proc.stdout == ""


def test_api_unknown_engine_raises_bad_arguments() -> None:
    with pytest.raises(BadArgumentsError, match="tensorrt"):
        diagnose(HEALTHY, engines="tensorrt")
