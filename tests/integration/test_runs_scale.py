"""Nightly and cluster runs end to end: shards merged equal a single run, history and trends, bundles."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import zipfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from notebook_builders import run_config, write_notebook
from paths import DEMO, ROOT

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("papermill")
pytest.importorskip("nbconvert")
yaml = pytest.importorskip("yaml")


from eagle3_forensics.cli.main import main  # noqa: E402
from eagle3_forensics.runs.shard import comparable, comparable_html  # noqa: E402

pytestmark = pytest.mark.notebooks

BASELINE = ROOT / "configs" / "demo_baseline.json"
PAYLOAD = "<img src=x onerror=alert(1)>"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "eagle3_forensics", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
        check=False,
    )


def _one_line_error(proc: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert proc.returncode == code, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.scripts += tag == "script"
        self.links += [v for k, v in attrs if k in ("href", "src") and v is not None]


def assert_opens_offline(folder: Path) -> int:
    """Every href/src of every page under ``folder`` is an inline image, an anchor or a file inside it."""
    pages = sorted(folder.rglob("*.html"))
    assert (folder / "index.html") in pages
    checked = 0
    for page in pages:
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        assert parser.scripts == 0, page
        for link in parser.links:
            if link.startswith("data:image/"):
                continue
            parts = urlsplit(link)
            assert not parts.scheme and not parts.netloc, f"{page.name}: {link}"
            if not parts.path:
                continue  # an anchor in the same page
            target = (page.parent / unquote(parts.path)).resolve()
            assert target.is_file() and target.is_relative_to(folder.resolve()), f"{page.name}: {link}"
            checked += 1
    return checked


# -- shards merged equal a single run ----------------------------------------------------------------


def _demo_config(
    tmp: Path, name: str = "demo-shards", drafters: tuple[str, ...] = ("healthy", "d2t_absolute")
) -> Path:
    data = {
        "name": name,
        "timeout": 120,
        "workers": 2,
        "env": {"OMP_NUM_THREADS": "1"},
        "parameters": {"target": str(DEMO / "target")},
        "notebooks": {
            # the demo's own triage settings: the demo baseline holds its numbers
            "00_triage": {
                "engine": "all",
                "prompts": str(DEMO / "prompts.jsonl"),
                "max_prompts": 4,
                "max_new_tokens": 24,
                "k": 3,
                "device": "cpu",
                "ids": str(DEMO / "corpus_ids.safetensors"),
            },
            "01_checkpoint_keys": {"engine": "all"},
        },
        # three jobs, so each of three shards runs one: healthy × 00, 01 and d2t_absolute × 01
        "drafters": {
            d: {
                "checkpoint": str(DEMO / "drafters" / d),
                **({} if d == "healthy" else {"notebooks": ["01_checkpoint_keys"]}),
            }
            for d in drafters
        },
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.timeout(600)
def test_three_shards_merged_equal_a_single_run(tmp_path: Path) -> None:
    cfg = _demo_config(tmp_path)
    # the shards run at once, each in its own process, as a cluster's array job would run them
    shards = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "eagle3_forensics",
                "run",
                "--config",
                str(cfg),
                "--out",
                str(tmp_path / f"part{i}"),
                "--shard",
                f"{i}/3",  # 0-based, as `--shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT` gives
                "--workers",
                "1",
                "--no-progress",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        for i in (0, 1, 2)
    ]
    for p in shards:
        output, _ = p.communicate(timeout=400)
        assert p.returncode == 0, output[-3000:]
    parts = [str(tmp_path / f"part{i}") for i in (0, 1, 2)]
    executed = [json.loads((Path(p) / "part.json").read_text())["executed"] for p in parts]
    assert [len(e) for e in executed] == [1, 1, 1]  # 3 jobs dealt round-robin
    assert not (Path(parts[0]) / "index.html").exists()  # the index and the gate belong to the merge

    single = tmp_path / "single"
    assert (
        main(
            ["run", "--config", str(cfg), "--out", str(single), "--no-progress", "--baseline", str(BASELINE)]
        )
        == 0
    )

    merged = tmp_path / "merged"
    bundle = tmp_path / "share" / "nightly.zip"
    proc = _cli(
        "merge-runs",
        *parts,
        "--out",
        str(merged),
        "--baseline",
        str(BASELINE),
        "--bundle",
        str(bundle),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert (
        result["schema"] == "eagle3-forensics/merge-runs/1"
        and result["exit_code"] == 0
        and result["error"] is None
    )
    assert result["ok"] == 3 and result["failed"] == 0 and result["gate"]["passed"]
    assert [p["shard"] for p in result["parts"]] == ["0/3", "1/3", "2/3"]

    a = json.loads((single / "summary.json").read_text())
    b = json.loads((merged / "summary.json").read_text())
    assert comparable(a) == comparable(b)  # identical, timings aside
    assert a["gate"]["passed"] and b["gate"] == a["gate"]
    assert [(r["drafter"], r["notebook"]) for r in b["runs"]] == [
        (r["drafter"], r["notebook"]) for r in a["runs"]
    ]
    healthy = [
        (x, y)
        for x, y in zip(a["runs"], b["runs"], strict=True)
        if x["drafter"] == "healthy" and x["metrics"]
    ]
    assert [y["metrics"]["acceptance_length"] for x, y in healthy] == [
        x["metrics"]["acceptance_length"] for x, y in healthy
    ]
    assert healthy and healthy[0][0]["metrics"]["acceptance_length"] > 2.5
    index_a, index_b = (single / "index.html").read_text(), (merged / "index.html").read_text()
    assert comparable_html(index_a) == comparable_html(index_b)
    assert index_a != index_b and "merged from 3 shards" in index_b  # the masked parts are only timings
    for r in b["runs"]:
        for key in ("html", "executed_notebook", "record"):
            assert (merged / r[key]).is_file()

    # the bundle opens offline: every link resolves inside the unpacked archive
    with zipfile.ZipFile(bundle) as zf:
        names = zf.namelist()
        assert all(n.startswith("nightly/") for n in names) and "nightly/index.html" in names
        zf.extractall(tmp_path / "unpacked")
    folder = tmp_path / "unpacked" / "nightly"
    assert assert_opens_offline(folder) >= 1 + 3 + 3  # summary.json, 3 reports, 3 links back to the index
    assert json.loads((folder / "summary.json").read_text()) == b

    # parts that do not make one run are refused with one line and exit 2
    line = _one_line_error(_cli("merge-runs", *parts[:2], "--out", str(tmp_path / "m")))
    assert "missing shard 2/3" in line and "re-run: eagle3-forensics run --config" in line
    proc = _cli("merge-runs", *parts[:2], "--out", str(tmp_path / "m"), "--json")
    missing = json.loads(proc.stdout)["missing"]
    assert proc.returncode == 2 and [m["shard"] for m in missing] == ["2/3"]
    rerun = ["eagle3-forensics", "run", "--config", str(cfg), "--out", str(tmp_path / "part2")]
    assert missing[0]["command"] == shlex.join([*rerun, "--shard", "2/3", "--workers", "1", "--no-progress"])
    line = _one_line_error(_cli("merge-runs", *parts, parts[1], "--out", str(tmp_path / "m")))
    assert "given twice" in line
    other = _demo_config(tmp_path, name="other", drafters=("healthy",))
    proc = _cli(
        "run", "--config", str(other), "--out", str(tmp_path / "other3"), "--shard", "2/3", "--no-progress"
    )
    assert proc.returncode == 0, proc.stderr  # 2 jobs, 3 shards: an empty one, nothing executed
    proc = _cli("merge-runs", *parts[:2], str(tmp_path / "other3"), "--out", str(tmp_path / "m"), "--json")
    assert "parts come from different run configs" in _one_line_error(proc)
    err = json.loads(proc.stdout)
    assert err["schema"] == "eagle3-forensics/merge-runs/1" and err["exit_code"] == 2
    assert "different run configs" in err["error"]["message"]
    line = _one_line_error(_cli("merge-runs", str(single), "--out", str(tmp_path / "m")))
    assert "no part.json" in line
    line = _one_line_error(
        _cli(
            "run",
            "--config",
            str(cfg),
            "--out",
            str(tmp_path / "x"),
            "--shard",
            "0/3",
            "--history",
            str(tmp_path / "h"),
        )
    )
    assert "--history applies to the whole run" in line
    line = _one_line_error(_cli("merge-runs", *parts, "--out", parts[0]))
    assert "is one of the parts" in line


# -- history over three runs ---------------------------------------------------------------------------

RECORDS = """
from eagle3_forensics.runs.record import record
record("verdict", "healthy" if not errors else "broken")
record("counts", {"error": errors, "warning": 0, "info": 0})
record("findings", [{"code": "D2T_ABSOLUTE", "severity": "error", "engine": "vllm"}] if errors else [])
record("acceptance", {"acceptance_length": acceptance, "per_position": [acceptance - 1.0, 0.5]})
print("done")
"""


def _night(tmp: Path, acceptance: float, errors: int) -> Path:
    nbs = tmp / "nbs"
    if not nbs.is_dir():
        nbs.mkdir()
        write_notebook(
            nbs / "01_records.ipynb",
            ("parameters", "checkpoint = None\nacceptance = 2.0\nerrors = 0"),
            ("code", RECORDS),
        )
        (tmp / "ckpt").mkdir()
    drafters = {
        PAYLOAD: {"checkpoint": str(tmp / "ckpt"), "parameters": {"acceptance": acceptance, "errors": errors}}
    }
    data = run_config(nbs, ["01_records"], drafters, name="nightly")
    path = tmp / "nightly.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


@pytest.mark.timeout(300)
def test_history_over_three_runs_renders_the_trend(tmp_path: Path) -> None:
    hist = tmp_path / "history"

    def night(n: int, acceptance: float, errors: int, *extra: str) -> tuple[int, Path]:
        out = tmp_path / f"night{n}"
        cfg = _night(tmp_path, acceptance, errors)
        rc = main(
            ["run", "--config", str(cfg), "--out", str(out), "--no-progress", "--history", str(hist), *extra]
        )
        return rc, out

    rc, _ = night(1, 2.0, 0)
    assert rc == 0
    (first,) = sorted(hist.glob("*.json"))
    first_bytes = first.read_bytes()
    # damaged entries (a copy cut short, another tool's file) are reported and skipped, never fatal
    (hist / "20000101T000000Z_deadbeef.json").write_text(first_bytes.decode()[:200])
    (hist / "20000102T000000Z_deadbeef.json").write_text(
        json.dumps({"schema": "something/else/1", "runs": []})
    )

    rc, out2 = night(2, 1.5, 1, "--gate-window", "5")
    assert rc == 1  # below the median of the last run, and a new error finding
    s2 = json.loads((out2 / "summary.json").read_text())
    problems = [p["message"] for p in s2["gate"]["problems"]]
    assert "acceptance length 1.500 < median of last 1 run 2.000 − 0.1" in problems
    assert any(p.startswith("new error finding D2T_ABSOLUTE") for p in problems)
    assert s2["runs"][0]["change"]["acceptance_length"] == -0.5  # against last night, from the history
    assert len(s2["history"]["skipped"]) == 2

    rc, out3 = night(3, 2.0, 0, "--gate-window", "2", "--bundle", str(tmp_path / "night3.zip"))
    assert rc == 0  # median of 2.0 and 1.5 is 1.75: 2.0 is better, a note
    s3 = json.loads((out3 / "summary.json").read_text())
    assert s3["gate"]["passed"] and any(
        "> median of last 2 runs 1.750" in n["message"] for n in s3["gate"]["notes"]
    )
    entries = sorted(p.name for p in hist.glob("*.json") if not p.name.startswith("2000"))
    assert len(entries) == 3 and first.read_bytes() == first_bytes  # appended, never rewritten
    assert s3["history"]["entry"] + ".json" == entries[-1]
    assert json.loads((hist / entries[-1]).read_text()) == s3

    page = (out3 / "index.html").read_text()
    trend = page.split('<section class="trend">')[1]
    assert "Trend: the last 3 runs" in trend
    assert trend.count('src="data:image/png;base64,') == 2  # acceptance length, per position
    assert "1.500" in trend and "2.000" in trend
    rows = trend.split("Findings that appeared or went away")[1]
    assert rows.count("D2T_ABSOLUTE") == 2 and "appeared" in rows and "went away" in rows
    assert "(this run)" in rows.split("went away")[0].rsplit("<tr>", 1)[1]
    assert "2 history entries skipped" in trend and "20000101T000000Z_deadbeef.json" in trend
    assert PAYLOAD not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<script" not in page and "Content-Security-Policy" in page
    with zipfile.ZipFile(tmp_path / "night3.zip") as zf:
        zf.extractall(tmp_path / "unpacked")
    assert assert_opens_offline(tmp_path / "unpacked" / "night3") >= 3

    # `history DIR --json`: the series, the changes, the skipped entries
    proc = _cli("history", str(hist), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["schema"] == "eagle3-forensics/history/1" and data["exit_code"] == 0 and data["error"] is None
    (series,) = data["series"]
    assert series["drafter"] == PAYLOAD and [p["acceptance_length"] for p in series["points"]] == [
        2.0,
        1.5,
        2.0,
    ]
    assert [p["per_position"] for p in series["points"]] == [[1.0, 0.5], [0.5, 0.5], [1.0, 0.5]]
    assert [(c["code"], c["change"]) for c in data["findings_changes"]] == [
        ("D2T_ABSOLUTE", "appeared"),
        ("D2T_ABSOLUTE", "went away"),
    ]
    assert {w["file"] for w in data["warnings"]} == {
        "20000101T000000Z_deadbeef.json",
        "20000102T000000Z_deadbeef.json",
    }
    proc = _cli("history", str(hist), "--last", "1", "--drafter", PAYLOAD)
    assert proc.returncode == 0 and "2.000" in proc.stdout and "1.500" not in proc.stdout
    # only the change in the last run (found against the run before it, outside the window)
    assert proc.stdout.count("D2T_ABSOLUTE") == 1 and "went away" in proc.stdout
    assert "skipped entries" in proc.stdout and "warning: history entry" in proc.stderr
    proc = _cli("history", str(hist), "--drafter", "nobody", "--json")
    assert proc.returncode == 2 and json.loads(proc.stdout)["error"]["code"] == "BAD_ARGUMENTS"
    assert "nobody" in _one_line_error(_cli("history", str(hist), "--drafter", "nobody"))
    assert "no history directory" in _one_line_error(_cli("history", str(tmp_path / "none")))


def test_bundle_and_window_options_are_checked_before_running(tmp_path: Path) -> None:
    cfg = _night(tmp_path, 2.0, 0)
    for extra, message in (
        (["--bundle", str(tmp_path / "r.tar")], "must end in .zip"),
        (["--gate-window", "3"], "give --history"),
        (["--history", str(tmp_path), "--gate-window", "0"], "at least 1"),
        (["--shard", "2/2"], "I = N is the old 1-based form; shards count from 0"),
        (["--shard", "tpu:1/2"], "no pool 'tpu'"),
    ):
        line = _one_line_error(_cli("run", "--config", str(cfg), "--out", str(tmp_path / "o"), *extra))
        assert message in line, (extra, line)
    assert not (tmp_path / "o").exists()  # refused before anything ran

    # pools: a config groups notebooks; `--shard POOL:I/N` slices one pool
    data = yaml.safe_load(cfg.read_text())
    cfg.write_text(yaml.safe_dump({**data, "pools": {"gpu": ["01_records"]}}, allow_unicode=True))
    proc = _cli("run", "--config", str(cfg), "--out", str(tmp_path / "cpu1"), "--shard", "default:0/1")
    assert proc.returncode == 0, proc.stderr
    part = json.loads((tmp_path / "cpu1" / "part.json").read_text())
    assert part["executed"] == [] and part["jobs"] == [[PAYLOAD, "01_records", "gpu"]]
    cfg.write_text(yaml.safe_dump({**data, "pools": {"gpu": ["02_nope"]}}, allow_unicode=True))
    line = _one_line_error(
        _cli("run", "--config", str(cfg), "--out", str(tmp_path / "o"), "--shard", "gpu:0/1")
    )
    assert "pools.gpu names 02_nope" in line
