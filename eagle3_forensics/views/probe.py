"""Rendering of in-process probe results: the CLI text, and the tables and figures of notebook 04.

Everything here takes a :class:`~eagle3_forensics.probe.core.ProbeResult` (or the records of
:func:`~eagle3_forensics.probe.core.compare_variants`) and computes nothing beyond tabulating.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eagle3_forensics.probe.teacher_forced import CONVENTIONS
from eagle3_forensics.views import format as fmt
from eagle3_forensics.views.html import esc

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
    lines += served_lines(r)
    return "\n".join(lines)


def served_lines(r: ProbeResult) -> list[str]:
    """The CLI text of the rendering, segment and length blocks (probe/served.py)."""
    lines: list[str] = []
    if r.chat is not None:
        lines += [
            "",
            f"chat template          kwargs {r.chat['template_kwargs']}  mode {r.chat['mode'] or 'n/a'}",
        ]
    if r.segments is not None:
        lines += ["", "by segment             positions  proposed  accepted  rate   acceptance length"]
        for seg, row in r.segments["by_segment"].items():
            if row["positions"] or row["proposed"]:
                lines.append(
                    f"  {seg:20} {row['positions']:>9} {row['proposed']:>9} {row['accepted']:>9}  "
                    f"{_f(row['acceptance_rate'], 2):>5}  {_f(row['acceptance_length'])}"
                )
    for f in r.findings or []:
        lines += ["", f"{f.severity.value}: {f.code}: {f.message}"]
    bl = r.by_length
    if bl is not None and bl.get("rows"):
        trained = bl.get("trained_length")
        mark = (
            f"trained length {trained} ({bl.get('trained_length_from')})"
            if trained
            else "trained length unknown"
        )
        lines += ["", f"by prompt length       {mark}", "  length  prompt tokens  acceptance length  rate"]
        for row in bl["rows"]:
            flag = "  > trained" if row["beyond_trained"] else ""
            lines.append(
                f"  {row['length']:>6}  {row['prompt_tokens']:>13}  {_f(row['acceptance_length']):>17}  "
                f"{_f(row['acceptance_rate'], 2)}{flag}{'  ' + row['note'] if row['note'] else ''}"
            )
    return lines


def segment_table(r: ProbeResult) -> Any:
    """Acceptance per segment (scaffold, reasoning, answer, tool call); None when not measured."""
    import pandas as pd  # optional: notebooks only

    if r.segments is None:
        return None
    rows = [
        {
            "segment": seg,
            "share of positions": fmt.percent(row["share_of_positions"]),
            "proposed": row["proposed"],
            "accepted": row["accepted"],
            "acceptance rate": fmt.rate(row["acceptance_rate"]),
            "acceptance length": fmt.acceptance_length(row["acceptance_length"], "no verify step"),
            "outside draft vocabulary": fmt.number(
                row.get("outside_draft_vocab"), 0, "draft vocabulary unknown"
            ),
        }
        for seg, row in r.segments["by_segment"].items()
    ]
    return pd.DataFrame(rows)


def length_table(r: ProbeResult) -> Any:
    """Acceptance against prompt length, the rows past the trained length marked; None when not measured."""
    import pandas as pd  # optional: notebooks only

    if r.by_length is None or not r.by_length.get("rows"):
        return None
    rows = [
        {
            "prompt length": row["length"],
            "prompt tokens (mean)": row["prompt_tokens"],
            "acceptance length": fmt.acceptance_length(
                row["acceptance_length"], row["note"] or "not measured"
            ),
            "acceptance rate": fmt.rate(row["acceptance_rate"]),
            "past trained length": fmt.yes_no(row["beyond_trained"]),
        }
        for row in r.by_length["rows"]
    ]
    return pd.DataFrame(rows)


def length_figure(r: ProbeResult) -> Any:
    """Acceptance length against prompt length, a vertical line at the trained length; None when not
    measured or when nothing was accepted at any length."""
    from matplotlib.figure import Figure  # optional: notebooks only

    if r.by_length is None or not r.by_length.get("rows"):
        return None
    pts = [
        (row["length"], row["acceptance_length"]) for row in r.by_length["rows"] if row["acceptance_length"]
    ]
    if not any(
        al > 1.0 for _, al in pts
    ):  # nothing accepted at any length: the table says so, no empty chart
        return None
    fig = Figure(figsize=(6.4, 3.2), layout="constrained")
    ax = fig.subplots()
    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label="live acceptance length")
    trained = r.by_length.get("trained_length")
    if trained:
        ax.axvline(trained, color="#c33", linestyle="--", label=f"trained length {trained}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("prompt tokens")
    ax.set_ylabel("acceptance length")
    ax.set_ylim(1, r.k + 1)
    ax.legend(fontsize=8)
    return fig


# -- notebook tables and figures (pandas / matplotlib imported lazily; no computation beyond tabulating)


def summary_table(r: ProbeResult) -> Any:
    """Headline numbers with the convention each follows."""
    import pandas as pd  # optional: notebooks only

    tf = r.teacher_forced
    rows = [
        (
            "acceptance length (live)",
            fmt.acceptance_length(r.acceptance_length),
            CONVENTIONS["acceptance_length"],
        ),
        (
            "simulated acceptance length (teacher-forced)",
            fmt.acceptance_length(
                None if tf is None else tf.simulated_acceptance_length, "teacher-forced estimate not run"
            ),
            CONVENTIONS["teacher_forced.simulated_acceptance_length"],
        ),
        ("mean accepted drafts", fmt.number(r.mean_accepted_drafts, 2), CONVENTIONS["mean_accepted_drafts"]),
        ("acceptance rate", fmt.rate(r.acceptance_rate), CONVENTIONS["acceptance_rate"]),
        ("drafts (verify steps)", fmt.number(r.live.num_drafts), "vLLM num_drafts"),
        (
            "drafted / accepted tokens",
            f"{r.live.drafted} / {r.live.accepted}",
            "vLLM num_draft_tokens / num_accepted_tokens",
        ),
        (
            "lossless",
            fmt.yes_no(r.lossless),
            "committed tokens == plain greedy decoding of the target, every prompt",
        ),
        (
            "tokens/s speculative",
            fmt.speed(r.tokens_per_s),
            f"{r.device} ({r.dtype}), new tokens / wall time incl. prefill",
        ),
        ("tokens/s plain greedy", fmt.speed(r.greedy_tokens_per_s), "same target, prompts and device"),
        ("speedup", fmt.ratio(r.speedup_vs_greedy), "speculative / greedy tokens per second"),
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


def nothing_accepted(r: ProbeResult) -> bool:
    """Whether no draft token was accepted at any position (live, and teacher-forced when run)."""
    series = [r.per_position_cumulative, r.per_position_conditional]
    if r.teacher_forced is not None:
        series.append(r.teacher_forced.cumulative)
    return all(not x for values in series for x in values)


def empty_chart_text(r: ProbeResult) -> str:
    """What the per-position chart would show when :func:`nothing_accepted`, in words."""
    return (
        f"No per-position chart: no draft token was accepted at any of the {r.k} positions "
        f"(acceptance length {fmt.acceptance_length(r.acceptance_length)}, {r.live.accepted} of "
        f"{r.live.drafted} drafted tokens accepted, {r.engine} view)."
    )


def acceptance_chart(r: ProbeResult) -> Any:
    """The per-position chart (:func:`per_position_figure`), or, when nothing was accepted, a line
    saying so (an ``IPython.display.HTML``): an empty frame with a legend tells a reader nothing."""
    if nothing_accepted(r):
        from IPython.display import HTML  # optional: notebooks only

        return HTML(f'<p class="e3f-empty-chart" style="color:#555"><em>{esc(empty_chart_text(r))}</em></p>')
    return per_position_figure(r)


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
    ax.set_title(f"K={r.k}: acceptance length {fmt.acceptance_length(r.acceptance_length)} ({r.engine} view)")
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
                "aux ids (HF)": fmt.missing("not scored") if res is None else fmt.value(list(res.aux_ids)),
                "simulated acceptance length": fmt.acceptance_length(
                    None if res is None else res.simulated_acceptance_length, "not scored"
                ),
                "step-0 accuracy": fmt.rate(None if res is None else res.accuracy[0], "not scored"),
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
    unfilled = list(v.get("unfilled", []))
    flags = v.get("flags")
    flag_rows = (
        [(f"norm flag {k}", val) for k, val in fmt.flags_table(flags).itertuples(index=False)]
        if isinstance(flags, dict) and flags
        else [("norm flags", fmt.value(flags))]
    )
    shown = ", ".join(unfilled[:6]) + (f", … ({len(unfilled) - 6} more)" if len(unfilled) > 6 else "")
    rows = [
        ("engine view", fmt.value(v.get("engine"))),
        ("revision", fmt.value(v.get("revision"))),
        ("format family", fmt.value(v.get("family"))),
        ("aux ids (HF index)", fmt.value(v.get("aux_ids_hf"))),
        ("aux ids from", fmt.value(v.get("aux_source"))),
        *flag_rows,
        ("d2t", fmt.value(v.get("d2t_source"))),
        ("from the target", ", ".join(v.get("from_target", [])) or fmt.missing("nothing")),
        (
            "never loaded (uninitialised)",
            f"{len(unfilled)}: {shown}" if unfilled else "none: every parameter is loaded",
        ),
        ("checkpoint keys not used", ", ".join(v.get("ignored_keys", [])[:8]) or fmt.missing("none")),
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
