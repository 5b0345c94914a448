"""Rendering of live-server probe results: the CLI text, and the engine-gap table and figure of notebook 04."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eagle3_forensics.probe.server.result import ServerProbeResult


def _f(x: Any, nd: int = 3) -> str:
    return "n/a" if x is None else (f"{x:.{nd}f}" if isinstance(x, float) else str(x))


def render_server_probe(r: ServerProbeResult) -> str:
    launch = r.server.get("launch") or {}
    lines = [
        f"probe-server  {r.url}  (engine: {r.server_engine})",
        f"model {r.server.get('model') or r.target or 'n/a'}  K={r.k or 'n/a'}  T=0  prompts={r.prompts}  "
        f"max_new_tokens={r.max_new_tokens}  concurrency={r.server.get('concurrency')}",
    ]
    if launch:
        lines.append(
            f"launch: method {launch.get('method') or 'n/a'}, K {launch.get('num_speculative_tokens') or 'n/a'}"
            f", topk {launch.get('topk') or 'n/a'}, draft tokens {launch.get('num_draft_tokens') or 'n/a'}, "
            f"{launch.get('shape') or 'shape n/a'}; drafter {launch.get('draft_model') or 'n/a'}"
            f" (from {launch.get('source') or 'n/a'})"
        )
        aux = launch.get("aux_layers")
        if aux:
            lines.append(
                f"aux layers (HF): drafter config {aux['drafter_config_hf']}, engine reads "
                f"{aux['engine_reads_hf']} ({'agree' if aux['agrees'] else 'DIFFER'})"
            )
    verify = r.server.get("verify")
    if verify:
        shown = ", ".join(
            f"{name} {'?' if v['effect'] == 'unknown' else repr(v['value'])}"
            + ("" if v["effect"] in ("exact", "unknown") else f" [{v['effect'].upper()}]")
            for name, v in verify["settings"].items()
        )
        lines.append(
            f"verification ({verify['release']}): {shown}"
            + ("" if verify["known"] else "  (? = not reported by the server: pass --launch)")
        )
    lines.append("")
    if r.measured:
        lines += [
            f"acceptance length      {_f(r.acceptance_length)}   (vLLM: 1 + accepted/num_drafts, includes the bonus)",
            f"acceptance rate        {_f(r.acceptance_rate)}   (accepted/drafted = {r.live.accepted}/{r.live.drafted})"
            if r.live.drafted
            else "acceptance rate        unknown (the server reports no proposed drafts, and K is unknown)",
            f"drafts (verify steps)  {r.live.num_drafts}   tokens generated {r.live.new_tokens} in "
            f"{r.live.seconds:.2f} s",
        ]
        if r.per_position_available:
            lines.append(
                "per position           cumulative "
                + " ".join(_f(x, 2) for x in r.per_position_cumulative)
                + "   conditional "
                + " ".join(_f(x, 2) for x in r.per_position_conditional)
            )
        else:
            lines.append("per position           not reported by this server")
        rep = r.server.get("engine_reported") or {}
        if "acceptance_length" in rep:
            lines.append(
                f"SGLang accept length   {_f(rep['acceptance_length']['value'])}   "
                "(Σ completion_tokens / Σ spec_verify_ct)"
            )
        avg = rep.get("avg_spec_accept_length")
        if avg and avg.get("after"):
            lines.append(
                f"avg_spec_accept_length {', '.join(_f(x) for x in avg['after'])}   (since server start)"
            )
    else:
        why = {
            "counters_impossible": "the server reports impossible counters (COUNTERS_IMPOSSIBLE)",
            "nothing_drafted": "nothing was drafted (NO_DRAFTS)",
            "server_fault": "the server could not be probed",
        }.get(r.status, "see the findings")
        lines.append(f"no acceptance measured: {why}")
    if r.compare:
        c = r.compare
        al = c["acceptance_length"]
        lines += [
            "",
            f"vs reference ({c['reference']['engine']} view)  acceptance length {_f(al['reference'])} → "
            f"gap {al['gap']:+.3f}"
            + (f" ({al['relative_gap']:+.1%})" if al["relative_gap"] is not None else "")
            + f"   {'within' if c['within_tolerance'] else 'OUTSIDE'} ±{c['tolerance']:.0%}"
            + ("" if c.get("decidable", True) else "   (not decidable: VERIFY_MODE_LOSSY)"),
        ]
        for row in c["per_position"]:
            lines.append(
                f"  position {row['position']}: server {_f(row['server_cumulative'], 3)}  reference "
                f"{_f(row['reference_cumulative'], 3)}  gap "
                + ("n/a" if row["gap_cumulative"] is None else f"{row['gap_cumulative']:+.3f}")
            )
    if r.findings:
        lines.append("")
        for f in sorted(r.findings, key=lambda f: f.severity.rank):
            lines.append(f"{f.severity.value.upper():8}{f.code}: {' '.join(f.message.split())}")
    lines.append(f"\nexit code: {r.exit_code}")
    return "\n".join(lines)


def engine_gap_table(r: ServerProbeResult) -> Any:
    """Per position: the server's cumulative and conditional acceptance beside the reference's."""
    import pandas as pd  # optional: notebooks only

    if not r.compare:
        return pd.DataFrame(columns=["position", "server cumulative", "reference cumulative", "gap"])
    rows = [
        {
            "position": row["position"],
            "server cumulative": row["server_cumulative"],
            "reference cumulative": row["reference_cumulative"],
            "gap (cumulative)": row["gap_cumulative"],
            "server conditional": row["server_conditional"],
            "reference conditional": row["reference_conditional"],
            "gap (conditional)": row["gap_conditional"],
        }
        for row in r.compare["per_position"]
    ]
    al = r.compare["acceptance_length"]
    rows.append(
        {
            "position": "acceptance length",
            "server cumulative": al["server"],
            "reference cumulative": al["reference"],
            "gap (cumulative)": al["gap"],
        }
    )
    return pd.DataFrame(rows)


def engine_gap_figure(r: ServerProbeResult) -> Any:
    """Bars: cumulative acceptance per position, server vs reference."""
    from matplotlib.figure import Figure  # optional: notebooks only

    fig = Figure(figsize=(6.4, 3.2), layout="constrained")
    ax = fig.subplots()
    rows = (r.compare or {}).get("per_position") or []
    xs = [row["position"] for row in rows]
    ax.bar([x - 0.2 for x in xs], [row["server_cumulative"] or 0 for row in rows], 0.4, label=f"{r.engine}")
    ax.bar(
        [x + 0.2 for x in xs],
        [row["reference_cumulative"] or 0 for row in rows],
        0.4,
        label=f"in-process ({(r.compare or {}).get('reference', {}).get('engine')} view)",
    )
    ax.set_xticks(xs, [f"draft {x}" for x in xs])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("cumulative acceptance")
    if r.compare:
        al = r.compare["acceptance_length"]
        ax.set_title(f"acceptance length: server {al['server']:.2f} vs reference {al['reference']:.2f}")
    ax.legend(fontsize=8, loc="lower left")
    return fig


def findings_table(r: ServerProbeResult) -> Any:
    import pandas as pd  # optional: notebooks only

    return pd.DataFrame(
        [f.to_dict() for f in r.findings],
        columns=["code", "severity", "engine", "message", "evidence", "fix"],
    )
