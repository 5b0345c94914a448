"""One view over flat (EAGLE/SpecForge) and speculators-style drafter configs.

Engines read fields from different levels: SGLang reads nested ``eagle_config`` aux ids,
vLLM the top-level speculators field; speculators keeps the decoder's Llama fields inside
``transformer_layer_config``. :class:`DrafterConfig` therefore keeps every field *with the
level it stood at* and offers a merged view for the common case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TOP = "top"
LAYER = "transformer_layer_config"
EAGLE = "eagle_config"
SPECULATORS = "speculators_config"

AUX_FIELD = "eagle_aux_hidden_state_layer_ids"
NORM_FLAGS = ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")
MAX_DECODER_LAYERS = 1024  # far above any real drafter (1-3 layers)


@dataclass(frozen=True)
class Located:
    """A config value and the level it was found at."""

    level: str
    value: Any


class DrafterConfig:
    """Normalised, level-aware view of a drafter's ``config.json``."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        self.style = "speculators" if "speculators_model_type" in raw or LAYER in raw else "flat"
        self.fields: dict[str, list[Located]] = {}
        for level, mapping in self._levels():
            for key, value in mapping.items():
                self.fields.setdefault(key, []).append(Located(level, value))

    def _levels(self) -> list[tuple[str, dict[str, Any]]]:
        levels: list[tuple[str, dict[str, Any]]] = [(TOP, self.raw)]
        for name in (LAYER, EAGLE, SPECULATORS):
            value = self.raw.get(name)
            if isinstance(value, dict):
                levels.append((name, value))
        layer = self.raw.get(LAYER)
        if isinstance(layer, dict) and isinstance(layer.get(EAGLE), dict):
            levels.append((f"{LAYER}.{EAGLE}", layer[EAGLE]))
        return levels

    # -- lookups -------------------------------------------------------------------------
    def at(self, level: str, key: str, default: Any = None) -> Any:
        """The value of ``key`` at exactly ``level`` (``default`` when absent)."""
        for loc in self.fields.get(key, []):
            if loc.level == level:
                return loc.value
        return default

    def has_at(self, level: str, key: str) -> bool:
        return any(loc.level == level for loc in self.fields.get(key, []))

    def where(self, key: str) -> list[str]:
        """Every level at which ``key`` appears."""
        return [loc.level for loc in self.fields.get(key, [])]

    def get(self, key: str, default: Any = None) -> Any:
        """Merged view: the top level wins, then the decoder layer config, then nested dicts.

        For a speculators config the Llama fields live in ``transformer_layer_config`` while
        drafter flags live at the top; this lookup finds either.
        """
        order = (TOP, LAYER, EAGLE, f"{LAYER}.{EAGLE}", SPECULATORS)
        for level in order:
            for loc in self.fields.get(key, []):
                if loc.level == level and loc.value is not None:
                    return loc.value
        return default

    # -- common derived values ------------------------------------------------------------
    def int_field(self, key: str) -> int | None:
        value = self.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def hidden_size(self) -> int | None:
        return self.int_field("hidden_size")

    @property
    def target_hidden_size(self) -> int | None:
        return self.int_field("target_hidden_size")

    @property
    def vocab_size(self) -> int | None:
        return self.int_field("vocab_size")

    @property
    def draft_vocab_size(self) -> int | None:
        return self.int_field("draft_vocab_size")

    @property
    def num_hidden_layers(self) -> int | None:
        """Configured decoder layers, capped at :data:`MAX_DECODER_LAYERS`.

        Per-layer work (the engine load simulation expands parameters per layer) must stay
        bounded on an absurd value such as ``10**12``; ``int_field("num_hidden_layers")`` keeps it.
        """
        value = self.int_field("num_hidden_layers")
        return None if value is None else min(value, MAX_DECODER_LAYERS)

    @property
    def architectures(self) -> list[str]:
        value = self.raw.get("architectures")
        return [str(a) for a in value] if isinstance(value, list) else []

    def flag(self, key: str) -> bool | None:
        """A boolean flag from the merged view (``None`` when absent or not a bool)."""
        value = self.get(key)
        return value if isinstance(value, bool) else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "style": self.style,
            "fields": {
                k: [{"level": loc.level, "value": loc.value} for loc in v]
                for k, v in sorted(self.fields.items())
                if k not in (LAYER, EAGLE, SPECULATORS)
            },
        }
