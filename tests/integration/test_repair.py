"""``repair``: engine-ready copies that never touch the source, verified, atomic and idempotent."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
from builders import DrafterSpec, build_drafter, build_target, speculators_spec
from paths import DEMO, ROOT
from safetensors.torch import save_file

from eagle3_forensics import cli
from eagle3_forensics.checks.diagnose import diagnose
from eagle3_forensics.findings import CATALOGUE, Finding, Severity
from eagle3_forensics.repair.execute import PAUSE_ENV, repair, stale_temp_dirs
from eagle3_forensics.repair.plan import RECORD_FILE, RepairArgumentError, repair_plan
from eagle3_forensics.repair.policy import POLICY, STEP_KINDS, Action, Policy, StepKind
from eagle3_forensics.vocab.inputs import load_token_ids

DRAFTERS = DEMO / "drafters"
TARGET = DEMO / "target"
DEMO_VARIANTS = sorted(p.name for p in DRAFTERS.iterdir() if p.is_dir()) if DRAFTERS.is_dir() else []
KNOWN_REPAIRABLE = (
    "healthy",
    "speculators_layout",
    "layers_flat",
    "d2t_absolute",
    "d2t_double_offset",
    "d2t_missing",
)
ENGINES = ("sglang", "vllm")


# -- helpers ------------------------------------------------------------------------------------------


def tree_hashes(directory: Path) -> dict[str, str]:
    """sha256 of every file under ``directory`` (relative path -> digest)."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def raw_tensor_hashes(file: Path) -> dict[str, str]:
    """Tensor name -> sha256 of its raw bytes, parsed straight from the safetensors layout."""
    blob = file.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    data = blob[8 + n :]
    return {
        name: hashlib.sha256(data[meta["data_offsets"][0] : meta["data_offsets"][1]]).hexdigest()
        for name, meta in header.items()
        if name != "__metadata__"
    }


def errors_for(path: Path, engine: str, target: Path | None) -> list[Finding]:
    d = diagnose(path, target=target, engines=[engine])
    name = engine.partition("==")[0]
    return [f for f in d.findings if f.severity is Severity.ERROR and f.engine in (None, name)]


def siblings(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def tiny_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_target(tmp_path_factory.mktemp("target") / "t", with_weights=True)


# -- the table ----------------------------------------------------------------------------------------


def test_every_finding_code_has_a_policy() -> None:
    assert set(POLICY) == set(CATALOGUE)
    for code, pol in POLICY.items():
        assert pol.action in ("fix", "refuse", "unusable", "nothing"), code
        if pol.action == Action.FIX:
            assert pol.fixed_by and set(pol.fixed_by) <= set(STEP_KINDS), code
            assert pol.reason, f"{code}: a fixable code still needs the reason used when the fix fails"


def test_a_mistyped_policy_fails_when_the_table_is_built() -> None:
    assert json.dumps([POLICY["D2T_MISSING"].action, *POLICY["D2T_MISSING"].fixed_by]) == '["fix", "vocab"]'
    with pytest.raises(ValueError):
        Policy("fixx", (StepKind.VOCAB,))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Policy(Action.FIX, ("vocabulary",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="only FIX"):
        Policy(Action.REFUSE, (StepKind.VOCAB,))


# -- demo variants --------------------------------------------------------------------------------------


@pytest.mark.skipif(not DEMO_VARIANTS, reason="demo data not generated")
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("variant", DEMO_VARIANTS)
def test_demo_variant_repaired_and_verified(variant: str, engine: str, tmp_path: Path) -> None:
    src = DRAFTERS / variant
    before = tree_hashes(src)
    dst = tmp_path / "out"
    result = repair(src, engine, dst, target=TARGET)
    assert tree_hashes(src) == before, "the source must never change"
    if variant not in KNOWN_REPAIRABLE and result.status == "refused":
        assert not dst.exists() and siblings(tmp_path) == set()
        return
    assert result.status == "repaired", result.message
    assert result.exit_code == 0
    assert errors_for(dst, engine, TARGET) == []

    # Untouched tensors are bit-exact; changed ones match the record.
    record = json.loads((dst / RECORD_FILE).read_text())
    src_raw = raw_tensor_hashes(src / "model.safetensors")
    out_raw = raw_tensor_hashes(dst / "model.safetensors")
    changed = {c["name"]: c for c in record["tensors"]["changed"]}
    for name, digest in out_raw.items():
        entry = changed.get(name)
        if entry is None:
            assert src_raw[name] == digest, f"{name} was not copied bit-exactly"
        else:
            assert entry["sha256_after"] == digest
            if entry["change"] == "renamed":
                assert src_raw[entry["source"]] == digest
            elif entry["change"] == "rewritten":
                assert entry["sha256_before"] == src_raw[name] != digest
    for entry in changed.values():
        if entry["change"] == "removed":
            assert entry["name"] not in out_raw and entry["sha256_before"] == src_raw[entry["name"]]
    assert record["tool_version"] and record["engine"] == engine
    assert (
        record["source"]["fingerprint"]["files"]["model.safetensors"]["sha256"] == before["model.safetensors"]
    )
    assert record["verification"]["errors"] == []
    assert not any(p.name.startswith(f".{dst.name}.") for p in tmp_path.iterdir()), "temporary directory left"


@pytest.mark.skipif(not DEMO_VARIANTS, reason="demo data not generated")
def test_seed_case_speculators_drafter_made_ready_for_sglang(tmp_path: Path) -> None:
    """No SGLang release reads a speculators config: repair writes the flat config. SGLang 0.5.12+ loads
    layers.0.* as they are; for 0.5.11 the decoder is renamed to midlayer.*."""
    src = DRAFTERS / "speculators_layout"
    new = repair(src, "sglang", tmp_path / "new")
    assert new.exit_code == 0, new.message
    new_kinds = {s.kind for s in new.plan.steps} if new.plan else set()
    assert {"config", "strip"} <= new_kinds and "rename" not in new_kinds
    assert "layers.0.self_attn.q_proj.weight" in raw_tensor_hashes(tmp_path / "new" / "model.safetensors")
    assert errors_for(tmp_path / "new", "sglang", TARGET) == []
    src_cfg = json.loads((src / "config.json").read_text())
    dst = tmp_path / "x"
    result = repair(src, "sglang==0.5.11", dst)
    assert result.exit_code == 0, result.message
    kinds = [s.kind for s in result.plan.steps] if result.plan else []
    assert {"config", "rename", "strip"} <= set(kinds)
    cfg = json.loads((dst / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
    assert "speculators_model_type" not in cfg and "transformer_layer_config" not in cfg
    assert "eagle_aux_hidden_state_layer_ids" not in cfg
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [
        i - 1 for i in src_cfg["eagle_aux_hidden_state_layer_ids"]
    ]  # SGLang adds 1: HF ids - 1
    assert cfg["draft_vocab_size"] == src_cfg["draft_vocab_size"]
    assert cfg["tie_word_embeddings"] is False
    assert cfg["rope_theta"] == cfg["rope_parameters"]["rope_theta"]
    names = set(raw_tensor_hashes(dst / "model.safetensors"))
    assert not any(n.startswith("layers.") for n in names)
    assert "midlayer.self_attn.q_proj.weight" in names
    assert "embed_tokens.weight" not in names  # SGLang overwrites it with the target's anyway
    assert errors_for(dst, "sglang==0.5.11", TARGET) == []


@pytest.mark.skipif(not DEMO_VARIANTS, reason="demo data not generated")
@pytest.mark.parametrize(
    ("variant", "engine"),
    [
        ("speculators_layout", "sglang"),
        ("d2t_absolute", "vllm"),
        ("d2t_missing", "sglang"),
        ("healthy", "vllm"),
    ],
)
def test_repair_is_idempotent(variant: str, engine: str, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    assert repair(DRAFTERS / variant, engine, first, target=TARGET).exit_code == 0
    before = tree_hashes(first)
    plan = repair_plan(first, engine, target=TARGET)
    assert plan.ok and plan.steps == [], [s.description for s in plan.steps]
    result = repair(first, engine, second, target=TARGET)
    assert result.exit_code == 0
    assert tree_hashes(first) == before
    assert (first / "model.safetensors").read_bytes() == (second / "model.safetensors").read_bytes()
    assert (first / "config.json").read_bytes() == (second / "config.json").read_bytes()
    record = json.loads((second / RECORD_FILE).read_text())
    assert record["tensors"]["changed"] == [] and record["config"]["changed"] is False
    assert len(record["previous_repairs"]) == 1  # the first repair's record travels along


# -- atomicity ----------------------------------------------------------------------------------------


def test_sigkill_part_way_leaves_nothing_at_dst(tmp_path: Path) -> None:
    src = build_drafter(tmp_path / "src", speculators_spec())
    before = tree_hashes(src)
    out_parent = tmp_path / "outs"
    out_parent.mkdir()
    dst = out_parent / "dst"
    env = {**os.environ, PAUSE_ENV: "60"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eagle3_forensics",
            "repair",
            str(src),
            "--engine",
            "sglang",
            "--out",
            str(dst),
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 45
        written = None
        while time.monotonic() < deadline and written is None:
            written = next(
                (p for p in out_parent.glob(".dst.tmp-*") if (p / "model.safetensors").is_file()), None
            )
            time.sleep(0.05)
        assert written is not None, "the repair never reached its mid-write pause"
        time.sleep(0.2)  # the weights are written; the process now sleeps before config, verify and rename
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not dst.exists()
    assert stale_temp_dirs(dst) == [written]  # only the temporary directory is left, beside DST
    assert tree_hashes(src) == before

    # A later repair to the same DST removes the stale temporary directory.
    result = repair(src, "sglang", dst)
    assert result.exit_code == 0, result.message
    assert not written.exists()
    assert result.record is not None and result.record["stale_temp_dirs_removed"] == [str(written)]
    assert siblings(out_parent) == {"dst"}


def test_unverified_repair_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import eagle3_forensics.repair.execute as repair_mod

    src = build_drafter(tmp_path / "src", DrafterSpec(d2t="absolute"))
    real = repair_mod.diagnose

    def broken(*args: Any, **kwargs: Any) -> Any:
        d = real(*args, **kwargs)
        d.findings.append(Finding("WEIGHTS_NONFINITE", Severity.ERROR, "injected"))
        return d

    monkeypatch.setattr(repair_mod, "diagnose", broken)
    out = tmp_path / "outs"
    out.mkdir()
    result = repair(src, "vllm", out / "dst")
    assert result.status == "not-verified" and result.exit_code == 1
    assert "WEIGHTS_NONFINITE" in result.message
    assert siblings(out) == set()


# -- refusals -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "spec", "engine", "code", "option"),
    [
        ("nbr_true", speculators_spec(norm_before_residual=True), "sglang", "NORM_FLAGS_UNSUPPORTED", "vLLM"),
        # norm_before_fc arrived in SGLang 0.5.17: older releases refuse it
        (
            "norm_before_fc",
            speculators_spec(norm_before_fc=True),
            "sglang==0.5.16",
            "NORM_FLAGS_UNSUPPORTED",
            "vLLM",
        ),
        (
            "q_norm",
            speculators_spec(extra_keys={"layers.0.self_attn.q_norm.weight": ((16,), torch.float32)}),
            "sglang",
            "KEYS_DROPPED_BY_ENGINE",
            "retrain",
        ),
        (
            "multi_layer",
            DrafterSpec(num_hidden_layers=2, extra_layers=1),
            "sglang==0.5.11",
            "MULTI_LAYER_DRAFTER",
            "vLLM",
        ),
        ("permuted", DrafterSpec(d2t="permuted"), "vllm", "D2T_T2D_MISMATCH", "--trust-t2d"),
        (
            "no_map",
            DrafterSpec(d2t="missing", t2d="missing"),
            "sglang",
            "D2T_MISSING",
            "--rebuild-vocab-from",
        ),
        (
            "default_buffers",
            DrafterSpec(d2t="zeros", t2d="all_true"),
            "vllm",
            "D2T_MISSING",
            "--rebuild-vocab-from",
        ),
        ("nan", DrafterSpec(nan_in="fc.weight"), "vllm", "WEIGHTS_NONFINITE", "re-export"),
        (
            "trained_embed",
            speculators_spec(config_extra={"embed_requires_grad": True}),
            "sglang",
            "EMBED_TOKENS_PROBLEM",
            "vLLM",
        ),
    ],
)
def test_refusals_write_nothing(
    name: str,
    spec: DrafterSpec,
    engine: str,
    code: str,
    option: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    src = build_drafter(tmp_path / "src", spec)
    before = tree_hashes(src)
    out = tmp_path / "outs"
    out.mkdir()
    rc, stdout, _ = run_cli(["repair", str(src), "--engine", engine, "--out", str(out / "dst")], capsys)
    assert rc == 1
    assert "REFUSED" in stdout and code in stdout and option in stdout
    assert siblings(out) == set(), "a refusal must write nothing"
    assert tree_hashes(src) == before
    plan = repair_plan(src, engine)
    assert code in {r.code for r in plan.refusals}
    assert all(r.options for r in plan.refusals)


def test_unstated_norm_before_residual_written_for_vllm(tmp_path: Path) -> None:
    """speculators trains with norm_before_residual false (its default); vLLM assumes true when the key
    is absent, so the copy for vLLM states it. SGLang's own behaviour is false: nothing to refuse."""
    src = build_drafter(tmp_path / "src", speculators_spec(norm_before_residual=None))
    result = repair(src, "vllm", tmp_path / "vllm")
    assert result.exit_code == 0, result.message
    assert json.loads((tmp_path / "vllm" / "config.json").read_text())["norm_before_residual"] is False
    assert repair(src, "sglang", tmp_path / "sglang").exit_code == 0


def test_sglang_refusal_for_norm_before_residual_suggests_vllm(tmp_path: Path) -> None:
    src = build_drafter(tmp_path / "src", speculators_spec(norm_before_residual=True))
    result = repair(src, "sglang", tmp_path / "dst")
    assert result.exit_code == 1
    assert "serve it on vLLM" in result.message and "retrain" in result.message
    assert repair(src, "vllm", tmp_path / "dst").exit_code == 0  # vLLM implements it


# -- vocabulary choices ----------------------------------------------------------------------------------


def test_trust_t2d_rebuilds_d2t(tmp_path: Path, tiny_target: Path) -> None:
    src = build_drafter(tmp_path / "src", DrafterSpec(d2t="corrupt"))
    result = repair(src, "sglang", tmp_path / "dst", target=tiny_target, trust="t2d")
    assert result.exit_code == 0, result.message
    d2t = diagnose(tmp_path / "dst", engines=["sglang"])
    assert not [f for f in d2t.findings if f.code.startswith("D2T")]


def test_trust_d2t_needs_a_valid_d2t(tmp_path: Path) -> None:
    src = build_drafter(tmp_path / "src", DrafterSpec(d2t="permuted"))
    result = repair(src, "vllm", tmp_path / "dst", trust="d2t")
    assert result.exit_code == 1 and "--trust-d2t given" in result.message
    assert not (tmp_path / "dst").exists()


def test_rebuild_vocab_from_token_ids(tmp_path: Path) -> None:
    spec = DrafterSpec(d2t="missing", t2d="missing")
    src = build_drafter(tmp_path / "src", spec)
    ids = np.concatenate([spec.selected.numpy()] * 3 + [np.array([5, 6])])
    np.save(tmp_path / "ids.npy", ids)
    result = repair(src, "sglang", tmp_path / "dst", rebuild_vocab_from=tmp_path / "ids.npy")
    assert result.exit_code == 0, result.message
    out = raw_tensor_hashes(tmp_path / "dst" / "model.safetensors")
    assert {"d2t", "t2d"} <= set(out)
    from safetensors.torch import load_file

    tensors = load_file(tmp_path / "dst" / "model.safetensors")
    assert torch.equal(tensors["d2t"] + torch.arange(spec.draft_vocab), spec.selected)


def test_t2d_default_buffer_rebuilt_from_d2t(tmp_path: Path) -> None:
    src = build_drafter(tmp_path / "src", DrafterSpec(t2d="all_true"))
    result = repair(src, "vllm", tmp_path / "dst")
    assert result.exit_code == 0, result.message
    assert [s.kind for s in result.plan.steps if s.kind == "vocab"] if result.plan else False


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".pt", ".safetensors"])
def test_load_token_ids_formats(suffix: str, tmp_path: Path) -> None:
    ids = np.arange(12, dtype=np.int64).reshape(3, 4)
    mask = ids % 2 == 0
    path = tmp_path / f"data{suffix}"
    if suffix == ".npy":
        np.save(path, ids)
    elif suffix == ".npz":
        np.savez(path, input_ids=ids, loss_mask=mask)
    elif suffix == ".pt":
        torch.save({"input_ids": torch.from_numpy(ids), "loss_mask": torch.from_numpy(mask)}, path)
    else:
        save_file({"input_ids": torch.from_numpy(ids), "loss_mask": torch.from_numpy(mask)}, str(path))
    got_ids, got_mask = load_token_ids(path)
    assert np.array_equal(got_ids, ids)
    if suffix == ".npy":
        assert got_mask is None
    else:
        assert got_mask is not None and np.array_equal(got_mask, mask)


# -- keys, formats, arguments ----------------------------------------------------------------------------


def test_harmless_extras_dropped_and_listed_for_vllm(tmp_path: Path) -> None:
    src = build_drafter(
        tmp_path / "src", speculators_spec(extra_keys={"verifier_lm_head.weight": ((64, 32), torch.float32)})
    )
    result = repair(src, "vllm", tmp_path / "dst")
    assert result.exit_code == 0, result.message
    drops = [s for s in result.plan.steps if s.kind == "drop"] if result.plan else []
    assert [s.tensors for s in drops] == [["verifier_lm_head.weight"]]
    assert "verifier_lm_head.weight" not in raw_tensor_hashes(tmp_path / "dst" / "model.safetensors")


def test_bin_source_written_as_safetensors_bit_exact(tmp_path: Path) -> None:
    src = build_drafter(tmp_path / "src", DrafterSpec())
    from safetensors.torch import load_file

    state = load_file(src / "model.safetensors")
    (src / "model.safetensors").unlink()
    torch.save(state, src / "pytorch_model.bin")
    result = repair(src, "sglang", tmp_path / "dst")
    assert result.exit_code == 0, result.message
    out = load_file(tmp_path / "dst" / "model.safetensors")
    assert set(out) == set(state)
    for name, t in state.items():
        assert t.dtype == out[name].dtype and torch.equal(
            t.view(torch.uint8) if t.dtype == torch.bool else t,
            out[name].view(torch.uint8) if t.dtype == torch.bool else out[name],
        )


def test_dry_run_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = build_drafter(tmp_path / "src", speculators_spec())
    out = tmp_path / "outs"
    out.mkdir()
    rc, stdout, _ = run_cli(
        ["repair", str(src), "--engine", "sglang==0.5.11", "--out", str(out / "dst"), "--dry-run"], capsys
    )
    assert rc == 0 and "DRY-RUN" in stdout and "rename" in stdout
    assert siblings(out) == set()


def test_existing_dst_needs_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = build_drafter(tmp_path / "src", DrafterSpec(d2t="absolute"))
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "keep.txt").write_text("mine")
    rc, _, err = run_cli(["repair", str(src), "--engine", "vllm", "--out", str(dst)], capsys)
    assert rc == 2 and "--force" in err
    assert (dst / "keep.txt").read_text() == "mine"
    rc, _, _ = run_cli(["repair", str(src), "--engine", "vllm", "--out", str(dst), "--force"], capsys)
    assert rc == 0
    assert not (dst / "keep.txt").exists() and (dst / RECORD_FILE).is_file()
    assert siblings(tmp_path) == {"src", "dst"}


def test_bad_arguments_and_unusable_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = build_drafter(tmp_path / "src", DrafterSpec())
    with pytest.raises(RepairArgumentError):
        repair(src, "sglang", src / "inside")
    with pytest.raises(RepairArgumentError):
        repair(src, "eagle", tmp_path / "dst")
    with pytest.raises(RepairArgumentError):
        repair(src, "vllm", tmp_path / "dst", trust="t2d", rebuild_vocab_from=tmp_path / "x.npy")
    rc, _, err = run_cli(
        ["repair", str(tmp_path / "nope"), "--engine", "sglang", "--out", str(tmp_path / "o")], capsys
    )
    assert rc == 2 and "no such checkpoint" in err
    rc, stdout, _ = run_cli(["repair", str(src), "--engine", "sglang", "--out", str(src), "--json"], capsys)
    assert rc == 2 and json.loads(stdout)["status"] == "unusable"
    rc, _, err = run_cli(
        [
            "repair",
            str(src),
            "--engine",
            "sglang",
            "--out",
            str(tmp_path / "o"),
            "--rebuild-vocab-from",
            str(tmp_path / "missing.npy"),
        ],
        capsys,
    )
    assert rc == 2 and "token-id file not found" in err
    assert not (tmp_path / "nope").exists()


def test_json_output_is_one_object(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = build_drafter(tmp_path / "src", DrafterSpec(layout="layers"))
    rc, stdout, _ = run_cli(
        ["repair", str(src), "--engine", "sglang==0.5.11", "--out", str(tmp_path / "dst"), "--json"], capsys
    )
    assert rc == 0
    obj = json.loads(stdout)
    assert obj["status"] == "repaired" and obj["verification"]["errors"] == []
    assert obj["plan"]["release"] == "sglang 0.5.10.post1–0.5.11"
    assert obj["plan"]["coverage"]["KEYS_DROPPED_BY_ENGINE"]["status"] == "fixed"
    assert obj["record"]["tensors"]["copied_bit_exact"] > 0


def test_sglang_ships_the_target_embedding_in_the_drafter_dtype(tmp_path: Path) -> None:
    """target_hidden_size != hidden_size: SGLang keeps the checkpoint's embedding, so repair ships the
    target's, cast to the drafter's float dtype."""
    from safetensors import safe_open

    src = build_drafter(
        tmp_path / "src", DrafterSpec(target_hidden_size=48, embed="absent", dtype=torch.bfloat16)
    )
    emb = torch.randn(64, 32, generator=torch.Generator().manual_seed(3))
    tgt = build_target(tmp_path / "t", hidden=48, with_weights=True, embedding=emb)
    r = repair(src, "sglang", tmp_path / "out", target=tgt)
    assert r.status == "repaired", r.message
    assert r.plan is not None and any(s.tensors == ["embed_tokens.weight"] for s in r.plan.steps)
    with safe_open(str(tmp_path / "out" / "model.safetensors"), framework="pt") as fh:
        shipped = fh.get_tensor("embed_tokens.weight")
    assert shipped.dtype == torch.bfloat16 and torch.equal(shipped, emb.to(torch.bfloat16))


# -- the commands diagnose names --------------------------------------------------------------------


@pytest.mark.skipif(not DEMO_VARIANTS, reason="demo data not generated")
# d2t_absolute (a repair confirmed on the target, 7-8 s) in the slower tier; the other in the fast one
@pytest.mark.parametrize(
    "variant", [pytest.param("d2t_absolute", marks=pytest.mark.slow), "speculators_layout"]
)
def test_the_next_commands_run_as_written_and_confirm(
    variant: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The repair and confirm commands of Diagnosis.next_steps (what the cards and the notebooks'
    "Next" sections show), run word for word: each repair writes its copy, and diagnosing it finds no error."""
    import shlex
    import shutil

    from eagle3_forensics.repair.next_steps import StepAction

    src = tmp_path / variant
    shutil.copytree(DRAFTERS / variant, src)
    steps = diagnose(src, target=TARGET).next_steps()
    ran = [s for s in steps if s.action in (StepAction.REPAIR, StepAction.CONFIRM)]
    assert ran and ran[0].action is StepAction.REPAIR
    for step in ran:
        words = shlex.split(step.command or "")
        assert words[0] == "eagle3-forensics"
        code, out, err = run_cli(words[1:], capsys)
        assert code == 0, (step.command, out[-2000:], err)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != variant) == sorted(
        f"{variant}-repaired-{s.engines[0]}" for s in ran if s.action is StepAction.REPAIR
    )
