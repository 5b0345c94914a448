"""The explorers of notebooks 01–05 (eagle3_forensics.views.explorers): their data functions on the
demo world, their static views (escaped, no script) and that the live ones build a widget."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from builders import DIR_PAYLOAD, TENSOR_PAYLOAD

pytest.importorskip("pandas")

from paths import DEMO

from eagle3_forensics.checks.diagnose import diagnose, inspect_checkpoint
from eagle3_forensics.io.dumps import ScanOptions
from eagle3_forensics.probe.offline import OfflineProbeResult, probe_offline
from eagle3_forensics.probe.samples import SampleScorer
from eagle3_forensics.views import explorers as x
from eagle3_forensics.views.widgets import STATIC_NOTE

TARGET = DEMO / "target"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def static_page(explorer: x.Explorer) -> str:
    bundle = explorer._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}  # no widget built headless
    page = str(bundle["text/html"])
    assert "<script" not in page.lower() and STATIC_NOTE in page
    return page


def has_widget(explorer: x.Explorer) -> bool:
    pytest.importorskip("ipywidgets")
    return WIDGET_MIME in explorer._repr_mimebundle_() and "text/html" in explorer._repr_mimebundle_()


# -- 01 ------------------------------------------------------------------------------------------


def test_key_browser_filters_by_one_engines_fate() -> None:
    path = DEMO / "drafters" / "speculators_layout"
    d, ins = diagnose(path, target=TARGET), inspect_checkpoint(path)
    filters = dict(x.fate_filters(d))
    for engine, load in d.loads.items():  # every key counted once per engine
        assert sum(n for f, n in filters.items() if f.startswith(engine + ":")) == len(load.fates)
    assert filters["eagle: dropped"] > 0
    dropped = x.key_fate_rows(d, ins, "eagle: dropped")
    assert len(dropped) == filters["eagle: dropped"] < len(ins.tensors)
    assert all(a.split(" ")[0] == "dropped" for a in dropped["eagle"])
    assert len(x.key_fate_rows(d, ins)) == len(ins.tensors)
    narrowed = x.key_fate_rows(d, ins, "eagle: dropped", query="layers")
    assert 0 < len(narrowed) <= len(dropped) and all("layers" in n for n in narrowed["name"])
    assert x.key_fate_rows(d, ins, "speculators: dropped").empty
    for bad in ("eagle dropped", "nosuchengine: loaded"):
        with pytest.raises(ValueError, match="fate filter"):
            x.key_fate_rows(d, ins, bad)

    page = static_page(x.key_browser(d, ins, fate="eagle: dropped", interactive=False))
    assert f"{len(dropped)} of {len(ins.tensors)} keys" in page and page.count("<tr>") == len(
        dropped
    )  # body rows (the header row has a style)
    assert "color:#c62828" in static_page(x.key_browser(d, ins, fate="nope: x", interactive=False))
    assert has_widget(x.key_browser(d, ins, interactive=True))


def test_key_browser_escapes_names(hostile_drafter: Path) -> None:
    d, ins = diagnose(hostile_drafter, target=TARGET), inspect_checkpoint(hostile_drafter)
    page = static_page(x.key_browser(d, ins, query="onerror", interactive=False))
    assert "1 of" in page and html.escape(TENSOR_PAYLOAD) in page
    for raw in (TENSOR_PAYLOAD, DIR_PAYLOAD, "<img", "<svg"):
        assert raw not in page


# -- 02 ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def double_offset_maps() -> dict[str, Any]:
    from eagle3_forensics.vocab.inputs import build_vocab_mapping_from_data, load_mapping
    from eagle3_forensics.vocab.mapping import suggest_d2t_fix

    m = load_mapping(DEMO / "drafters" / "d2t_double_offset", TARGET)
    big_v, v = m.sizes()
    rebuilt = build_vocab_mapping_from_data(
        ids=DEMO / "corpus_ids.safetensors", draft_vocab_size=v, target_vocab_size=big_v, warn=False
    )
    fix = suggest_d2t_fix(m.d2t, m.t2d, m.target_vocab_size, m.draft_vocab_size)
    return x.named_maps(m, rebuilt=rebuilt, fix=fix, reference=DEMO / "drafters" / "healthy", target=TARGET)


def test_map_compare_picks_any_two_maps(double_offset_maps: dict[str, Any]) -> None:
    from eagle3_forensics.vocab.mapping import compare_mappings

    maps = double_offset_maps
    assert list(maps) == [
        "checkpoint (stored)",
        "rebuilt from the data",
        "checkpoint after the fix",
        "reference: healthy",
    ]
    stored_vs_fixed = x.compare_maps(maps, "checkpoint (stored)", "checkpoint after the fix")
    assert stored_vs_fixed.kinds[0] == "double_offset" and stored_vs_fixed.kinds[1] != "double_offset"
    assert stored_vs_fixed.d2t_equal is False and stored_vs_fixed.labels[1] == "checkpoint after the fix"
    direct = compare_mappings(maps["rebuilt from the data"], maps["reference: healthy"])
    picked = x.compare_maps(maps, "rebuilt from the data", "reference: healthy")
    assert picked.jaccard == direct.jaccard and picked.fingerprints == direct.fingerprints
    with pytest.raises(ValueError, match="no map named"):
        x.compare_maps(maps, "checkpoint (stored)", "nope")

    page = static_page(
        x.map_compare(maps, a="rebuilt from the data", b="reference: healthy", interactive=False)
    )
    assert f"Jaccard {picked.jaccard:.3f}" in page and "reference: healthy" in page
    assert re.search(rf"<td[^>]*>{picked.jaccard:.3f}</td>", page)  # the table rounds as the headline does
    first_two = static_page(x.map_compare(maps, interactive=False))
    assert "<b>checkpoint (stored)</b> against <b>rebuilt from the data</b>" in first_two
    assert has_widget(x.map_compare(maps, interactive=True))
    with pytest.raises(ValueError, match="two maps"):
        x.map_compare({"only": maps["checkpoint (stored)"]})


def test_the_same_selection_with_another_d2t_is_not_called_the_same(
    double_offset_maps: dict[str, Any],
) -> None:
    """02's headline: the stored double-offset map selects the healthy ids (its t2d is right), but the
    engines read its d2t to other target ids; the headline says both, never just "the same selection"."""
    maps = double_offset_maps
    cmp = x.compare_maps(maps, "checkpoint (stored)", "reference: healthy")
    assert cmp.identical and cmp.d2t_equal is False
    assert not cmp.same_map and cmp.read_differ == cmp.draft_vocab_sizes[0] - 1  # all but draft id 0
    page = static_page(
        x.map_compare(maps, a="checkpoint (stored)", b="reference: healthy", interactive=False)
    )
    assert "but the stored d2t differ" in page and f"for {cmp.read_differ} of 256 draft ids" in page
    fixed = x.compare_maps(maps, "checkpoint after the fix", "reference: healthy")
    assert fixed.same_map and fixed.read_differ == 0
    assert fixed.headline().startswith("the same selection, and the engines read the same target id")


def test_map_compare_escapes_labels(double_offset_maps: dict[str, Any]) -> None:
    maps = {
        TENSOR_PAYLOAD: double_offset_maps["checkpoint (stored)"],
        DIR_PAYLOAD: double_offset_maps["reference: healthy"],
    }
    page = static_page(x.map_compare(maps, interactive=False))
    assert html.escape(TENSOR_PAYLOAD) in page
    for raw in (TENSOR_PAYLOAD, DIR_PAYLOAD, "<img", "<svg"):
        assert raw not in page


# -- 03 ------------------------------------------------------------------------------------------


def test_coverage_at_size_and_class() -> None:
    from eagle3_forensics.vocab.coverage import TOKEN_CLASSES, corpus_counts, coverage_report, token_table
    from eagle3_forensics.vocab.inputs import load_mapping

    m = load_mapping(DEMO / "drafters" / "healthy", TARGET)
    big_v, v = m.sizes()
    counts = corpus_counts(ids=DEMO / "corpus_ids.safetensors", target_vocab_size=big_v, progress=False)
    tokens = token_table(TARGET, big_v)
    cov = coverage_report(counts, m, tokens)
    at_v = x.coverage_at(counts, m, v, tokens)
    assert list(at_v["size v"]) == [v, v]
    assert at_v["covered"][0] == cov.covered and at_v["covered"][1] == round(cov.oracle * cov.total)
    small = x.coverage_at(counts, m, 10, tokens)
    assert small["covered"][1] == round(cov.curve[9] * cov.total) < at_v["covered"][1]
    assert small["covered"][0] == at_v["covered"][0]  # the checkpoint's map does not move with the slider
    per_class = [x.coverage_at(counts, m, v, tokens, k) for k in TOKEN_CLASSES]
    assert sum(int(df["covered"][0]) for df in per_class) == cov.covered
    assert sum(int(df["counted tokens of the class"][0]) for df in per_class) == cov.total
    assert x.token_classes(tokens) == ["all", *TOKEN_CLASSES] and x.token_classes(None) == ["all"]
    for size, klass, match in (
        (0, "all", "must be in"),
        (big_v + 1, "all", "must be in"),
        (5, "nope", "token class"),
    ):
        with pytest.raises(ValueError, match=match):
            x.coverage_at(counts, m, size, tokens, klass)
    with pytest.raises(ValueError, match="token class"):
        x.coverage_at(counts, m, 5, None, "ordinary")

    page = static_page(x.coverage_explorer(counts, m, tokens, interactive=False))
    assert f"Draft vocabulary size <b>{v}</b>" in page
    page = static_page(x.coverage_explorer(counts, m, tokens, size=10, klass="ordinary", interactive=False))
    assert "size <b>10</b>, token class <b>ordinary</b>" in page
    assert has_widget(x.coverage_explorer(counts, m, tokens, interactive=True))


# -- 04 ------------------------------------------------------------------------------------------


def test_engine_views_are_probe_engines() -> None:
    from eagle3_forensics.engines import ENGINE_NAMES, resolve_release

    specs = [spec for _, spec in x.engine_views()]
    assert specs[0] == "reference" and len(set(specs)) == len(specs)
    assert set(ENGINE_NAMES) <= set(specs) and "sglang==0.5.10.post1" in specs and "vllm==0.10.2" in specs
    for spec in specs[1:]:
        resolve_release(spec)  # every release the picker offers resolves


def test_probe_explorer_static_view(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(f"plain prompt\n{TENSOR_PAYLOAD} and more\n", encoding="utf-8")
    healthy = DEMO / "drafters" / "healthy"
    page = static_page(
        x.probe_explorer(
            healthy, TARGET, prompts, k=5, engine="sglang==0.5.11", picked=[1, 7], interactive=False
        )
    )
    assert "sglang==0.5.11" in page and ">5<" in page and "probe not run" in page
    assert re.search(
        r"<td[^>]*>1: 1: &lt;img", page
    )  # one prompt picked (7 is out of range), shown by its position
    assert "<img" not in page
    assert has_widget(x.probe_explorer(healthy, TARGET, prompts, interactive=True))


# -- 05 ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scored() -> tuple[SampleScorer, OfflineProbeResult]:
    args = (DEMO / "drafters" / "healthy", DEMO / "dumps" / "specforge")
    r = probe_offline(*args, ScanOptions(target=TARGET), k=3, device="cpu")
    return SampleScorer(*args, ScanOptions(target=TARGET), k=3, device="cpu"), r


def test_sample_scores_add_up_to_probe_offline(scored: tuple[SampleScorer, OfflineProbeResult]) -> None:
    scorer, r = scored
    per = [scorer.score(it.index) for it in scorer.items]
    assert all(s.problem is None for s in per)
    assert sum(len(s.slots) for s in per) == r.counts.slots
    hits = np.sum([[sum(c) for c in s.correct] for s in per], axis=0).tolist()
    assert hits == r.counts.hits
    prefix = [sum(sum(1 for a in s.accepted() if a > j) for s in per) for j in range(3)]
    assert prefix == r.counts.prefix
    worst = r.counts.worst[0]
    assert scorer.score(worst[1]).simulated_acceptance_length == pytest.approx(worst[0])


def test_sample_rows_and_browser(scored: tuple[SampleScorer, OfflineProbeResult]) -> None:
    from eagle3_forensics.vocab.coverage import token_table

    scorer, r = scored
    s = scorer.score(2)
    rows = x.sample_rows(s, token_table(TARGET))
    assert len(rows) == len(s.input_ids) and list(rows["token id"]) == s.input_ids
    assert list(rows["loss mask"]) == ["1" if m else "0" for m in s.loss_mask]
    answered = rows[rows["draft steps"] != ""]
    assert list(answered["position"]) == [t + 1 for t in s.slots]
    assert list(answered["accepted"]) == [str(a) for a in s.accepted()]
    assert all(len(steps) == 3 and set(steps) <= {"✓", "✗"} for steps in answered["draft steps"])

    choices = x.sample_choices(scorer, r)
    assert len(choices) == len(scorer.items) and choices[0][1] == r.counts.worst[0][1]
    assert "worst" in choices[0][0] and sorted(i for _, i in choices) == [it.index for it in scorer.items]
    worst_file = next(it.rel for it in scorer.items if it.index == r.counts.worst[0][1])
    page = static_page(x.sample_browser(scorer, result=r, target=TARGET, interactive=False))
    assert f"<b>{worst_file}</b>" in page and "simulated acceptance length" in page
    other = scorer.items[2]
    page = static_page(x.sample_browser(scorer, sample=other.path.name, target=TARGET, interactive=False))
    assert f"<b>{other.rel}</b>" in page and re.search(r"<td[^>]*>␣the</td>", page)  # tokens spelled ␣the
    assert "no sample" in static_page(x.sample_browser(scorer, sample="nope.ckpt", interactive=False))
    assert "no sample with index" in static_page(x.sample_browser(scorer, sample=999, interactive=False))
    assert has_widget(x.sample_browser(scorer, result=r, interactive=True))
