"""`make report`'s quick profile and `make report-full`'s full matrix: the same drafters, notebooks
and gate; profiles and `workers: auto` in a run config; the full matrix run end to end (slow, CI)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

pytest.importorskip("nbformat")
pytest.importorskip("papermill")
yaml = pytest.importorskip("yaml")


from eagle3_forensics.errors import BadArgumentsError  # noqa: E402
from eagle3_forensics.runs.config import apply_profile, config_from_dict, load_config, usable_cores  # noqa: E402

CONFIG = ROOT / "configs" / "demo.yaml"
BASELINE = ROOT / "configs" / "demo_baseline.json"

pytestmark = pytest.mark.notebooks


def test_the_quick_report_runs_the_full_matrix_jobs_with_cheaper_settings() -> None:
    quick, full = load_config(CONFIG), load_config(CONFIG, profile="full")
    assert quick.profile is None and full.profile == "full"
    assert [j.key for j in quick.jobs] == [j.key for j in full.jobs]  # same drafters × notebooks
    assert quick.tolerance == full.tolerance
    differ = {
        (j.drafter, j.notebook)
        for j, f in zip(quick.jobs, full.jobs, strict=True)
        if j.parameters != f.parameters
    }
    assert {n for _, n in differ} == {"04_accept_rate_probe", "06_why_low_acceptance"}
    for j, f in zip(quick.jobs, full.jobs, strict=True):
        if j.notebook == "04_accept_rate_probe":
            assert j.parameters["served_view"] is False and f.parameters["served_view"] is True
        if j.notebook == "06_why_low_acceptance":
            assert len(j.parameters["lengths"]) < len(f.parameters["lengths"])
            assert j.parameters["max_new_tokens"] == f.parameters["max_new_tokens"]  # the gated figure
    assert quick.kernels == "warm" and quick.workers == usable_cores() + 1
    assert quick.fingerprint != full.fingerprint


def test_profiles_overlay_and_refuse_unknown_names(tmp_path: Path) -> None:
    data = {
        "workers": 2,
        "notebooks": {"a": {"x": 1, "y": 2}},
        "profiles": {"big": {"workers": "auto", "notebooks": {"a": {"y": 3}}}},
    }
    assert apply_profile(data, None) == {"workers": 2, "notebooks": {"a": {"x": 1, "y": 2}}}
    assert apply_profile(data, "big") == {"workers": "auto", "notebooks": {"a": {"x": 1, "y": 3}}}
    with pytest.raises(BadArgumentsError, match=r"no profile 'small'.*big"):
        apply_profile(data, "small")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({**data, "notebooks": ["01_checkpoint_keys"]}), encoding="utf-8")
    code = subprocess.run(
        [sys.executable, "-m", "eagle3_forensics", "run", "--config", str(cfg), "--out", str(tmp_path / "o"),
         "--profile", "nope"],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert code.returncode == 2 and "no profile 'nope'" in code.stderr and "Traceback" not in code.stderr


def test_workers_auto_is_the_usable_cores_plus_one(tmp_path: Path) -> None:
    base = {"notebooks": ["01_checkpoint_keys"], "drafters": {"d": str(tmp_path)}}
    assert config_from_dict({**base, "workers": "auto"}, base=ROOT / "configs").workers == usable_cores() + 1
    assert config_from_dict({**base, "workers": 2}, base=ROOT / "configs").workers == 2


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_the_full_demo_matrix_passes_its_gate(tmp_path: Path) -> None:
    """`make report-full`: every notebook over the eleven demo drafters at the full settings."""
    out = tmp_path / "full"
    proc = subprocess.run(
        [sys.executable, "-m", "eagle3_forensics", "run", "--config", str(CONFIG), "--profile", "full",
         "--out", str(out), "--baseline", str(BASELINE), "--no-progress"],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["gate"]["passed"] and len(summary["runs"]) == len(load_config(CONFIG).jobs)
    served = [
        json.loads((out / r["record"]).read_text(encoding="utf-8")).get("served")
        for r in summary["runs"]
        if r["notebook"] == "04_accept_rate_probe"
    ]
    assert served and all(s and s.get("by_length") for s in served)  # the served view ran, by length
