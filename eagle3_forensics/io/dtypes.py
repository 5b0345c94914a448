"""Numbers from safetensors dtypes that numpy has no dtype for, without torch.

bfloat16 and the 8-bit floats are read as raw little-endian bytes and widened to float32, exactly
(every value of these formats is a float32 value):

* ``BF16`` is the high half of a float32: shift the ``uint16`` into the high half of a ``uint32``;
* ``F8_E4M3`` (``float8_e4m3fn``: bias 7, no infinities, NaN at ``S.1111.111``), ``F8_E5M2``
  (IEEE-like: bias 15, infinities and NaNs) and ``F8_E8M0`` (``float8_e8m0fnu``: powers of two,
  NaN at ``0xFF``) through a 256-entry lookup table.

The checks need values, not storage: anything that must keep the stored bits (repair's bit-exact
copies) reads through torch instead (:meth:`eagle3_forensics.io.checkpoint.Checkpoint.read_tensor`).
"""

from __future__ import annotations

import numpy as np

#: safetensors dtype -> numpy dtype of its raw little-endian bits, for the dtypes numpy cannot hold
RAW_BITS: dict[str, np.dtype[np.unsignedinteger]] = {
    "BF16": np.dtype("<u2"),
    "F8_E4M3": np.dtype("u1"),
    "F8_E5M2": np.dtype("u1"),
    "F8_E8M0": np.dtype("u1"),
}


def _minifloat_table(exp_bits: int, man_bits: int, ieee_specials: bool) -> np.ndarray:
    """float32 value of every 8-bit pattern of a sign/exponent/mantissa minifloat.

    ``ieee_specials``: the all-ones exponent holds infinities (mantissa 0) and NaNs (E5M2); otherwise
    only the all-ones pattern is NaN and the rest of that exponent are ordinary numbers (E4M3 "fn").
    """
    bias = (1 << (exp_bits - 1)) - 1
    bits = np.arange(256, dtype=np.int64)
    sign = np.where(bits >> 7, -1.0, 1.0)
    exp = (bits >> man_bits) & ((1 << exp_bits) - 1)
    man = bits & ((1 << man_bits) - 1)
    frac = man / float(1 << man_bits)
    value = np.where(
        exp == 0,
        frac * 2.0 ** (1 - bias),  # subnormals
        (1.0 + frac) * np.exp2((exp - bias).astype(np.float64)),
    )
    top = exp == (1 << exp_bits) - 1
    if ieee_specials:
        value = np.where(top & (man == 0), np.inf, np.where(top, np.nan, value))
    else:
        value = np.where(top & (man == (1 << man_bits) - 1), np.nan, value)
    return (sign * value).astype(np.float32)


def _e8m0_table() -> np.ndarray:
    """``float8_e8m0fnu``: unsigned, exponent only (2 ** (bits - 127)), NaN at 0xFF."""
    bits = np.arange(256, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore"):
        value = np.exp2(bits - 127.0)
    value[255] = np.nan
    return value.astype(np.float32)


_TABLES: dict[str, np.ndarray] = {
    "F8_E4M3": _minifloat_table(4, 3, ieee_specials=False),
    "F8_E5M2": _minifloat_table(5, 2, ieee_specials=True),
    "F8_E8M0": _e8m0_table(),
}


def widen(raw: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values of ``raw`` (the bits of a :data:`RAW_BITS` dtype, any shape)."""
    if dtype == "BF16":
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return _TABLES[dtype][raw]


def from_bytes(buf: bytes, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """float32 array of shape ``shape`` from the raw little-endian bytes of a :data:`RAW_BITS` dtype."""
    return widen(np.frombuffer(buf, dtype=RAW_BITS[dtype]), dtype).reshape(shape)


__all__ = ["RAW_BITS", "from_bytes", "widen"]
