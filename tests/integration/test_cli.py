"""The command line on the demo drafters: exit codes, finding codes, the JSON schema, inspect.

Runs the real program (``python -m eagle3_forensics`` and the ``eagle3-forensics`` console
script) as subprocesses against ``data/demo``.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT
from safetensors import safe_open

from eagle3_forensics.engines import ENGINE_NAMES
from eagle3_forensics.findings import CATALOGUE

DEMO = Path("data/demo")  # relative: the CLI runs with cwd=ROOT, as a user would
DRAFTERS = DEMO / "drafters"
ALL_ENGINES = list(ENGINE_NAMES)
FINDING_KEYS = {"code", "severity", "engine", "message", "evidence", "fix"}
SCRIPT = Path(sys.executable).parent / "eagle3-forensics"
_ITEMSIZE = {
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "F64": 8,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
}

# variant -> {engine: codes that must be reported at error severity}
EXPECTED: dict[str, dict[str, set[str]]] = {
    "d2t_absolute": {"sglang": {"D2T_ABSOLUTE"}, "vllm": {"D2T_ABSOLUTE"}},
    "d2t_double_offset": {"sglang": {"D2T_DOUBLE_OFFSET"}, "vllm": {"D2T_DOUBLE_OFFSET"}},
    "d2t_missing": {"sglang": {"D2T_MISSING"}, "vllm": {"D2T_MISSING"}},
    # the seed case: the EAGLE reference (and SGLang <= 0.5.11) look up midlayer.*
    "layers_flat": {"eagle": {"KEYS_DROPPED_BY_ENGINE", "PARAMS_UNFILLED"}},
}
VARIANTS = ["healthy", "speculators_layout", *EXPECTED]

# Every CLI run of this module, keyed by its arguments; run once, two at a time.
RUNS: list[tuple[str, ...]] = [
    *[("diagnose", str(DRAFTERS / v), "--json") for v in VARIANTS],
    ("diagnose", str(DRAFTERS / "healthy")),
    ("diagnose", str(DRAFTERS / "d2t_absolute")),
    ("diagnose", str(DRAFTERS / "speculators_layout"), "--engine", "vllm", "--json"),
    ("diagnose", str(DRAFTERS / "speculators_layout"), "--engine", "sglang", "--json"),
    ("diagnose", str(DRAFTERS / "layers_flat"), "--engine", "sglang==0.5.11", "--json"),
    ("diagnose", str(DRAFTERS / "layers_flat"), "--engine", "sglang", "--json"),
    ("diagnose", str(DRAFTERS / "layers_flat"), "--engine", "sglang==0.5.11"),
    ("diagnose", str(DRAFTERS / "d2t_absolute"), "--engine", "vllm", "--json"),
    ("inspect", str(DRAFTERS / "healthy"), "--json"),
    ("inspect", str(DRAFTERS / "healthy")),
    ("inspect", str(DRAFTERS / "speculators_layout"), "--json"),
]
SCRIPT_RUNS: list[tuple[str, ...]] = [
    ("diagnose", str(DRAFTERS / "healthy"), "--json"),
    ("diagnose", str(DRAFTERS / "d2t_absolute")),
    ("inspect", str(DRAFTERS / "healthy"), "--json"),
]

Result = subprocess.CompletedProcess[str]


def _run(argv: list[str]) -> Result:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.fixture(scope="module")
def results() -> dict[tuple[str, tuple[str, ...]], Result]:
    if not (ROOT / DRAFTERS / "healthy" / "config.json").is_file():
        pytest.fail("data/demo is missing: run `make data`")
    jobs = [("module", args) for args in RUNS] + [("script", args) for args in SCRIPT_RUNS]

    def run(job: tuple[str, tuple[str, ...]]) -> Result:
        how, args = job
        script = str(SCRIPT) if SCRIPT.is_file() else shutil.which("eagle3-forensics") or str(SCRIPT)
        prefix = [sys.executable, "-m", "eagle3_forensics"] if how == "module" else [script]
        return _run([*prefix, *args])

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(jobs, pool.map(run, jobs), strict=True))


def _get(results: dict[tuple[str, tuple[str, ...]], Result], *args: str) -> Result:
    proc = results[("module", args)]
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _report(proc: Result) -> dict[str, Any]:
    assert proc.stdout.lstrip().startswith("{")
    report = json.loads(proc.stdout)  # the whole of stdout is exactly one JSON value
    assert_schema(report)
    return report


def assert_schema(report: Any) -> None:
    """The documented shape of ``diagnose --json`` (docs/diagnose.md, docs/findings.md)."""
    assert isinstance(report, dict)
    assert isinstance(report["checkpoint"], str) and report["checkpoint"]
    assert isinstance(report["format"], str) and report["format"]
    assert isinstance(report["engines"], list) and report["engines"]
    assert all(isinstance(e, str) for e in report["engines"])
    assert isinstance(report["findings"], list)
    for f in report["findings"]:
        assert isinstance(f, dict) and set(f) - {"proof"} == FINDING_KEYS, f
        # optional: how the judged release's rule is known (engine findings only)
        assert f.get("proof") in (None, "ran", "read") and (f["engine"] is not None or "proof" not in f)
        assert isinstance(f["code"], str) and f["code"] in CATALOGUE
        assert f["severity"] in ("error", "warning", "info")
        assert f["engine"] is None or (isinstance(f["engine"], str) and f["engine"] in report["engines"])
        assert isinstance(f["message"], str) and f["message"] and "\n" not in f["message"]
        assert isinstance(f["evidence"], dict)
        assert f["fix"] is None or isinstance(f["fix"], str)


def _errors(report: dict[str, Any], engine: str | None = None) -> set[str]:
    return {f["code"] for f in report["findings"] if f["severity"] == "error" and f["engine"] == engine}


# -- diagnose --------------------------------------------------------------------------------------


def test_healthy_exit_0(results: dict[tuple[str, tuple[str, ...]], Result]) -> None:
    for args in (("diagnose", str(DRAFTERS / "healthy"), "--json"), ("diagnose", str(DRAFTERS / "healthy"))):
        proc = _get(results, *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stderr == ""
    report = _report(_get(results, "diagnose", str(DRAFTERS / "healthy"), "--json"))
    assert report["engines"] == ALL_ENGINES
    assert report["checkpoint"] == str(DRAFTERS / "healthy")
    assert not [f for f in report["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize("variant", list(EXPECTED))
def test_broken_variant_exit_1_with_expected_codes(
    variant: str, results: dict[tuple[str, tuple[str, ...]], Result]
) -> None:
    proc = _get(results, "diagnose", str(DRAFTERS / variant), "--json")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == ""
    report = _report(proc)
    assert report["engines"] == ALL_ENGINES
    for engine, codes in EXPECTED[variant].items():
        assert codes <= _errors(report, engine), (engine, report["findings"])
    assert "CHECKPOINT_UNREADABLE" not in {f["code"] for f in report["findings"]}


def test_d2t_codes_only_their_own(results: dict[tuple[str, tuple[str, ...]], Result]) -> None:
    """Each d2t variant gets its own diagnosis and not the other two."""
    d2t_codes = {"D2T_ABSOLUTE", "D2T_DOUBLE_OFFSET", "D2T_MISSING"}
    for variant in ("d2t_absolute", "d2t_double_offset", "d2t_missing"):
        report = _report(_get(results, "diagnose", str(DRAFTERS / variant), "--json"))
        wanted = EXPECTED[variant]["sglang"]
        assert {f["code"] for f in report["findings"]} & d2t_codes == wanted
    for variant in ("healthy", "speculators_layout"):
        report = _report(_get(results, "diagnose", str(DRAFTERS / variant), "--json"))
        assert not {f["code"] for f in report["findings"]} & d2t_codes


def test_speculators_layout_fine_on_vllm(results: dict[tuple[str, tuple[str, ...]], Result]) -> None:
    report = _report(_get(results, "diagnose", str(DRAFTERS / "speculators_layout"), "--json"))
    assert _errors(report, "vllm") == set()
    assert report["verdict"]["vllm"] in ("healthy", "warnings")
    assert report["verdict"]["sglang"] == "not applicable"  # no SGLang release reads speculators configs

    only_vllm = _get(results, "diagnose", str(DRAFTERS / "speculators_layout"), "--engine", "vllm", "--json")
    assert only_vllm.returncode == 0, only_vllm.stdout
    report = _report(only_vllm)
    assert report["engines"] == ["vllm"]
    assert not [f for f in report["findings"] if f["severity"] == "error"]

    only_sglang = _get(
        results, "diagnose", str(DRAFTERS / "speculators_layout"), "--engine", "sglang", "--json"
    )
    assert only_sglang.returncode == 1
    report = _report(only_sglang)
    assert report["engines"] == ["sglang"]
    assert _errors(report, "sglang") == {"CONFIG_UNREADABLE_BY_ENGINE"}
    assert report["releases"] == {"sglang": "sglang 0.5.18–0.5.23"}


def test_seed_case_judged_by_release(results: dict[tuple[str, tuple[str, ...]], Result]) -> None:
    """layers.0.* names: SGLang 0.5.11 drops them silently, 0.5.12+ maps midlayer -> layers.0 and loads them."""
    old = _get(results, "diagnose", str(DRAFTERS / "layers_flat"), "--engine", "sglang==0.5.11", "--json")
    assert old.returncode == 1
    report = _report(old)
    assert report["releases"] == {"sglang": "sglang 0.5.10.post1–0.5.11"}
    assert _errors(report, "sglang") == {"KEYS_DROPPED_BY_ENGINE", "PARAMS_UNFILLED"}
    new = _get(results, "diagnose", str(DRAFTERS / "layers_flat"), "--engine", "sglang", "--json")
    assert new.returncode == 0, new.stdout
    assert _report(new)["releases"] == {"sglang": "sglang 0.5.18–0.5.23"}
    text = _get(results, "diagnose", str(DRAFTERS / "layers_flat"), "--engine", "sglang==0.5.11")
    assert "judged by:  sglang 0.5.10.post1–0.5.11" in text.stdout
    assert "--engine sglang==0.5.11" in text.stdout  # the repair hint names the release


def test_engine_option_restricts_engines(results: dict[tuple[str, tuple[str, ...]], Result]) -> None:
    proc = _get(results, "diagnose", str(DRAFTERS / "d2t_absolute"), "--engine", "vllm", "--json")
    assert proc.returncode == 1
    report = _report(proc)
    assert report["engines"] == ["vllm"]
    assert {f["engine"] for f in report["findings"]} <= {None, "vllm"}
    assert "D2T_ABSOLUTE" in _errors(report, "vllm")
    assert set(report.get("load", {"vllm": None})) == {"vllm"}
    assert set(report.get("verdict", {"overall": None})) <= {"overall", "vllm"}


def test_plain_text_output(results: dict[tuple[str, tuple[str, ...]], Result]) -> None:
    healthy = _get(results, "diagnose", str(DRAFTERS / "healthy"))
    assert "HEALTHY" in healthy.stdout
    broken = _get(results, "diagnose", str(DRAFTERS / "d2t_absolute"))
    assert broken.returncode == 1 and broken.stderr == ""
    assert "D2T_ABSOLUTE" in broken.stdout and "BROKEN" in broken.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(broken.stdout)


# -- inspect ---------------------------------------------------------------------------------------


def _header(path: Path) -> dict[str, tuple[list[int], str]]:
    with safe_open(str(path), framework="np") as fh:  # the header only: no torch needed
        return {n: (list(fh.get_slice(n).get_shape()), str(fh.get_slice(n).get_dtype())) for n in fh.keys()}  # noqa: SIM118


@pytest.mark.parametrize("variant", ["healthy", "speculators_layout"])
def test_inspect_json_lists_every_tensor(
    variant: str, results: dict[tuple[str, tuple[str, ...]], Result]
) -> None:
    proc = _get(results, "inspect", str(DRAFTERS / variant), "--json")
    assert proc.returncode == 0 and proc.stderr == ""
    report = json.loads(proc.stdout)
    assert isinstance(report, dict)
    assert report["checkpoint"] == str(DRAFTERS / variant)
    assert isinstance(report["format"], str) and report["format"]
    assert report["weight_format"] == "safetensors"
    header = _header(ROOT / DRAFTERS / variant / "model.safetensors")
    tensors = report["tensors"]
    assert [t["name"] for t in tensors] == sorted(header)
    for t in tensors:
        assert set(t) >= {"name", "shape", "dtype", "shard", "bytes"}
        assert (t["shape"], t["dtype"]) == header[t["name"]]
        assert t["shard"] == "model.safetensors"
        assert t["bytes"] == math.prod(t["shape"]) * _ITEMSIZE[t["dtype"]]
    assert report["total_bytes"] == sum(t["bytes"] for t in tensors)
    diag = _report(_get(results, "diagnose", str(DRAFTERS / variant), "--json"))
    assert report["format"] == diag["format"]


def test_inspect_plain_lists_every_tensor(results: dict[tuple[str, tuple[str, ...]], Result]) -> None:
    proc = _get(results, "inspect", str(DRAFTERS / "healthy"))
    assert proc.returncode == 0 and proc.stderr == ""
    as_json = json.loads(_get(results, "inspect", str(DRAFTERS / "healthy"), "--json").stdout)
    assert as_json["format"] in proc.stdout
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.strip()}
    for t in as_json["tensors"]:
        row = rows[t["name"]]
        assert str(t["shape"]) in row and t["dtype"] in row and t["shard"] in row


# -- python -m and the console script --------------------------------------------------------------


def test_console_script_matches_python_m(results: dict[tuple[str, tuple[str, ...]], Result]) -> None:
    assert SCRIPT.is_file() or shutil.which("eagle3-forensics"), "console script not installed"
    for args in SCRIPT_RUNS:
        via_module, via_script = results[("module", args)], results[("script", args)]
        assert via_script.returncode == via_module.returncode, args
        assert via_script.stdout == via_module.stdout, args
        assert via_script.stderr == via_module.stderr, args
