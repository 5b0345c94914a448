"""Faults in sharded runs, with real processes killed (SIGKILL) at a point: a shard killed while it
writes leaves nothing a merge accepts, the merge lists the missing shard with the command line
that makes it, and running that command replaces the partial."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from paths import ROOT

PREP = ROOT / "data" / "demo" / "prep"

# the real CLI, with a pause injected where a partial is committed (the rename): the test kills it there
PAUSE_AT_COMMIT = """
import os, pathlib, sys, time
name, flag = sys.argv[1], pathlib.Path(sys.argv[2])
real = os.replace
def paused(src, dst, *a, **k):
    if pathlib.Path(dst).name == name:
        flag.write_text(str(src))
        time.sleep(600)
    return real(src, dst, *a, **k)
os.replace = paused
from eagle3_forensics.cli.main import main
sys.exit(main(sys.argv[3:]))
"""


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eagle3_forensics", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=False,
    )


def _kill_at_commit(name: str, tmp: Path, *args: str) -> str:
    """Run the CLI until it is about to commit ``name``, SIGKILL it there; returns the temporary file."""
    flag = tmp / f"paused-{name}"
    flag.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", PAUSE_AT_COMMIT, name, str(flag), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 240
        while not flag.exists():
            assert proc.poll() is None, f"the writer ended (exit {proc.returncode}) before committing {name}"
            assert time.monotonic() < deadline, "the writer never reached its commit"
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
    return flag.read_text()


def _rerun(command: str) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    assert argv[0] == "eagle3-forensics"
    return _cli(*argv[1:])


@pytest.mark.skipif(not PREP.is_dir(), reason="demo data not generated (make data)")
@pytest.mark.timeout(600)
@pytest.mark.slow  # a killed subprocess run, ~50 s: make test-all
def test_offline_partial_killed_while_written(tmp_path: Path) -> None:
    pytest.importorskip("torch")  # audit-data: the probe extra
    pytest.importorskip("pyarrow")  # the prep dir is an Arrow dataset: the offline extra
    base = ["audit-data", str(PREP), "--no-progress"]
    p0, p1 = tmp_path / "part-0.json", tmp_path / "part-1.json"
    assert _cli(*base, "--shard", "0/2", "--out", str(p0)).returncode in (0, 1)
    before = p0.read_bytes()

    # shard 1 killed while writing its partial: no part-1.json; the merge lists it with its command
    tmp = _kill_at_commit("part-1.json", tmp_path, *base, "--shard", "1/2", "--out", str(p1), "--json")
    assert (
        Path(tmp).is_file() and not p1.exists()
    )  # only the temporary file, which no glob of part-*.json takes
    proc = _cli("merge", *map(str, sorted(tmp_path.glob("part-*.json"))), "--json")
    got = json.loads(proc.stdout)
    assert proc.returncode == 2 and "missing 1/2" in got["error"]["message"]
    assert got["missing"] == [
        {
            "shard": "1/2",
            "command": shlex.join(["eagle3-forensics", *base, "--shard", "1/2", "--out", str(p1)]),
        }
    ]
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr

    # shard 0 re-run and killed while writing: its old partial stays whole
    _kill_at_commit("part-0.json", tmp_path, *base, "--shard", "0/2", "--out", str(p0))
    assert p0.read_bytes() == before

    # the listed command makes the missing shard; the merge then equals the single run
    assert _rerun(got["missing"][0]["command"]).returncode in (0, 1)
    merged = tmp_path / "merged.json"
    assert _cli("merge", str(p0), str(p1), "--out", str(merged)).returncode in (0, 1)
    single = _cli(*base, "--json").stdout
    assert merged.read_text() == single


def _config(tmp: Path) -> Path:
    from notebook_builders import run_config, write_notebook

    yaml = pytest.importorskip("yaml")
    nbs = tmp / "nbs"
    nbs.mkdir()
    write_notebook(nbs / "01_quick.ipynb", ("parameters", "checkpoint = None"), ("code", "print('ok')"))
    (tmp / "ckpt").mkdir()
    data = run_config(
        nbs, ["01_quick"], {d: {"checkpoint": str(tmp / "ckpt")} for d in ("alpha", "beta")}, name="faults"
    )
    path = tmp / "faults.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.notebooks
@pytest.mark.timeout(600)
def test_run_shard_killed_midway(tmp_path: Path) -> None:
    pytest.importorskip("papermill")
    cfg = _config(tmp_path)
    parts = tmp_path / "parts"

    def shard(i: int) -> list[str]:
        return [
            "run",
            "--config",
            str(cfg),
            "--no-progress",
            "--shard",
            f"{i}/2",
            "--out",
            str(parts / f"s-{i}"),
        ]

    for i in (0, 1):
        proc = _cli(*shard(i))
        assert proc.returncode == 0, proc.stderr[-2000:]
    good = _cli("merge-runs", str(parts / "s-0"), str(parts / "s-1"), "--out", str(tmp_path / "m0"), "--json")
    assert good.returncode == 0, good.stderr[-2000:]

    # shard 1 re-run, killed after its report was rewritten, before its part.json: nothing merge accepts
    _kill_at_commit("part.json", tmp_path, *shard(1))
    assert not (parts / "s-1" / "part.json").exists()  # deleted when the re-run started
    proc = _cli("merge-runs", *map(str, sorted(parts.iterdir())), "--out", str(tmp_path / "m1"), "--json")
    got = json.loads(proc.stdout)
    assert proc.returncode == 2 and got["error"]["code"] == "UNUSABLE_INPUT"
    assert "missing shard 1/2" in got["error"]["message"] and "unfinished" in got["error"]["message"]
    assert got["missing"] == [{"shard": "1/2", "command": shlex.join(["eagle3-forensics", *shard(1)])}]
    assert not (tmp_path / "m1").exists()  # refused before writing anything

    # the listed command re-runs the shard; its new part replaces the old one and the merge is whole
    assert _rerun(got["missing"][0]["command"]).returncode == 0
    proc = _cli("merge-runs", *map(str, sorted(parts.iterdir())), "--out", str(tmp_path / "m2"), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    a = json.loads((tmp_path / "m0" / "summary.json").read_text())
    b = json.loads((tmp_path / "m2" / "summary.json").read_text())
    from eagle3_forensics.runs.shard import comparable

    assert comparable(a) == comparable(b)
