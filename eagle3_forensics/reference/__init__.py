"""A clean-room EAGLE-3 reference: drafter, target wrapper and the demo trainer.

* :mod:`.drafter` — :class:`~.drafter.Eagle3Drafter` (plain PyTorch, :mod:`.drafter.model`) and
  :func:`~.drafter.load_drafter` (:mod:`.drafter.loader`), which reads every drafter format
  ``diagnose`` reads, either the way its writer meant it (``engine="reference"``) or the way an
  engine's rule table says that engine would load it (``engine="sglang"`` ...).
* :mod:`.target` — :class:`~.target.TargetModel`, any local Hugging Face causal LM with aux
  hidden-state capture (index convention documented there) and a KV cache.
* :mod:`.train` — the small trainers used by :mod:`eagle3_forensics.demo.world`.

Nothing here is copied from an engine; it is written from the description in
``docs/reference/acceptance.md`` §1 and ``docs/reference/formats.md`` §0.
"""

from __future__ import annotations

__all__ = ["drafter", "target", "train"]
