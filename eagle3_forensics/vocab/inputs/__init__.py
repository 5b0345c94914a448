"""The inputs of vocabulary forensics, one concern per module (every name importable from here, lazily):

* :mod:`.tokens` — token-id files: :func:`load_token_ids` (``.safetensors``, ``.pt``, ``.npy``, ``.npz``)
  and :func:`iter_token_chunks`, which streams them a block of rows at a time;
* :mod:`.chat` — a local ``tokenizer.json`` and its chat template;
* :mod:`.corpus` — :func:`tokenize_corpus` over a JSONL of texts, pairs or conversations, and
  :func:`build_vocab_mapping_from_data` from either kind of training data;
* :mod:`.maps` — :func:`load_mapping` / :func:`save_mapping` for ``d2t``/``t2d`` in every format read,
  and :func:`lm_head_row_check`."""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "TOKENIZER_FILE": "chat",
    "load_tokenizer": "chat",
    "read_tokenizer_config": "chat",
    "read_chat_template": "chat",
    "render_chat": "chat",
    "build_vocab_mapping_from_data": "corpus",
    "TokenizedCorpus": "corpus",
    "read_jsonl": "corpus",
    "tokenize_corpus": "corpus",
    "LoadedMapping": "maps",
    "load_mapping": "maps",
    "METADATA_KEY": "maps",
    "safetensors_metadata": "maps",
    "read_safetensors_metadata": "maps",
    "save_mapping": "maps",
    "lm_head_row_check": "maps",
    "IDS_KEY": "tokens",
    "MASK_KEY": "tokens",
    "SUFFIXES": "tokens",
    "load_token_ids": "tokens",
    "CHUNK_TOKENS": "tokens",
    "iter_token_chunks": "tokens",
    "token_file_size": "tokens",
    "build_vocab_mapping_from_file": "tokens",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
