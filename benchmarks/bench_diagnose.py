"""Benchmark: ``diagnose`` on a Llama-3.1-8B-shaped EAGLE-3 drafter versus a full ``load_file``.

Not a timed test: it prints a side-by-side table and PASS/FAIL against the targets stated in
the issue, and exits 1 when a target is missed.

What it does:

1. Writes a Llama-3.1-8B-shaped EAGLE-3 drafter (SpecForge naming, hidden 4096, intermediate
   14336, 32/8 heads, head_dim 128, vocab 128256, draft vocab 32000, bf16: 425M parameters,
   about 0.85 GB, no embed_tokens) and a ~1 MB drafter of the same structure into a temporary directory (or ``--keep DIR``). The
   safetensors files are streamed one tensor at a time, so at most one tensor is in memory.
2. Measures each operation in a fresh ``python`` subprocess that does only the imports and the
   operation, then reports the operation's wall time and the child's peak RSS (``VmHWM`` from
   ``/proc/self/status``; not ``ru_maxrss``, which Linux carries over from the parent across
   fork+exec). Every child imports the same modules (torch, safetensors.torch,
   eagle3_forensics.checks.diagnose), so "imports only" is the common baseline and the "+ vs imports"
   column is the increment over it. Operations, interleaved for ``--repeats`` rounds:

   - imports only
   - ``diagnose(small)``
   - ``diagnose(big)``
   - ``safetensors.torch.load_file(big)``: safetensors >= 0.8 returns mmap-backed tensors whose
     pages are read lazily, so this alone reads almost nothing;
   - the same plus touching every 4 KiB page of every tensor (what any consumer of the tensors pays);
   - ``load_file(big, backend="pread")`` (when available): every byte read into process memory.

   Medians over the rounds are reported. ``eagle3-forensics inspect big`` is timed once.
3. Targets: diagnose costs the same on both sizes, within 1.5x in time and +100 MB in peak RSS.
   The exit status is 1 when a target is missed.

Page cache: the big file was just written (or, with ``--keep``, recently read), so it is in
the page cache for every measurement; diagnose and every load_file variant see the same warm cache.

Threads: children inherit OMP_NUM_THREADS; ``--threads N`` sets it. On a small, busy machine
torch's default intra-op threading makes tiny tensor ops wait on descheduled OpenMP workers,
which shows up as noisy diagnose times; compare with ``--threads 1``.

Usage::

    .venv/bin/python benchmarks/bench_diagnose.py [--repeats 3] [--keep DIR] [--threads N] [--profile]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

# ---------------------------------------------------------------------------------------------
# Drafter shapes
# ---------------------------------------------------------------------------------------------

BIG: dict[str, Any] = {
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 128256,
    "draft_vocab_size": 32000,
    "rope_theta": 500000.0,
    "max_position_embeddings": 131072,
}
# Same structure, ~1 MB in bf16.
SMALL: dict[str, Any] = {
    "hidden_size": 128,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "vocab_size": 2048,
    "draft_vocab_size": 1024,
    "rope_theta": 500000.0,
    "max_position_embeddings": 131072,
}

TIME_RATIO_TARGET = 1.5  # time(diagnose big) / time(diagnose small)
RSS_DELTA_TARGET_MB = 100.0  # peak RSS(diagnose big) - peak RSS(diagnose small)

_ST_DTYPE = {torch.bfloat16: "BF16", torch.int64: "I64", torch.bool: "BOOL", torch.float32: "F32"}


def drafter_config(dims: dict[str, Any]) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": dims["hidden_size"],
        "intermediate_size": dims["intermediate_size"],
        "num_attention_heads": dims["num_attention_heads"],
        "num_key_value_heads": dims["num_key_value_heads"],
        "head_dim": dims["head_dim"],
        "num_hidden_layers": 1,
        "vocab_size": dims["vocab_size"],
        "draft_vocab_size": dims["draft_vocab_size"],
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "rms_norm_eps": 1e-05,
        "rope_theta": dims["rope_theta"],
        "max_position_embeddings": dims["max_position_embeddings"],
        "hidden_act": "silu",
    }


def tensor_specs(dims: dict[str, Any]) -> list[tuple[str, tuple[int, ...], torch.dtype]]:
    """SpecForge key names and shapes (docs/reference/formats.md §0)."""
    h, i = dims["hidden_size"], dims["intermediate_size"]
    q = dims["num_attention_heads"] * dims["head_dim"]
    kv = dims["num_key_value_heads"] * dims["head_dim"]
    big_v, v = dims["vocab_size"], dims["draft_vocab_size"]
    bf = torch.bfloat16
    return [
        ("fc.weight", (h, 3 * h), bf),
        ("midlayer.self_attn.q_proj.weight", (q, 2 * h), bf),
        ("midlayer.self_attn.k_proj.weight", (kv, 2 * h), bf),
        ("midlayer.self_attn.v_proj.weight", (kv, 2 * h), bf),
        ("midlayer.self_attn.o_proj.weight", (h, q), bf),
        ("midlayer.mlp.gate_proj.weight", (i, h), bf),
        ("midlayer.mlp.up_proj.weight", (i, h), bf),
        ("midlayer.mlp.down_proj.weight", (h, i), bf),
        ("midlayer.input_layernorm.weight", (h,), bf),
        ("midlayer.hidden_norm.weight", (h,), bf),
        ("midlayer.post_attention_layernorm.weight", (h,), bf),
        ("norm.weight", (h,), bf),
        ("lm_head.weight", (v, h), bf),
        ("d2t", (v,), torch.int64),
        ("t2d", (big_v,), torch.bool),
    ]


def _vocab_selection(big_v: int, v: int, gen: torch.Generator) -> torch.Tensor:
    """Ascending selected target ids starting 0, 1, 2, ... (the low ids always kept, as trainers do)."""
    keep = min(256, v)
    rest = torch.randperm(big_v - keep, generator=gen)[: v - keep] + keep
    return torch.cat([torch.arange(keep), rest.sort().values])


def _make_tensor(
    name: str, shape: tuple[int, ...], dtype: torch.dtype, sel: torch.Tensor, big_v: int, gen: torch.Generator
) -> torch.Tensor:
    if name == "d2t":
        return (sel - torch.arange(sel.numel())).to(torch.int64)
    if name == "t2d":
        t2d = torch.zeros(big_v, dtype=torch.bool)
        t2d[sel] = True
        return t2d
    if name.endswith("norm.weight"):
        return (1.0 + 0.02 * torch.randn(shape, generator=gen)).to(dtype)
    out = torch.empty(shape, dtype=dtype)
    # Fill in row blocks so a float32 temporary never exceeds ~64 MB.
    rows_per_block = max(1, (1 << 24) // max(1, math.prod(shape[1:])))
    for start in range(0, shape[0], rows_per_block):
        block = out[start : start + rows_per_block]
        block.copy_(0.02 * torch.randn(block.shape, generator=gen))
    return out


def write_drafter(dst: Path, dims: dict[str, Any], seed: int = 0) -> int:
    """Write config.json + model.safetensors, streaming one tensor at a time. Returns file bytes."""
    dst.mkdir(parents=True, exist_ok=True)
    specs = tensor_specs(dims)
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape, dtype in specs:
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        header[name] = {
            "dtype": _ST_DTYPE[dtype],
            "shape": list(shape),
            "data_offsets": [offset, offset + nbytes],
        }
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # safetensors pads the header with spaces to 8-byte alignment
    gen = torch.Generator().manual_seed(seed)
    sel = _vocab_selection(dims["vocab_size"], dims["draft_vocab_size"], gen)
    tmp = dst / "model.safetensors.partial"
    with tmp.open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        for name, shape, dtype in specs:
            t = _make_tensor(name, shape, dtype, sel, dims["vocab_size"], gen).contiguous()
            fh.write(t.view(torch.uint8).numpy().data)  # raw little-endian bytes, no extra copy
            del t
    tmp.replace(dst / "model.safetensors")
    (dst / "config.json").write_text(json.dumps(drafter_config(dims), indent=2) + "\n")
    return (dst / "model.safetensors").stat().st_size


def drafter_is_current(dst: Path, dims: dict[str, Any]) -> bool:
    """True if ``dst`` already holds a drafter this script wrote with these dims (for --keep)."""
    try:
        cfg = json.loads((dst / "config.json").read_text())
        from safetensors import safe_open

        with safe_open(str(dst / "model.safetensors"), framework="pt") as fh:
            shapes = {k: tuple(fh.get_slice(k).get_shape()) for k in fh.keys()}  # noqa: SIM118
    except Exception:
        return False
    want = {name: shape for name, shape, _ in tensor_specs(dims)}
    return cfg == drafter_config(dims) and shapes == want


# ---------------------------------------------------------------------------------------------
# Measurement children
# ---------------------------------------------------------------------------------------------

# Every child imports the same modules, so the "imports only" row is the common baseline.
# Peak RSS is VmHWM of the child's own address space. ru_maxrss is NOT used: Linux carries the
# parent's high-water mark across fork+exec into RUSAGE_SELF, so every child would report the
# benchmark parent's peak (~600 MB after writing the big file) instead of its own.
_CHILD = r"""
import json, sys, time
import torch
import safetensors.torch
from eagle3_forensics.checks.diagnose import diagnose

op, path = sys.argv[1], sys.argv[2]
summary = {}
t0 = time.perf_counter()
if op == "diagnose":
    d = diagnose(path)
    summary = {"verdict": d.verdict(), "findings": sorted(f.code for f in d.findings)}
elif op == "load_file":  # safetensors' default backend: mmap-backed tensors, pages read lazily
    sd = safetensors.torch.load_file(path)
    summary = {"tensors": len(sd), "bytes": sum(t.numel() * t.element_size() for t in sd.values())}
elif op == "load_file_touch":  # default load_file, then touch one byte per 4 KiB page of every tensor
    sd = safetensors.torch.load_file(path)
    chk = sum(int(t.reshape(-1).view(torch.uint8)[::4096].sum()) for t in sd.values())
    summary = {"tensors": len(sd), "checksum": chk}
elif op == "load_file_pread":  # eager: every byte read into process memory
    sd = safetensors.torch.load_file(path, backend="pread")
    summary = {"tensors": len(sd)}
elif op == "cli_inspect":  # what the eagle3-forensics console script runs
    import contextlib, io
    from eagle3_forensics.cli.main import main
    with contextlib.redirect_stdout(io.StringIO()):
        summary = {"exit": main(["inspect", path])}
elif op == "imports":
    pass
else:
    raise SystemExit("unknown op " + op)
op_s = time.perf_counter() - t0
status = {}
with open("/proc/self/status") as fh:
    for line in fh:
        key, _, rest = line.partition(":")
        if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
            status[key] = int(rest.split()[0])
print("BENCH_RESULT " + json.dumps({"op_s": op_s, "hwm_kb": status["VmHWM"], "status": status,
                                    "threads": torch.get_num_threads(), "summary": summary}))
"""

_PROFILE_CHILD = r"""
import cProfile, pstats, sys
import torch, safetensors.torch
from eagle3_forensics.checks.diagnose import diagnose
prof = cProfile.Profile()
prof.enable()
diagnose(sys.argv[1])
prof.disable()
st = pstats.Stats(prof, stream=sys.stdout)
st.sort_stats("cumulative").print_stats(18)
st.sort_stats("tottime").print_stats(10)
"""


def _child_env(threads: int | None) -> dict[str, str]:
    env = dict(os.environ)
    if threads is not None:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(threads)
    return env


def run_child(op: str, path: Path, threads: int | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, op, str(path)],
        capture_output=True,
        text=True,
        check=False,
        env=_child_env(threads),
    )
    wall = time.perf_counter() - t0
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH_RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"child {op} {path} failed (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    out: dict[str, Any] = json.loads(line[len("BENCH_RESULT ") :])
    out["process_s"] = wall
    return out


def run_console_inspect(path: Path, threads: int | None) -> tuple[float, int]:
    """Wall time of the real ``eagle3-forensics inspect PATH`` console script (whole process)."""
    exe = Path(sys.executable).with_name("eagle3-forensics")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "eagle3_forensics"]
    t0 = time.perf_counter()
    proc = subprocess.run(
        [*cmd, "inspect", str(path)], capture_output=True, check=False, env=_child_env(threads)
    )
    return time.perf_counter() - t0, proc.returncode


def _has_pread_backend() -> bool:
    import inspect

    import safetensors.torch

    return "backend" in inspect.signature(safetensors.torch.load_file).parameters


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


def _mb(kb: float) -> float:
    return kb / 1024.0


def _fmt_s(s: float) -> str:
    return f"{s * 1000:.1f} ms" if s < 10 else f"{s:.2f} s"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--repeats", type=int, default=3, help="interleaved rounds per operation (median reported)"
    )
    ap.add_argument(
        "--keep", type=Path, help="write the drafters here and keep them; reused if already there"
    )
    ap.add_argument(
        "--threads", type=int, help="OMP_NUM_THREADS/MKL_NUM_THREADS for the children (default: inherit)"
    )
    ap.add_argument(
        "--profile", action="store_true", help="also print a cProfile of diagnose(big) in a child"
    )
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")

    tmpdir: str | None = None
    if args.keep is not None:
        root = args.keep.resolve()
    else:
        tmpdir = tempfile.mkdtemp(prefix="bench_diagnose_")
        root = Path(tmpdir)
    big_dir, small_dir = root / "big", root / "small"
    big_file = big_dir / "model.safetensors"
    try:
        for label, d, dims in (("small", small_dir, SMALL), ("big", big_dir, BIG)):
            if drafter_is_current(d, dims):
                print(f"reusing {label} drafter: {d}")
                continue
            t0 = time.perf_counter()
            write_drafter(d, dims, seed=0 if label == "big" else 1)
            print(f"wrote {label} drafter: {d} in {time.perf_counter() - t0:.1f} s")
        big_bytes = big_file.stat().st_size
        small_bytes = (small_dir / "model.safetensors").stat().st_size
        print(
            f"big drafter:   {big_bytes / 2**20:8.1f} MB  (Llama-3.1-8B shapes, bf16, SpecForge keys, 15 tensors)"
        )
        print(
            f"small drafter: {small_bytes / 2**20:8.3f} MB  (same keys and structure, hidden {SMALL['hidden_size']})"
        )
        print("page cache: WARM. The big file was just written (or reused with --keep), so diagnose and")
        print("            every load_file variant read it from the page cache; no cache drop is attempted.")
        threads = (
            args.threads if args.threads is not None else os.environ.get("OMP_NUM_THREADS", "torch default")
        )
        load0 = os.getloadavg()[0]
        print(
            f"python {sys.version.split()[0]}, torch {torch.__version__}, {os.cpu_count()} CPUs, "
            f"intra-op threads: {threads}, load average at start {load0:.2f}"
        )
        print(
            f"{args.repeats} interleaved round(s), one fresh subprocess per measurement, medians reported\n"
        )

        ops: list[tuple[str, str, Path]] = [
            ("imports only", "imports", small_dir),
            ("diagnose(small)", "diagnose", small_dir),
            ("diagnose(big)", "diagnose", big_dir),
            ("load_file(big)", "load_file", big_file),
            ("load_file+touch", "load_file_touch", big_file),
        ]
        if _has_pread_backend():
            ops.append(("load_file pread", "load_file_pread", big_file))
        results: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in ops}
        for r in range(args.repeats):
            for label, op, path in ops:
                results[label].append(run_child(op, path, args.threads))
            print(f"  round {r + 1}/{args.repeats} done", file=sys.stderr)

        med: dict[str, dict[str, float]] = {}
        for label, runs in results.items():
            med[label] = {
                "op_s": statistics.median(x["op_s"] for x in runs),
                "process_s": statistics.median(x["process_s"] for x in runs),
                "hwm_kb": statistics.median(x["hwm_kb"] for x in runs),
            }
        base_kb = med["imports only"]["hwm_kb"]

        head = f"{'operation':<17}{'op time':>11}{'min..max':>20}{'process':>11}{'peak RSS':>12}{'+ vs imports':>14}"
        print(head)
        print("-" * len(head))
        for label, _, _ in ops:
            m, runs = med[label], results[label]
            lo, hi = min(x["op_s"] for x in runs), max(x["op_s"] for x in runs)
            spread = f"{lo * 1000:.1f}..{hi * 1000:.1f} ms"
            print(
                f"{label:<17}{_fmt_s(m['op_s']):>11}{spread:>20}{_fmt_s(m['process_s']):>11}"
                f"{_mb(m['hwm_kb']):>9.1f} MB{_mb(m['hwm_kb'] - base_kb):>+11.1f} MB"
            )
        print(
            "(op time: the operation only, inside the child; process: child wall incl. start-up and imports;"
        )
        print(
            " peak RSS: the child's VmHWM; load_file(big) is safetensors' default mmap backend, which returns"
        )
        print(" lazily paged tensors; +touch pages in every 4 KiB page; pread reads every byte into memory)")

        inspect_op = run_child("cli_inspect", big_dir, args.threads)
        console_s, console_rc = run_console_inspect(big_dir, args.threads)
        print(
            f"\neagle3-forensics inspect big: console script {_fmt_s(console_s)} wall (exit {console_rc}); "
            f"in-process {_fmt_s(inspect_op['op_s'])}, peak RSS {_mb(inspect_op['hwm_kb']):.1f} MB "
            f"({_mb(inspect_op['hwm_kb'] - base_kb):+.1f} MB vs imports)"
        )

        small_sum = results["diagnose(small)"][0]["summary"]
        big_sum = results["diagnose(big)"][0]["summary"]
        print(f"diagnose(small): verdict {small_sum['verdict']}, findings {small_sum['findings']}")
        print(f"diagnose(big):   verdict {big_sum['verdict']}, findings {big_sum['findings']}")

        ds, db = med["diagnose(small)"], med["diagnose(big)"]
        time_ratio = db["op_s"] / ds["op_s"]
        rss_delta_mb = _mb(db["hwm_kb"] - ds["hwm_kb"])
        time_ok = time_ratio <= TIME_RATIO_TARGET
        rss_ok = rss_delta_mb <= RSS_DELTA_TARGET_MB
        db_inc = max(db["hwm_kb"] - base_kb, 1024.0)  # floor at 1 MB so the ratio stays finite
        print("\nratios (medians):")
        print(
            f"  time  diagnose(big) / diagnose(small) = {time_ratio:8.2f}x    target <= {TIME_RATIO_TARGET}x"
            f"      {'PASS' if time_ok else 'FAIL'}"
        )
        min_ratio = min(x["op_s"] for x in results["diagnose(big)"]) / min(
            x["op_s"] for x in results["diagnose(small)"]
        )
        print(
            f"        (same ratio on the fastest run of each: {min_ratio:.2f}x; informational, less load-sensitive)"
        )
        print(
            f"  RSS   diagnose(big) - diagnose(small) = {rss_delta_mb:+8.1f} MB  target <= +{RSS_DELTA_TARGET_MB:.0f} MB"
            f"   {'PASS' if rss_ok else 'FAIL'}"
        )
        for label in [lbl for lbl, _, _ in ops if lbl.startswith("load_file")]:
            lf = med[label]
            print(
                f"  {label:<16} / diagnose(big): time {lf['op_s'] / db['op_s']:7.2f}x, "
                f"peak RSS {lf['hwm_kb'] / db['hwm_kb']:5.2f}x, "
                f"RSS over imports {(lf['hwm_kb'] - base_kb) / db_inc:7.1f}x"
            )
        load1 = os.getloadavg()[0]
        if max(load0, load1) > 0.5 * (os.cpu_count() or 1):
            hint = (
                "more --repeats narrow the medians"
                if args.threads == 1
                else "with torch's default intra-op threads, small tensor ops wait on descheduled (spinning) "
                "OpenMP workers; compare with --threads 1"
            )
            print(
                f"\nnote: the machine was busy (load average {load0:.2f} -> {load1:.2f} on {os.cpu_count()} CPUs), "
                f"so times are noisy; {hint}."
            )
        overall = time_ok and rss_ok
        print(f"\noverall: {'PASS' if overall else 'FAIL'}")

        if args.profile:
            print("\ncProfile of diagnose(big) in a fresh child:")
            proc = subprocess.run(
                [sys.executable, "-c", _PROFILE_CHILD, str(big_dir)],
                capture_output=True,
                text=True,
                check=False,
                env=_child_env(args.threads),
            )
            print(proc.stdout[-12000:] or proc.stderr[-4000:])
        if args.keep is not None:
            print(f"\ndrafters kept under {root}")
        return 0 if overall else 1
    finally:
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
