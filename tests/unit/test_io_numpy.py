"""The numpy readers the checks use: exact widening of the dtypes numpy lacks, and the same values
as the torch readers on every storage dtype and layout."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
from builders import DrafterSpec, drafter_config, drafter_tensors, write_checkpoint

from eagle3_forensics.io.checkpoint import open_checkpoint, st_dtype, torch_dtype_of
from eagle3_forensics.io.dtypes import RAW_BITS, widen

_FP8 = {"F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2, "F8_E8M0": torch.float8_e8m0fnu}


@pytest.mark.parametrize("dtype", sorted(_FP8))
def test_fp8_table_matches_torch_bit_for_bit(dtype: str) -> None:
    bits = np.arange(256, dtype=np.uint8)
    want = torch.from_numpy(bits.copy()).view(_FP8[dtype]).float().numpy()
    got = widen(bits, dtype)
    assert got.dtype == np.float32
    nan = np.isnan(want)
    assert np.array_equal(nan, np.isnan(got))
    assert np.array_equal(want[~nan].view(np.uint32), got[~nan].view(np.uint32))


def test_bf16_widening_matches_torch_for_every_pattern() -> None:
    bits = np.arange(1 << 16, dtype=np.uint16)
    want = torch.from_numpy(bits.view(np.int16).copy()).view(torch.bfloat16).float().numpy()
    assert np.array_equal(want.view(np.uint32), widen(bits, "BF16").view(np.uint32))


def test_st_dtype_spells_torch_dtypes_without_torch_keys() -> None:
    assert st_dtype(torch.float32) == "F32"
    assert st_dtype(torch.bfloat16) == "BF16"
    assert st_dtype(torch.bool) == "BOOL"
    assert st_dtype(torch.float8_e4m3fn) == "FLOAT8_E4M3FN"  # as before: the torch name, upper case
    assert torch_dtype_of("BF16") is torch.bfloat16 and torch_dtype_of("F8_E4M3") is None


def _values(t: torch.Tensor) -> np.ndarray:
    """What the checks used to see: torch's values, with the dtypes numpy lacks widened to float32."""
    native = (torch.float16, torch.float32, torch.float64)
    return (t.float() if t.is_floating_point() and t.dtype not in native else t).numpy()


_DTYPES = [
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
]


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
@pytest.mark.parametrize("storage", ["safetensors", "bin"])
def test_read_array_equals_torch_values(dtype: torch.dtype, storage: str, tmp_path: Path) -> None:
    spec = DrafterSpec()
    tensors = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in drafter_tensors(spec).items()}
    x = tensors["fc.weight"].float()
    x.view(-1)[7] = float("nan")
    tensors["fc.weight"] = x.to(dtype)
    if storage == "safetensors":
        write_checkpoint(tmp_path, drafter_config(spec), tensors)
    else:
        (tmp_path / "config.json").write_text(json.dumps(drafter_config(spec)))
        torch.save(tensors, tmp_path / "pytorch_model.bin")
    ckpt = open_checkpoint(tmp_path)
    for name, t in tensors.items():
        want = _values(t)
        got = ckpt.read_array(name)
        assert got.shape == want.shape and got.dtype == want.dtype, name
        assert np.array_equal(got, want, equal_nan=got.dtype.kind == "f"), name
        for budget in (1, 40, 100, 1 << 20):
            part = ckpt.read_array_slice(name, budget)
            assert np.array_equal(
                part, _values(ckpt.read_slice(name, budget)), equal_nan=part.dtype.kind == "f"
            )


def test_truncated_raw_tensor_is_unusable(tmp_path: Path) -> None:
    from eagle3_forensics.errors import UnusableInputError

    spec = DrafterSpec(dtype=torch.bfloat16)
    write_checkpoint(tmp_path, drafter_config(spec), drafter_tensors(spec))
    ckpt = open_checkpoint(tmp_path)
    start, header = ckpt._header("model.safetensors")
    bf16 = [n for n, info in ckpt.tensors.items() if info.dtype in RAW_BITS]
    last = max(bf16, key=lambda n: header[n]["data_offsets"][1])
    f = tmp_path / "model.safetensors"
    f.write_bytes(f.read_bytes()[: start + header[last]["data_offsets"][1] - 10])  # cut after listing
    with pytest.raises(UnusableInputError, match="truncated"):
        ckpt.read_array(last)
