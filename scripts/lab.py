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

Commands run where they are shown: the server, its kernels and its terminals get the project's
``PATH`` (this venv's ``bin`` first), so ``eagle3-forensics`` and ``papermill`` from a notebook's
*Next* section run in a lab terminal (which starts in ``notebooks/``, where those commands start).
A terminal is an interactive bash that reads the user's ``~/.bashrc`` and then puts the venv first
again (a login shell would reset ``PATH`` from ``/etc/profile``). The log stays quiet at start: the
project's notebooks are signed in a lab-private trust database (they are ours, and without outputs),
and kernels talk to the server over IPC sockets in a private directory instead of unencrypted TCP.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
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


def venv_bin() -> Path:
    """The ``bin`` folder of the interpreter running this script (``.venv/bin`` under ``make lab``;
    not resolved: the venv's ``python`` is a link to the base interpreter)."""
    return Path(sys.executable).absolute().parent


def terminal_rc(runtime: Path) -> Path:
    """The rc file of a lab terminal: the user's ``~/.bashrc``, then the venv's ``bin`` first."""
    rc = runtime / "terminal.bashrc"
    rc.write_text(
        '[ -f "$HOME/.bashrc" ] && . "$HOME/.bashrc"\n'
        f'export PATH="{venv_bin()}:$PATH"\n'
        f'export VIRTUAL_ENV="{venv_bin().parent}"\n',
        encoding="utf-8",
    )
    return rc


def trust_notebooks(notebooks: Path, runtime: Path) -> list[str]:
    """Sign the notebooks in ``notebooks`` in a trust database of this lab only; the server options
    that use it. Why: the server logs "Notebook … is not trusted" for every notebook opened."""
    import nbformat
    from nbformat.sign import NotebookNotary

    db, secret = runtime / "nbsignatures.db", runtime / "notebook_secret"
    notary = NotebookNotary(db_file=str(db), secret_file=str(secret))
    for path in sorted(notebooks.glob("*.ipynb")):
        try:
            notary.sign(nbformat.read(str(path), as_version=4))
        except Exception:  # noqa: S112 - an unreadable notebook just stays untrusted
            continue
    return [f"--NotebookNotary.db_file={db}", f"--NotebookNotary.secret_file={secret}"]


def command(port: int, notebooks: Path, extra: list[str], runtime: Path | None = None) -> list[str]:
    """The JupyterLab command line ``make lab`` runs; ``runtime`` (a private folder) holds the
    terminals' rc file, the trust database and the kernels' IPC sockets."""
    private: list[str] = []
    if runtime is not None:
        private += trust_notebooks(notebooks, runtime)
        # IPC sockets in a private folder: no "running over TCP without encryption" per kernel
        private += ["--KernelManager.transport=ipc", f"--KernelManager.ip={runtime / 'kernel'}"]
        bash = shutil.which("bash")
        if bash:
            shell = json.dumps([bash, "--rcfile", str(terminal_rc(runtime)), "-i"])
            private.append(f"--ServerApp.terminado_settings={{'shell_command': {shell}}}")
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
        # notebooks/NN_name.py is the source and scripts/make_notebooks.py writes the .ipynb after it:
        # the newer .ipynb is by design, so no "more recent than" warning per notebook opened (the
        # text still wins where the two differ, as jupytext resolves it)
        "--AsyncJupytextContentsManager.outdated_text_notebook_margin=1e12",
        # containers and CI run as root, where jupyter_server refuses to start without this
        *(["--ServerApp.allow_root=True"] if os.name == "posix" and os.geteuid() == 0 else []),
        *private,
        *extra,
    ]


def lab_env() -> dict[str, str]:
    """``JUPYTER_CONFIG_PATH`` with this project's lab defaults first (autosave and news off), and
    ``PYDEVD_DISABLE_FILE_VALIDATION`` for the kernels (else each prints the debugger's
    frozen-modules warning on stderr), and ``PATH`` with the venv's ``bin`` first (kernels'
    ``!`` commands and terminals find ``eagle3-forensics`` and ``papermill``)."""
    current = [p for p in os.environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p]
    paths = [str(CONFIG_DIR), *(p for p in current if p != str(CONFIG_DIR))]
    path = [
        str(venv_bin()),
        *(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != str(venv_bin())),
    ]
    return {
        "JUPYTER_CONFIG_PATH": os.pathsep.join(paths),
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "PATH": os.pathsep.join(path),
        "VIRTUAL_ENV": str(venv_bin().parent),
    }


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
    runtime = Path(tempfile.mkdtemp(prefix="e3f-lab-"))
    try:
        return serve(command(port, notebooks, extra, runtime), notebooks, env, port, token, args.open)
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def serve(argv: list[str], notebooks: Path, env: dict[str, str], port: int, token: str, open_: str) -> int:
    """Run the server until it exits or Ctrl-C / SIGTERM; print the URL once it answers."""
    proc = subprocess.Popen(argv, cwd=notebooks, env=env)  # noqa: S603 - our own argv

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
        url = f"http://{HOST}:{port}/lab/tree/{open_}?token={token}"
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
