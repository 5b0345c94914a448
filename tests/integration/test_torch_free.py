"""``inspect`` and ``diagnose`` on safetensors never import torch; ``.bin`` input still works (and does).
A command that needs a missing extra says which one: exit 2, one line, one JSON object.

Each case is a fresh interpreter: the CLI runs under ``python -X importtime`` (every module it
imported is listed on stderr), the API under ``python -c`` reporting ``sys.modules``; the missing
extras under a wrapper that blocks the modules (``sys.modules[name] = None``: import fails as if
the package were not installed). The cases needing torch to build their input skip without it
(the core-only tier of tests/packaging runs this module too).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

from eagle3_forensics.extras import EXTRAS, installed

DRAFTERS = ROOT / "data" / "demo" / "drafters"
TARGET = ROOT / "data" / "demo" / "target"
HEAVY = ("torch", "pandas", "matplotlib", "transformers")


def _imported(stderr: str) -> set[str]:
    """Top-level package names from ``-X importtime`` lines (``import time: self | cumulative | name``)."""
    out = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "package":  # the header line
                out.add(name.split(".")[0])
    return out


def _cli(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "eagle3_forensics", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    return proc, _imported(proc.stderr)


def _bf16(tmp: Path) -> Path:
    torch = pytest.importorskip("torch")
    from builders import DrafterSpec, build_drafter

    return build_drafter(
        tmp / "bf16", DrafterSpec(dtype=torch.bfloat16, torch_dtype="bfloat16", embed="target")
    )


def test_cli_import_is_light() -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import eagle3_forensics.cli"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    mods = _imported(proc.stderr)
    assert "eagle3_forensics" in mods  # the parse works
    assert not mods & {*HEAVY, "numpy", "safetensors"}


@pytest.mark.parametrize(
    "args",
    [
        ("inspect", str(DRAFTERS / "healthy")),
        ("inspect", str(DRAFTERS / "healthy"), "--json"),
        ("diagnose", str(DRAFTERS / "healthy")),
        ("diagnose", str(DRAFTERS / "d2t_absolute"), "--json"),
        ("diagnose", str(DRAFTERS / "speculators_layout"), "--target", str(TARGET), "--json"),
        ("diagnose", "BF16", "--target", "TARGET", "--json"),
    ],
    ids=["inspect", "inspect-json", "diagnose", "diagnose-json", "diagnose-target", "diagnose-bf16-target"],
)
def test_cli_never_imports_torch_on_safetensors(args: tuple[str, ...], tmp_path: Path) -> None:
    if "BF16" in args:
        from builders import build_target  # imports torch: skips without it

        target = build_target(tmp_path / "t", with_weights=True)
        args = tuple({"BF16": str(_bf16(tmp_path)), "TARGET": str(target)}.get(a, a) for a in args)
    proc, mods = _cli(*args)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "eagle3_forensics" in mods and "safetensors" in mods
    assert not mods & set(HEAVY), sorted(mods & set(HEAVY))


_API = """
import json, sys
from eagle3_forensics import diagnose, inspect_checkpoint
ins = inspect_checkpoint(sys.argv[1])
d = diagnose(sys.argv[1], target=sys.argv[2] if len(sys.argv) > 2 else None)
print(json.dumps({"codes": sorted({f.code for f in d.findings}), "exit": d.exit_code,
                  "tensors": len(ins.tensors), "loaded": sorted(m for m in HEAVY if m in sys.modules)}))
""".replace("HEAVY", repr(HEAVY))


def _api(*args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", _API, *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(proc.stdout))


def test_api_never_imports_torch_on_safetensors(tmp_path: Path) -> None:
    got = _api(str(DRAFTERS / "d2t_absolute"))
    assert "D2T_ABSOLUTE" in got["codes"] and got["loaded"] == []
    from builders import build_target  # imports torch: skips without it

    got = _api(str(_bf16(tmp_path)), str(build_target(tmp_path / "t", with_weights=True)))
    assert got["exit"] == 0 and got["loaded"] == []


def _bin_twin(dst: Path, spec: Any) -> Path:
    """The drafter ``spec`` (a ``builders.DrafterSpec``) as ``pytorch_model.bin``."""
    import torch
    from builders import drafter_config, drafter_tensors

    dst.mkdir()
    (dst / "config.json").write_text(json.dumps(drafter_config(spec)))
    torch.save(drafter_tensors(spec), dst / "pytorch_model.bin")
    return dst


@pytest.mark.slow  # subprocesses that import torch
@pytest.mark.parametrize("d2t", ["offsets", "absolute"])
def test_bin_input_still_works_and_loads_torch(d2t: str, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from builders import DrafterSpec, build_drafter

    spec = DrafterSpec(d2t=d2t, dtype=torch.bfloat16, torch_dtype="bfloat16")
    st = build_drafter(tmp_path / "st", spec)
    binary = _bin_twin(tmp_path / "bin", spec)
    st_out, bin_out = _api(str(st)), _api(str(binary))
    assert bin_out["codes"] == st_out["codes"] and bin_out["exit"] == st_out["exit"]
    assert bin_out["tensors"] == st_out["tensors"]
    assert ("D2T_ABSOLUTE" in bin_out["codes"]) == (d2t == "absolute")
    assert "torch" in bin_out["loaded"] and st_out["loaded"] == []
    proc, mods = _cli("diagnose", str(binary), "--json")
    assert proc.returncode == st_out["exit"], proc.stderr[-2000:]
    assert "torch" in mods
    assert (
        json.loads(proc.stdout)["format"]
        == json.loads(_cli("diagnose", str(st), "--json")[0].stdout)["format"]
    )


# -- a missing extra: exit 2, one line on stderr, one JSON object under --json ----------------------

# Runs the CLI with the named modules blocked: ``import torch`` then fails as if torch were absent.
_BLOCKED = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
sys.argv = ["eagle3-forensics", *sys.argv[2:]]
from eagle3_forensics.cli.main import main
raise SystemExit(main())
"""


def _blocked(modules: tuple[str, ...], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _BLOCKED, ",".join(modules), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def _junk_bin(tmp: Path) -> Path:
    """A drafter directory whose weights are a ``pytorch_model.bin``: only torch reads those."""
    d = tmp / "bin_drafter"
    d.mkdir()
    (d / "config.json").write_bytes((DRAFTERS / "healthy" / "config.json").read_bytes())
    (d / "pytorch_model.bin").write_bytes(b"PK\x03\x04 not read without torch")
    return d


# (blocked modules, the extra the line must name, the JSON schema, the command line)
MISSING = {
    "probe": (
        ("torch",),
        "probe",
        "probe",
        ["probe", str(DRAFTERS / "healthy"), "--target", str(TARGET), "--prompts", "p.jsonl"],
    ),
    "probe-transformers": (
        ("transformers",),
        "probe",
        "probe",
        ["probe", str(DRAFTERS / "healthy"), "--target", str(TARGET), "--prompts", "p.jsonl"],
    ),
    "probe-server": (
        ("prometheus_client",),
        "server",
        "probe-server",
        ["probe-server", "http://127.0.0.1:9", "--engine", "vllm", "--prompts", "p.jsonl"],
    ),
    "repair": (
        ("torch",),
        "probe",
        "repair",
        ["repair", str(DRAFTERS / "healthy"), "--engine", "sglang", "--out", "OUT"],
    ),
    "run": (
        ("papermill",),
        "notebooks",
        "run",
        ["run", "--config", "configs/demo.yaml", "--out", "OUT"],
    ),
    "probe-offline": (
        ("pyarrow",),
        "offline",
        "probe-offline",
        ["probe-offline", str(DRAFTERS / "healthy"), "--data", "DATA"],
    ),
    # met deep inside a static command (io.checkpoint's lazy torch import), not declared up front
    "diagnose-bin": (("torch",), "probe", "diagnose", ["diagnose", "BIN"]),
}


@pytest.mark.parametrize("json_mode", [True, False], ids=["json", "text"])
@pytest.mark.parametrize("case", list(MISSING))
def test_missing_extra_names_it_in_one_line(case: str, json_mode: bool, tmp_path: Path) -> None:
    blocked, extra, schema, argv = MISSING[case]
    subs = {"OUT": str(tmp_path / "out"), "DATA": str(tmp_path), "BIN": str(_junk_bin(tmp_path))}
    args = [subs.get(a, a) for a in argv] + (["--json"] if json_mode else [])
    proc = _blocked(blocked, *args)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr  # one line, never a traceback
    assert f"pip install 'eagle3-forensics[{extra}]'" in lines[0]
    named = re.search(r"\((\w+) is not installed\)", lines[0])
    assert named and named.group(1) in EXTRAS[extra]
    # the blocked module, or one of the extra's that this environment lacks anyway (the core tier)
    assert named.group(1) in blocked or not installed(named.group(1))
    assert not (tmp_path / "out").exists()  # nothing was started
    if not json_mode:
        assert proc.stdout == ""
        return
    obj = json.loads(proc.stdout)  # exactly one object: json.loads refuses trailing text
    assert obj["schema"] == f"eagle3-forensics/{schema}/1"
    assert obj["exit_code"] == 2
    assert obj["error"]["code"] == "MISSING_EXTRA"
    assert obj["error"]["message"] == lines[0].removeprefix("eagle3-forensics: ")


@pytest.mark.parametrize(
    "args",
    [
        ("inspect", str(DRAFTERS / "healthy"), "--json"),
        ("diagnose", str(DRAFTERS / "d2t_absolute"), "--target", str(TARGET), "--json"),
        ("schema", "diagnose"),
        ("history", "HIST", "--json"),
    ],
    ids=["inspect", "diagnose", "schema", "history"],
)
def test_static_commands_run_with_every_extra_blocked(args: tuple[str, ...], tmp_path: Path) -> None:
    """The core's commands still answer with every optional module blocked (the core install)."""
    blocked = tuple(sorted({m for modules in EXTRAS.values() for m in modules}))
    proc = _blocked(blocked, *(str(tmp_path) if a == "HIST" else a for a in args))
    assert proc.returncode in (0, 1) or (args[0] == "history" and proc.returncode == 2), proc.stderr
    assert "extra" not in proc.stderr
    if "--json" in args:
        obj = json.loads(proc.stdout)
        assert obj["schema"].startswith("eagle3-forensics/")
        assert obj["error"] is None or obj["error"]["code"] != "MISSING_EXTRA"
