"""What every check sees: the drafter as read from disk, plus the engine simulations and the
vocabulary verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from eagle3_forensics.engines import ENGINES
from eagle3_forensics.engines.rules import EngineRules
from eagle3_forensics.engines.simulate import LoadReport, simulate_load
from eagle3_forensics.io.drafter import SMALL_TENSOR_ELEMENTS, DrafterFiles
from eagle3_forensics.vocab.mapping import VocabClassification, classify_mapping


@dataclass
class Context(DrafterFiles):
    """A :class:`DrafterFiles` judged by ``engine_names`` (``explicit_engines``: the user named them)."""

    engine_names: list[str] = field(default_factory=list)
    explicit_engines: bool = False

    @property
    def engines(self) -> list[EngineRules]:
        return [ENGINES[n] for n in self.engine_names]

    @cached_property
    def loads(self) -> dict[str, LoadReport]:
        return {e.name: simulate_load(e, self.ckpt, self.cfg) for e in self.engines}

    @cached_property
    def vocab(self) -> VocabClassification:
        d2t_name, t2d_name = self.find("d2t"), self.find("t2d")
        # numpy values (bfloat16/float8 widened to float32: still reported as a non-integer map)
        d2t = self.array(d2t_name) if d2t_name else None
        t2d = self.array(t2d_name) if t2d_name else None
        return classify_mapping(d2t, t2d, self.target_vocab_size, self.draft_vocab_size)

    def evidence_base(self, engine: str | None = None) -> dict[str, Any]:
        if engine is None:
            return {}
        return {"engine_revision": ENGINES[engine].revision}


__all__ = ["SMALL_TENSOR_ELEMENTS", "Context"]
