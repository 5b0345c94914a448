"""The notebook runner: config, failures, records, the regression gate, static explorers, the papermill CLI."""

from __future__ import annotations

import copy
import html
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from builders import TENSOR_PAYLOAD
from notebook_builders import run_config, write_notebook
from paths import DEMO, ROOT

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("papermill")
pytest.importorskip("nbconvert")
pytest.importorskip("pandas")
yaml = pytest.importorskip("yaml")


from eagle3_forensics.cli.main import main  # noqa: E402
from eagle3_forensics.demo import world as demo  # noqa: E402
from eagle3_forensics.errors import UnusableInputError  # noqa: E402
from eagle3_forensics.runs.kernel import kernel_env  # noqa: E402
from eagle3_forensics.runs.report import index_html, render_html  # noqa: E402
from eagle3_forensics.runs.runner import (  # noqa: E402
    baseline_from_runs,
    config_from_dict,
    evaluate_gate,
    load_baseline,
    load_config,
    notebook_parameters,
)
from eagle3_forensics.views.widgets import STATIC_NOTE  # noqa: E402

pytestmark = pytest.mark.notebooks

NOTEBOOK_DIR = ROOT / "notebooks"
CONFIG = ROOT / "configs" / "demo.yaml"
BASELINE = ROOT / "configs" / "demo_baseline.json"
PAYLOAD = "<img src=x onerror=alert(1)>"


# -- the demo configuration ----------------------------------------------------------------------


def _t2d_bytes(drafter: Path) -> bytes:
    """The drafter's stored t2d (the draft vocabulary selection), read header-first."""
    from safetensors import safe_open

    for shard in sorted(drafter.glob("*.safetensors")):
        with safe_open(str(shard), "np") as f:
            for key in f.keys():  # noqa: SIM118 - safe_open is not iterable
                if key.split(".")[-1] == "t2d":
                    return bytes(f.get_tensor(key).tobytes())
    raise AssertionError(f"{drafter}: no t2d")


def test_demo_config_covers_every_drafter_and_notebook() -> None:
    cfg = load_config(CONFIG)
    notebooks = sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb"))
    assert sorted(cfg.notebooks) == notebooks
    assert sorted(cfg.drafters) == sorted(demo.VARIANTS)
    # 05 (offline probe over the demo dumps) runs for the healthy drafter and one that collapses;
    # 03 (corpus coverage of the selection) once per distinct t2d, for the first drafter that holds it
    offline = {"healthy", "d2t_absolute"}
    selections: dict[bytes, str] = {}
    for d in cfg.drafters:  # config order: healthy first
        selections.setdefault(_t2d_bytes(DEMO / "drafters" / d), d)
    coverage = set(selections.values())
    # the demo drafters share one selection but vocab_no_think_end's (no </think>): 03 runs for both
    assert coverage == {"healthy", "vocab_no_think_end"}
    assert {(j.drafter, j.notebook) for j in cfg.jobs} == {
        (d, n)
        for d in demo.VARIANTS
        for n in notebooks
        if (n != "05_offline_probe" or d in offline) and (n != "03_token_histograms" or d in coverage)
    }
    for job in cfg.jobs:
        assert (
            Path(job.parameters["checkpoint"]).is_absolute() and Path(job.parameters["checkpoint"]).is_dir()
        )
        assert set(job.parameters) <= set(notebook_parameters(job.path)), job
        assert job.parameters["target"] == str(DEMO / "target")
    assert cfg.timeout > 0 and cfg.workers >= 1


def test_demo_baseline_expects_the_demo_findings() -> None:
    base = load_baseline(BASELINE)
    assert set(base["drafters"]) == set(demo.VARIANTS)
    for variant, codes in demo.EXPECTED_FINDINGS.items():
        entry = base["drafters"][variant]
        assert set(codes) <= set(entry["expected_findings"]), variant
        assert entry["acceptance_length"]["tolerance"] > 0
        assert len(entry["per_position"]["values"]) == 3
    # the healthy drafter accepts; the broken maps accept nothing
    assert base["drafters"]["healthy"]["acceptance_length"]["value"] > 2.5
    assert base["drafters"]["d2t_absolute"]["acceptance_length"]["value"] < 1.2


def test_config_errors_are_caught_before_running(tmp_path: Path) -> None:
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    write_notebook(nbs / "01_a.ipynb", ("parameters", "checkpoint = None\nvalue = 1"))
    base = {"notebooks_dir": str(nbs), "drafters": {"d": str(tmp_path)}}
    cfg = config_from_dict({**base, "notebooks": {"01_a": {"value": 2}}, "parameters": {"unused": 1}})
    assert cfg.jobs[0].parameters == {"checkpoint": str(tmp_path), "value": 2}  # globals only where declared
    with pytest.raises(UnusableInputError, match="no parameter"):
        config_from_dict(
            {**base, "notebooks": {"01_a": {"valeu": 2}}}
        )  # a typo papermill would only warn about
    with pytest.raises(UnusableInputError, match="not found"):
        config_from_dict({**base, "notebooks": ["02_missing"]})
    with pytest.raises(UnusableInputError, match="unknown key"):
        config_from_dict({**base, "notebooks": ["01_a"], "wokers": 2})
    with pytest.raises(UnusableInputError, match="no listed notebook"):
        config_from_dict(
            {
                **base,
                "notebooks": ["01_a"],
                "drafters": {"d": {"checkpoint": str(tmp_path), "parameters": {"k": 3}}},
            }
        )
    with pytest.raises(UnusableInputError, match="workers must be a number"):
        config_from_dict({**base, "notebooks": ["01_a"], "workers": "many"})
    with pytest.raises(UnusableInputError, match=r"gate.tolerance.acceptance_length must be a number"):
        config_from_dict({**base, "notebooks": ["01_a"], "gate": {"tolerance": {"acceptance_length": [1]}}})
    with pytest.raises(UnusableInputError, match="notebooks must be a list of names"):
        config_from_dict(
            {**base, "notebooks": ["01_a"], "drafters": {"d": {"checkpoint": "x", "notebooks": 3}}}
        )


def test_a_malformed_baseline_fails_at_load(tmp_path: Path) -> None:
    """Not after every notebook ran: the gate reads numbers the load already checked."""
    data = json.loads(BASELINE.read_text(encoding="utf-8"))
    data["drafters"]["healthy"]["per_position"]["tolerance"] = ["wide"]
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(
        UnusableInputError, match=r"drafters.healthy.per_position.tolerance\[0\] must be a number"
    ):
        load_baseline(bad)


# -- a deliberately failing notebook -------------------------------------------------------------

OK_SOURCE = """
from eagle3_forensics.runs.record import record
record("verdict", "healthy")
record("counts", {"error": errors, "warning": 0, "info": 0})
record("findings", [{"code": "D2T_ABSOLUTE", "severity": "error", "engine": "vllm"}] if errors else [])
record("acceptance", {"acceptance_length": acceptance, "per_position": [acceptance - 1.0, 0.5]})
print("done")
"""


def _fake_world(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    params = ("parameters", "checkpoint = None\nacceptance = 2.0\nerrors = 0")
    write_notebook(nbs / "01_records.ipynb", ("md", "# records"), params, ("code", OK_SOURCE))
    write_notebook(
        nbs / "02_fails.ipynb",
        ("md", "# fails"),
        params,
        ("code", "print('before the failure')"),
        ("code", 'raise ValueError("deliberate failure <b>here</b>")'),
    )
    (tmp_path / "good").mkdir()
    drafters = {
        "good": "good",
        PAYLOAD: {"checkpoint": "good", "parameters": {"acceptance": 1.5, "errors": 1}},
    }
    data = run_config(nbs, ["01_records", "02_fails"], drafters, name="failing", workers=2)
    return nbs, data


@pytest.mark.timeout(240)
def test_failing_notebook_is_reported_and_the_others_complete(tmp_path: Path) -> None:
    _, data = _fake_world(tmp_path)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(data))
    base = baseline_from_runs(
        [
            {
                "drafter": "good",
                "notebook": "01_records",
                "codes": [],
                "metrics": {"acceptance_length": 2.0, "per_position": [1.0, 0.5]},
            },
            {
                "drafter": PAYLOAD,
                "notebook": "01_records",
                "codes": [],
                "metrics": {"acceptance_length": 2.0, "per_position": [1.0, 0.5]},
            },
        ]
    )
    (tmp_path / "baseline.json").write_text(json.dumps(base))
    out = tmp_path / "out"
    rc = main(
        [
            "run",
            "--config",
            str(tmp_path / "run.yaml"),
            "--out",
            str(out),
            "--no-progress",
            "--baseline",
            str(tmp_path / "baseline.json"),
        ]
    )
    assert rc == 1
    summary = json.loads((out / "summary.json").read_text())
    runs = {(r["drafter"], r["notebook"]): r for r in summary["runs"]}
    assert len(runs) == 4 and summary["failed"] == 2 and summary["exit_code"] == 1
    for drafter in ("good", PAYLOAD):
        ok, bad = runs[(drafter, "01_records")], runs[(drafter, "02_fails")]
        assert ok["status"] == "ok" and ok["error"] is None
        assert ok["metrics"]["acceptance_length"] in (2.0, 1.5)
        assert bad["status"] == "failed"
        assert bad["error_detail"]["ename"] == "ValueError"
        assert "deliberate failure" in bad["error"]
        assert (out / bad["html"]).is_file()  # failed runs are rendered too, with papermill's banner
        assert "An Exception was encountered" in (out / bad["html"]).read_text()
        assert bad["gate"]["status"] == "fail"
    # the gate: the good drafter's records pass; the other one dropped and has a new error finding
    assert runs[("good", "01_records")]["gate"]["status"] == "pass"
    problems = " | ".join(runs[(PAYLOAD, "01_records")]["gate"]["problems"])
    assert "acceptance length 1.500 < baseline 2.000" in problems
    assert "new error finding D2T_ABSOLUTE [vllm]" in problems
    kinds = {p["kind"] for p in summary["gate"]["problems"]}
    assert kinds == {"notebook_failed", "acceptance_length", "per_position", "new_error_finding"}
    index = (out / "index.html").read_text()
    assert "Regression gate FAILED" in index
    # both drafters fail the gate in the drafter table; three of the four runs fail it in the run table
    drafters, _, run_table = index.partition('id="runs"')
    assert drafters.count('class="row-fail"') == 2 and run_table.count('class="row-fail"') == 3
    assert "deliberate failure &lt;b&gt;here&lt;/b&gt;" in index
    for page in [out / "index.html", *out.glob("*.html")]:
        text = page.read_text()
        assert PAYLOAD not in text and "<b>here</b>" not in text, page.name
        assert "<script" not in text, page.name


def test_no_baseline_only_failures_gate(tmp_path: Path) -> None:
    runs: list[dict[str, Any]] = [
        {"drafter": "a", "notebook": "n", "status": "ok", "codes": ["X"], "findings": None, "metrics": {}}
    ]
    gate = evaluate_gate(runs, None)
    assert gate.passed and runs[0]["gate"]["status"] == "not gated"


# -- the regression gate on its own --------------------------------------------------------------


def _run(
    drafter: str = "d",
    notebook: str = "04",
    al: float = 3.0,
    pp: list[float] | None = None,
    findings: list[dict[str, Any]] | None = None,
    status: str = "ok",
) -> dict[str, Any]:
    fs = findings or []
    return {
        "drafter": drafter,
        "notebook": notebook,
        "status": status,
        "error": None if status == "ok" else "boom",
        "verdict": "healthy",
        "codes": [f["code"] for f in fs],
        "findings": fs,
        "counts": {},
        "metrics": {"acceptance_length": al, "per_position": pp if pp is not None else [0.9, 0.7, 0.4]},
    }


def test_gate_metrics_tolerances_and_findings() -> None:
    base = baseline_from_runs(
        [_run(findings=[{"code": "D2T_MISSING", "severity": "error", "engine": "vllm"}])],
        {"acceptance_length": 0.1, "per_position": 0.05},
    )
    assert base["drafters"]["d"]["expected_findings"] == ["D2T_MISSING"]
    expected = [{"code": "D2T_MISSING", "severity": "error", "engine": "vllm"}]

    def gate(run: dict[str, Any]) -> list[str]:
        g = evaluate_gate([run], base)
        assert g.passed == (not g.problems)
        return [p.kind for p in g.problems]

    assert gate(_run(findings=expected)) == []
    assert gate(_run(al=2.95, pp=[0.88, 0.68, 0.38], findings=expected)) == []  # within tolerance
    assert gate(_run(al=2.85, findings=expected)) == ["acceptance_length"]
    assert gate(_run(pp=[0.9, 0.6, 0.4], findings=expected)) == ["per_position"]
    assert gate(_run(pp=[0.9, 0.7], findings=expected)) == ["per_position"]  # K changed
    assert gate(_run(al=3.5, findings=expected)) == []  # better is a note, not a failure
    new_error = [*expected, {"code": "D2T_ABSOLUTE", "severity": "error", "engine": "sglang"}]
    assert gate(_run(findings=new_error)) == ["new_error_finding"]
    new_info = [*expected, {"code": "CONFIG_UNREADABLE_BY_ENGINE", "severity": "info", "engine": "eagle"}]
    assert gate(_run(findings=new_info)) == []
    assert gate(_run(status="failed", findings=expected)) == ["notebook_failed"]
    gone = _run()
    g = evaluate_gate([gone], base)
    assert g.passed and [n.message for n in g.notes] == [
        "expected in the baseline, reported by none of its notebooks: D2T_MISSING"
    ]
    # judged per drafter: a notebook that does not report another notebook's finding is no news
    g = evaluate_gate([_run(notebook="01"), _run(notebook="06", findings=expected)], base)
    assert g.passed and g.notes == []
    g = evaluate_gate([_run(notebook="01"), _run(notebook="06", status="failed")], base)
    assert not any(n.kind == "finding_gone" for n in g.notes)  # a failure is no finding gone
    other = _run(drafter="new")
    g = evaluate_gate([other], base)
    assert g.passed and other["gate"]["notes"] == ["no baseline entry for this drafter"]


def test_gate_per_notebook_values_and_summary_as_baseline(tmp_path: Path) -> None:
    runs = [_run(notebook="00", al=2.9, pp=[0.7, 0.6, 0.5]), _run(notebook="04", al=3.0)]
    base = baseline_from_runs(runs)
    entry = base["drafters"]["d"]
    assert entry["acceptance_length"]["value"] == 2.9
    assert entry["by_notebook"]["04"]["acceptance_length"]["value"] == 3.0
    assert evaluate_gate(copy.deepcopy(runs), base).passed
    # a previous run's summary.json works as a baseline too
    (tmp_path / "summary.json").write_text(
        json.dumps({"schema": "eagle3-forensics/run-summary/1", "runs": runs})
    )
    from_summary = load_baseline(tmp_path)
    assert from_summary["drafters"]["d"]["by_notebook"]["04"]["acceptance_length"]["value"] == 3.0
    worse = [_run(notebook="00", al=2.9, pp=[0.7, 0.6, 0.5]), _run(notebook="04", al=2.5)]
    g = evaluate_gate(worse, from_summary)
    assert [(p.notebook, p.kind) for p in g.problems] == [("04", "acceptance_length")]
    page = index_html(
        {"runs": worse, "gate": g.to_dict(), "name": PAYLOAD, "drafters": ["d"], "notebooks": ["00"]}
    )
    assert "Regression gate FAILED" in page and "acceptance length 2.500 &lt; baseline 3.000" in page
    assert PAYLOAD not in page


# -- real notebooks: triage through the runner, static explorers ---------------------------------


@pytest.mark.timeout(300)
def test_triage_through_the_runner_is_static_and_records(tmp_path: Path) -> None:
    data = {
        "name": "triage",
        "workers": 2,
        "timeout": 120,
        "env": {"OMP_NUM_THREADS": "1"},
        "parameters": {"target": str(DEMO / "target")},
        "notebooks": {
            "00_triage": {
                "prompts": str(DEMO / "prompts.jsonl"),
                "max_prompts": 1,
                "max_new_tokens": 8,
                "device": "cpu",
                "ids": str(DEMO / "corpus_ids.safetensors"),
                "lookup": [" the", 16, "d:3"],
            }
        },
        "drafters": {
            "healthy": str(DEMO / "drafters" / "healthy"),
            "d2t_absolute": str(DEMO / "drafters" / "d2t_absolute"),
        },
    }
    out = tmp_path / "out"
    rc = main_run(data, tmp_path, out, "--write-baseline", str(tmp_path / "b.json"))
    assert rc == 0
    runs = {r["drafter"]: r for r in json.loads((out / "summary.json").read_text())["runs"]}
    healthy, broken = runs["healthy"], runs["d2t_absolute"]
    assert healthy["status"] == broken["status"] == "ok"
    assert healthy["verdict"] == "healthy" and broken["verdict"] == "broken"
    assert "D2T_ABSOLUTE" in broken["codes"]
    assert {f["severity"] for f in broken["findings"] if f["code"] == "D2T_ABSOLUTE"} == {"error"}
    assert healthy["metrics"]["acceptance_length"] > broken["metrics"]["acceptance_length"]
    assert len(healthy["metrics"]["per_position"]) == 3
    base = json.loads((tmp_path / "b.json").read_text())
    assert "D2T_ABSOLUTE" in base["drafters"]["d2t_absolute"]["expected_findings"]
    for r in (healthy, broken):
        nb = nbformat.read(str(out / r["executed_notebook"]), as_version=4)
        assert "widgets" not in nb.metadata  # no widget was created headless
        mimes = {m for c in nb.cells if c.cell_type == "code" for o in c.outputs for m in o.get("data", {})}
        assert "application/vnd.jupyter.widget-view+json" not in mimes
        page = (out / r["html"]).read_text()
        # the per-position chart; d2t_absolute accepts nothing: a line says so instead of an empty frame
        assert ("image/png" in mimes) is (r is healthy) and ("No per-position chart" in page) is (r is broken)
        assert "static view" in page and "Tensor / key browser" in page and "token lookup" in page
        assert "<script" not in page and "from eagle3_forensics" not in page
    page = (out / broken["html"]).read_text()
    assert "✗" in page  # the token lookup shows engines mapping draft ids to the wrong targets
    assert (
        "✗"
        not in (out / healthy["html"]).read_text().split("Draft ↔ target token lookup")[1].split("Probe")[0]
    )
    # gate against a doctored baseline: healthy's acceptance raised, D2T_ABSOLUTE no longer expected
    base["drafters"]["healthy"]["acceptance_length"]["value"] += 1.0
    base["drafters"]["d2t_absolute"]["expected_findings"].remove("D2T_ABSOLUTE")
    summary = json.loads((out / "summary.json").read_text())
    gate = evaluate_gate(summary["runs"], base)
    assert sorted(p.kind for p in gate.problems) == ["acceptance_length", "new_error_finding"]


def main_run(data: dict[str, Any], tmp: Path, out: Path, *extra: str) -> int:
    cfg = tmp / "run.yaml"
    cfg.write_text(yaml.safe_dump(data, allow_unicode=True))
    return main(["run", "--config", str(cfg), "--out", str(out), "--no-progress", *extra])


def test_render_drops_widget_views_and_state(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("w")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={
                "application/vnd.jupyter.widget-view+json": {
                    "model_id": "abc",
                    "version_major": 2,
                    "version_minor": 0,
                },
                "text/plain": "VBox(children=(...))",
            },
        ),
        nbformat.v4.new_output(
            "display_data",
            data={
                "application/vnd.jupyter.widget-view+json": {
                    "model_id": "def",
                    "version_major": 2,
                    "version_minor": 0,
                },
                "text/html": "<p>static fallback</p>",
                "text/plain": "Explorer",
            },
        ),
        nbformat.v4.new_output("display_data", data={"application/javascript": "document.title='x'"}),
    ]
    nb.cells = [cell]
    nb.metadata["widgets"] = {
        "application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2, "version_minor": 0}
    }
    src = tmp_path / "w.ipynb"
    nbformat.write(nb, str(src))
    render_html(src, tmp_path / "w.html", "w")
    page = (tmp_path / "w.html").read_text()
    assert "static fallback" in page
    assert "VBox" not in page and "widget-view" not in page and "widget-state" not in page
    assert "<script" not in page and "document.title" not in page


# -- the papermill CLI on every notebook ---------------------------------------------------------

CLI_PARAMS: dict[str, list[str]] = {
    "00_triage": ["-p", "max_prompts", "1", "-p", "max_new_tokens", "8", "-p", "device", "cpu"],
    "01_checkpoint_keys": ["-p", "engine", "sglang"],
    "02_vocab_mapping": [],
    "03_token_histograms": ["-p", "top_n", "5"],
    "04_accept_rate_probe": ["-p", "max_new_tokens", "8", "-p", "variants", "None", "-p", "device", "cpu"],
    "05_offline_probe": ["-p", "data", "../data/demo/dumps/speculators", "-p", "prep", "None"],
    "06_why_low_acceptance": ["-p", "max_prompts", "1", "-p", "max_new_tokens", "8", "-p", "device", "cpu"],
}


KERNEL_NEVER_STARTED = "Kernel died before replying to kernel_info"


@pytest.mark.timeout(600)
def test_papermill_cli_runs_every_notebook(tmp_path: Path) -> None:
    notebooks = sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb"))
    assert sorted(CLI_PARAMS) == notebooks, "add the new notebook to CLI_PARAMS (and the README examples)"
    papermill = Path(sys.executable).with_name("papermill")
    env = {**os.environ, **kernel_env(), "OMP_NUM_THREADS": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    env.pop("MPLBACKEND", None)
    drafter = str(DEMO / "drafters" / "d2t_absolute")
    procs = {}
    for name in notebooks:  # all at once: each is mostly kernel start and imports
        cmd = [
            str(papermill),
            str(NOTEBOOK_DIR / f"{name}.ipynb"),
            str(tmp_path / f"{name}.ipynb"),
            "--cwd",
            str(NOTEBOOK_DIR),
            "-k",
            "eagle3-forensics",
            "--no-progress-bar",
            "--execution-timeout",
            "240",
            "-p",
            "checkpoint",
            drafter,
            *CLI_PARAMS[name],
        ]
        procs[name] = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    for name, proc in procs.items():
        output, _ = proc.communicate(timeout=280)
        if proc.returncode != 0 and KERNEL_NEVER_STARTED in output:
            # jupyter_client picks each kernel's five ports in the papermill process and the kernel binds
            # them seconds later, so seven papermills starting at once can race for a port (CI saw it
            # once in ~10 runs). The package's runner retries such a start once (runs.execute); so does this.
            retry = subprocess.run(proc.args, env=env, capture_output=True, text=True, timeout=280)
            output = f"{output}\n--- retried after the kernel died at start ---\n{retry.stdout}{retry.stderr}"
            proc = retry  # type: ignore[assignment]
        # the head holds the kernel's own messages (why it died), the tail papermill's traceback
        assert proc.returncode == 0, f"{name}:\n{output[:2000]}\n[...]\n{output[-3000:]}"
        nb = nbformat.read(str(tmp_path / f"{name}.ipynb"), as_version=4)
        assert nb.metadata["papermill"]["parameters"]["checkpoint"] == drafter
        assert not nb.metadata["papermill"].get("exception")
        # interactive explorers fall back to static output when papermill runs the kernel
        mimes = {m for c in nb.cells if c.cell_type == "code" for o in c.outputs for m in o.get("data", {})}
        assert "application/vnd.jupyter.widget-view+json" not in mimes, name
        html_out = [
            str(o["data"]["text/html"])
            for c in nb.cells
            if c.cell_type == "code"
            for o in c.outputs
            if "text/html" in o.get("data", {})
        ]
        assert any(STATIC_NOTE in h for h in html_out), f"{name}: no explorer's static view"
        assert not any("<script" in h.lower() for h in html_out), name
        problems = [
            o.get("text") or o.get("ename")
            for c in nb.cells
            if c.cell_type == "code"
            for o in c.outputs
            if o.output_type == "error" or o.get("name") == "stderr"
        ]
        assert problems == [], f"{name}: stderr or error output {problems}"


# -- widgets: the interactive layer and its static fallback --------------------------------------


def test_explorers_static_and_interactive() -> None:
    from eagle3_forensics.checks.diagnose import diagnose, inspect_checkpoint
    from eagle3_forensics.views.widgets import (
        tensor_browser,
        tensor_key_table,
        token_lookup,
        token_lookup_data,
    )

    path = DEMO / "drafters" / "speculators_layout"
    d = diagnose(path, target=DEMO / "target")
    ins = inspect_checkpoint(path)
    full = tensor_key_table(d, ins)
    assert len(full) == len(ins.tensors) and set(d.loads) <= set(full.columns)
    assert set(tensor_key_table(d, ins, "LAYERS.0")["name"]) == {
        t.name for t in ins.tensors if "layers.0" in t.name
    }
    assert list(tensor_key_table(d, ins, "re:^d2t$")["name"]) == ["d2t"]
    dropped = tensor_key_table(d, ins, action="dropped")
    first_word = dropped[list(d.loads)].apply(
        lambda col: col.str.split(" ").str[0]
    )  # "dropped (config unreadable)"
    assert len(dropped) > 0 and all((first_word == "dropped").any(axis=1))
    with pytest.raises(ValueError, match="regular expression"):
        tensor_key_table(d, ins, "re:(")

    static = tensor_browser(d, inspection=ins, query="embed", interactive=False)
    bundle = static._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"} and "embed_tokens.weight" in bundle["text/html"]
    live = tensor_browser(d, inspection=ins, interactive=True)
    bundle = live._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and "text/html" in bundle  # fallback kept
    assert type(live.widget).__name__ == "VBox"

    data = token_lookup_data(
        DEMO / "drafters" / "d2t_absolute", DEMO / "target", ids=DEMO / "corpus_ids.safetensors"
    )
    rows = data.rows([" the", 16, "d:3", "9999", "no-such-token-xyz"])
    the = rows[0]
    assert the["draft id"] != "—" and the["stored d2t[i]"] == the["target id"]  # absolute ids stored
    assert the["offset needed"] == the["target id"] - the["draft id"]
    assert the["vllm"].endswith("✗") and the["sglang"].endswith("✗")
    assert rows[2]["draft id"] == 3
    assert 0.9 < (data.coverage or 0) <= 1.0
    healthy = token_lookup_data(DEMO / "drafters" / "healthy", DEMO / "target")
    row = healthy.rows([" the"])[0]
    assert row["vllm"].endswith("✓") and row["sglang"].endswith("✓")
    missing = token_lookup_data(DEMO / "drafters" / "d2t_missing", DEMO / "target").rows([" the"])[0]
    assert missing["vllm"].endswith("✗")  # identity map: draft id i -> target id i
    live = token_lookup(data, interactive=True)
    assert "application/vnd.jupyter.widget-view+json" in live._repr_mimebundle_()


def test_explorers_escape_untrusted_names(hostile_drafter: Path) -> None:
    from eagle3_forensics.views.widgets import tensor_browser, token_lookup

    page = tensor_browser(hostile_drafter, DEMO / "target", interactive=False)._repr_mimebundle_()[
        "text/html"
    ]
    assert TENSOR_PAYLOAD not in page and html.escape(TENSOR_PAYLOAD) in page
    page = token_lookup(
        hostile_drafter, DEMO / "target", queries=[TENSOR_PAYLOAD], interactive=False
    )._repr_mimebundle_()["text/html"]
    assert TENSOR_PAYLOAD not in page and "<img" not in page


def test_changes_against_a_previous_run_are_shown() -> None:
    from eagle3_forensics.runs.runner import changes

    previous = [_run(al=3.0), {**_run(notebook="03"), "metrics": {"coverage": 0.9}}]
    now = [
        _run(
            al=2.5, findings=[{"code": "D2T_ABSOLUTE", "severity": "error", "engine": None}], status="failed"
        ),
        {**_run(notebook="03"), "metrics": {"coverage": 0.95}},
        _run(notebook="05"),
    ]
    changes(now, previous)
    assert now[0]["change"]["acceptance_length"] == -0.5
    assert now[0]["change"]["status"] == "ok → failed" and now[0]["change"]["codes_added"] == ["D2T_ABSOLUTE"]
    assert now[1]["change"]["coverage"] == pytest.approx(0.05)
    assert now[2]["change"] == {"new": True}
    gate = evaluate_gate(now, baseline_from_runs(previous))
    page = index_html({"runs": now, "gate": gate.to_dict()})
    assert (
        "(-0.500 vs previous)" in page and "(-0.500 vs baseline)" in page and "(+0.050 vs previous)" in page
    )
    assert "status ok → failed" in page and "new in this run" in page


@pytest.mark.timeout(120)
def test_explorer_callbacks_in_a_live_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """A frontend's comm message (typing into the filter box) re-renders the explorer's output."""
    import queue
    import re

    from jupyter_client.manager import start_new_kernel

    monkeypatch.setenv("E3F_INTERACTIVE", "1")  # a bare jupyter_client sends no cell metadata: headless
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    km, kc = start_new_kernel(
        kernel_name="python3", extra_arguments=["--IPKernelApp.log_level=CRITICAL"], cwd=str(NOTEBOOK_DIR)
    )
    try:

        def drain(msg_id: str | None = None, quiet: float = 2.0) -> list[dict[str, Any]]:
            got: list[dict[str, Any]] = []
            while True:
                try:
                    m = kc.get_iopub_msg(timeout=60 if msg_id else quiet)
                except queue.Empty:
                    return got
                got.append(m)
                if (
                    msg_id
                    and m["parent_header"].get("msg_id") == msg_id
                    and m["msg_type"] == "status"
                    and m["content"]["execution_state"] == "idle"
                ):
                    return got

        code = (
            "from eagle3_forensics.views.widgets import tensor_browser, token_lookup\n"
            "tb = tensor_browser('../data/demo/drafters/speculators_layout', '../data/demo/target')\n"
            "tl = token_lookup('../data/demo/drafters/d2t_absolute', '../data/demo/target')\n"
            "from eagle3_forensics.views.widgets import probe_controls\n"
            "pc = probe_controls('../data/demo/drafters/healthy', '../data/demo/target',"
            " '../data/demo/prompts.jsonl', max_prompts=1, max_new_tokens=8, device='cpu')\n"
            "display(tb, tl, pc)"
        )
        msgs = drain(kc.execute(code))
        errors = [m["content"] for m in msgs if m["msg_type"] == "error"]
        assert not errors, errors
        shown = [
            m["content"]["data"]
            for m in msgs
            if m["msg_type"] == "display_data"
            and "application/vnd.jupyter.widget-view+json" in m["content"]["data"]
        ]
        assert len(shown) == 3 and all("text/html" in d for d in shown)  # widget + static fallback
        models = {
            m["content"]["comm_id"]: m["content"]["data"]["state"]
            for m in msgs
            if m["msg_type"] == "comm_open"
        }
        texts = [cid for cid, st in models.items() if st.get("_model_name") == "TextModel"]
        assert len(texts) == 2

        def type_into(comm_id: str, value: str) -> list[str]:
            kc.shell_channel.send(
                kc.session.msg(
                    "comm_msg",
                    {
                        "comm_id": comm_id,
                        "data": {"method": "update", "state": {"value": value}, "buffer_paths": []},
                    },
                )
            )
            return [
                m["content"]["data"].get("text/html", "") for m in drain() if m["msg_type"] == "display_data"
            ]

        pages = type_into(texts[0], "embed")
        assert pages and re.search(r"1 of \d+ tensors matching <code>embed</code>", pages[-1])
        pages = type_into(texts[1], " the")
        assert pages and "✗" in pages[-1] and "␣the" in pages[-1]  # the token, its leading space shown
        button = next(cid for cid, st in models.items() if st.get("_model_name") == "ButtonModel")
        kc.shell_channel.send(
            kc.session.msg(
                "comm_msg", {"comm_id": button, "data": {"method": "custom", "content": {"event": "click"}}}
            )
        )
        deadline = time.monotonic() + 90
        pages = []
        while time.monotonic() < deadline and not any("acceptance length" in p for p in pages):
            pages += [
                m["content"]["data"].get("text/html", "")
                for m in drain(quiet=5.0)
                if m["msg_type"] == "display_data"
            ]
        assert any("acceptance length" in p and "<img" in p for p in pages), pages[-1:]
    finally:
        km.shutdown_kernel(now=True)
