"""How a rule in an engine table is known: run by the release's own code here, or read from its wheel."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Proof(StrEnum):
    """Whether a release's rule was confirmed by running its own code on a CPU, or only read."""

    RAN = "ran"  # the release's own code ran here (loader tier, config validation) and agrees
    READ = "read"  # read from the released wheel's source; no CPU build of it could run it
    DERIVED = "derived"  # derived from the released wheel by static analysis (make engine-extract)


@dataclass(frozen=True)
class Citation:
    """One source file of a released wheel that a table's rules were read from."""

    package: str  # PyPI name, e.g. "vllm"
    version: str  # release, e.g. "1.2.0"
    path: str  # path inside the wheel, e.g. "vllm/config/speculative.py"
    sha256: str  # of that file in that wheel: `make engine-drift` compares it with newer releases
