"""From ``audit-data --target``'s per-sample records to findings: ``DATA_NOT_FROM_TARGET``,
``DATA_TEMPLATE_MISMATCH``, ``DATA_TRAINED_LENGTH`` (info) and ``CONTEXT_BEYOND_TRAINING``.

Thresholds (measured and argued in ``docs/findings.md``):

* agreement: data the target wrote (greedy, or sampled at up to ``TEMPERATURES[-1]``) agrees with
  its greedy token at least ``E = Σ p_Tmax(greedy)`` times on average; the data is another writer's
  when its agreement falls :data:`Z_CRIT` binomial sds below ``(1 - MARGIN) × E`` (a one-sided
  test whose power grows with the data; the margin covers model mismatch, measured by
  ``scripts/calibrate_data_stats.py``); an error below :data:`ERROR_RATIO` × E. No absolute floor:
  a flatter target agrees less with its own data, and E says by how much;
* template: the mode is read from the prompt side (the template's generation prompt before the
  loss-masked response), never from what the model wrote (a thinking target may skip its
  reasoning); fewer than :data:`SERVED_SHARE_WARN` of the samples whose prompt side tells the modes
  apart in the serving mode is a warning, below :data:`SERVED_SHARE_ERROR` an error, judged only
  when such samples are :data:`DECIDED_SHARE` of the chat samples; plain text (no turn marker) on
  :data:`PLAIN_SHARE_WARN` of the samples while the server applies a chat template; more than
  :data:`TEMPLATE_UNMATCHED_WARN` of all samples not byte-identical to any rendering;
* length: the serving context is :data:`CONTEXT_RATIO` times or more the length 90% of the samples
  stay within.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from eagle3_forensics.checks.data.merge import AuditScan
from eagle3_forensics.checks.data.target_scan import TEMPERATURES
from eagle3_forensics.findings import Finding, Severity

MARGIN = 0.02  # relative shortfall allowed beyond chance: generation on other kernels/dtypes than the dumps (docs/findings.md)
Z_CRIT = 3.0  # one-sided: 0.13 % of the target's own data sets at T max fall further below by chance
ERROR_RATIO = 0.5  # agreement below half the target's own at T max: most of the data is not its
SERVED_SHARE_WARN = 0.25  # fewer decided samples than this in the served mode: a warning ...
SERVED_SHARE_ERROR = 0.05  # ... and an error below this
DECIDED_SHARE = 0.5  # the prompt side must tell the modes apart on this share of the chat samples
PLAIN_SHARE_WARN = 0.5  # plain-text samples (no turn marker) from this share of the samples
TEMPLATE_UNMATCHED_WARN = 0.5  # of all samples
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


def agreement_test(agree: int, total: int, expected: float, variance: float) -> dict[str, Any]:
    """The decision of ``DATA_NOT_FROM_TARGET`` for ``agree`` of ``total`` positions against the
    target's own expectation at the highest judged temperature (``expected``, ``variance``: sums of
    ``p`` and ``p (1 - p)`` of its greedy token): ``z`` of the agreement against ``(1 - MARGIN) E``."""
    bound = (1.0 - MARGIN) * expected
    sd = math.sqrt(variance) if variance > 0 else 0.0
    z = (agree - bound) / sd if sd > 0 else (0.0 if agree >= bound else -math.inf)
    flagged = total > 0 and expected > 0 and z < -Z_CRIT
    ratio = agree / expected if expected > 0 else None
    error = flagged and ratio is not None and ratio < ERROR_RATIO
    return {
        "z": round(z, 4) if math.isfinite(z) else -1e9,
        "ratio": None if ratio is None else round(ratio, 6),
        "flagged": bool(flagged),
        "severity": "error" if error else ("warning" if flagged else None),
    }


def _agreement_stats(scan: AuditScan) -> dict[str, Any]:
    """Rates, the per-sample spread, the worst samples and the expectations (T = 1 and T max)."""
    agree = sum(int(r[2]) for r in scan.agreement)
    total = sum(int(r[3]) for r in scan.agreement)
    per = np.asarray([r[2] / r[3] if r[3] else 1.0 for r in scan.agreement], dtype=np.float64)
    known = [r for r in scan.agreement if len(r) > 7 and r[6] >= 0]
    k_total = sum(int(r[3]) for r in known)
    sums = [sum(float(r[i]) for r in known) for i in (2, 4, 5, 6, 7)]
    worst_at = np.argsort(per, kind="stable")[:WORST]
    return {
        "rate": round(agree / total if total else 0.0, 6),
        "positions": total,
        "samples": len(scan.agreement),
        "per_sample": {
            "min": round(float(per.min()), 6),
            "p10": round(float(np.quantile(per, 0.1)), 6),
            "median": round(float(np.median(per)), 6),
            "p90": round(float(np.quantile(per, 0.9)), 6),
            "max": round(float(per.max()), 6),
            "std": round(float(per.std()), 6),
        },
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
        "judged_positions": k_total,
        "judged_agree": int(sums[0]),
        "expected_at_temperature_1": round(sums[1] / k_total, 6) if k_total else None,
        "expected_at_temperature_max": round(sums[3] / k_total, 6) if k_total else None,
        "temperature_max": TEMPERATURES[-1],
        "_sums": sums,
        "thresholds": {"margin": MARGIN, "z": Z_CRIT, "error_ratio": ERROR_RATIO},
    }


def _agreement(scan: AuditScan) -> tuple[list[Finding], dict[str, Any] | None]:
    if not scan.agreement:
        return [], None
    stats = _agreement_stats(scan)
    agree, _, _, e_max, var_max = stats.pop("_sums")
    k_total = stats["judged_positions"]
    if not k_total:  # no probabilities (a partial written before them): nothing to judge against
        stats["decision"] = None
        return [], stats
    test = agreement_test(int(agree), k_total, e_max, var_max)
    stats["decision"] = test
    if not test["flagged"]:
        return [], stats
    rate, expected, total = agree / k_total, e_max / k_total, k_total
    spread = stats["per_sample"]
    cost = {
        "acceptance_length_drop": None,
        "share_of_positions": round(max(0.0, expected - rate), 6),
        "basis": "estimated",
        "how": "the target's own expected agreement at the highest judged temperature minus the data's: the share "
        "of loss-masked positions where the data holds a token the target would rarely write, which the drafter "
        "learns and the target rejects",
    }
    f = Finding(
        "DATA_NOT_FROM_TARGET",
        Severity(test["severity"]),
        f"the target's greedy token equals the data's next token on {rate:.1%} of {total} loss-masked positions "
        f"(per sample: median {spread['median']:.1%}, worst {spread['min']:.1%}), below the {expected:.1%} that "
        f"even sampling from the target at temperature {TEMPERATURES[-1]:g} gives (z = {test['z']:.1f} against "
        f"{1 - MARGIN:.0%} of it; greedy and lower temperatures agree more): these responses were written by "
        "another model (or sampled far from the target's own distribution).",
        evidence={**stats, "cost": cost},
        fix="Regenerate the responses with the target itself (the serving chat template and mode, greedy or its "
        "serving temperature), then dump the hidden states again and retrain.",
    )
    return [f], stats


def _template_stats(scan: AuditScan, tpl: dict[str, Any]) -> dict[str, Any]:
    """Counts of the renderings: plain text, outcomes (what the model wrote), prompt-side modes."""
    rows = scan.renderings
    chats = [r for r in rows if r[2] != "plain"]
    outcomes: dict[str, int] = {}
    modes: dict[str, int] = {}
    prompt: dict[str, int] = {}
    for r in rows:
        outcomes[r[2]] = outcomes.get(r[2], 0) + 1
    for r in chats:
        key = "+".join(r[4]) if r[3] and r[4] else ("matched" if r[3] else "none")
        modes[key] = modes.get(key, 0) + 1
        pm = r[6] if len(r) > 6 else None
        pkey = "undetermined" if pm is None else ("+".join(pm) or "none")
        prompt[pkey] = prompt.get(pkey, 0) + 1
    n = len(chats)
    return {
        "samples": len(rows),
        "plain_text": len(rows) - n,
        "outcomes": outcomes,
        "reasoning_share": round(outcomes.get("reasoning", 0) / n, 6) if n else 0.0,
        "rendering_modes": modes,
        "prompt_modes": prompt,
        "not_byte_identical": sum(1 for r in chats if not r[3]),
        "served_mode": tpl.get("served_mode"),
        "served_from": tpl.get("served_from"),
        "template_modes": tpl.get("modes"),
        "thresholds": {
            "plain_share": PLAIN_SHARE_WARN,
            "decided_share": DECIDED_SHARE,
            "served_share_warning": SERVED_SHARE_WARN,
            "served_share_error": SERVED_SHARE_ERROR,
            "not_byte_identical_share": TEMPLATE_UNMATCHED_WARN,
        },
    }


def _cost(rows: list[list[Any]], total_masked: int, how: str) -> dict[str, Any]:
    return {
        "acceptance_length_drop": None,
        "share_of_positions": round(sum(int(r[5]) for r in rows) / (total_masked or 1), 6),
        "basis": "estimated",
        "how": how,
    }


def _mode_finding(scan: AuditScan, tpl: dict[str, Any], stats: dict[str, Any]) -> Finding | None:
    """The served mode against the mode the prompt side was rendered in, over the samples whose
    prompt side tells the modes apart; only when those are a :data:`DECIDED_SHARE` of the chat samples."""
    served, all_modes = tpl.get("served_mode"), set(tpl.get("modes") or [])
    chats = [r for r in scan.renderings if r[2] != "plain"]
    decided = [r for r in chats if len(r) > 6 and r[6] and set(r[6]) != all_modes]
    stats["decided_samples"] = len(decided)
    if not served or not chats or len(decided) < 2 or len(decided) < DECIDED_SHARE * len(chats):
        return None
    off = [r for r in decided if served not in r[6]]
    share = 1.0 - len(off) / len(decided)
    by_mode: dict[str, int] = {}
    for r in off:
        for m in r[6]:
            by_mode[m] = by_mode.get(m, 0) + 1
    data_mode = max(by_mode, key=lambda k: by_mode[k]) if by_mode else served
    stats.update({"served_share": round(share, 6), "data_mode": data_mode})
    if share >= SERVED_SHARE_WARN:
        return None
    masked = sum(int(r[5]) for r in chats)
    return Finding(
        "DATA_TEMPLATE_MISMATCH",
        Severity.ERROR if share < SERVED_SHARE_ERROR else Severity.WARNING,
        f"the server renders in {served} mode ({tpl.get('served_from')}), but {len(off)} of {len(decided)} samples "
        f"whose prompt side tells the modes apart were rendered in {data_mode} mode (the template's generation "
        f"prompt before the loss-masked response; only {share:.1%} in {served}): the drafter never learned the "
        "text the server will ask it to continue.",
        evidence={
            **stats,
            "examples": [
                {"index": r[0], "file": r[1], "prompt_modes": r[6], "outcome": r[2]} for r in off[:WORST]
            ],
            "cost": _cost(
                off,
                masked,
                "share of loss-masked positions in samples whose prompt side was rendered in another mode than "
                f"the serving one ({served})",
            ),
        },
        fix="Regenerate (or re-render) the training data with the target's template in the serving mode "
        "(chat_template_kwargs as the server passes them), or serve in the mode the data was made in.",
    )


def _template(scan: AuditScan) -> tuple[list[Finding], dict[str, Any] | None]:
    """Plain text where the server applies a chat template; the prompt-side mode against the served
    one; renderings the template does not reproduce. Each decided by a share of the samples."""
    tpl = (scan.settings.get("serving") or {}).get("template")
    if not tpl or not scan.renderings:
        return [], None
    stats = _template_stats(scan, tpl)
    rows, n = scan.renderings, len(scan.renderings)
    plain = [r for r in rows if r[2] == "plain"]
    masked = sum(int(r[5]) for r in rows)
    if len(plain) / n >= PLAIN_SHARE_WARN:
        return [
            Finding(
                "DATA_TEMPLATE_MISMATCH",
                Severity.WARNING,
                f"{len(plain)} of {n} samples are plain text (none of the chat template's turn markers), but the "
                "server renders every chat request with the target's template: the drafter never learned the "
                "role markers and the text right after them it will be asked to draft.",
                evidence={
                    **stats,
                    "examples": [{"index": r[0], "file": r[1]} for r in plain[:WORST]],
                    "cost": _cost(plain, masked, "share of loss-masked positions in plain-text samples"),
                },
                fix="Render the training data with the target's chat template (the serving mode) unless the drafter "
                "only serves raw completions (/v1/completions without a template).",
            )
        ], stats
    found = _mode_finding(scan, tpl, stats)
    if found is not None:
        return [found], stats
    unmatched = [r for r in rows if r[2] != "plain" and not r[3]]
    if len(unmatched) / n > TEMPLATE_UNMATCHED_WARN:
        return [
            Finding(
                "DATA_TEMPLATE_MISMATCH",
                Severity.WARNING,
                f"{len(unmatched)} of {n} samples are not byte-identical to any rendering of the target's chat "
                "template (one user and one assistant turn, each mode, as a conversation or a generation prompt "
                "plus the response): the data was rendered with another template.",
                evidence={
                    **stats,
                    "examples": [{"index": r[0], "file": r[1]} for r in unmatched[:WORST]],
                    "cost": _cost(
                        unmatched,
                        masked,
                        "share of loss-masked positions in samples no rendering of the target's "
                        "template reproduces",
                    ),
                },
                fix="Render the training data with the target's own tokenizer_config.json chat template, "
                "exactly as the server does.",
            )
        ], stats
    return [], stats


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
