"""Writing a reference drafter back out in a trainer's key layout (used by the demo trainer)."""

from __future__ import annotations

import re

import torch

from eagle3_forensics.reference.drafter.model import Eagle3Drafter

# ---------------------------------------------------------------------------------------------
# export (used by the demo trainer)
# ---------------------------------------------------------------------------------------------


def export_tensors(
    model: Eagle3Drafter,
    *,
    layout: str = "midlayer",
    include_embed: bool = False,
    t2d: torch.Tensor | None = None,
    dtype: torch.dtype | None = None,
) -> dict[str, torch.Tensor]:
    """The drafter's tensors named as a trainer writes them.

    ``layout="midlayer"``: EAGLE/SpecForge names (``midlayer.*``; layers 1.. as ``midlayer.{i}.*``);
    ``layout="layers"``: speculators names (``layers.{i}.*``). ``d2t`` is written as offsets.
    """
    if layout not in ("midlayer", "layers"):
        raise ValueError("layout must be 'midlayer' or 'layers'")
    out: dict[str, torch.Tensor] = {}
    for name, t in model.state_dict().items():
        if name == "embed_tokens.weight" and not include_embed:
            continue
        key = name
        if layout == "midlayer":
            key = re.sub(r"^layers\.0\.", "midlayer.", key)
            key = re.sub(r"^layers\.(\d+)\.", r"midlayer.\1.", key)
        t = t.detach().cpu()
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        out[key] = t.contiguous()
    if t2d is not None:
        out["t2d"] = t2d.to(torch.bool).contiguous()
    return out
