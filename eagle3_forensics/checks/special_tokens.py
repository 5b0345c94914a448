"""VOCAB_SPECIAL_TOKENS_MISSING: structural tokens or byte pieces outside the draft vocabulary.

What counts is what the *generation* emits (:meth:`~eagle3_forensics.vocab.special.SpecialCoverage.role`):
a drafter proposes only tokens of the response, never prompt-side scaffolding. Severity
(docs/findings.md):

* ``error`` — a missing **critical** token: the eos the template ends the assistant's turn with (any
  eos without a template) or a think tag of a reasoning template. Every served response contains it
  and the drafter can never propose it: a certain rejection at each turn end / reasoning→answer switch.
* ``warning`` — other pieces the template writes inside the assistant's turn; with data only when
  they occur at a loss-masked position.
* ``info`` — tool-call tags without data (they cost only when the model calls tools); with data a
  warning when they occur at loss-masked positions, nothing when they do not.
* nothing — prompt-side tokens (role markers, the generation prompt, bos, eos ids the template never
  writes), unless the data shows them at loss-masked positions (then a warning).

Byte-fallback pieces are reported apart, only with data: warning from :data:`BYTE_WARN_SHARE` of the
positions, info below, nothing when they never occur.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from eagle3_forensics.checks.context import Context
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.extras import installed
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.vocab.mapping.compare import selected_ids
from eagle3_forensics.vocab.special import SpecialCoverage, generation_eos_ids, special_coverage, target_chat

CODE = "VOCAB_SPECIAL_TOKENS_MISSING"
BYTE_WARN_SHARE = 0.005


def _cost(share: float | None, how: str) -> dict[str, Any]:
    return {"acceptance_length_drop": None, "share_of_positions": share, "basis": "estimated", "how": how}


def special_token_findings(cov: SpecialCoverage) -> list[Finding]:
    """The findings for one coverage report (``cov.positions`` set: data costs were counted)."""
    out: list[Finding] = []
    data = cov.positions is not None
    counts = cov.counts
    missing = []
    for t in cov.missing:
        role = cov.role(t)
        if role == "critical" or (not data and role in ("generated", "tool")) or (data and counts.get(t, 0)):
            missing.append(t)
    if missing:
        kinds = sorted({cov.structural[t] for t in missing})
        roles = {cov.role(t) for t in missing}
        share = sum(counts.get(t, 0) for t in missing) / cov.positions if data and cov.positions else None
        if "critical" in roles:
            sev = Severity.ERROR
        elif roles == {"tool"} and not data:
            sev = Severity.INFO
        else:
            sev = Severity.WARNING
        names = ", ".join(repr(cov.texts.get(t, str(t))) for t in missing[:8])
        more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        cost_txt = f"; they are {share:.2%} of the loss-masked positions" if share is not None else ""
        how = (
            "occurrences of the missing ids at loss-masked positions / loss-masked positions"
            if data
            else "no data given: what is missing, not what it costs (pass token ids for the share)"
        )
        out.append(
            Finding(
                CODE,
                sev,
                f"The draft vocabulary lacks {len(missing)} structural token(s) of the target "
                f"({', '.join(kinds)}): {names}{more}. The drafter can never propose them, so each "
                f"occurrence in served text rejects the draft there{cost_txt}.",
                evidence={
                    "what": "structural",
                    "missing": cov.listed(missing),
                    "kinds": kinds,
                    "roles": sorted(roles),
                    "structural_tokens": len(cov.structural),
                    "has_template": cov.has_template,
                    "missing_byte_pieces": len(cov.missing_bytes),
                    "positions": cov.positions,
                    "cost": _cost(share, how),
                },
                fix="Rebuild the map with these ids forced in (replace the least frequent selected ids; "
                "eos, think and tool tags, role markers) and retrain the head on them; train on "
                "the target's own chat renderings so the template's tokens are counted.",
            )
        )
    share_b = cov.share.get("bytes") if data else None
    if cov.missing_bytes and share_b:
        sev = Severity.WARNING if share_b >= BYTE_WARN_SHARE else Severity.INFO
        out.append(
            Finding(
                CODE,
                sev,
                f"{len(cov.missing_bytes)} of {len(cov.byte_pieces)} byte-fallback pieces (<0xNN>) are outside "
                f"the draft vocabulary and make {share_b:.2%} of the loss-masked positions: text the "
                "tokenizer spells in bytes (other scripts, emoji) cannot be drafted.",
                evidence={
                    "what": "byte_fallback",
                    "missing": cov.listed(t for t in cov.missing_bytes if cov.counts.get(t)),
                    "missing_count": len(cov.missing_bytes),
                    "byte_pieces": len(cov.byte_pieces),
                    "positions": cov.positions,
                    "cost": _cost(
                        share_b,
                        "occurrences of the missing <0xNN> ids at loss-masked positions / "
                        "loss-masked positions",
                    ),
                },
                fix="Keep the byte pieces that occur in the serving traffic in the draft vocabulary (or "
                "select the vocabulary on data in the languages served).",
            )
        )
    return out


def check_special_tokens(ctx: Context) -> Iterator[Finding]:
    t = ctx.target
    if t is None or not (t.path / "tokenizer.json").is_file():
        return
    if not (installed("tokenizers") and installed("jinja2")):
        return  # the core install (no models extra) cannot read the tokenizer: diagnose --target still runs
    d2t_name, t2d_name = ctx.find("d2t"), ctx.find("t2d")
    if d2t_name is None and t2d_name is None:
        return  # a full-vocabulary drafter (or D2T_MISSING's business)
    try:
        sel, src = selected_ids(
            ctx.array(d2t_name) if d2t_name else None,
            ctx.array(t2d_name) if t2d_name else None,
            ctx.target_vocab_size,
            ctx.draft_vocab_size,
        )
        chat = target_chat(t.path)
    except UnusableInputError:
        return  # the map or the tokenizer is unreadable: reported by the map checks / not ours
    if chat is None or src == "full vocabulary":
        return
    size = t.vocab_size or (int(sel.max()) + 1 if sel.size else 0)
    mask = np.zeros(size, dtype=bool)
    mask[sel[(sel >= 0) & (sel < size)]] = True
    cov = special_coverage(mask, chat, generation_eos_ids(t.path))
    yield from special_token_findings(cov)


CHECKS = (check_special_tokens,)
