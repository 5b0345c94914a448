"""Cross-checks against the target model (``--target``): ``TARGET_MISMATCH``, the stored embedding."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from eagle3_forensics.checks.context import Context
from eagle3_forensics.findings import Finding, Severity


def check_target_fit(ctx: Context) -> Iterator[Finding]:
    t = ctx.target
    if t is None:
        return
    cfg = ctx.cfg
    problems: list[str] = []
    ev: dict[str, Any] = {"target": t.summary()}
    if t.vocab_size is not None and cfg.vocab_size is not None and cfg.vocab_size != t.vocab_size:
        problems.append(f"drafter vocab_size {cfg.vocab_size} != target vocab_size {t.vocab_size}")
    t2d = ctx.shape("t2d")
    if t2d and t.vocab_size is not None and t2d[0] != t.vocab_size:
        problems.append(f"t2d covers {t2d[0]} ids, the target has {t.vocab_size}")
    ht = cfg.target_hidden_size or cfg.hidden_size
    if t.hidden_size is not None and ht is not None and ht != t.hidden_size:
        problems.append(f"drafter expects target hidden size {ht}, the target has {t.hidden_size}")
    verifier = cfg.get("verifier")
    if (
        isinstance(verifier, dict)
        and isinstance(verifier.get("architectures"), list)
        and verifier["architectures"]
        and t.architectures
        and [str(a) for a in verifier["architectures"]] != t.architectures
    ):
        problems.append(f"trained for verifier {verifier['architectures']}, target is {t.architectures}")
    if problems:
        yield Finding(
            "TARGET_MISMATCH",
            Severity.ERROR,
            "; ".join(problems) + ".",
            evidence={"problems": problems, **ev},
            fix="Use the drafter trained for this target (model, revision and tokenizer), or retrain.",
        )
    yield from _embedding_equality(ctx)


def _embedding_equality(ctx: Context) -> Iterator[Finding]:
    t = ctx.target
    name = ctx.find("embed_tokens.weight")
    if t is None or name is None or t.weights is None:
        return
    tname = t.tensor_name("embed_tokens.weight")
    if tname is None:
        return
    d_info, t_info = ctx.ckpt.tensors[name], t.weights.tensors[tname]
    if d_info.shape != t_info.shape:
        return  # reported as TARGET_MISMATCH / EMBED_TOKENS_PROBLEM
    rows = max(1, min(d_info.shape[0], (1 << 20) // max(1, d_info.shape[-1])))
    with np.errstate(over="ignore"):
        a = ctx.ckpt.read_array_slice(name, rows * d_info.shape[-1]).astype(np.float32)
        b = t.weights.read_array_slice(tname, rows * t_info.shape[-1]).astype(np.float32)
    if np.array_equal(a, b):
        return
    cos = _mean_row_cosine(a, b)
    for rules in ctx.engines:
        engine = rules.name
        load = ctx.loads[engine]
        fate = next((f.action for f in load.fates if f.key == name), None)
        if fate in ("loaded", "renamed"):  # the engine uses the stored copy
            yield Finding(
                "EMBED_TOKENS_PROBLEM",
                Severity.WARNING,
                f"The stored embedding differs from the target's (mean row cosine {cos:.3f} over the first "
                f"{rows} rows) and {rules.display} ({rules.release}) uses the stored one.",
                engine=engine,
                evidence={
                    "rows_compared": rows,
                    "mean_row_cosine": round(cos, 6),
                    **ctx.evidence_base(engine),
                },
                fix="If the embedding was frozen in training, ship the target's (or none); a random or "
                "stale copy collapses acceptance.",
            )


def _mean_row_cosine(a: np.ndarray, b: np.ndarray, eps: float = 1e-8) -> float:
    """Mean cosine of matching rows, each row scaled by its norm clamped at ``eps`` (as torch's
    ``cosine_similarity``), in float32."""
    with np.errstate(all="ignore"):  # non-finite rows give NaN, as in torch
        an = np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), np.float32(eps))
        bn = np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), np.float32(eps))
        return float(((a / an) * (b / bn)).sum(axis=-1, dtype=np.float32).mean(dtype=np.float32))


CHECKS = (check_target_fit,)
