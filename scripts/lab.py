"""Start JupyterLab on the notebooks with the project's kernel and print the URL to open (``make lab``).

    python scripts/lab.py                      # 127.0.0.1:8888 (the next free port if taken), notebooks/
    python scripts/lab.py --port 0             # any free port
    python scripts/lab.py --notebooks DIR      # another folder of notebooks

JupyterLab listens on the loopback interface only, with a fresh random token (passed through the
environment, so it is not in the process list), in the notebooks folder, with ``eagle3-forensics``
as the default kernel (:mod:`eagle3_forensics.runs.kernel`: the kernelspec ``make setup`` installs
in the venv, or a private one for this interpreter). Once the server answers, one line gives the
URL with its token. Ctrl-C (or SIGTERM) stops the server. Other arguments go to JupyterLab.

Exploring leaves the repository clean: the notebooks are tracked without outputs, so this server
never saves on its own. ``scripts/jupyter_config/labconfig/default_setting_overrides.json`` (put
ahead on ``JUPYTER_CONFIG_PATH``) turns JupyterLab's autosave off and its news and update checks
off; these are defaults, so a setting the user made in *Settings* still wins, and *File › Save*
still writes (what the user asked for). ``.ipynb_checkpoints`` is in ``.gitignore``. The log shows
warnings only, and the kernels start without the debugger's frozen-modules warning.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import FrameType

from eagle3_forensics.runs.kernel import KERNEL_NAME, kernel_env

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "scripts" / "jupyter_config"  # labconfig/default_setting_overrides.json
HOST = "127.0.0.1"
START_TIMEOUT_S = 90.0


def free_port(preferred: int) -> int:
    """``preferred`` when nothing listens there, else a port the system picks."""
    for port in (preferred, 0) if preferred else (0,):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise OSError("no free port on 127.0.0.1")


def command(port: int, notebooks: Path, extra: list[str]) -> list[str]:
    """The JupyterLab command line ``make lab`` runs."""
    return [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        f"--ServerApp.ip={HOST}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={notebooks}",
        f"--MappingKernelManager.default_kernel_name={KERNEL_NAME}",
        "--ServerApp.log_level=WARN",
        "--LabApp.log_level=WARN",
        # no PyPI queries from the extension manager: the lab is the venv's, extensions come with it
        "--LabApp.extension_manager=readonly",
        # containers and CI run as root, where jupyter_server refuses to start without this
        *(["--ServerApp.allow_root=True"] if os.name == "posix" and os.geteuid() == 0 else []),
        *extra,
    ]


def lab_env() -> dict[str, str]:
    """``JUPYTER_CONFIG_PATH`` with this project's lab defaults first (autosave and news off), and
    ``PYDEVD_DISABLE_FILE_VALIDATION`` for the kernels (else each prints the debugger's
    frozen-modules warning on stderr)."""
    current = [p for p in os.environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p]
    paths = [str(CONFIG_DIR), *(p for p in current if p != str(CONFIG_DIR))]
    return {"JUPYTER_CONFIG_PATH": os.pathsep.join(paths), "PYDEVD_DISABLE_FILE_VALIDATION": "1"}


def wait_ready(
    proc: subprocess.Popen[bytes], port: int, token: str, timeout: float = START_TIMEOUT_S
) -> bool:
    """Poll the server's status API until it answers; ``False`` when the server exits or time runs out."""
    req = urllib.request.Request(
        f"http://{HOST}:{port}/api/status", headers={"Authorization": f"token {token}"}
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(req, timeout=2) as resp:  # noqa: S310 - loopback http only
                if resp.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8888, help="port on 127.0.0.1 (0: any free one)")
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks", help="folder JupyterLab opens")
    parser.add_argument("--open", default="00_triage.ipynb", help="notebook the printed URL opens")
    args, extra = parser.parse_known_args(argv)
    if importlib.util.find_spec("jupyterlab") is None:
        print("make lab: jupyterlab is not installed here: pip install -e '.[notebooks]'", file=sys.stderr)
        return 1
    notebooks = args.notebooks.resolve()
    if not notebooks.is_dir():
        print(f"make lab: no such folder: {notebooks}", file=sys.stderr)
        return 1
    port = free_port(args.port)
    if args.port and port != args.port:
        print(f"port {args.port} is taken; using {port}", flush=True)
    token = secrets.token_hex(24)
    env = {**os.environ, **kernel_env(), **lab_env(), "JUPYTER_TOKEN": token}
    proc = subprocess.Popen(command(port, notebooks, extra), cwd=notebooks, env=env)  # noqa: S603 - our own argv

    def stop(signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        if not wait_ready(proc, port, token):
            print(
                f"make lab: JupyterLab did not answer on {HOST}:{port} within {START_TIMEOUT_S:.0f} s",
                file=sys.stderr,
            )
            return 1
        url = f"http://{HOST}:{port}/lab/tree/{args.open}?token={token}"
        print(
            f"JupyterLab ({notebooks}, kernel {KERNEL_NAME}) — open:\n    {url}\nCtrl-C stops it.", flush=True
        )
        return proc.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if proc.poll() is None:
            proc.terminate()  # jupyter_server shuts its kernels down on SIGTERM, without asking
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    raise SystemExit(main())
