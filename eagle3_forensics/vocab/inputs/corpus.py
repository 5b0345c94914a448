"""Tokenising a JSONL corpus (texts, prompt/completion pairs or conversations, the latter through
the tokenizer's chat template) and building a vocabulary map from training data, tokenised or not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eagle3_forensics.errors import UnusableInputError, error_line
from eagle3_forensics.vocab.inputs.chat import (
    load_tokenizer,
    read_chat_template,
    read_tokenizer_config,
    render_chat,
    token_text,
)
from eagle3_forensics.vocab.inputs.tokens import build_vocab_mapping_from_file
from eagle3_forensics.vocab.mapping.build import VocabMapping, build_vocab_mapping


def build_vocab_mapping_from_data(
    *,
    ids: str | Path | None = None,
    corpus: str | Path | None = None,
    tokenizer: str | Path | None = None,
    draft_vocab_size: int,
    target_vocab_size: int,
    tie_break: str = "id",
    chat_template: str | None = None,
    progress: bool | None = None,
    warn: bool = False,
) -> VocabMapping:
    """Rebuild a map from training data: a token-id file (``ids``, preferred) or a JSONL ``corpus``
    tokenised with the target's ``tokenizer`` (same loss masks as the trainers).

    Padding (fewer distinct ids than ``draft_vocab_size``) is carried by the map (``padded``,
    ``padding_note``: a line of the views' build table) rather than raised as a
    :class:`~eagle3_forensics.vocab.mapping.VocabPaddingWarning` (``warn=True`` raises it too), so a
    notebook shows one line, not a warning with its source line."""
    try:
        if ids is not None:
            return build_vocab_mapping_from_file(
                ids, draft_vocab_size, target_vocab_size, tie_break, progress=progress, warn=warn
            )
        if corpus is not None:
            if tokenizer is None:
                raise UnusableInputError(
                    "a JSONL corpus needs the target's tokenizer directory (missing tokenizer)"
                )
            tc = tokenize_corpus(corpus, tokenizer, chat_template=chat_template)
            return build_vocab_mapping(
                tc.pairs,
                draft_vocab_size,
                target_vocab_size,
                tie_break=tie_break,
                progress=progress,
                total_tokens=tc.tokens,
                warn=warn,
            )
    except (ValueError, UnusableInputError) as exc:  # numpy's and ours: one line naming the input
        raise UnusableInputError(
            f"cannot build a vocabulary map from {ids if ids is not None else corpus}: {exc}"
        ) from None
    raise UnusableInputError("no training data: give a token-id file or a JSONL corpus with a tokenizer")


_SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
}


@dataclass
class TokenizedCorpus:
    """One row of ids per JSONL record and its loss mask (what the trainers count)."""

    rows: list[np.ndarray]  # int64 ids per record
    masks: list[
        np.ndarray
    ]  # bool per record: text -> all, prompt/completion -> completion, chat -> assistant
    kinds: dict[str, int]  # records per kind ("text", "prompt_completion", "conversation")
    unlocated_turns: int = 0  # assistant turns the chat template rewrote beyond recognition (not counted)

    @property
    def tokens(self) -> int:
        return sum(int(r.shape[0]) for r in self.rows)

    @property
    def counted(self) -> int:
        return sum(int(m.sum()) for m in self.masks)

    def pairs(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(ids, mask)`` per record: the chunk form :func:`build_vocab_mapping` accepts (rows kept)."""
        return iter(zip(self.rows, self.masks, strict=True))

    def padded(self, pad_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(input_ids [n, L], loss_mask [n, L])``, right-padded with ``pad_id`` (mask False there)."""
        width = max((r.shape[0] for r in self.rows), default=0)
        ids = np.full((len(self.rows), width), pad_id, dtype=np.int64)
        mask = np.zeros((len(self.rows), width), dtype=bool)
        for i, (r, m) in enumerate(zip(self.rows, self.masks, strict=True)):
            ids[i, : r.shape[0]] = r
            mask[i, : m.shape[0]] = m
        return ids, mask


def read_jsonl(path: str | Path, max_records: int | None = None) -> list[dict[str, Any]]:
    p = Path(path)
    if not p.is_file():
        raise UnusableInputError(f"corpus not found: {p}", path=str(p))
    out: list[dict[str, Any]] = []
    try:
        with p.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise UnusableInputError(
                        f"{p}:{n}: not valid JSON ({error_line(exc)})", path=str(p)
                    ) from None
                if not isinstance(rec, dict):
                    raise UnusableInputError(f"{p}:{n}: expected a JSON object per line", path=str(p))
                out.append(rec)
                if max_records is not None and len(out) >= max_records:
                    break
    except UnicodeDecodeError as exc:
        raise UnusableInputError(f"{p} is not UTF-8 text: {error_line(exc)}", path=str(p)) from None
    if not out:
        raise UnusableInputError(f"corpus {p} holds no records (empty corpus)", path=str(p))
    return out


def _messages(rec: dict[str, Any], where: str) -> list[dict[str, str]]:
    raw = rec.get("messages", rec.get("conversations"))
    if not isinstance(raw, list) or not raw:
        raise UnusableInputError(f"{where}: 'messages'/'conversations' must be a non-empty list")
    out = []
    for turn in raw:
        if not isinstance(turn, dict):
            raise UnusableInputError(f"{where}: every turn must be an object")
        role = turn.get("role", turn.get("from"))
        content = turn.get("content", turn.get("value"))
        if not isinstance(role, str) or not isinstance(content, str):
            raise UnusableInputError(f"{where}: every turn needs a role/from and a string content/value")
        out.append({"role": _SHAREGPT_ROLES.get(role, role), "content": content})
    return out


def _spans_mask(offsets: list[tuple[int, int]], spans: list[tuple[int, int]]) -> np.ndarray:
    """Tokens whose character span overlaps any counted span."""
    if not offsets:
        return np.zeros(0, dtype=bool)
    off = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    mask = np.zeros(off.shape[0], dtype=bool)
    for s, e in spans:
        mask |= (off[:, 0] < e) & (off[:, 1] > s) & (off[:, 1] > off[:, 0])
    return mask


def tokenize_corpus(
    corpus: str | Path,
    tokenizer_dir: str | Path,
    *,
    chat_template: str | None = None,
    max_records: int | None = None,
) -> TokenizedCorpus:
    """Tokenise a JSONL corpus with the target's tokenizer, with the loss mask the trainers use.

    Records: ``{"text": ...}`` (every token counted), ``{"prompt": ..., "completion"|"response": ...}``
    (completion tokens counted) or ``{"messages"|"conversations": [...]}`` (role/content or ShareGPT
    from/value; rendered with the tokenizer's chat template, or ``chat_template`` (a Jinja string or
    a file path); assistant content counted).
    """
    records = read_jsonl(corpus, max_records)
    tok = load_tokenizer(tokenizer_dir)
    template = chat_template
    if template is not None and "{" not in template and Path(template).is_file():
        template = Path(template).read_text(encoding="utf-8")
    cfg = read_tokenizer_config(tokenizer_dir) if Path(tokenizer_dir).is_dir() else {}
    special = {k: token_text(cfg.get(k)) for k in ("bos_token", "eos_token", "unk_token", "pad_token")}
    texts: list[str] = []
    spans: list[list[tuple[int, int]]] = []
    plain: list[bool] = []  # add the tokenizer's special tokens (texts) or not (rendered chats)
    kinds = {"text": 0, "prompt_completion": 0, "conversation": 0}
    unlocated = 0
    for n, rec in enumerate(records, 1):
        where = f"{corpus} record {n}"
        if isinstance(rec.get("text"), str):
            texts.append(rec["text"])
            spans.append([(0, len(rec["text"]))])
            plain.append(True)
            kinds["text"] += 1
        elif isinstance(rec.get("prompt"), str) and isinstance(
            rec.get("completion", rec.get("response")), str
        ):
            prompt, completion = str(rec["prompt"]), str(rec.get("completion", rec.get("response")))
            texts.append(prompt + completion)
            spans.append([(len(prompt), len(prompt) + len(completion))])
            plain.append(True)
            kinds["prompt_completion"] += 1
        elif "messages" in rec or "conversations" in rec:
            msgs = _messages(rec, where)
            if template is None:
                template = read_chat_template(tokenizer_dir) if Path(tokenizer_dir).is_dir() else None
                if template is None:
                    raise UnusableInputError(
                        f"{where} is a conversation but the tokenizer in {tokenizer_dir} has "
                        "no chat template (pass one with --chat-template)"
                    )
            rendered = render_chat(template, msgs, special)
            cursor, found = 0, []
            for m in msgs:
                content = m["content"]
                at = rendered.find(content, cursor) if content else -1
                if at < 0 and content.strip():
                    at = rendered.find(content.strip(), cursor)
                    content = content.strip()
                if at < 0:
                    unlocated += m["role"] == "assistant"
                    continue
                if m["role"] == "assistant":
                    found.append((at, at + len(content)))
                cursor = at + len(content)
            texts.append(rendered)
            spans.append(found)
            plain.append(False)
            kinds["conversation"] += 1
        else:
            raise UnusableInputError(
                f"{where}: expected 'text', 'prompt'+'completion', or 'messages'/'conversations'"
            )
    rows: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(texts)
    masks: list[np.ndarray] = [np.zeros(0, dtype=bool)] * len(texts)
    for flag in (True, False):
        idx = [i for i, p in enumerate(plain) if p is flag]
        if not idx:
            continue
        for i, enc in zip(
            idx, tok.encode_batch([texts[i] for i in idx], add_special_tokens=flag), strict=True
        ):
            rows[i] = np.asarray(enc.ids, dtype=np.int64)
            masks[i] = _spans_mask(enc.offsets, spans[i])
            if flag and spans[i] == [(0, len(texts[i]))]:
                masks[i][:] = True  # a text counts every token, added special tokens included
    out = TokenizedCorpus(rows, masks, {k: v for k, v in kinds.items() if v}, unlocated)
    if out.tokens == 0:
        raise UnusableInputError(f"corpus {corpus} tokenises to no tokens (empty corpus)")
    return out
