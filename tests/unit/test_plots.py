"""Figures are pure: each function returns a Figure, touches no pyplot state, and renders."""

from __future__ import annotations

import io

import numpy as np
import pytest
from paths import DEMO

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch

pytest.importorskip("matplotlib")  # the notebooks extra

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from eagle3_forensics.views.plots import (
    _label,
    plot_coverage_by_class,
    plot_coverage_curve,
    plot_d2t_staircase,
    plot_offset_histogram,
    plot_selected_density,
    plot_token_frequencies,
    plot_top_uncovered,
)
from eagle3_forensics.vocab.coverage import coverage_report, token_table
from eagle3_forensics.vocab.inputs import load_mapping
from eagle3_forensics.vocab.mapping import absolute_to_offsets, build_vocab_mapping

pytestmark = pytest.mark.filterwarnings("ignore::eagle3_forensics.vocab.mapping.VocabPaddingWarning")

V, v = 300, 64


def _render(fig: Figure) -> int:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return len(buf.getvalue())


@pytest.fixture
def story() -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(0)
    sel = np.sort(np.concatenate([np.arange(10), rng.choice(np.arange(10, V), v - 10, replace=False)]))
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[torch.from_numpy(sel)] = True
    return sel, torch.from_numpy(sel - np.arange(v)), t2d


@pytest.fixture
def counts() -> np.ndarray:
    rng = np.random.default_rng(1)
    return np.bincount(rng.zipf(1.4, size=5000) % V, minlength=V)


def _texts(fig: Figure) -> str:
    ax = fig.axes[0]
    parts = [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
    legend = ax.get_legend()
    if legend is not None:
        parts += [t.get_text() for t in legend.get_texts()]
    parts += [t.get_text() for t in ax.texts]
    return " | ".join(parts)


def test_staircase_names_the_encoding(story: tuple[np.ndarray, torch.Tensor, torch.Tensor]) -> None:
    sel, d2t, t2d = story
    before = plt.get_fignums()
    for stored, kind in (
        (d2t, "consistent_offsets"),
        (torch.from_numpy(sel), "absolute"),
        (absolute_to_offsets(d2t), "double_offset"),
    ):
        fig = plot_d2t_staircase(stored, t2d)
        assert isinstance(fig, Figure) and kind in _texts(fig)
        assert _render(fig) > 1000
        (line,) = [ln for ln in fig.axes[0].lines if str(ln.get_label()).startswith("stored d2t")]
        assert np.array_equal(np.asarray(line.get_ydata()), stored.numpy())
    missing = plot_d2t_staircase(None, t2d)
    assert "no d2t" in _texts(missing)
    assert "first wrong draft id: 1" in _texts(plot_d2t_staircase(absolute_to_offsets(d2t), t2d))
    assert plt.get_fignums() == before  # nothing registered with pyplot


def test_map_figures_accept_loaded_maps(
    story: tuple[np.ndarray, torch.Tensor, torch.Tensor], counts: np.ndarray
) -> None:
    _sel, d2t, t2d = story
    built = build_vocab_mapping(np.repeat(np.arange(V), counts), v, V)
    for fig in (
        plot_offset_histogram(d2t, t2d),
        plot_offset_histogram(built),
        plot_selected_density(t2d, counts),
        plot_selected_density(built),
        plot_token_frequencies(counts, t2d),
        plot_token_frequencies(counts),
    ):
        assert isinstance(fig, Figure) and _render(fig) > 1000
    demo = load_mapping(DEMO / "drafters" / "d2t_absolute")
    assert "absolute" in _texts(plot_d2t_staircase(demo))
    assert _render(plot_selected_density(demo)) > 1000


def test_coverage_figures(story: tuple[np.ndarray, torch.Tensor, torch.Tensor], counts: np.ndarray) -> None:
    _sel, _d2t, t2d = story
    tokens = token_table(DEMO / "target", V)
    r = coverage_report(counts, t2d, tokens, top_n=12, label="ckpt")
    best = coverage_report(
        counts, build_vocab_mapping(np.repeat(np.arange(V), counts), v, V), tokens, label="best"
    )
    curve = plot_coverage_curve([r, best])
    assert "v=64" in _texts(curve) and f"{r.coverage:.1%}" in _texts(curve)
    assert len(plot_top_uncovered(r, 12).axes[0].patches) == 12
    assert "%" in _texts(plot_coverage_by_class(r))
    everything = coverage_report(counts, np.ones(V, dtype=bool))
    assert "every counted token" in _texts(plot_top_uncovered(everything))
    for fig in (curve, plot_coverage_curve(r), plot_coverage_by_class(everything), plot_top_uncovered(r)):
        assert _render(fig) > 1000


def test_labels_are_safe_for_matplotlib() -> None:
    assert _label("$x$") == r"\$x\$"  # no mathtext
    assert _label(" a") == "␣a" and _label("\n") == "\\n"  # the spelling every table uses
    assert len(_label("x" * 100)) <= 24
