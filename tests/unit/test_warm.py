"""runs.warm without kernels: what the zygote refuses to fork from, the kernelspec, the config key."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.runs import warm
from eagle3_forensics.runs.config import config_from_dict


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``code`` in a new interpreter (what it imports stays out of this one), ``tmp_path`` on its path."""
    env = {
        "PYTHONPATH": f"{tmp_path}:{ROOT}",
        "OMP_NUM_THREADS": "1",
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
    }
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=150, cwd=tmp_path, env=env
    )


def _preload(modules: tuple[str, ...], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``warm.preload(modules)`` in a new interpreter."""
    return _python(
        f"from eagle3_forensics.runs import warm\nwarm.preload({modules!r})\nprint('forkable')", tmp_path
    )


@pytest.mark.slow  # zygote subprocesses
@pytest.mark.timeout(180)
def test_preload_refuses_a_module_that_must_load_in_a_session_or_a_running_thread(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the notebooks extra; absent in the core-only tier (tests/packaging)
    (tmp_path / "starts_a_thread.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    )
    ok = _preload(("json",), tmp_path)
    assert ok.returncode == 0 and "forkable" in ok.stdout, ok.stderr
    pyplot = _preload(("matplotlib.pyplot",), tmp_path)
    assert pyplot.returncode != 0 and "matplotlib.pyplot" in pyplot.stderr
    assert "must load inside a kernel" in pyplot.stderr
    thread = _preload(("starts_a_thread",), tmp_path)
    assert thread.returncode != 0 and "threads after preloading" in thread.stderr
    missing = _preload(("no_such_module_e3f",), tmp_path)
    assert missing.returncode != 0 and "cannot preload no_such_module_e3f" in missing.stderr


@pytest.mark.slow  # imports every notebook dependency in subprocesses
@pytest.mark.timeout(180)
def test_preload_covers_every_module_the_notebooks_import(tmp_path: Path) -> None:
    """PRELOAD is a list by hand; a notebook that starts importing something new shows up here."""
    for module in ("ipykernel", "torch", "matplotlib", "transformers"):  # what PRELOAD imports (extras)
        pytest.importorskip(module)
    imported: set[str] = set()
    for source in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
    assert "eagle3_forensics.views.triage" in imported  # the walk sees the import cells
    code = (
        "import json, sys\nfrom eagle3_forensics.runs import warm\nwarm.preload()\n"
        f"print(json.dumps(sorted(m for m in {sorted(imported)!r} if m not in sys.modules)))"
    )
    proc = _python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_the_kernelspec_puts_the_client_before_ipykernels_arguments() -> None:
    pytest.importorskip("ipykernel")
    spec = warm.kernelspec("/tmp/x.sock")
    assert spec["argv"][:5] == [sys.executable, "-m", "eagle3_forensics.runs.warm", "kernel", "/tmp/x.sock"]
    assert "{connection_file}" in spec["argv"][5:]
    assert spec["language"] == "python"


def test_the_warm_kernelspec_replaces_the_projects_kernel_by_name() -> None:
    from eagle3_forensics.runs.kernel import KERNEL_NAME

    assert warm.KERNEL_NAME == KERNEL_NAME  # notebooks, papermill and the runner name only this one


def test_the_module_entry_point_explains_its_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert warm.main(["nonsense"]) == 2
    assert "usage:" in capsys.readouterr().err


def test_kernels_is_a_checked_config_key(tmp_path: Path) -> None:
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    pytest.importorskip("nbformat")
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("checkpoint = None")
    cell.metadata["tags"] = ["parameters"]
    nb.cells.append(cell)
    nbformat.write(nb, str(nbs / "01_a.ipynb"))
    base = {"notebooks_dir": str(nbs), "notebooks": ["01_a"], "drafters": {"d": str(tmp_path)}}
    assert config_from_dict(base).kernels == "fresh"  # the standard kernels unless a config opts in
    assert config_from_dict({**base, "kernels": "warm"}).kernels == "warm"
    with pytest.raises(UnusableInputError, match="kernels must be one of warm, fresh"):
        config_from_dict({**base, "kernels": "tepid"})


def test_run_refuses_an_unknown_kernel_mode(capsys: pytest.CaptureFixture[str]) -> None:
    from eagle3_forensics.cli.main import main

    code = main(["run", "--config", str(ROOT / "configs" / "demo.yaml"), "--out", "x", "--kernels", "tepid"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--kernels" in err and "Traceback" not in err
