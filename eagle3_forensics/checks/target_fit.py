"""Cross-checks against the target model (``--target``), plus RoPE placement."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from eagle3_forensics.checks.context import Context
from eagle3_forensics.findings import Finding, Severity

_ROPE_LEGACY = ("rope_theta", "rope_scaling")


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
    tmax, dmax = t.max_position_embeddings, cfg.int_field("max_position_embeddings")
    if tmax is not None and dmax is not None and dmax < tmax:
        yield Finding(
            "CONTEXT_TOO_SHORT",
            Severity.WARNING,
            f"The drafter's max_position_embeddings ({dmax}) is below the target's ({tmax}); drafting "
            "degrades or stops on long contexts.",
            evidence={"drafter": dmax, "target": tmax},
            fix=f"Set max_position_embeddings to {tmax} if the drafter's RoPE supports it (trained length "
            "matters; consider rope scaling).",
        )


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


def _nested_theta(params: Any) -> Any:
    return params.get("rope_theta") if isinstance(params, dict) else None


def _number(value: Any) -> float | None:
    """A config value as a float; ``None`` when absent or not a number (a malformed config must not crash)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:  # an int beyond float range
        return None


def check_rope(ctx: Context) -> Iterator[Finding]:
    cfg = ctx.cfg
    has_new = cfg.get("rope_parameters") is not None
    has_legacy = cfg.get("rope_theta") is not None
    if has_new and not has_legacy:
        for rules in ctx.engines:
            if not rules.reads_rope_parameters:
                yield Finding(
                    "ROPE_MISMATCH",
                    Severity.WARNING,
                    f"RoPE is only in rope_parameters (Transformers 5); {rules.display} ({rules.release}) reads "
                    "only rope_theta/rope_scaling and falls back to the Llama default theta 10000.",
                    engine=rules.name,
                    evidence={
                        "rope_parameters": cfg.get("rope_parameters"),
                        **ctx.evidence_base(rules.name),
                    },
                    fix="Write rope_theta/rope_scaling at top level too (both forms).",
                )
    t = ctx.target
    if t is None:
        return
    d_theta = cfg.get("rope_theta") or _nested_theta(cfg.get("rope_parameters"))
    trope = t.rope()
    t_theta = trope.get("rope_theta") or _nested_theta(trope.get("rope_parameters"))
    d_num, t_num = _number(d_theta), _number(t_theta)
    if d_num is not None and t_num is not None and d_num != t_num:
        yield Finding(
            "ROPE_MISMATCH",
            Severity.WARNING,
            f"The drafter's rope_theta ({d_theta}) differs from the target's ({t_theta}).",
            evidence={"drafter_rope_theta": d_theta, "target_rope_theta": t_theta},
            fix="Use the RoPE settings the drafter was trained with. Caution: speculators v0.3/v0.4 "
            "trained with the Llama default; do not copy the target's over it without checking.",
        )
    yield from _rope_kind(cfg.get("rope_scaling"), cfg.get("rope_parameters"), trope)


def _rope_shape(scaling: Any, params: Any) -> dict[str, Any]:
    """RoPE type, factor and mrope sections, from ``rope_scaling`` or else ``rope_parameters``.

    ``"mrope"`` is the legacy spelling of the default type with sections (Transformers rewrites it).
    """
    src = scaling if isinstance(scaling, dict) else params if isinstance(params, dict) else {}
    kind = src.get("rope_type") or src.get("type") or "default"
    return {
        "type": "default" if kind == "mrope" else kind,
        "factor": _number(src.get("factor")),
        "mrope_section": src.get("mrope_section"),
    }


def _rope_kind(scaling: Any, params: Any, trope: dict[str, Any]) -> Iterator[Finding]:
    """The drafter's RoPE type, scaling factor or mrope sections differ from the target's (SpecForge#310)."""
    draft = _rope_shape(scaling, params)
    target = _rope_shape(trope.get("rope_scaling"), trope.get("rope_parameters"))
    differ = [k for k in ("type", "factor", "mrope_section") if draft[k] != target[k]]
    if not differ:
        return
    parts = [f"{k} {draft[k]!r} vs the target's {target[k]!r}" for k in differ]
    yield Finding(
        "ROPE_MISMATCH",
        Severity.WARNING,
        "The drafter's RoPE differs from the target's: " + "; ".join(parts) + ". The drafter rotates "
        "positions unlike the states it drafts from (for an mrope target, image and video positions).",
        evidence={"differs": differ, "drafter_rope": draft, "target_rope": target},
        fix="Write the target's rope_scaling / rope_parameters (type, factor, mrope_section) into the drafter "
        "config if it was trained with them; otherwise retrain with the target's RoPE.",
    )


CHECKS = (check_target_fit, check_rope)
