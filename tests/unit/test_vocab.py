"""Vocabulary-map forensics: classify, repair, convert and build ``d2t``/``t2d``.

The seed story (docs/findings.md): a correct offsets ``d2t`` starts with zeros whenever the
lowest target ids are in the draft vocabulary; "fixing" it as if it held absolute ids yields
a double offset. Everything is decided from the full identity ``nonzero(t2d) == d2t + arange(v)``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eagle3_forensics.errors import BadArgumentsError, ForensicsError, UnusableInputError
from eagle3_forensics.vocab.mapping import (
    CONSISTENT_KINDS,
    KINDS,
    absolute_to_offsets,
    build_vocab_mapping,
    check_t2d,
    classify_mapping,
    d2t_from_t2d,
    offsets_to_absolute,
    t2d_from_d2t,
    undo_double_offset,
)

PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _selection(vocab: int, draft: int, seed: int, leading: int = 0) -> np.ndarray:
    """Ascending target ids: ``0..leading-1`` then a random sample of the rest."""
    rng = np.random.default_rng(seed)
    leading = min(leading, draft)
    rest = rng.choice(np.arange(leading, vocab), size=draft - leading, replace=False)
    return np.sort(np.concatenate([np.arange(leading), rest])).astype(np.int64)


def _mask(sel: np.ndarray, vocab: int) -> torch.Tensor:
    m = torch.zeros(vocab, dtype=torch.bool)
    m[torch.from_numpy(sel)] = True
    return m


def _offsets(sel: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(sel - np.arange(sel.shape[0], dtype=np.int64))


# -- the seed story -------------------------------------------------------------------------------

V_SEED, v_SEED = 1000, 320  # noqa: N816 - the target's V and the draft's v, as in the maths


@pytest.fixture
def seed_story() -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    sel = _selection(V_SEED, v_SEED, seed=7, leading=20)
    return sel, _offsets(sel), _mask(sel, V_SEED)


def test_seed_story_valid_offsets_start_with_zeros(seed_story: Any) -> None:
    _sel, d2t, t2d = seed_story
    assert d2t[:20].eq(0).all()
    assert torch.equal(torch.nonzero(t2d).flatten()[:20], torch.arange(20))
    # The comparison that started the story: offsets vs absolute ids differ, yet the map is right.
    assert not torch.equal(d2t, torch.nonzero(t2d).flatten())
    res = classify_mapping(d2t, t2d, V_SEED, v_SEED)
    assert res.kind == "consistent_offsets"
    assert res.consistent
    assert res.agreement["offsets"] == 1.0
    assert res.first_bad_index is None and res.bad_runs == []


def test_seed_story_absolute_and_repair(seed_story: Any) -> None:
    sel, d2t, t2d = seed_story
    absolute = torch.from_numpy(sel.copy())
    res = classify_mapping(absolute, t2d, V_SEED, v_SEED)
    assert res.kind == "absolute"
    assert res.agreement["absolute"] == 1.0
    # d2t[i] = i for i < 20 looks harmless, but the engine computes i + d2t[i] = 2i: wrong from i = 1.
    assert res.first_bad_index == 1
    repaired = absolute_to_offsets(absolute)
    assert torch.equal(repaired, d2t)
    assert classify_mapping(repaired, t2d, V_SEED, v_SEED).kind == "consistent_offsets"


def test_seed_story_naive_fix_gives_double_offset(seed_story: Any) -> None:
    sel, d2t, t2d = seed_story
    ar = torch.arange(v_SEED)
    wrongly_fixed = absolute_to_offsets(d2t)  # "convert absolute -> offsets" applied to offsets
    assert torch.equal(wrongly_fixed, torch.from_numpy(sel) - 2 * ar)
    assert torch.equal(wrongly_fixed[1:20], -torch.arange(1, 20))
    res = classify_mapping(wrongly_fixed, t2d, V_SEED, v_SEED)
    assert res.kind == "double_offset"
    assert res.agreement["double_offset"] == 1.0
    assert res.first_bad_index == 1
    # The negative entries prove it even without t2d.
    assert classify_mapping(wrongly_fixed, None, V_SEED, v_SEED).kind == "double_offset"
    # Both repairs restore the identity.
    for repaired in (undo_double_offset(wrongly_fixed), d2t_from_t2d(t2d)):
        assert torch.equal(repaired, d2t)
        assert classify_mapping(repaired, t2d, V_SEED, v_SEED).kind == "consistent_offsets"


def test_d2t_from_t2d_and_back(seed_story: Any) -> None:
    sel, d2t, t2d = seed_story
    assert d2t_from_t2d(t2d).dtype == torch.int64
    assert torch.equal(d2t_from_t2d(t2d), d2t)
    assert torch.equal(t2d_from_d2t(d2t, V_SEED), t2d)
    assert torch.equal(offsets_to_absolute(d2t), torch.from_numpy(sel))
    with pytest.raises(UnusableInputError):
        t2d_from_d2t(torch.from_numpy(sel), V_SEED)  # absolute ids overflow as offsets


# -- fixed cases -----------------------------------------------------------------------------------

V_, v_ = 200, 64


@pytest.fixture
def mapping() -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    sel = _selection(V_, v_, seed=3, leading=10)
    return sel, _offsets(sel), _mask(sel, V_)


def test_permuted(mapping: Any) -> None:
    sel, _d2t, t2d = mapping
    perm = sel.copy()
    perm[[30, 41]] = perm[[41, 30]]
    res = classify_mapping(_offsets(perm), t2d, V_, v_)
    assert res.kind == "permuted"
    assert res.first_bad_index == 30
    assert res.bad_runs == [[30, 31], [41, 42]]
    # without t2d the descent still shows
    alone = classify_mapping(_offsets(perm), None, V_, v_)
    assert alone.kind == "permuted"


def test_partial_corruption_block(mapping: Any) -> None:
    _sel, d2t, t2d = mapping
    bad = d2t.clone()
    bad[40:50] = bad[40:50] + 1  # shift a block of targets by one (still in range)
    assert (bad + torch.arange(v_)).max().item() < V_
    res = classify_mapping(bad, t2d, V_, v_)
    assert res.kind == "partial_corruption"
    assert res.first_bad_index == 40
    assert res.bad_runs == [[40, 50]]
    assert res.agreement["offsets"] == pytest.approx((v_ - 10) / v_)
    assert res.samples[0] == {"draft_id": 40, "stored": int(bad[40]), "expected": int(d2t[40])}
    ev = res.evidence()
    assert ev["kind"] == "partial_corruption" and ev["first_bad_index"] == 40


def test_out_of_range(mapping: Any) -> None:
    _sel, d2t, t2d = mapping
    bad = d2t.clone()
    bad[-1] = V_ + 3 - (v_ - 1)
    res = classify_mapping(bad, t2d, V_, v_)
    assert res.kind == "out_of_range"
    assert res.first_bad_index == v_ - 1
    neg = d2t.clone()
    neg[5] = -20
    assert classify_mapping(neg, t2d, V_, v_).kind == "out_of_range"


def test_inconsistent_sizes(mapping: Any) -> None:
    _sel, d2t, t2d = mapping
    res = classify_mapping(d2t[:-1], t2d, V_, v_)
    assert res.kind == "inconsistent_sizes"
    assert res.d2t_problems
    assert not res.consistent


def test_t2d_wrong_count_is_blamed_on_t2d(mapping: Any) -> None:
    """A default all-True t2d does not make a valid d2t invalid; t2d carries the problem."""
    _sel, d2t, _t2d = mapping
    res = classify_mapping(d2t, torch.ones(V_, dtype=torch.bool), V_, v_)
    assert res.kind == "unverified_offsets"
    assert any("all True" in p for p in res.t2d_problems)
    both_default = classify_mapping(
        torch.zeros(v_, dtype=torch.int64), torch.ones(V_, dtype=torch.bool), V_, v_
    )
    assert both_default.kind == "identity_default"


def test_identity_default(mapping: Any) -> None:
    sel, _d2t, t2d = mapping
    zeros = torch.zeros(v_, dtype=torch.int64)
    res = classify_mapping(zeros, t2d, V_, v_)
    assert res.kind == "identity_default"
    # the leading ids that equal their draft index happen to be right
    assert res.first_bad_index == int(np.flatnonzero(sel != np.arange(v_))[0]) >= 10
    alone = classify_mapping(zeros, None, V_, v_)
    assert alone.kind == "identity_default"
    assert alone.notes
    # zeros are exactly right when the draft vocabulary is target ids 0..v-1
    ident = _mask(np.arange(v_), V_)
    assert classify_mapping(zeros, ident, V_, v_).kind == "consistent_offsets"


def test_missing_and_full_vocab(mapping: Any) -> None:
    _sel, _d2t, t2d = mapping
    assert classify_mapping(None, t2d, V_, v_).kind == "missing"
    assert classify_mapping(None, None, V_, v_).kind == "missing"
    assert classify_mapping(None, None, V_, V_).kind == "full_vocab"
    full = classify_mapping(torch.zeros(V_, dtype=torch.int64), torch.ones(V_, dtype=torch.bool), V_, V_)
    assert full.kind == "full_vocab" and full.consistent
    assert classify_mapping(torch.zeros(V_, dtype=torch.int64), None, V_).kind == "full_vocab"


def test_no_t2d(mapping: Any) -> None:
    sel, d2t, _t2d = mapping
    res = classify_mapping(d2t, None, V_, v_)
    assert res.kind == "unverified_offsets"
    assert res.consistent
    assert res.agreement == {}
    absolute = classify_mapping(torch.from_numpy(sel), None, V_, v_)
    assert absolute.kind == "absolute"  # some sel[i] + i >= V proves it
    dup = d2t.clone()
    dup[20] = dup[19] - 1  # two draft ids -> the same target
    res = classify_mapping(dup, None, V_, v_)
    assert res.kind == "invalid_d2t"
    assert res.first_bad_index == 20


def test_invalid_d2t(mapping: Any) -> None:
    _sel, d2t, t2d = mapping
    assert classify_mapping(d2t.float(), t2d, V_, v_).kind == "invalid_d2t"
    assert classify_mapping(d2t.reshape(8, 8), t2d, V_, v_).kind == "invalid_d2t"
    res = classify_mapping(d2t.to(torch.int32), t2d, V_, v_)
    assert res.kind == "consistent_offsets"  # int32 is only a dtype nit


def test_t2d_problems(mapping: Any) -> None:
    _sel, d2t, t2d = mapping
    assert check_t2d(t2d, V_, v_) == []
    as_int = check_t2d(t2d.to(torch.int8), V_, v_)
    assert len(as_int) == 1 and "expected bool" in as_int[0]
    res = classify_mapping(d2t, t2d.to(torch.int8), V_, v_)
    assert res.kind == "consistent_offsets" and res.t2d_problems
    assert any("values other than" in p for p in check_t2d(t2d.to(torch.int8) * 2, V_, v_))
    assert any("entries" in p for p in check_t2d(torch.cat([t2d, torch.zeros(3, dtype=torch.bool)]), V_, v_))
    assert any("selects no ids" in p for p in check_t2d(torch.zeros(V_, dtype=torch.bool), V_, v_))
    assert any("expected 1-D" in p for p in check_t2d(t2d.reshape(10, 20), V_, v_))


def test_kinds_are_documented() -> None:
    assert set(KINDS) >= CONSISTENT_KINDS
    assert all(KINDS.values())


# -- properties -------------------------------------------------------------------------------------


@st.composite
def selections(draw: Any, max_vocab: int = 5000) -> tuple[int, np.ndarray]:
    vocab = draw(st.integers(2, max_vocab))
    draft = draw(st.integers(1, vocab))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    sel = np.sort(rng.choice(vocab, size=draft, replace=False)).astype(np.int64)
    return vocab, sel


@PROPS
@given(selections())
def test_prop_offsets_are_consistent(data: tuple[int, np.ndarray]) -> None:
    vocab, sel = data
    v = sel.shape[0]
    d2t, t2d = _offsets(sel), _mask(sel, vocab)
    res = classify_mapping(d2t, t2d, vocab, v)
    assert res.kind == ("full_vocab" if v == vocab else "consistent_offsets")
    assert res.consistent
    assert torch.equal(d2t_from_t2d(t2d), d2t)
    assert torch.equal(t2d_from_d2t(d2t, vocab), t2d)
    # offsets are non-decreasing, start >= 0 and end <= V - v (docs/reference/formats.md §0)
    assert (d2t[1:] >= d2t[:-1]).all() and d2t[0] >= 0 and d2t[-1] <= vocab - v


@PROPS
@given(selections(), st.data())
def test_prop_single_corruption_is_caught(data: tuple[int, np.ndarray], draw: Any) -> None:
    vocab, sel = data
    v = sel.shape[0]
    i = draw.draw(st.integers(0, v - 1))
    new = draw.draw(st.integers(-3, vocab + 3).filter(lambda t: t != sel[i]))
    bad = sel.copy()
    bad[i] = new
    d2t = _offsets(bad)
    res = classify_mapping(d2t, _mask(sel, vocab), vocab, v)
    assert not res.consistent
    assert res.first_bad_index == i
    assert res.bad_runs == [[i, i + 1]]
    assert res.samples[0]["draft_id"] == i


@PROPS
@given(selections())
def test_prop_absolute_offset_round_trips(data: tuple[int, np.ndarray]) -> None:
    vocab, sel = data
    v = sel.shape[0]
    ar = np.arange(v)
    offsets, t2d = _offsets(sel), _mask(sel, vocab)
    absolute = offsets_to_absolute(offsets)
    assert torch.equal(absolute, torch.from_numpy(sel))
    assert torch.equal(absolute_to_offsets(absolute), offsets)
    double = absolute_to_offsets(offsets)
    assert torch.equal(undo_double_offset(double), offsets)
    if v >= 2:
        assert classify_mapping(absolute, t2d, vocab, v).kind == "absolute"
        assert classify_mapping(double, t2d, vocab, v).kind == "double_offset"
        assert classify_mapping(absolute_to_offsets(absolute), t2d, vocab, v).consistent
        assert classify_mapping(undo_double_offset(double), t2d, vocab, v).consistent
        # Without t2d, whatever d2t alone proves is never taken for a valid map.
        if (sel + ar >= vocab).any():
            assert classify_mapping(absolute, None, vocab, v).kind == "absolute"
        if (sel - 2 * ar < 0).any():
            assert not classify_mapping(double, None, vocab, v).consistent


# -- building the map: a reference written from the trainers' documented semantics --------------------


def _counted(chunks: list[list[int]], masks: list[list[bool]] | None) -> list[int]:
    out: list[int] = []
    for k, ids in enumerate(chunks):
        out.extend(t for j, t in enumerate(ids) if masks is None or masks[k][j])
    return out


def reference_speculators(tokens: list[int], draft: int) -> list[int]:
    """speculators: sort ids by (-count, id), top v, pad with the smallest unused ids, sort ascending."""
    counts = Counter(tokens)
    top = sorted(counts, key=lambda t: (-counts[t], t))[:draft]
    pad = [i for i in range(draft) if i not in set(top)][: draft - len(top)]
    return sorted(top + pad)


def reference_specforge(tokens: list[int], draft: int) -> list[int]:
    """SpecForge: Counter in first-seen order, add range(v) ids with count 0 until v keys,
    most_common(v) (ties by insertion order), sort ascending."""
    counts: Counter[int] = Counter()
    for t in tokens:
        counts[t] += 1
    for i in range(draft):
        if len(counts) >= draft:
            break
        if i not in counts:
            counts[i] = 0
    return sorted(t for t, _ in counts.most_common(draft))


def _check_against(ref: list[int], mapping: Any, vocab: int, draft: int, tokens: list[int]) -> None:
    sel = np.asarray(ref, dtype=np.int64)
    assert mapping.d2t.dtype == torch.int64 and mapping.t2d.dtype == torch.bool
    assert mapping.d2t.tolist() == (sel - np.arange(draft)).tolist()
    assert mapping.selected.tolist() == ref
    assert mapping.t2d.shape == (vocab,) and int(mapping.t2d.sum()) == draft
    assert mapping.padded == max(0, draft - len(set(tokens)))
    assert (
        mapping.counts.tolist() == np.bincount(np.asarray(tokens, dtype=np.int64), minlength=vocab).tolist()
    )
    assert classify_mapping(mapping.d2t, mapping.t2d, vocab, draft).consistent


@st.composite
def corpora(draw: Any) -> tuple[int, int, list[list[int]], list[list[bool]] | None]:
    vocab = draw(st.integers(2, 40))
    draft = draw(st.integers(1, vocab))
    n_chunks = draw(st.integers(1, 3))
    # a skewed alphabet so that ties and padding both happen often
    alphabet = st.integers(0, vocab - 1) | st.sampled_from([vocab - 1, vocab // 2])
    chunks = [draw(st.lists(alphabet, min_size=0, max_size=60)) for _ in range(n_chunks)]
    masks = None
    if draw(st.booleans()):
        masks = [draw(st.lists(st.booleans(), min_size=len(c), max_size=len(c))) for c in chunks]
    return vocab, draft, chunks, masks


@PROPS
@given(corpora(), st.sampled_from(["id", "first_seen"]))
def test_prop_build_matches_reference(data: Any, tie_break: str) -> None:
    vocab, draft, chunks, masks = data
    tokens = _counted(chunks, masks)
    ref_fn = reference_speculators if tie_break == "id" else reference_specforge
    as_arrays = tuple(np.asarray(c, dtype=np.int64) for c in chunks)
    mask_arrays = None if masks is None else tuple(np.asarray(m, dtype=bool) for m in masks)
    if not tokens:
        with pytest.raises(UnusableInputError):
            build_vocab_mapping(as_arrays, draft, vocab, loss_mask=mask_arrays, tie_break=tie_break)
        return
    mapping = build_vocab_mapping(as_arrays, draft, vocab, loss_mask=mask_arrays, tie_break=tie_break)
    _check_against(ref_fn(tokens, draft), mapping, vocab, draft, tokens)
    if len(chunks) == 1:  # a single array / list / tensor is one chunk
        flat_mask = None if masks is None else masks[0]
        for form in (
            chunks[0],
            np.asarray(chunks[0], dtype=np.int64),
            torch.tensor(chunks[0], dtype=torch.int64),
        ):
            again = build_vocab_mapping(form, draft, vocab, loss_mask=flat_mask, tie_break=tie_break)
            assert torch.equal(again.d2t, mapping.d2t) and torch.equal(again.t2d, mapping.t2d)


def test_tie_break_differs_between_trainers() -> None:
    tokens = [5, 3, 5, 3, 1]  # 5 and 3 tie; 5 is seen first, 3 has the smaller id
    by_id = build_vocab_mapping(np.array(tokens), 1, 8, tie_break="id")
    by_seen = build_vocab_mapping(np.array(tokens), 1, 8, tie_break="first_seen")
    assert by_id.selected.tolist() == [3] == reference_speculators(tokens, 1)
    assert by_seen.selected.tolist() == [5] == reference_specforge(tokens, 1)
    # first-seen order carries across chunks
    chunks = (np.array([9, 1]), np.array([1, 9, 5]))
    assert build_vocab_mapping(chunks, 1, 10, tie_break="first_seen").selected.tolist() == [9]
    assert build_vocab_mapping(chunks, 1, 10, tie_break="id").selected.tolist() == [1]


def test_loss_mask_restricts_counting() -> None:
    tokens = np.array([4, 4, 4, 7, 7, 2])
    mask = np.array([0, 0, 0, 1, 1, 1], dtype=bool)  # the 4s are prompt tokens
    unmasked = build_vocab_mapping(tokens, 1, 8)
    masked = build_vocab_mapping(tokens, 1, 8, loss_mask=mask)
    assert unmasked.selected.tolist() == [4]
    assert masked.selected.tolist() == [7]
    assert masked.counts.tolist() == [0, 0, 1, 0, 0, 0, 0, 2]


def test_padding_with_smallest_unused_ids() -> None:
    m = build_vocab_mapping(np.array([7, 7, 9, 0]), 5, 10)
    assert m.padded == 2
    assert m.selected.tolist() == [0, 1, 2, 7, 9]  # 0 was seen; pads are 1 and 2
    assert m.d2t.tolist() == [0, 0, 0, 4, 5]
    assert (
        m.selected.tolist() == reference_speculators([7, 7, 9, 0], 5) == reference_specforge([7, 7, 9, 0], 5)
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"token_ids": np.array([], dtype=np.int64)}, "no counted tokens"),
        ({"token_ids": np.array([1, 2]), "loss_mask": np.array([0, 0])}, "no counted tokens"),
        ({"token_ids": np.array([1, 12])}, "token ids must lie"),
        ({"token_ids": np.array([1, 2]), "loss_mask": np.array([1])}, "loss_mask has"),
        ({"token_ids": np.array([1, 2]), "tie_break": "random"}, "tie_break"),
        ({"token_ids": np.array([1, 2]), "draft_vocab_size": 11}, "draft_vocab_size"),
        ({"token_ids": np.array([1, 2]), "draft_vocab_size": 0}, "draft_vocab_size"),
    ],
)
def test_build_rejects_bad_input(kwargs: dict[str, Any], match: str) -> None:
    args = {"draft_vocab_size": 3, "target_vocab_size": 10, **kwargs}
    with pytest.raises(ForensicsError, match=match):
        build_vocab_mapping(**args)


def test_selection_helper_is_ascending() -> None:
    sel = _selection(100, 30, seed=1, leading=5)
    assert sel[:5].tolist() == list(range(5))
    assert (np.diff(sel) > 0).all()


# -- streaming counts, the SpecForge tie-break, comparison, fixes, lm_head rows --------------------------

from eagle3_forensics.vocab.mapping import (  # noqa: E402
    VocabPaddingWarning,
    check_lm_head_rows,
    compare_mappings,
    count_token_ids,
    mapping_fingerprint,
    select_draft_vocab,
    selected_ids,
    suggest_d2t_fix,
)

pytestmark = pytest.mark.filterwarnings("ignore::eagle3_forensics.vocab.mapping.VocabPaddingWarning")


def reference_specforge_rows(rows: list[list[int]], masks: list[list[bool]] | None, draft: int) -> list[int]:
    """SpecForge as written: per row ``unique(return_counts)`` then ``Counter.update``, pad from
    ``range(v)``, ``most_common(v)`` (ties by insertion order: first row, then ascending id)."""
    counts: Counter[int] = Counter()
    for k, row in enumerate(rows):
        kept = [t for j, t in enumerate(row) if masks is None or masks[k][j]]
        uniq = sorted(set(kept))
        counts.update({t: kept.count(t) for t in uniq})
    if len(counts) < draft:
        for t in sorted(set(range(draft)) - set(counts)):
            counts[t] = 0
            if len(counts) >= draft:
                break
    return sorted(t for t, _ in counts.most_common(draft))


@st.composite
def row_corpora(draw: Any) -> tuple[int, int, list[list[int]], list[list[bool]] | None]:
    vocab = draw(st.integers(2, 30))
    draft = draw(st.integers(1, vocab))
    n_rows = draw(st.integers(1, 6))
    alphabet = st.integers(0, vocab - 1) | st.sampled_from([vocab - 1, vocab // 2, 0])
    width = draw(st.integers(1, 12))
    rows = [draw(st.lists(alphabet, min_size=width, max_size=width)) for _ in range(n_rows)]
    masks = None
    if draw(st.booleans()):
        masks = [draw(st.lists(st.booleans(), min_size=width, max_size=width)) for _ in rows]
    return vocab, draft, rows, masks


@PROPS
@given(row_corpora(), st.sampled_from([1, 2, 5, 16, 1 << 20]))
def test_prop_first_row_matches_specforge(data: Any, block: int) -> None:
    vocab, draft, rows, masks = data
    tokens = _counted(rows, masks)
    if not tokens:
        return
    ids = np.asarray(rows, dtype=np.int64)
    mask = None if masks is None else np.asarray(masks, dtype=bool)
    ref = reference_specforge_rows(rows, masks, draft)
    # one 2-D array, one array per row, and (ids, mask) pairs: the same rows, the same answer
    pairs = [(r, None if mask is None else mask[k]) for k, r in enumerate(ids)]
    # re-readable forms settle ties by re-reading one block; one-shot iterators track exact keys
    forms: list[tuple[Any, Any]] = [
        (ids, mask),
        (tuple(ids), None if mask is None else tuple(mask)),
        (pairs, None),
        (iter(pairs), None),
        (lambda: iter(pairs), None),
    ]
    for token_ids, loss_mask in forms:
        m = build_vocab_mapping(
            token_ids, draft, vocab, loss_mask=loss_mask, tie_break="first_row", block_tokens=block
        )
        assert m.selected.tolist() == ref
    for tie, ref_fn in (("id", reference_speculators), ("first_seen", reference_specforge)):
        for token_ids in (ids, iter(list(ids)), lambda: iter(list(ids))):
            loss: Any = mask if token_ids is ids else (None if mask is None else iter(list(mask)))
            if callable(token_ids):
                loss = None if mask is None else tuple(mask)
            m = build_vocab_mapping(
                token_ids, draft, vocab, loss_mask=loss, tie_break=tie, block_tokens=block
            )
            assert m.selected.tolist() == ref_fn(tokens, draft)


@PROPS
@given(corpora(), st.sampled_from(["id", "first_seen", "first_row"]), st.integers(1, 9))
def test_prop_block_size_never_changes_the_map(data: Any, tie_break: str, block: int) -> None:
    vocab, draft, chunks, masks = data
    if not _counted(chunks, masks):
        return
    as_arrays = tuple(np.asarray(c, dtype=np.int64) for c in chunks)
    mask_arrays = None if masks is None else tuple(np.asarray(m, dtype=bool) for m in masks)
    small = build_vocab_mapping(
        as_arrays, draft, vocab, loss_mask=mask_arrays, tie_break=tie_break, block_tokens=block
    )
    large = build_vocab_mapping(as_arrays, draft, vocab, loss_mask=mask_arrays, tie_break=tie_break)
    assert torch.equal(small.d2t, large.d2t) and torch.equal(small.t2d, large.t2d)
    assert np.array_equal(small.counts, large.counts)


def test_first_row_differs_from_first_seen() -> None:
    rows = np.array([[5, 3], [9, 1]])  # every id once; 5 is seen first, 3 is the smallest in row 0
    assert build_vocab_mapping(rows, 1, 10, tie_break="first_row").selected.tolist() == [3]
    assert build_vocab_mapping(rows, 1, 10, tie_break="first_seen").selected.tolist() == [5]
    assert build_vocab_mapping(rows, 1, 10, tie_break="id").selected.tolist() == [1]
    assert reference_specforge_rows(rows.tolist(), None, 1) == [3]


def test_streaming_inputs_and_mask_semantics() -> None:
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 50, size=(40, 30))
    mask = rng.integers(0, 3, size=(40, 30))  # only == 1 counts, as the trainers' loss_mask == 1
    expect = np.bincount(ids[mask == 1], minlength=50)
    gen = ((ids[i : i + 7], mask[i : i + 7]) for i in range(0, 40, 7))
    m = build_vocab_mapping(gen, 20, 50, tie_break="first_row", block_tokens=64)
    assert m.counts.tolist() == expect.tolist()
    ref = build_vocab_mapping(ids, 20, 50, loss_mask=mask == 1, tie_break="first_row")
    assert torch.equal(m.t2d, ref.t2d)
    tc = count_token_ids(
        torch.from_numpy(ids).to(torch.int32), 50, torch.from_numpy(mask == 1), block_tokens=100
    )
    assert tc.counts.tolist() == expect.tolist() and tc.tokens == ids.size and tc.rows == 40
    assert (
        select_draft_vocab(tc, 20, "id").selected.tolist()
        == build_vocab_mapping(ids, 20, 50, loss_mask=mask == 1).selected.tolist()
    )


@pytest.mark.parametrize("bad", [-1, 50, 10**12])
def test_out_of_range_anywhere_is_caught(bad: int) -> None:
    ids = np.zeros((10, 10), dtype=np.int64)
    ids[9, 9] = bad  # in the last block
    for mask in (None, np.ones((10, 10), dtype=bool)):
        with pytest.raises(UnusableInputError, match="token ids must lie"):
            build_vocab_mapping(ids, 3, 50, loss_mask=mask, block_tokens=7)


def test_build_rejects_more_bad_input() -> None:
    with pytest.raises(UnusableInputError, match="integers"):
        build_vocab_mapping(np.array([1.5, 2.0]), 1, 10)
    with pytest.raises(UnusableInputError, match="loss_mask has shape"):
        build_vocab_mapping(np.zeros((2, 3), dtype=np.int64), 1, 10, loss_mask=np.ones((3, 2), dtype=bool))
    with pytest.raises(UnusableInputError, match="loss_mask chunks"):
        build_vocab_mapping((np.array([1]), np.array([2])), 1, 10, loss_mask=(np.array([True]),))
    with pytest.raises(BadArgumentsError, match="target_vocab_size"):
        build_vocab_mapping(np.array([1]), 1, 0)


def test_padding_warns() -> None:
    with pytest.warns(VocabPaddingWarning, match="padded with the 2 smallest unused ids"):
        build_vocab_mapping(np.array([7, 7, 9, 0]), 5, 10)


def test_padding_without_the_warning() -> None:
    """``warn=False`` (the notebooks, whose tables show ``padded``): the same map, nothing on stderr."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", VocabPaddingWarning)
        quiet = build_vocab_mapping(np.array([7, 7, 9, 0]), 5, 10, warn=False)
    assert quiet.padded == 2
    with pytest.warns(VocabPaddingWarning):
        loud = build_vocab_mapping(np.array([7, 7, 9, 0]), 5, 10)
    assert quiet.selected.tolist() == loud.selected.tolist()


def test_selected_ids_fingerprint_and_compare(seed_story: Any) -> None:
    sel, d2t, t2d = seed_story
    assert selected_ids(d2t, t2d, V_SEED)[1] == "t2d"
    for stored, how in (
        (torch.from_numpy(sel), "absolute"),
        (absolute_to_offsets(d2t), "double"),
        (d2t, "offsets"),
    ):
        got, src = selected_ids(stored, None, V_SEED, v_SEED)
        assert got.tolist() == sel.tolist() and how in src
    fp = mapping_fingerprint(V_SEED, sel)
    assert fp.startswith("sha256:") and fp == mapping_fingerprint(V_SEED, sel[::-1].copy())
    assert fp != mapping_fingerprint(V_SEED + 1, sel)
    same = compare_mappings((d2t, t2d), (torch.from_numpy(sel), t2d))
    assert same.identical and same.jaccard == 1.0 and same.d2t_equal is False
    assert same.kinds == ("consistent_offsets", "absolute")
    other_sel = sel.copy()
    other_sel[-5:] = np.setdiff1d(np.arange(V_SEED), sel)[-5:]
    other_sel.sort()
    diff = compare_mappings((d2t, t2d), (_offsets(other_sel), _mask(other_sel, V_SEED)))
    assert not diff.identical
    assert diff.common == v_SEED - 5 and diff.only_a.shape == (5,) and diff.only_b.shape == (5,)
    assert diff.jaccard == pytest.approx((v_SEED - 5) / (v_SEED + 5))
    d = diff.to_dict()
    assert d["only_in_a"]["count"] == 5 and d["a"]["fingerprint"] != d["b"]["fingerprint"]


def test_suggest_fix_per_kind(seed_story: Any) -> None:
    """The story's repairs: each broken encoding gets its own fix, verified against t2d."""
    sel, d2t, t2d = seed_story
    cases = {
        "absolute": (torch.from_numpy(sel.copy()), "absolute_to_offsets"),
        "double_offset": (absolute_to_offsets(d2t), "undo_double_offset"),
        "identity_default": (torch.zeros(v_SEED, dtype=torch.int64), "d2t_from_t2d"),
        "missing": (None, "d2t_from_t2d"),
    }
    for kind, (stored, fn) in cases.items():
        fix = suggest_d2t_fix(stored, t2d, V_SEED, v_SEED)
        assert fix.kind == kind and fix.function == fn and fix.needed
        assert fix.d2t is not None and torch.equal(fix.d2t, d2t)
        assert fix.verified and fix.verified_kind == "consistent_offsets"
    ok = suggest_d2t_fix(d2t, t2d, V_SEED, v_SEED)
    assert not ok.needed and ok.function is None and ok.d2t is not None and torch.equal(ok.d2t, d2t)
    # no usable t2d and not a recognisable encoding: only the data can tell
    perm = sel.copy()
    perm[[3, 40]] = perm[[40, 3]]
    data = suggest_d2t_fix(_offsets(perm), None, V_SEED, v_SEED)
    assert data.d2t is None and data.function == "build_vocab_mapping" and not data.verified


def test_lm_head_rows_exact_and_heuristic(seed_story: Any) -> None:
    sel, d2t, t2d = seed_story
    g = torch.Generator().manual_seed(0)
    target_head = torch.randn(V_SEED, 16, generator=g)
    frozen = target_head[torch.from_numpy(sel)].clone()  # speculators >= 0.5: an exact copy
    ok = check_lm_head_rows(frozen, target_head, d2t, t2d)
    assert ok.method == "exact" and ok.best == "offsets" and ok.d2t_confirmed is True
    assert ok.hypotheses["offsets"]["exact_fraction"] == 1.0
    wrong = check_lm_head_rows(frozen, target_head, absolute_to_offsets(d2t), t2d)  # double offset stored
    assert wrong.method == "exact" and wrong.best == "double_offset" and wrong.d2t_confirmed is False
    assert wrong.hypotheses["offsets"]["first_mismatch"] == 1
    noisy = frozen + 0.01 * torch.randn(frozen.shape, generator=g)
    heur = check_lm_head_rows(noisy, target_head, torch.from_numpy(sel.copy()), t2d)  # absolute stored
    assert heur.method == "cosine (heuristic)" and heur.best == "absolute" and heur.d2t_confirmed is False
    assert heur.baseline_cosine is not None and heur.baseline_cosine < 0.5
    unrelated = check_lm_head_rows(torch.randn(v_SEED, 16, generator=g), target_head, d2t, t2d)
    assert unrelated.best is None and unrelated.d2t_confirmed is None
    with pytest.raises(UnusableInputError, match="hidden size"):
        check_lm_head_rows(frozen[:, :8], target_head, d2t, t2d)


@PROPS
@given(
    st.lists(st.integers(0, 11), min_size=1, max_size=80),
    st.integers(1, 12),
    st.integers(1, 9),
    st.sampled_from(["id", "first_seen", "first_row"]),
)
def test_prop_one_long_row_split_across_blocks(
    tokens: list[int], draft: int, block: int, tie_break: str
) -> None:
    """A flat 1-D corpus is one row, however many blocks it spans (each piece is not a new row)."""
    flat = np.asarray(tokens, dtype=np.int64)
    ref = {"id": reference_speculators, "first_seen": reference_specforge}.get(tie_break)
    expect = ref(tokens, draft) if ref else reference_specforge_rows([tokens], None, draft)
    for form in (flat, iter([flat]), lambda: iter([flat])):
        got = build_vocab_mapping(form, draft, 12, tie_break=tie_break, block_tokens=block)
        assert got.selected.tolist() == expect


def test_counts_without_tracking_cannot_break_ties() -> None:
    tc = count_token_ids(np.array([3, 5]), 10)
    with pytest.raises(BadArgumentsError, match="track='first_row'"):
        select_draft_vocab(tc, 1, "first_row")
    assert select_draft_vocab(tc, 2, "first_row").selected.tolist() == [3, 5]  # no tie to break
