"""``inspect`` and ``diagnose`` on safetensors never import torch; ``.bin`` input still works (and does).

Each case is a fresh interpreter: the CLI runs under ``python -X importtime`` (every module it
imported is listed on stderr), the API under ``python -c`` reporting ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from builders import DrafterSpec, build_drafter, build_target, drafter_config, drafter_tensors

ROOT = Path(__file__).resolve().parents[2]
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
    got = _api(str(_bf16(tmp_path)), str(build_target(tmp_path / "t", with_weights=True)))
    assert got["exit"] == 0 and got["loaded"] == []


def _bin_twin(dst: Path, spec: DrafterSpec) -> Path:
    """The drafter ``spec`` as ``pytorch_model.bin``."""
    dst.mkdir()
    (dst / "config.json").write_text(json.dumps(drafter_config(spec)))
    torch.save(drafter_tensors(spec), dst / "pytorch_model.bin")
    return dst


@pytest.mark.slow  # subprocesses that import torch
@pytest.mark.parametrize("d2t", ["offsets", "absolute"])
def test_bin_input_still_works_and_loads_torch(d2t: str, tmp_path: Path) -> None:
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
