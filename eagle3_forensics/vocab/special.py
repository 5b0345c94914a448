"""Which structural tokens and byte-fallback pieces a draft vocabulary lacks, and what they cost.

Top-v selection by frequency keeps what the training text used most; a token the template or the
generation writes once per turn (eos, ``</think>``, a tool tag) can fall below the cut. The drafter
then can never propose it: every occurrence in served text is a rejected draft position. Byte
fallback pieces (``<0xNN>``, SentencePiece tokenizers only) are how such a tokenizer spells every
character outside its vocabulary: a language or script the selection did not see drafts badly.

:func:`special_coverage` says what is missing (with kinds); :func:`positions_share` adds the cost in
data: the share of loss-masked positions whose token is one of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eagle3_forensics.vocab.chat import (
    ChatTemplate,
    byte_pieces,
    generated_structural_ids,
    load_chat_template,
    structural_tokens,
    supported_modes,
)
from eagle3_forensics.vocab.inputs.chat import load_tokenizer, read_tokenizer_config, token_text

_MAX_LISTED = 32
_BLOCK = 1 << 22


def generation_eos_ids(target_dir: str | Path) -> list[int]:
    """``eos_token_id`` of ``generation_config.json`` (int or list), else of ``config.json``: the ids a
    server stops on."""
    d = Path(target_dir)
    for name in ("generation_config.json", "config.json"):
        f = d / name
        if not f.is_file() or f.stat().st_size > 4 << 20:  # a config is small; cap what others wrote
            continue
        try:
            value = json.loads(f.read_text(encoding="utf-8")).get("eos_token_id")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            continue
        ids = value if isinstance(value, list) else [value]
        out = [int(i) for i in ids if isinstance(i, int) and not isinstance(i, bool)]
        if out:
            return out
    return []


def target_chat(target_dir: str | Path) -> ChatTemplate | None:
    """The target's tokenizer with its template, or (no template) with an empty one, so eos, specials
    and tags are still found; None without ``tokenizer.json``."""
    d = Path(target_dir)
    if not (d / "tokenizer.json").is_file():
        return None
    chat = load_chat_template(d)
    if chat is not None:
        return chat
    cfg = read_tokenizer_config(d)
    special = {k: token_text(cfg.get(k)) for k in ("bos_token", "eos_token", "unk_token", "pad_token")}
    return ChatTemplate(directory=str(d), template="", tokenizer=load_tokenizer(d), special=special)


@dataclass
class SpecialCoverage:
    """Structural tokens and byte pieces of a target, and those the draft vocabulary lacks."""

    structural: dict[int, str]  # id -> kind (eos, bos, reasoning_tag, tool_tag, special, scaffold)
    texts: dict[int, str]
    missing: list[int]  # structural ids outside the selection
    byte_pieces: dict[int, str]
    missing_bytes: list[int]
    has_template: bool
    generated: set[int] = field(default_factory=set)  # ids the template writes inside the assistant's turn
    thinks: bool = False  # the template has a reasoning mode
    share: dict[str, float | None] = field(default_factory=dict)  # "structural"/"bytes" -> share of positions
    counts: dict[int, int] = field(default_factory=dict)  # missing id -> loss-masked occurrences
    positions: int | None = None  # loss-masked positions counted

    @property
    def missing_kinds(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for tid in self.missing:
            out.setdefault(self.structural[tid], []).append(tid)
        return out

    def role(self, tid: int) -> str:
        """How the generation uses a structural id: ``critical`` (the turn-end eos, or think tags of a
        reasoning template: in every served response), ``generated`` (other pieces the template writes
        inside the assistant's turn), ``tool`` (tool-call tags: only when the model calls tools) or
        ``prompt`` (prompt-side only: role markers, the generation prompt, bos, eos ids the template
        never writes — a drafter never proposes them)."""
        kind = self.structural[tid]
        written = tid in self.generated
        if kind == "eos" and (written or not self.has_template):
            return "critical"
        if kind == "reasoning_tag" and (written or self.thinks):
            return "critical"
        if kind == "tool_tag":
            return "tool"
        return "generated" if written else "prompt"

    def listed(self, ids: Iterable[int]) -> list[dict[str, Any]]:
        rows = []
        for tid in list(ids)[:_MAX_LISTED]:
            row: dict[str, Any] = {"id": tid, "text": self.texts.get(tid, self.byte_pieces.get(tid, ""))}
            if tid in self.structural:
                row["kind"] = self.structural[tid]
                row["role"] = self.role(tid)
            if self.counts:
                row["count"] = self.counts.get(tid, 0)
            rows.append(row)
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "structural": len(self.structural),
            "missing": self.listed(self.missing),
            "missing_count": len(self.missing),
            "byte_pieces": len(self.byte_pieces),
            "missing_bytes": len(self.missing_bytes),
            "has_template": self.has_template,
            "positions": self.positions,
            "share_of_positions": dict(self.share),
        }


def special_coverage(
    selected: np.ndarray, chat: ChatTemplate, eos_ids: Sequence[int] = ()
) -> SpecialCoverage:
    """What of the template's structural tokens and the byte pieces lies outside ``selected``
    (a bool ``[V]`` mask of the draft vocabulary)."""
    st = structural_tokens(chat, eos_ids)
    size = int(selected.shape[0])

    def inside(tid: int) -> bool:
        return 0 <= tid < size and bool(selected[tid])

    bytes_ = byte_pieces(chat)
    return SpecialCoverage(
        structural=dict(st.kinds),
        texts=dict(st.texts),
        missing=[t for t in st.ids() if not inside(t)],
        byte_pieces=bytes_,
        missing_bytes=[t for t in sorted(bytes_) if not inside(t)],
        has_template=bool(chat.template),
        generated=generated_structural_ids(chat) if chat.template else set(),
        thinks=bool(chat.template) and bool(supported_modes(chat)),
    )


def add_data_cost(
    cov: SpecialCoverage, chunks: Iterable[tuple[np.ndarray, np.ndarray | None]]
) -> SpecialCoverage:
    """Count the missing ids over loss-masked positions (all positions where there is no mask)."""
    want = np.asarray(sorted({*cov.missing, *cov.missing_bytes}), dtype=np.int64)
    counts = np.zeros(want.shape[0], dtype=np.int64)
    total = 0
    for ids_src, mask_src in chunks:
        flat = ids_src.reshape(-1)
        flat_mask = None if mask_src is None else mask_src.reshape(-1)
        for s in range(0, int(flat.shape[0]), _BLOCK):  # a 1-D file comes whole (memory-mapped)
            a = np.asarray(flat[s : s + _BLOCK]).astype(np.int64, copy=False)
            if flat_mask is not None:
                a = a[np.asarray(flat_mask[s : s + _BLOCK]).astype(bool)]
            total += int(a.shape[0])
            if want.size:
                pos = np.searchsorted(want, a)
                hit = (pos < want.size) & (want[np.minimum(pos, want.size - 1)] == a)
                counts += np.bincount(pos[hit], minlength=want.size)[: want.size]
    cov.counts = {int(t): int(c) for t, c in zip(want.tolist(), counts.tolist(), strict=True)}
    cov.positions = total
    for key, ids in (("structural", cov.missing), ("bytes", cov.missing_bytes)):
        n = sum(cov.counts.get(t, 0) for t in ids)
        cov.share[key] = n / total if total else None
    return cov
