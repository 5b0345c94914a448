"""From ``audit-data --target``'s per-sample records to findings: ``DATA_NOT_FROM_TARGET``,
``DATA_TEMPLATE_MISMATCH``, ``DATA_TRAINED_LENGTH`` (info) and ``CONTEXT_BEYOND_TRAINING``.

Thresholds (measured and argued in ``docs/findings.md``):

* agreement: the target's greedy token equals the data's next token on :data:`AGREEMENT_WARN` or
  more of the loss-masked positions for data the target wrote; below it the data is another
  writer's (error below :data:`AGREEMENT_ERROR`);
* template: fewer than :data:`SERVED_SHARE_WARN` of the samples carry the think-block outcome the
  serving mode generates (a mixed thinking / non-thinking set stays silent); error below
  :data:`SERVED_SHARE_ERROR`; more than :data:`TEMPLATE_UNMATCHED_WARN` of the samples not
  byte-identical to any rendering of the target's template;
* length: the serving context is :data:`CONTEXT_RATIO` times or more the length 90% of the samples
  stay within.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from eagle3_forensics.checks.data.merge import AuditScan
from eagle3_forensics.findings import Finding, Severity

AGREEMENT_WARN = 0.75
AGREEMENT_ERROR = 0.55
BELOW_EXPECTED = 0.03  # agreement this far below temperature-1 sampling's expectation ...
SIGMAS = 4.0  # ... and this many standard deviations of it (a few hundred positions are noisy)
SERVED_SHARE_WARN = 0.25
SERVED_SHARE_ERROR = 0.05
TEMPLATE_UNMATCHED_WARN = 0.5
CONTEXT_RATIO = 4.0
TRAINED_QUANTILE = 0.9
WORST = 10


def _quantile(lengths: dict[int, int], q: float) -> int:
    """The smallest length at or below which a share ``q`` of the samples lie."""
    keys = sorted(lengths)
    total = sum(lengths.values())
    run = 0
    for k in keys:
        run += lengths[k]
        if run >= q * total:
            return int(k)
    return int(keys[-1]) if keys else 0


def length_summary(scan: AuditScan) -> dict[str, Any] | None:
    if not scan.lengths:
        return None
    arr = np.repeat(
        np.fromiter(scan.lengths, dtype=np.int64), np.fromiter(scan.lengths.values(), dtype=np.int64)
    )
    return {
        "samples": int(arr.size),
        "min": int(arr.min()),
        "p50": _quantile(scan.lengths, 0.5),
        "p90": _quantile(scan.lengths, 0.9),
        "p99": _quantile(scan.lengths, 0.99),
        "max": int(arr.max()),
        "mean": round(float(arr.mean()), 2),
    }


def _agreement(scan: AuditScan) -> tuple[list[Finding], dict[str, Any] | None]:
    if not scan.agreement:
        return [], None
    agree = sum(int(r[2]) for r in scan.agreement)
    total = sum(int(r[3]) for r in scan.agreement)
    per = np.asarray([r[2] / r[3] if r[3] else 1.0 for r in scan.agreement], dtype=np.float64)
    rate = agree / total if total else 0.0
    known = [r for r in scan.agreement if r[4] >= 0]
    k_total = sum(int(r[3]) for r in known)
    expected = sum(float(r[4]) for r in known) / k_total if k_total else None
    observed = sum(int(r[2]) for r in known) / k_total if k_total else None
    sd = math.sqrt(sum(float(r[5]) for r in known)) / k_total if k_total else 0.0
    worst_at = np.argsort(per, kind="stable")[:WORST]
    spread = {
        "min": round(float(per.min()), 6),
        "p10": round(float(np.quantile(per, 0.1)), 6),
        "median": round(float(np.median(per)), 6),
        "p90": round(float(np.quantile(per, 0.9)), 6),
        "max": round(float(per.max()), 6),
        "std": round(float(per.std()), 6),
    }
    stats: dict[str, Any] = {
        "rate": round(rate, 6),
        "positions": total,
        "samples": len(scan.agreement),
        "per_sample": spread,
        "worst": [
            {
                "index": scan.agreement[i][0],
                "file": scan.agreement[i][1],
                "rate": round(float(per[i]), 6),
                "positions": scan.agreement[i][3],
            }
            for i in worst_at.tolist()
        ],
        "teacher": scan.teacher,
        "expected_at_temperature_1": None if expected is None else round(expected, 6),
        "thresholds": {
            "warning": AGREEMENT_WARN,
            "error": AGREEMENT_ERROR,
            "below_expected": BELOW_EXPECTED,
            "sigmas": SIGMAS,
        },
    }
    # Data the target wrote agrees with its greedy token at least as often as sampling at temperature 1
    # would (the mean probability of the greedy token; lower temperatures and greedy agree more).
    # Agreement clearly below that is another writer's, even when easy positions keep the rate high.
    below = (
        expected is not None
        and observed is not None
        and observed < expected - BELOW_EXPECTED
        and observed < expected - SIGMAS * sd
    )
    if rate >= AGREEMENT_WARN and not below:
        return [], stats
    sev = Severity.ERROR if rate < AGREEMENT_ERROR else Severity.WARNING
    cost = {
        "acceptance_length_drop": None,
        "share_of_positions": round(1.0 - rate, 6),
        "basis": "estimated",
        "how": "share of loss-masked positions whose data token is not the target's greedy token "
        "(argmax lm_head of the dumped last hidden state): what the drafter learns there, the target rejects",
    }
    f = Finding(
        "DATA_NOT_FROM_TARGET",
        sev,
        f"the target's greedy token equals the data's next token on {rate:.1%} of {total} loss-masked positions "
        f"(per sample: median {spread['median']:.1%}, worst {spread['min']:.1%})"
        + (
            f", below the {expected:.1%} that even sampling from the target at temperature 1 would give "
            "(greedy and lower temperatures agree more)"
            if below and expected is not None
            else f"; data the target wrote greedily agrees on {AGREEMENT_WARN:.0%} or more"
        )
        + ": these responses were written by another model (or sampled from the target far from its greedy choice).",
        evidence={**stats, "cost": cost},
        fix="Regenerate the responses with the target itself (the serving chat template and mode, greedy or its "
        "serving temperature), then dump the hidden states again and retrain.",
    )
    return [f], stats


def _template(scan: AuditScan) -> tuple[list[Finding], dict[str, Any] | None]:
    tpl = (scan.settings.get("serving") or {}).get("template")
    if not tpl or not scan.renderings:
        return [], None
    plain = sum(1 for r in scan.renderings if r[2] == "plain")
    chats = [r for r in scan.renderings if r[2] != "plain"]
    if not chats:  # plain text only: nothing rendered by any template to compare with the serving one
        return [], {"samples": len(scan.renderings), "plain_text": plain, "outcomes": {"plain": plain}}
    n = len(chats)
    outcomes: dict[str, int] = {}
    modes: dict[str, int] = {}
    for _, _, o, match, ms, _ in chats:
        outcomes[o] = outcomes.get(o, 0) + 1
        key = "+".join(ms) if match and ms else ("matched" if match else "none")
        modes[key] = modes.get(key, 0) + 1
    unmatched = sum(1 for r in chats if not r[3])
    masked_total = sum(int(r[5]) for r in chats) or 1
    expects = tpl.get("served_expects")
    served = tpl.get("served_mode")
    by = max(outcomes, key=lambda k: outcomes[k])  # the data's usual outcome, and the mode that generates it
    data_mode = next((m for m, e in (tpl.get("expected_outcome") or {}).items() if e == by), None)
    stats: dict[str, Any] = {
        "samples": n,
        "plain_text": plain,
        "outcomes": outcomes,
        "reasoning_share": round(outcomes.get("reasoning", 0) / n, 6),
        "rendering_modes": modes,
        "not_byte_identical": unmatched,
        "data_outcome": by,
        "data_mode": data_mode,
        "served_mode": served,
        "served_from": tpl.get("served_from"),
        "served_expects": expects,
        "expected_outcome_by_mode": tpl.get("expected_outcome"),
    }
    out: list[Finding] = []
    # the mode is judged on the samples the template renders (text in no chat format at all is the
    # not-byte-identical case below, not a mode)
    judged = [r for r in chats if r[3]]
    if expects is not None and judged:
        off = [r for r in judged if r[2] != expects]
        share = 1.0 - len(off) / len(judged)
        stats["served_share"] = round(share, 6)
        stats["judged_samples"] = len(judged)
        if share < SERVED_SHARE_WARN:
            said = (
                f"the {data_mode} rendering" if data_mode else "no mode's rendering (no think block at all)"
            )
            sev = Severity.ERROR if share < SERVED_SHARE_ERROR else Severity.WARNING
            cost = {
                "acceptance_length_drop": None,
                "share_of_positions": round(sum(int(r[5]) for r in off) / masked_total, 6),
                "basis": "estimated",
                "how": "share of loss-masked positions in samples whose think-block outcome is not the one the "
                f"serving mode ({served}) generates",
            }
            out.append(
                Finding(
                    "DATA_TEMPLATE_MISMATCH",
                    sev,
                    f"the server renders in {served} mode ({tpl.get('served_from')}), where the model writes "
                    f"'{expects}', but only {share:.1%} of {len(judged)} samples rendered by its template do: most ({outcomes[by]}) are '{by}', "
                    f"{said}; the drafter never learned what it will be asked to draft.",
                    evidence={
                        **stats,
                        "examples": [{"index": r[0], "file": r[1], "outcome": r[2]} for r in off[:WORST]],
                        "cost": cost,
                    },
                    fix="Regenerate (or re-render) the training data with the target's template in the serving mode "
                    "(chat_template_kwargs as the server passes them), or serve in the mode the data was made in.",
                )
            )
    if n and unmatched / n > TEMPLATE_UNMATCHED_WARN and not out:
        examples = [{"index": r[0], "file": r[1]} for r in chats if not r[3]][:WORST]
        out.append(
            Finding(
                "DATA_TEMPLATE_MISMATCH",
                Severity.WARNING,
                f"{unmatched} of {n} samples are not byte-identical to any rendering of the target's chat template "
                "(one user and one assistant turn, each mode, as a conversation or a generation prompt plus the "
                "response): the data was rendered with another template.",
                evidence={
                    **stats,
                    "examples": examples,
                    "cost": {
                        "acceptance_length_drop": None,
                        "share_of_positions": round(
                            sum(int(r[5]) for r in chats if not r[3]) / masked_total, 6
                        ),
                        "basis": "estimated",
                        "how": "share of loss-masked positions in samples no rendering of the target's template "
                        "reproduces (multi-turn samples count here too)",
                    },
                },
                fix="Render the training data with the target's own tokenizer_config.json chat template, "
                "exactly as the server does.",
            )
        )
    return out, stats


def _length(scan: AuditScan) -> tuple[list[Finding], dict[str, Any] | None]:
    serving = scan.settings.get("serving")
    dist = length_summary(scan)
    if serving is None or dist is None:
        return [], dist
    trained = dist["p90"]
    out = [
        Finding(
            "DATA_TRAINED_LENGTH",
            Severity.INFO,
            f"trained lengths over {dist['samples']} samples: median {dist['p50']}, 90% within {dist['p90']}, "
            f"longest {dist['max']} tokens.",
            evidence=dist,
        )
    ]
    ctx = serving.get("context")
    if ctx and trained > 0 and ctx["tokens"] >= CONTEXT_RATIO * trained:
        share = 1.0 - trained / ctx["tokens"]
        # a served context the user stated (--launch) is a warning; the target's max_position_embeddings
        # is only what a server defaults to, and often inflated: said, as info
        stated = ctx["from"].startswith("--launch")
        out.append(
            Finding(
                "CONTEXT_BEYOND_TRAINING",
                Severity.WARNING if stated else Severity.INFO,
                f"the serving context is {ctx['tokens']} tokens ({ctx['from']}), {ctx['tokens'] / trained:.0f}x "
                f"the {trained} tokens 90% of the training samples stay within (longest {dist['max']}): acceptance "
                "falls on prompts beyond what the drafter was trained on"
                + (
                    "."
                    if stated
                    else " (pass --launch with the serving command to judge the context it serves)."
                ),
                evidence={
                    "serving_context": ctx["tokens"],
                    "serving_context_from": ctx["from"],
                    "trained_p90": trained,
                    "trained_max": dist["max"],
                    "ratio": round(ctx["tokens"] / trained, 3),
                    "threshold_ratio": CONTEXT_RATIO,
                    "cost": {
                        "acceptance_length_drop": None,
                        "share_of_positions": round(share, 6),
                        "basis": "estimated",
                        "how": "share of a full-context request's positions beyond the 90th-percentile trained length",
                    },
                },
                fix="Train (or continue training) on sequences near the serving context, or serve with a context "
                "close to the trained length (--max-model-len / --context-length).",
            )
        )
    return out, dist


def target_fit_findings(scan: AuditScan) -> tuple[list[Finding], dict[str, Any]]:
    """The findings and the summary block of ``audit-data --target``'s measurements."""
    findings: list[Finding] = []
    summary: dict[str, Any] = {}
    for name, fn in (("agreement", _agreement), ("template", _template), ("lengths", _length)):
        f, s = fn(scan)
        findings.extend(f)
        summary[name] = s
    serving = scan.settings.get("serving") or {}
    summary["serving_context"] = serving.get("context")
    return findings, summary
