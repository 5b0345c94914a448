"""Rendering of ``probe-offline`` and ``audit-data`` results: CLI text, notebook tables and figures.

Domain results come from :mod:`eagle3_forensics.probe.offline` and :mod:`eagle3_forensics.checks.data`;
nothing is computed here beyond tabulating them (pandas / matplotlib are imported lazily).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle3_forensics.io.dumps.layouts import LAYOUTS
from eagle3_forensics.views import format as fmt
from eagle3_forensics.views.html import VERDICT_COLOURS, badge, esc, finding_card_html
from eagle3_forensics.views.text import human_bytes, render_finding

if TYPE_CHECKING:
    from eagle3_forensics.checks.data.findings import DataAudit
    from eagle3_forensics.probe.offline.result import OfflineProbeResult


def _f(x: float | None, nd: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


# ---------------------------------------------------------------------------------------------
# CLI text
# ---------------------------------------------------------------------------------------------


def render_offline_probe(r: OfflineProbeResult, seconds: float | None = None) -> str:
    d = r.to_dict()
    tf = r.teacher_forced
    teacher = d["teacher"]
    norm = teacher.get("final_norm") or {}
    lines = [
        f"probe-offline  {d['drafter']}  (engine view: {d['engine']})",
        f"data   {d['data']}  layouts {', '.join(f'{k} ({v})' for k, v in d['layouts'].items()) or 'none'}",
        f"       {d['samples']['used']} of {d['samples']['files']} samples, {d['samples']['tokens']} tokens, "
        f"{human_bytes(d['samples']['bytes'])}; device {d['device']} ({d['dtype']}); K={d['k']}",
        f"teacher {teacher['kind']}: {teacher['description']}",
    ]
    if norm:
        lines.append(
            f"        final norm {'applied' if norm.get('applied') else 'not applied'} "
            f"(dump holds the {norm.get('dump_state')} state; decided by {norm.get('decided_by')})"
        )
    if tf is not None:
        lines += [
            "",
            f"teacher-forced         simulated AL {_f(tf.simulated_acceptance_length)} (1 + Σ Π cond_acc) over "
            f"{tf.positions} positions",
            "                       accuracy "
            + " ".join(_f(x, 2) for x in tf.accuracy)
            + "   conditional "
            + " ".join(_f(x, 2) for x in tf.conditional_accuracy)
            + "   cumulative "
            + " ".join(_f(x, 2) for x in tf.cumulative),
        ]
        if d["greedy_agreement"] is not None:
            lines.append(
                f"                       the data is the target's greedy text at {d['greedy_agreement']:.1%} "
                "of the slots (live acceptance is comparable when this is near 100%)"
            )
        if d["out_of_draft_vocabulary"]:
            lines.append(
                f"                       {d['out_of_draft_vocabulary']:.1%} of the step-0 teachers are outside "
                "the draft vocabulary (misses by construction)"
            )
        rows = d["along_sequence"]["rows"]
        if rows:
            lines.append(
                "along the sequence     "
                + "  ".join(
                    f"{x['from']}-{x['to']}: {_f(x['simulated_acceptance_length'], 2)}" for x in rows[:12]
                )
            )
        classes = d["by_token_class"]["rows"]
        if classes:
            lines.append(
                "by token class         "
                + "  ".join(
                    f"{x['class']} ({x['positions']}): {_f(x['accuracy'][0], 2)}" for x in classes[:8]
                )
            )
        if d["worst_samples"]:
            w = d["worst_samples"][0]
            lines.append(
                f"worst sample           {w['file']}: simulated AL {_f(w['simulated_acceptance_length'], 2)} over {w['positions']} positions"
            )
    if seconds:
        lines.append(
            f"speed                  {d['samples']['tokens'] / seconds:.0f} tokens/s, {human_bytes(d['samples']['bytes'] / seconds)}/s"
        )
    if r.findings:
        lines.append("")
        lines.extend(render_finding(f) for f in r.findings)
    return "\n".join(lines)


def render_audit(a: DataAudit) -> str:
    s = a.summary
    counts = a.to_dict()["counts"]
    verdict = "UNUSABLE" if a.unusable else ("BROKEN" if counts["error"] else "HEALTHY")
    lines = [
        f"data:    {a.scan.settings['dir']}",
        f"layouts: {', '.join(f'{k} ({v})' for k, v in s['layouts'].items()) or 'none readable'}",
        f"samples: {s['samples_read']} read of {s['files']} files, {s['unreadable']} unreadable; {s['tokens']} tokens "
        f"({s['masked_tokens']} loss-masked), longest {s['longest']}, {human_bytes(s['bytes'])}",
        f"maps:    {', '.join(m['path'] for m in s['maps']) or 'none found'}",
        f"verdict: {verdict}  ({counts['error']} error, {counts['warning']} warning, {counts['info']} info)",
    ]
    for v in s["vocab"]:
        match = (
            ", ".join(v["matches"])
            if v["matches"]
            else f"none ({v['overlap']}/{v['draft_vocab_size']} ids agree)"
        )
        lines.append(
            f"         {v['selection']}: built from these samples under {match}; coverage {v['coverage']:.1%}"
        )
    lines.extend(_target_fit_lines(s.get("target_fit") or {}))
    if a.findings:
        lines.append("")
        lines.extend(render_finding(f) for f in a.findings)
    else:
        lines.append("\nno findings")
    return "\n".join(lines)


def _target_fit_lines(tf: dict[str, Any]) -> list[str]:
    """``audit-data --target``'s measurements, one line each."""
    out = []
    ag = tf.get("agreement")
    if ag:
        ps = ag["per_sample"]
        out.append(
            f"target:  greedy agreement {ag['rate']:.1%} over {ag['positions']} loss-masked positions "
            f"(per sample {ps['min']:.1%} .. {ps['max']:.1%}, median {ps['median']:.1%})"
            + (
                f"; the target's own sampling would give {ag['expected_at_temperature_1']:.1%} at T=1, "
                f"{ag['expected_at_temperature_max']:.1%} at T={ag.get('temperature_max')}"
                if ag.get("expected_at_temperature_max") is not None
                else ""
            )
        )
    tpl = tf.get("template")
    if tpl:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(tpl["outcomes"].items()))
        prompt = ", ".join(f"{k} {v}" for k, v in sorted((tpl.get("prompt_modes") or {}).items()))
        out.append(
            f"         rendering: {outcomes}; prompt side {prompt or 'none'}, served "
            f"{tpl.get('served_mode') or 'no mode switch'} ({tpl.get('served_from')}); "
            f"{tpl['not_byte_identical']} not byte-identical to the template"
        )
    ln = tf.get("lengths")
    if ln:
        ctx = tf.get("serving_context")
        served = f"; serving context {ctx['tokens']} ({ctx['from']})" if ctx else ""
        out.append(f"         lengths: median {ln['p50']}, p90 {ln['p90']}, longest {ln['max']}{served}")
    return out


# ---------------------------------------------------------------------------------------------
# notebook tables and figures
# ---------------------------------------------------------------------------------------------


def layouts_table() -> Any:
    """Every dump layout the reader knows (trainer, versions, keys, what a probe does with it)."""
    import pandas as pd  # optional: pandas

    rows = [
        {
            "layout": lay.name,
            "trainer": lay.trainer,
            "versions": lay.versions,
            "keys": lay.keys,
            "last hidden": {"post": "after final norm", "pre": "before final norm", None: fmt.MISSING}[
                lay.last_norm
            ],
            "EAGLE-3 probe": "yes" if lay.eagle3 else f"no: {lay.problem}",
        }
        for lay in LAYOUTS.values()
    ]
    return pd.DataFrame(rows)


def audit_findings_table(a: DataAudit) -> Any:
    import pandas as pd  # optional: pandas

    rows = [
        {"severity": f.severity.value, "code": f.code, "message": f.message, "fix": f.fix} for f in a.findings
    ]
    return pd.DataFrame(rows, columns=["severity", "code", "message", "fix"])


def audit_verdict(a: DataAudit) -> str:
    """``UNUSABLE``, ``BROKEN``, ``WARNINGS`` or ``HEALTHY``: the audit's verdict, as diagnose words it."""
    counts = a.to_dict()["counts"]
    if a.unusable:
        return "UNUSABLE"
    return "BROKEN" if counts["error"] else ("WARNINGS" if counts["warning"] else "HEALTHY")


def audit_cards_html(a: DataAudit, what: str = "audit") -> str:
    """The audit's verdict badge and counts, then one card per finding: the cards notebook 00 shows
    (:func:`eagle3_forensics.views.html.finding_card_html`), so a finding reads the same everywhere."""
    verdict = audit_verdict(a)
    counts = a.to_dict()["counts"]
    head = (
        f'<div class="e3f-verdict e3f-audit">{esc(what)} {badge(verdict, VERDICT_COLOURS.get(verdict.lower(), "#555"), big=True)}'
        f" &nbsp; {counts['error']} error · {counts['warning']} warning · {counts['info']} info"
        f" &nbsp; <code>{esc(a.scan.settings['dir'])}</code></div>"
    )
    if not a.findings:
        return head + '<p class="e3f-no-findings" style="color:#2e7d32"><b>No findings.</b></p>'
    return head + "".join(finding_card_html(f) for f in a.findings)


def audit_summary_table(a: DataAudit) -> Any:
    import pandas as pd  # optional: pandas

    s = a.summary
    rows = [
        ("samples read / files", f"{s['samples_read']} / {s['files']}"),
        ("layouts", ", ".join(f"{k} ({v})" for k, v in s["layouts"].items())),
        ("tokens (loss-masked)", f"{s['tokens']} ({s['masked_tokens']})"),
        ("longest sample", s["longest"]),
        ("hidden sizes", ", ".join(s["hidden_sizes"])),
        ("aux widths", ", ".join(s["aux_widths"])),
        ("dtypes", ", ".join(s["dtypes"])),
        ("padded samples (pad positions trimmed)", f"{s['padded_samples']} ({s['pad_positions_trimmed']})"),
        ("maps", ", ".join(m["path"] for m in s["maps"]) or "none found"),
    ]
    for v in s["vocab"]:
        rows.append(
            (
                f"{v['selection']}",
                ("built from these samples (" + ", ".join(v["matches"]) + ")")
                if v["matches"]
                else f"NOT from these samples: {v['overlap']}/{v['draft_vocab_size']} ids agree",
            )
        )
        rows.append(
            (f"{v['selection']} coverage", f"{v['coverage']:.1%} (best possible {v['best_coverage']:.1%})")
        )
    return pd.DataFrame(rows, columns=["", "value"])


def offline_summary_table(r: OfflineProbeResult) -> Any:
    import pandas as pd  # optional: pandas

    d = r.to_dict()
    tf = r.teacher_forced
    norm = d["teacher"].get("final_norm") or {}
    rows = [
        (
            "simulated acceptance length",
            fmt.acceptance_length(None if tf is None else tf.simulated_acceptance_length, "not scored"),
        ),
        ("positions scored", fmt.number(None if tf is None else tf.positions, reason="not scored")),
        ("samples used / files", f"{d['samples']['used']} / {d['samples']['files']}"),
        ("teacher", d["teacher"]["description"]),
        (
            "final norm",
            f"{'applied' if norm.get('applied') else 'not applied'} ({norm.get('decided_by')})"
            if norm
            else fmt.missing("no teacher norm"),
        ),
        ("data = target's greedy text", fmt.percent(d["greedy_agreement"], reason="not checked")),
        ("teachers outside the draft vocabulary", fmt.percent(d["out_of_draft_vocabulary"], reason="no map")),
        ("engine view", d["engine"]),
        ("aux ids (HF)", fmt.missing("not scored") if tf is None else fmt.value(list(tf.aux_ids))),
    ]
    return pd.DataFrame(rows, columns=["metric", "value"])


def offline_per_position_table(r: OfflineProbeResult) -> Any:
    import pandas as pd  # optional: pandas

    tf = r.teacher_forced
    if tf is None:
        return pd.DataFrame(columns=["draft step", "accuracy", "conditional accuracy", "cumulative"])
    return pd.DataFrame(
        {
            "draft step": list(range(tf.k)),
            "accuracy": tf.accuracy,
            "conditional accuracy": tf.conditional_accuracy,
            "cumulative": tf.cumulative,
        }
    )


def offline_per_position_figure(r: OfflineProbeResult) -> Any:
    from matplotlib.figure import Figure  # optional: matplotlib

    tf = r.teacher_forced
    fig = Figure(figsize=(6.0, 3.0), layout="constrained")
    ax = fig.subplots()
    if tf is not None:
        x = list(range(tf.k))
        ax.bar([i - 0.2 for i in x], tf.cumulative, 0.4, label="cumulative (a chain accepts)")
        ax.bar([i + 0.2 for i in x], tf.conditional_accuracy, 0.4, label="conditional")
        ax.set_xticks(x, [f"draft {i}" for i in x])
        ax.set_title(
            f"teacher-forced, K={tf.k}: simulated acceptance length {tf.simulated_acceptance_length:.2f}"
        )
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("acceptance")
    ax.legend(fontsize=8, loc="lower left")
    return fig


def along_sequence_table(r: OfflineProbeResult) -> Any:
    import pandas as pd  # optional: pandas

    rows = [
        {
            "positions": f"{x['from']}–{x['to']}",
            "slots": x["positions"],
            "step-0 accuracy": x["accuracy"][0],
            "all K accepted": x["cumulative"][-1],
            "simulated AL": x["simulated_acceptance_length"],
        }
        for x in r.groups("along")
    ]
    return pd.DataFrame(
        rows, columns=["positions", "slots", "step-0 accuracy", "all K accepted", "simulated AL"]
    )


def along_sequence_figure(r: OfflineProbeResult) -> Any:
    from matplotlib.figure import Figure  # optional: matplotlib

    rows = r.groups("along")
    fig = Figure(figsize=(6.4, 3.0), layout="constrained")
    ax = fig.subplots()
    if rows:
        xs = [(x["from"] + x["to"]) / 2 for x in rows]
        ax.plot(xs, [x["simulated_acceptance_length"] for x in rows], marker="o", label="simulated AL")
        ax2 = ax.twinx()
        ax2.bar(
            xs,
            [x["positions"] for x in rows],
            width=(rows[0]["to"] - rows[0]["from"] + 1) * 0.8,
            alpha=0.2,
            color="grey",
        )
        ax2.set_ylabel("slots", color="grey")
    ax.set_xlabel("position in the sample (tokens)")
    ax.set_ylabel("simulated acceptance length")
    ax.set_title("acceptance along the sequence")
    return fig


def token_class_table(r: OfflineProbeResult) -> Any:
    import pandas as pd  # optional: pandas

    rows = [
        {
            "class of the step-0 teacher": x["class"],
            "slots": x["positions"],
            "step-0 accuracy": x["accuracy"][0],
            "simulated AL": x["simulated_acceptance_length"],
        }
        for x in r.groups("classes")
    ]
    return pd.DataFrame(
        rows, columns=["class of the step-0 teacher", "slots", "step-0 accuracy", "simulated AL"]
    )


def token_class_figure(r: OfflineProbeResult) -> Any:
    from matplotlib.figure import Figure  # optional: matplotlib

    rows = r.groups("classes")
    fig = Figure(figsize=(6.4, 3.0), layout="constrained")
    ax = fig.subplots()
    if rows:
        ax.barh([x["class"] for x in rows][::-1], [x["accuracy"][0] for x in rows][::-1])
    ax.set_xlim(0, 1.0)
    ax.set_xlabel("step-0 accuracy")
    ax.set_title("by class of the token to predict")
    return fig


def worst_samples_table(r: OfflineProbeResult, tokenizer: str | Path | None = None, n: int = 5) -> Any:
    """The worst samples, decoded with the target tokenizer when there is one (``tokenizer.json``)."""
    import pandas as pd  # optional: pandas

    from eagle3_forensics.probe.offline.result import load_worst_sample  # heavy: torch

    tok: Any = None
    if tokenizer is not None and (Path(tokenizer) / "tokenizer.json").is_file():
        from tokenizers import Tokenizer  # optional: tokenizers (the models extra)

        tok = Tokenizer.from_file(str(Path(tokenizer) / "tokenizer.json"))

    rows = []
    for i, w in enumerate(r.to_dict()["worst_samples"][:n]):
        row = {
            "file": w["file"],
            "positions": w["positions"],
            "step-0 accuracy": fmt.rate(w["step0_accuracy"]),
            "simulated AL": fmt.acceptance_length(w["simulated_acceptance_length"]),
        }
        try:
            s = load_worst_sample(r, i)
            ids = s.input_ids.tolist()
            masked = [t for t, m in zip(ids, s.loss_mask.tolist(), strict=True) if m]
            row["trained text"] = (
                str(tok.decode(masked, skip_special_tokens=False))
                if tok is not None
                else " ".join(map(str, masked[:40]))
            )
        except Exception as exc:  # the sample may have moved: show why, keep the row
            row["trained text"] = f"(cannot re-read: {exc})"
        rows.append(row)
    return pd.DataFrame(
        rows, columns=["file", "positions", "step-0 accuracy", "simulated AL", "trained text"]
    )


def offline_record(r: OfflineProbeResult) -> dict[str, Any]:
    """The gateable figures of an offline probe, in the shape the run summary reads (``acceptance``):
    the simulated acceptance length under ``acceptance_length`` and the cumulative per step."""
    tf = r.teacher_forced
    d = r.to_dict()
    return {
        "acceptance_length": None if tf is None else tf.simulated_acceptance_length,
        "per_position": [] if tf is None else tf.cumulative,
        "per_position_conditional": [] if tf is None else tf.conditional_accuracy,
        "engine": d["engine"],
        "k": d["k"],
        "device": d["device"],
        "teacher": d["teacher"]["kind"],
        "positions": None if tf is None else tf.positions,
        "measured": "teacher-forced over dumps (probe-offline)",
    }


def audit_records(a: DataAudit) -> dict[str, Any]:
    """``verdict``, ``counts``, ``codes`` and ``findings`` of an audit, as the run summary reads them."""
    counts = a.to_dict()["counts"]
    return {
        "verdict": "unusable" if a.unusable else ("broken" if counts["error"] else "healthy"),
        "counts": counts,
        "codes": list(dict.fromkeys(f.code for f in a.findings)),
        "findings": [{"code": f.code, "severity": f.severity.value, "engine": f.engine} for f in a.findings],
    }


__all__ = [
    "along_sequence_figure",
    "along_sequence_table",
    "audit_findings_table",
    "audit_records",
    "audit_summary_table",
    "layouts_table",
    "offline_per_position_figure",
    "offline_per_position_table",
    "offline_record",
    "offline_summary_table",
    "render_audit",
    "render_offline_probe",
    "token_class_figure",
    "token_class_table",
    "worst_samples_table",
]
