"""The rendered reports in a real browser: headless Chromium driven over the DevTools protocol.

A run over a drafter whose directory name and tensor name are script-injection payloads is
rendered, then the index and the reports are opened in Debian's Chromium (installed with
``apt-get install -y chromium`` when missing and we are root; the test is skipped, with the reason,
only when that fails). Asserted per page: no JavaScript exception, no console or log error (a CSP
violation would be one), every inline figure decoded, the payloads shown as text, and no trace of
their scripts running (``document.title`` and a ``data-xss`` attribute are what they would set).
The DevTools client below is a minimal RFC 6455 websocket over a plain socket.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

pytest.importorskip("papermill")
pytest.importorskip("nbconvert")
yaml = pytest.importorskip("yaml")

from eagle3_forensics.cli.main import main  # noqa: E402

pytestmark = pytest.mark.notebooks

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo"
XSS_JS = "document.title='XSS';document.documentElement.setAttribute('data-xss','1')"
TENSOR_PAYLOAD = f'<img src=x onerror="{XSS_JS}">'
DRAFTER_PAYLOAD = f"<img src=x onerror={XSS_JS.replace(' ', '')}>"  # no '/', so it is a directory name too
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


# -- Chromium -------------------------------------------------------------------------------------


def _find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    found = _find_chromium()
    if found:
        return found
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("chromium is not installed and this is not root with apt-get: cannot install it")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    reasons = []
    for cmd in (
        ["apt-get", "install", "-y", "chromium"],
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "chromium"],
    ):
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            reasons.append(f"{' '.join(cmd)}: {exc}")
            continue
        if proc.returncode != 0:
            reasons.append(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
        found = _find_chromium()
        if found:
            return found
    pytest.skip("chromium is missing and `apt-get install -y chromium` failed: " + " | ".join(reasons))


class WebSocket:
    """Just enough RFC 6455 for the DevTools protocol: text frames, masking, fragments, ping."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        u = urlparse(url)
        self.sock = socket.create_connection((u.hostname or "127.0.0.1", u.port or 80), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("websocket handshake: connection closed")
            head += chunk
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status:
            raise ConnectionError(f"websocket handshake failed: {status!r}")
        self.buffer = head.split(b"\r\n\r\n", 1)[1]

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("websocket closed")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        head = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def send(self, text: str) -> None:
        self._send_frame(0x1, text.encode())

    def recv(self) -> str:
        parts: list[bytes] = []
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            data = self._read(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            if opcode == 0x9:  # ping
                self._send_frame(0xA, data)
                continue
            if opcode == 0x8:
                raise ConnectionError("websocket closed by the browser")
            if opcode in (0x0, 0x1, 0x2):
                parts.append(data)
                if b0 & 0x80:
                    return b"".join(parts).decode()

    def close(self) -> None:
        self.sock.close()


class DevTools:
    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mine:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result") or {})
            if "method" in msg:
                self.events.append(msg)

    def wait_for(self, method: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, ev in enumerate(self.events):
                if ev["method"] == method:
                    return self.events.pop(i)
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(f"no {method} within {timeout}s")

    def evaluate(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate failed: {res['exceptionDetails']}")
        return res["result"].get("value")


@pytest.fixture(scope="module")
def browser(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevTools]:
    profile = tmp_path_factory.mktemp("chromium-profile")  # fresh and empty
    proc = subprocess.Popen(
        [chromium, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.is_file() and port_file.read_text().strip()):
            if proc.poll() is not None:
                pytest.fail(f"chromium exited with {proc.returncode} before opening the DevTools port")
            if time.monotonic() > deadline:
                pytest.fail("chromium did not open the DevTools port within 60 s")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            targets = json.loads(resp.read())
        page = next(t for t in targets if t.get("type") == "page")
        ws = WebSocket(page["webSocketDebuggerUrl"])
        dt = DevTools(ws)
        for domain in ("Page", "Runtime", "Log"):
            dt.call(f"{domain}.enable")
        yield dt
        ws.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def open_page(dt: DevTools, path: Path) -> dict[str, Any]:
    """Navigate, wait for load, and report errors and what the page holds."""
    dt.events.clear()
    dt.call("Page.navigate", url=path.as_uri())
    dt.wait_for("Page.loadEventFired")
    time.sleep(0.5)  # let late console messages or image decodes arrive
    dt.evaluate("1")  # drains pending events into dt.events
    state = dt.evaluate("""JSON.stringify({
        title: document.title,
        xss: document.documentElement.getAttribute('data-xss'),
        handlers: document.querySelectorAll('[onerror],[onload],[onclick]').length,
        scripts: document.scripts.length,
        text: document.body.innerText,
        images: Array.from(document.images).map(i => ({src: i.src.slice(0, 22), complete: i.complete,
                                                       width: i.naturalWidth}))
    })""")
    errors = []
    for ev in dt.events:
        p = ev.get("params", {})
        if ev["method"] == "Runtime.exceptionThrown":
            errors.append(f"exception: {p.get('exceptionDetails', {}).get('text')}")
        elif ev["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append(f"console.{p.get('type')}: {p.get('args')}")
        elif ev["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            errors.append(f"log: {p['entry'].get('text')} ({p['entry'].get('url')})")
    return {**json.loads(state), "errors": errors}


# -- the run --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from safetensors.torch import load_file, save_file

    base = tmp_path_factory.mktemp("xss-run")
    src = DEMO / "drafters" / "healthy"
    evil = base / DRAFTER_PAYLOAD
    evil.mkdir()
    (evil / "config.json").write_text((src / "config.json").read_text())
    tensors = load_file(str(src / "model.safetensors"))
    tensors[TENSOR_PAYLOAD] = tensors["t2d"].clone()
    save_file(tensors, str(evil / "model.safetensors"))
    data = {
        "name": "browser check",
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
                "key_filter": "img",
            },
            "01_checkpoint_keys": {},
        },
        "drafters": {DRAFTER_PAYLOAD: str(evil)},
    }
    cfg = base / "run.yaml"
    cfg.write_text(yaml.safe_dump(data, allow_unicode=True))
    out = base / "out"
    assert main(["run", "--config", str(cfg), "--out", str(out), "--no-progress"]) == 0
    return out


@pytest.mark.timeout(300)
def test_index_and_reports_render_without_errors_or_script_execution(
    rendered: Path, browser: DevTools
) -> None:
    summary = json.loads((rendered / "summary.json").read_text())
    reports = {r["notebook"]: rendered / r["html"] for r in summary["runs"]}
    assert set(reports) == {"00_triage", "01_checkpoint_keys"}

    index = open_page(browser, rendered / "index.html")
    assert index["errors"] == []
    assert index["title"] == "eagle3-forensics · browser check"
    assert index["xss"] is None and index["handlers"] == 0 and index["scripts"] == 0
    assert DRAFTER_PAYLOAD in index["text"]  # shown as text, not parsed as markup
    assert sum(1 for _ in reports) == 2

    for name, path in reports.items():
        page = open_page(browser, path)
        assert page["errors"] == [], name
        assert page["title"] != "XSS" and page["xss"] is None, name
        assert page["handlers"] == 0 and page["scripts"] == 0, name
        assert TENSOR_PAYLOAD in page["text"], name  # the tensor name, escaped, in the tables
        assert DRAFTER_PAYLOAD in page["text"], name  # the drafter in the run header
        if name == "00_triage":
            figures = [i for i in page["images"] if i["src"].startswith("data:image/png")]
            assert figures, "the triage report has the per-position acceptance figure"
            assert all(i["complete"] and i["width"] > 0 for i in figures), figures
