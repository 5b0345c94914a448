"""Fuzzing probe-offline, audit-data and merge with mangled dumps and partial results.

Whatever is done to the files — truncated, bytes flipped, keys dropped or renamed, lengths that
disagree, NaN/Inf, a pickle that needs code, an empty directory, a broken Arrow dataset, a
mangled partial — each command prints exactly one JSON object and exits 0, 1 or 2: never a
traceback, never exit 3 (an internal error). Examples per test: ``FUZZ_OFFLINE_EXAMPLES``
(default 60).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
from builders import build_drafter, build_target
from dump_builders import evil_pickle, rows, specforge, speculators
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from eagle3_forensics.cli.main import main

EXAMPLES = int(os.environ.get("FUZZ_OFFLINE_EXAMPLES", "60"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
HB = 32  # tests/builders' hidden size: the drafter's fc takes 3 x 32


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("offline_fuzz")
    target = build_target(root / "target", with_weights=True)
    tensors = load_file(str(target / "model.safetensors"))
    tensors["model.norm.weight"] = torch.ones(HB)
    save_file(tensors, str(target / "model.safetensors"))
    drafter = build_drafter(root / "drafter")
    data = rows(3, length=10, vocab=64)
    sf = _specforge(root / "specforge", data)
    sp = speculators(root / "speculators", data, hidden=HB)
    parts = []
    for i in range(2):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            main(["audit-data", str(sp), "--shard", f"{i}/2", "--out", str(root / f"a{i}.json"), "--json"])
        parts.append(root / f"a{i}.json")
    return {
        "root": root,
        "target": target,
        "drafter": drafter,
        "specforge": sf,
        "speculators": sp,
        "a0": parts[0],
        "a1": parts[1],
    }


def _specforge(root: Path, data: list[tuple[list[int], list[int]]]) -> Path:
    return specforge(root, data, pad_to=14, hidden=HB)


def _run(argv: list[str]) -> tuple[int, Any]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
    text = out.getvalue()
    assert code in (0, 1, 2), (code, err.getvalue()[-500:])
    assert "Traceback" not in err.getvalue()
    obj = json.loads(text)  # exactly one JSON object
    assert obj["exit_code"] == code
    return code, obj


# -- mangling ------------------------------------------------------------------------------------------

MANGLES = (
    "truncate",
    "flip",
    "drop_key",
    "rename_key",
    "short_mask",
    "nan",
    "inf",
    "evil",
    "empty_file",
    "float_ids",
    "remove_all",
    "wrong_ndim",
)


def _files(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file())


def _mangle(d: Path, how: str, pick: int, where: float, byte: int) -> None:
    files = [p for p in _files(d) if p.suffix in (".ckpt", ".safetensors", ".arrow", ".json")]
    if not files:  # already emptied by an earlier mangle
        return
    f = files[pick % len(files)]
    if how == "remove_all":
        for p in _files(d):
            p.unlink()
        return
    if how == "truncate":
        whole = f.read_bytes()
        f.write_bytes(whole[: int(len(whole) * where)])
        return
    if how == "flip":
        raw = bytearray(f.read_bytes())
        if raw:
            raw[int((len(raw) - 1) * where)] ^= byte or 1
        f.write_bytes(bytes(raw))
        return
    if how == "empty_file":
        f.write_bytes(b"")
        return
    if how == "evil":
        evil_pickle(f)
        return
    rec = _load(f)
    if rec is None:
        raw = bytearray(f.read_bytes())
        raw[: min(len(raw), 16)] = b"\x00" * min(len(raw), 16)
        f.write_bytes(bytes(raw))
        return
    keys = sorted(rec)
    key = keys[pick % len(keys)]
    if how == "drop_key":
        rec.pop(key)
    elif how == "rename_key":
        rec[key + "_x"] = rec.pop(key)
    elif how == "short_mask":
        for k in ("loss_mask", "token_ids", "hidden_state"):
            if k in rec:
                rec[k] = rec[k][..., :-1] if rec[k].dim() == 1 else rec[k][:, :-1]
    elif how in ("nan", "inf"):
        for k in ("aux_hidden_state", "hidden_state", "hidden_states"):
            if k in rec and rec[k].is_floating_point():
                flat = rec[k].reshape(-1).clone()
                flat[int((flat.numel() - 1) * where)] = float("nan") if how == "nan" else float("inf")
                rec[k] = flat.reshape(rec[k].shape)
                break
    elif how == "float_ids":
        for k in ("input_ids", "token_ids"):
            if k in rec:
                rec[k] = rec[k].float() + 0.5
    elif how == "wrong_ndim":
        rec[key] = rec[key].reshape(-1)[:1].reshape(1, 1, 1, 1) if rec[key].numel() else rec[key]
    _save(f, rec)


def _load(f: Path) -> dict[str, torch.Tensor] | None:
    try:
        if f.suffix == ".safetensors":
            return dict(load_file(str(f)))
        if f.suffix == ".ckpt":
            obj = torch.load(str(f), weights_only=True)
            return obj if isinstance(obj, dict) else None
    except Exception:
        return None
    return None


def _save(f: Path, rec: dict[str, torch.Tensor]) -> None:
    if f.suffix == ".safetensors":
        save_file({k: v.contiguous() for k, v in rec.items()}, str(f))
    else:
        torch.save(rec, str(f))


def _copy(src: Path, dst: Path) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    return dst


mangle_args = st.tuples(
    st.sampled_from(MANGLES), st.integers(0, 50), st.floats(0.0, 1.0), st.integers(0, 255)
)


@SETTINGS
@given(layout=st.sampled_from(["specforge", "speculators"]), m=mangle_args, m2=st.none() | mangle_args)
def test_probe_offline_never_crashes(world: dict[str, Path], layout: str, m: tuple, m2: tuple | None) -> None:
    d = _copy(world[layout], world["root"] / "case_probe")
    _mangle(d, *m)
    if m2 is not None:
        _mangle(d, *m2)
    code, obj = _run(
        [
            "probe-offline",
            str(world["drafter"]),
            "--data",
            str(d),
            "--target",
            str(world["target"]),
            "--device",
            "cpu",
            "--json",
        ]
    )
    assert obj["schema"] == "eagle3-forensics/probe-offline/1"
    if code == 2:
        assert obj["error"] and obj["error"]["message"] and "\n" not in obj["error"]["message"]
    else:
        assert obj["teacher_forced"] is not None


@SETTINGS
@given(layout=st.sampled_from(["specforge", "speculators"]), m=mangle_args, m2=st.none() | mangle_args)
def test_audit_data_never_crashes(world: dict[str, Path], layout: str, m: tuple, m2: tuple | None) -> None:
    d = _copy(world[layout], world["root"] / "case_audit")
    _mangle(d, *m)
    if m2 is not None:
        _mangle(d, *m2)
    code, obj = _run(["audit-data", str(d), "--target", str(world["target"]), "--json"])
    assert obj["schema"] == "eagle3-forensics/audit-data/1"
    if code == 2 and obj["error"] is None:
        assert (
            "DATA_UNREADABLE" in {f["code"] for f in obj["findings"]} or obj["summary"]["samples_read"] == 0
        )


def _mangle_json(obj: Any, path: list[Any], action: str) -> Any:
    if not path:
        return {"drop": None, "str": "x", "neg": -1, "list": [], "dict": {}}.get(action, obj)
    key, rest = path[0], path[1:]
    if isinstance(obj, dict) and obj:
        k = sorted(obj)[key % len(obj)]
        if not rest and action == "drop":
            obj = dict(obj)
            obj.pop(k)
            return obj
        return {**obj, k: _mangle_json(obj[k], rest, action)}
    if isinstance(obj, list) and obj:
        i = key % len(obj)
        return [*obj[:i], _mangle_json(obj[i], rest, action), *obj[i + 1 :]]
    return _mangle_json(obj, [], action)


@SETTINGS
@given(
    path=st.lists(st.integers(0, 40), min_size=0, max_size=4),
    action=st.sampled_from(["drop", "str", "neg", "list", "dict"]),
    garbage=st.booleans(),
)
@example(path=[33, 0], action="neg", garbage=False)  # CI: a tally of -1 with no examples was an IndexError
def test_merge_never_crashes(world: dict[str, Path], path: list[int], action: str, garbage: bool) -> None:
    part = world["root"] / "mangled_part.json"
    if garbage:
        part.write_text(
            '{"schema": "eagle3-forensics/partial/1", "command": "audit-data", "counts": ' + "[" * 3
        )
    else:
        obj = json.loads(world["a1"].read_text())
        part.write_text(json.dumps(_mangle_json(obj, [2, *path], action)))
    _code, out = _run(["merge", str(world["a0"]), str(part), "--json"])
    assert out["schema"] == "eagle3-forensics/merge/1"


def test_merge_of_good_parts_and_evil_dump(
    world: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _run(["merge", str(world["a0"]), str(world["a1"]), "--json"])
    assert code == 0 and out["of"] == "audit-data"
    d = _copy(world["specforge"], world["root"] / "evil")
    evil_pickle(next(d.rglob("data_1.ckpt")))
    code, obj = _run(["audit-data", str(d), "--json"])
    assert code == 2 and "refused to unpickle" in json.dumps(obj["findings"])
    (d / "empty").mkdir()
    for p in _files(d):
        p.unlink()
    code, obj = _run(
        ["probe-offline", str(world["drafter"]), "--data", str(d), "--target", str(world["target"]), "--json"]
    )
    assert code == 2 and "no dump files" in obj["error"]["message"]
