"""Statistics of the weights from bounded reads: non-finite values, untrained look, dtypes."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from eagle3_forensics.checks.context import Context
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.checkpoint import FLOAT_DTYPES

SLICE_ELEMENTS = (
    1 << 14
)  # per big tensor: diagnose must cost the same on an 8B-shaped drafter as on a tiny one
_CONFIG_DTYPES = {"float32": "F32", "bfloat16": "BF16", "float16": "F16", "float64": "F64"}


def check_weight_values(ctx: Context) -> Iterator[Finding]:
    nonfinite: list[str] = []
    constant: list[str] = []
    norms_all_one: list[str] = []
    norms: list[str] = []
    for info in ctx.ckpt:
        if info.dtype not in FLOAT_DTYPES or info.numel == 0:
            continue
        with np.errstate(over="ignore"):  # float64 beyond float32 range becomes inf, as it would in fp32
            data = ctx.ckpt.read_array_slice(info.name, SLICE_ELEMENTS).astype(np.float32)
        if not np.isfinite(data).all():
            nonfinite.append(info.name)
            continue
        if (len(info.shape) == 1 and info.name.endswith("norm.weight")) or ".fc_norm." in info.name:
            norms.append(info.name)
            if bool((data == 1).all()):
                norms_all_one.append(info.name)
        elif len(info.shape) == 2 and data.size > 1 and bool((data == data.flat[0]).all()):
            constant.append(info.name)
    if nonfinite:
        yield Finding(
            "WEIGHTS_NONFINITE",
            Severity.ERROR,
            f"{len(nonfinite)} tensor(s) contain NaN or Inf (e.g. {nonfinite[0]!r}).",
            evidence={"tensors": nonfinite[:40], "elements_read_per_tensor": SLICE_ELEMENTS},
            fix="Re-export from the last good training checkpoint; check for fp16 overflow.",
        )
    if norms and len(norms_all_one) == len(norms):
        yield Finding(
            "WEIGHTS_LOOK_UNTRAINED",
            Severity.WARNING,
            f"Every norm vector ({len(norms)}) is exactly 1.0, as freshly initialised.",
            evidence={"norms": norms},
            fix="Check that the trained weights were saved (not a freshly built model).",
        )
    if constant:
        yield Finding(
            "WEIGHTS_LOOK_UNTRAINED",
            Severity.WARNING,
            f"{len(constant)} weight matrix slice(s) are constant (e.g. {constant[0]!r}).",
            evidence={"tensors": constant[:40], "elements_read_per_tensor": SLICE_ELEMENTS},
            fix="Check that these weights were trained and saved.",
        )


def check_dtypes(ctx: Context) -> Iterator[Finding]:
    floats: dict[str, list[str]] = {}
    for info in ctx.ckpt:
        if info.dtype in FLOAT_DTYPES:
            floats.setdefault(info.dtype, []).append(info.name)
    if len(floats) > 1:
        yield Finding(
            "DTYPE_MISMATCH",
            Severity.WARNING,
            f"Weights mix float dtypes: {', '.join(f'{d} ({len(n)})' for d, n in sorted(floats.items()))}.",
            evidence={"by_dtype": {d: n[:10] for d, n in sorted(floats.items())}},
            fix="Save every weight in the dtype used for training/serving.",
        )
    declared = ctx.cfg.get("torch_dtype") or ctx.cfg.get("dtype")
    want = _CONFIG_DTYPES.get(str(declared)) if declared else None
    if want and len(floats) == 1 and want not in floats:
        have = next(iter(floats))
        sev = Severity.WARNING if {want, have} == {"F16", "BF16"} else Severity.INFO
        yield Finding(
            "DTYPE_MISMATCH",
            sev,
            f"config says torch_dtype {declared}, the weights are {have}.",
            evidence={"config_dtype": declared, "tensor_dtype": have},
            fix="fp16 weights from a bf16 run can overflow; keep config and weights in the trained dtype.",
        )
    d2t = ctx.ckpt.tensors.get("d2t")
    if d2t is not None and d2t.dtype not in ("I64",) and d2t.dtype.startswith("I"):
        yield Finding(
            "DTYPE_MISMATCH",
            Severity.INFO,
            f"d2t is {d2t.dtype}; the trainers and engines use int64.",
            evidence={"d2t_dtype": d2t.dtype},
            fix="Store d2t as int64.",
        )


CHECKS = (check_weight_values, check_dtypes)
