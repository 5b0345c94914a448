"""The explorers of notebooks 01–05, built like those of notebook 00 (:mod:`.widgets`).

Each is a thin ipywidgets layer over a data function of this module or of the package, returned
as an :class:`~eagle3_forensics.views.widgets.Explorer`: a live widget in JupyterLab, escaped
static HTML under papermill, ``run`` and nbconvert (the notebook's parameters choose what the
static view shows). A static view builds no widget and runs nothing the notebook has not already
run, so reports stay as fast as before.

* 01 :func:`key_browser` over :func:`key_fate_rows` — every checkpoint key, filtered by one
  engine's fate (``"sglang: dropped"``) and a name filter;
* 02 :func:`map_compare` over :func:`compare_maps` — pick two maps (stored, rebuilt from the data,
  fixed, a reference drafter's) and see :func:`~eagle3_forensics.vocab.mapping.compare_mappings`;
* 03 :func:`coverage_explorer` over :func:`coverage_at` — a draft-vocabulary size slider and a
  token-class filter: coverage of the checkpoint's map and of the best map of that size;
* 04 :func:`probe_explorer` over :func:`~eagle3_forensics.probe.core.probe` — K, engine release,
  the prompts, Run;
* 05 :func:`sample_browser` over :class:`~eagle3_forensics.probe.samples.SampleScorer` and
  :func:`sample_rows` — pick a dumped sample: its tokens, loss mask, per-slot draft hits.

Every user-derived string reaches HTML through :func:`~eagle3_forensics.views.html.esc` or
:func:`~eagle3_forensics.views.html.table_html`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eagle3_forensics.engines import ENGINE_RELEASES
from eagle3_forensics.views import format as fmt
from eagle3_forensics.views.html import esc, table_html, visible
from eagle3_forensics.views.vocab_tables import comparison_table, only_ids_table
from eagle3_forensics.views.widgets import (
    MAX_ROWS,
    STATIC_NOTE,
    Explorer,
    live_html,
    note_html,
    probe_html,
    probe_line,
    tensor_key_table,
)
from eagle3_forensics.vocab.coverage import TOKEN_CLASSES, selection_mask, token_table

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd

    from eagle3_forensics.checks.diagnose import Diagnosis, Inspection
    from eagle3_forensics.probe.core import ProbeResult
    from eagle3_forensics.probe.offline.result import OfflineProbeResult
    from eagle3_forensics.probe.samples import SampleScorer, SampleScores
    from eagle3_forensics.vocab.coverage import TokenTable
    from eagle3_forensics.vocab.mapping.compare import MappingComparison
    from eagle3_forensics.vocab.mapping.convert import D2TFix
    from eagle3_forensics.vocab.mapping.counts import TokenCounts

ANY = ""  # the "no filter" value of a dropdown
ALL = "all"  # every token class


def _error(exc: Exception) -> str:
    return f'<p style="color:#c62828">{esc(exc)}</p>'


def _rows_html(df: pd.DataFrame, head: str) -> str:
    if df.empty:
        return head
    more = note_html(f"first {MAX_ROWS} rows shown") if len(df) > MAX_ROWS else ""
    return head + table_html(df.head(MAX_ROWS)) + more


# -- 01: key browser with a per-engine fate filter -------------------------------------------------


def fate_filters(diagnosis: Diagnosis) -> list[tuple[str, int]]:
    """Every ``"engine: action"`` that occurs in ``diagnosis``, with how many keys it holds."""
    out: list[tuple[str, int]] = []
    for engine, load in diagnosis.loads.items():
        seen: dict[str, int] = {}
        for f in load.fates:
            seen[f.action] = seen.get(f.action, 0) + 1
        out += [(f"{engine}: {a}", n) for a, n in sorted(seen.items())]
    return out


def key_fate_rows(
    diagnosis: Diagnosis, inspection: Inspection, fate: str = ANY, query: str = ""
) -> pd.DataFrame:
    """:func:`~eagle3_forensics.views.widgets.tensor_key_table` keeping the keys that one engine
    treats one way: ``fate`` is ``"ENGINE: ACTION"`` (e.g. ``"sglang: dropped"``), ``""`` keeps all."""
    df = tensor_key_table(diagnosis, inspection, query)
    if not fate:
        return df
    engine, sep, action = fate.partition(":")
    engine, action = engine.strip(), action.strip()
    if not sep or engine not in diagnosis.loads:
        raise ValueError(
            f"bad fate filter {fate!r}: use 'ENGINE: ACTION', engines {', '.join(diagnosis.loads)}"
        )
    keep = df[engine].map(lambda shown: str(shown).split(" ")[0] == action)
    # the filtered engine's column comes first after the name: the column the filter is about
    order = ["name", engine, *(c for c in df.columns if c not in ("name", engine))]
    return df[keep][order].reset_index(drop=True)


def _key_html(diagnosis: Diagnosis, inspection: Inspection, fate: str, query: str) -> str:
    try:
        df = key_fate_rows(diagnosis, inspection, fate, query)
    except ValueError as exc:
        return _error(exc)
    engine, _, action = fate.partition(":")
    head = (
        f"<p>{len(df)} of {len(inspection.tensors)} keys"
        + (f" that <code>{esc(engine)}</code> treats as <code>{esc(action.strip())}</code>" if fate else "")
        + (f" matching <code>{esc(query)}</code>" if query else "")
        + "</p>"
    )
    return _rows_html(df, head)


def key_browser(
    diagnosis: Diagnosis,
    inspection: Inspection,
    *,
    fate: str = ANY,
    query: str = "",
    interactive: bool | None = None,
) -> Explorer:
    """Browse the checkpoint's keys by what one engine does with them (``fate``) and by name."""

    def static() -> str:
        return _key_html(diagnosis, inspection, fate, query) + note_html(STATIC_NOTE)

    def build() -> Any:
        import ipywidgets as w  # optional: ipywidgets

        options = [("every key", ANY)] + [(f"{f} ({n})", f) for f, n in fate_filters(diagnosis)]
        pick = w.Dropdown(
            options=options,
            value=fate if fate in {v for _, v in options} else ANY,
            description="fate",
            layout=w.Layout(width="24em"),
        )
        text = w.Text(value=query, placeholder="key name contains (or re:PATTERN)", description="name")
        return live_html(
            w.HBox([pick, text]),
            [pick, text],
            lambda: _key_html(diagnosis, inspection, pick.value, text.value),
            "e3f-key-browser",
        )

    return Explorer("Key browser by engine fate", static, build, interactive)


# -- 02: map-compare picker ----------------------------------------------------------------------


def named_maps(
    stored: Any,
    *,
    rebuilt: Any = None,
    fix: D2TFix | None = None,
    reference: str | Path | None = None,
    target: str | Path | None = None,
) -> dict[str, Any]:
    """The maps notebook 02 can compare, by name: the checkpoint's as stored, the one rebuilt from
    the data, the stored ``t2d`` with the fixed ``d2t``, and a reference drafter's (or map file's)."""
    from eagle3_forensics.vocab.inputs.maps import load_mapping  # heavy: torch

    maps: dict[str, Any] = {"checkpoint (stored)": stored}
    if rebuilt is not None:
        maps["rebuilt from the data"] = rebuilt
    if fix is not None and fix.d2t is not None and fix.needed:
        maps["checkpoint after the fix"] = (fix.d2t, stored.t2d)
    if reference is not None:
        maps[f"reference: {Path(reference).name}"] = load_mapping(reference, target)
    return maps


def compare_maps(maps: Mapping[str, Any], a: str, b: str) -> MappingComparison:
    """:func:`~eagle3_forensics.vocab.mapping.compare_mappings` of two of the named ``maps``."""
    from eagle3_forensics.vocab.mapping.compare import compare_mappings  # heavy: torch

    for name in (a, b):
        if name not in maps:
            raise ValueError(f"no map named {name!r}; choose from {', '.join(maps)}")
    return compare_mappings(maps[a], maps[b], labels=(a, b))


def _compare_html(maps: Mapping[str, Any], a: str, b: str, tokens: TokenTable | None, counts: Any) -> str:
    try:
        cmp = compare_maps(maps, a, b)
    except ValueError as exc:
        return _error(exc)
    verdict = cmp.headline()  # the Jaccard index rounded as the table rounds it (format.rate)
    only = only_ids_table(cmp, tokens, counts, limit=10)
    return (
        f"<p><b>{esc(a)}</b> against <b>{esc(b)}</b>: {esc(verdict)}</p>"
        + table_html(comparison_table(cmp).reset_index())
        + (
            ""
            if only.empty
            else "<p>Ids selected by one map only (first 10 each, most frequent first):</p>"
            + table_html(only)
        )
    )


def map_compare(
    maps: Mapping[str, Any],
    *,
    a: str | None = None,
    b: str | None = None,
    tokens: TokenTable | None = None,
    counts: Any = None,
    interactive: bool | None = None,
) -> Explorer:
    """Pick two of the named ``maps`` (anything :func:`compare_mappings` takes) and compare them.

    Static view: ``a`` against ``b`` (default: the first two maps)."""
    names = list(maps)
    if len(names) < 2:
        raise ValueError("map_compare needs at least two maps")
    first = a if a is not None else names[0]
    second = b if b is not None else next(n for n in names if n != first)

    def static() -> str:
        return _compare_html(maps, first, second, tokens, counts) + note_html(STATIC_NOTE)

    def build() -> Any:
        import ipywidgets as w  # optional: ipywidgets

        pa = w.Dropdown(options=names, value=first if first in names else names[0], description="map A")
        pb = w.Dropdown(options=names, value=second if second in names else names[1], description="map B")
        return live_html(
            w.HBox([pa, pb]),
            [pa, pb],
            lambda: _compare_html(maps, pa.value, pb.value, tokens, counts),
            "e3f-map-compare",
        )

    return Explorer("Compare two vocabulary maps", static, build, interactive)


# -- 03: coverage at a draft-vocabulary size, by token class --------------------------------------


def token_classes(tokens: TokenTable | None) -> list[str]:
    """The token classes a filter can choose (``"all"`` first)."""
    return ["all", *(TOKEN_CLASSES if tokens is not None else ())]


def coverage_at(
    counts: TokenCounts | np.ndarray,
    mapping: Any,
    size: int,
    tokens: TokenTable | None = None,
    klass: str = ALL,
) -> pd.DataFrame:
    """Coverage of the counted tokens (of one ``klass``, or all) by the checkpoint's map and
    by the best draft vocabulary of ``size`` ids on this corpus (the trainers' top-``size`` selection)."""
    import pandas as pd  # optional: pandas

    c = np.asarray(getattr(counts, "counts", counts), dtype=np.int64)
    big_v = int(c.shape[0])
    if not 1 <= size <= big_v:
        raise ValueError(f"draft vocabulary size {size} must be in 1..{big_v}")
    if klass == ALL:
        keep = np.ones(big_v, dtype=bool)
    elif tokens is None or klass not in TOKEN_CLASSES:
        raise ValueError(f"unknown token class {klass!r}; choose from {', '.join(token_classes(tokens))}")
    else:
        keep = tokens.classes_for(big_v) == TOKEN_CLASSES.index(klass)
    order = np.lexsort((np.arange(big_v), -c))  # by count, ties by id (speculators' tie-break)
    best = np.zeros(big_v, dtype=bool)
    best[order[:size]] = True
    total = int(c[keep].sum())
    rows = []
    for label, mask in (
        ("checkpoint's map", selection_mask(mapping, big_v)),
        (f"best {size} ids of this corpus", best),
    ):
        covered = int(c[keep & mask].sum())
        rows.append(
            {
                "draft vocabulary": label,
                "size v": int(mask.sum()),
                "class": klass,
                "counted tokens of the class": total,
                "covered": covered,
                "coverage": round(covered / total, 4) if total else None,
                "ids of the class in the vocabulary": int((keep & mask).sum()),
            }
        )
    return pd.DataFrame(rows)


def _coverage_html(counts: Any, mapping: Any, size: int, tokens: TokenTable | None, klass: str) -> str:
    try:
        df = coverage_at(counts, mapping, size, tokens, klass)
    except ValueError as exc:
        return _error(exc)
    return f"<p>Draft vocabulary size <b>{size}</b>, token class <b>{esc(klass)}</b></p>" + table_html(df)


def coverage_explorer(
    counts: TokenCounts | np.ndarray,
    mapping: Any,
    tokens: TokenTable | None = None,
    *,
    size: int | None = None,
    klass: str = ALL,
    interactive: bool | None = None,
) -> Explorer:
    """A draft-vocabulary size slider and a token-class filter over :func:`coverage_at`.

    Static view: ``size`` (default: the checkpoint's own draft vocabulary size) and ``klass``."""
    c = np.asarray(getattr(counts, "counts", counts), dtype=np.int64)
    big_v = int(c.shape[0])
    own = int(selection_mask(mapping, big_v).sum())
    start = size if size is not None else max(own, 1)

    def static() -> str:
        return _coverage_html(c, mapping, start, tokens, klass) + note_html(STATIC_NOTE)

    def build() -> Any:
        import ipywidgets as w  # optional: ipywidgets

        slider = w.IntSlider(
            value=min(max(start, 1), big_v),
            min=1,
            max=big_v,
            description="draft size",
            continuous_update=False,
            layout=w.Layout(width="32em"),
        )
        classes = token_classes(tokens)
        pick = w.Dropdown(options=classes, value=klass if klass in classes else "all", description="class")
        return live_html(
            w.HBox([slider, pick]),
            [slider, pick],
            lambda: _coverage_html(c, mapping, slider.value, tokens, pick.value),
            "e3f-coverage",
        )

    return Explorer("Coverage by draft-vocabulary size and token class", static, build, interactive)


# -- 04: probe with engine release and prompt picker -----------------------------------------------


def engine_views() -> list[tuple[str, str]]:
    """``(label, engine spec)`` for every probe view: the reference, each engine's newest release,
    then each described release of it (``sglang==0.5.10.post1``)."""
    out = [("reference (as its writer meant it)", "reference")]
    for name, releases in ENGINE_RELEASES.items():
        out.append((f"{name} (newest: {releases[-1].release})", name))
        out += [(r.release, f"{name}=={r.first}") for r in releases if r.pinned and len(releases) > 1]
    return out


def _prompt_label(i: int, text: str, width: int = 60) -> str:
    one = " ".join(visible(text).split())
    return f"{i}: {one[:width]}{'…' if len(one) > width else ''}"


def _probe_settings(
    k: int, engine: str, picked: Sequence[tuple[int, str]], max_new_tokens: int, device: str
) -> str:
    import pandas as pd  # optional: pandas

    rows = [
        ("K (draft tokens per cycle)", k),
        ("engine view", visible(engine)),
        ("new tokens per prompt", max_new_tokens),
        ("device", visible(device)),
        ("prompts", f"{len(picked)}: " + " | ".join(_prompt_label(i, p, 30) for i, p in picked)),
    ]
    return table_html(pd.DataFrame(rows, columns=["control", "value"]))


def _probe_headline(result: ProbeResult) -> str:
    return probe_line(result, lead="")


def probe_explorer(
    checkpoint: str | Path,
    target: str | Path | None,
    prompts: str | Path | None,
    *,
    result: ProbeResult | None = None,
    k: int = 3,
    engine: str = "reference",
    max_new_tokens: int = 32,
    device: str = "auto",
    picked: Sequence[int] | None = None,
    interactive: bool | None = None,
) -> Explorer:
    """Re-run the live probe with another K, engine release or choice of prompts.

    Static view: the notebook's settings and ``result`` (the run the notebook already made)."""
    from eagle3_forensics.probe.core import read_prompts  # heavy: torch

    texts = read_prompts(prompts) if prompts is not None else []
    chosen = [i for i in (picked if picked is not None else range(len(texts))) if 0 <= i < len(texts)]

    def static() -> str:
        head = _probe_settings(k, engine, [(i, texts[i]) for i in chosen], max_new_tokens, device)
        last = _probe_headline(result) if result is not None else note_html("probe not run")
        return head + last + note_html(STATIC_NOTE)

    def build() -> Any:
        import ipywidgets as w  # optional: ipywidgets
        from IPython.display import HTML, display  # optional: IPython

        views = engine_views()
        # the same control for K as 00's probe controls (views.widgets.probe_controls)
        kk = w.IntSlider(value=k if 1 <= k <= 8 else 3, min=1, max=8, description="K")
        view = w.Dropdown(
            options=views,
            value=engine if engine in {v for _, v in views} else "reference",
            description="engine",
            layout=w.Layout(width="30em"),
        )
        pick = w.SelectMultiple(
            options=[(_prompt_label(i, t), i) for i, t in enumerate(texts)],
            value=tuple(chosen),
            description="prompts",
            rows=min(max(len(texts), 2), 8),
            layout=w.Layout(width="44em"),
        )
        run = w.Button(description="Run probe", button_style="primary")
        out = w.Output()
        with out:
            display(HTML(_probe_headline(result) + probe_html(result)) if result is not None else HTML(""))

        def go(_button: Any) -> None:
            from eagle3_forensics.probe.core import probe  # heavy: torch, transformers

            out.clear_output(wait=True)
            with out:
                if target is None or not pick.value:
                    display(HTML(note_html("the probe needs a target and at least one prompt")))
                    return
                display(HTML(note_html("running…")))
                try:
                    r = probe(
                        checkpoint,
                        target,
                        [texts[i] for i in pick.value],
                        k=int(kk.value),
                        max_new_tokens=max_new_tokens,
                        device=device,
                        engine=view.value,
                        teacher_forced=False,
                        sweep=False,
                    )
                except Exception as exc:  # an engine that refuses the drafter: say why, in the output
                    out.clear_output(wait=True)
                    display(HTML(_error(exc)))
                    return
                out.clear_output(wait=True)
                display(
                    HTML(f"<p>K={int(kk.value)}, {esc(view.value)}</p>" + _probe_headline(r) + probe_html(r))
                )

        run.on_click(go)
        box = w.VBox([w.HBox([kk, view, run]), pick, out])
        box.add_class("e3f-probe")
        return box

    return Explorer("Probe: K, engine release, prompts", static, build, interactive)


# -- 05: sample browser over the dumps ---------------------------------------------------------------


def sample_rows(scores: SampleScores, tokens: TokenTable | None = None) -> pd.DataFrame:
    """One row per position of a scored sample: token, loss mask, and at a scored slot the step-0
    teacher, each draft step's hit (✓/✗) and the drafts a chain accepts there."""
    import pandas as pd  # optional: pandas

    at = {t: n for n, t in enumerate(scores.slots)}
    accepted = scores.accepted()
    rows = []
    for p, (tid, m) in enumerate(zip(scores.input_ids, scores.loss_mask, strict=True)):
        row: dict[str, Any] = {"position": p, "token id": tid}
        if tokens is not None:
            row["text"] = fmt.token(tokens.text(tid))
        row["loss mask"] = "1" if m else "0"
        # slot t feeds token t+1: show its answers on the row of the token it predicts after
        n = at.get(p - 1)
        if n is None:
            row.update({"teacher (step 0)": "", "draft steps": "", "accepted": ""})
        else:
            teach = scores.teacher[n]
            row["teacher (step 0)"] = fmt.token(tokens.text(teach)) if tokens is not None else str(teach)
            row["draft steps"] = "".join("✓" if scores.correct[j][n] else "✗" for j in range(scores.k))
            row["accepted"] = str(accepted[n])
        rows.append(row)
    return pd.DataFrame(rows)


def _sample_summary(s: SampleScores) -> str:
    if s.problem is not None:
        return f"<p><b>{esc(s.file)}</b>: not scored ({esc(s.problem)})</p>"
    acc = " / ".join("—" if a is None else f"{a:.3f}" for a in s.step_accuracy())
    sal = s.simulated_acceptance_length
    return (
        f"<p><b>{esc(s.file)}</b> (sample {s.index}, {esc(s.layout)}): {len(s.input_ids)} tokens, "
        f"{sum(s.loss_mask)} loss-masked, {len(s.slots)} scored slots; accuracy per draft step {esc(acc)}; "
        f"simulated acceptance length <b>{'—' if sal is None else f'{sal:.3f}'}</b></p>"
    )


def _sample_html(scorer: SampleScorer, index: int, tokens: TokenTable | None) -> str:
    try:
        s = scorer.score(index)
    except Exception as exc:  # an unreadable sample: say so in the view, the others stay usable
        return _error(exc)
    return _rows_html(sample_rows(s, tokens), _sample_summary(s))


def sample_choices(scorer: SampleScorer, result: OfflineProbeResult | None = None) -> list[tuple[str, int]]:
    """``(label, index)`` of every sample; the worst ones of ``result`` first, marked with their score."""
    worst = [] if result is None else [(int(w[1]), float(w[0])) for w in result.counts.worst]
    marked = dict(worst)
    first = [
        (f"{it.rel} (worst: {marked[it.index]:.2f})", it.index)
        for i, _ in worst
        for it in scorer.items
        if it.index == i
    ]
    rest = [(it.rel, it.index) for it in scorer.items if it.index not in marked]
    return first + rest


def sample_browser(
    scorer: SampleScorer,
    *,
    result: OfflineProbeResult | None = None,
    sample: int | str | None = None,
    target: str | Path | None = None,
    interactive: bool | None = None,
) -> Explorer:
    """Pick a dumped sample: its tokens, loss mask and per-slot draft hits (token texts from the
    ``target``'s ``tokenizer.json`` when it has one).

    Static view: ``sample`` (an index or a file path under the dumps; default: the worst sample of
    ``result``, else the first)."""
    tokens = (
        token_table(target) if target is not None and (Path(target) / "tokenizer.json").is_file() else None
    )
    choices = sample_choices(scorer, result)
    if isinstance(sample, str):
        start = next((it.index for it in scorer.items if it.rel == sample or it.path.name == sample), -1)
    elif sample is not None:
        start = int(sample)
    else:
        start = choices[0][1] if choices else 0

    def static() -> str:
        if start < 0:
            return _error(ValueError(f"no sample {sample!r} under the dumps")) + note_html(STATIC_NOTE)
        return _sample_html(scorer, start, tokens) + note_html(STATIC_NOTE)

    def build() -> Any:
        import ipywidgets as w  # optional: ipywidgets

        values = {v for _, v in choices}
        pick = w.Dropdown(
            options=choices,
            value=start if start in values else (choices[0][1] if choices else None),
            description="sample",
            layout=w.Layout(width="32em"),
        )
        return live_html(
            pick, [pick], lambda: _sample_html(scorer, int(pick.value), tokens), "e3f-sample-browser"
        )

    return Explorer("Sample browser", static, build, interactive)


__all__ = [
    "compare_maps",
    "coverage_at",
    "coverage_explorer",
    "engine_views",
    "fate_filters",
    "key_browser",
    "key_fate_rows",
    "map_compare",
    "named_maps",
    "probe_explorer",
    "sample_browser",
    "sample_choices",
    "sample_rows",
    "token_classes",
]
