"""Warm kernels: the run's notebook kernels forked from one process that has already imported torch & co.

Why: on the 2-core machines most of a demo notebook's time was not its work but starting Python,
ipykernel, torch, transformers, matplotlib and this package, once per notebook (31 times in
``make report``); ``benchmarks/bench_report.py`` measures both ways side by side.

Opt-in (``kernels: warm`` in the config, ``run --kernels warm``): by default every kernel starts the
standard papermill/nbclient way, which costs ``make report`` about 25 s more on 2 cores
(docs/benchmarks.md "Notebook report").

How (POSIX only, Linux; elsewhere, or with ``kernels: fresh``, every kernel starts as usual):

* :class:`WarmKernels` (in the runner) starts a *zygote* (``python -m eagle3_forensics.runs.warm
  zygote SOCKET``) with the run's kernel environment. It listens on a Unix socket at once, then
  imports :data:`PRELOAD` and serves.
* A private kernelspec named ``eagle3-forensics`` (the name the notebooks carry, first on
  ``$JUPYTER_PATH`` for the run's workers) starts a small *client* instead of ``ipykernel_launcher``.
  It sends its argv, working directory, environment and stdio descriptors, and the zygote forks.
  The child takes them over and runs a fresh ``IPKernelApp`` on jupyter_client's connection file.
  Every kernel is still a new process with its own interpreter state; only imported modules are
  shared, copy-on-write.
* The client stands in for the kernel towards jupyter_client: signals (interrupt, terminate) are
  forwarded to the child. One socket joins the two, so either's death ends the other: the client
  exits when the kernel does, and a killed client (papermill's immediate shutdown) ends the kernel.
* Nothing is lost when the zygote is not there, died or hangs: the client then ``exec``\\ s the
  ordinary ``ipykernel_launcher`` in its own place.

The fork happens only while the zygote has a single thread besides numpy's BLAS pool (and the
fork-safe threads of :data:`FORK_SAFE_THREADS`) and has not
initialised CUDA (both checked; it refuses to serve otherwise): on a GPU node each kernel
initialises CUDA itself, after the fork. Modules that hook into the IPython session when imported
are the other hazard: :data:`PRELOAD` leaves alone ``matplotlib.pyplot`` and its inline backend,
which a kernel imports inside its own session (checked). ``ipywidgets`` cannot be left alone: transformers imports
tqdm's notebook bars, and with them ipywidgets, whenever ipykernel is loaded, as in any kernel. So
each forked kernel runs the hooks of :data:`SESSION_HOOKS` once its session exists, before any
cell, doing what those imports did in a fresh kernel.

Stdlib only at the top: the client is started once per notebook and must start in milliseconds.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

#: Imported once by the zygote: what the notebooks' import cells and the probes' model loading
#: pull in (a test keeps it in step with notebooks/). A module missing here only costs time; one
#: that fails to import stops the zygote.
PRELOAD: tuple[str, ...] = (
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "IPython.display",
    "numpy",
    "torch",
    "safetensors.torch",
    "matplotlib",
    "matplotlib.figure",
    "transformers",
    "transformers.models.llama.modeling_llama",
    "transformers.models.llama.configuration_llama",
    "transformers.models.auto.modeling_auto",
    "transformers.tokenization_utils_fast",
    "pandas",  # every notebook's tables (views.html.show_table); 0.5 s CPU per kernel otherwise
    "pandas.io.formats.style",
    "eagle3_forensics.checks.diagnose",
    "eagle3_forensics.checks.data",
    "eagle3_forensics.vocab.inputs",
    "eagle3_forensics.vocab.coverage",
    "eagle3_forensics.reference.target",
    "eagle3_forensics.reference.drafter",
    "eagle3_forensics.probe.core",
    "eagle3_forensics.probe.offline",
    "eagle3_forensics.probe.samples",
    "eagle3_forensics.probe.server.core",
    "eagle3_forensics.probe.served",
    "eagle3_forensics.probe.why",
    "eagle3_forensics.runs.kernel",
    "eagle3_forensics.runs.record",
    "eagle3_forensics.views.html",
    "eagle3_forensics.views.plots",
    "eagle3_forensics.views.triage",
    "eagle3_forensics.views.probe",
    "eagle3_forensics.views.offline",
    "eagle3_forensics.views.server",
    "eagle3_forensics.views.repair",
    "eagle3_forensics.views.vocab_tables",
    "eagle3_forensics.views.widgets",
    "eagle3_forensics.views.explorers",
    "eagle3_forensics.views.next_steps",
    "eagle3_forensics.views.why",
    "eagle3_forensics.views.causes",
    "eagle3_forensics.vocab.special",
)
#: Must not be imported before the fork: at import they register with the running IPython session
#: (the inline backend's figure hooks), and the zygote has none.
COLD: tuple[str, ...] = ("matplotlib.pyplot", "matplotlib_inline.backend_inline")
#: (module, function): what a module did at import inside a session, redone in each forked kernel
#: whose zygote imported it without one (ipywidgets registers the ``jupyter.widget`` comm target).
SESSION_HOOKS: tuple[tuple[str, str], ...] = (("ipywidgets", "_handle_ipython"),)
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"  # what ipykernel sets when MPLBACKEND is unset
READY_TIMEOUT_S = 120.0  # a client waits this long for its fork, then starts an ordinary kernel
_HEADER = 8  # bytes: big-endian length of a request, or a forked child's pid
# what the client passes on to the kernel, and the kernel takes back from the zygote's settings
_FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


class ZygoteError(RuntimeError):
    """The zygote cannot serve (a preload failed, a thread was running); kernels start fresh."""


def supported() -> bool:
    """Whether warm kernels can work here: Linux with ``fork`` and descriptor passing."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and hasattr(socket, "send_fds")


# -- the runner side -------------------------------------------------------------------------------


class WarmKernels:
    """A zygote and the kernelspec that reaches it, for the lifetime of a ``with`` block.

    ``env`` is the kernels' environment on top of ours (the config's ``env``; ``None`` unsets).
    :meth:`kernel_env` is what the workers put in their environment so that kernel name
    ``eagle3-forensics`` starts a client of this zygote.
    """

    def __init__(self, env: dict[str, str | None] | None = None) -> None:
        self._env = dict(env or {})
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def socket_path(self) -> str:
        assert self._dir is not None, "WarmKernels used outside its with-block"
        return str(self._dir / "zygote.sock")

    def __enter__(self) -> WarmKernels:
        # mode 0700, so only this user reaches the socket; short: a socket path has at most 107 bytes
        self._dir = Path(tempfile.mkdtemp(prefix="e3f-warm-"))
        env = {k: v for k, v in os.environ.items()}
        for k, v in self._env.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        # The zygote does not wait for its parent to ask: it binds, preloads and serves; a client
        # that comes early waits in the listen backlog. stdin is the lifeline: EOF ends the zygote.
        self._proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", _MODULE, "zygote", self.socket_path],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            env=env,
            cwd=str(self._dir),
        )
        spec_dir = self._dir / "kernels" / KERNEL_NAME
        spec_dir.mkdir(parents=True)
        spec = kernelspec(self.socket_path)
        (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
        return self

    def kernel_env(self) -> dict[str, str]:
        """``JUPYTER_PATH`` with this run's warm kernelspec first."""
        assert self._dir is not None, "WarmKernels used outside its with-block"
        current = [p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p]
        return {"JUPYTER_PATH": os.pathsep.join([str(self._dir), *current])}

    def __exit__(self, *exc: object) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.close()  # the zygote kills what it forked and exits
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


KERNEL_NAME = "eagle3-forensics"  # == runs.kernel.KERNEL_NAME, kept here so the client imports nothing
_MODULE = "eagle3_forensics.runs.warm"  # not __name__: that is "__main__" in the zygote and the client


def kernelspec(socket_path: str) -> dict[str, Any]:
    """ipykernel's own ``kernel.json`` for this interpreter, with the client in front of its arguments."""
    from ipykernel.kernelspec import get_kernel_dict  # optional: ipykernel (the notebooks extra)

    spec = get_kernel_dict()
    argv = list(spec["argv"])
    # [python, -m, ipykernel_launcher, -f, {connection_file}]: the client takes the kernel's arguments
    rest = argv[3:] if argv[1:3] == ["-m", "ipykernel_launcher"] else ["-f", "{connection_file}"]
    spec["argv"] = [sys.executable, "-m", _MODULE, "kernel", socket_path, *rest]
    spec["display_name"] = "eagle3-forensics (warm)"
    return spec


# -- the client: the kernel process jupyter_client sees ---------------------------------------------


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _fresh_kernel(args: list[str]) -> None:
    """Become an ordinary kernel: what the kernelspec would have started without a zygote."""
    os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *args])  # noqa: S606


def client(socket_path: str, args: list[str]) -> int:
    """Ask the zygote for a kernel with ``args``; stand in for it until it exits."""
    request = json.dumps({"args": args, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(READY_TIMEOUT_S)
        conn.connect(socket_path)
        socket.send_fds(conn, [len(request).to_bytes(_HEADER, "big")], [0, 1, 2])
        conn.sendall(request)
        pid = int.from_bytes(_recv_exact(conn, _HEADER), "big")
    except OSError:  # no zygote, a dead one, or one that did not answer in time
        conn.close()
        _fresh_kernel(args)
        return 1  # not reached

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    for sig in (signal.SIGINT, *_FORWARDED):
        signal.signal(sig, forward)
    conn.settimeout(None)
    with contextlib.suppress(OSError):
        while conn.recv(4096):  # nothing is sent: EOF is the kernel's exit
            pass
    return 0


# -- the zygote ----------------------------------------------------------------------------------------


# Threads that survive a fork safely by name: jemalloc's purging threads (pyarrow's allocator, which
# pandas imports) are stopped around fork by jemalloc's own handlers (its prefork takes their locks,
# postfork_child resets them to none), as OpenBLAS does with its pool.
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})


def _threads() -> int:
    """The process's threads, those in :data:`FORK_SAFE_THREADS` left out."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return threading.active_count()
    n = 0
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/comm", encoding="utf-8") as fh:
                name = fh.read().strip()
        except OSError:  # the thread ended meanwhile
            continue
        n += name not in FORK_SAFE_THREADS
    return n


def preload(modules: tuple[str, ...] = PRELOAD) -> None:
    """Import ``modules`` the way the kernels will find them; raise :class:`ZygoteError` when the
    process is then not safe to fork from."""
    # as ipykernel does before any kernel code runs: the inline backend unless one was asked for
    os.environ.setdefault("MPLBACKEND", INLINE_BACKEND)
    # numpy's OpenBLAS starts its thread pool at import (one thread per core unless the env limits
    # it); that pool is fork-safe: OpenBLAS shuts it down at fork (pthread_atfork) and the child
    # starts its own. Any other thread (torch's OpenMP pool once used, a Python thread) is not.
    _import("numpy")
    blas_pool = _threads() - 1
    for name in modules:
        _import(name)
    early = [m for m in COLD if m in sys.modules]
    if early:
        raise ZygoteError(f"preloading imported {', '.join(early)}, which must load inside a kernel")
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():  # a forked child cannot use CUDA then
        raise ZygoteError("CUDA was initialised while preloading; kernels must initialise it themselves")
    if threading.active_count() != 1 or _threads() > 1 + blas_pool:
        raise ZygoteError(
            f"{_threads()} threads after preloading ({blas_pool} of numpy's BLAS pool): "
            "forking would copy a lock held by another"
        )


def _import(name: str) -> None:
    try:
        importlib.import_module(name)
    except Exception as exc:
        raise ZygoteError(f"cannot preload {name}: {type(exc).__name__}: {exc}") from exc


def _become_kernel(conn: socket.socket, fds: list[int], request: dict[str, Any], zygote_cwd: str) -> None:
    """In the forked child: take over the client's stdio, directory and environment; run a kernel."""
    os.setsid()  # as jupyter_client starts kernels: a terminal's Ctrl-C is the runner's, not ours
    for sig in (signal.SIGCHLD, *_FORWARDED):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for i, fd in enumerate(fds[:3]):
        os.dup2(fd, i)
    for fd in fds:
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    args = [str(a) for a in request["args"]]
    sys.argv = [sys.executable, *args]
    # as ipykernel_launcher: the launch directory leaves sys.path; the shell puts '' back
    if sys.path and sys.path[0] in ("", zygote_cwd):
        del sys.path[0]

    def watch() -> None:  # the client's end closes when it exits or is killed: so do we
        with contextlib.suppress(OSError):
            while conn.recv(4096):
                pass
        os._exit(1)

    threading.Thread(target=watch, name="e3f-warm-client", daemon=True).start()
    from ipykernel.kernelapp import IPKernelApp  # heavy: ipykernel (preloaded; not in the client)

    code = 0
    try:
        app = IPKernelApp.instance()  # launch_instance, with the session hooks between its two steps
        app.initialize(args)
        for module, hook in SESSION_HOOKS:
            if module in sys.modules:
                getattr(sys.modules[module], hook)()
        app.start()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    os._exit(code)


def _serve_one(listener: socket.socket, children: set[int], zygote_cwd: str) -> None:
    conn, _ = listener.accept()
    fds: list[int] = []
    try:
        conn.settimeout(10)
        head, fds, _flags, _addr = socket.recv_fds(conn, _HEADER, 3)
        if len(head) < _HEADER:
            head += _recv_exact(conn, _HEADER - len(head))
        request = json.loads(_recv_exact(conn, int.from_bytes(head, "big")))
    except (OSError, ValueError):
        _drop(conn, fds)
        return
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    try:
        pid = os.fork()
    except OSError:  # out of processes or memory: this client starts an ordinary kernel instead
        _drop(conn, fds)
        return
    if pid == 0:  # the child never returns into the loop
        try:
            conn.settimeout(None)
            listener.close()
            _become_kernel(conn, fds, request, zygote_cwd)
        finally:
            os._exit(1)
    children.add(pid)
    with contextlib.suppress(OSError):
        conn.sendall(pid.to_bytes(_HEADER, "big"))
    _drop(conn, fds)


def _drop(conn: socket.socket, fds: list[int]) -> None:
    """The zygote's copies of a client's connection and descriptors (a forked child keeps its own)."""
    for fd in fds:
        os.close(fd)
    conn.close()


def _reap(children: set[int]) -> None:
    for pid in list(children):
        with contextlib.suppress(ChildProcessError):
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done == 0:
                continue
        children.discard(pid)


def zygote(socket_path: str) -> int:
    """Bind, preload, then fork a kernel per client until stdin closes; return the exit code."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C stops the runner, which closes stdin
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(64)
    try:
        preload()
    except ZygoteError as exc:
        listener.close()
        with contextlib.suppress(OSError):
            os.unlink(socket_path)  # clients now fail to connect and start ordinary kernels
        sys.stderr.write(f"eagle3-forensics: warm kernels off, kernels start fresh: {exc}\n")
        return 1
    children: set[int] = set()
    zygote_cwd = os.getcwd()
    stdin = sys.stdin.fileno()
    try:
        while True:
            ready, _, _ = select.select([listener, stdin], [], [], 1.0)
            _reap(children)
            if stdin in ready and not os.read(stdin, 4096):
                break
            if listener in ready:
                _serve_one(listener, children, zygote_cwd)
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while children and time.monotonic() < deadline:
            _reap(children)
            time.sleep(0.02)
        listener.close()
        with contextlib.suppress(OSError):
            os.unlink(socket_path)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) >= 2 and args[0] == "zygote":
        return zygote(args[1])
    if len(args) >= 2 and args[0] == "kernel":
        return client(args[1], args[2:])
    sys.stderr.write(
        "usage: python -m eagle3_forensics.runs.warm zygote SOCKET | kernel SOCKET KERNEL-ARGS...\n"
    )
    return 2


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "COLD",
    "PRELOAD",
    "WarmKernels",
    "ZygoteError",
    "client",
    "kernelspec",
    "preload",
    "supported",
    "zygote",
]
