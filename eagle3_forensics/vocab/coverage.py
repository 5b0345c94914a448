"""Draft-vocabulary coverage: the hard ceiling on what a drafter can ever propose.

A drafter only proposes target ids in its draft vocabulary, so the share of a corpus's tokens
(counted as the trainers count them: ``loss_mask == 1``) whose id is selected bounds its
acceptance from above, whatever the weights. This module measures that share for a map and a
corpus tokenised by the *target* tokenizer, breaks it down by token class, lists the most
frequent uncovered tokens with their strings, and computes the coverage curve: the best share
any draft vocabulary of each size could reach on this corpus (its top ids by frequency).

Token classes (:data:`TOKEN_CLASSES`):

* ``special/added`` - the tokenizer's added tokens (``<s>``, chat-template markers, ...);
* ``byte-fallback`` - single raw bytes that are not text on their own: SentencePiece ``<0xNN>``
  pieces, and for byte-level BPE the tokens whose bytes are not valid UTF-8 (pieces of a
  multi-byte character);
* ``ordinary`` - everything else;
* ``no token`` - ids of the model's vocabulary beyond the tokenizer (padding rows).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.vocab.byte_level import byte_decoder
from eagle3_forensics.vocab.inputs.corpus import tokenize_corpus
from eagle3_forensics.vocab.inputs.maps import load_mapping
from eagle3_forensics.vocab.inputs.tokens import iter_token_chunks, token_file_size
from eagle3_forensics.vocab.mapping.build import VocabMapping
from eagle3_forensics.vocab.mapping.counts import TokenCounts, count_token_ids

TOKEN_CLASSES: tuple[str, ...] = ("special/added", "byte-fallback", "ordinary", "no token")
SPECIAL, BYTE, ORDINARY, NO_TOKEN = range(4)
_SP_BYTE = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")


def _has_type(node: Any, name: str) -> bool:
    if isinstance(node, dict):
        return node.get("type") == name or any(_has_type(v, name) for v in node.values())
    if isinstance(node, list):
        return any(_has_type(v, name) for v in node)
    return False


@dataclass
class TokenTable:
    """Every target id's token string, readable text and class."""

    tokens: list[str | None]  # raw vocabulary string (None: beyond the tokenizer)
    texts: list[str]  # what the id stands for: decoded text, "\\xNN" for a lone byte
    classes: np.ndarray  # int8 index into TOKEN_CLASSES
    byte_level: bool
    path: str = ""

    def __len__(self) -> int:
        return len(self.tokens)

    def class_of(self, i: int) -> str:
        return TOKEN_CLASSES[int(self.classes[i])] if 0 <= i < len(self.tokens) else TOKEN_CLASSES[NO_TOKEN]

    def text(self, i: int) -> str:
        return self.texts[i] if 0 <= i < len(self.texts) else ""

    def token(self, i: int) -> str | None:
        return self.tokens[i] if 0 <= i < len(self.tokens) else None

    def classes_for(self, size: int) -> np.ndarray:
        """Classes of ids ``0..size-1`` (ids beyond the tokenizer are ``no token``)."""
        if len(self.tokens) >= size:
            return self.classes[:size]
        return np.concatenate([self.classes, np.full(size - len(self.tokens), NO_TOKEN, dtype=np.int8)])


def token_table(tokenizer_dir: str | Path, vocab_size: int | None = None) -> TokenTable:
    """The :class:`TokenTable` of a ``tokenizer.json`` (padded with ``no token`` up to ``vocab_size``)."""
    d = Path(tokenizer_dir)
    f = d if d.is_file() else d / "tokenizer.json"
    if not f.is_file():
        raise UnusableInputError(f"no tokenizer: {f} not found", path=str(f))
    try:
        spec = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UnusableInputError(
            f"unreadable tokenizer {f}: {' '.join(str(exc).split())[:200]}", path=str(f)
        ) from None
    model = spec.get("model") or {}
    vocab = model.get("vocab")
    pairs: list[tuple[str, int]] = []
    if isinstance(vocab, dict):  # BPE / WordPiece / WordLevel
        pairs = [(str(k), int(v)) for k, v in vocab.items()]
    elif isinstance(vocab, list):  # Unigram: [[piece, score], ...]
        pairs = [(str(item[0]), i) for i, item in enumerate(vocab) if isinstance(item, list) and item]
    added = {
        int(t["id"]): str(t["content"])
        for t in spec.get("added_tokens") or []
        if isinstance(t, dict) and "id" in t and "content" in t
    }
    size = max([i for _, i in pairs] + list(added) + [-1]) + 1
    if vocab_size is not None:
        size = max(size, int(vocab_size))
    tokens: list[str | None] = [None] * size
    for s, i in pairs:
        if 0 <= i < size:
            tokens[i] = s
    for i, s in added.items():
        if 0 <= i < size:
            tokens[i] = s
    byte_level = _has_type(spec.get("decoder"), "ByteLevel") or _has_type(
        spec.get("pre_tokenizer"), "ByteLevel"
    )
    metaspace = (
        _has_type(spec.get("decoder"), "Metaspace")
        or _has_type(spec.get("pre_tokenizer"), "Metaspace")
        or (_has_type(spec.get("decoder"), "Replace"))
    )
    dec = byte_decoder()
    classes = np.full(size, ORDINARY, dtype=np.int8)
    texts: list[str] = [""] * size
    for i, tok in enumerate(tokens):
        if tok is None:
            classes[i] = NO_TOKEN
        elif i in added:
            classes[i] = SPECIAL
            texts[i] = tok
        elif _SP_BYTE.match(tok):
            classes[i] = BYTE
            texts[i] = "\\x" + tok[3:5].lower()
        elif byte_level and all(ch in dec for ch in tok):
            raw = bytes(dec[ch] for ch in tok)
            try:
                texts[i] = raw.decode("utf-8")
            except UnicodeDecodeError:
                classes[i] = BYTE
                texts[i] = raw.decode("utf-8", errors="backslashreplace")
        else:
            texts[i] = tok.replace("▁", " ") if metaspace else tok
    return TokenTable(tokens, texts, classes, byte_level, str(f))


# -- counting a corpus -------------------------------------------------------------------------------


def corpus_counts(
    *,
    ids: str | Path | None = None,
    corpus: str | Path | None = None,
    tokenizer: str | Path | None = None,
    target_vocab_size: int,
    chat_template: str | None = None,
    progress: bool | None = None,
) -> TokenCounts:
    """Counted tokens per target id from a token-id file (``ids``) or a JSONL ``corpus`` tokenised
    with the target's ``tokenizer`` (see :func:`eagle3_forensics.vocab.inputs.tokenize_corpus`).
    ``ids`` wins when both are given."""
    try:
        if ids is not None:
            return count_token_ids(
                iter_token_chunks(ids),
                target_vocab_size,
                progress=progress,
                total_tokens=token_file_size(ids),
            )
        if corpus is not None:
            if tokenizer is None:
                raise UnusableInputError(
                    "a JSONL corpus needs the target's tokenizer directory (missing tokenizer)"
                )
            tc = tokenize_corpus(corpus, tokenizer, chat_template=chat_template)
            return count_token_ids(tc.pairs(), target_vocab_size, progress=progress, total_tokens=tc.tokens)
    except (ValueError, UnusableInputError) as exc:  # numpy's and ours: one line naming the input
        raise UnusableInputError(f"cannot count {ids if ids is not None else corpus}: {exc}") from None
    raise UnusableInputError("no corpus: give a token-id file or a JSONL corpus with a tokenizer")


# -- coverage -------------------------------------------------------------------------------------------


def selection_mask(selection: Any, size: int) -> np.ndarray:
    """A bool ``[V]`` mask from a map (anything with ``t2d_mask`` or a ``VocabMapping``), a mask or ids."""
    if hasattr(selection, "t2d_mask"):
        mask = np.asarray(selection.t2d_mask, dtype=bool)
    elif isinstance(selection, VocabMapping):
        mask = selection.t2d.numpy().astype(bool)
    else:
        arr = selection.numpy() if isinstance(selection, torch.Tensor) else np.asarray(selection)
        if arr.dtype == np.bool_:
            mask = arr
        else:
            mask = np.zeros(size, dtype=bool)
            ids = arr.astype(np.int64).reshape(-1)
            if ids.size and (ids.min() < 0 or ids.max() >= size):
                raise UnusableInputError(f"selected ids must lie in [0, {size})")
            mask[ids] = True
    if mask.shape[0] != size:
        raise UnusableInputError(
            f"the map covers {mask.shape[0]} target ids, the counts {size}: not the same vocabulary"
        )
    return mask


def coverage_curve(counts: TokenCounts | np.ndarray) -> np.ndarray:
    """``curve[k-1]``: the largest share of counted tokens any ``k`` target ids cover (``k = 1..V``)."""
    c = counts.counts if isinstance(counts, TokenCounts) else np.asarray(counts)
    total = c.sum()
    if total == 0:
        return np.zeros(c.shape[0])
    return np.cumsum(np.sort(c)[::-1]) / total


@dataclass
class CoverageReport:
    """How much of a corpus a draft vocabulary can cover, and what it misses."""

    label: str
    target_vocab_size: int
    draft_vocab_size: int
    total: int  # counted tokens
    covered: int
    distinct: int  # distinct ids counted
    distinct_covered: int
    selected_unseen: int  # draft-vocabulary entries never counted in this corpus
    oracle: float  # best share any draft vocabulary of this size covers on this corpus
    by_class: list[dict[str, Any]]
    top_uncovered: list[dict[str, Any]]
    curve: np.ndarray = field(repr=False)  # coverage_curve(counts)

    @property
    def coverage(self) -> float:
        return self.covered / self.total if self.total else 0.0

    @property
    def uncovered(self) -> int:
        return self.total - self.covered

    def curve_points(self) -> dict[int, float]:
        """The curve at powers of two, at the draft size and at ``V`` (for JSON and tables)."""
        big_v = int(self.curve.shape[0])
        sizes = {1 << k for k in range(big_v.bit_length())} | {self.draft_vocab_size, big_v}
        return {s: round(float(self.curve[s - 1]), 6) for s in sorted(sizes) if 1 <= s <= big_v}

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "target_vocab_size": self.target_vocab_size,
            "draft_vocab_size": self.draft_vocab_size,
            "counted_tokens": self.total,
            "covered_tokens": self.covered,
            "coverage": round(self.coverage, 6),
            "best_possible_coverage": round(self.oracle, 6),
            "distinct_ids": self.distinct,
            "distinct_ids_covered": self.distinct_covered,
            "selected_ids_unseen": self.selected_unseen,
            "by_class": self.by_class,
            "top_uncovered": self.top_uncovered,
            "curve": {str(k): v for k, v in self.curve_points().items()},
        }


def coverage_report(
    counts: TokenCounts | np.ndarray,
    selection: Any,
    tokens: TokenTable | None = None,
    *,
    top_n: int = 20,
    label: str = "",
) -> CoverageReport:
    """Coverage of ``selection`` (a map, a ``[V]`` mask or ids) on the counted tokens ``counts``."""
    c = counts.counts if isinstance(counts, TokenCounts) else np.asarray(counts, dtype=np.int64)
    big_v = int(c.shape[0])
    mask = selection_mask(selection, big_v)
    v = int(mask.sum())
    total = int(c.sum())
    if total == 0:
        raise UnusableInputError("no counted tokens (empty corpus or an all-zero loss mask)")
    covered = int(c[mask].sum())
    curve = coverage_curve(c)
    by_class: list[dict[str, Any]] = []
    if tokens is not None:
        classes = tokens.classes_for(big_v)
        for k, name in enumerate(TOKEN_CLASSES):
            in_k = classes == k
            n = int(c[in_k].sum())
            cov = int(c[in_k & mask].sum())
            by_class.append(
                {
                    "class": name,
                    "tokens": n,
                    "covered": cov,
                    "coverage": round(cov / n, 6) if n else None,
                    "share_of_corpus": round(n / total, 6),
                    "distinct_ids": int(np.count_nonzero(c[in_k])),
                    "distinct_uncovered": int(np.count_nonzero(c[in_k & ~mask])),
                    "ids_in_draft_vocab": int((in_k & mask).sum()),
                }
            )
    miss = np.flatnonzero((c > 0) & ~mask)
    order = miss[np.lexsort((miss, -c[miss]))][:top_n]
    top = []
    for i in order.tolist():
        row: dict[str, Any] = {"id": i, "count": int(c[i]), "share": round(float(c[i]) / total, 6)}
        if tokens is not None:
            row.update({"token": tokens.token(i), "text": tokens.text(i), "class": tokens.class_of(i)})
        top.append(row)
    return CoverageReport(
        label,
        big_v,
        v,
        total,
        covered,
        int(np.count_nonzero(c)),
        int(np.count_nonzero(c[mask])),
        int(np.count_nonzero(mask & (c == 0))),
        float(curve[v - 1]) if v else 0.0,
        by_class,
        top,
        curve,
    )


def corpus_coverage(
    mapping: str | Path,
    *,
    ids: str | Path | None = None,
    corpus: str | Path | None = None,
    tokenizer: str | Path | None = None,
    target: str | Path | None = None,
    top_n: int = 20,
    chat_template: str | None = None,
) -> CoverageReport:
    """One call from files: load the map (checkpoint or map file), count the corpus, report."""
    m = load_mapping(mapping, target)
    big_v = m.target_vocab_size
    if big_v is None:
        raise UnusableInputError(f"cannot tell the target vocabulary size of {mapping} (pass --target)")
    tok_dir = tokenizer if tokenizer is not None else target
    counts = corpus_counts(
        ids=ids, corpus=corpus, tokenizer=tok_dir, target_vocab_size=big_v, chat_template=chat_template
    )
    tokens = token_table(tok_dir, big_v) if tok_dir is not None else None
    return coverage_report(counts, m, tokens, top_n=top_n, label=m.label)
