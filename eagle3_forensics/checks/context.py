"""What every check sees: the opened checkpoint, its config, the engine simulations, the target."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import torch

from ..checkpoint import Checkpoint
from ..config import DrafterConfig
from ..engines import ENGINES
from ..engines.rules import EngineRules
from ..engines.simulate import LoadReport, simulate_load
from ..layout import FormatInfo, detect_format
from ..target import TargetInfo
from ..vocab import VocabClassification, classify_mapping

# Tensors small enough to read in full for any real drafter.
SMALL_TENSOR_ELEMENTS = 1 << 22


def _numpy_ready(t: torch.Tensor | None) -> torch.Tensor | None:
    """bfloat16 / float8 have no numpy dtype: widen them to float32 (still reported as a non-integer map)."""
    if (
        t is not None
        and t.is_floating_point()
        and t.dtype not in (torch.float16, torch.float32, torch.float64)
    ):
        return t.float()
    return t


@dataclass
class Context:
    ckpt: Checkpoint
    engine_names: list[str]
    target: TargetInfo | None = None
    explicit_engines: bool = False  # the user named the engines (not "all")
    _tensors: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)

    @cached_property
    def cfg(self) -> DrafterConfig:
        return DrafterConfig(self.ckpt.config)

    @cached_property
    def fmt(self) -> FormatInfo:
        return detect_format(self.ckpt, self.cfg)

    @property
    def engines(self) -> list[EngineRules]:
        return [ENGINES[n] for n in self.engine_names]

    @cached_property
    def loads(self) -> dict[str, LoadReport]:
        return {e.name: simulate_load(e, self.ckpt, self.cfg) for e in self.engines}

    def tensor(self, name: str) -> torch.Tensor | None:
        """A small tensor in full (cached); ``None`` if absent or too big to read whole."""
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

    @cached_property
    def vocab(self) -> VocabClassification:
        d2t_name, t2d_name = self.find("d2t"), self.find("t2d")
        d2t = _numpy_ready(self.tensor(d2t_name)) if d2t_name else None
        t2d = _numpy_ready(self.tensor(t2d_name)) if t2d_name else None
        return classify_mapping(d2t, t2d, self.target_vocab_size, self.draft_vocab_size)

    @property
    def target_layers(self) -> int | None:
        return self.target.num_hidden_layers if self.target else None

    def evidence_base(self, engine: str | None = None) -> dict[str, Any]:
        if engine is None:
            return {}
        return {"engine_revision": ENGINES[engine].revision}
