"""Sharded runs: the slice of each shard, the checks of merge-runs, what "identical" ignores; bundles."""

from __future__ import annotations

import copy
import zipfile
from pathlib import Path
from typing import Any

import pytest

from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.io.shard import MissingShardsError, missing_shards, rerun_command
from eagle3_forensics.runs.bundle import write_bundle
from eagle3_forensics.runs.config import Job, RunConfig, config_fingerprint
from eagle3_forensics.runs.shard import (
    Part,
    Shard,
    check_parts,
    comparable,
    comparable_html,
    parse_shard,
    shard_jobs,
)

NOTEBOOKS = ["00_triage", "01_checkpoint_keys", "02_vocab_mapping", "04_accept_rate_probe"]
DRAFTERS = ["zeta", "alpha", "mid"]
GPU = {"00_triage", "04_accept_rate_probe"}


def _config(pools: bool = False) -> RunConfig:
    jobs = [
        Job(d, n, f"/nb/{n}.ipynb", {}, f"{d}__{n}", "gpu" if pools and n in GPU else "default")
        for d in DRAFTERS
        for n in NOTEBOOKS
    ]
    return RunConfig(
        name="c",
        source=None,
        notebooks_dir=Path("/nb"),
        timeout=1,
        start_timeout=1,
        workers=1,
        env={},
        show_code=False,
        notebooks=NOTEBOOKS,
        drafters=DRAFTERS,
        jobs=jobs,
        fingerprint="f" * 16,
        pools={"gpu": sorted(GPU)} if pools else {},
    )


def test_parse_shard() -> None:
    assert parse_shard("2/3") == Shard(2, 3) and str(parse_shard(" 0/1 ")) == "0/1"
    assert parse_shard("0/3") == Shard(0, 3)  # 0-based, as Slurm arrays and Indexed Jobs count
    assert parse_shard("gpu:1/2") == Shard(1, 2, "gpu") and str(Shard(1, 2, "gpu")) == "gpu:1/2"
    for bad in ("4/3", "3", "1/0", "a/b", "-1/2", "gpu:/2", "1/2/3", "g pu:1/2"):
        with pytest.raises(BadArgumentsError, match="shards count from 0"):
            parse_shard(bad)
    # the old 1-based last shard is refused by name, never read as another slice
    for old in ("3/3", "gpu:2/2", "1/1"):
        with pytest.raises(BadArgumentsError, match=r"I = N is the old 1-based form; shards count from 0"):
            parse_shard(old)


def test_one_parser_for_every_command() -> None:
    pytest.importorskip("torch")  # checks.data: the probe extra
    from eagle3_forensics.checks.data import parse_shard as data_shard
    from eagle3_forensics.io.shard import parse_pair

    assert data_shard("0/4") == parse_pair("0/4") == (0, 4) and data_shard(None) is None
    with pytest.raises(BadArgumentsError, match="old 1-based form"):
        data_shard("4/4")
    with pytest.raises(BadArgumentsError, match="expected I/N"):  # pools are run's alone
        parse_pair("gpu:0/2")


def test_rerun_commands_of_missing_shards() -> None:
    argv = ["eagle3-forensics", "run", "--config", "c.yaml", "--shard", "gpu:1/4", "--out", "parts/n1/gpu-1"]
    assert rerun_command(argv, Shard(1, 4, "gpu"), Shard(3, 4, "gpu")) == (
        "eagle3-forensics run --config c.yaml --shard gpu:3/4 --out parts/n1/gpu-3"
    )
    off = ["eagle3-forensics", "probe-offline", "d", "--data", "x y", "--shard=2/3", "--out=p/part-2.json"]
    assert rerun_command(off, Shard(2, 3), Shard(0, 3)) == (
        "eagle3-forensics probe-offline d --data 'x y' --shard=0/3 --out=p/part-0.json"
    )
    # an --out that does not name the shard: no command (two shards into one file would lose one)
    assert rerun_command([*argv[:-1], "parts/out"], Shard(1, 4, "gpu"), Shard(0, 4, "gpu")) is None
    assert rerun_command(None, Shard(0, 2), Shard(1, 2)) is None
    made = [(Shard(0, 3), None), (Shard(2, 3), off)]  # the first part that recorded its command line
    assert missing_shards(made, 3) == [
        {"shard": "1/3", "command": rerun_command(off, Shard(2, 3), Shard(1, 3))}
    ]


def test_shards_partition_the_jobs_round_robin() -> None:
    cfg = _config()
    for n in (1, 2, 3, 5, 12, 20):
        slices = [shard_jobs(cfg, Shard(i, n)) for i in range(n)]
        keys = [j.key for s in slices for j in s]
        assert sorted(keys) == sorted(j.key for j in cfg.jobs) and len(keys) == len(set(keys)), n
        assert max(map(len, slices)) - min(map(len, slices)) <= 1  # balanced
        for s in slices:  # each slice keeps the config's order
            assert s == [j for j in cfg.jobs if j in s]
    ordered = sorted(j.key for j in cfg.jobs)
    assert {j.key for j in shard_jobs(cfg, Shard(1, 3))} == set(ordered[1::3])  # dealt round-robin
    assert ordered[:3] == [("alpha", n) for n in NOTEBOOKS[:3]]  # sorted by drafter, not config order
    assert shard_jobs(cfg, Shard(19, 20)) == []  # more shards than jobs: an empty shard
    # deterministic: the same config always gives the same slice
    assert shard_jobs(_config(), Shard(0, 3)) == shard_jobs(cfg, Shard(0, 3))


def test_pools_shard_separately() -> None:
    cfg = _config(pools=True)
    gpu = [j for i in (0, 1) for j in shard_jobs(cfg, Shard(i, 2, "gpu"))]
    cpu = [j for i in (0, 1, 2) for j in shard_jobs(cfg, Shard(i, 3, "default"))]
    assert {j.notebook for j in gpu} == GPU and not {j.notebook for j in cpu} & GPU
    assert sorted(j.key for j in gpu + cpu) == sorted(j.key for j in cfg.jobs)
    with pytest.raises(BadArgumentsError, match="no pool 'tpu'"):
        shard_jobs(cfg, Shard(0, 2, "tpu"))


def _part(cfg: RunConfig, shard: Shard, where: str, **meta: Any) -> Part:
    mine = shard_jobs(cfg, shard)
    return Part(
        Path(f"/parts/{where}"),
        {
            "fingerprint": cfg.fingerprint,
            "shard": shard.to_dict(),
            "jobs": [[j.drafter, j.notebook, j.pool] for j in cfg.jobs],
            "executed": [[j.drafter, j.notebook] for j in mine],
            "meta": {"name": "c", "git": "a" * 40, **meta},
            "runs": [{"drafter": j.drafter, "notebook": j.notebook} for j in mine],
        },
    )


def test_merge_refuses_parts_that_are_not_one_run() -> None:
    cfg = _config(pools=True)
    full = [_part(cfg, Shard(i, 3), f"s{i}") for i in (0, 1, 2)]
    assert check_parts(full) == [j.key for j in cfg.jobs]
    pooled = [_part(cfg, Shard(i, 2, "gpu"), f"g{i}") for i in (0, 1)] + [
        _part(cfg, Shard(0, 1, "default"), "c0")
    ]
    assert check_parts(pooled) == [j.key for j in cfg.jobs]

    def refused(parts: list[Part], match: str) -> None:
        with pytest.raises((UnusableInputError, BadArgumentsError), match=match):
            check_parts(parts)

    refused([], "give the output directories")
    refused(full[:2], r"missing shard 2/3 of the whole config \(have 0/3, 1/3\)")
    refused([*full, _part(cfg, Shard(1, 3), "again")], "shard 1/3 given twice")
    refused([full[0], full[0]], "given twice")
    refused([*full[:2], _part(cfg, Shard(3, 4), "s3of4")], "split the whole config differently")
    with pytest.raises(MissingShardsError) as missing:
        check_parts([full[1]], [Path("/parts/killed")])
    assert [m["shard"] for m in missing.value.missing] == ["0/3", "2/3"]
    assert "unfinished (no part.json): /parts/killed" in str(missing.value)
    with pytest.raises(UnusableInputError, match=r"no part\.json"):
        check_parts(full, [Path("/parts/stray")])
    other = copy.deepcopy(full[2])
    other.data["fingerprint"] = "0" * 16
    refused([*full[:2], other], "different run configs")
    newer = _part(cfg, Shard(2, 3), "s2b", git="b" * 40)
    refused([*full[:2], newer], "different code")
    refused(pooled[:2], r"no part ran 6 job\(s\) .*pool default")
    refused([*full, *pooled[:2]], "ran in two parts")


def test_config_fingerprint_tells_configs_apart() -> None:
    jobs = _config().jobs
    a = config_fingerprint({"name": "c", "timeout": 60}, jobs)
    assert a == config_fingerprint({"timeout": 60, "name": "c"}, jobs)  # key order does not matter
    assert a != config_fingerprint({"name": "c", "timeout": 61}, jobs)
    assert a != config_fingerprint({"name": "c", "timeout": 60}, jobs[:-1])


def test_comparable_ignores_only_timings() -> None:
    run = {
        "drafter": "d",
        "notebook": "n",
        "duration_s": 1.0,
        "attempts": 2,
        "metrics": {"acceptance_length": 3.0, "tokens_per_s": 9.0},
    }
    a: dict[str, Any] = {
        "name": "x",
        "wall_s": 1.0,
        "generated": "t1",
        "workers": 3,
        "machine": {"cpus": 2},
        "runs": [run],
    }
    b = copy.deepcopy(a) | {"wall_s": 9.0, "generated": "t2", "workers": 6, "shards": [{}], "machine": {}}
    b["runs"][0] |= {"duration_s": 5.0, "attempts": 1}
    b["runs"][0]["metrics"]["tokens_per_s"] = 1.0
    assert comparable(a) == comparable(b)
    b["runs"][0]["metrics"]["acceptance_length"] = 2.9
    assert comparable(a) != comparable(b)
    assert comparable_html('<td><span class="v">9.7</span></td>') == comparable_html(
        '<td><span class="v">1.2</span></td>'
    )


def test_bundle_holds_exactly_the_run_and_is_reproducible(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    for name in (
        "index.html",
        "summary.json",
        "d__n.html",
        "runs/d__n.ipynb",
        "runs/d__n.record.json",
        "stale.html",
    ):
        (out / name).write_text(name)
    summary = {
        "runs": [
            {"html": "d__n.html", "executed_notebook": "runs/d__n.ipynb", "record": "runs/d__n.record.json"},
            {"html": "../outside.html", "executed_notebook": None, "record": "/etc/passwd"},
        ]
    }
    (tmp_path / "outside.html").write_text("no")
    a = write_bundle(out, tmp_path / "nightly 2026.zip", summary)
    with zipfile.ZipFile(a) as zf:
        names = zf.namelist()
        assert names == [
            "nightly_2026/index.html",
            "nightly_2026/summary.json",
            "nightly_2026/d__n.html",
            "nightly_2026/runs/d__n.ipynb",
            "nightly_2026/runs/d__n.record.json",
        ]
        assert zf.read("nightly_2026/d__n.html") == b"d__n.html"
    first = a.read_bytes()
    write_bundle(out, a, summary)
    assert a.read_bytes() == first  # same files, same archive
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nightly 2026.zip", "out", "outside.html"]
