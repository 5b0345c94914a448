"""Drafter config knobs that decide acceptance at serving time, per engine release read.

A sliding-window drafter (``layer_types`` with ``"sliding_attention"`` and a ``sliding_window``) is
served with its window only where the release applies one: vLLM's drafter classes build their
layers through the target's decoder layer, which reads ``layer_types`` / ``sliding_window`` from the
drafter config (``llama.py`` ``LlamaDecoderLayer``, ``qwen3_eagle3.py``); SGLang's ``llama_eagle3.py``
ignores the config and, from the releases that have it, applies only
``--speculative-draft-window-size`` to every draft layer (``llama_eagle3.py`` and
``arg_groups/speculative_hook.py``); older releases have no such option, so the drafter runs full
attention. Each release's rule is the ``knobs.draft_window`` section of its record.
Without its window a drafter trained on short windows loses acceptance on long contexts
(speculators#684: acceptance length 2.30 at 2k falls to 1.09 at 16k).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from eagle3_forensics.engines.catalog import each
from eagle3_forensics.engines.codec import decode
from eagle3_forensics.engines.proof import Citation, Proof
from eagle3_forensics.engines.releases import EngineMap
from eagle3_forensics.engines.rules import EngineRules


class WindowSource(StrEnum):
    """Where a release takes a draft layer's attention window from."""

    CONFIG = "config"  # the drafter config's layer_types / sliding_window
    LAUNCH_OPTION = "launch_option"  # only a launch option (the config is ignored)
    NONE = "none"  # nowhere: every draft layer attends to the whole context


@dataclass(frozen=True)
class DraftWindow:
    """How one release (``version``, read from its wheel) applies a drafter's sliding window."""

    engine: str
    version: str
    source: WindowSource
    citation: Citation
    option: str | None = None
    proof: Proof = Proof.READ

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", WindowSource(self.source))
        if (self.source is WindowSource.LAUNCH_OPTION) != (self.option is not None):
            raise ValueError(f"{self.engine} {self.version}: a launch option exactly when the source is one")


def _window(engine: str) -> tuple[DraftWindow, ...]:
    out = []
    for record, body in each(engine, "knobs"):
        if "draft_window" in body:
            w = body["draft_window"]
            out.append(
                decode(
                    DraftWindow,
                    {k: v for k, v in w.items() if k != "cite"},
                    f"{record.label} knobs.draft_window",
                    engine=engine,
                    citation=record.cited([w["cite"]])[0],
                )
            )
    return tuple(out)


# engine -> how each release read applies a drafter's sliding window (read from the records on first use)
DRAFT_WINDOWS: EngineMap[tuple[DraftWindow, ...]] = EngineMap(_window)


def draft_window_for(rules: EngineRules) -> DraftWindow | None:
    """The window rule read inside the range of the release table ``rules`` (``None``: not read)."""
    windows = DRAFT_WINDOWS.get(rules.name, ())
    inside = [w for w in windows if rules.pinned and rules.covers(w.version)]
    return inside[-1] if inside else None


def drafter_window(cfg: Any) -> int | None:
    """The sliding window a drafter config trains some layer with (``None``: full attention only)."""
    layer_types = cfg.get("layer_types")
    window = cfg.get("sliding_window")
    if not isinstance(layer_types, list) or "sliding_attention" not in layer_types:
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        return None
    return window


# -- draft model_types vLLM rewrites into an MTP model ---------------------------------------------
# SpeculativeConfig.hf_config_override runs on every draft config, EAGLE-3 ones included: a draft whose
# model_type is one of these (a config copied from such a target) becomes that family's MTP model,
# which the eagle3 method then refuses. Read with an AST pass over the function (plain `model_type ==`
# / `in` tests whose branch rewrites model_type); rewrites keyed on architectures[0] (MiMo, GLM-4-MoE,
# ...) or on a substring (exaone4_5) are not in these lists. Each release's list is the record's
# ``knobs.mtp_rewrites``; the loader tables take their ``rejected_model_types`` from it.


@dataclass(frozen=True)
class MtpRewrites:
    version: str
    model_types: tuple[str, ...]
    citation: Citation


def mtp_rewrites(engine: str = "vllm") -> tuple[MtpRewrites, ...]:
    """The MTP rewrite list of every release read, oldest first."""
    out = []
    for record, body in each(engine, "knobs"):
        if "mtp_rewrites" in body:
            m = body["mtp_rewrites"]
            fields = {k: v for k, v in m.items() if k != "cite"}
            out.append(
                decode(
                    MtpRewrites,
                    fields,
                    f"{record.label} knobs.mtp_rewrites",
                    citation=record.cited([m["cite"]])[0],
                )
            )
    return tuple(out)
