"""The project's kernel ``eagle3-forensics`` (eagle3_forensics.runs.kernel): installed by make setup
into the venv, and a private stand-in wherever the installed one is missing or runs another Python."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ipykernel")
pytest.importorskip("jupyter_client")

from paths import ROOT

from eagle3_forensics.runs import kernel


def test_make_setup_installs_the_kernelspec_into_the_venv() -> None:
    recipe = (ROOT / "Makefile").read_text()
    assert "ipykernel install --sys-prefix --name eagle3-forensics" in recipe
    spec = Path(sys.prefix) / "share" / "jupyter" / "kernels" / "eagle3-forensics" / "kernel.json"
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip(f"not the make setup venv ({sys.prefix})")
    data = json.loads(spec.read_text())
    assert data["argv"][0] == sys.executable and data["display_name"] == kernel.DISPLAY_NAME


@pytest.mark.timeout(120)
def test_a_kernelspec_for_another_python_is_replaced_by_one_for_this_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spec named eagle3-forensics that starts some other Python comes first on JUPYTER_PATH (as a
    ``--user`` install from another environment would): the runner's environment still starts a
    kernel in this interpreter, with the package."""
    from jupyter_client.manager import start_new_kernel

    other = tmp_path / "elsewhere" / "kernels" / kernel.KERNEL_NAME
    other.mkdir(parents=True)
    foreign = {
        **kernel.kernelspec("another env"),
        "argv": ["/nonexistent/python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
    }
    (other / "kernel.json").write_text(json.dumps(foreign))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "elsewhere"))
    monkeypatch.setattr(kernel, "_private_dir", None)
    assert kernel.installed_python() == "/nonexistent/python"

    env = kernel.kernel_env()
    private = Path(env["JUPYTER_PATH"].split(":")[0])
    assert private != tmp_path / "elsewhere" and env["JUPYTER_PATH"].endswith(str(tmp_path / "elsewhere"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert kernel.installed_python() == sys.executable
    assert kernel.kernel_env() == env  # written once per process

    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    km, kc = start_new_kernel(
        kernel_name=kernel.KERNEL_NAME, extra_arguments=["--IPKernelApp.log_level=CRITICAL"]
    )
    out: list[dict[str, Any]] = []
    try:
        reply = kc.execute_interactive(
            "import sys, eagle3_forensics; print(sys.executable)", timeout=60, output_hook=out.append
        )
        assert reply["content"]["status"] == "ok"
        text = "".join(m["content"].get("text", "") for m in out if m["msg_type"] == "stream")
        assert text.strip() == sys.executable
    finally:
        km.shutdown_kernel(now=True)


def test_the_installed_kernelspec_is_used_as_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = tmp_path / "kernels" / kernel.KERNEL_NAME
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps(kernel.kernelspec()))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.setattr(kernel, "_private_dir", None)
    assert kernel.installed_python() == sys.executable
    assert kernel.kernel_env() == {}
