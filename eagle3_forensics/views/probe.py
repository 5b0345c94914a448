"""Rendering of in-process probe results: the CLI text, and the tables and figures of notebook 04.

Everything here takes a :class:`~eagle3_forensics.probe.core.ProbeResult` (or the records of
:func:`~eagle3_forensics.probe.core.compare_variants`) and computes nothing beyond tabulating.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eagle3_forensics.probe.teacher_forced import CONVENTIONS

if TYPE_CHECKING:
    from eagle3_forensics.probe.core import ProbeResult


def _f(x: float | None, nd: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def render_probe(r: ProbeResult) -> str:
    lines = [
        f"probe  {r.drafter}  (engine view: {r.engine})",
        f"target {r.target}  device {r.device} ({r.dtype})  K={r.k}  T=0  prompts={r.prompts}  "
        f"max_new_tokens={r.max_new_tokens}",
        "",
        f"acceptance length      {_f(r.acceptance_length)}   (vLLM: 1 + accepted/num_drafts, includes the bonus)",
        f"mean accepted drafts   {_f(r.mean_accepted_drafts)}   (excludes the bonus)",
        f"acceptance rate        {_f(r.acceptance_rate)}   (accepted/drafted = {r.live.accepted}/{r.live.drafted})",
        "per position           cumulative "
        + " ".join(_f(x, 2) for x in r.per_position_cumulative)
        + "   conditional "
        + " ".join(_f(x, 2) for x in r.per_position_conditional),
        f"lossless               {'yes' if r.lossless else 'NO (prompts ' + str(r.mismatched_prompts) + ')'}"
        "   (committed tokens == plain greedy decoding)",
        f"tokens/s               spec {_f(r.tokens_per_s, 1)}   greedy {_f(r.greedy_tokens_per_s, 1)}   "
        f"speedup {_f(r.speedup_vs_greedy, 2)}x",
    ]
    tf = r.teacher_forced
    if tf is not None:
        lines += [
            "",
            f"teacher-forced         simulated AL {_f(tf.simulated_acceptance_length)} (1 + Σ Π cond_acc; live "
            f"{_f(r.acceptance_length)})   over {tf.positions} positions",
            "                       accuracy "
            + " ".join(_f(x, 2) for x in tf.accuracy)
            + "   conditional "
            + " ".join(_f(x, 2) for x in tf.conditional_accuracy),
        ]
    sw = r.aux_sweep
    if sw is not None:
        d = sw.to_dict()
        scores = "   ".join(f"{o:+d}: {_f(s, 2)}" for o, s in sw.scores.items())
        lines += ["", f"aux sweep (HF {sw.base_ids})  {scores}", f"                       {d['verdict']}"]
    if r.view:
        v = r.view
        lines += [
            "",
            f"view                   aux {v['aux_ids_hf']} from {v['aux_source']}",
            f"                       d2t: {v['d2t_source']}",
        ]
        if v["unfilled"]:
            lines.append(
                f"                       never loaded (uninitialised): {len(v['unfilled'])} tensors "
                f"(e.g. {v['unfilled'][0]})"
            )
        if v["ignored_keys"]:
            lines.append(
                f"                       checkpoint keys not used: {len(v['ignored_keys'])} "
                f"(e.g. {v['ignored_keys'][0]})"
            )
    return "\n".join(lines)


# -- notebook tables and figures (pandas / matplotlib imported lazily; no computation beyond tabulating)


def summary_table(r: ProbeResult) -> Any:
    """Headline numbers with the convention each follows."""
    import pandas as pd  # optional: notebooks only

    tf = r.teacher_forced
    rows = [
        ("acceptance length (live)", r.acceptance_length, CONVENTIONS["acceptance_length"]),
        (
            "simulated acceptance length (teacher-forced)",
            None if tf is None else tf.simulated_acceptance_length,
            CONVENTIONS["teacher_forced.simulated_acceptance_length"],
        ),
        ("mean accepted drafts", r.mean_accepted_drafts, CONVENTIONS["mean_accepted_drafts"]),
        ("acceptance rate", r.acceptance_rate, CONVENTIONS["acceptance_rate"]),
        ("drafts (verify steps)", r.live.num_drafts, "vLLM num_drafts"),
        (
            "drafted / accepted tokens",
            f"{r.live.drafted} / {r.live.accepted}",
            "vLLM num_draft_tokens / num_accepted_tokens",
        ),
        ("lossless", r.lossless, "committed tokens == plain greedy decoding of the target, every prompt"),
        (
            "tokens/s speculative",
            r.tokens_per_s,
            f"{r.device} ({r.dtype}), new tokens / wall time incl. prefill",
        ),
        ("tokens/s plain greedy", r.greedy_tokens_per_s, "same target, prompts and device"),
        ("speedup", r.speedup_vs_greedy, "speculative / greedy tokens per second"),
    ]
    return pd.DataFrame(rows, columns=["metric", "value", "convention"])


def per_position_table(r: ProbeResult) -> Any:
    """Per draft position: live cumulative and conditional acceptance beside the teacher-forced figures."""
    import pandas as pd  # optional: notebooks only

    tf = r.teacher_forced
    data: dict[str, Any] = {
        "position": list(range(r.k)),
        "live cumulative (vLLM)": r.per_position_cumulative,
        "live conditional": r.per_position_conditional,
    }
    if tf is not None:
        data["teacher-forced cumulative"] = tf.cumulative
        data["teacher-forced conditional"] = tf.conditional_accuracy
        data["teacher-forced accuracy (unconditional)"] = tf.accuracy
    return pd.DataFrame(data)


def per_position_figure(r: ProbeResult) -> Any:
    """Bars of per-position acceptance: live cumulative and conditional, teacher-forced cumulative."""
    from matplotlib.figure import Figure  # optional: notebooks only

    fig = Figure(figsize=(6.4, 3.2), layout="constrained")
    ax = fig.subplots()
    series = [
        ("live cumulative", r.per_position_cumulative),
        ("live conditional", r.per_position_conditional),
    ]
    if r.teacher_forced is not None:
        series.append(("teacher-forced cumulative", r.teacher_forced.cumulative))
    width = 0.8 / len(series)
    for n, (label, values) in enumerate(series):
        ax.bar([i + n * width for i in range(r.k)], values, width, label=label)
    ax.set_xticks([i + width * (len(series) - 1) / 2 for i in range(r.k)], [f"draft {i}" for i in range(r.k)])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("acceptance")
    ax.set_title(f"K={r.k}: acceptance length {r.acceptance_length:.2f} ({r.engine} view)")
    ax.legend(fontsize=8, loc="lower left")
    return fig


def aux_sweep_table(r: ProbeResult) -> Any:
    import pandas as pd  # optional: notebooks only

    sw = r.aux_sweep
    if sw is None:
        return pd.DataFrame(columns=["offset", "aux ids (HF)", "simulated acceptance length", "best"])
    rows = []
    for off, res in sw.results.items():
        rows.append(
            {
                "offset": f"{off:+d}",
                "aux ids (HF)": None if res is None else str(res.aux_ids),
                "simulated acceptance length": None if res is None else res.simulated_acceptance_length,
                "step-0 accuracy": None if res is None else res.accuracy[0],
                "best": "◀" if off == sw.best_offset else "",
            }
        )
    return pd.DataFrame(rows)


def sweep_verdict(r: ProbeResult) -> str:
    return "aux sweep not run" if r.aux_sweep is None else str(r.aux_sweep.to_dict()["verdict"])


def lossless_text(r: ProbeResult) -> str:
    if r.lossless:
        return (
            f"Lossless: the {r.live.new_tokens} committed tokens over {r.prompts} prompts equal plain greedy "
            "decoding of the target."
        )
    return (
        f"NOT lossless: prompts {r.mismatched_prompts} differ from plain greedy decoding (a bug or numerics)."
    )


def view_table(r: ProbeResult) -> Any:
    """How the chosen view built the drafter (aux ids, flags, d2t, what came from where)."""
    import pandas as pd  # optional: notebooks only

    v = r.view or {}
    rows = [
        ("engine view", v.get("engine")),
        ("revision", v.get("revision")),
        ("format family", v.get("family")),
        ("aux ids (HF index)", str(v.get("aux_ids_hf"))),
        ("aux ids from", v.get("aux_source")),
        ("norm flags", str(v.get("flags"))),
        ("d2t", v.get("d2t_source")),
        ("from the target", ", ".join(v.get("from_target", [])) or "—"),
        (
            "never loaded (uninitialised)",
            f"{len(v.get('unfilled', []))}: " + ", ".join(v.get("unfilled", [])[:6]),
        ),
        ("checkpoint keys not used", ", ".join(v.get("ignored_keys", [])[:8]) or "—"),
    ]
    return pd.DataFrame(rows, columns=["", "value"])


def variants_table(rows: list[dict[str, Any]]) -> Any:
    """The records of :func:`~eagle3_forensics.probe.core.compare_variants` as a table."""
    import pandas as pd  # optional: notebooks only

    return pd.DataFrame(rows)


def variants_figure(rows: list[dict[str, Any]] | Any) -> Any:
    """Grouped bars: acceptance length per drafter, one bar per engine view (refused loads left empty).

    ``rows``: the records of :func:`~eagle3_forensics.probe.core.compare_variants` (or their table)."""
    from matplotlib.figure import Figure  # optional: notebooks only

    table = variants_table(rows) if isinstance(rows, list) else rows

    names = list(dict.fromkeys(table["drafter"]))
    engines = list(dict.fromkeys(table["engine"]))
    fig = Figure(figsize=(8, 3.4), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / max(1, len(engines))
    for n, engine in enumerate(engines):
        sub = table[table["engine"] == engine].set_index("drafter")
        values = [sub["acceptance length"].get(name) for name in names]
        ax.bar(
            [i + n * width for i in range(len(names))],
            [v if v is not None else 0 for v in values],
            width,
            label=engine,
        )
    ax.set_xticks(
        [i + width * (len(engines) - 1) / 2 for i in range(len(names))], names, rotation=20, ha="right"
    )
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_ylabel("acceptance length")
    ax.legend(fontsize=8)
    return fig
