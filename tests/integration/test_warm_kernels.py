"""Warm kernels (runs.warm): forked from a preloaded zygote, yet each one a fresh kernel to the notebook.

Opt-in (``kernels: warm``; the default is fresh). What a notebook can see must match a kernel
started the ordinary way; failures (a cell past its timeout, a kernel that dies) must end as they
do there, leaving no process behind; without a zygote the kernelspec still starts an ordinary kernel.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from notebook_builders import run_config, write_notebook
from paths import DEMO, ROOT

nbformat = pytest.importorskip("nbformat")
papermill = pytest.importorskip("papermill")
yaml = pytest.importorskip("yaml")

from eagle3_forensics.runs import warm  # noqa: E402
from eagle3_forensics.runs.config import config_from_dict  # noqa: E402
from eagle3_forensics.runs.execute import scoped_environ  # noqa: E402
from eagle3_forensics.runs.record import ENV_VAR  # noqa: E402
from eagle3_forensics.runs.runner import run  # noqa: E402

pytestmark = [
    pytest.mark.notebooks,
    pytest.mark.skipif(not warm.supported(), reason="warm kernels need Linux (fork and descriptor passing)"),
]


# What a notebook can observe of its kernel; every value must be the same in a warm and a fresh one.
LOOK = """
import json, os, signal, subprocess, sys, threading
import ipywidgets  # a fresh kernel registers the widget comm targets here; a warm one already has
import matplotlib
from eagle3_forensics.runs.record import record
ip = get_ipython()
comm_targets = sorted(ip.kernel.comm_manager.targets) if hasattr(ip.kernel, "comm_manager") else None
import matplotlib.pyplot as plt
plt.figure(figsize=(1, 1)); plt.plot([0, 1])
record("metrics", {
    "pid": os.getpid(),
    "cwd": os.getcwd(),
    "record_env": os.environ.get("E3F_RECORD", "").endswith(".record.json"),
    "interactive": os.environ.get("E3F_INTERACTIVE"),
    "omp": os.environ.get("OMP_NUM_THREADS"),
    "backend": matplotlib.get_backend(),
    "shell": type(ip).__name__,
    "sys_path_0": sys.path[0],
    "cwd_on_path": os.getcwd() in sys.path,
    "name": __name__,
    "comm_targets": comm_targets,
    "user_ns_torch": "torch" in ip.user_ns,
    "threads_before": threading.active_count() >= 1,
    "subprocess_ok": subprocess.run([sys.executable, "-c", "pass"]).returncode == 0,  # SIGCHLD as usual
    "session_leader": os.getsid(0) == os.getpid(),  # jupyter_client starts kernels in a new session
    "sigint": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
})
"""


# multi-threaded matrix products in a forked kernel (numpy's OpenBLAS pool, torch's OpenMP pool)
BLAS = """
import numpy as np, torch
a = np.arange(400 * 400, dtype=np.float64).reshape(400, 400) % 7
torch.set_num_threads(2)
record("metrics", {
    "pid": os.getpid(),
    "blas": float((a @ a).sum()),
    "torch": float((torch.from_numpy(a) @ torch.from_numpy(a)).sum()),
    "expected": float((a.sum(0) * a.sum(1)).sum()),
})
"""


def _run(tmp_path: Path, data: dict[str, Any], name: str) -> dict[str, Any]:
    out = tmp_path / name
    cfg = config_from_dict(data, base=tmp_path)
    run(cfg, out, progress=False, log=lambda _msg: None)
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return summary


def _runs(summary: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["drafter"], r["notebook"]): r for r in summary["runs"]}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.timeout(240)
def test_a_warm_kernel_looks_like_a_fresh_one_and_keeps_nothing_of_another(tmp_path: Path) -> None:
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    params = ("parameters", "checkpoint = None")
    write_notebook(nbs / "01_look.ipynb", params, ("code", LOOK))
    # module state is per process: what one notebook does to a preloaded module, the next never sees
    write_notebook(nbs / "02_mark.ipynb", params, ("code", "import torch\ntorch._e3f_mark = 1"))
    write_notebook(
        nbs / "03_check.ipynb",
        params,
        (
            "code",
            "import torch\nfrom eagle3_forensics.runs.record import record\n"
            "record('metrics', {'marked': hasattr(torch, '_e3f_mark')})",
        ),
    )
    data = run_config(
        nbs,
        ["01_look", "02_mark", "03_check"],
        {"d": str(tmp_path)},
        workers=1,
        timeout=120,
        env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
        kernels="warm",  # opt-in; the default is fresh
    )
    warm_runs = _runs(_run(tmp_path, data, "warm"))
    fresh_runs = _runs(_run(tmp_path, {**data, "kernels": "fresh"}, "fresh"))
    assert all(r["status"] == "ok" for r in [*warm_runs.values(), *fresh_runs.values()])
    seen_warm = dict(warm_runs[("d", "01_look")]["metrics"])
    seen_fresh = dict(fresh_runs[("d", "01_look")]["metrics"])
    assert seen_warm.pop("pid") != seen_fresh.pop("pid")
    assert seen_warm == seen_fresh
    assert seen_warm["backend"] == "module://matplotlib_inline.backend_inline"
    assert "jupyter.widget" in (seen_warm["comm_targets"] or [])
    assert warm_runs[("d", "03_check")]["metrics"] == {"marked": False}
    # the figure reached the notebook as it does from a fresh kernel
    executed = nbformat.read(str(tmp_path / "warm" / "runs" / "d__01_look.ipynb"), as_version=4)
    mimes = [k for c in executed.cells for o in c.get("outputs", []) for k in o.get("data", {})]
    assert "image/png" in mimes


@pytest.mark.timeout(240)
def test_timeouts_and_dead_kernels_fail_as_usual_and_leave_no_process(tmp_path: Path) -> None:
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    params = ("parameters", "checkpoint = None")
    pid = (
        "import os\nfrom eagle3_forensics.runs.record import record\nrecord('metrics', {'pid': os.getpid()})"
    )
    write_notebook(nbs / "01_slow.ipynb", params, ("code", pid), ("code", "import time\ntime.sleep(120)"))
    write_notebook(nbs / "02_dies.ipynb", params, ("code", pid), ("code", "os._exit(3)"))
    write_notebook(nbs / "03_ok.ipynb", params, ("code", pid), ("code", BLAS))
    data = run_config(
        nbs, ["01_slow", "02_dies", "03_ok"], {"d": str(tmp_path)}, workers=2, timeout=4, kernels="warm"
    )
    # no thread limits: the zygote holds numpy's BLAS pool, which the kernels then use, as torch's
    with scoped_environ({"OMP_NUM_THREADS": None, "MKL_NUM_THREADS": None, "OPENBLAS_NUM_THREADS": None}):
        runs = _runs(_run(tmp_path, data, "out"))
    slow, dies, ok = (runs[("d", n)] for n in ("01_slow", "02_dies", "03_ok"))
    assert (
        ok["status"] == "ok" and ok["metrics"]["blas"] == ok["metrics"]["torch"] == ok["metrics"]["expected"]
    )
    assert slow["status"] == "failed" and "timed out" in slow["error"].lower()
    assert dies["status"] == "failed" and "dead" in dies["error"].lower()
    pids = [r["metrics"]["pid"] for r in (slow, dies, ok)]
    assert len(set(pids)) == 3
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)]
    zygotes = [p for p in os.listdir("/proc") if p.isdigit() and b"runs.warm\x00zygote" in _cmdline(int(p))]
    assert not [p for p in zygotes if _alive(int(p))]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.timeout(120)
def test_without_a_zygote_the_kernelspec_starts_an_ordinary_kernel(tmp_path: Path) -> None:
    spec_dir = tmp_path / "jp" / "kernels" / warm.KERNEL_NAME
    spec_dir.mkdir(parents=True)
    spec = warm.kernelspec(str(tmp_path / "no-such.sock"))
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    nb = write_notebook(
        tmp_path / "argv.ipynb",
        ("code", "import sys\nfrom eagle3_forensics.runs.record import record\nrecord('argv0', sys.argv[0])"),
    )
    sidecar = tmp_path / "argv.record.json"
    with scoped_environ({"JUPYTER_PATH": str(tmp_path / "jp"), ENV_VAR: str(sidecar)}):
        papermill.execute_notebook(
            str(nb), str(tmp_path / "out.ipynb"), kernel_name=warm.KERNEL_NAME, progress_bar=False
        )
    assert json.loads(sidecar.read_text())["argv0"].endswith("ipykernel_launcher.py")


@pytest.mark.timeout(300)
def test_demo_notebooks_give_the_same_results_in_warm_and_fresh_kernels(tmp_path: Path) -> None:
    """The real notebooks over two demo drafters: summaries and outputs agree, measured speeds aside."""
    config = yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text(encoding="utf-8"))
    config["notebooks_dir"] = str(ROOT / "notebooks")
    config["drafters"] = {
        "healthy": str(DEMO / "drafters" / "healthy"),
        "d2t_absolute": {
            "checkpoint": str(DEMO / "drafters" / "d2t_absolute"),
            "notebooks": ["00_triage", "02_vocab_mapping"],
        },
    }
    config["notebooks"] = {
        k: v for k, v in config["notebooks"].items() if k in ("00_triage", "02_vocab_mapping")
    }
    base = ROOT / "configs"
    cfg_warm = config_from_dict({**config, "kernels": "warm"}, base=base)
    cfg_fresh = config_from_dict({**config, "kernels": "fresh"}, base=base)
    for cfg, name in ((cfg_warm, "warm"), (cfg_fresh, "fresh")):
        assert run(cfg, tmp_path / name, progress=False, log=lambda _m: None) == 0
    speed = re.compile(r"[0-9.]+ tok/s|[0-9.]+×")

    def outputs(name: str, stem: str) -> list[Any]:
        nb = nbformat.read(str(tmp_path / name / "runs" / f"{stem}.ipynb"), as_version=4)
        seen = []
        for cell in nb.cells:
            for o in cell.get("outputs", []):
                data = {
                    k: (len(v) if k == "image/png" else speed.sub("#", str(v)))
                    for k, v in o.get("data", {}).items()
                }
                seen.append((o.get("output_type"), o.get("name"), o.get("text"), data))
        return seen

    def strip(run_: dict[str, Any]) -> dict[str, Any]:
        timed = ("tokens_per_s", "speedup_vs_greedy")  # measured speeds
        metrics = {k: v for k, v in run_["metrics"].items() if k not in timed}
        return {**{k: v for k, v in run_.items() if k not in ("duration_s", "attempts")}, "metrics": metrics}

    for key, w in _runs(json.loads((tmp_path / "warm" / "summary.json").read_text())).items():
        f = _runs(json.loads((tmp_path / "fresh" / "summary.json").read_text()))[key]
        assert strip(w) == strip(f), key
        stem = f"{key[0]}__{key[1]}"
        assert outputs("warm", stem) == outputs("fresh", stem), key
