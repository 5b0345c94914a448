"""``make lab``: JupyterLab on 127.0.0.1 with the project's kernel, and live widgets whatever the path.

The server is the one ``make lab`` starts (scripts/lab.py, :func:`lab_server.start_lab`), on a free
port, serving a folder under ``…/eagle3-forensics/papermill/nbconvert/``: every name the old
command-line substring test took for a headless executor is in the server's command line (the
kernel's parent), and a cell sent as JupyterLab sends it still gets the live widget, while
papermill started from that very kernel (inheriting its environment) still gets static HTML.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from lab_server import Lab, LabKernel, start_lab
from paths import ROOT

pytest.importorskip("jupyterlab")
pytest.importorskip("ipywidgets")
nbformat = pytest.importorskip("nbformat")
pytest.importorskip("papermill")

pytestmark = [pytest.mark.notebooks, pytest.mark.timeout(240)]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: the execute_request metadata JupyterLab 4 sends with every cell (CodeCell.execute adds cellId)
JUPYTERLAB_CELL = {"deletedCells": [], "recordTiming": False, "cellId": "00-05"}
EXPLORER = "Explorer('probe', lambda: 'static', lambda: ipywidgets.Label('live'))"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    folder = tmp_path_factory.mktemp("lab") / "eagle3-forensics" / "papermill" / "nbconvert"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / "00_triage.ipynb", folder)  # a copy: the repository stays untouched
    with start_lab(folder) as server:
        yield server


def test_make_lab_runs_scripts_lab() -> None:
    out = subprocess.run(
        ["make", "-n", "lab"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert "scripts/lab.py" in out.stdout


def test_make_lab_prints_a_url_that_answers_200(lab: Lab) -> None:
    assert lab.url.startswith("http://127.0.0.1:") and "/lab/tree/00_triage.ipynb?token=" in lab.url
    status, body = lab.get(lab.url.removeprefix(lab.base))
    assert status == 200 and b"JupyterLab" in body
    status, body = lab.get("/api/kernelspecs")
    specs = json.loads(body)
    assert specs["default"] == "eagle3-forensics" and "eagle3-forensics" in specs["kernelspecs"]


def test_make_lab_never_autosaves_and_fetches_no_news(lab: Lab) -> None:
    """Exploring leaves the tracked notebooks alone: JupyterLab's defaults, as this server reports
    them, have autosave off and the news and update checks off (scripts/jupyter_config); its log
    shows no info lines."""

    def default(plugin: str, name: str) -> object:
        _, body = lab.get(f"/lab/api/settings/{plugin}")
        return json.loads(body)["schema"]["properties"][name]["default"]

    assert default("@jupyterlab/docmanager-extension:plugin", "autosave") is False
    assert default("@jupyterlab/apputils-extension:notification", "fetchNews") == "false"
    assert default("@jupyterlab/apputils-extension:notification", "checkForUpdates") is False
    assert not [line for line in lab.output if "[I " in line], lab.output


def test_the_lab_kernel_shows_live_widgets_under_a_named_path(lab: Lab, tmp_path: Path) -> None:
    kernel = LabKernel(lab, "00_triage.ipynb")
    try:
        code = (
            "import os, sys, ipywidgets\n"
            "from eagle3_forensics.io.frontend import frontend\nfrom eagle3_forensics.views.widgets import Explorer\n"
            "parent = open(f'/proc/{os.getppid()}/cmdline', 'rb').read().decode()\n"
            "print(all(n in parent for n in ('eagle3-forensics', 'papermill', 'nbconvert')), sys.executable)\n"
            "print(os.environ.get('JPY_SESSION_NAME', '').endswith('00_triage.ipynb'), frontend())\n"
            f"display({EXPLORER})\n"
        )
        msgs = kernel.execute(code, metadata=JUPYTERLAB_CELL)
        assert not [m["content"] for m in msgs if m["msg_type"] == "error"]
        streams = [m["content"] for m in msgs if m["msg_type"] == "stream"]
        assert not [s for s in streams if s["name"] == "stderr"], streams
        text = "".join(s["text"] for s in streams)
        first, second = text.splitlines()[:2]
        # the old substring test said "headless" here; the kernel is the project's (this interpreter)
        assert first == f"True {sys.executable}", text
        assert second.startswith("True ") and "interactive=True" in second, text  # a notebook session, live
        shown = [m["content"]["data"] for m in msgs if m["msg_type"] == "display_data"]
        assert len(shown) == 1 and WIDGET_VIEW in shown[0] and "text/html" in shown[0]

        # papermill started from this kernel inherits its JPY_SESSION_NAME: still static
        nb = tmp_path / "probe.ipynb"
        nbformat.write(
            nbformat.v4.new_notebook(
                cells=[
                    nbformat.v4.new_code_cell(
                        "import ipywidgets\n"
                        "from eagle3_forensics.io.frontend import frontend\nfrom eagle3_forensics.views.widgets import Explorer\n"
                        f"print(frontend())\ndisplay({EXPLORER})"
                    )
                ],
                metadata={
                    "kernelspec": {"name": "eagle3-forensics", "language": "python", "display_name": "e3f"}
                },
            ),
            str(nb),
        )
        code = (
            "import papermill, nbformat\n"
            f"papermill.execute_notebook({str(nb)!r}, {str(tmp_path / 'out.ipynb')!r}, progress_bar=False,"
            " kernel_name='eagle3-forensics', extra_arguments=['--IPKernelApp.log_level=CRITICAL'])\n"
        )
        msgs = kernel.execute(code, metadata=JUPYTERLAB_CELL)
        assert not [m["content"] for m in msgs if m["msg_type"] == "error"]
        outputs = nbformat.read(str(tmp_path / "out.ipynb"), as_version=4).cells[0].outputs
        assert "interactive=False" in outputs[0]["text"] and "headless executor" in outputs[0]["text"]
        assert WIDGET_VIEW not in outputs[1]["data"] and "static" in outputs[1]["data"]["text/html"]
    finally:
        kernel.close()


def _terminal_run(lab: Lab, command: str, until: str, timeout: float = 180) -> str:
    """Type ``command`` into a new lab terminal (as a user pastes it); its output up to ``until``."""
    import asyncio

    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    name = lab.post("/api/terminals", {})["name"]

    async def run() -> str:
        url = lab.base.replace("http", "ws", 1) + f"/terminals/websocket/{name}"
        conn = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {lab.token}"}))
        await conn.write_message(json.dumps(["stdin", command + "\r"]))
        seen = ""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while until not in seen and loop.time() < deadline:
            raw = await asyncio.wait_for(conn.read_message(), deadline - loop.time())
            if raw is None:
                break
            msg = json.loads(raw)
            if msg[0] == "stdout":
                seen += msg[1]
        conn.close()
        return seen

    # in a thread of its own: a browser test earlier in the session (Playwright's sync API) may leave
    # an event loop marked running in this one, and asyncio.run refuses to nest
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()


def test_a_lab_terminal_runs_the_next_commands_and_the_log_stays_quiet(lab: Lab) -> None:
    """The venv's bin comes first in a lab terminal (it starts in the notebooks folder), so a Next
    section's papermill line runs there pasted as shown, and writes into the ignored build/; the
    server logs no trust or encryption warning for the notebooks and kernels it opened."""
    from eagle3_forensics.views.next_steps import papermill_line

    out = _terminal_run(lab, "command -v eagle3-forensics papermill; echo E3F-$((40 + 2))", "E3F-42")
    found = [Path(w).resolve() for w in out.split() if w.endswith(("/eagle3-forensics", "/papermill"))]
    venv_bin = Path(sys.executable).absolute().parent.resolve()  # not the python link's target
    assert [p.parent for p in found] == [venv_bin, venv_bin], out
    drafter = ROOT / "data" / "demo" / "drafters" / "healthy"
    line = papermill_line("00_triage", {"checkpoint": str(drafter), "target": None, "max_prompts": 1})
    out = _terminal_run(lab, f"{line} --log-level ERROR && echo E3F-RAN-$?", "E3F-RAN-0")
    folder = Path(lab_folder(lab))
    assert (folder.parent / "build" / "notebooks" / "triage.ipynb").is_file(), out
    assert sorted(p.name for p in folder.iterdir() if p.suffix == ".ipynb") == ["00_triage.ipynb"]
    kernel = LabKernel(lab, "00_triage.ipynb")
    try:
        kernel.execute("1 + 1")
    finally:
        kernel.close()
    log = "".join(lab.output)
    for noise in ("is not trusted", "without encryption", "is more recent than"):
        assert noise not in log, log[-3000:]


def lab_folder(lab: Lab) -> str:
    """The folder the lab serves (its root_dir, as the contents API reports it)."""
    _, body = lab.get("/api/contents?content=0")
    args = [str(a) for a in lab.proc.args]  # type: ignore[union-attr]  # a list: start_lab's argv
    root = args[args.index("--notebooks") + 1]
    assert json.loads(body)["type"] == "directory"
    return str(root)
