"""Notebooks: hygiene of the committed files, papermill runs, the demo report, HTML escaping."""

from __future__ import annotations

import ast
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from builders import DIR_PAYLOAD, TENSOR_PAYLOAD
from paths import DEMO, ROOT

nbformat = pytest.importorskip("nbformat")
papermill = pytest.importorskip("papermill")
pytest.importorskip("nbconvert")
pytest.importorskip("pandas")


from eagle3_forensics.checks.diagnose import diagnose, inspect_checkpoint  # noqa: E402
from eagle3_forensics.demo import world as demo  # noqa: E402
from eagle3_forensics.runs.kernel import KERNEL_NAME, kernel_env  # noqa: E402
from eagle3_forensics.runs.record import ENV_VAR, read_records, record  # noqa: E402
from eagle3_forensics.runs.runner import build_demo_report  # noqa: E402
from eagle3_forensics.views.html import (  # noqa: E402
    findings_html,
    findings_table,
    key_fate_table,
    key_fates_html,
    load_table,
    table_html,
    tensor_table,
    verdict_html,
)
from eagle3_forensics.views.widgets import STATIC_NOTE  # noqa: E402

pytestmark = pytest.mark.notebooks

NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
SOURCES = sorted(p for p in NOTEBOOK_DIR.glob("*.py") if re.fullmatch(r"\d\d_[a-z0-9_]+\.py", p.name))
NB01 = NOTEBOOK_DIR / "01_checkpoint_keys.ipynb"
NB05 = NOTEBOOK_DIR / "05_offline_probe.ipynb"
NB06 = NOTEBOOK_DIR / "06_why_low_acceptance.ipynb"
DISPLAY_NAMES = {"display", "HTML", "print"}


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def _tags(cell: dict) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _code(cell: dict) -> str:
    # IPython magics and shell escapes are not Python; they hold no logic either way
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in cell["source"].splitlines()
    )


# -- hygiene -------------------------------------------------------------------------------------


def test_notebooks_exist() -> None:
    assert NB01 in NOTEBOOKS


def test_every_notebook_has_its_jupytext_source() -> None:
    assert SOURCES, "no notebooks/NN_name.py sources"
    assert [p.stem for p in SOURCES] == [p.stem for p in NOTEBOOKS]


def test_pairs_are_in_sync() -> None:
    """Each committed .ipynb is exactly what scripts/make_notebooks.py makes of its .py."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_notebooks.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("source", SOURCES, ids=_ids(SOURCES))
def test_pair_matches_jupytext_both_ways(source: Path) -> None:
    """jupytext itself agrees: the .ipynb read from the .py has the committed cells (ignoring only
    what jupytext regenerates: cell ids), and the .py written from the committed .ipynb is the
    committed .py (so saving in JupyterLab with jupytext rewrites nothing)."""
    jupytext = pytest.importorskip("jupytext")
    committed = nbformat.read(str(source.with_suffix(".ipynb")), as_version=4)
    text = source.read_text(encoding="utf-8")
    read = jupytext.reads(text, fmt="py:percent")
    assert [(c.cell_type, c.source, c.metadata) for c in read.cells] == [
        (c.cell_type, c.source, c.metadata) for c in committed.cells
    ]
    assert read.metadata["kernelspec"] == committed.metadata["kernelspec"]
    assert committed.metadata["jupytext"]["formats"] == "ipynb,py:percent"
    assert read.metadata["jupytext"]["formats"] == "ipynb,py:percent"
    assert jupytext.writes(committed, fmt="py:percent") == text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_hygiene(path: Path) -> None:
    assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", path.name), "name notebooks NN_topic.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == KERNEL_NAME == "eagle3-forensics"  # the project's kernel
    assert "papermill" not in nb.metadata, "an executed papermill output was committed"
    for cell in nb.cells:
        tags = _tags(cell)
        assert "injected-parameters" not in tags and "papermill-error-cell-tag" not in tags
        if cell.cell_type == "code":
            assert cell.outputs == [], f"outputs committed in cell {cell.id}"
            assert cell.execution_count is None, f"execution count committed in cell {cell.id}"
    params = [c for c in nb.cells if "parameters" in _tags(c)]
    assert len(params) == 1, "exactly one cell tagged 'parameters'"
    assert params[0].cell_type == "code"
    for node in ast.parse(params[0].source).body:  # plain literals only (papermill appends overrides)
        assert isinstance(node, ast.Assign | ast.AnnAssign), ast.dump(node)
        assert node.value is not None
        value = ast.literal_eval(node.value)
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, str) and "/" in item:  # a path: the demo world, relative to notebooks/
                assert item.startswith("../data/demo/"), f"default {item!r} is not under ../data/demo"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_papermill_reads_the_same_parameters_as_the_runner(path: Path) -> None:
    """papermill skips a parameter line with two '=' (a comment quoting ``sglang==0.5.11``) and then
    warns "Passed unknown parameter" for a name the notebook does declare."""
    papermill = pytest.importorskip("papermill")
    from eagle3_forensics.runs.config import notebook_parameters

    assert set(papermill.inspect_notebook(str(path))) == set(notebook_parameters(path))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_code_cells_hold_no_logic(path: Path) -> None:
    nb = nbformat.read(str(path), as_version=4)
    code_cells = [c for c in nb.cells if c.cell_type == "code" and "parameters" not in _tags(c)]
    trees = [ast.parse(_code(c)) for c in code_cells]
    package_names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("eagle3_forensics"):
                package_names |= {a.asname or a.name for a in node.names}
            elif isinstance(node, ast.Import):
                package_names |= {
                    (a.asname or a.name).split(".")[0]
                    for a in node.names
                    if a.name.startswith("eagle3_forensics")
                }
    allowed = package_names | DISPLAY_NAMES
    for cell, tree in zip(code_cells, trees, strict=True):
        for node in ast.walk(tree):
            assert not isinstance(
                node,
                ast.FunctionDef
                | ast.AsyncFunctionDef
                | ast.ClassDef
                | ast.Lambda
                | ast.For
                | ast.AsyncFor
                | ast.While,
            ), f"cell {cell.id} defines logic ({type(node).__name__}); move it into eagle3_forensics"
        imports = any(isinstance(n, ast.Import | ast.ImportFrom) for n in tree.body)
        called = {
            n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        assert imports or called & allowed, f"cell {cell.id} neither calls eagle3_forensics nor displays"


# -- record --------------------------------------------------------------------------------------


def test_record_is_a_noop_when_unset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    record("verdict", "healthy")
    assert list(tmp_path.iterdir()) == []


def test_record_appends_and_validates(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "sub" / "run.json"
    monkeypatch.setenv(ENV_VAR, str(path))
    record("verdict", "broken")
    record("counts", {"error": 1, "warning": 0, "info": 2})
    record("verdict", "healthy")
    assert read_records(path) == {"verdict": "healthy", "counts": {"error": 1, "warning": 0, "info": 2}}
    with pytest.raises(TypeError):
        record("bad", object())


# -- papermill -----------------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_notebook_01_runs_on_healthy_drafter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sidecar = tmp_path / "record.json"
    monkeypatch.setenv(ENV_VAR, str(sidecar))
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    for name, value in kernel_env().items():  # the notebooks' kernel, installed by make setup or not
        monkeypatch.setenv(name, value)
    out = tmp_path / "01.ipynb"
    # a path relative to the notebook folder: works because the kernel runs with cwd=notebooks/
    params = {"checkpoint": "../data/demo/drafters/healthy", "engine": "all"}
    papermill.execute_notebook(
        str(NB01),
        str(out),
        parameters=params,
        cwd=str(NOTEBOOK_DIR),
        kernel_name=KERNEL_NAME,
        execution_timeout=120,
        progress_bar=False,
    )
    executed = nbformat.read(str(out), as_version=4)
    assert executed.metadata["papermill"]["parameters"]["checkpoint"] == params["checkpoint"]
    assert executed.metadata["papermill"]["exception"] in (None, False)
    rec = read_records(sidecar)
    assert rec["verdict"] == "healthy"
    assert rec["counts"]["error"] == 0
    assert isinstance(rec["codes"], list)


@pytest.mark.timeout(180)
def test_notebook_05_runs_on_the_demo_dumps(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sidecar = tmp_path / "record.json"
    monkeypatch.setenv(ENV_VAR, str(sidecar))
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    for name, value in kernel_env().items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "05.ipynb"
    papermill.execute_notebook(
        str(NB05),
        str(out),
        parameters={"checkpoint": "../data/demo/drafters/healthy", "data": "../data/demo/dumps/speculators"},
        cwd=str(NOTEBOOK_DIR),
        kernel_name=KERNEL_NAME,
        execution_timeout=120,
        progress_bar=False,
    )
    executed = nbformat.read(str(out), as_version=4)
    assert executed.metadata["papermill"]["exception"] in (None, False)
    rec = read_records(sidecar)
    assert rec["acceptance"]["acceptance_length"] > 2.5
    assert rec["offline_probe"]["teacher"]["final_norm"]["applied"] is True  # speculators: before the norm
    assert rec["verdict"] in ("healthy", "broken")
    text = json.dumps(
        [c.get("outputs", []) for c in executed.cells]
    )  # the prep_broken audit (the seed's situation)
    assert "D2T_T2D_MISMATCH" in text and "DATA_VOCAB_MAP_NOT_FROM_DATA" in text


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("variant", "engine", "first"),
    [
        ("healthy", "vllm", None),
        ("d2t_absolute", "vllm", "D2T_ABSOLUTE"),
        ("layers_flat", "sglang==0.5.11", "KEYS_DROPPED_BY_ENGINE"),
    ],
)
def test_notebook_06_ranks_the_planted_cause_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variant: str, engine: str, first: str | None
) -> None:
    sidecar = tmp_path / "record.json"
    monkeypatch.setenv(ENV_VAR, str(sidecar))
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    for name, value in kernel_env().items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "06.ipynb"
    papermill.execute_notebook(
        str(NB06),
        str(out),
        parameters={"checkpoint": f"../data/demo/drafters/{variant}", "engine": engine, "lengths": [8]},
        cwd=str(NOTEBOOK_DIR),
        kernel_name=KERNEL_NAME,
        execution_timeout=150,
        progress_bar=False,
    )
    executed = nbformat.read(str(out), as_version=4)
    assert executed.metadata["papermill"]["exception"] in (None, False)
    rec = read_records(sidecar)
    causes = rec["causes"]
    if first is None:  # healthy: never cry wolf
        assert rec["cause_codes"] == [] and causes["causes"] == []
        assert any("no training data" in x for x in causes["not_checked"])
    else:
        assert rec["cause_codes"][0] == first
        assert causes["causes"][0]["cost"]["basis"] == "measured"
        assert rec["acceptance"]["acceptance_length"] < 1.2
    text = json.dumps([c.get("outputs", []) for c in executed.cells])
    assert ("no cause found" in text) == (first is None)
    assert "Acceptance by segment and length" in text  # the explorer's static view


def test_notebook_05_parameters() -> None:
    nb = nbformat.read(str(NB05), as_version=4)
    params = [c for c in nb.cells if "parameters" in _tags(c)]
    names = {t.id for node in ast.parse(params[0].source).body for t in node.targets}
    assert {"checkpoint", "data", "target", "engine"} <= names


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    base = tmp_path_factory.mktemp("report")
    cwd = os.getcwd()
    os.chdir(base)  # a relative out dir, as `make report` passes, must not land in notebooks/
    try:
        rc = build_demo_report("out", demo_dir=DEMO, timeout=120)
    finally:
        os.chdir(cwd)
    assert not (NOTEBOOK_DIR / "out").exists()
    return rc, base / "out"


@pytest.mark.timeout(600)
def test_build_demo_report(demo_report: tuple[int, Path]) -> None:
    rc, out = demo_report
    assert rc == 0
    assert (out / "index.html").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["schema"] == "eagle3-forensics/run-summary/1"
    runs = summary["runs"]
    assert {r["drafter"] for r in runs} == set(demo.VARIANTS)
    assert len(runs) == len(demo.VARIANTS)
    for run in runs:
        assert run["status"] == "ok", run
        assert run["notebook"] == "01_checkpoint_keys"
        assert run["error"] is None
        assert set(run["counts"]) == {"error", "warning", "info"}
        assert Path(run["parameters"]["checkpoint"]).is_absolute()
        assert (out / run["html"]).is_file()
        expected = demo.EXPECTED_FINDINGS[run["drafter"]]
        assert set(expected) <= set(run["codes"]), run
        assert {f["code"] for f in run["findings"]} == set(run["codes"])  # with severities, for the gate
        # a variant whose expected findings include an error is broken; one with warnings only (aux_shifted:
        # the ids read one layer early by vLLM/speculators, an ambiguous convention) is "warnings"
        severities = {f["severity"] for f in run["findings"] if f["code"] in expected}
        verdict = "healthy" if not expected else ("broken" if "error" in severities else "warnings")
        assert run["verdict"] == verdict, run
    index = (out / "index.html").read_text()
    for variant in demo.VARIANTS:
        assert f"{variant}__01_checkpoint_keys.html" in index


@pytest.mark.timeout(600)
def test_rendered_report_hides_code_and_loads_nothing_remote(demo_report: tuple[int, Path]) -> None:
    _, out = demo_report
    page = (out / "healthy__01_checkpoint_keys.html").read_text()
    assert "Content-Security-Policy" in page
    assert "<script" not in page
    assert "from eagle3_forensics" not in page  # code cells hidden
    assert "HEALTHY" in page  # the verdict output is there
    assert "Key browser by engine fate" in page and STATIC_NOTE in page  # the explorer, static


# -- HTML escaping -------------------------------------------------------------------------------


def test_display_escapes_tensor_names(hostile_drafter: Path) -> None:
    d = diagnose(hostile_drafter, target=DEMO / "target")
    ins = inspect_checkpoint(hostile_drafter)
    assert TENSOR_PAYLOAD in {t.name for t in ins.tensors}
    pages = {
        "verdict": verdict_html(d),
        "findings": findings_html(d),
        "key fates": key_fates_html(d, "all"),
        "tensors": table_html(tensor_table(ins)),
        "load": table_html(load_table(d)),
        "findings table": table_html(findings_table(d)),
        **{f"key fates {e}": table_html(key_fate_table(d, e)) for e in d.loads},
    }
    for what, page in pages.items():
        for raw in (TENSOR_PAYLOAD, DIR_PAYLOAD, "<img", "<svg"):
            assert raw not in page, f"{what}: unescaped {raw!r}"
    assert html.escape(TENSOR_PAYLOAD) in pages["key fates"]
    assert html.escape(TENSOR_PAYLOAD) in pages["tensors"]
    assert html.escape(DIR_PAYLOAD) in pages["verdict"]


@pytest.mark.timeout(300)
def test_report_escapes_and_continues_past_failures(hostile_drafter: Path, tmp_path: Path) -> None:
    demo_dir = tmp_path / "demo"
    (demo_dir / "drafters").mkdir(parents=True)
    (demo_dir / "drafters" / DIR_PAYLOAD).symlink_to(hostile_drafter, target_is_directory=True)
    (demo_dir / "drafters" / "empty").mkdir()  # unreadable: the notebook fails
    (demo_dir / "target").symlink_to(DEMO / "target", target_is_directory=True)
    out = tmp_path / "out"
    assert build_demo_report(out, demo_dir=demo_dir, timeout=120) == 1
    runs = {r["drafter"]: r for r in json.loads((out / "summary.json").read_text())["runs"]}
    assert runs[DIR_PAYLOAD]["status"] == "ok"
    failed = runs["empty"]
    assert failed["status"] == "failed"
    assert failed["error"] and "\n" not in failed["error"]
    assert (out / "empty__01_checkpoint_keys.html").is_file()  # failed runs are rendered too
    for page in [out / "index.html", *out.glob("*.html")]:
        text = page.read_text()
        for raw in (TENSOR_PAYLOAD, DIR_PAYLOAD):
            assert raw not in text, f"{page.name}: unescaped {raw!r}"
