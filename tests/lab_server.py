"""A real JupyterLab for tests: what ``make lab`` starts (scripts/lab.py), and a kernel client over its API.

:func:`start_lab` runs ``scripts/lab.py`` on a free loopback port in a given folder, reads the URL
it prints, and stops it (SIGTERM, then kill) when the block ends; every wait is bounded.
:class:`LabKernel` starts a notebook session through the REST API (as JupyterLab's frontend does)
and talks to its kernel over the server's websocket, sending ``execute_request`` messages with or
without the cell metadata JupyterLab sends.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from paths import ROOT

LAB_SCRIPT = ROOT / "scripts" / "lab.py"
URL = re.compile(r"http://127\.0\.0\.1:\d+/lab/tree/\S+\?token=\w+")


@dataclass
class Lab:
    """A running JupyterLab: the URL ``make lab`` printed, its base and token, and its output so far."""

    url: str
    base: str
    token: str
    proc: subprocess.Popen[str]
    output: list[str]

    def get(self, path: str, timeout: float = 15) -> tuple[int, bytes]:
        req = urllib.request.Request(self.base + path, headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status), resp.read()

    def post(self, path: str, body: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        req = urllib.request.Request(
            self.base + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            out: dict[str, Any] = json.loads(resp.read())
            return out


@contextmanager
def start_lab(
    notebooks: Path, cwd: Path | None = None, extra: Sequence[str] = (), timeout: float = 120
) -> Iterator[Lab]:
    """``scripts/lab.py --port 0 --notebooks DIR [EXTRA...]``: the server ``make lab`` starts, on a
    free port (``extra``: JupyterLab options, passed through)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    env.pop("MPLBACKEND", None)  # ipykernel picks the inline backend only when it is unset
    env.pop("JUPYTER_TOKEN", None)
    proc = subprocess.Popen(
        [sys.executable, str(LAB_SCRIPT), "--port", "0", "--notebooks", str(notebooks), *extra],
        cwd=cwd or notebooks,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output: list[str] = []
    try:
        deadline = time.monotonic() + timeout
        url = None
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        while url is None and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
            if not line:
                time.sleep(0.1)
                continue
            output.append(line)
            found = URL.search(line)
            url = found.group(0) if found else None
        assert url, f"make lab printed no URL within {timeout:.0f} s:\n{''.join(output)[-3000:]}"
        # keep reading what the server (and its kernels, which share its stderr) print: a full pipe
        # would block the server in a write, and every later request would hang
        threading.Thread(target=_drain, args=(proc, output), daemon=True).start()
        parts = urlsplit(url)
        yield Lab(url, f"{parts.scheme}://{parts.netloc}", parse_qs(parts.query)["token"][0], proc, output)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _drain(proc: subprocess.Popen[str], output: list[str], keep: int = 2000) -> None:
    """Read ``proc``'s output until it closes, keeping the last ``keep`` lines in ``output``."""
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), True)
    for line in proc.stdout:
        output.append(line)
        del output[:-keep]


class LabKernel:
    """A notebook session's kernel in a running JupyterLab, driven over the server's websocket."""

    def __init__(self, lab: Lab, notebook: str, kernel: str = "eagle3-forensics") -> None:
        self.lab = lab
        model = lab.post(
            "/api/sessions",
            {"path": notebook, "name": notebook, "type": "notebook", "kernel": {"name": kernel}},
        )
        self.session_id = model["id"]
        self.kernel_id = model["kernel"]["id"]
        self.session = uuid.uuid4().hex

    def execute(
        self, code: str, metadata: dict[str, Any] | None = None, timeout: float = 120
    ) -> list[dict[str, Any]]:
        """Run ``code``; every iopub message it caused, up to the kernel going idle."""
        # a thread of its own: Playwright's sync API (the browser tier) keeps an event loop running here
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, self._execute(code, metadata or {}, timeout)).result()

    async def _execute(self, code: str, metadata: dict[str, Any], timeout: float) -> list[dict[str, Any]]:
        from tornado.websocket import websocket_connect  # jupyter_server's own dependency

        url = self.lab.base.replace("http", "ws", 1) + f"/api/kernels/{self.kernel_id}/channels"
        req_headers = {"Authorization": f"token {self.lab.token}"}
        from tornado.httpclient import HTTPRequest

        conn = await asyncio.wait_for(
            websocket_connect(HTTPRequest(url + f"?session_id={self.session}", headers=req_headers)), timeout
        )
        msg_id = uuid.uuid4().hex
        msg = {
            "header": {
                "msg_id": msg_id,
                "username": "test",
                "session": self.session,
                "msg_type": "execute_request",
                "version": "5.3",
                "date": "2026-01-01T00:00:00.000000Z",
            },
            "parent_header": {},
            "metadata": metadata,
            "content": {
                "code": code,
                "silent": False,
                "store_history": True,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
            "channel": "shell",
            "buffers": [],
        }
        await conn.write_message(json.dumps(msg))
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                raw = await asyncio.wait_for(conn.read_message(), deadline - time.monotonic())
                if raw is None:
                    break
                m = json.loads(raw)
                if m.get("channel") != "iopub" or m.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                got.append(m)
                if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                    return got
            raise TimeoutError(f"the kernel did not go idle within {timeout:.0f} s: {got[-3:]}")
        finally:
            conn.close()

    def close(self) -> None:
        req = urllib.request.Request(
            self.lab.base + f"/api/sessions/{self.session_id}",
            method="DELETE",
            headers={"Authorization": f"token {self.lab.token}"},
        )
        with urllib.request.urlopen(req, timeout=30):
            pass
