"""The trainers' map from token counts: :func:`build_vocab_mapping` (= :func:`count_token_ids` +
:func:`select_draft_vocab`), with each trainer's tie-break and its padding of a short vocabulary.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.vocab.mapping.classify import import_torch
from eagle3_forensics.vocab.mapping.compare import mapping_fingerprint
from eagle3_forensics.vocab.mapping.counts import BLOCK_TOKENS, TIE_BREAKS, TokenCounts, count_token_ids


class VocabPaddingWarning(UserWarning):
    """Fewer distinct ids were counted than the draft vocabulary holds; the map was padded."""


def padding_note(distinct: int, draft_vocab_size: int, padded: int) -> str:
    """The one line that says a map was padded (the :class:`VocabPaddingWarning` text)."""
    return (
        f"only {distinct} distinct token ids were counted, fewer than draft_vocab_size "
        f"{draft_vocab_size}: padded with the {padded} smallest unused ids (as the trainers do)"
    )


@dataclass
class VocabMapping:
    d2t: torch.Tensor  # int64 [v], offsets
    t2d: torch.Tensor  # bool [V]
    counts: np.ndarray  # int64 [V], counted occurrences
    padded: int  # ids added because fewer than v distinct ids were seen
    tie_break: str = "id"
    tokens: int = 0  # ids read, masked or not

    @property
    def selected(self) -> np.ndarray:
        return np.flatnonzero(self.t2d.numpy())

    @property
    def target_vocab_size(self) -> int:
        return int(self.t2d.shape[0])

    @property
    def draft_vocab_size(self) -> int:
        return int(self.d2t.shape[0])

    @property
    def counted(self) -> int:
        return int(self.counts.sum())

    @property
    def coverage(self) -> float:
        """Share of the counted tokens whose id is in the draft vocabulary."""
        total = self.counted
        return float(self.counts[self.selected].sum() / total) if total else 0.0

    @property
    def fingerprint(self) -> str:
        return mapping_fingerprint(self.target_vocab_size, self.selected)

    @property
    def padding_note(self) -> str:
        """Why the map holds ids that were never counted (``""`` when it holds none)."""
        if not self.padded:
            return ""
        return padding_note(int(np.count_nonzero(self.counts)), self.draft_vocab_size, self.padded)

    def summary(self) -> dict[str, Any]:
        return {
            "target_vocab_size": self.target_vocab_size,
            "draft_vocab_size": self.draft_vocab_size,
            "tie_break": self.tie_break,
            "tokens": self.tokens,
            "counted_tokens": self.counted,
            "distinct_ids": int(np.count_nonzero(self.counts)),
            "padded": self.padded,
            "coverage": round(self.coverage, 6),
            "fingerprint": self.fingerprint,
        }


def select_draft_vocab(
    counts: TokenCounts | np.ndarray,
    draft_vocab_size: int,
    tie_break: str = "id",
    *,
    warn: bool = True,
) -> VocabMapping:
    """Top ``draft_vocab_size`` ids by count (ties per ``tie_break``), padded, sorted, as offsets."""
    if tie_break not in TIE_BREAKS:
        raise BadArgumentsError(f"tie_break must be one of {', '.join(repr(k) for k in TIE_BREAKS)}")
    tc = counts if isinstance(counts, TokenCounts) else TokenCounts(np.asarray(counts, dtype=np.int64), 0, 0)
    c = tc.counts
    big_v = int(c.shape[0])
    if not 0 < draft_vocab_size <= big_v:
        raise BadArgumentsError(
            f"draft_vocab_size {draft_vocab_size} must be in 1..{big_v} (the target vocabulary size)"
        )
    if c.sum() == 0:
        raise UnusableInputError("no counted tokens (empty corpus or an all-zero loss mask)")
    seen = np.flatnonzero(c)
    if seen.shape[0] <= draft_vocab_size:
        chosen = seen
    else:  # everything above the v-th largest count, then the tied ids in tie-break order
        cs = c[seen]
        threshold = np.partition(cs, seen.shape[0] - draft_vocab_size)[seen.shape[0] - draft_vocab_size]
        above = seen[cs > threshold]
        tied = seen[cs == threshold]  # ascending ids
        need = draft_vocab_size - above.shape[0]
        if tie_break != "id" and 0 < need < tied.shape[0]:
            tied = tc.tie_order(tie_break, tied, need)
        chosen = np.concatenate([above, tied[:need]])
    padded = draft_vocab_size - chosen.shape[0]
    if padded:
        used = np.zeros(big_v, dtype=bool)
        used[chosen] = True
        chosen = np.concatenate([chosen, np.flatnonzero(~used)[:padded]])
        if warn:
            warnings.warn(
                padding_note(int(seen.shape[0]), draft_vocab_size, padded),
                VocabPaddingWarning,
                stacklevel=3,
            )
    sel = np.sort(chosen)
    t2d = np.zeros(big_v, dtype=bool)
    t2d[sel] = True
    d2t = sel - np.arange(draft_vocab_size, dtype=np.int64)
    torch = import_torch()
    return VocabMapping(torch.from_numpy(d2t), torch.from_numpy(t2d), c, int(padded), tie_break, tc.tokens)


def build_vocab_mapping(
    token_ids: Any | Iterable[Any],
    draft_vocab_size: int,
    target_vocab_size: int,
    loss_mask: Any | Iterable[Any] | None = None,
    tie_break: str = "id",
    *,
    progress: bool | None = None,
    block_tokens: int = BLOCK_TOKENS,
    total_tokens: int | None = None,
    warn: bool = True,
) -> VocabMapping:
    """Build ``d2t``/``t2d`` from token counts exactly the way the trainers do.

    Counts ids where ``loss_mask == 1`` (all ids without a mask) in one streaming pass (see
    :func:`count_token_ids` for the accepted input forms); orders by ``(-count, tie)`` with the tie
    broken per ``tie_break`` (:data:`TIE_BREAKS`: ``"id"`` speculators, ``"first_seen"`` EAGLE,
    ``"first_row"`` SpecForge); pads with the smallest unused ids when fewer than
    ``draft_vocab_size`` distinct ids were seen (with a :class:`VocabPaddingWarning` unless ``warn``
    is false, e.g. where a table shows ``padded``); sorts the
    selection ascending; encodes offsets ``d2t[i] = sel[i] - i``.
    """
    if tie_break not in TIE_BREAKS:
        raise BadArgumentsError(f"tie_break must be one of {', '.join(repr(k) for k in TIE_BREAKS)}")
    if not isinstance(target_vocab_size, (int, np.integer)) or target_vocab_size <= 0:
        raise BadArgumentsError(f"target_vocab_size must be a positive integer, got {target_vocab_size!r}")
    if not isinstance(draft_vocab_size, (int, np.integer)) or not 0 < draft_vocab_size <= target_vocab_size:
        raise BadArgumentsError(
            f"draft_vocab_size {draft_vocab_size} must be in 1..{target_vocab_size} "
            "(the target vocabulary size)"
        )
    tc = count_token_ids(
        token_ids,
        target_vocab_size,
        loss_mask,
        track=None if tie_break == "id" else tie_break,
        progress=progress,
        block_tokens=block_tokens,
        total_tokens=total_tokens,
    )
    return select_draft_vocab(tc, int(draft_vocab_size), tie_break, warn=warn)
