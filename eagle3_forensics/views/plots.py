"""Vocabulary-forensics figures: pure functions that return a ``matplotlib.figure.Figure``.

Nothing here touches pyplot's global state (figures are built with ``Figure()`` directly), so a
notebook shows exactly the figure a cell returns, once, and scripts can ``fig.savefig(...)``.

* :func:`plot_d2t_staircase` - stored ``d2t[i]`` against draft id ``i`` next to the offsets
  ``t2d`` implies: a correct map lies on the staircase; absolute ids climb far above it, a double
  conversion falls below zero, a corrupt block shows as a detour.
* :func:`plot_offset_histogram`, :func:`plot_selected_density` - the shape of the map.
* :func:`plot_token_frequencies`, :func:`plot_coverage_curve`, :func:`plot_coverage_by_class`,
  :func:`plot_top_uncovered` - corpus histograms and coverage (see :mod:`eagle3_forensics.vocab.coverage`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from eagle3_forensics.views import format as fmt
from eagle3_forensics.vocab.coverage import TOKEN_CLASSES, CoverageReport, selection_mask
from eagle3_forensics.vocab.mapping.classify import classify_mapping
from eagle3_forensics.vocab.mapping.counts import TokenCounts

_OK, _BAD, _REF, _GREY = "#1b7837", "#c51b7d", "#4d4d4d", "#bababa"


def _np(x: Any) -> np.ndarray | None:
    if x is None:
        return None
    if hasattr(x, "detach"):
        return np.asarray(x.detach().cpu().numpy())
    return np.asarray(x)


def _label(text: Any, width: int = 24) -> str:
    """A token string made safe for a matplotlib label: visible whitespace, no mathtext."""
    s = fmt.token(text)  # ␣the, \\n, <0xCF>: the spelling every table uses
    if len(s) > width:
        s = s[: width - 1] + "…"
    return s.replace("$", r"\$")


def _figure(width: float = 8.0, height: float = 4.0) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def _map_parts(mapping: Any, t2d: Any) -> tuple[np.ndarray | None, np.ndarray | None, int | None]:
    """(d2t, t2d, V) from a loaded/built map or from the raw tensors."""
    if hasattr(mapping, "d2t") and hasattr(mapping, "t2d"):
        d, m = _np(mapping.d2t), _np(mapping.t2d)
        return d, m, getattr(mapping, "target_vocab_size", None)
    m = _np(t2d)
    return _np(mapping), m, None if m is None else int(m.shape[0])


def plot_d2t_staircase(
    d2t: Any, t2d: Any = None, *, target_vocab_size: int | None = None, title: str | None = None
) -> Figure:
    """``d2t[i]`` (what the engine adds to draft id ``i``) against ``i``, over the offsets ``t2d`` implies.

    ``d2t`` may also be a map object (``d2t``/``t2d`` attributes); ``None`` plots only the expected staircase.
    """
    d, m, big_v = _map_parts(d2t, t2d)
    big_v = target_vocab_size or big_v
    fig = _figure()
    ax = fig.add_subplot()
    expected = None
    if m is not None and m.ndim == 1:
        sel = np.flatnonzero(m.astype(bool))
        expected = sel - np.arange(sel.shape[0])
        ax.step(
            np.arange(expected.shape[0]),
            expected,
            where="post",
            color=_REF,
            lw=2.5,
            alpha=0.45,
            label="expected offsets: nonzero(t2d) - i",
        )
    kind = None
    if d is not None and d.ndim == 1:
        res = classify_mapping(d, m, big_v, d.shape[0])
        kind = res.kind
        good = res.consistent
        ax.step(
            np.arange(d.shape[0]),
            d,
            where="post",
            color=_OK if good else _BAD,
            lw=1.2,
            label=f"stored d2t ({kind})",
        )
        if res.first_bad_index is not None:
            ax.axvline(res.first_bad_index, color=_BAD, ls=":", lw=1)
            ax.annotate(
                f"first wrong draft id: {res.first_bad_index}",
                (res.first_bad_index, 0),
                xytext=(6, 12),
                textcoords="offset points",
                color=_BAD,
                fontsize=8,
            )
    elif d is None:
        ax.text(
            0.5,
            0.5,
            "no d2t: engines add 0 (draft id i proposed as target id i)",
            transform=ax.transAxes,
            ha="center",
            color=_BAD,
        )
    ax.axhline(0, color=_GREY, lw=0.8)
    ax.set_xlabel("draft id i")
    ax.set_ylabel("d2t[i]  (target id = i + d2t[i])")
    ax.set_title(title or ("d2t staircase" + (f": {kind}" if kind else "")))
    ax.legend(loc="best", fontsize=8)
    return fig


def plot_offset_histogram(d2t: Any, t2d: Any = None, *, bins: int = 50, title: str | None = None) -> Figure:
    """Histogram of the stored offsets, over the histogram of the offsets ``t2d`` implies."""
    d, m, _ = _map_parts(d2t, t2d)
    fig = _figure()
    ax = fig.add_subplot()
    series = []
    if d is not None:
        series.append((d.astype(np.int64), "stored d2t", _BAD))
    if m is not None and m.ndim == 1:
        sel = np.flatnonzero(m.astype(bool))
        series.append((sel - np.arange(sel.shape[0]), "expected from t2d", _REF))
    if series:
        lo = min(int(s.min()) for s, _, _ in series if s.size)
        hi = max(int(s.max()) for s, _, _ in series if s.size)
        edges = np.linspace(lo, hi + 1, bins + 1)
        for values, name, color in series:
            ax.hist(
                values,
                bins=edges.tolist(),
                histtype="step" if name.startswith("expected") else "stepfilled",
                alpha=0.9 if name.startswith("expected") else 0.5,
                color=color,
                lw=1.5,
                label=name,
            )
        ax.axvline(0, color=_GREY, lw=0.8)
        ax.legend(fontsize=8)
    ax.set_xlabel("offset d2t[i]")
    ax.set_ylabel("draft ids")
    ax.set_title(title or "offset histogram (valid offsets are >= 0 and non-decreasing)")
    return fig


def plot_selected_density(
    selection: Any,
    counts: TokenCounts | np.ndarray | None = None,
    *,
    target_vocab_size: int | None = None,
    bins: int = 64,
    title: str | None = None,
) -> Figure:
    """Share of target ids selected per id range, with the corpus token mass per range when ``counts`` is given."""
    c = None if counts is None else (counts.counts if isinstance(counts, TokenCounts) else np.asarray(counts))
    size = (
        target_vocab_size
        or (None if c is None else int(c.shape[0]))
        or getattr(selection, "target_vocab_size", None)
    )
    if size is None:
        size = int(_np(getattr(selection, "t2d", selection)).shape[0])  # type: ignore[union-attr]
    mask = selection_mask(selection, int(size))
    edges = np.linspace(0, size, min(bins, size) + 1)
    idx = np.arange(size)
    per_bin = np.histogram(idx, bins=edges)[0]
    sel_bin = np.histogram(idx[mask], bins=edges)[0]
    fig = _figure()
    ax = fig.add_subplot()
    centers = (edges[:-1] + edges[1:]) / 2
    ax.bar(
        centers,
        sel_bin / np.maximum(per_bin, 1),
        width=np.diff(edges),
        color=_OK,
        alpha=0.6,
        label=f"selected ({int(mask.sum())} of {size})",
    )
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("target id")
    ax.set_ylabel("share of ids in the draft vocabulary")
    if c is not None and c.sum():
        ax2 = ax.twinx()
        mass = np.histogram(idx, bins=edges, weights=c)[0] / c.sum()
        ax2.step(edges[:-1], mass, where="post", color=_REF, lw=1.2, label="corpus token mass")
        ax2.set_ylabel("share of counted corpus tokens")
        ax2.legend(loc="upper right", fontsize=8)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(title or "where the draft vocabulary sits in the target vocabulary")
    return fig


def plot_token_frequencies(
    counts: TokenCounts | np.ndarray, selection: Any = None, *, title: str | None = None
) -> Figure:
    """Rank-frequency of the counted corpus tokens (log-log), draft-vocabulary ids marked."""
    c = counts.counts if isinstance(counts, TokenCounts) else np.asarray(counts)
    seen = np.flatnonzero(c)
    order = seen[np.lexsort((seen, -c[seen]))]
    ranks = np.arange(1, order.shape[0] + 1)
    fig = _figure()
    ax = fig.add_subplot()
    if selection is not None:
        mask = selection_mask(selection, int(c.shape[0]))[order]
        ax.scatter(
            ranks[mask], c[order][mask], s=8, color=_OK, label=f"in draft vocabulary ({int(mask.sum())})"
        )
        ax.scatter(
            ranks[~mask],
            c[order][~mask],
            s=8,
            color=_BAD,
            label=f"not in draft vocabulary ({int((~mask).sum())})",
        )
        ax.legend(fontsize=8)
    else:
        ax.plot(ranks, c[order], color=_REF)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rank of the token id by corpus frequency")
    ax.set_ylabel("counted occurrences")
    ax.set_title(title or f"token frequencies ({int(c.sum())} counted tokens, {seen.shape[0]} distinct ids)")
    return fig


def plot_coverage_curve(
    reports: CoverageReport | Sequence[CoverageReport], *, title: str | None = None
) -> Figure:
    """Best coverage against draft vocabulary size, each map's size and actual coverage marked."""
    items = [reports] if isinstance(reports, CoverageReport) else list(reports)
    fig = _figure()
    ax = fig.add_subplot()
    if items:
        curve = items[0].curve
        sizes = np.arange(1, curve.shape[0] + 1)
        ax.plot(sizes, curve, color=_REF, lw=1.5, label="best possible (top ids by corpus frequency)")
    for k, r in enumerate(items):
        color = [_BAD, _OK, "#2166ac", "#e08214"][k % 4]
        ax.axvline(r.draft_vocab_size, color=color, ls=":", lw=1)
        ax.scatter(
            [r.draft_vocab_size],
            [r.coverage],
            color=color,
            zorder=3,
            label=f"{r.label or 'map'}: v={r.draft_vocab_size}, covers {r.coverage:.1%} "
            f"(best {r.oracle:.1%})",
        )
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("draft vocabulary size v")
    ax.set_ylabel("share of counted corpus tokens")
    ax.set_title(title or "coverage curve: the ceiling on what a drafter can propose")
    ax.legend(fontsize=8, loc="lower right")
    return fig


def plot_coverage_by_class(report: CoverageReport, *, title: str | None = None) -> Figure:
    """Covered and uncovered corpus tokens per token class."""
    rows = [r for r in report.by_class if r["tokens"]] or [
        {"class": name, "tokens": 0, "covered": 0} for name in TOKEN_CLASSES[:3]
    ]
    names = [r["class"] for r in rows]
    covered = np.array([r["covered"] for r in rows])
    missed = np.array([r["tokens"] - r["covered"] for r in rows])
    fig = _figure()
    ax = fig.add_subplot()
    y = np.arange(len(names))
    ax.barh(y, covered, color=_OK, label="covered")
    ax.barh(y, missed, left=covered, color=_BAD, label="not in draft vocabulary")
    for i, r in enumerate(rows):
        if r["tokens"]:
            ax.annotate(
                f"{r['covered'] / r['tokens']:.1%} of {r['tokens']}",
                (r["tokens"], i),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
            )
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlabel("counted corpus tokens")
    ax.set_title(title or f"coverage by token class ({report.coverage:.1%} overall)")
    ax.legend(fontsize=8, loc="lower right")
    ax.margins(x=0.25)
    return fig


def plot_top_uncovered(report: CoverageReport, n: int = 20, *, title: str | None = None) -> Figure:
    """The most frequent corpus tokens the draft vocabulary misses, with their strings."""
    rows = report.top_uncovered[:n]
    fig = _figure(8.0, max(2.5, 0.28 * len(rows) + 1.2))
    ax = fig.add_subplot()
    if not rows:
        ax.text(
            0.5, 0.5, "every counted token is in the draft vocabulary", ha="center", transform=ax.transAxes
        )
        ax.set_axis_off()
        return fig
    y = np.arange(len(rows))
    ax.barh(y, [r["count"] for r in rows], color=_BAD)
    ax.set_yticks(y, [f"{r['id']}  {_label(r.get('text', ''))}" for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("counted occurrences")
    share = sum(r["share"] for r in rows)
    ax.set_title(title or f"most frequent uncovered tokens (these {len(rows)}: {share:.1%} of the corpus)")
    return fig
