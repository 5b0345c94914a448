"""Token ids for rebuilding a vocabulary map: ``load_token_ids(path) -> (input_ids, loss_mask)``.

Accepted files (the trainers' preprocessed data, or an export of it):

* ``.safetensors`` with a tensor ``input_ids`` (1-D or 2-D) and optionally ``loss_mask`` of the same shape;
* ``.pt`` / ``.pth`` holding a dict with those keys (``torch.load(..., weights_only=True)``: a pickle that
  needs arbitrary globals is refused and never executed), or a bare ``input_ids`` tensor;
* ``.npy`` holding ``input_ids`` alone (``allow_pickle=False``); ``.npz`` with ``input_ids`` and optional
  ``loss_mask``.

Every problem is an :class:`~eagle3_forensics.errors.UnusableInputError` with a one-line reason.

Also here (the other inputs of vocabulary forensics):

* :func:`iter_token_chunks` streams the same files a block of rows at a time (memory-mapped
  ``.npy``/``.pt``, sliced ``.safetensors``), for inputs larger than memory;
* :func:`tokenize_corpus` tokenises a JSONL of texts, prompt/completion pairs or conversations
  with a local ``tokenizer.json`` (conversations through the tokenizer's chat template);
* :func:`load_mapping` / :func:`save_mapping` read and write ``d2t``/``t2d`` (a drafter
  checkpoint, a ``vocab build`` output, a SpecForge ``.pt`` cache, speculators' ``d2t.npy``/``t2d.npy``);
* :func:`lm_head_row_check` loads both heads for :func:`eagle3_forensics.vocab.mapping.check_lm_head_rows`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.io.checkpoint import open_checkpoint, safe_torch_load
from eagle3_forensics.io.drafter import read_drafter
from eagle3_forensics.io.target import open_target
from eagle3_forensics.vocab.mapping import (
    LmHeadRowCheck,
    VocabClassification,
    VocabMapping,
    build_vocab_mapping,
    check_lm_head_rows,
    classify_mapping,
    selected_ids,
)

IDS_KEY = "input_ids"
MASK_KEY = "loss_mask"
SUFFIXES = (".safetensors", ".pt", ".pth", ".npy", ".npz")


def _one_line(exc: BaseException) -> str:
    return " ".join((str(exc) or type(exc).__name__).split())[:200]


def _as_array(value: Any, what: str, path: Path) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            value = value.float()
        arr = value.numpy()
    elif isinstance(value, np.ndarray):
        arr = value
    elif isinstance(value, list):
        try:
            arr = np.asarray(value)
        except ValueError as exc:  # ragged lists
            raise UnusableInputError(
                f"{what} in {path} is not rectangular: {_one_line(exc)}", path=str(path)
            ) from None
    else:
        raise UnusableInputError(
            f"{what} in {path} is a {type(value).__name__}, expected a tensor or array", path=str(path)
        )
    if arr.ndim not in (1, 2):
        raise UnusableInputError(
            f"{what} in {path} has shape {list(arr.shape)}; expected 1-D or 2-D", path=str(path)
        )
    return arr


def _check(ids: np.ndarray, mask: np.ndarray | None, path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    if not (np.issubdtype(ids.dtype, np.integer) or ids.dtype == np.bool_):
        if np.issubdtype(ids.dtype, np.floating) and ids.size and np.all(np.mod(ids, 1) == 0):
            ids = ids.astype(np.int64)
        else:
            raise UnusableInputError(
                f"{IDS_KEY} in {path} has dtype {ids.dtype}; expected integers", path=str(path)
            )
    ids = ids.astype(np.int64, copy=False)
    if ids.size == 0:
        raise UnusableInputError(f"{IDS_KEY} in {path} is empty", path=str(path))
    if mask is not None:
        if mask.shape != ids.shape:
            raise UnusableInputError(
                f"{MASK_KEY} in {path} has shape {list(mask.shape)}, {IDS_KEY} has {list(ids.shape)}",
                path=str(path),
            )
        mask = mask.astype(bool)
    return ids, mask


def _from_mapping(obj: dict[str, Any], path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    if IDS_KEY not in obj:
        keys = ", ".join(sorted(map(str, obj))[:10]) or "none"
        raise UnusableInputError(f"{path} has no {IDS_KEY!r} (keys: {keys})", path=str(path))
    ids = _as_array(obj[IDS_KEY], IDS_KEY, path)
    mask = _as_array(obj[MASK_KEY], MASK_KEY, path) if obj.get(MASK_KEY) is not None else None
    return _check(ids, mask, path)


def load_token_ids(path: str | Path) -> tuple[np.ndarray, np.ndarray | None]:
    """``(input_ids, loss_mask)`` as int64 / bool arrays of equal shape (``loss_mask`` may be ``None``)."""
    p = Path(path)
    if not p.is_file():
        raise UnusableInputError(f"token-id file not found: {p}", path=str(p))
    suffix = p.suffix.lower()
    if suffix == ".safetensors":
        try:
            with safe_open(str(p), framework="pt") as fh:
                names = set(fh.keys())
                obj: dict[str, Any] = {k: fh.get_tensor(k) for k in (IDS_KEY, MASK_KEY) if k in names}
                if not obj:
                    obj = dict.fromkeys(names)  # for the error message only
        except Exception as exc:
            raise UnusableInputError(
                f"unreadable safetensors file {p}: {_one_line(exc)}", path=str(p)
            ) from None
        return _from_mapping(obj, p)
    if suffix in (".pt", ".pth"):
        loaded = safe_torch_load(p)
        if isinstance(loaded, torch.Tensor):
            return _check(_as_array(loaded, IDS_KEY, p), None, p)
        if not isinstance(loaded, dict):
            raise UnusableInputError(
                f"{p} holds a {type(loaded).__name__}, expected a dict with {IDS_KEY!r}", path=str(p)
            )
        return _from_mapping(loaded, p)
    if suffix in (".npy", ".npz"):
        try:
            loaded_np = np.load(str(p), allow_pickle=False, mmap_mode="r")  # .npy stays on disk until read
        except Exception as exc:
            raise UnusableInputError(f"unreadable NumPy file {p}: {_one_line(exc)}", path=str(p)) from None
        if isinstance(loaded_np, np.ndarray):
            return _check(_as_array(loaded_np, IDS_KEY, p), None, p)
        try:  # an .npz reads its members only now: a damaged archive fails here
            with loaded_np as archive:
                members = {k: archive[k] for k in archive.files}
        except Exception as exc:
            raise UnusableInputError(f"unreadable NumPy file {p}: {_one_line(exc)}", path=str(p)) from None
        return _from_mapping(members, p)
    raise UnusableInputError(
        f"unsupported token-id file {p}: expected one of {', '.join(SUFFIXES)}", path=str(p)
    )


# -- streaming token-id files ------------------------------------------------------------------------

#: ids per streamed chunk (rows are never split across chunks)
CHUNK_TOKENS = 1 << 22


_ST_DTYPES = {
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U64": "<u8",
    "U32": "<u4",
    "U16": "<u2",
    "U8": "u1",
    "BOOL": "?",
    "F32": "<f4",
    "F64": "<f8",
    "F16": "<f2",
}


def _safetensors_memmap(p: Path, name: str, *, required: bool = True) -> np.ndarray | None:
    """A read-only memory map of one tensor of a safetensors file (header parsed here, data never read)."""
    try:
        with p.open("rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            if n <= 0 or n > 100_000_000:
                raise ValueError("bad header length")
            header = json.loads(fh.read(n))
        info = header.get(name)
        if info is None:
            if required:
                keys = ", ".join(sorted(k for k in header if k != "__metadata__")[:10]) or "none"
                raise UnusableInputError(f"{p} has no {name!r} (keys: {keys})", path=str(p))
            return None
        dtype = _ST_DTYPES.get(info["dtype"])
        if dtype is None:
            raise UnusableInputError(
                f"{name} in {p} has dtype {info['dtype']}; expected integers", path=str(p)
            )
        start, end = (int(x) for x in info["data_offsets"])
        shape = tuple(int(d) for d in info["shape"])
        count = int(np.prod(shape)) if shape else 1
        if end - start != count * np.dtype(dtype).itemsize or 8 + n + end > p.stat().st_size:
            raise ValueError(f"{name}: data offsets do not match its shape")
        if count == 0:
            return np.zeros(shape, dtype=dtype)
        return np.memmap(p, dtype=dtype, mode="r", offset=8 + n + start, shape=shape)
    except UnusableInputError:
        raise
    except Exception as exc:
        raise UnusableInputError(f"unreadable safetensors file {p}: {_one_line(exc)}", path=str(p)) from None


def _open_streams(p: Path) -> tuple[Any, Any | None, tuple[int, ...], str]:
    """``(ids_source, mask_source, shape, dtype)`` where the sources can be sliced by rows lazily."""
    suffix = p.suffix.lower()
    if suffix == ".npy":
        try:
            arr = np.load(str(p), allow_pickle=False, mmap_mode="r")
        except Exception as exc:
            raise UnusableInputError(f"unreadable NumPy file {p}: {_one_line(exc)}", path=str(p)) from None
        return arr, None, tuple(arr.shape), str(arr.dtype)
    if suffix == ".safetensors":
        ids_mm = _safetensors_memmap(p, IDS_KEY)
        assert ids_mm is not None  # required=True raises instead
        mask_mm = _safetensors_memmap(p, MASK_KEY, required=False)
        return ids_mm, mask_mm, tuple(ids_mm.shape), str(ids_mm.dtype)
    # .pt (memory-mapped when zip-based) and .npz: load_token_ids already reads them lazily enough
    ids_arr, mask_arr = load_token_ids(p)
    return ids_arr, mask_arr, tuple(ids_arr.shape), str(ids_arr.dtype)


def iter_token_chunks(
    path: str | Path, *, chunk_tokens: int = CHUNK_TOKENS
) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
    """Stream ``(input_ids, loss_mask | None)`` chunks of whole rows from a token-id file.

    A 2-D file yields ``[rows, length]`` blocks; a 1-D file (one row) is yielded whole as a lazy
    (memory-mapped) view that :func:`eagle3_forensics.vocab.mapping.build_vocab_mapping` splits itself,
    so the row structure the ``first_row`` tie-break needs is preserved either way.
    """
    p = Path(path)
    if not p.is_file():
        raise UnusableInputError(f"token-id file not found: {p}", path=str(p))
    ids_src, mask_src, shape, dtype = _open_streams(p)
    if len(shape) not in (1, 2):
        raise UnusableInputError(
            f"{IDS_KEY} in {p} has shape {list(shape)}; expected 1-D or 2-D", path=str(p)
        )
    if not any(dtype.lower().startswith(k) for k in ("int", "uint", "i", "u")) or dtype.lower() == "bool":
        raise UnusableInputError(f"{IDS_KEY} in {p} has dtype {dtype}; expected integers", path=str(p))
    if int(np.prod(shape)) == 0:
        raise UnusableInputError(f"{IDS_KEY} in {p} is empty", path=str(p))
    if mask_src is not None and tuple(mask_src.shape) != shape:
        raise UnusableInputError(
            f"{MASK_KEY} in {p} has shape {list(mask_src.shape)}, {IDS_KEY} has {list(shape)}", path=str(p)
        )
    if len(shape) == 1:  # one row: the counter splits it into blocks lazily
        yield ids_src, mask_src
        return
    rows, length = shape
    step = max(1, chunk_tokens // max(length, 1))
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        yield ids_src[r0:r1], None if mask_src is None else mask_src[r0:r1]


def token_file_size(path: str | Path) -> int | None:
    """Number of ids in a token-id file from its header alone (``None`` when that needs a full read)."""
    p = Path(path)
    try:
        if p.suffix.lower() == ".npy":
            return int(np.prod(np.load(str(p), allow_pickle=False, mmap_mode="r").shape))
        if p.suffix.lower() == ".safetensors":
            with safe_open(str(p), framework="numpy") as fh:
                return int(np.prod(fh.get_slice(IDS_KEY).get_shape()))
    except Exception:
        return None
    return None


def build_vocab_mapping_from_file(
    path: str | Path,
    draft_vocab_size: int,
    target_vocab_size: int,
    tie_break: str = "id",
    *,
    progress: bool | None = None,
    warn: bool = True,
) -> VocabMapping:
    """:func:`~eagle3_forensics.vocab.mapping.build_vocab_mapping` over a token-id file, streamed."""
    # a callable, so that a tie-break can re-read the one block it needs instead of tracking every id
    return build_vocab_mapping(
        lambda: iter_token_chunks(path),
        draft_vocab_size,
        target_vocab_size,
        tie_break=tie_break,
        progress=progress,
        total_tokens=token_file_size(path),
        warn=warn,
    )


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
    warn: bool = True,
) -> VocabMapping:
    """Rebuild a map from training data: a token-id file (``ids``, preferred) or a JSONL ``corpus``
    tokenised with the target's ``tokenizer`` (same loss masks as the trainers). ``warn=False``:
    no :class:`~eagle3_forensics.vocab.mapping.VocabPaddingWarning` (the result's ``padded`` says it)."""
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


# -- tokenising a JSONL corpus ---------------------------------------------------------------------------

TOKENIZER_FILE = "tokenizer.json"
_SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
}


def load_tokenizer(tokenizer_dir: str | Path) -> Any:
    """A ``tokenizers.Tokenizer`` from ``tokenizer_dir/tokenizer.json`` (fast: no transformers import)."""
    d = Path(tokenizer_dir)
    f = d if d.is_file() else d / TOKENIZER_FILE
    if not f.is_file():
        extra = (
            " (only a SentencePiece tokenizer.model: convert it to tokenizer.json with transformers)"
            if (d / "tokenizer.model").is_file()
            else ""
        )
        raise UnusableInputError(f"no tokenizer: {f} not found{extra}", path=str(f))
    from tokenizers import Tokenizer  # optional: tokenizers (the models extra)

    try:
        return Tokenizer.from_file(str(f))
    except Exception as exc:
        raise UnusableInputError(f"unreadable tokenizer {f}: {_one_line(exc)}", path=str(f)) from None


def read_tokenizer_config(tokenizer_dir: str | Path) -> dict[str, Any]:
    f = Path(tokenizer_dir) / "tokenizer_config.json"
    if not f.is_file():
        return {}
    try:
        cfg = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UnusableInputError(f"unreadable {f}: {_one_line(exc)}", path=str(f)) from None
    return cfg if isinstance(cfg, dict) else {}


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def read_chat_template(tokenizer_dir: str | Path) -> str | None:
    """The chat template shipped with a tokenizer: ``chat_template.jinja`` or ``tokenizer_config.json``."""
    d = Path(tokenizer_dir)
    if (d / "chat_template.jinja").is_file():
        return (d / "chat_template.jinja").read_text(encoding="utf-8")
    template = read_tokenizer_config(d).get("chat_template")
    if isinstance(template, list):  # named templates: take "default"
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    if template is None and (d / "chat_template.json").is_file():
        try:
            template = json.loads((d / "chat_template.json").read_text(encoding="utf-8")).get("chat_template")
        except (OSError, json.JSONDecodeError, AttributeError):
            template = None
    return template if isinstance(template, str) else None


def render_chat(template: str, messages: list[dict[str, str]], special: dict[str, str | None]) -> str:
    """Render ``messages`` the way ``transformers``' ``apply_chat_template(tokenize=False)`` does
    (sandboxed Jinja, ``trim_blocks``/``lstrip_blocks``, ``raise_exception``, ``strftime_now``)."""
    try:
        import jinja2  # optional: jinja2 (chat templates)
        from jinja2.ext import loopcontrols  # optional: jinja2 (chat templates)
        from jinja2.sandbox import ImmutableSandboxedEnvironment  # optional: jinja2 (chat templates)
    except ImportError:
        raise UnusableInputError("rendering a chat template needs jinja2 (pip install jinja2)") from None

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(
        x: Any,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: Any = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        return env.from_string(template).render(messages=messages, add_generation_prompt=False, **special)
    except jinja2.exceptions.TemplateError as exc:
        raise UnusableInputError(f"the chat template failed: {_one_line(exc)}") from None


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
                        f"{p}:{n}: not valid JSON ({_one_line(exc)})", path=str(p)
                    ) from None
                if not isinstance(rec, dict):
                    raise UnusableInputError(f"{p}:{n}: expected a JSON object per line", path=str(p))
                out.append(rec)
                if max_records is not None and len(out) >= max_records:
                    break
    except UnicodeDecodeError as exc:
        raise UnusableInputError(f"{p} is not UTF-8 text: {_one_line(exc)}", path=str(p)) from None
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
    special = {k: _token_text(cfg.get(k)) for k in ("bos_token", "eos_token", "unk_token", "pad_token")}
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


# -- vocabulary maps on disk -------------------------------------------------------------------------


@dataclass
class LoadedMapping:
    """``d2t``/``t2d`` read from disk, with the sizes that go with them."""

    label: str
    path: Path
    source: str  # "checkpoint" | "mapping file" | "speculators d2t.npy/t2d.npy"
    d2t: torch.Tensor | None
    t2d: torch.Tensor | None
    target_vocab_size: int | None
    draft_vocab_size: int | None
    metadata: dict[str, str] = field(default_factory=dict)

    def classify(self) -> VocabClassification:
        return classify_mapping(self.d2t, self.t2d, self.target_vocab_size, self.draft_vocab_size)

    def sizes(self) -> tuple[int, int]:
        """``(V, v)``, the target and draft vocabulary sizes, for the functions that need both;
        :class:`UnusableInputError` when the map and its config do not say them."""
        if self.target_vocab_size is None or self.draft_vocab_size is None:
            raise UnusableInputError(
                f"{self.label}: the vocabulary sizes are unknown (target {self.target_vocab_size}, draft "
                f"{self.draft_vocab_size}); pass a checkpoint with its config.json or a target",
                path=str(self.path),
            )
        return self.target_vocab_size, self.draft_vocab_size

    def selected(self) -> tuple[np.ndarray, str]:
        """The target ids this map selects and where they were read from (see ``vocab.selected_ids``)."""
        return selected_ids(self.d2t, self.t2d, self.target_vocab_size, self.draft_vocab_size)

    @property
    def t2d_mask(self) -> np.ndarray:
        """The selection as a bool ``[V]`` mask (from ``t2d`` or decoded ``d2t``)."""
        sel, _ = self.selected()
        big_v = self.target_vocab_size if self.target_vocab_size is not None else int(sel.max()) + 1
        mask = np.zeros(big_v, dtype=bool)
        mask[sel[sel < big_v]] = True
        return mask

    def summary(self) -> dict[str, Any]:
        def desc(t: torch.Tensor | None) -> str | None:
            return None if t is None else f"{str(t.dtype).replace('torch.', '')} {list(t.shape)}"

        return {
            "label": self.label,
            "path": str(self.path),
            "source": self.source,
            "target_vocab_size": self.target_vocab_size,
            "draft_vocab_size": self.draft_vocab_size,
            "d2t": desc(self.d2t),
            "t2d": desc(self.t2d),
            "t2d_selected": None if self.t2d is None else int(self.t2d.bool().sum()),
            **self.metadata,
        }


def _tensor_dict_from_file(p: Path) -> dict[str, Any]:
    suffix = p.suffix.lower()
    if suffix == ".safetensors":
        try:
            with safe_open(str(p), framework="pt") as fh:
                meta = fh.metadata() or {}
                out: dict[str, Any] = {k: fh.get_tensor(k) for k in fh.keys() if k in ("d2t", "t2d")}  # noqa: SIM118
                out["__metadata__"] = meta
                out["__keys__"] = list(fh.keys())
                return out
        except Exception as exc:
            raise UnusableInputError(
                f"unreadable safetensors file {p}: {_one_line(exc)}", path=str(p)
            ) from None
    if suffix in (".pt", ".pth", ".bin"):
        obj = safe_torch_load(p)
        if not isinstance(obj, dict):
            raise UnusableInputError(
                f"{p} holds a {type(obj).__name__}, expected a dict with 'd2t'/'t2d'", path=str(p)
            )
        return {**{k: v for k, v in obj.items() if k in ("d2t", "t2d")}, "__keys__": list(obj)}
    if suffix == ".npz":
        try:
            with np.load(str(p), allow_pickle=False) as archive:
                return {
                    **{k: torch.from_numpy(archive[k]) for k in archive.files if k in ("d2t", "t2d")},
                    "__keys__": list(archive.files),
                }
        except Exception as exc:
            raise UnusableInputError(f"unreadable NumPy file {p}: {_one_line(exc)}", path=str(p)) from None
    raise UnusableInputError(
        f"unsupported map file {p}: expected .safetensors, .pt or .npz (or a drafter directory)", path=str(p)
    )


def _npy_tensor(p: Path) -> torch.Tensor:
    try:
        return torch.from_numpy(np.array(np.load(str(p), allow_pickle=False)))
    except Exception as exc:
        raise UnusableInputError(f"unreadable NumPy file {p}: {_one_line(exc)}", path=str(p)) from None


def load_mapping(
    path: str | Path, target: str | Path | None = None, label: str | None = None
) -> LoadedMapping:
    """Read ``d2t``/``t2d`` from a drafter checkpoint (directory or weights file beside its
    ``config.json``), a map file (``.safetensors``/``.pt``/``.npz`` with ``d2t``/``t2d``, e.g. a
    ``vocab build`` output or a SpecForge cache) or a directory with speculators'
    ``d2t.npy``/``t2d.npy``. Sizes come from the same logic ``diagnose`` uses."""
    p = Path(path)
    name = label or (p.name if p.name not in ("", ".") else str(p))
    big_v_target = None
    if target is not None:
        big_v_target = open_target(target).vocab_size
    if not p.exists():
        raise UnusableInputError(f"no such checkpoint or map file: {p}", path=str(p))
    if p.is_dir() and not (p / "config.json").is_file():
        if (p / "d2t.npy").is_file() or (p / "t2d.npy").is_file():
            d2t = _npy_tensor(p / "d2t.npy") if (p / "d2t.npy").is_file() else None
            t2d = _npy_tensor(p / "t2d.npy") if (p / "t2d.npy").is_file() else None
            big_v = int(t2d.shape[0]) if t2d is not None and t2d.dim() == 1 else big_v_target
            return LoadedMapping(
                name,
                p,
                "speculators d2t.npy/t2d.npy",
                d2t,
                t2d,
                big_v,
                None if d2t is None else int(d2t.numel()),
            )
        raise UnusableInputError(
            f"{p} has neither config.json (a drafter) nor d2t.npy/t2d.npy (a map)", path=str(p)
        )
    if p.is_file() and p.suffix.lower() in (".npy",):
        if p.name in ("d2t.npy", "t2d.npy"):
            return load_mapping(p.parent, target, label)
        raise UnusableInputError(
            f"a lone .npy map file is ambiguous: {p} (pass the directory holding d2t.npy and t2d.npy)",
            path=str(p),
        )
    if p.is_file() and (not (p.parent / "config.json").is_file() or _looks_like_map_file(p)):
        obj = _tensor_dict_from_file(p)
        d2t, t2d = obj.get("d2t"), obj.get("t2d")
        if d2t is None and t2d is None:
            keys = ", ".join(map(str, obj.get("__keys__", [])[:10])) or "none"
            raise UnusableInputError(f"{p} holds neither 'd2t' nor 't2d' (keys: {keys})", path=str(p))
        meta = read_safetensors_metadata(obj.get("__metadata__") or {})
        big_v = int(t2d.shape[0]) if isinstance(t2d, torch.Tensor) and t2d.dim() == 1 else big_v_target
        v = (
            int(d2t.numel())
            if isinstance(d2t, torch.Tensor)
            else (int(t2d.bool().sum()) if isinstance(t2d, torch.Tensor) else None)
        )
        return LoadedMapping(name, p, "mapping file", d2t, t2d, big_v, v, meta)

    drafter = read_drafter(p, target)
    d2t_name, t2d_name = drafter.find("d2t"), drafter.find("t2d")
    d2t = drafter.ckpt.read_tensor(d2t_name) if d2t_name else None
    t2d = drafter.ckpt.read_tensor(t2d_name) if t2d_name else None
    return LoadedMapping(name, p, "checkpoint", d2t, t2d, drafter.target_vocab_size, drafter.draft_vocab_size)


def _looks_like_map_file(p: Path) -> bool:
    """A weights file that holds ``d2t``/``t2d`` and no ``lm_head``: a map, even beside a config.json."""
    if p.suffix.lower() != ".safetensors":
        return False

    try:
        with safe_open(str(p), framework="pt") as fh:
            keys = set(fh.keys())
    except Exception:
        return False
    return bool(keys & {"d2t", "t2d"}) and not any(k.endswith("lm_head.weight") for k in keys)


METADATA_KEY = "eagle3_forensics"


def safetensors_metadata(meta: dict[str, Any]) -> dict[str, str]:
    """Metadata as one JSON string under :data:`METADATA_KEY`: safetensors writes a metadata map in
    arbitrary key order, so a single key is what keeps the file byte-identical across runs."""
    return {METADATA_KEY: json.dumps({str(k): v for k, v in meta.items()}, sort_keys=True, default=str)}


def read_safetensors_metadata(raw: dict[str, str]) -> dict[str, str]:
    out = {str(k): str(v) for k, v in raw.items() if k not in ("format", METADATA_KEY)}
    try:
        packed = json.loads(raw.get(METADATA_KEY, "{}"))
    except json.JSONDecodeError:
        packed = {}
    if isinstance(packed, dict):
        out.update({str(k): str(v) for k, v in packed.items()})
    return out


def save_mapping(mapping: Any, out: str | Path, metadata: dict[str, Any] | None = None) -> Path:
    """Write ``d2t`` (int64 ``[v]``) and ``t2d`` (bool ``[V]``) to ``.safetensors`` (string metadata
    attached) or ``.pt`` (a ``{"d2t", "t2d"}`` dict, as SpecForge caches it). Atomic."""
    p = Path(out)
    d2t = torch.as_tensor(mapping.d2t).to(torch.int64).contiguous()
    t2d = torch.as_tensor(mapping.t2d).to(torch.bool).contiguous()
    suffix = p.suffix.lower()
    if suffix not in (".safetensors", ".pt"):
        raise BadArgumentsError(f"output {p} must end in .safetensors or .pt")
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp")
    if suffix == ".safetensors":
        save_file({"d2t": d2t, "t2d": t2d}, str(tmp), metadata=safetensors_metadata(metadata or {}))
    else:
        torch.save({"d2t": d2t, "t2d": t2d}, str(tmp))
    tmp.replace(p)
    return p


# -- lm_head rows -------------------------------------------------------------------------------------


def lm_head_row_check(
    checkpoint: str | Path, target: str | Path | None, *, required: bool = True
) -> LmHeadRowCheck | None:
    """Load the drafter's ``lm_head`` and its map and the target's ``lm_head`` (or tied embedding),
    then :func:`~eagle3_forensics.vocab.mapping.check_lm_head_rows`. A missing head (or ``target=None``)
    raises ``UnusableInputError``, or returns ``None`` when ``required`` is false."""

    def missing(reason: str) -> LmHeadRowCheck | None:
        if required:
            raise UnusableInputError(reason)
        return None

    if target is None:
        return missing("the lm_head row check needs the target model directory")
    m = load_mapping(checkpoint, target)
    ckpt = open_checkpoint(checkpoint)
    head_name = next((n for n in ("lm_head.weight", "model.lm_head.weight") if ckpt.has(n)), None)
    if head_name is None:
        return missing(f"{checkpoint} has no lm_head.weight to compare")
    tgt = open_target(target)
    if tgt.weights is None:
        return missing(f"target {target} has no weights: the lm_head row check needs them")
    target_head = tgt.lm_head()
    if target_head is None:
        target_head = tgt.embedding()  # tied embeddings
    if target_head is None:
        return missing(f"target {target} has neither lm_head.weight nor an embedding")
    try:
        return check_lm_head_rows(ckpt.read_tensor(head_name), target_head, m.d2t, m.t2d)
    except (ValueError, UnusableInputError) as exc:
        if required:
            raise UnusableInputError(f"lm_head row check: {exc}") from None
        return None
