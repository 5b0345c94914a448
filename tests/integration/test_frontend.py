"""Live widgets or static tables, decided from facts (io.frontend.frontend), and the wrong-kernel line.

Real kernels (jupyter_client), started in ``…/eagle3-forensics/papermill/nbconvert/``: a cell sent
the way JupyterLab sends it (with cell metadata) gets the live widget, the same cell sent the way
nbclient sends it (papermill, nbconvert: no metadata) gets static HTML, and ``E3F_INTERACTIVE``
overrides both. A JupyterLab session is in tests/integration/test_lab.py; papermill's and the
runner's static output in tests/integration/test_runner.py.
"""

from __future__ import annotations

import os
import queue
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("ipywidgets")
pytest.importorskip("jupyter_client")


from eagle3_forensics.io import frontend as fe  # noqa: E402
from eagle3_forensics.runs.kernel import KERNEL_NAME, kernel_env  # noqa: E402

pytestmark = pytest.mark.notebooks

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SHOW = (
    "import ipywidgets\n"
    "from eagle3_forensics.io.frontend import frontend\nfrom eagle3_forensics.views.widgets import Explorer\n"
    "print(frontend())\n"
    "display(Explorer('probe', lambda: 'static', lambda: ipywidgets.Label('live')))\n"
)


def test_outside_a_kernel_explorers_are_static(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(fe.ENV_INTERACTIVE, raising=False)
    monkeypatch.setenv(fe.SESSION_ENV, "/x/eagle3-forensics/00_triage.ipynb")
    assert fe.frontend() == fe.Frontend(False, "no Jupyter kernel")
    monkeypatch.setenv(fe.ENV_INTERACTIVE, "1")
    assert fe.interactive_frontend() is False  # forcing cannot conjure a kernel
    monkeypatch.setenv(fe.ENV_INTERACTIVE, "0")
    assert fe.frontend() == fe.Frontend(False, "$E3F_INTERACTIVE=0")


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from jupyter_client.manager import start_new_kernel

    cwd = tmp_path_factory.mktemp("k") / "eagle3-forensics" / "papermill" / "nbconvert"
    cwd.mkdir(parents=True)
    saved = dict(os.environ)
    os.environ.update({**kernel_env(), "PYDEVD_DISABLE_FILE_VALIDATION": "1"})
    for name in (fe.ENV_INTERACTIVE, fe.SESSION_ENV, "MPLBACKEND"):
        os.environ.pop(name, None)
    try:
        km, kc = start_new_kernel(
            kernel_name=KERNEL_NAME, extra_arguments=["--IPKernelApp.log_level=CRITICAL"], cwd=str(cwd)
        )
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        yield kc
    finally:
        km.shutdown_kernel(now=True)


def run(kc: Any, code: str, metadata: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Send one execute_request (with ``metadata`` as a frontend would); its iopub messages up to idle."""
    msg = kc.session.msg(
        "execute_request",
        {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False},
        metadata=metadata or {},
    )
    kc.shell_channel.send(msg)
    got: list[Any] = []
    while True:
        try:
            m = kc.get_iopub_msg(timeout=120)
        except queue.Empty:
            raise AssertionError(f"no idle within 120 s: {got[-3:]}") from None
        if m["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
            continue
        got.append(m)
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            return got


def shown(msgs: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    errors = [m["content"] for m in msgs if m["msg_type"] == "error"]
    assert not errors, errors
    text = "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream")
    return text, [m["content"]["data"] for m in msgs if m["msg_type"] == "display_data"]


def test_a_frontends_cell_gets_the_live_widget(kernel: Any) -> None:
    text, data = shown(run(kernel, SHOW, {"cellId": "00-05", "deletedCells": [], "recordTiming": False}))
    assert "interactive=True" in text and "a frontend's cell request" in text
    assert len(data) == 1 and WIDGET_VIEW in data[0] and "text/html" in data[0]  # widget + static fallback


def test_an_executors_cell_gets_static_html(kernel: Any) -> None:
    text, data = shown(run(kernel, SHOW))  # what nbclient sends: no metadata
    assert "interactive=False" in text and "headless executor" in text
    assert len(data) == 1 and WIDGET_VIEW not in data[0] and "static" in data[0]["text/html"]


def test_the_runners_switch_wins(kernel: Any) -> None:
    try:
        code = f"import os; os.environ['E3F_INTERACTIVE'] = '0'\n{SHOW}"
        text, data = shown(run(kernel, code, {"cellId": "x"}))
        assert "interactive=False" in text and WIDGET_VIEW not in data[0]
        code = f"import os; os.environ['E3F_INTERACTIVE'] = '1'\n{SHOW}"
        text, data = shown(run(kernel, code))
        assert "interactive=True" in text and WIDGET_VIEW in data[0]
    finally:
        run(kernel, "import os; os.environ.pop('E3F_INTERACTIVE', None)")


def _import_cell(notebook: Path) -> str:
    nb = nbformat.read(str(notebook), as_version=4)
    params = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    return str(next(c.source for c in nb.cells[params + 1 :] if c.cell_type == "code"))


GUARD = "from eagle3_forensics.runs.kernel import require_notebook_kernel\n\nrequire_notebook_kernel()\n"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.stem[:2])
def test_a_kernel_without_the_package_says_how_to_switch(kernel: Any, notebook: Path) -> None:
    """The import cell on a kernel that lacks eagle3_forensics: Python's own error, and the line above
    the failing import (shown with it) names the kernel to switch to; nothing else runs."""
    cell = _import_cell(notebook)
    first, guard = cell.split("\n", 1)
    assert first.startswith("# No module named 'eagle3_forensics'?") and guard.startswith(GUARD), cell
    hide = "import sys; saved = sys.modules.get('eagle3_forensics'); sys.modules['eagle3_forensics'] = None"
    shown(run(kernel, hide))  # the import now fails, as in a kernel without the package
    try:
        msgs = run(kernel, cell)
    finally:
        shown(run(kernel, "sys.modules['eagle3_forensics'] = saved"))
    outputs = [m for m in msgs if m["msg_type"] in ("error", "stream", "display_data", "execute_result")]
    assert len(outputs) == 1 and outputs[0]["msg_type"] == "error", outputs
    assert outputs[0]["content"]["ename"] == "ModuleNotFoundError"
    text = ANSI.sub("", "\n".join(outputs[0]["content"]["traceback"]))
    assert "choose Kernel › Change Kernel › eagle3-forensics" in text, text


def test_a_kernel_without_the_notebooks_extra_stops_in_one_line(kernel: Any) -> None:
    """The package without pandas (another environment's kernel): one line naming it, no traceback."""
    hide = "import sys; saved = sys.modules.get('pandas'); sys.modules['pandas'] = None"
    shown(run(kernel, hide))
    try:
        msgs = run(kernel, GUARD)
    finally:
        shown(run(kernel, "sys.modules['pandas'] = saved"))
    outputs = [m for m in msgs if m["msg_type"] in ("error", "stream", "display_data", "execute_result")]
    assert len(outputs) == 1, outputs
    # IPython shows a UsageError as this one line: a stderr stream, or an error whose traceback is the line
    content = outputs[0]["content"]
    line = content["text"] if outputs[0]["msg_type"] == "stream" else "\n".join(content["traceback"]) + "\n"
    assert line == (
        "UsageError: this kernel lacks pandas, which the notebooks need: "
        "choose Kernel › Change Kernel › eagle3-forensics (or open the notebooks with `make lab`)\n"
    )
