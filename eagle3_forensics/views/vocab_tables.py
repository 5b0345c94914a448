"""Tables (``pandas.DataFrame``) for the vocabulary notebooks and reports.

Each function turns one result object of :mod:`eagle3_forensics.vocab.mapping`,
:mod:`eagle3_forensics.vocab.inputs` or :mod:`eagle3_forensics.vocab.coverage` into a small frame; a
notebook cell calls one of them and lets Jupyter render it (pandas escapes every cell, so token
strings and paths cannot inject HTML). ``pandas`` is imported lazily: the package works without it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from eagle3_forensics.views import format as fmt
from eagle3_forensics.views.html import shown
from eagle3_forensics.vocab.coverage import TOKEN_CLASSES, CoverageReport, TokenTable
from eagle3_forensics.vocab.mapping.build import VocabMapping
from eagle3_forensics.vocab.mapping.classify import VocabClassification
from eagle3_forensics.vocab.mapping.compare import MappingComparison
from eagle3_forensics.vocab.mapping.convert import D2TFix
from eagle3_forensics.vocab.mapping.counts import TIE_BREAKS, TokenCounts
from eagle3_forensics.vocab.mapping.lm_head import LmHeadRowCheck


def _frame(rows: list[dict[str, Any]] | dict[str, Any], columns: list[str] | None = None) -> Any:
    """A frame that a notebook cell shows like :func:`~eagle3_forensics.views.html.show_table`
    (values per :mod:`eagle3_forensics.views.format`: ``–`` for missing, no row numbers)."""
    import pandas as pd  # optional: pandas

    if isinstance(rows, dict):
        return shown(
            pd.DataFrame(
                {"value": [_cell(v) for v in rows.values()]}, index=pd.Index(list(rows), name="field")
            )
        )
    return shown(
        pd.DataFrame([{k: _cell(v) for k, v in r.items()} for r in rows], columns=columns, dtype=object)
    )


def _cell(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 6)
    if isinstance(v, (list, tuple, dict)):
        return fmt.value(v)
    return v


def _np(x: Any) -> np.ndarray | None:
    if x is None:
        return None
    return np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x)


def mapping_table(mapping: Any) -> Any:
    """Where a map came from and its shapes (a :class:`~eagle3_forensics.vocab.inputs.LoadedMapping`)."""
    summary = mapping.summary() if hasattr(mapping, "summary") else {"d2t": mapping.d2t, "t2d": mapping.t2d}
    return _frame(summary)


def evidence_table(res: VocabClassification) -> Any:
    """The classification and the evidence behind it."""
    rows: dict[str, Any] = {
        "kind": res.kind,
        "meaning": res.meaning,
        "consistent": res.consistent,
        "target_vocab_size (V)": res.target_vocab_size,
        "draft_vocab_size (v)": res.draft_vocab_size,
    }
    for name, value in res.agreement.items():
        rows[f"agreement if {name}"] = f"{value:.1%} of draft ids"
    rows["first wrong draft id"] = res.first_bad_index
    if res.bad_runs:
        rows["wrong runs [start, end)"] = res.bad_runs
    for name in ("d2t_problems", "t2d_problems", "notes"):
        if getattr(res, name):
            rows[name.replace("_", " ")] = "; ".join(getattr(res, name))
    return _frame(rows)


def samples_table(res: VocabClassification) -> Any:
    """Wrong draft ids: stored ``d2t``, the right offset and the target id an engine would use."""
    return _frame(
        [
            {
                "draft id": s["draft_id"],
                "stored d2t": s["stored"],
                "expected d2t": s["expected"],
                "engine proposes target": s["draft_id"] + s["stored"],
                "should propose": s["draft_id"] + s["expected"] if s["expected"] >= 0 else None,
            }
            for s in res.samples
        ],
        columns=["draft id", "stored d2t", "expected d2t", "engine proposes target", "should propose"],
    )


def first_entries_table(d2t: Any, t2d: Any = None, n: int = 24) -> Any:
    """The first draft ids: stored ``d2t``, the target an engine computes (``i + d2t[i]``) and ``nonzero(t2d)[i]``.

    This is the table that settles the seed story: leading zeros are right exactly when the first
    selected target ids are ``0, 1, 2, ...``.
    """
    if hasattr(d2t, "d2t") and hasattr(d2t, "t2d"):
        d2t, t2d = d2t.d2t, d2t.t2d
    d, m = _np(d2t), _np(t2d)
    sel = None if m is None or m.ndim != 1 else np.flatnonzero(m.astype(bool))
    count = n if d is None else min(n, d.shape[0])
    rows = []
    for i in range(count):
        row: dict[str, Any] = {"draft id i": i}
        if d is not None:
            row.update({"stored d2t[i]": int(d[i]), "engine target i + d2t[i]": i + int(d[i])})
        if sel is not None and i < sel.shape[0]:
            row.update({"nonzero(t2d)[i]": int(sel[i]), "right": d is None or i + int(d[i]) == int(sel[i])})
        rows.append(row)
    return _frame(rows)


_CANDIDATES = {
    "offsets": "d2t read as offsets (what engines do)",
    "absolute": "d2t read as absolute ids",
    "double_offset": "d2t read as double offsets",
    "t2d": "nonzero(t2d)",
    "identity": "identity (no map: target = draft id)",
}


def row_check_table(check: LmHeadRowCheck | None) -> Any:
    """The ``lm_head`` row check per candidate map."""
    if check is None:
        return _frame({"lm_head row check": "skipped (no target lm_head or no drafter lm_head)"})
    rows = []
    for name, h in check.hypotheses.items():
        rows.append(
            {
                "candidate map": _CANDIDATES.get(name, name),
                "in range": h.get("in_range"),
                "exact rows": h.get("exact_fraction"),
                "first mismatch": h.get("first_mismatch"),
                "mean row cosine": h.get("mean_cosine"),
                "best": name == check.best,
            }
        )
    rows.append({"candidate map": "baseline (mismatched rows)", "mean row cosine": check.baseline_cosine})
    frame = _frame(
        rows, ["candidate map", "in range", "exact rows", "first mismatch", "mean row cosine", "best"]
    )
    frame.attrs["method"] = check.method
    return frame


def fix_table(fix: D2TFix) -> Any:
    """The repair for the classified kind and its verification."""
    rows = fix.to_dict()
    if fix.d2t is not None:
        rows["repaired d2t[:12]"] = fix.d2t[:12].tolist()
    return _frame(rows)


def build_table(mapping: VocabMapping) -> Any:
    """A map built from token counts: sizes, counted tokens, coverage, padding, fingerprint."""
    rows = mapping.summary()
    rows["tie_break"] = f"{mapping.tie_break}: {TIE_BREAKS.get(mapping.tie_break, '')}"
    if mapping.padding_note:
        rows["note"] = mapping.padding_note  # one line here, not a VocabPaddingWarning in the notebook
    return _frame(rows)


def comparison_table(cmp: MappingComparison) -> Any:
    """Two maps side by side, then the overlap of their selections."""
    import pandas as pd  # optional: pandas

    d = cmp.to_dict(limit=0)
    # the columns carry the maps' names (not "a"/"b"); two maps of one name stay two columns
    a, b = (str(x) for x in cmp.labels)
    if a == b:
        a, b = f"{a} (1)", f"{b} (2)"
    fields = ["target_vocab_size", "draft_vocab_size", "kind", "selection_from", "fingerprint"]
    frame = pd.DataFrame(
        {a: [d["a"][f] for f in fields], b: [d["b"][f] for f in fields]},
        index=pd.Index(fields, name="field"),
    )
    extra = pd.DataFrame(
        {
            name: [
                cmp.common,
                fmt.rate(cmp.jaccard),  # one rounding: MappingComparison.headline says the same
                d[f"only_in_{side}"]["count"],
                cmp.identical,
                cmp.d2t_equal,
                fmt.missing("no d2t to compare") if cmp.read_differ is None else cmp.read_differ,
            ]
            for name, side in ((a, "a"), (b, "b"))
        },
        index=pd.Index(
            [
                "ids in common",
                "jaccard",
                "ids only here",
                "same selection",
                "d2t tensors equal",
                "draft ids read differently",
            ],
            name="field",
        ),
    )
    return shown(pd.concat([frame, extra]).astype(object))


def only_ids_table(
    cmp: MappingComparison, tokens: TokenTable | None = None, counts: Any = None, limit: int = 20
) -> Any:
    """Target ids selected by only one of the two maps, with their strings (and corpus counts)."""
    c = None if counts is None else np.asarray(getattr(counts, "counts", counts))
    rows = []
    for side, ids in (("only in " + cmp.labels[0], cmp.only_a), ("only in " + cmp.labels[1], cmp.only_b)):
        picked = ids if c is None else ids[np.lexsort((ids, -c[ids]))] if ids.size else ids
        for i in picked[:limit].tolist():
            row: dict[str, Any] = {"side": side, "target id": i}
            if tokens is not None:
                row.update({"token": fmt.token(tokens.text(i)), "class": tokens.class_of(i)})
            if c is not None:
                row["corpus count"] = int(c[i])
            rows.append(row)
    return _frame(
        rows, ["side", "target id", "token", "class", "corpus count"] if rows else ["side", "target id"]
    )


def coverage_table(*reports: CoverageReport) -> Any:
    """Coverage of one or more maps on the same corpus, side by side."""
    import pandas as pd  # optional: pandas

    cols = {}
    for k, r in enumerate(reports):
        cols[r.label or f"map {k}"] = {
            "draft vocabulary size v": r.draft_vocab_size,
            "target vocabulary size V": r.target_vocab_size,
            "counted corpus tokens": r.total,
            "covered tokens": r.covered,
            "coverage": f"{r.coverage:.2%}",
            f"best possible with v={r.draft_vocab_size}": f"{r.oracle:.2%}",
            "distinct ids in corpus": r.distinct,
            "distinct ids covered": r.distinct_covered,
            "draft ids never seen in corpus": r.selected_unseen,
        }
    return shown(pd.DataFrame(cols).rename_axis("field").astype(object))


def class_table(report: CoverageReport) -> Any:
    """Coverage per token class (special/added, byte-fallback, ordinary, no token)."""
    return _frame(
        report.by_class,
        [
            "class",
            "tokens",
            "covered",
            "coverage",
            "share_of_corpus",
            "distinct_ids",
            "distinct_uncovered",
            "ids_in_draft_vocab",
        ],
    )


def uncovered_table(report: CoverageReport) -> Any:
    """The most frequent tokens outside the draft vocabulary, with their strings."""
    rows = [
        {**r, "token": fmt.token(r["text"]) if "text" in r else fmt.missing("no tokenizer")}
        for r in report.top_uncovered
    ]
    return _frame(rows, ["id", "token", "count", "share", "class"])


def counts_table(counts: TokenCounts) -> Any:
    """What was counted: ids read, counted (``loss_mask == 1``), distinct ids, rows."""
    return _frame(
        {
            "ids read": counts.tokens,
            "rows": counts.rows,
            "counted tokens (loss_mask == 1)": counts.counted,
            "distinct ids counted": counts.distinct,
            "target vocabulary size V": int(counts.counts.shape[0]),
        }
    )


def token_class_table(tokens: TokenTable) -> Any:
    """How many vocabulary ids fall in each token class."""
    n = np.bincount(tokens.classes.astype(np.int64), minlength=len(TOKEN_CLASSES))
    return _frame(
        [{"class": name, "ids": int(n[k])} for k, name in enumerate(TOKEN_CLASSES)], ["class", "ids"]
    )
