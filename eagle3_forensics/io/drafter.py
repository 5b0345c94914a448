"""A drafter as read from disk: the checkpoint, its config view, the key layout and sizes.

This is the reading half of what every check sees (:class:`eagle3_forensics.checks.context.Context`
adds the engine simulations and the vocabulary verdict). Anything that only needs to *read* a
drafter — the vocabulary tools, the reference drafter — uses this, not the checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from eagle3_forensics.io.checkpoint import Checkpoint, open_checkpoint
from eagle3_forensics.io.config import DrafterConfig
from eagle3_forensics.io.layout import FormatInfo, detect_format
from eagle3_forensics.io.target import TargetInfo, open_target

if TYPE_CHECKING:
    import torch

# Tensors small enough to read in full for any real drafter.
SMALL_TENSOR_ELEMENTS = 1 << 22


@dataclass
class DrafterFiles:
    """The opened checkpoint, its config and (optionally) the target it is meant for."""

    ckpt: Checkpoint
    target: TargetInfo | None = None
    _tensors: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)
    _arrays: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @cached_property
    def cfg(self) -> DrafterConfig:
        return DrafterConfig(self.ckpt.config)

    @cached_property
    def fmt(self) -> FormatInfo:
        return detect_format(self.ckpt, self.cfg)

    def array(self, name: str) -> np.ndarray | None:
        """A small tensor's values in full as numpy (cached; no torch for safetensors); ``None`` if absent
        or too big to read whole. bfloat16/float8 come widened to float32."""
        info = self.ckpt.tensors.get(name)
        if info is None or info.numel > SMALL_TENSOR_ELEMENTS:
            return None
        if name not in self._arrays:
            self._arrays[name] = self.ckpt.read_array(name)
        return self._arrays[name]

    def tensor(self, name: str) -> torch.Tensor | None:
        """A small tensor in full, as stored, as torch (cached; imports torch); ``None`` as for :meth:`array`."""
        info = self.ckpt.tensors.get(name)
        if info is None or info.numel > SMALL_TENSOR_ELEMENTS:
            return None
        if name not in self._tensors:
            self._tensors[name] = self.ckpt.read_tensor(name)
        return self._tensors[name]

    def find(self, *names: str) -> str | None:
        """The first of ``names`` (with or without a ``model.`` prefix) present in the checkpoint."""
        for n in names:
            for cand in (n, "model." + n):
                if cand in self.ckpt.tensors:
                    return cand
        return None

    def shape(self, *names: str) -> tuple[int, ...] | None:
        name = self.find(*names)
        return None if name is None else self.ckpt.tensors[name].shape

    @property
    def target_vocab_size(self) -> int | None:
        """V: config vocab_size, else t2d length, else the target's."""
        if self.cfg.vocab_size is not None:
            return self.cfg.vocab_size
        t2d = self.shape("t2d")
        if t2d:
            return t2d[0]
        return self.target.vocab_size if self.target else None

    @property
    def draft_vocab_size(self) -> int | None:
        """v: config draft_vocab_size, else lm_head rows, else d2t length."""
        if self.cfg.draft_vocab_size is not None:
            return self.cfg.draft_vocab_size
        for name in ("lm_head.weight", "d2t"):
            s = self.shape(name)
            if s:
                return s[0]
        return None

    @property
    def reduced_vocab(self) -> bool:
        v, big_v = self.draft_vocab_size, self.target_vocab_size
        return v is not None and big_v is not None and v < big_v

    @property
    def target_layers(self) -> int | None:
        return self.target.num_hidden_layers if self.target else None


def read_drafter(path: str | Path, target: str | Path | None = None) -> DrafterFiles:
    """Open a drafter directory (or weights file) header-first, with its target when given."""
    return DrafterFiles(open_checkpoint(path), open_target(target) if target is not None else None)


__all__ = ["SMALL_TENSOR_ELEMENTS", "DrafterFiles", "read_drafter"]
