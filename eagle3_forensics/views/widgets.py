"""Interactive explorers for JupyterLab, with static fallbacks for papermill runs and HTML reports.

Each explorer is a thin ipywidgets layer over a pure data function of this module:

* :func:`tensor_browser` over :func:`tensor_key_table` — every checkpoint tensor with what each
  engine does with it, filtered by a substring (or ``re:`` regex) and by engine action;
* :func:`token_lookup` over :class:`TokenLookup` — type a token string or id (``d:12`` for a draft
  id): its draft id, stored and needed ``d2t`` offset, corpus coverage, and how each engine maps it;
* :func:`probe_controls` over :func:`eagle3_forensics.probe.core.probe` — K, tokens, prompts, engine view.

An explorer returns an :class:`Explorer` display object. In an interactive kernel it shows the
live widget; under papermill / nbconvert / a plain interpreter it shows the same content as static,
escaped HTML (tables, figures as inline PNG), so reports never hold empty widget boxes. The mode
is chosen by :func:`frontend` from facts, never from a name or a path: ``$E3F_INTERACTIVE``
(``0``/``1``; the runner sets ``0``) first, then whether an IPython kernel runs at all, then
whether a frontend asked for this cell (cell metadata on the request; papermill and nbconvert
execute through nbclient, which sends none). Even in interactive mode
the display bundle carries the static HTML as a fallback for viewers without a widget manager.

Every user-derived string goes through :func:`eagle3_forensics.views.html.esc` or an escaping
``DataFrame.to_html`` (:func:`eagle3_forensics.views.html.table_html`).
"""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eagle3_forensics.checks.diagnose import Diagnosis, diagnose, inspect_checkpoint
from eagle3_forensics.engines.simulate import ACTIONS
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.io.frontend import interactive_frontend
from eagle3_forensics.views import format as fmt
from eagle3_forensics.views.html import esc, table_html, visible
from eagle3_forensics.vocab.coverage import corpus_counts, token_table
from eagle3_forensics.vocab.inputs.chat import load_tokenizer
from eagle3_forensics.vocab.inputs.maps import load_mapping

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd

    from eagle3_forensics.checks.diagnose import Diagnosis, Inspection
    from eagle3_forensics.probe.core import ProbeResult
    from eagle3_forensics.vocab.coverage import TokenTable
    from eagle3_forensics.vocab.inputs.maps import LoadedMapping

STATIC_NOTE = "static view: open the notebook in JupyterLab for the interactive explorer"
MAX_ROWS = 400


class Explorer:
    """A display object: the live widget in JupyterLab, static escaped HTML everywhere else.

    ``static()`` returns the HTML snapshot; ``build()`` returns the ipywidgets widget and is only
    called in interactive mode (so headless runs create no widget, no comm and no widget state).
    """

    def __init__(
        self, title: str, static: Callable[[], str], build: Callable[[], Any], interactive: bool | None = None
    ) -> None:
        self.title = title
        self._static = static
        self.interactive = interactive_frontend() if interactive is None else bool(interactive)
        self.widget = build() if self.interactive else None

    def static_html(self) -> str:
        return f'<div class="e3f-explorer"><h4>{esc(self.title)}</h4>{self._static()}</div>'

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        if self.widget is None:
            return {"text/html": self.static_html(), "text/plain": f"{self.title} (static view)"}
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle["text/html"] = self.static_html()  # for viewers without a widget manager
        return bundle


def unavailable(title: str, reason: str) -> Explorer:
    """An explorer that only says why it cannot be shown (the same in every mode)."""
    return Explorer(
        title,
        lambda: note_html(f"not available: {' '.join(reason.split())}"),
        lambda: None,
        interactive=False,
    )


def note_html(text: str) -> str:
    """A small grey note (escaped), as the explorers show it under a view."""
    return f'<p class="e3f-note" style="color:#555;font-size:0.9em"><em>{esc(text)}</em></p>'


def figure_html(fig: Any, alt: str = "figure") -> str:
    """A matplotlib figure as an ``<img>`` with an inline PNG (works under the report's CSP)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}">'


# -- tensor / key browser ------------------------------------------------------------------------


def tensor_key_table(
    diagnosis: Diagnosis, inspection: Inspection, query: str = "", action: str | None = None
) -> pd.DataFrame:
    """One row per checkpoint tensor: name, shape, dtype, shard, and the action of every simulated
    engine (``loaded``, ``renamed -> param``, ``dropped``, ...).

    ``query`` keeps names containing it (case-insensitive); ``re:PATTERN`` is a regular
    expression instead. ``action`` keeps tensors that at least one engine treats that way.
    """
    import pandas as pd  # optional: pandas

    engines = list(diagnosis.loads)
    fates: dict[str, dict[str, str]] = {e: {} for e in engines}
    for e, load in diagnosis.loads.items():
        for f in load.fates:
            # the parameter's last two parts name it (the layer prefix is the engine's own): the
            # table stays within a 1,000 px notebook with five engine columns
            short = ".".join(str(f.param).split(".")[-2:]) if f.param else ""
            shown = f.action if not f.param or f.action == "loaded" else f"{f.action} → {short}"
            fates[e][f.key] = shown if load.config_readable else f"{shown} (n/a: config unreadable)"
    match = _matcher(query)
    rows = []
    for t in inspection.tensors:
        if not match(t.name):
            continue
        acts = {e: fates[e].get(t.name, "") for e in engines}
        if action and not any(a.split(" ")[0] == action for a in acts.values()):
            continue
        rows.append(
            {
                "name": visible(t.name),
                "shape": str(list(t.shape)),
                "dtype": visible(t.dtype),
                "shard": visible(t.shard),
                **{e: visible(a) for e, a in acts.items()},
            }
        )
    columns = ["name", "shape", "dtype", "shard", *engines]
    if len({t.shard for t in inspection.tensors}) <= 1:  # one weight file: the column says nothing
        columns.remove("shard")
        for row in rows:
            del row["shard"]
    return pd.DataFrame(rows, columns=columns)


def _matcher(query: str) -> Callable[[str], bool]:
    q = (query or "").strip()
    if not q:
        return lambda _name: True
    if q.startswith("re:"):
        try:
            pattern = re.compile(q[3:])
        except re.error as exc:
            raise ValueError(f"bad regular expression {q[3:]!r}: {exc}") from None
        return lambda name: pattern.search(name) is not None
    low = q.lower()
    return lambda name: low in name.lower()


def _tensor_html(diagnosis: Diagnosis, inspection: Inspection, query: str, action: str | None) -> str:
    try:
        df = tensor_key_table(diagnosis, inspection, query, action)
    except ValueError as exc:
        return f'<p style="color:#c62828">{esc(exc)}</p>'
    total = len(inspection.tensors)
    head = (
        f"<p>{len(df)} of {total} tensors"
        + (f" matching <code>{esc(query)}</code>" if query else "")
        + (f" that an engine treats as <code>{esc(action)}</code>" if action else "")
        + "</p>"
    )
    if df.empty:
        return head
    shown = df.head(MAX_ROWS)
    more = note_html(f"first {MAX_ROWS} rows shown") if len(df) > MAX_ROWS else ""
    return head + table_html(shown) + more


def tensor_browser(
    checkpoint: str | Path | Diagnosis,
    target: str | Path | None = None,
    *,
    query: str = "",
    action: str | None = None,
    inspection: Inspection | None = None,
    interactive: bool | None = None,
) -> Explorer:
    """Browse the checkpoint's tensors and each engine's action on them, with a name filter.

    ``checkpoint`` is a drafter directory or an existing :class:`Diagnosis` (then pass its
    ``inspection`` too, or it is read again from ``diagnosis.checkpoint``).
    """
    d = checkpoint if isinstance(checkpoint, Diagnosis) else diagnose(checkpoint, target=target)
    if d.unusable:
        return unavailable("Tensor / key browser", d.findings[0].message if d.findings else "unreadable")
    ins = inspection if inspection is not None else inspect_checkpoint(d.checkpoint)

    def static() -> str:
        return _tensor_html(d, ins, query, action) + note_html(STATIC_NOTE)

    def build() -> Any:
        import ipywidgets as w  # optional: ipywidgets

        text = w.Text(
            value=query,
            placeholder="filter names (substring, or re:PATTERN)",
            description="filter",
            continuous_update=True,
            layout=w.Layout(width="28em"),
        )
        act = w.Dropdown(
            options=[("any action", "")] + [(a, a) for a in ACTIONS], value=action or "", description="action"
        )
        return live_html(
            w.HBox([text, act]), [text, act], lambda: _tensor_html(d, ins, text.value, act.value or None)
        )

    return Explorer("Tensor / key browser", static, build, interactive)


# -- draft <-> target token lookup ---------------------------------------------------------------


@dataclass
class EngineMap:
    """How one engine turns draft ids into target ids (``targets[i]``), or why it cannot."""

    engine: str
    targets: np.ndarray | None
    how: str


@dataclass
class TokenLookup:
    """Everything needed to answer "what happens to this token" for one drafter."""

    mapping: LoadedMapping
    selected: np.ndarray | None  # target id of each draft id, as the map intends (nonzero(t2d))
    selected_source: str
    tokens: TokenTable | None
    counts: np.ndarray | None  # counted corpus occurrences per target id
    engines: list[EngineMap] = field(default_factory=list)
    tokenizer: Any = None

    @property
    def coverage(self) -> float | None:
        """Share of counted corpus tokens inside the draft vocabulary."""
        if self.counts is None or self.selected is None or not self.counts.sum():
            return None
        sel = self.selected[self.selected < self.counts.shape[0]]
        return float(self.counts[sel].sum() / self.counts.sum())

    def draft_id(self, target_id: int) -> int | None:
        if self.selected is None:
            return None
        pos = int(np.searchsorted(self.selected, target_id))
        return pos if pos < self.selected.shape[0] and int(self.selected[pos]) == target_id else None

    def resolve(self, query: str | int) -> list[tuple[int, int | None]]:
        """Target ids (with the draft id when the query named one) for a token string or id.

        ``123`` (int or digits) is a target id; ``d:12`` / ``draft:12`` a draft id; any other
        string is matched against the vocabulary strings and decoded texts, then tokenised.
        """
        if isinstance(query, (int, np.integer)) and not isinstance(query, bool):
            return [(int(query), None)]
        q = str(query)
        m = re.fullmatch(r"\s*(?:d|draft)\s*:\s*(\d+)\s*", q)
        if m:
            i = int(m.group(1))
            if self.selected is None or i >= self.selected.shape[0]:
                raise ValueError(f"draft id {i} is outside the draft vocabulary")
            return [(int(self.selected[i]), i)]
        if re.fullmatch(r"\s*\d+\s*", q):
            return [(int(q), None)]
        if self.tokens is not None:
            exact = [i for i, t in enumerate(self.tokens.tokens) if t == q]
            exact = exact or [i for i, t in enumerate(self.tokens.texts) if t == q]
            if exact:
                return [(i, None) for i in exact]
        if self.tokenizer is not None:
            return [(int(i), None) for i in self.tokenizer.encode(q, add_special_tokens=False).ids]
        return []

    def rows(self, queries: Sequence[str | int]) -> list[dict[str, Any]]:
        """One row per distinct target id each query names (a string of several tokens gives each
        token once; :meth:`tokenisation` tells the whole split)."""
        out = []
        for q in queries:
            try:
                found = self.resolve(q)
            except ValueError as exc:
                out.append({"query": _query_text(q), "target id": None, "note": visible(exc)})
                continue
            if not found:
                out.append({"query": _query_text(q), "target id": None, "note": "no such token"})
            for t, d in dict.fromkeys(found):
                out.append(self.row(t, query=q, draft=d))
        return out

    def tokenisation(self, query: str | int) -> str | None:
        """For a string the tokenizer splits into several tokens, that split on one line
        (``"zzzqqq" → 6 tokens: z · z · z · q · q · q``); else ``None``."""
        if not isinstance(query, str):
            return None
        try:
            found = self.resolve(query)
        except ValueError:
            return None
        if len(found) < 2 or self.tokens is None:
            return None
        pieces = " · ".join(self._token_text(t) for t, _ in found)
        return f"{_query_text(query)} → {len(found)} tokens: {pieces}"

    def _token_text(self, t: int) -> str:
        """The readable token of target id ``t``, or why there is none."""
        vocab = self.mapping.target_vocab_size
        if vocab is not None and not 0 <= t < vocab:
            return fmt.out_of_range(vocab)
        if self.tokens is None:
            return fmt.missing("no tokenizer")
        if self.tokens.token(t) is None:
            return fmt.missing("beyond the tokenizer")
        return fmt.token(self.tokens.text(t))

    def row(self, target_id: int, query: str | int | None = None, draft: int | None = None) -> dict[str, Any]:
        t = int(target_id)
        i = draft if draft is not None else self.draft_id(t)
        row: dict[str, Any] = {"query": _query_text(query if query is not None else t), "target id": t}
        vocab = self.mapping.target_vocab_size
        if self.tokens is not None or (vocab is not None and not 0 <= t < vocab):
            row["token"] = self._token_text(t)
        if self.tokens is not None:
            row["class"] = self.tokens.class_of(t)
        if self.counts is not None:
            total = int(self.counts.sum())
            n = int(self.counts[t]) if 0 <= t < self.counts.shape[0] else 0
            row["corpus count"] = n
            row["corpus share"] = fmt.percent(n / total, 2) if total else fmt.missing("empty corpus")
        row["draft id"] = fmt.MISSING if i is None else i
        d2t = self.mapping.d2t
        if i is not None and d2t is not None and i < int(d2t.numel()):
            row["stored d2t[i]"] = int(d2t.reshape(-1)[i])
            row["offset needed"] = t - i
        else:
            row["stored d2t[i]"] = fmt.MISSING
            row["offset needed"] = fmt.MISSING if i is None else t - i
        for em in self.engines:
            row[em.engine] = self._engine_cell(em, t, i)
        if vocab is not None and not 0 <= t < vocab:
            row["note"] = f"target id {t} is beyond the target vocabulary ({vocab} ids)"
        else:
            row["note"] = "not in the draft vocabulary: no engine can propose it" if i is None else ""
        return row

    def _engine_cell(self, em: EngineMap, t: int, i: int | None) -> str:
        if em.targets is None:
            return "refuses to load"  # the reason is in the summary line
        if i is not None and i < em.targets.shape[0]:
            got = int(em.targets[i])
            if got == t:
                return f"draft {i} → {got} ✓"
            return f"draft {i} → {got}{self._tok(got)} ✗"
        wrong = np.flatnonzero(em.targets == t)
        if wrong.size:
            return (
                f"proposed by draft {int(wrong[0])}"
                + (f" (+{wrong.size - 1})" if wrong.size > 1 else "")
                + " ✗"
            )
        return "never proposed"

    def _tok(self, t: int) -> str:
        vocab = self.mapping.target_vocab_size
        if self.tokens is None and (vocab is None or 0 <= t < vocab):
            return ""
        return f" {self._token_text(t)}"

    def table(self, queries: Sequence[str | int]) -> pd.DataFrame:
        import pandas as pd  # optional: pandas

        return pd.DataFrame(self.rows(queries))

    def most_frequent(self, n: int = 8) -> list[int]:
        """The ``n`` most frequent corpus target ids (without a corpus: the first ``n`` draft ids' targets)."""
        if self.counts is not None and self.counts.sum():
            order = np.argsort(-self.counts, kind="stable")[:n]
            return [int(i) for i in order if self.counts[i] > 0]
        if self.selected is not None:
            return [int(t) for t in self.selected[:n]]
        return list(range(n))

    def summary_html(self) -> str:
        m = self.mapping
        parts = [
            f"target vocabulary {esc(m.target_vocab_size)}, draft vocabulary {esc(m.draft_vocab_size)}",
            f"draft→target from {esc(self.selected_source)}",
        ]
        cov = self.coverage
        if cov is not None:
            parts.append(f"corpus coverage of the draft vocabulary {cov:.1%}")
        engines = "; ".join(f"<b>{esc(e.engine)}</b>: {esc(e.how)}" for e in self.engines)
        return f"<p>{' · '.join(parts)}</p>" + (f"<p>{engines}</p>" if engines else "")


def engine_maps(diagnosis: Diagnosis, d2t: Any | None, draft_vocab_size: int | None) -> list[EngineMap]:
    """Per simulated engine, the draft→target map it would build from this checkpoint."""
    from eagle3_forensics.reference.drafter.views import canonical_name  # heavy: torch

    out = []
    v = draft_vocab_size if draft_vocab_size is not None else (None if d2t is None else int(d2t.numel()))
    stored = None if d2t is None else np.asarray(d2t.reshape(-1).to("cpu").numpy(), dtype=np.int64)
    for name, load in diagnosis.loads.items():
        if not load.config_readable:
            out.append(EngineMap(name, None, f"refuses the config ({load.config_problem or 'unreadable'})"))
            continue
        rejected = load.keys_with("rejected")
        if rejected:
            out.append(EngineMap(name, None, f"refuses to load (rejects {rejected[0]!r})"))
            continue
        used = any(
            canonical_name(f.key) == "d2t" and f.action in ("loaded", "renamed", "fused", "consumed")
            for f in load.fates
        )
        if used and stored is not None:
            absolute = load.d2t_encoding == "absolute"
            targets = stored.copy() if absolute else stored + np.arange(stored.shape[0], dtype=np.int64)
            out.append(
                EngineMap(name, targets, "reads d2t as " + ("absolute ids" if absolute else "offsets"))
            )
        elif v is not None:
            why = load.missing_d2t
            out.append(EngineMap(name, np.arange(v, dtype=np.int64), f"no d2t used: {why}"))
        else:
            out.append(EngineMap(name, None, "draft vocabulary size unknown"))
    return out


def token_lookup_data(
    checkpoint: str | Path,
    target: str | Path | None = None,
    *,
    ids: str | Path | None = None,
    corpus: str | Path | None = None,
    diagnosis: Diagnosis | None = None,
) -> TokenLookup:
    """Build a :class:`TokenLookup` for a drafter (or a map file) and its target."""
    m = load_mapping(checkpoint, target)
    try:
        sel, source = m.selected()
        sel = np.asarray(sel, dtype=np.int64)
    except (ValueError, UnusableInputError) as exc:
        sel, source = None, f"unknown ({exc})"
    tokens = tokenizer = None
    if target is not None and (Path(target) / "tokenizer.json").is_file():
        tokens = token_table(target, m.target_vocab_size)
        try:
            tokenizer = load_tokenizer(target)
        except (UnusableInputError, ImportError):
            tokenizer = None
    counts = None
    if (ids is not None or corpus is not None) and m.target_vocab_size is not None:
        counts = corpus_counts(
            ids=ids, corpus=corpus, tokenizer=target, target_vocab_size=m.target_vocab_size, progress=False
        ).counts
    engines: list[EngineMap] = []
    if Path(checkpoint).is_dir() and (Path(checkpoint) / "config.json").is_file():
        d = diagnosis if diagnosis is not None else diagnose(checkpoint, target=target)
        engines = engine_maps(d, m.d2t, m.draft_vocab_size)
    return TokenLookup(m, sel, source, tokens, counts, engines, tokenizer)


def _query_text(q: str | int | None) -> str:
    """A query as typed, in quotes, with its spaces and invisible characters shown."""
    if isinstance(q, str) and not re.fullmatch(r"\s*(?:(?:d|draft)\s*:\s*)?\d+\s*", q):
        return f'"{fmt.readable(q)}"'
    return fmt.value(q)


def _lookup_html(data: TokenLookup, queries: Sequence[str | int]) -> str:
    """The summary, the tokenisation of each query that splits into several tokens, then one row
    per distinct token."""
    notes = "".join(
        f'<p class="e3f-tokenisation"><code>{esc(line)}</code></p>'
        for line in dict.fromkeys(data.tokenisation(q) for q in queries)
        if line
    )
    return data.summary_html() + notes + table_html(_compact(data.table(queries)))


def _compact(df: pd.DataFrame) -> pd.DataFrame:
    """The lookup table as shown: corpus count and share in one column (``90 (0.95%)``), and a
    column no row fills (``note``, mostly) left out, so sixteen columns fit a 1,000 px notebook."""
    df = df.copy()
    if {"corpus count", "corpus share"} <= set(df.columns):
        at = list(df.columns).index("corpus count")
        both = [f"{c} ({s})" for c, s in zip(df["corpus count"], df["corpus share"], strict=True)]
        df = df.drop(columns=["corpus count", "corpus share"])
        df.insert(at, "corpus", both)
    empty = [c for c in df.columns if df[c].map(lambda v: str(v).strip() in ("", "nan", "None")).all()]
    return df.drop(columns=empty)


def token_lookup(
    checkpoint: str | Path | TokenLookup,
    target: str | Path | None = None,
    *,
    queries: Sequence[str | int] | None = None,
    ids: str | Path | None = None,
    corpus: str | Path | None = None,
    diagnosis: Diagnosis | None = None,
    interactive: bool | None = None,
) -> Explorer:
    """Draft↔target token lookup. Static view: ``queries`` (default: the most frequent corpus tokens)."""
    if isinstance(checkpoint, TokenLookup):
        data = checkpoint
    else:
        try:
            data = token_lookup_data(checkpoint, target, ids=ids, corpus=corpus, diagnosis=diagnosis)
        except UnusableInputError as exc:
            return unavailable("Draft ↔ target token lookup", str(exc))
    initial: list[str | int] = list(queries) if queries else list(data.most_frequent(8))

    def static() -> str:
        return _lookup_html(data, initial) + note_html(STATIC_NOTE)

    def build() -> Any:
        import ipywidgets as w  # optional: ipywidgets

        text = w.Text(
            value="",
            placeholder="token string, target id, or d:<draft id>",
            description="token",
            continuous_update=False,
            layout=w.Layout(width="28em"),
        )
        return live_html(text, [text], lambda: _lookup_html(data, [text.value] if text.value else initial))

    return Explorer("Draft ↔ target token lookup", static, build, interactive)


# -- probe controls ------------------------------------------------------------------------------


def probe_html(result: ProbeResult) -> str:
    """A probe result as static HTML: headline table, per-position table and figure (or, when no
    draft token was accepted, a line saying so instead of an empty chart)."""
    from eagle3_forensics.views.probe import (  # heavy: torch
        empty_chart_text,
        nothing_accepted,
        per_position_figure,
        per_position_table,
        summary_table,
    )

    chart = (
        note_html(empty_chart_text(result))
        if nothing_accepted(result)
        else figure_html(per_position_figure(result), "per-position acceptance")
    )
    return table_html(summary_table(result)) + table_html(per_position_table(result)) + chart


def probe_line(result: ProbeResult | None, why: str = "not run", lead: str = "With these values: ") -> str:
    """The probe run with the notebook's values, on one line (its tables and chart are in the
    notebook already: the explorer does not draw them a second time); ``lead`` starts the line."""
    if result is None:
        return note_html(f"probe {why}")
    per_pos = " / ".join(fmt.rate(x) for x in result.per_position_cumulative)
    return (
        f"<p>{esc(lead)}acceptance length <b>{fmt.acceptance_length(result.acceptance_length)}</b>, "
        f"per-position acceptance (cumulative) {esc(per_pos)}, lossless {fmt.yes_no(result.lossless)}, "
        f"{esc(fmt.speed(result.tokens_per_s))} ({result.prompts} prompts, {esc(result.device)}).</p>"
    )


def probe_controls(
    checkpoint: str | Path,
    target: str | Path | None,
    prompts: str | Path | None,
    *,
    result: ProbeResult | None = None,
    k: int = 3,
    max_new_tokens: int = 32,
    max_prompts: int = 4,
    engine: str = "reference",
    device: str = "auto",
    interactive: bool | None = None,
) -> Explorer:
    """Controls to re-run the live probe (K, new tokens, prompts, engine view, device).

    The static view shows ``result`` (the run already made with the notebook's parameters).
    """

    def static() -> str:
        import pandas as pd  # optional: pandas

        controls = pd.DataFrame(
            [
                ("K (draft tokens per cycle)", k),
                ("new tokens per prompt", max_new_tokens),
                ("prompts (the first n)", max_prompts),
                ("engine view", engine),
                ("device", device),
                ("prompts file", fmt.missing("none given") if prompts is None else visible(prompts)),
            ],
            columns=["control", "value"],
        )
        why = "no target or prompts given" if target is None or prompts is None else "not run"
        last = probe_line(result, why)
        return table_html(controls) + last + note_html(STATIC_NOTE)

    def build() -> Any:
        import ipywidgets as w  # optional: ipywidgets
        from IPython.display import HTML, display  # optional: IPython

        from eagle3_forensics.reference.drafter.views import VIEW_NAMES  # heavy: torch

        kk = w.IntSlider(value=k, min=1, max=8, description="K")
        tokens = w.IntSlider(value=max_new_tokens, min=8, max=256, step=8, description="new tokens")
        n = w.IntSlider(value=max_prompts, min=1, max=64, description="prompts")
        view = w.Dropdown(options=list(VIEW_NAMES), value=engine, description="engine view")
        dev = w.Dropdown(options=["auto", "cpu", "cuda"], value=device, description="device")
        run = w.Button(description="Run probe", button_style="primary")
        out = w.Output()
        with out:  # the notebook's own run, in one line: its tables and chart are shown above it
            why = "no target or prompts given" if target is None or prompts is None else "not run"
            display(HTML(probe_line(result, why) + note_html("change the controls and press Run probe")))

        def go(_button: Any) -> None:
            from eagle3_forensics.probe.core import probe, read_prompts  # heavy: torch, transformers

            out.clear_output(wait=True)
            with out:
                if target is None or prompts is None:
                    display(HTML(note_html("the probe needs a target and prompts")))
                    return
                display(HTML(note_html("running…")))
                r = probe(
                    checkpoint,
                    target,
                    read_prompts(prompts)[: n.value],
                    k=kk.value,
                    max_new_tokens=tokens.value,
                    device=dev.value,
                    engine=view.value,
                    teacher_forced=False,
                    sweep=False,
                )
                out.clear_output(wait=True)
                display(HTML(probe_html(r)))

        run.on_click(go)
        return w.VBox([w.HBox([kk, tokens, n]), w.HBox([view, dev, run]), out])

    return Explorer("Probe controls", static, build, interactive)


# -- helpers shared with views.explorers -----------------------------------------------------------


def live_html(
    header: Any, watched: Sequence[Any], render: Callable[[], str], css_class: str | None = None
) -> Any:
    """The explorers' live layout: ``header`` (a widget) above an output that shows ``render()``,
    redrawn whenever one of the ``watched`` controls changes value; ``css_class`` names the box
    (the browser test finds explorers by it)."""
    import ipywidgets as w  # optional: ipywidgets
    from IPython.display import HTML, display  # optional: IPython

    out = w.Output()

    def refresh(_change: Any = None) -> None:
        out.clear_output(wait=True)
        with out:
            display(HTML(render()))

    for control in watched:
        control.observe(refresh, names="value")
    refresh()
    box = w.VBox([header, out])
    if css_class:
        box.add_class(css_class)
    return box
