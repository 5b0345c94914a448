"""Trend figures of a run history: pure functions that return a ``matplotlib.figure.Figure``.

They take the trend dict of :func:`eagle3_forensics.runs.history.trend` (plain data: entries with
labels, and per drafter × notebook the points) and draw one small panel per drafter, so a drafter
that gets worse stands out without reading numbers. Nothing touches pyplot's global state.
"""

from __future__ import annotations

import math
from typing import Any

from matplotlib.figure import Figure

_STYLES = ("-", "--", ":", "-.")
_MAX_TICKS = 6


def _text(s: Any) -> str:
    """A drafter / notebook name made safe for a matplotlib label (no mathtext)."""
    return str(s).replace("$", r"\$")


def _measured_by_drafter(trend: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for s in trend.get("series") or []:
        if s.get("measured"):
            out.setdefault(str(s["drafter"]), []).append(s)
    return out


def _grid(n: int) -> tuple[Figure, list[Any]]:
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(4.2 * ncols, 2.7 * nrows + 0.4), layout="constrained")
    axes = [fig.add_subplot(nrows, ncols, i + 1) for i in range(n)]
    return fig, axes


def _xaxis(ax: Any, labels: list[str]) -> None:
    n = len(labels)
    step = max(1, math.ceil(n / _MAX_TICKS))
    ticks = list(range(0, n, step))
    if ticks and ticks[-1] != n - 1:
        ticks.append(n - 1)  # always show the newest run
    ax.set_xticks(ticks)
    ax.set_xticklabels([_text(labels[i]) for i in ticks], rotation=30, ha="right", fontsize=7)
    ax.set_xlim(-0.5, max(n - 0.5, 0.5))
    ax.grid(alpha=0.3)


def _positions(trend: dict[str, Any]) -> dict[str, int]:
    return {str(e["id"]): i for i, e in enumerate(trend.get("entries") or [])}


def plot_acceptance_trend(trend: dict[str, Any]) -> Figure | None:
    """Acceptance length over the runs, one panel per drafter, one line per notebook that measures it.

    ``None`` when no run in the trend measured acceptance."""
    by_drafter = _measured_by_drafter(trend)
    if not by_drafter:
        return None
    labels = [str(e.get("label") or e["id"]) for e in trend.get("entries") or []]
    pos = _positions(trend)
    fig, axes = _grid(len(by_drafter))
    for ax, (drafter, items) in zip(axes, by_drafter.items(), strict=True):
        for j, s in enumerate(items):
            pts = [
                (pos[p["entry"]], p["acceptance_length"])
                for p in s["points"]
                if p["acceptance_length"] is not None
            ]
            ax.plot(
                [x for x, _ in pts],
                [y for _, y in pts],
                _STYLES[j % len(_STYLES)],
                marker="o",
                markersize=3,
                label=_text(s["notebook"]),
            )
        # the whole possible range, 1 … K + 1: a drop looks as large as it is, noise as small
        k = max((len(p["per_position"] or []) for s in items for p in s["points"]), default=0)
        top = max([k + 1.0, *(p["acceptance_length"] or 0 for s in items for p in s["points"])])
        if k:
            ax.set_ylim(0.9, top + 0.1)
        ax.set_title(_text(drafter), fontsize=9)
        ax.set_ylabel("acceptance length", fontsize=8)
        _xaxis(ax, labels)
        ax.legend(fontsize=6, loc="best")
    fig.suptitle("Acceptance length per run (tokens per target forward)", fontsize=10)
    return fig


def plot_per_position_trend(trend: dict[str, Any]) -> Figure | None:
    """Cumulative acceptance at each draft position over the runs, one panel per drafter
    (colour: position; line style: notebook). ``None`` when no run measured it."""
    by_drafter = _measured_by_drafter(trend)
    if not by_drafter:
        return None
    labels = [str(e.get("label") or e["id"]) for e in trend.get("entries") or []]
    pos = _positions(trend)
    fig, axes = _grid(len(by_drafter))
    for ax, (drafter, items) in zip(axes, by_drafter.items(), strict=True):
        for j, s in enumerate(items):
            k = max((len(p["per_position"] or []) for p in s["points"]), default=0)
            for i in range(k):
                pts = [
                    (pos[p["entry"]], p["per_position"][i])
                    for p in s["points"]
                    if p["per_position"] and len(p["per_position"]) > i
                ]
                ax.plot(
                    [x for x, _ in pts],
                    [y for _, y in pts],
                    _STYLES[j % len(_STYLES)],
                    color=f"C{i}",
                    marker=".",
                    label=_text(f"{s['notebook']} · pos {i + 1}"),
                )
        ax.set_title(_text(drafter), fontsize=9)
        ax.set_ylabel("cumulative acceptance", fontsize=8)
        ax.set_ylim(-0.05, 1.05)
        _xaxis(ax, labels)
        ax.legend(fontsize=5, loc="best")
    fig.suptitle("Per-position acceptance per run", fontsize=10)
    return fig


__all__ = ["plot_acceptance_trend", "plot_per_position_trend"]
