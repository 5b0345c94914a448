"""Streaming token counts: :func:`count_token_ids`, one ``bincount`` pass over ids of any size,
with the bookkeeping the trainers' tie-breaks need (:data:`TIE_BREAKS`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    pass
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.vocab.mapping.classify import is_tensor

# -- counting token ids ----------------------------------------------------------------------------
#
# One streaming pass: the ids are read block by block (about ``block_tokens`` at a time, whole rows
# per block), each block is counted with one ``np.bincount`` and added into a ``[V]`` total. With a
# loss mask the block is counted over the combined key ``2 * id + mask`` (odd bins are the counted
# ids), which costs one vectorised shift-and-add instead of a boolean-mask gather. The range check
# rides on the same block while it is in cache. Tie-break bookkeeping (first position, first row)
# only touches ids seen for the first time in a block, so it stays near the cost of counting.

TIE_BREAKS: dict[str, str] = {
    "id": "ties by smallest target id (speculators: sort by (-count, id))",
    "first_seen": "ties by first occurrence in the token stream (EAGLE: Counter over tokens, most_common)",
    "first_row": "ties by first row containing the id, then by id (SpecForge: per-row unique + Counter.update)",
}
#: tokens per counting block: large enough to amortise the ``O(V)`` work per block, small enough for cache
BLOCK_TOKENS = 1 << 20
#: inputs at least this long show a progress bar when ``progress`` is left at ``None``
PROGRESS_MIN_TOKENS = 1 << 27
_UNSEEN = np.iinfo(np.int64).max


@dataclass
class TokenCounts:
    """Counted occurrences per target id, plus what the trainers' tie-breaks need."""

    counts: np.ndarray  # int64 [V]
    tokens: int  # ids read (masked or not)
    rows: int  # rows read (a 1-D array is one row)
    first_pos: np.ndarray | None = None  # int64 [V]: first counted position in the stream (unseen: int64 max)
    first_row: np.ndarray | None = None  # int64 [V]: first row with a counted occurrence
    # Deferred tie-break bookkeeping (re-readable inputs): the block where each id is first counted;
    # the exact order inside one block is recovered by re-reading that block only (``rescan``).
    track: str | None = None
    first_group: np.ndarray | None = field(default=None, repr=False)  # int64 [V] (unseen: int64 max)
    single_row_groups: frozenset[int] = frozenset()  # groups whose ids all start in the same row
    rescan: Callable[[int, np.ndarray], np.ndarray] | None = field(default=None, repr=False)

    def tie_order(self, tie_break: str, ids: np.ndarray, need: int) -> np.ndarray:
        """The first ``need`` of ``ids`` (ascending, all tied on count) in ``tie_break`` order."""
        exact = self.first_pos if tie_break == "first_seen" else self.first_row
        if exact is not None:
            return ids[np.argsort(exact[ids], kind="stable")][:need]  # stable: then by id
        if self.first_group is None or self.track != tie_break or self.rescan is None:
            raise BadArgumentsError(f"tie_break {tie_break!r} needs counts made with track={tie_break!r}")
        groups = self.first_group[ids]
        order = np.argsort(groups, kind="stable")
        ids, groups = ids[order], groups[order]
        boundary = int(groups[need - 1])
        before = ids[groups < boundary]
        at = ids[groups == boundary]  # ascending ids
        if tie_break == "first_seen" or boundary not in self.single_row_groups:
            at = at[np.argsort(self.rescan(boundary, at), kind="stable")]
        return np.concatenate([before, at[: need - before.shape[0]]])

    @property
    def counted(self) -> int:
        return int(self.counts.sum())

    @property
    def distinct(self) -> int:
        return int(np.count_nonzero(self.counts))


def _as_array(x: Any, what: str) -> np.ndarray:
    if is_tensor(x):
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        return np.asarray(x.numpy())
    arr = np.asarray(x)
    if arr.dtype == object:
        raise UnusableInputError(f"{what} is ragged or not numeric; pass one array per row instead")
    return arr


def _is_array_like(x: Any) -> bool:
    return isinstance(x, np.ndarray) or is_tensor(x)


def _is_pair(x: Any) -> bool:
    return (
        isinstance(x, tuple)
        and len(x) == 2
        and not isinstance(x[0], (int, np.integer))
        and (x[1] is None or not isinstance(x[1], (int, np.integer, bool, np.bool_)))
    )


def _chunk_pairs(token_ids: Any, loss_mask: Any) -> Iterator[tuple[Any, Any]]:
    """Normalise the accepted input forms to a stream of ``(ids, mask | None)`` chunks.

    A single array (``np.ndarray``, ``torch.Tensor`` or a list of ints / of equal-length lists) is
    one chunk; a tuple, a generator or a list of arrays is a sequence of chunks, with ``loss_mask``
    the same kind of sequence, or its items may be ``(ids, mask)`` pairs.
    """
    single = _is_array_like(token_ids) or (
        isinstance(token_ids, list)
        and not (token_ids and (_is_array_like(token_ids[0]) or _is_pair(token_ids[0])))
    )
    if single:
        if loss_mask is not None and not (_is_array_like(loss_mask) or isinstance(loss_mask, list)):
            raise UnusableInputError("loss_mask chunks do not match token_id chunks")
        yield token_ids, loss_mask
        return
    if isinstance(token_ids, (str, bytes)):
        raise BadArgumentsError(
            "token_ids must be an array or a sequence of arrays, not a string "
            "(use eagle3_forensics.vocab.inputs for files)"
        )
    if loss_mask is None:
        for item in token_ids:
            yield (item if _is_pair(item) else (item, None))
        return
    if _is_array_like(loss_mask):
        raise UnusableInputError("loss_mask chunks do not match token_id chunks")
    sentinel = object()
    for ids, mask in zip_longest(token_ids, loss_mask, fillvalue=sentinel):
        if ids is sentinel or mask is sentinel:
            raise UnusableInputError("loss_mask chunks do not match token_id chunks")
        yield ids, mask


@dataclass
class _Block:
    ids: np.ndarray  # 1-D integer
    mask: np.ndarray | None  # 1-D bool
    row_starts: np.ndarray  # block-relative row starts, always beginning with 0
    first_row: int  # global index of the row holding position 0 (it may have begun in an earlier block)
    row_len: int = 0  # length of every row in the block when they are all equal (0: ragged)
    part: int = 0  # piece index when the block is a piece of one over-long row (0 otherwise)

    def rows_at(self, pos: np.ndarray) -> np.ndarray | int:
        """Global row index of block positions ``pos``."""
        if self.row_starts.shape[0] == 1:
            return self.first_row
        if self.row_len:
            return self.first_row + pos // self.row_len
        return self.first_row + np.searchsorted(self.row_starts, pos, side="right") - 1


def _rows_of(ids: np.ndarray, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """View a chunk as ``[rows, length]`` (a 1-D chunk is one row); no data is copied."""
    if ids.size and not (np.issubdtype(ids.dtype, np.integer) and ids.dtype != np.bool_):
        raise UnusableInputError(f"token ids must be integers, got dtype {ids.dtype}")
    if ids.ndim == 0:
        raise UnusableInputError("token ids must be 1-D or 2-D, got a scalar")
    if mask is not None:
        if mask.size != ids.size or (mask.ndim > 1 and ids.ndim > 1 and mask.shape != ids.shape):
            raise UnusableInputError(
                f"loss_mask has shape {list(mask.shape)} ({mask.size} entries), "
                f"token ids have shape {list(ids.shape)} ({ids.size} entries)"
            )
        if mask.dtype != np.bool_ and not np.issubdtype(mask.dtype, np.number):
            raise UnusableInputError(f"loss_mask must be boolean or numeric, got dtype {mask.dtype}")
    length = max(int(ids.shape[-1]), 1)
    rows = ids.reshape(-1, length) if ids.size else ids.reshape(0, length)
    return rows, (None if mask is None else mask.reshape(rows.shape))


def _flat(part: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(part).reshape(-1)


def _flat_mask(part: np.ndarray | None) -> np.ndarray | None:
    if part is None:
        return None
    flat = _flat(part)
    return flat if flat.dtype == np.bool_ else flat == 1  # the trainers count loss_mask == 1


def _iter_blocks(pairs: Iterable[tuple[Any, Any]], block_tokens: int) -> Iterator[_Block]:
    """Blocks of about ``block_tokens`` ids made of whole rows (a single over-long row is split).

    Only one block is materialised at a time, so memory-mapped inputs stream from disk.
    """
    pend_ids: list[np.ndarray] = []
    pend_mask: list[np.ndarray | None] = []
    pend_starts: list[int] = []
    pend = {"n": 0, "row": 0, "len": 0}
    row = 0  # global index of the next row to start

    def flush() -> _Block:
        ids = pend_ids[0] if len(pend_ids) == 1 else np.concatenate(pend_ids)
        mask = None
        if any(m is not None for m in pend_mask):
            masks = [
                np.ones(a.shape[0], dtype=bool) if m is None else m
                for a, m in zip(pend_ids, pend_mask, strict=True)
            ]
            mask = masks[0] if len(masks) == 1 else np.concatenate(masks)
        block = _Block(ids, mask, np.asarray(pend_starts, dtype=np.int64), pend["row"], max(pend["len"], 0))
        pend_ids.clear()
        pend_mask.clear()
        pend_starts.clear()
        pend["n"] = 0
        return block

    for raw_ids, raw_mask in pairs:
        ids = _as_array(raw_ids, "token ids")
        mask = None if raw_mask is None else _as_array(raw_mask, "loss_mask")
        rows, masks = _rows_of(ids, mask)
        n_rows, length = rows.shape
        if rows.size == 0:
            row += n_rows
            continue
        if length > block_tokens:  # long rows (e.g. a flat 1-D corpus): split each one
            if pend["n"]:
                yield flush()
            for r in range(n_rows):
                for k, s in enumerate(range(0, length, block_tokens)):
                    yield _Block(
                        _flat(rows[r, s : s + block_tokens]),
                        None if masks is None else _flat_mask(masks[r, s : s + block_tokens]),
                        np.zeros(1, dtype=np.int64),
                        row,
                        0,
                        k,
                    )
                row += 1
            continue
        per_block = max(1, block_tokens // length)
        for r0 in range(0, n_rows, per_block):
            r1 = min(n_rows, r0 + per_block)
            flat = _flat(rows[r0:r1])
            if not pend["n"]:
                pend["row"] = row
                pend["len"] = length
            elif pend["len"] != length:
                pend["len"] = -1  # ragged
            pend_starts.extend(range(pend["n"], pend["n"] + flat.shape[0], length))
            pend_ids.append(flat)
            pend_mask.append(None if masks is None else _flat_mask(masks[r0:r1]))
            pend["n"] += flat.shape[0]
            row += r1 - r0
            if pend["n"] + length > block_tokens:  # another row of this length would not fit
                yield flush()
    if pend["n"]:
        yield flush()


def _out_of_range(ids: np.ndarray, target_vocab_size: int) -> UnusableInputError:
    lo, hi = int(ids.min()), int(ids.max())
    return UnusableInputError(f"token ids must lie in [0, {target_vocab_size}); found {lo}..{hi}")


def _total_tokens(token_ids: Any) -> int | None:
    if _is_array_like(token_ids):
        return int(np.prod(tuple(token_ids.shape)))
    if isinstance(token_ids, (tuple, list)) and all(_is_array_like(c) for c in token_ids):
        return sum(int(np.prod(tuple(c.shape))) for c in token_ids)
    return None


def _reopener(token_ids: Any, loss_mask: Any) -> Callable[[], Iterator[tuple[Any, Any]]] | None:
    """How to read the same input again (``None`` for one-shot iterators)."""
    if callable(token_ids) and not _is_array_like(token_ids):
        return lambda: _chunk_pairs(token_ids(), loss_mask)
    rereadable = (_is_array_like(token_ids) or isinstance(token_ids, (list, tuple))) and (
        loss_mask is None or _is_array_like(loss_mask) or isinstance(loss_mask, (list, tuple))
    )
    return (lambda: _chunk_pairs(token_ids, loss_mask)) if rereadable else None


def _rescan_block(
    reopen: Callable[[], Iterator[tuple[Any, Any]]],
    block_tokens: int,
    track: str,
    target_vocab_size: int,
    index: int,
    ids: np.ndarray,
) -> np.ndarray:
    """Exact first position (``first_seen``) or row (``first_row``) of ``ids`` inside block ``index``."""
    for i, block in enumerate(_iter_blocks(reopen(), block_tokens)):
        if i < index:
            continue
        slot = np.full(target_vocab_size, -1, dtype=np.int64)
        slot[ids] = np.arange(ids.shape[0])
        hit = slot[block.ids] >= 0
        if block.mask is not None:
            hit &= block.mask
        pos = np.flatnonzero(hit)
        keys = np.full(ids.shape[0], _UNSEEN, dtype=np.int64)
        where = block.rows_at(pos) if track == "first_row" else pos
        np.minimum.at(keys, slot[block.ids[pos]], where)
        return keys
    raise UnusableInputError(
        "the input changed between two reads"
    )  # pragma: no cover - reopen gives the same data


@dataclass
class _Pass:
    """One counting pass: the totals, the tie-break keys so far, and scratch buffers reused per block."""

    big_v: int
    track: str | None
    deferred: bool  # re-readable input: only the block (group) of each first occurrence is kept
    block_tokens: int
    counts: np.ndarray = field(init=False)
    first: np.ndarray | None = field(init=False)  # exact keys, or groups when deferred
    seen: np.ndarray | None = field(init=False)
    single_row: set[int] = field(default_factory=set)
    offset: int = 0
    rows_seen: int = 0
    keybuf: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    newkey: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool))
    hitbuf: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool))

    def __post_init__(self) -> None:
        self.counts = np.zeros(self.big_v, dtype=np.int64)
        self.first = np.full(self.big_v, _UNSEEN, dtype=np.int64) if self.track else None
        self.seen = np.zeros(self.big_v, dtype=bool) if self.track else None


def _count_block(st: _Pass, block: _Block) -> tuple[np.ndarray, np.ndarray]:
    """Add one block's counted ids to ``st.counts``: ``(the bincount key, the block's counts)``.

    With a mask the key is ``2 * id + mask``, so one ``bincount`` counts only the masked-in ids."""
    ids, mask = block.ids, block.mask
    n = ids.shape[0]
    if mask is None:
        key, width = ids, st.big_v
    else:
        if st.keybuf.shape[0] < n:
            st.keybuf = np.empty(max(n, st.block_tokens), dtype=np.int64)
        key = st.keybuf[:n]
        np.left_shift(ids, 1, out=key, casting="unsafe")
        np.add(key, mask, out=key, casting="unsafe")
        width = 2 * st.big_v
    # negative ids wrap to huge unsigned values: one max() checks both ends
    top = (
        int(key.view(np.dtype(f"u{key.dtype.itemsize}")).max())
        if np.issubdtype(key.dtype, np.signedinteger)
        else int(key.max())
    )
    if top >= width:
        raise _out_of_range(ids, st.big_v)
    binned = np.bincount(key, minlength=width)
    block_counts = binned if mask is None else binned[1::2]
    st.counts += block_counts
    return key, block_counts


def _track_first(st: _Pass, index: int, block: _Block, key: np.ndarray, block_counts: np.ndarray) -> None:
    """Record where the ids first counted in this block first occur (what the tie-break needs)."""
    assert st.first is not None and st.seen is not None
    new = (block_counts > 0) & ~st.seen
    if not new.any():  # only ids never counted before
        return
    st.seen |= new
    if st.deferred:  # the block (group) is enough for now
        group = index - block.part if st.track == "first_row" else index
        st.first[new] = group
        if st.track == "first_row" and block.row_starts.shape[0] == 1:
            st.single_row.add(group)
        return
    # one-shot input: their exact first position / row now
    n = block.ids.shape[0]
    if block.mask is None:
        table = new
    else:  # look up the combined key (still in cache): odd keys are the counted ids
        width = 2 * st.big_v
        if st.newkey.shape[0] != width:
            st.newkey = np.zeros(width, dtype=bool)
        st.newkey[1::2] = new
        table = st.newkey
    if st.hitbuf.shape[0] < n:
        st.hitbuf = np.empty(max(n, st.block_tokens), dtype=bool)
    hit = np.take(table, key, mode="wrap", out=st.hitbuf[:n])  # keys are in range (checked)
    pos = np.flatnonzero(hit)
    where = block.rows_at(pos) if st.track == "first_row" else st.offset + pos
    np.minimum.at(st.first, block.ids[pos], where)


def count_token_ids(
    token_ids: Any,
    target_vocab_size: int,
    loss_mask: Any | None = None,
    *,
    track: str | None = None,
    progress: bool | None = None,
    block_tokens: int = BLOCK_TOKENS,
    total_tokens: int | None = None,
) -> TokenCounts:
    """Count target ids (where ``loss_mask == 1``) in one streaming pass.

    ``token_ids``: a 1-D or 2-D array/tensor/list (a 1-D array is one row); an iterable of such
    chunks (``loss_mask`` then an iterable of matching masks, or the items ``(ids, mask)`` pairs);
    or a zero-argument callable returning such an iterable (re-readable streams, e.g.
    ``lambda: iter_token_chunks(path)``). ``track``: ``"first_seen"`` or ``"first_row"`` records
    what that tie-break needs: for re-readable inputs only the block where each id first occurs
    (ties inside one block are settled later by re-reading that block alone), for one-shot
    iterators the exact position or row. ``progress``: a tqdm bar (``None``: only for inputs of at
    least :data:`PROGRESS_MIN_TOKENS` ids; ``total_tokens`` sizes it for streamed inputs). Raises
    ``UnusableInputError`` on ids outside ``[0, V)``, non-integer ids and masks of another shape.
    """
    if not isinstance(target_vocab_size, (int, np.integer)) or target_vocab_size <= 0:
        raise BadArgumentsError(f"target_vocab_size must be a positive integer, got {target_vocab_size!r}")
    if track not in (None, "first_seen", "first_row"):
        raise BadArgumentsError("track must be None, 'first_seen' or 'first_row'")
    big_v = int(target_vocab_size)
    reopen = _reopener(token_ids, loss_mask) if track else None
    pairs = (
        reopen()
        if reopen is not None
        else _chunk_pairs(
            token_ids() if callable(token_ids) and not _is_array_like(token_ids) else token_ids, loss_mask
        )
    )
    st = _Pass(big_v, track, deferred=reopen is not None, block_tokens=block_tokens)
    total = total_tokens if total_tokens is not None else _total_tokens(token_ids)
    show = progress if progress is not None else (total is not None and total >= PROGRESS_MIN_TOKENS)
    bar = None
    if show:
        from tqdm.auto import tqdm  # heavy: tqdm

        bar = tqdm(total=total, unit="tok", unit_scale=True, desc="counting token ids", leave=False)
    try:
        for index, block in enumerate(_iter_blocks(pairs, block_tokens)):
            key, block_counts = _count_block(st, block)
            if st.first is not None:
                _track_first(st, index, block, key, block_counts)
            st.offset += block.ids.shape[0]
            st.rows_seen = max(st.rows_seen, block.first_row + block.row_starts.shape[0])
            if bar is not None:
                bar.update(block.ids.shape[0])
    finally:
        if bar is not None:
            bar.close()
    counts, offset, rows_seen, first, deferred = st.counts, st.offset, st.rows_seen, st.first, st.deferred
    single_row = st.single_row
    if deferred and track is not None and reopen is not None:
        rescan = functools.partial(_rescan_block, reopen, block_tokens, track, big_v)
        return TokenCounts(
            counts,
            offset,
            rows_seen,
            track=track,
            first_group=first,
            single_row_groups=frozenset(single_row),
            rescan=rescan,
        )
    return TokenCounts(
        counts,
        offset,
        rows_seen,
        first if track == "first_seen" else None,
        first if track == "first_row" else None,
        track=track,
    )
