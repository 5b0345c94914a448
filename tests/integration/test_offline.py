"""probe-offline and audit-data on the demo: equal to probe's teacher-forced figures, a broken drafter
collapses, the prep dirs come out right, shards merge to the single run byte for byte, regeneration."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dump_builders import ge_data, rows
from paths import DEMO

from eagle3_forensics.cli.main import main
from eagle3_forensics.io.dumps import ScanOptions
from eagle3_forensics.probe.offline import probe_offline

TARGET = DEMO / "target"
HEALTHY = DEMO / "drafters" / "healthy"
DUMPS = {"specforge": DEMO / "dumps" / "specforge", "speculators": DEMO / "dumps" / "speculators"}

pytestmark = [
    pytest.mark.skipif(not (DEMO / "dumps").is_dir(), reason="demo dumps not generated (make data)"),
    pytest.mark.slow,  # CLI subprocesses over the demo dumps, sharded runs merged, the dumps regenerated
]


def _cli(*args: str) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "eagle3_forensics", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.stdout.count('"schema"') >= 1, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def live_tf() -> dict:
    """probe's teacher-forced block on the demo prompts with the dumps' token budget (24, K=3)."""
    from eagle3_forensics.probe.core import probe

    r = probe(HEALTHY, TARGET, DEMO / "prompts.jsonl", k=3, max_new_tokens=24, device="cpu", sweep=False)
    assert r.teacher_forced is not None
    return r.teacher_forced.to_dict()


@pytest.mark.parametrize("layout", ["specforge", "speculators"])
def test_equals_probe_teacher_forced(live_tf: dict, layout: str) -> None:
    r = probe_offline(HEALTHY, DUMPS[layout], ScanOptions(target=TARGET), device="cpu")
    d = r.to_dict()
    tf = d["teacher_forced"]
    assert tf["positions"] == live_tf["positions"]
    assert tf["simulated_acceptance_length"] == pytest.approx(
        live_tf["simulated_acceptance_length"], rel=0.01
    )
    for key in ("accuracy", "conditional_accuracy", "cumulative"):
        assert tf[key] == pytest.approx(live_tf[key], abs=0.01), key
    norm = d["teacher"]["final_norm"]
    assert norm["applied"] is (layout == "speculators")  # speculators stores the state before the norm
    assert "confirmed by the RMS test" in norm["decided_by"]
    assert d["greedy_agreement"] == pytest.approx(1.0)
    assert r.exit_code == 0


def test_broken_drafter_collapses() -> None:
    good = probe_offline(HEALTHY, DUMPS["specforge"], ScanOptions(target=TARGET), device="cpu")
    bad = probe_offline(
        DEMO / "drafters" / "d2t_absolute", DUMPS["specforge"], ScanOptions(target=TARGET), device="cpu"
    )
    assert good.teacher_forced and bad.teacher_forced
    assert good.teacher_forced.simulated_acceptance_length > 2.5
    assert bad.teacher_forced.simulated_acceptance_length < 1.5


def test_data_teacher_without_target() -> None:
    r = probe_offline(DEMO / "drafters" / "speculators_layout", DUMPS["speculators"], device="cpu")
    d = r.to_dict()
    assert d["teacher"]["kind"] == "data" and d["teacher"]["final_norm"] is None
    assert r.teacher_forced is not None and r.teacher_forced.simulated_acceptance_length > 2.5
    code, obj = _cli("probe-offline", str(HEALTHY), "--data", str(DUMPS["speculators"]), "--device", "cpu")
    assert (
        code == 2 and "--target" in obj["error"]["message"]
    )  # SpecForge layout: the embedding is the target's


def test_by_class_and_along_sequence() -> None:
    d = probe_offline(
        HEALTHY, DUMPS["specforge"], ScanOptions(target=TARGET), device="cpu", bucket=8
    ).to_dict()
    rows_ = d["along_sequence"]["rows"]
    assert sum(r["positions"] for r in rows_) == d["teacher_forced"]["positions"]
    assert all(r["to"] - r["from"] == 7 for r in rows_)
    classes = d["by_token_class"]
    assert classes["classes_from"] == "target tokenizer"
    assert sum(r["positions"] for r in classes["rows"]) == d["teacher_forced"]["positions"]
    assert (
        len(d["worst_samples"]) == 10
        and d["worst_samples"][0]["simulated_acceptance_length"]
        <= d["worst_samples"][-1]["simulated_acceptance_length"]
    )


@pytest.mark.parametrize("command", ["probe-offline", "audit-data"])
def test_sharded_runs_merge_to_the_single_run(tmp_path: Path, command: str) -> None:
    if command == "probe-offline":
        base = [
            "probe-offline",
            str(HEALTHY),
            "--data",
            str(DUMPS["specforge"]),
            "--target",
            str(TARGET),
            "--device",
            "cpu",
        ]
    else:
        base = ["audit-data", str(DEMO / "prep_broken"), "--target", str(TARGET)]
    proc = subprocess.run(
        [sys.executable, "-m", "eagle3_forensics", *base, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    single = proc.stdout
    parts = []
    for i in range(3):
        part = tmp_path / f"p{i}.json"
        code, obj = _cli(*base, "--shard", f"{i}/3", "--out", str(part))
        assert obj["partial"] == {"path": str(part), "shard": f"{i}/3"}
        parts.append(str(part))
    code, obj = _cli("merge", *parts[::-1], "--out", str(tmp_path / "merged.json"))
    assert obj["schema"] == "eagle3-forensics/merge/1" and obj["of"] == command
    assert code == proc.returncode
    assert (tmp_path / "merged.json").read_text() == single  # the same bytes as the single run
    code, obj = _cli("merge", *parts[:2])
    assert code == 2 and "missing 2/3" in obj["error"]["message"]
    # the missing shard with the command line that makes it (shard 0's, renumbered)
    rerun = ["eagle3-forensics", *base, "--shard", "2/3", "--out", str(tmp_path / "p2.json"), "--json"]
    assert obj["missing"] == [{"shard": "2/3", "command": shlex.join(rerun)}]
    assert "re-run: " + shlex.join(rerun) in obj["error"]["message"]


def test_audit_prep_dirs() -> None:
    code, healthy = _cli("audit-data", str(DEMO / "prep"), "--target", str(TARGET), "--drafter", str(HEALTHY))
    # --target adds the length facts (info: the serving context is only the target's default here).
    # The prep dir holds plain-text continuations of prompts.jsonl while the target chats: that is named
    # (a warning, exit 0: the drafter may serve raw completions only), and nothing else is.
    above_info = {f["code"]: f for f in healthy["findings"] if f["severity"] != "info"}
    assert code == 0 and set(above_info) == {"DATA_TEMPLATE_MISMATCH"}, healthy["findings"]
    tpl = above_info["DATA_TEMPLATE_MISMATCH"]
    assert tpl["severity"] == "warning" and tpl["evidence"]["plain_text"] == 8
    assert {f["code"] for f in healthy["findings"]} <= {
        "DATA_TRAINED_LENGTH",
        "CONTEXT_BEYOND_TRAINING",
        "DATA_TEMPLATE_MISMATCH",
    }
    # the demo dumps are the target's own greedy continuations: the target agrees on every position
    assert healthy["summary"]["target_fit"]["agreement"]["rate"] == 1.0
    code, broken = _cli("audit-data", str(DEMO / "prep_broken"), "--target", str(TARGET))
    assert code == 1
    got = {f["code"] for f in broken["findings"]}
    assert {"D2T_T2D_MISMATCH", "DATA_VOCAB_MAP_NOT_FROM_DATA"} <= got


def test_eagle12_data_is_explained(tmp_path: Path) -> None:
    ge_data(tmp_path, rows(2))
    code, obj = _cli("probe-offline", str(HEALTHY), "--data", str(tmp_path), "--target", str(TARGET))
    assert code == 2 and "EAGLE-1/2" in obj["error"]["message"]
    code, obj = _cli("audit-data", str(tmp_path))
    assert code == 1 and "DATA_NOT_EAGLE3" in {f["code"] for f in obj["findings"]}


def test_engine_argument(capsys: pytest.CaptureFixture[str]) -> None:
    """``--engine`` takes ``reference`` or a release, as ``probe`` does; anything else is exit 2."""
    for bad in ("vlm", "vllm==banana", "all"):
        assert (
            main(
                ["probe-offline", str(HEALTHY), "--data", str(DUMPS["specforge"]), "--engine", bad, "--json"]
            )
            == 2
        )
        obj = json.loads(capsys.readouterr().out)
        assert obj["error"]["code"] == "BAD_ARGUMENTS", (bad, obj)
    code, obj = _cli(
        "probe-offline",
        str(HEALTHY),
        "--data",
        str(DUMPS["specforge"]),
        "--target",
        str(TARGET),
        "--engine",
        "vllm==0.11.0",  # between the tables read: judged by vLLM 0.10.2's
        "--device",
        "cpu",
        "--max-samples",
        "4",
    )
    assert code == 0 and obj["engine"] == "vllm==0.11.0" and obj["samples"]["files"] == 4


def test_seed_case_offline_by_release() -> None:
    """The seed drafter (``layers.0.*`` keys beside a flat config) on its own training data: SGLang
    0.5.11 drops the decoder layer and the drafter collapses; 0.5.23 loads it and it accepts like
    the reference."""
    layers_flat = DEMO / "drafters" / "layers_flat"
    common = ("--data", str(DUMPS["specforge"]), "--target", str(TARGET), "--device", "cpu")
    sal = {}
    for engine in ("reference", "sglang==0.5.11", "sglang==0.5.23"):
        code, obj = _cli("probe-offline", str(layers_flat), *common, "--engine", engine)
        assert code == 0, obj
        sal[engine] = obj["teacher_forced"]["simulated_acceptance_length"]
    assert sal["sglang==0.5.11"] < 1.2 < 2.5 < sal["reference"], sal
    assert sal["sglang==0.5.23"] == pytest.approx(sal["reference"], abs=0.01), sal


def _files(root: Path) -> list[str]:
    return [
        p.relative_to(root).as_posix()
        for sub in ("dumps", "prep", "prep_broken")
        for p in sorted((root / sub).rglob("*"))
        if p.is_file()
    ]


def _tensors(path: Path) -> dict[str, Any]:
    import torch
    from safetensors.torch import load_file

    if path.suffix == ".safetensors":
        return dict(load_file(path))
    loaded = torch.load(path, map_location="cpu", weights_only=True)
    return loaded if isinstance(loaded, dict) else {"": loaded}


@pytest.mark.timeout(120)
def test_make_data_regenerates_dumps_identically(tmp_path: Path) -> None:
    """Regenerating the dumps gives the same files. Ids, masks, maps, configs and metadata are
    byte-identical; hidden states are floats the demo target computes with this CPU's kernels
    (oneDNN picks AVX2, AVX-512 or AMX blocking), so on another CPU kind a float32 result may land
    on the other side of a bf16 rounding boundary: allowed is a bf16 rounding (two steps, or 1e-4
    of the tensor's largest value near zero) on at most 1 in 1,000 values, nothing more
    (measured: 1.3 in 10,000 values moved between an AMX machine and the one that wrote them)."""
    import torch

    from eagle3_forensics.demo.dumps import write_demo_dumps

    write_demo_dumps(DEMO, tmp_path)
    assert _files(tmp_path) == _files(DEMO)
    for rel in _files(DEMO):
        new, old = tmp_path / rel, DEMO / rel
        if new.read_bytes() == old.read_bytes():
            continue
        assert new.suffix in (".safetensors", ".ckpt", ".pt"), f"{rel} differs"
        a, b = _tensors(new), _tensors(old)
        assert a.keys() == b.keys(), rel
        for key, x in a.items():
            y = b[key]
            if not (torch.is_tensor(x) and x.is_floating_point()):
                assert torch.is_tensor(x) == torch.is_tensor(y) and (
                    torch.equal(x, y) if torch.is_tensor(x) else x == y
                ), f"{rel}:{key} differs"
                continue
            assert x.dtype == y.dtype and x.shape == y.shape, f"{rel}:{key}"
            scale = float(y.float().abs().max())  # near zero (cancellation) an absolute bound applies
            close = torch.isclose(x.float(), y.float(), rtol=2**-6, atol=1e-4 * scale)  # 2 bf16 steps
            assert bool(close.all()), f"{rel}:{key}: more than a bf16 rounding apart"
            assert (x != y).float().mean().item() <= 1e-3, f"{rel}:{key}: too many values moved"
    total = sum(
        p.stat().st_size
        for sub in ("dumps", "prep", "prep_broken")
        for p in (DEMO / sub).rglob("*")
        if p.is_file()
    )
    assert total < 5 * 1024 * 1024
