"""Benchmark: peak RSS of probe-offline and audit-data on full-width dumps, against sample size.

Not a timed test: it writes full-width SpecForge dumps (hidden 7168 and 3 aux states + the last,
as Kimi-K2.5's; bf16; a few thousand tokens; never shipped) under a temporary directory, runs
each command in a fresh process per sample size (two samples each, plain ``.ckpt`` and
``.ckpt.gz``), and prints peak RSS (``getrusage`` of the child) beside the sample size: the peak
above the same command over two 16-token samples of the same width (the drafter, the target's
head, torch) divided by one sample's decompressed size. A drafter of width 7168 with one layer,
4 heads of 64 and a small vocabulary, and a target of the same width that holds only what the
probe reads (embedding, final norm, ``lm_head``), are written beside the dumps.

``--bomb GIB`` measures the hostile case instead: the demo's SpecForge dumps plus one
``.ckpt.gz`` that expands to GIB GiB of zeros (about 1000:1), audited with no ``--target`` and no
drafter, so the cap comes from the layout of the other samples; then the bomb alone (nothing to
learn from: the large default cap, counted as a stream).

Usage::

    .venv/bin/python benchmarks/bench_bounded.py [--lengths 1024,2048,4096] [--keep DIR] [--json]
    .venv/bin/python benchmarks/bench_bounded.py --bomb 8
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

HIDDEN, AUX, VOCAB, DRAFT_VOCAB, HEADS, HEAD_DIM, INTER = 7168, 3, 512, 256, 4, 64, 256
PEAK = """
import json, resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"rc": proc.returncode, "err": proc.stderr[-400:], "out": proc.stdout,
                  "peak": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))
"""


def _bf16(*shape: int, seed: int = 0, scale: float = 0.02) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16)


def write_models(root: Path) -> tuple[Path, Path]:
    """A one-layer EAGLE-3 drafter and a head-only target, both 7168 wide."""
    drafter, target = root / "drafter", root / "target"
    drafter.mkdir(parents=True)
    target.mkdir(parents=True)
    llama = {
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": INTER,
        "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS,
        "head_dim": HEAD_DIM,
        "vocab_size": VOCAB,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "max_position_embeddings": 8192,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "bos_token_id": 0,
        "eos_token_id": 1,
    }
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], **llama, "num_hidden_layers": 1}
    cfg["draft_vocab_size"] = DRAFT_VOCAB
    (drafter / "config.json").write_text(json.dumps(cfg, indent=2))
    qkv = HEADS * HEAD_DIM
    t2d = torch.zeros(VOCAB, dtype=torch.bool)
    t2d[:DRAFT_VOCAB] = True
    tensors = {
        "fc.weight": _bf16(HIDDEN, AUX * HIDDEN, seed=1),
        "midlayer.input_layernorm.weight": torch.ones(HIDDEN, dtype=torch.bfloat16),
        "midlayer.hidden_norm.weight": torch.ones(HIDDEN, dtype=torch.bfloat16),
        "midlayer.post_attention_layernorm.weight": torch.ones(HIDDEN, dtype=torch.bfloat16),
        "midlayer.self_attn.q_proj.weight": _bf16(qkv, 2 * HIDDEN, seed=2),
        "midlayer.self_attn.k_proj.weight": _bf16(qkv, 2 * HIDDEN, seed=3),
        "midlayer.self_attn.v_proj.weight": _bf16(qkv, 2 * HIDDEN, seed=4),
        "midlayer.self_attn.o_proj.weight": _bf16(HIDDEN, qkv, seed=5),
        "midlayer.mlp.gate_proj.weight": _bf16(INTER, HIDDEN, seed=6),
        "midlayer.mlp.up_proj.weight": _bf16(INTER, HIDDEN, seed=7),
        "midlayer.mlp.down_proj.weight": _bf16(HIDDEN, INTER, seed=8),
        "norm.weight": torch.ones(HIDDEN, dtype=torch.bfloat16),
        "lm_head.weight": _bf16(DRAFT_VOCAB, HIDDEN, seed=9),
        "d2t": torch.zeros(DRAFT_VOCAB, dtype=torch.int64),
        "t2d": t2d,
    }
    save_file(tensors, str(drafter / "model.safetensors"))
    tcfg = {"architectures": ["LlamaForCausalLM"], **llama, "num_hidden_layers": 4}
    (target / "config.json").write_text(json.dumps(tcfg, indent=2))
    head = {
        "model.embed_tokens.weight": _bf16(VOCAB, HIDDEN, seed=10, scale=1.0),
        "model.norm.weight": torch.ones(HIDDEN, dtype=torch.bfloat16),
        "lm_head.weight": _bf16(VOCAB, HIDDEN, seed=11),
    }
    save_file(head, str(target / "model.safetensors"))
    return drafter, target


def write_dumps(root: Path, length: int, n: int = 2, gz: bool = False) -> int:
    """``n`` SpecForge samples of ``length`` tokens at full width; returns one sample's size in memory."""
    d = root / "rows_0-2000"
    d.mkdir(parents=True)
    size = 0
    for i in range(n):
        g = torch.Generator().manual_seed(100 + i)
        ids = torch.randint(2, VOCAB, (length,), generator=g)
        rec = {
            "input_ids": ids[None],
            "loss_mask": torch.ones(1, length, dtype=torch.long),
            "hidden_state": torch.randn(1, length, HIDDEN, generator=g).to(torch.bfloat16),
            "aux_hidden_state": torch.randn(1, length, AUX * HIDDEN, generator=g).to(torch.bfloat16),
        }
        size = sum(t.numel() * t.element_size() for t in rec.values())
        if gz:
            buf = io.BytesIO()
            torch.save(rec, buf)
            with gzip.open(d / f"data_{i}.ckpt.gz", "wb", compresslevel=1) as fh:
                fh.write(buf.getbuffer())
        else:
            torch.save(rec, str(d / f"data_{i}.ckpt"))
        del rec
    return size


def measure(args: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, "-c", PEAK, sys.executable, "-m", "eagle3_forensics", *args]
    t0 = time.perf_counter()
    got = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    got["wall_s"] = round(time.perf_counter() - t0, 1)
    return got


def commands(drafter: Path, target: Path, data: Path) -> dict[str, list[str]]:
    return {
        "audit-data": ["audit-data", str(data), "--target", str(target), "--drafter", str(drafter), "--json"],
        "probe-offline": [
            "probe-offline",
            str(drafter),
            "--data",
            str(data),
            "--target",
            str(target),
            "--device",
            "cpu",
            "--json",
        ],
    }


def write_bomb(path: Path, expands_to: int) -> int:
    """A valid gzip file of zeros expanding to ``expands_to`` bytes (independent 1 MiB deflate segments)."""
    zeros = bytes(1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    seg = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    n, crc = expands_to // len(zeros), 0
    with path.open("wb") as fh:
        fh.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")
        for _ in range(n):
            fh.write(seg)
            crc = zlib.crc32(zeros, crc)
        fh.write(b"\x03\x00")
        fh.write(struct.pack("<II", crc, (n * len(zeros)) & 0xFFFFFFFF))
    return n * len(zeros)


def bomb_rows(gib: float) -> list[dict[str, Any]]:
    """audit-data with no target and no drafter over the demo dumps plus a bomb, then the bomb alone."""
    demo = Path(__file__).resolve().parents[1] / "data" / "demo" / "dumps" / "specforge"
    root = Path(tempfile.mkdtemp(prefix="bench_bomb_"))
    rows = []
    try:
        with_demo, alone = root / "with-demo", root / "alone" / "rows_0-2000"
        shutil.copytree(demo, with_demo)
        alone.mkdir(parents=True)
        bomb = alone / "data_0.ckpt.gz"
        expands = write_bomb(bomb, int(gib * (1 << 30)))
        shutil.copy(bomb, with_demo / "rows_0-2000" / "data_99.ckpt.gz")
        for name, data in (("demo dumps + bomb", with_demo), ("bomb alone", alone.parent)):
            got = measure(["audit-data", str(data), "--json"])
            out = json.loads(got.get("out") or "{}")
            msg = [f["message"] for f in out.get("findings", []) if f["code"] == "DATA_UNREADABLE"]
            rows.append(
                {
                    "case": name,
                    "expands_to": expands,
                    "file_bytes": bomb.stat().st_size,
                    "peak_bytes": got["peak"],
                    "exit": got["rc"],
                    "wall_s": got["wall_s"],
                    "message": msg[0] if msg else None,
                }
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="1024,2048,4096", help="tokens per sample, comma-separated")
    ap.add_argument("--bomb", type=float, help="measure a gzip bomb of this many GiB instead (no target)")
    ap.add_argument("--keep", help="write the dumps here and keep them (default: a temporary directory)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.bomb:
        got = bomb_rows(a.bomb)
        if a.json:
            print(json.dumps(got, indent=2))
        for r in got:
            print(
                f"{r['case']:18} expands to {r['expands_to'] / (1 << 30):.1f} GiB ({r['file_bytes'] / (1 << 20):.1f} MiB "
                f"on disk): peak RSS {r['peak_bytes'] / (1 << 20):.0f} MiB, exit {r['exit']}, {r['wall_s']} s"
            )
            print(f"  {r['message']}")
        return 0
    lengths = [int(x) for x in a.lengths.split(",")]
    root = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="bench_bounded_"))
    rows: list[dict[str, Any]] = []
    try:
        drafter, target = write_models(root / "models")
        base_dir = root / "base"
        write_dumps(base_dir, 16)
        base = {name: measure(cmd) for name, cmd in commands(drafter, target, base_dir).items()}
        for length in lengths:
            for gz in (False, True):
                data = root / f"t{length}{'-gz' if gz else ''}"
                sample = write_dumps(data, length, gz=gz)
                on_disk = sum(f.stat().st_size for f in data.rglob("data_*")) // 2
                for name, cmd in commands(drafter, target, data).items():
                    got = measure(cmd)
                    rows.append(
                        {
                            "command": name,
                            "tokens": length,
                            "file": "ckpt.gz" if gz else "ckpt",
                            "sample_bytes": sample,
                            "file_bytes": on_disk,
                            "peak_bytes": got["peak"],
                            "base_peak_bytes": base[name]["peak"],
                            "samples_over_base": round((got["peak"] - base[name]["peak"]) / sample, 2),
                            "exit": got["rc"],
                            "wall_s": got["wall_s"],
                        }
                    )
                    if got["rc"] not in (0, 1):
                        print(f"{name} at {length} tokens exited {got['rc']}: {got['err']}", file=sys.stderr)
                shutil.rmtree(data)
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    if a.json:
        print(json.dumps({"base": {k: v["peak"] for k, v in base.items()}, "rows": rows}, indent=2))
        return 0
    mib = 1 << 20
    print(
        "base (two 16-token samples): " + ", ".join(f"{k} {v['peak'] / mib:.0f} MiB" for k, v in base.items())
    )
    print(
        f"{'command':14} {'tokens':>6} {'file':8} {'sample':>9} {'on disk':>9} {'peak RSS':>9} {'(peak-base)/sample':>19} {'exit':>4} {'wall':>6}"
    )
    for r in rows:
        print(
            f"{r['command']:14} {r['tokens']:>6} {r['file']:8} {r['sample_bytes'] / mib:>5.0f} MiB "
            f"{r['file_bytes'] / mib:>5.0f} MiB {r['peak_bytes'] / mib:>5.0f} MiB {r['samples_over_base']:>19.2f} "
            f"{r['exit']:>4} {r['wall_s']:>5.1f}s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
