"""The target model a drafter will serve with: config first, weights only when present."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.io.checkpoint import (
    BIN_FILE,
    BIN_INDEX,
    SAFETENSORS_FILE,
    SAFETENSORS_INDEX,
    Checkpoint,
    open_checkpoint,
    read_config,
)

if TYPE_CHECKING:
    import torch

_EMBED_SUFFIX = "embed_tokens.weight"


@dataclass
class TargetInfo:
    path: Path
    config: dict[str, Any]
    weights: Checkpoint | None
    has_tokenizer: bool

    def _get(self, key: str) -> Any:
        # Multimodal targets keep the language model's fields in text_config.
        text = self.config.get("text_config")
        if isinstance(text, dict) and key in text:
            return text[key]
        return self.config.get(key)

    def _int(self, key: str) -> int | None:
        value = self._get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def vocab_size(self) -> int | None:
        return self._int("vocab_size")

    @property
    def hidden_size(self) -> int | None:
        return self._int("hidden_size")

    @property
    def num_hidden_layers(self) -> int | None:
        return self._int("num_hidden_layers")

    @property
    def max_position_embeddings(self) -> int | None:
        return self._int("max_position_embeddings")

    def rope(self) -> dict[str, Any]:
        return {
            k: self._get(k)
            for k in ("rope_theta", "rope_scaling", "rope_parameters")
            if self._get(k) is not None
        }

    @property
    def architectures(self) -> list[str]:
        value = self.config.get("architectures")
        return [str(a) for a in value] if isinstance(value, list) else []

    def tensor_name(self, suffix: str) -> str | None:
        if self.weights is None:
            return None
        names = [n for n in self.weights.names() if n.endswith(suffix)]
        # Prefer the language model's tensor (shortest name) over vision towers etc.
        return min(names, key=len) if names else None

    def embedding(self) -> torch.Tensor | None:
        """The target's input embedding as stored, as torch (imports torch; its callers compute with it)."""
        name = self.tensor_name(_EMBED_SUFFIX)
        return None if name is None or self.weights is None else self.weights.read_tensor(name)

    def lm_head(self) -> torch.Tensor | None:
        """The target's ``lm_head.weight`` as stored, as torch (imports torch)."""
        name = "lm_head.weight" if self.weights is not None and self.weights.has("lm_head.weight") else None
        return None if name is None or self.weights is None else self.weights.read_tensor(name)

    def summary(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_hidden_layers,
            "architectures": self.architectures,
            "weights": self.weights is not None,
            "tokenizer": self.has_tokenizer,
        }


def open_target(path: str | Path) -> TargetInfo:
    """Read the target's ``config.json`` and list its weights (header only) when present."""
    p = Path(path)
    if not p.is_dir():
        raise UnusableInputError(f"target directory not found: {p}", path=str(p))
    config = read_config(p)
    has_weights = any((p / f).exists() for f in (SAFETENSORS_FILE, SAFETENSORS_INDEX, BIN_FILE, BIN_INDEX))
    weights = open_checkpoint(p) if has_weights else None
    has_tok = (p / "tokenizer.json").is_file() or (p / "tokenizer.model").is_file()
    return TargetInfo(p, config, weights, has_tok)
