"""Coverage of a draft vocabulary on a corpus, token classes, and the demo corpus."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
from paths import DEMO
from safetensors import safe_open

from eagle3_forensics.demo.corpus import write_demo_corpus
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.vocab.coverage import (
    TOKEN_CLASSES,
    corpus_counts,
    corpus_coverage,
    coverage_curve,
    coverage_report,
    token_table,
)
from eagle3_forensics.vocab.inputs import load_mapping, load_token_ids, read_safetensors_metadata
from eagle3_forensics.vocab.mapping import build_vocab_mapping, select_draft_vocab

pytestmark = pytest.mark.filterwarnings("ignore::eagle3_forensics.vocab.mapping.VocabPaddingWarning")

TARGET = DEMO / "target"


@pytest.fixture(scope="module")
def demo_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    (root / "target").symlink_to(TARGET, target_is_directory=True)
    write_demo_corpus(root)
    return root


# -- token classes -----------------------------------------------------------------------------------


def test_token_table_byte_level_demo() -> None:
    t = token_table(TARGET, 520)
    assert len(t) == 520 and t.byte_level
    assert [t.class_of(i) for i in (0, 1, 2)] == ["special/added"] * 3
    assert t.class_of(519) == "no token" and t.token(519) is None
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TARGET / "tokenizer.json"))
    e_acute = tok.encode("é", add_special_tokens=False).ids  # two byte-level pieces, neither text alone
    assert len(e_acute) == 2 and all(t.class_of(i) == "byte-fallback" for i in e_acute)
    assert t.text(e_acute[0]) == "\\xc3"
    the = tok.token_to_id("Ġthe")
    assert the is not None
    assert t.class_of(the) == "ordinary" and t.text(the) == " the" and t.token(the) == "Ġthe"
    counts = np.bincount(t.classes, minlength=4)
    assert counts[0] == 8 and counts[1] == 128  # 3 specials + 5 chat tokens; every non-ASCII byte


def test_token_table_sentencepiece_style(tmp_path: Path) -> None:
    spec = {
        "added_tokens": [{"id": 0, "content": "<unk>"}, {"id": 1, "content": "<s>"}],
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace"}, {"type": "ByteFallback"}]},
        "model": {
            "type": "Unigram",
            "vocab": [
                ["<unk>", 0],
                ["<s>", 0],
                ["<0x0A>", 0],
                ["<0xE2>", 0],
                ["▁hello", -1.0],
                ["ing", -2.0],
            ],
        },
    }
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
    t = token_table(tmp_path)
    assert [t.class_of(i) for i in range(6)] == [
        "special/added",
        "special/added",
        "byte-fallback",
        "byte-fallback",
        "ordinary",
        "ordinary",
    ]
    assert t.text(2) == "\\x0a" and t.text(4) == " hello"
    with pytest.raises(UnusableInputError, match=r"tokenizer\.json not found"):
        token_table(tmp_path / "absent")


# -- coverage arithmetic -------------------------------------------------------------------------------


def test_coverage_report_numbers() -> None:
    counts = np.array([50, 0, 30, 10, 10, 0, 5, 0], dtype=np.int64)  # 105 counted tokens
    sel = np.array([0, 1, 3, 5])
    r = coverage_report(counts, sel, top_n=3, label="x")
    assert (r.total, r.covered, r.draft_vocab_size, r.target_vocab_size) == (105, 60, 4, 8)
    assert r.coverage == pytest.approx(60 / 105)
    assert r.oracle == pytest.approx((50 + 30 + 10 + 10) / 105)  # best 4 ids
    assert r.distinct == 5 and r.distinct_covered == 2 and r.selected_unseen == 2
    assert [u["id"] for u in r.top_uncovered] == [2, 4, 6]  # by count, ties by id
    assert r.top_uncovered[0]["share"] == pytest.approx(30 / 105)
    assert r.by_class == []  # no token table
    mask = np.zeros(8, dtype=bool)
    mask[sel] = True
    for form in (mask, torch.from_numpy(mask), torch.from_numpy(sel)):
        assert coverage_report(counts, form).covered == 60
    d = r.to_dict()
    assert (
        d["coverage"] == round(60 / 105, 6)
        and d["curve"]["4"] == round(r.oracle, 6)
        and d["curve"]["8"] == 1.0
    )
    with pytest.raises(UnusableInputError, match="not the same vocabulary"):
        coverage_report(counts, np.zeros(9, dtype=bool))
    with pytest.raises(UnusableInputError, match="no counted tokens"):
        coverage_report(np.zeros(8, dtype=np.int64), sel)


def test_coverage_curve_is_the_best_selection() -> None:
    rng = np.random.default_rng(1)
    counts = rng.zipf(1.5, size=300) % 40
    curve = coverage_curve(counts)
    assert np.all(np.diff(curve) >= 0) and curve[-1] == pytest.approx(1.0)
    for k in (1, 5, 17, 60):
        best = build_vocab_mapping(np.repeat(np.arange(300), counts), k, 300)  # the trainers' top-k
        assert coverage_report(counts, best).coverage == pytest.approx(curve[k - 1])


def test_coverage_by_class_sums(demo_copy: Path) -> None:
    m = load_mapping(DEMO / "drafters" / "healthy")
    counts = corpus_counts(ids=demo_copy / "corpus_ids.safetensors", target_vocab_size=512)
    tokens = token_table(TARGET, 512)
    r = coverage_report(counts, m, tokens, top_n=10)
    assert [c["class"] for c in r.by_class] == list(TOKEN_CLASSES)
    assert (
        sum(c["tokens"] for c in r.by_class) == r.total and sum(c["covered"] for c in r.by_class) == r.covered
    )
    classes = {c["class"]: c for c in r.by_class}
    assert classes["special/added"]["tokens"] > 0  # the completions' </s>
    assert classes["byte-fallback"]["tokens"] > 0  # café, naïve, €, →
    assert classes["no token"]["tokens"] == 0
    assert all(u["class"] in TOKEN_CLASSES and u["text"] for u in r.top_uncovered)
    assert r.oracle >= r.coverage
    rebuilt = select_draft_vocab(counts, m.draft_vocab_size or 0)
    assert coverage_report(counts, rebuilt).coverage == pytest.approx(r.oracle)


# -- the demo corpus ------------------------------------------------------------------------------------


def test_demo_corpus_is_deterministic_small_and_consistent(tmp_path: Path, demo_copy: Path) -> None:
    again = tmp_path / "again"
    again.mkdir()
    (again / "target").symlink_to(TARGET, target_is_directory=True)
    paths = write_demo_corpus(again)
    for name in ("corpus.jsonl", "corpus_ids.safetensors"):
        assert (again / name).read_bytes() == (demo_copy / name).read_bytes()
        assert (again / name).stat().st_size < 500_000
    records = [json.loads(line) for line in paths["corpus"].read_text().splitlines()]
    assert 200 <= len(records) <= 500 and {"text"} <= set().union(*records)
    ids, mask = load_token_ids(paths["ids"])
    assert ids.ndim == 2 and mask is not None and ids.shape == mask.shape and ids.shape[0] == len(records)
    with safe_open(str(paths["ids"]), framework="pt") as fh:
        meta = read_safetensors_metadata(fh.metadata())
    assert meta["records"] == str(len(records)) and len(meta["tokenizer_sha256"]) == 64
    # the ids file is exactly the tokenised JSONL
    a = corpus_counts(ids=paths["ids"], target_vocab_size=512)
    b = corpus_counts(corpus=paths["corpus"], tokenizer=TARGET, target_vocab_size=512)
    assert np.array_equal(a.counts, b.counts) and a.counted == int(mask.sum())


def test_shipped_demo_corpus_matches_the_demo_tokenizer() -> None:
    """data/demo/corpus_ids.safetensors must be regenerated whenever the demo target is (make data)."""
    ids_file = DEMO / "corpus_ids.safetensors"
    if not ids_file.is_file():
        pytest.skip("demo corpus not generated")
    import hashlib

    with safe_open(str(ids_file), framework="pt") as fh:
        meta = read_safetensors_metadata(fh.metadata())
    assert meta["tokenizer_sha256"] == hashlib.sha256((TARGET / "tokenizer.json").read_bytes()).hexdigest(), (
        "stale demo corpus: run python -m eagle3_forensics.demo.corpus data/demo"
    )


def test_corpus_coverage_one_call(demo_copy: Path) -> None:
    r = corpus_coverage(
        DEMO / "drafters" / "d2t_double_offset",
        ids=demo_copy / "corpus_ids.safetensors",
        target=TARGET,
        top_n=4,
    )
    assert r.label == "d2t_double_offset" and len(r.top_uncovered) == 4 and r.by_class
    with pytest.raises(UnusableInputError, match="no corpus"):
        corpus_coverage(DEMO / "drafters" / "healthy", target=TARGET)
    with pytest.raises(UnusableInputError, match="missing tokenizer"):
        corpus_counts(corpus=demo_copy / "corpus.jsonl", target_vocab_size=512)
