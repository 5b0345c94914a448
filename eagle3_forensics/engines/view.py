"""Which drafter class a release builds for a config, and the config as that class reads it."""

from __future__ import annotations

from typing import Any

from eagle3_forensics.engines.rules import ConfigStyle, EngineRules
from eagle3_forensics.io.config import LAYER, TOP, DrafterConfig


def layer_model_type(cfg: DrafterConfig) -> Any:
    """The decoder's model_type: transformer_layer_config's for speculators configs (default llama)."""
    if cfg.style == ConfigStyle.SPECULATORS:
        return cfg.at(LAYER, "model_type", "llama")
    return cfg.at(TOP, "model_type")


def rules_for(rules: EngineRules, cfg: DrafterConfig) -> EngineRules:
    """The table of the drafter class ``rules``' release builds for this config."""
    return rules.for_config(cfg.style, cfg.architectures, layer_model_type(cfg))


def engine_view(rules: EngineRules, cfg: DrafterConfig) -> DrafterConfig:
    """The config as the drafter class reads it.

    A release with a speculators shim (vLLM) does not read a speculators config as written: it
    builds its own config from ``transformer_layer_config`` plus the top-level fields the shim
    copies, so e.g. a top-level ``num_aux_hidden_states`` or ``bias`` never reaches the class.
    Every other config is read as written. ``rules`` may be the release's or the class's table.
    """
    if getattr(cfg, "_is_engine_view", False) or cfg.style != ConfigStyle.SPECULATORS:
        return cfg
    shim = rules_for(rules, cfg).speculators_shim
    if shim is None:
        return cfg
    views: dict[int, DrafterConfig] = cfg.__dict__.setdefault("_engine_views", {})
    view = views.get(id(shim))
    if view is None:
        raw = shim.apply(cfg.raw, LAYER)
        raw[LAYER] = cfg.raw.get(LAYER)  # kept: the layer model_type picks the class, as before
        view = DrafterConfig(raw)
        view.__dict__["_is_engine_view"] = True
        views[id(shim)] = view
    return view
