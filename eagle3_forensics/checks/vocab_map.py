"""Checks on d2t/t2d, decided by :func:`eagle3_forensics.vocab.mapping.classify_mapping` (one implementation)."""

from __future__ import annotations

from collections.abc import Iterator

from eagle3_forensics.checks.context import Context
from eagle3_forensics.findings import Finding, Severity

_ENGINE_CODES = {  # classification kind -> per-engine finding code (the engine reads offsets)
    "absolute": "D2T_ABSOLUTE",
    "double_offset": "D2T_DOUBLE_OFFSET",
    "missing": "D2T_MISSING",
    "identity_default": "D2T_MISSING",
}


def fix_for_kind(kind: str) -> str:
    """The fix line for a vocabulary-map classification kind (the vocab check and audit-data share it)."""
    return {
        "absolute": "Convert to offsets once: d2t = d2t - arange(v), then verify nonzero(t2d) == d2t + arange(v) "
        "(eagle3_forensics.vocab.mapping.absolute_to_offsets).",
        "double_offset": "Undo the second conversion: d2t = d2t + arange(v), then verify nonzero(t2d) == d2t + arange(v) "
        "(eagle3_forensics.vocab.mapping.undo_double_offset).",
        "missing": "Attach the mapping from training: d2t = nonzero(t2d) - arange(v), or rebuild it from the "
        "training data (eagle3-forensics vocab build).",
        "identity_default": "The default (all-zero) buffer was saved: rebuild d2t from t2d or from the training "
        "data; if t2d is also a default buffer, rebuild both from the data.",
        "permuted": "Re-sort: the trainers select ids ascending; d2t = sort(d2t + arange) - arange, and retrain "
        "if the head was trained against the wrong order.",
        "partial_corruption": "Rebuild d2t from t2d if t2d agrees with lm_head / the training data; otherwise "
        "rebuild both from the training data (stale caches are the usual cause).",
        "out_of_range": "Rebuild d2t from t2d or the training data.",
        "inconsistent_sizes": "Use d2t/t2d from the same run as the weights, sized [draft_vocab_size] and [vocab_size].",
        "invalid_d2t": "Store d2t as a 1-D int64 tensor of offsets.",
    }.get(kind, "Rebuild the mapping from t2d or from the training data.")


def check_vocab(ctx: Context) -> Iterator[Finding]:
    res = ctx.vocab
    ev = res.evidence()
    if res.t2d_problems and ctx.find("t2d"):
        cosmetic = all("expected bool" in p for p in res.t2d_problems)
        yield Finding(
            "T2D_INVALID",
            Severity.WARNING if cosmetic else Severity.ERROR,
            "t2d is not a valid draft-vocabulary mask: " + "; ".join(res.t2d_problems) + ".",
            evidence={"problems": res.t2d_problems, "kind": res.kind},
            fix="Rebuild t2d from a verified d2t (t2d[d2t + arange(v)] = True) or from the training data; "
            "engines ignore t2d, but it is the reference every check trusts.",
        )
    if res.consistent:
        return
    if res.kind == "missing" and not ctx.reduced_vocab:
        return
    code = _ENGINE_CODES.get(res.kind)
    if code is not None:
        severity = Severity.ERROR
        if res.kind == "identity_default" and ctx.find("t2d") is None:
            severity = Severity.WARNING  # cannot be proven wrong without t2d
        for rules in ctx.engines:
            effect = {
                "D2T_ABSOLUTE": f"{rules.display} computes target = i + d2t[i] = sel[i] + i: every draft "
                "token past the first few maps to a wrong (or out-of-range) target id.",
                "D2T_DOUBLE_OFFSET": f"{rules.display} computes target = i + d2t[i] = sel[i] - i: the offsets "
                "were converted twice, so drafts map to wrong target ids.",
                "D2T_MISSING": f"{rules.display} falls back to {rules.missing_d2t}: draft id i is proposed as "
                "target id i.",
            }[code]
            lead = {
                "absolute": "d2t holds absolute target ids",
                "double_offset": "d2t had the absolute→offset conversion applied twice",
                "missing": "No d2t tensor",
                "identity_default": "d2t is all zeros (a default buffer)",
            }[res.kind]
            yield Finding(
                code,
                severity,
                f"{lead}; {effect}",
                engine=rules.name,
                evidence={**ev, "engine_expects": rules.d2t_encoding, **ctx.evidence_base(rules.name)},
                fix=fix_for_kind(res.kind),
            )
        return
    if res.kind in ("permuted", "partial_corruption") and ctx.find("t2d"):
        what = (
            "the right set of target ids in a different order than t2d (trainers sort ascending)"
            if res.kind == "permuted"
            else f"a different selection from t2d from draft id {res.first_bad_index} on"
        )
        yield Finding(
            "D2T_T2D_MISMATCH",
            Severity.ERROR,
            f"nonzero(t2d) != d2t + arange(v): d2t encodes {what}.",
            evidence=ev,
            fix=fix_for_kind(res.kind),
        )
        return
    yield Finding(
        "D2T_INVALID",
        Severity.ERROR,
        f"d2t is not a usable map: {res.meaning}.",
        evidence=ev,
        fix=fix_for_kind(res.kind),
    )


CHECKS = (check_vocab,)
