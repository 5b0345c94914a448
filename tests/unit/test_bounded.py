"""Bounded reading of sizes someone else wrote: a real gzip bomb stops at the layout's cap, is
skipped with one line and counted, and the process's peak memory stays bounded."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from paths import DEMO

from eagle3_forensics.io.dumps.bounded import (
    MAX_TOKENS,
    SampleTooLargeError,
    cap_from_configs,
    check_size,
    gunzip_capped,
    layout_cap,
)

TARGET = DEMO / "target"
HEALTHY = DEMO / "drafters" / "healthy"
SPECFORGE = DEMO / "dumps" / "specforge"
GIB = 1 << 30


def write_bomb(path: Path, expands_to: int) -> int:
    """A valid gzip file of zeros expanding to ``expands_to`` bytes, stream-written: one compressed
    1 MiB segment (full flush, so segments are independent) repeated, then the real trailer."""
    zeros = bytes(1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate; the gzip framing is written here
    seg = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    n = expands_to // len(zeros)
    crc = 0
    with path.open("wb") as fh:
        fh.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")  # gzip header: deflate, no name, mtime 0
        for _ in range(n):
            fh.write(seg)
            crc = zlib.crc32(zeros, crc)
        fh.write(b"\x03\x00")  # the final, empty fixed-Huffman block
        fh.write(struct.pack("<II", crc, (n * len(zeros)) & 0xFFFFFFFF))
    return n * len(zeros)


def test_the_cap_comes_from_the_layout() -> None:
    # Kimi-K2.5: hidden 7168, 3 aux + last; 4096 bf16 tokens are ~235 MB, legitimately
    kimi = 7168 * 4 * 4096 * 2
    assert 230e6 < kimi < 240e6 and layout_cap(7168, 4, 262144) > 10 * kimi
    assert layout_cap(7168, 4, 262144) == layout_cap(7168, 4, MAX_TOKENS)  # a sane max length
    assert layout_cap(128, 4, 2048) < 32 << 20  # the demo target: a tiny cap
    assert cap_from_configs(None, TARGET) == layout_cap(128, 4, 2048)
    assert cap_from_configs(HEALTHY, TARGET) >= cap_from_configs(None, TARGET)
    assert cap_from_configs(None, None) == layout_cap(None)  # nothing to read: a large target's width


def test_a_gzip_bomb_stops_at_the_cap(tmp_path: Path) -> None:
    bomb = tmp_path / "data_0.ckpt.gz"
    expands = write_bomb(bomb, 2 * GIB + (64 << 20))
    assert expands > 2 * GIB and bomb.stat().st_size < 4 << 20  # a real bomb: ~1000:1
    t0 = time.perf_counter()
    with pytest.raises(SampleTooLargeError, match=r"expands to more than 20\.0 MiB: over the cap"):
        gunzip_capped(bomb, 20 << 20)
    assert time.perf_counter() - t0 < 5  # gave up at the cap, did not expand 2 GiB
    small = tmp_path / "ok.gz"
    write_bomb(small, 3 << 20)
    assert gunzip_capped(small, 3 << 20) == bytes(3 << 20)  # the cap itself is allowed
    with pytest.raises(SampleTooLargeError, match=r"holds 3\.0 MiB, more than 1\.0 MiB"):
        check_size(_plain(small), 1 << 20)


def _plain(gz: Path) -> Path:
    out = gz.with_suffix(".raw")
    out.write_bytes(gunzip_capped(gz, 1 << 30))
    return out


PEAK = """
import json, resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"rc": proc.returncode, "out": proc.stdout, "err": proc.stderr,
                  "peak_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def run_measured(*args: str) -> tuple[int, dict, str, int]:
    """Run the CLI in a fresh process; (exit code, JSON, stderr, its peak RSS in bytes)."""
    cmd = [sys.executable, "-c", PEAK, sys.executable, "-m", "eagle3_forensics", *args, "--json"]
    got = json.loads(subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout)
    return got["rc"], json.loads(got["out"]), got["err"], got["peak_kib"] * 1024


@pytest.mark.skipif(not SPECFORGE.is_dir(), reason="demo dumps not generated (make data)")
@pytest.mark.slow  # a subprocess each over large hostile dumps, ~20 s: make test-all
@pytest.mark.parametrize("command", ["audit-data", "probe-offline"])
def test_hostile_dumps_end_cleanly_with_bounded_memory(tmp_path: Path, command: str) -> None:
    pytest.importorskip("torch")  # both commands need the probe extra
    data = tmp_path / "dumps"
    shutil.copytree(SPECFORGE, data)
    write_bomb(data / "rows_0-2000" / "data_99.ckpt.gz", 2 * GIB + (64 << 20))  # 8 GiB took 16.6 GB before
    files = len(list(data.rglob("*.ckpt*")))
    if command == "audit-data":
        args = ["audit-data", str(data), "--target", str(TARGET), "--drafter", str(HEALTHY)]
    else:
        args = [
            "probe-offline",
            str(HEALTHY),
            "--data",
            str(data),
            "--target",
            str(TARGET),
            "--device",
            "cpu",
        ]
    t0 = time.perf_counter()
    rc, obj, err, peak = run_measured(*args)
    wall = time.perf_counter() - t0
    text = json.dumps(obj)
    assert "over the cap one sample of this layout can occupy" in text and "data_99.ckpt.gz" in text, err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 1
    if command == "audit-data":
        # the audit reports an unreadable file as DATA_UNREADABLE, exit 2 (its policy), and reads the rest
        assert obj["summary"]["files"] == files and obj["summary"]["unreadable"] == 1 and rc == 2
        assert obj["summary"]["samples_read"] == files - 1
    else:
        assert obj["samples"]["skipped"] == 1 and obj["samples"]["used"] == files - 1 and rc == 1
    assert peak < 1.5 * GIB, f"peak RSS {peak / GIB:.2f} GiB for a bomb expanding past 2 GiB"
    assert wall < 120

    # --max-sample-bytes overrides the layout's cap: every sample is then skipped, counted, unread
    rc, obj, err, _ = run_measured(*args, "--max-sample-bytes", "1K")
    assert rc == 2 and "Traceback" not in err
    assert "over the cap" in json.dumps(obj)


def test_a_long_stream_is_counted_then_read_exactly(tmp_path: Path) -> None:
    from eagle3_forensics.io.dumps.bounded import HOLD, gzip_declared_size

    f = tmp_path / "long.gz"
    size = write_bomb(f, HOLD + (3 << 20))  # past what the first pass holds, within the cap
    got = gunzip_capped(f, HOLD + (4 << 20))
    assert isinstance(got, bytearray) and len(got) == size and not any(got[:: 1 << 16])
    assert gzip_declared_size(f) == size
    with pytest.raises(SampleTooLargeError, match="skipped: counted as a stream, never held"):
        gunzip_capped(f, HOLD + (1 << 20))


@pytest.mark.slow  # a 14 s stream through a large bomb; test_a_gzip_bomb_stops_at_the_cap stays fast
@pytest.mark.skipif(not SPECFORGE.is_dir(), reason="demo dumps not generated (make data)")
def test_without_a_config_the_cap_comes_from_the_other_samples(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from eagle3_forensics.io.dumps.read import SampleError, open_dumps

    data = tmp_path / "dumps"
    shutil.copytree(SPECFORGE, data)
    write_bomb(data / "rows_0-2000" / "data_99.ckpt.gz", 2 * GIB + (64 << 20))  # declares 64 MiB
    ds = open_dumps(data)  # no target, no drafter: nothing declares a width
    # demo rows: hidden 128 + 3 aux of 128 = 512 values per position
    assert ds.max_sample_bytes == layout_cap(512, 1) < 96 << 20
    assert "the layout of rows_0-2000/data_" in ds.describe()["cap_from"]
    bomb = next(it for it in ds.items if it.rel.endswith("data_99.ckpt.gz"))
    t0 = time.perf_counter()
    with pytest.raises(SampleError, match="counted as a stream, never held"):
        ds.read(bomb)
    assert time.perf_counter() - t0 < 5
    assert sum(not isinstance(s, tuple) for s in ds.iter_samples(ds.items)) == len(ds.items) - 1
    # only the bomb: nothing to learn from, the large default, still counted and never held
    alone = tmp_path / "alone" / "rows_0-2000"
    alone.mkdir(parents=True)
    shutil.move(str(data / "rows_0-2000" / "data_99.ckpt.gz"), alone / "data_0.ckpt.gz")
    lone = open_dumps(alone.parent, max_sample_bytes=None)
    assert lone.max_sample_bytes == layout_cap(None) and "default" in lone.cap_source


@pytest.mark.slow
@pytest.mark.skipif(not SPECFORGE.is_dir(), reason="demo dumps not generated (make data)")
def test_a_bomb_without_target_or_drafter_stays_bounded(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    data = tmp_path / "dumps"
    shutil.copytree(SPECFORGE, data)
    write_bomb(data / "rows_0-2000" / "data_99.ckpt.gz", 2 * GIB + (64 << 20))
    rc, obj, err, peak = run_measured("audit-data", str(data))
    assert rc == 2 and obj["summary"]["unreadable"] == 1, err
    assert "never held" in json.dumps(obj)
    assert peak < 1 << 30, f"peak RSS {peak / GIB:.2f} GiB"


def test_max_sample_bytes_is_a_byte_count() -> None:
    from eagle3_forensics.cli.main import main

    assert main(["audit-data", str(TARGET), "--max-sample-bytes", "lots"]) == 2
    assert main(["audit-data", str(TARGET), "--max-sample-bytes", "0"]) == 2
    from eagle3_forensics.cli.offline_common import byte_count

    assert byte_count("500M") == 500 << 20 and byte_count("2GiB") == 2 << 30 and byte_count("123") == 123


def test_nonfinite_counts_across_blocks() -> None:
    torch = pytest.importorskip("torch")

    from eagle3_forensics.io.dumps.read import Item, Sample

    t = torch.zeros(1000, 5000, dtype=torch.bfloat16)  # 5M elements: two blocks of 4M
    flat = t.view(-1)
    for pos, v in ((0, "nan"), ((1 << 22) - 1, "inf"), (1 << 22, "nan"), (-1, "-inf")):
        flat[pos] = float(v)
    item = Item(0, "x", Path("x"), 0)
    ids, mask = torch.zeros(1000, dtype=torch.int64), torch.ones(1000, dtype=torch.bool)
    assert Sample(item, "specforge", ids, mask, t, t.t()).nonfinite() == 8  # a transposed copy too
    assert Sample(item, "specforge", ids, mask, None, torch.zeros(0, 3)).nonfinite() == 0
