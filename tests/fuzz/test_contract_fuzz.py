"""The JSON contract, fuzzed across every command that reads user files (docs/json.md).

One registry, :data:`COMMANDS`: per command a hypothesis-driven ``draw`` that writes mangled inputs
(header byte flips, truncations, header-length lies, config garbage, wrong-typed documents, odd
arrays) under a fresh work directory and returns the command line. Every run goes through
:func:`contract.check`: a documented exit code, exactly one schema-valid JSON object on stdout, no
traceback, within the time bound; ``after`` adds a command's own promises (``repair`` leaves its
source byte-identical and nothing at ``--out`` after a failure). ``diagnose``/``inspect`` are fuzzed
with the same harness in test_fuzz_diagnose.py.

A new command = one :class:`Case` in :data:`COMMANDS` (and its schema in eagle3_forensics/schemas/).
Example counts scale with ``FUZZ_SCALE``.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
import yaml
from contract import (
    DOCUMENTED,
    FUZZ_SETTINGS,
    TIME_LIMIT_S,
    Outcome,
    check,
    examples,
    files_digest,
    run_cli,
    run_subprocess,
)
from hypothesis import event, given
from hypothesis import strategies as st
from mangle import (
    FLAT_CONFIG,
    SPECULATORS_CONFIG,
    V,
    draw_config,
    draw_document,
    draw_json_file,
    draw_jsonl,
    draw_safetensors,
    draw_text_bytes,
    vocab_map,
    write_drafter,
    write_target,
)
from paths import DEMO, ROOT
from safetensors.numpy import save_file as save_numpy

from eagle3_forensics.cli.main import _subcommands, build_parser
from eagle3_forensics.engines.launch import LAUNCH_RELEASES

# -- the valid seeds every case breaks --------------------------------------------------------------


@dataclass
class World:
    flat: Path  # tiny drafters (hidden 16, vocab 64 -> 32) and their target
    speculators: Path
    target: Path
    ids: Path  # input_ids + loss_mask for the tiny vocabulary
    map: Path  # d2t/t2d of the tiny drafter
    demo_drafter: Path  # the demo's healthy drafter, its target (with tokenizer) and prompts
    demo_target: Path
    prompts: list[dict[str, Any]]
    corpus: list[dict[str, Any]]
    probe_result: dict[str, Any]
    run_config: dict[str, Any]
    notebooks: Path
    baseline: dict[str, Any]
    summary: dict[str, Any]
    history: Path  # a run --history directory with two entries
    parts: list[Path]  # the outputs of run --shard 0/2 and 1/2


def _ids_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "input_ids": rng.integers(0, V, size=(3, 24), dtype=np.int64),
        "loss_mask": rng.integers(0, 2, size=(3, 24), dtype=np.int64),
    }


def _fast_failing_notebook(directory: Path) -> Path:
    """A notebook papermill refuses before starting a kernel (no parameter translator for its
    language): the run machinery (config, jobs, gate, summary, index.html) runs for real in ms."""
    import nbformat

    directory.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"name": "fuzzlang", "language": "fuzzlang", "display_name": "fuzz"},
        "language_info": {"name": "fuzzlang"},
    }
    cell = nbformat.v4.new_code_cell("checkpoint = None\ntarget = None\nk = 3")
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell, nbformat.v4.new_code_cell("print(checkpoint)")]
    nbformat.write(nb, str(directory / "check.ipynb"))
    return directory


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("contract_seeds")
    ids = root / "ids.safetensors"
    save_numpy(_ids_arrays(), str(ids))
    d2t, t2d = vocab_map()
    map_file = root / "map.safetensors"
    save_numpy({"d2t": d2t, "t2d": t2d}, str(map_file))
    prompts = [json.loads(line) for line in (DEMO / "prompts.jsonl").read_text().splitlines()[:2]]
    corpus = [json.loads(line) for line in (DEMO / "corpus.jsonl").read_text().splitlines()[:3]]
    notebooks = _fast_failing_notebook(root / "notebooks")
    w = World(
        flat=write_drafter(root / "flat", "flat"),
        speculators=write_drafter(root / "speculators", "speculators"),
        target=write_target(root / "target"),
        ids=ids,
        map=map_file,
        demo_drafter=DEMO / "drafters" / "healthy",
        demo_target=DEMO / "target",
        prompts=prompts,
        corpus=corpus,
        probe_result={},
        run_config={
            "name": "fuzz",
            "notebooks_dir": str(notebooks),
            "notebooks": {"check": {"k": 3}},
            "drafters": {"a": str(root / "flat"), "b": {"checkpoint": str(root / "speculators")}},
            "parameters": {"target": str(root / "target")},
            "timeout": 5,
            "start_timeout": 5,
            "workers": 1,
            "gate": {"tolerance": {"acceptance_length": 0.1, "per_position": 0.1}},
        },
        notebooks=notebooks,
        baseline=json.loads((ROOT / "configs" / "demo_baseline.json").read_text()),
        summary={},
        history=root / "history",
        parts=[root / "part1", root / "part2"],
    )
    # the seeds are valid: each command succeeds on them (and the heavy imports happen here, not
    # inside a timed example)
    work = root / "seed_work"
    work.mkdir()
    (work / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    probe = check(
        run_cli(
            [
                "probe", w.demo_drafter, "--target", w.demo_target, "--prompts", work / "prompts.jsonl",
                "--max-new-tokens", "8", "--no-sweep", "--device", "cpu", "--json",
            ]
        ),
        "probe",
        {0},
        time_limit=120,
    )  # fmt: skip
    assert probe.obj is not None
    w.probe_result = {k: v for k, v in probe.obj.items() if k not in ("schema", "exit_code", "error")}
    (work / "run.yaml").write_text(yaml.safe_dump(w.run_config))
    ran = check(
        run_cli(
            [
                "run",
                "--config",
                work / "run.yaml",
                "--out",
                work / "out",
                "--workers",
                "1",
                "--no-progress",
                "--json",
            ]
        ),
        "run",
        {1},
        time_limit=120,
    )
    w.summary = json.loads((work / "out" / "summary.json").read_text())
    assert ran.obj is not None and ran.obj["failed"] == 2
    base_run = ["run", "--config", work / "run.yaml", "--workers", "1", "--no-progress", "--json"]
    for i in (1, 2):
        check(
            run_cli([*base_run, "--out", work / f"h{i}", "--history", w.history]), "run", {1}, time_limit=120
        )
        check(
            run_cli([*base_run, "--out", w.parts[i - 1], "--shard", f"{i - 1}/2"]), "run", {1}, time_limit=120
        )
    assert len(list(w.history.glob("*.json"))) == 2
    check(run_cli(["history", w.history, "--json"]), "history", {0})
    check(run_cli(["merge-runs", *w.parts, "--out", work / "merged", "--json"]), "merge-runs", {1})
    for argv, schema in (
        (["vocab", "classify", w.flat, "--target", w.target, "--json"], "vocab-classify"),
        (["vocab", "coverage", w.flat, "--ids", w.ids, "--json"], "vocab-coverage"),
        (["vocab", "compare", w.flat, w.map, "--json"], "vocab-compare"),
        (["repair", w.flat, "--engine", "vllm", "--out", work / "repaired", "--dry-run", "--json"], "repair"),
    ):
        check(run_cli(argv), schema, {0}, time_limit=120)
    return w


# -- drawing mangled inputs --------------------------------------------------------------------------

_ODD_DTYPES = [np.int64, np.int32, np.int16, np.uint8, np.float32, np.float64, np.bool_]


def draw_array(data: st.DataObject, label: str, shape: tuple[int, ...]) -> np.ndarray:
    """A well-formed array with odd content: another dtype or shape, negative or out-of-range values."""
    if data.draw(st.booleans(), label=f"{label} odd shape"):
        shape = tuple(data.draw(st.lists(st.integers(0, 7), max_size=3), label=f"{label} shape"))
    low = data.draw(st.sampled_from([0, 0, -3, V - 2, 2**31 - 5]), label=f"{label} low")
    high = low + data.draw(st.sampled_from([1, 2, V, V + 9, 1000]), label=f"{label} span")
    dtype = data.draw(st.sampled_from(_ODD_DTYPES), label=f"{label} dtype")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label=f"{label} seed"))
    arr: np.ndarray = rng.integers(low, high, size=shape).astype(dtype)
    if np.issubdtype(dtype, np.floating) and arr.size and data.draw(st.booleans(), label=f"{label} nan"):
        arr.flat[0] = np.nan
    return arr


def write_arrays(arrays: dict[str, np.ndarray], path: Path) -> Path:
    """``arrays`` in the format ``path``'s suffix names (.safetensors, .npz, .npy, .pt)."""
    if path.suffix == ".safetensors":
        save_numpy({k: np.ascontiguousarray(v) for k, v in arrays.items()}, str(path))
    elif path.suffix == ".npz":
        np.savez(path, **arrays)  # type: ignore[arg-type]
    elif path.suffix == ".npy":
        np.save(path, next(iter(arrays.values())))
    else:
        torch.save({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}, path)
    return path


def draw_ids_file(data: st.DataObject, work: Path) -> Path:
    """A token-ids file (input_ids + loss_mask): mangled bytes, or odd arrays in any format."""
    suffix = data.draw(
        st.sampled_from([".safetensors", ".safetensors", ".npz", ".npy", ".pt", ".txt"]), label="ids fmt"
    )
    path = work / f"ids{suffix}"
    seed = _ids_arrays()
    if data.draw(st.booleans(), label="ids odd arrays"):
        arrays = {k: draw_array(data, k, v.shape) for k, v in seed.items()}
        if data.draw(st.booleans(), label="drop loss_mask"):
            arrays.pop("loss_mask")
        if data.draw(st.sampled_from([False, False, False, True]), label="rename input_ids"):
            arrays = {"tokens": arrays["input_ids"]}
        return write_arrays(arrays, path)
    raw = write_arrays(seed, work / f"seed{suffix}").read_bytes()
    path.write_bytes(draw_safetensors(data, raw) if suffix == ".safetensors" else draw_text_bytes(data, raw))
    return path


def draw_map(data: st.DataObject, world: World, work: Path) -> Path:
    """Something ``vocab`` reads as a map: a mangled drafter, or a mangled/odd map file or d2t.npy dir."""
    kind = data.draw(st.sampled_from(["drafter", "drafter", "file", "odd", "npy dir"]), label="map kind")
    if kind == "drafter":
        return draw_drafter(data, world, work / "drafter")
    d2t, t2d = vocab_map()
    if kind == "npy dir":
        out = work / "npy"
        out.mkdir()
        for name, arr in (("d2t", d2t), ("t2d", t2d)):
            if data.draw(st.sampled_from([True, True, True, False]), label=f"keep {name}"):
                raw = write_arrays({name: arr}, work / f"{name}.seed.npy").read_bytes()
                (out / f"{name}.npy").write_bytes(
                    draw_text_bytes(data, raw) if data.draw(st.booleans()) else raw
                )
        return out
    suffix = data.draw(st.sampled_from([".safetensors", ".npz", ".pt"]), label="map fmt")
    path = work / f"map{suffix}"
    if kind == "odd":
        arrays = {"d2t": draw_array(data, "d2t", d2t.shape), "t2d": draw_array(data, "t2d", t2d.shape)}
        if data.draw(st.booleans(), label="drop one"):
            arrays.pop(data.draw(st.sampled_from(["d2t", "t2d"])))
        return write_arrays(arrays, path)
    raw = write_arrays({"d2t": d2t, "t2d": t2d}, work / f"seed{suffix}").read_bytes()
    path.write_bytes(draw_safetensors(data, raw) if suffix == ".safetensors" else draw_text_bytes(data, raw))
    return path


def draw_drafter(data: st.DataObject, world: World, out: Path) -> Path:
    """A copy of a healthy drafter (a tiny one of tests/builders.py, or the demo's, as a user has it)
    with its weights header or its config.json mangled (or both)."""
    style = data.draw(st.sampled_from(["flat", "flat", "speculators", "demo"]), label="style")
    src = {"flat": world.flat, "speculators": world.speculators, "demo": world.demo_drafter}[style]
    seed_config = {"flat": FLAT_CONFIG, "speculators": SPECULATORS_CONFIG}.get(style) or json.loads(
        (src / "config.json").read_text()
    )
    out.mkdir(parents=True)
    what = data.draw(st.sampled_from(["weights", "weights", "config", "both", "missing"]), label="mangle")
    weights = (src / "model.safetensors").read_bytes()
    config = (src / "config.json").read_bytes()
    if what in ("weights", "both"):
        weights = draw_safetensors(data, weights)
    if what in ("config", "both"):
        config = draw_config(data, seed_config)
    if what == "missing":
        gone = data.draw(st.sampled_from(["model.safetensors", "config.json"]), label="missing")
        (out / ("config.json" if gone == "model.safetensors" else "model.safetensors")).write_bytes(
            config if gone == "model.safetensors" else weights
        )
        return out
    (out / "model.safetensors").write_bytes(weights)
    (out / "config.json").write_bytes(config)
    return out


def draw_target(data: st.DataObject, world: World, out: Path) -> Path:
    """A copy of the demo target (a real, tiny causal LM with a tokenizer) with one file mangled."""
    out.mkdir(parents=True)
    for f in world.demo_target.iterdir():
        (out / f.name).symlink_to(f)
    name = data.draw(
        st.sampled_from(["config.json", "tokenizer.json", "model.safetensors", "missing"]),
        label="target file",
    )
    if name == "missing":
        (out / data.draw(st.sampled_from(["config.json", "model.safetensors", "tokenizer.json"]))).unlink()
        return out
    raw = (world.demo_target / name).read_bytes()
    (out / name).unlink()
    if name == "model.safetensors":
        (out / name).write_bytes(draw_safetensors(data, raw))
    else:
        (out / name).write_bytes(draw_json_file(data, json.loads(raw)))
    return out


def _write(path: Path, raw: bytes) -> Path:
    path.write_bytes(raw)
    return path


def draw_prompts(data: st.DataObject, world: World, work: Path) -> Path:
    suffix = data.draw(st.sampled_from([".jsonl", ".jsonl", ".json", ".txt"]), label="prompts fmt")
    return _write(work / f"prompts{suffix}", draw_jsonl(data, world.prompts, ["prompt", "text", "id"]))


_SIZES = st.sampled_from(
    ["-1", "0", "1", "7", "32", "64", "65", "512", "2147483648", "10000000000000", "x", "1.5"]
)


# -- the commands --------------------------------------------------------------------------------------


def classify(data: st.DataObject, w: World, work: Path) -> list[object]:
    target = ["--target", w.target] if data.draw(st.booleans(), label="with target") else []
    return ["vocab", "classify", draw_map(data, w, work), *target, "--json"]


def compare(data: st.DataObject, w: World, work: Path) -> list[object]:
    pair = [w.map, draw_map(data, w, work)]
    if data.draw(st.booleans(), label="swap"):
        pair.reverse()
    limit = data.draw(st.sampled_from(["50", "0", "1", "-1", "100000000"]), label="limit")
    target = ["--target", w.target] if data.draw(st.booleans(), label="with target") else []
    return ["vocab", "compare", *pair, "--limit", limit, *target, "--json"]


def coverage(data: st.DataObject, w: World, work: Path) -> list[object]:
    top = data.draw(st.sampled_from(["20", "0", "1", "-5", "1000000"]), label="top")
    if data.draw(st.sampled_from(["ids", "ids", "corpus"]), label="source") == "ids":
        drafter = w.flat if data.draw(st.booleans(), label="seed drafter") else draw_map(data, w, work)
        return ["vocab", "coverage", drafter, "--ids", draw_ids_file(data, work), "--top", top, "--json"]
    corpus = _write(
        work / "corpus.jsonl", draw_jsonl(data, w.corpus, ["text", "prompt", "completion", "messages"])
    )
    tokenizer = (
        ["--tokenizer", w.demo_target]
        if data.draw(st.booleans(), label="tokenizer")
        else ["--target", w.demo_target]
    )
    return ["vocab", "coverage", w.demo_drafter, "--corpus", corpus, *tokenizer, "--top", top, "--json"]


def build(data: st.DataObject, w: World, work: Path) -> list[object]:
    out = (
        work
        / "out"
        / data.draw(st.sampled_from(["map.safetensors", "map.pt", "map.bin", "map.safetensors"]), label="out")
    )
    sizes = [
        "--draft-vocab-size",
        data.draw(_SIZES, label="v"),
        "--target-vocab-size",
        data.draw(_SIZES, label="V"),
    ]
    tie = ["--tie-break", data.draw(st.sampled_from(["id", "first_seen", "first_row"]), label="tie")]
    if data.draw(st.booleans(), label="from ids"):
        return [
            "vocab",
            "build",
            "--ids",
            draw_ids_file(data, work),
            *sizes,
            *tie,
            "--out",
            out,
            "--no-progress",
            "--json",
        ]
    corpus = _write(
        work / "corpus.jsonl", draw_jsonl(data, w.corpus, ["text", "prompt", "completion", "messages"])
    )
    return ["vocab", "build", "--corpus", corpus, "--tokenizer", w.demo_target, *sizes, *tie, "--out", out, "--no-progress", "--json"]  # fmt: skip


def build_after(outcome: Outcome, work: Path, before: Any) -> None:
    out = Path(outcome.argv[outcome.argv.index("--out") + 1])
    if outcome.code != 0:
        assert not out.exists(), f"a failed build left {out}\n{outcome}"


def repair(data: st.DataObject, w: World, work: Path) -> list[object]:
    src = draw_drafter(data, w, work / "src")
    argv = ["repair", src, "--engine", data.draw(st.sampled_from(["vllm", "sglang"]), label="engine")]
    argv += ["--out", work / "out" / "dst"]
    (work / "out").mkdir()
    if data.draw(st.booleans(), label="with target"):
        argv += ["--target", w.target]
    extra = data.draw(
        st.sampled_from(["", "", "--dry-run", "--trust-t2d", "--trust-d2t", "rebuild"]), label="extra"
    )
    if extra == "rebuild":
        argv += ["--rebuild-vocab-from", draw_ids_file(data, work)]
    elif extra:
        argv.append(extra)
    return [*argv, "--json"]


def repair_before(work: Path) -> dict[str, bytes]:
    return files_digest(work / "src")


def repair_after(outcome: Outcome, work: Path, before: Any) -> None:
    assert files_digest(work / "src") == before, f"repair modified its source\n{outcome}"
    dst = work / "out" / "dst"
    leftovers = [p.name for p in (work / "out").iterdir() if p.name != "dst"]
    assert not leftovers, f"repair left {leftovers}\n{outcome}"
    if outcome.code != 0 or "--dry-run" in outcome.argv:
        assert not dst.exists(), f"nothing may be at --out after a failure or a dry run\n{outcome}"
    else:
        assert (dst / "config.json").is_file() and (dst / "model.safetensors").is_file(), outcome


def probe(data: st.DataObject, w: World, work: Path) -> list[object]:
    broken = data.draw(
        st.sampled_from(["prompts", "prompts", "target", "drafter", "numbers"]), label="broken"
    )
    prompts = (
        draw_prompts(data, w, work)
        if broken == "prompts"
        else _write(work / "prompts.jsonl", "".join(json.dumps(p) + "\n" for p in w.prompts[:1]).encode())
    )
    target = draw_target(data, w, work / "target") if broken == "target" else w.demo_target
    drafter = draw_drafter(data, w, work / "drafter") if broken == "drafter" else w.demo_drafter
    k = data.draw(
        st.sampled_from(["1", "3", "0", "-1", "64"]) if broken == "numbers" else st.just("2"), label="k"
    )
    new = data.draw(
        st.sampled_from(["2", "0", "-3", "1"]) if broken == "numbers" else st.just("2"), label="new"
    )
    engine = data.draw(
        st.sampled_from(["reference", "reference", "vllm", "sglang", "eagle", "speculators"]), label="engine"
    )
    return [
        "probe", drafter, "--target", target, "--prompts", prompts, "--k", k, "--max-new-tokens", new,
        "--engine", engine, "--device", "cpu", "--no-sweep", "--no-teacher-forced", "--json",
    ]  # fmt: skip


def probe_server(data: st.DataObject, w: World, work: Path) -> list[object]:
    """A refused server (port 1): the inputs are read first, then the fault is exit 4."""
    prompts = (
        draw_prompts(data, w, work)
        if data.draw(st.booleans(), label="bad prompts")
        else _write(work / "prompts.jsonl", b'{"prompt": "hello"}\n')
    )
    argv: list[object] = [
        "probe-server",
        "http://127.0.0.1:1",
        "--engine",
        data.draw(st.sampled_from(["vllm", "sglang"])),
    ]
    argv += ["--prompts", prompts, "--retries", "0", "--timeout", "0.5"]
    if data.draw(st.booleans(), label="compare with"):
        argv += ["--compare-with", _write(work / "probe.json", draw_json_file(data, w.probe_result))]
    if data.draw(st.booleans(), label="drafter"):
        argv += ["--drafter", draw_drafter(data, w, work / "drafter")]
    return [*argv, "--json"]


_RUN_KEYS = ["name", "notebooks", "drafters", "parameters", "gate", "workers", "env", "timeout", "drafters_from", "path_parameters"]  # fmt: skip
_BASELINE_KEYS = ["drafters", "acceptance_length", "per_position", "expected_findings", "by_notebook", "value", "tolerance", "values"]  # fmt: skip


def run(data: st.DataObject, w: World, work: Path) -> list[object]:
    broken = data.draw(
        st.sampled_from(["config", "config text", "baseline", "baseline", "previous"]), label="broken"
    )
    config: Any = w.run_config
    if broken == "config":
        config = draw_document(data, config, _RUN_KEYS)
    raw = yaml.safe_dump(config).encode()
    if broken == "config text":
        raw = draw_text_bytes(data, raw)
    argv = ["run", "--config", _write(work / "run.yaml", raw), "--out", work / "out", "--workers", "1"]
    if broken == "baseline":
        argv += [
            "--baseline",
            _write(work / "baseline.json", draw_json_file(data, w.baseline, _BASELINE_KEYS)),
        ]
    if broken == "previous":
        flag = data.draw(st.sampled_from(["--previous", "--baseline"]), label="summary as")
        argv += [
            flag,
            _write(work / "summary.json", draw_json_file(data, w.summary, ["runs", "metrics", "codes"])),
        ]
    if data.draw(st.sampled_from([False, False, False, True]), label="shard"):
        argv += [
            "--shard",
            data.draw(st.sampled_from(["1/2", "2/2", "0/2", "3/2", "1/0", "x", "-1/2", "1/2/3"])),
        ]
    return [*argv, "--no-progress", "--json"]


def history(data: st.DataObject, w: World, work: Path) -> list[object]:
    """A history directory with an entry mangled, removed or joined by strangers."""
    d = work / "history"
    shutil.copytree(w.history, d)
    entries = sorted(d.glob("*.json"))
    what = data.draw(st.sampled_from(["entry", "entry", "stranger", "not a dir", "empty"]), label="history")
    if what == "entry":
        victim = data.draw(st.sampled_from(entries), label="entry")
        victim.write_bytes(
            draw_json_file(data, json.loads(victim.read_text()), ["runs", "schema", "generated"])
        )
    elif what == "stranger":
        name = data.draw(st.sampled_from(["x.json", ".hidden.json", "20990101T000000Z_x.json", "notes.txt"]))
        (d / name).write_bytes(draw_json_file(data, w.summary, ["runs", "schema"]))
    elif what == "not a dir":
        shutil.rmtree(d)
        d.write_text("{}")
    else:
        for e in entries:
            e.unlink()
    argv = ["history", d, "--json"]
    if data.draw(st.booleans(), label="last"):
        argv += ["--last", data.draw(st.sampled_from(["1", "2", "0", "-1", "1000"]))]
    if data.draw(st.booleans(), label="drafter"):
        argv += ["--drafter", data.draw(st.sampled_from(["a", "b", "nobody", ""]))]
    return argv


def merge_runs(data: st.DataObject, w: World, work: Path) -> list[object]:
    """The two parts of a sharded run, one of them mangled (its part.json), lost or repeated."""
    parts = []
    for i, src in enumerate(w.parts):
        dst = work / f"part{i + 1}"
        shutil.copytree(src, dst)
        parts.append(dst)
    what = data.draw(
        st.sampled_from(["part.json", "part.json", "part.json", "missing", "twice", "no file"]), label="parts"
    )
    victim = data.draw(st.sampled_from(parts), label="victim")
    if what == "part.json":
        raw = (victim / "part.json").read_text()
        keys = ["schema", "fingerprint", "shard", "jobs", "executed", "runs", "meta", "index", "count"]
        (victim / "part.json").write_bytes(draw_json_file(data, json.loads(raw), keys))
    elif what == "missing":
        parts.remove(victim)
    elif what == "twice":
        parts.append(victim)
    else:
        (victim / "part.json").unlink()
    return ["merge-runs", *parts, "--out", work / "merged", "--json"]


# diagnose --launch: serving command lines built from every engine's real flags and programs, with
# hostile values (unbalanced quotes, shell operators, bad JSON) and a mangled options YAML.
_LAUNCH_PROGRAMS = [
    "python -m sglang.launch_server",
    "sglang serve",
    "vllm serve",
    "python3 -m vllm.entrypoints.openai.api_server",
    "trtllm-serve",
    "trtllm-serve serve",
    "CUDA_VISIBLE_DEVICES=0 vllm serve",
    "bash -c",
    "sglang",
    "",
    "'",
]
_LAUNCH_FLAGS = sorted(
    {n for tables in LAUNCH_RELEASES.values() for t in tables for f in t.flags for n in f.names}
    | {
        "--speculative_algorithm",
        "--speculative-config.method",
        "--speculative_config.model",
        "--tp_size",
        "--",
    }
)
_LAUNCH_VALUES = [
    "EAGLE3", "eagle3", "EAGLE", "Eagle", "NEXTN", "0", "-1", "3", "1e309", "", "'", '"', "\\",
    '{"method": "eagle3", "model": "DRAFTER", "num_speculative_tokens": 3}', '{"method": ', "[1, 2]",
    "null", '{"num_speculative_tokens": true}', "x" * 3000, "org/name", "é✓", "&&", "|", ";",
    "$(id)", "`id`", "opts.yaml", "missing.yaml", "DRAFTER",
]  # fmt: skip
_LAUNCH_YAML = [
    {
        "speculative_config": {
            "decoding_type": "Eagle",
            "max_draft_len": 3,
            "speculative_model_dir": "DRAFTER",
        }
    },
    {"speculative_config": {"decoding_type": "Eagle3", "eagle3_layers_to_capture": [1, 3, 4]}},
    {"speculative_config": {"eagle3_layers_to_capture": "all", "max_draft_len": "three"}},
    {"speculative_config": [1, 2]},
    [1, 2],
    "text",
]


def launch(data: st.DataObject, w: World, work: Path) -> list[object]:
    seed = data.draw(st.sampled_from(_LAUNCH_YAML), label="yaml seed")
    raw = yaml.safe_dump(seed).replace("DRAFTER", str(w.demo_drafter)).encode()
    if data.draw(st.booleans(), label="mangle yaml"):
        raw = draw_text_bytes(data, raw)
    (work / "opts.yaml").write_bytes(raw)
    tokens = st.one_of(st.sampled_from(_LAUNCH_FLAGS), st.sampled_from(_LAUNCH_VALUES), st.text(max_size=6))
    words = [data.draw(st.sampled_from(_LAUNCH_PROGRAMS), label="program")]
    for word in data.draw(st.lists(tokens, max_size=10), label="words"):
        word = word.replace("DRAFTER", str(w.demo_drafter))
        words.append(shlex.quote(word) if data.draw(st.booleans(), label="quote") else word)
    argv: list[Any] = ["diagnose", w.demo_drafter, "--launch", " ".join(words), "--json"]
    engine = data.draw(st.sampled_from([None, "sglang", "vllm", "tensorrt_llm", "sglang==0.5.11", "all"]))
    return argv + (["--engine", engine] if engine else [])


# Hostile command lines: every command's real flags with values that name nothing.
_VALUES = [
    "/nonexistent/e3f",
    "",
    "-",
    "--",
    "-1",
    "0",
    "nan",
    "1e309",
    "é✓ ünï",
    "x" * 5000,
    "http://[::1",
    "--json",
]


def _flags(parser: Any) -> list[str]:
    return [o for a in parser._actions for o in a.option_strings if o not in ("-h", "--help")]


def arguments(data: st.DataObject, w: World, work: Path) -> list[object]:
    parser = build_parser()
    commands = {
        n: p for n, p in _subcommands(parser).items() if p.get_default("json_command") or n == "vocab"
    }
    name = data.draw(st.sampled_from(sorted(commands)), label="command")
    argv, sub = [name], commands[name]
    if name == "vocab":
        leaf = data.draw(st.sampled_from(sorted(_subcommands(sub))), label="vocab command")
        argv.append(leaf)
        sub = _subcommands(sub)[leaf]
    tokens = st.one_of(st.sampled_from(_flags(sub)), st.sampled_from(_VALUES), st.text(max_size=8))
    return [*argv, "--json", *data.draw(st.lists(tokens, max_size=8), label="tokens")]


def arguments_schema(argv: list[str]) -> str:
    return f"vocab-{argv[1]}" if argv[0] == "vocab" else argv[0]


@dataclass(frozen=True)
class Case:
    """One command under the contract fuzz."""

    name: str
    schema: str
    examples: int
    draw: Callable[[st.DataObject, World, Path], list[object]]
    codes: frozenset[int] = DOCUMENTED
    after: Callable[[Outcome, Path, Any], None] | None = None
    """The command's own promises, given the outcome, the work directory and what ``before`` saw."""
    before: Callable[[Path], Any] | None = None
    time_limit: float = TIME_LIMIT_S
    in_work: bool = False
    """Run with the work directory as the current directory (relative paths land there)."""


COMMANDS: tuple[Case, ...] = (
    Case("vocab-classify", "vocab-classify", 300, classify, frozenset({0, 1, 2})),
    Case("vocab-compare", "vocab-compare", 150, compare, frozenset({0, 1, 2})),
    Case("vocab-coverage", "vocab-coverage", 200, coverage, frozenset({0, 2})),
    Case("vocab-build", "vocab-build", 200, build, frozenset({0, 2}), build_after),
    Case("repair", "repair", 250, repair, frozenset({0, 1, 2}), repair_after, repair_before),
    Case("probe", "probe", 100, probe, frozenset({0, 1, 2})),
    Case("probe-server", "probe-server", 100, probe_server, frozenset({2, 4})),
    Case("run", "run", 100, run, frozenset({1, 2})),
    Case("history", "history", 100, history, frozenset({0, 2})),
    Case("merge-runs", "merge-runs", 100, merge_runs, frozenset({1, 2})),
    Case("diagnose-launch", "diagnose", 150, launch, frozenset({0, 1, 2}), in_work=True),
    # mostly exit 2; a value that happens to name something real ('' is the current directory) may run
    Case("arguments", "*", 300, arguments, in_work=True),
)


@pytest.mark.parametrize("case", COMMANDS, ids=lambda c: c.name)
def test_contract(case: Case, world: World, tmp_path: Path) -> None:
    work = tmp_path / "work"

    @FUZZ_SETTINGS(examples(case.examples))
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        argv = case.draw(data, world, work)
        before = case.before(work) if case.before is not None else None
        schema = arguments_schema([str(a) for a in argv]) if case.schema == "*" else case.schema
        with contextlib.chdir(work) if case.in_work else contextlib.nullcontext():
            outcome = check(run_cli(argv), schema, case.codes, time_limit=case.time_limit)
        if case.after is not None:
            case.after(outcome, work, before)
        event(f"exit code {outcome.code}")

    one()


def test_contract_subprocess(world: World, tmp_path: Path) -> None:
    """The same contract through real processes (the entry point, real stdout/stderr), one mangled
    input per kind."""
    (tmp_path / "model").mkdir()
    truncated = tmp_path / "model"
    (truncated / "config.json").write_bytes((world.flat / "config.json").read_bytes())
    (truncated / "model.safetensors").write_bytes((world.flat / "model.safetensors").read_bytes()[:100])
    lied = tmp_path / "lied"
    lied.mkdir()
    (lied / "config.json").write_bytes((world.flat / "config.json").read_bytes())
    raw = (world.flat / "model.safetensors").read_bytes()
    (lied / "model.safetensors").write_bytes((2**40).to_bytes(8, "little") + raw[8:])
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "config.json").write_text('{"hidden_size": "sixteen", ')
    (garbage / "model.safetensors").write_bytes(raw)
    src_digest = files_digest(tmp_path)
    jobs = [
        (["inspect", lied, "--json"], "inspect", {2}),
        (["vocab", "classify", truncated, "--json"], "vocab-classify", {2}),
        (["vocab", "classify", garbage, "--json"], "vocab-classify", {2}),
        (["repair", garbage, "--engine", "vllm", "--out", tmp_path / "out" / "dst", "--json"], "repair", {2}),
        (["diagnose", lied, "--json"], "diagnose", {2}),
        (["vocab", "coverage", "--json"], "vocab-coverage", {2}),
        (["no-such-command", "--json"], "cli", {2}),
    ]
    from concurrent.futures import ThreadPoolExecutor

    (tmp_path / "out").mkdir()
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(lambda job: run_subprocess(job[0]), jobs))
    for (_, schema, codes), outcome in zip(jobs, outcomes, strict=True):
        check(outcome, schema, codes, time_limit=180)
    assert files_digest(tmp_path) == src_digest  # every input untouched, nothing written
