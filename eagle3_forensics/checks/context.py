"""What every check sees: the drafter as read from disk, plus the engine simulations and the
vocabulary verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from eagle3_forensics.engines import ENGINES, release_label, resolve_release
from eagle3_forensics.engines.aux_capture import AuxReading, aux_capture
from eagle3_forensics.engines.rules import EngineRules
from eagle3_forensics.engines.simulate import LoadReport, simulate_load
from eagle3_forensics.engines.view import rules_for
from eagle3_forensics.io.drafter import SMALL_TENSOR_ELEMENTS, DrafterFiles
from eagle3_forensics.vocab.mapping.classify import VocabClassification, classify_mapping

if TYPE_CHECKING:
    from eagle3_forensics.checks.aux_measured import MeasuredAux


@dataclass
class Context(DrafterFiles):
    """A :class:`DrafterFiles` judged by engine releases (``explicit_engines``: the user named them).

    ``releases`` are the release tables judged (``engine_names`` alone means each engine's newest);
    :attr:`engines` are the tables of the drafter classes those releases build for this config.
    """

    engine_names: list[str] = field(default_factory=list)
    explicit_engines: bool = False
    releases: list[EngineRules] = field(default_factory=list)
    # architectures[0] of the model a --launch serves (its config.json), used when there is no --target
    served_architecture: str | None = None
    # the aux-layer ids measured on the target (probe.aux_trained), when a caller measured them
    measured_aux: MeasuredAux | None = None

    def __post_init__(self) -> None:
        if not self.releases:
            self.releases = [ENGINES[n] if n in ENGINES else resolve_release(n) for n in self.engine_names]
        self.engine_names = [r.name for r in self.releases]

    @cached_property
    def engines(self) -> list[EngineRules]:
        return [rules_for(r, self.cfg) for r in self.releases]

    def rules(self, engine: str) -> EngineRules:
        """The class-resolved table judged for ``engine``."""
        return next(r for r in self.engines if r.name == engine)

    @cached_property
    def loads(self) -> dict[str, LoadReport]:
        return {e.name: simulate_load(e, self.ckpt, self.cfg) for e in self.releases}

    @property
    def target_architecture(self) -> str | None:
        if self.target is None:
            return self.served_architecture
        archs = self.target.architectures
        return archs[0] if archs else None

    def aux(self, engine: str, runner: str | None = None) -> AuxReading:
        """What ``engine`` captures for this drafter (on ``--target``'s class, else the assumed one)."""
        return aux_capture(self.rules(engine), self.cfg, self.target_architecture, self.target_layers, runner)

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
        rules = self.rules(engine)
        return {"engine_release": release_label(rules), "engine_revision": rules.revision}

    def releases_judged(self) -> dict[str, str]:
        """Engine -> the release label it was judged by."""
        return {r.name: release_label(r) for r in self.releases}


__all__ = ["SMALL_TENSOR_ELEMENTS", "Context"]
