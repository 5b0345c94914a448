"""What a release does at start-up with a speculative config, per release, as data (vLLM; SGLang: the
context rule only).

:class:`StartupRules` is the part of a launch table (``LaunchRules.startup``) that decides whether
the server starts at all and what it runs: the keys ``SpeculativeConfig`` accepts (a pydantic
dataclass with ``extra="forbid"``: any other key is a start-up error), the model runners and what
forces one, P-EAGLE and ``parallel_drafting``, whether an explicit method survives the draft-name
rule, the speculators verifier rule and the context rule: what a draft whose limit is below the
target's gets (raised, the server lowered, or a refusal unless an environment variable is set) and
which RoPE types a raised limit changes. Each release's rules are the ``startup`` section of its record
(``engines/records/``); every fact was read in the released wheel named in ``sources`` (and ran where
``ran`` says so). An SGLang record holds only the context rule (no keys, no runners).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any

from eagle3_forensics.engines.catalog import each
from eagle3_forensics.engines.codec import decode
from eagle3_forensics.engines.rules import EngineRules


class AuxEffect(StrEnum):
    """What ``eagle_config.use_aux_hidden_state: false`` does under one model runner."""

    SILENT = "silent"  # no aux capture, no fc: the drafter runs on one H-wide state (no error)
    CRASH = "crash"  # aux states captured anyway, fc not built: an assert fails at the first step


class ParallelDrafting(StrEnum):
    """What ``parallel_drafting: true`` does for ``method: eagle`` / ``eagle3`` (P-EAGLE)."""

    FORCES_V1 = "forces_v1"  # the V1 runner is used; a drafter without mask_hidden fails to load
    REFUSED = "refused"  # SpeculativeConfig raises at start-up


class ContextRule(StrEnum):
    """What a draft whose ``max_position_embeddings`` is below the target's ``max_model_len`` does."""

    RAISES_DRAFT = "raises_draft"  # the draft's limit is raised to the target's (every RoPE type)
    LIMITS_SERVER_V2 = "limits_server_v2"  # non cache-only RoPE: V2 lowers the server's max_model_len
    LIMITS_SERVER = "limits_server"  # the same on every runner
    # the draft is given the target's limit: start-up fails unless context_env is set, which raises the
    # draft's max_position_embeddings to the target's (every RoPE type)
    REFUSED_UNLESS_ENV = "refused_unless_env"


@dataclass(frozen=True)
class RunnerRule:
    """A model runner of a release: when it is used and what it does with ``use_aux_hidden_state: false``."""

    name: str
    when: str
    default: bool = False
    aux_disabled: AuxEffect = AuxEffect.SILENT


@dataclass(frozen=True)
class StartupRules:
    """Start-up validation and runner choice of one vLLM release (see the module docstring)."""

    config_keys: frozenset[str]  # every key SpeculativeConfig(**json) accepts
    forbids_extra_keys: bool  # @config: pydantic ConfigDict(extra="forbid")
    removed_keys: tuple[tuple[str, str], ...] = ()  # (key, the release that removed it)
    runners: tuple[RunnerRule, ...] = ()
    runner_env: str = "VLLM_USE_V2_MODEL_RUNNER"
    env_must_be: str | None = None  # any other value of runner_env stops the server (0.34: "1")
    # speculative-config keys that, when true, make the release fall back to the V1 runner
    v1_forced_by: tuple[str, ...] = ()
    parallel_drafting: ParallelDrafting = ParallelDrafting.FORCES_V1
    # speculators_model_type values the release refuses when served as `vllm serve CHECKPOINT`
    speculators_refused: tuple[tuple[str, str], ...] = ()
    speculators_sets: tuple[
        tuple[str, str], ...
    ] = ()  # (model type, key set true): peagle -> parallel_drafting
    # explicit methods kept as written; any other explicit method still goes through the draft-name
    # rule (None: every explicit method is kept)
    methods_kept: tuple[str, ...] | None = None
    verifier_must_be_remote: bool = False
    context: ContextRule = ContextRule.RAISES_DRAFT
    cache_only_rope_types: frozenset[str] = frozenset()
    context_env: str | None = None  # REFUSED_UNLESS_ENV: the variable that lets a longer context start
    # the draft's own limit is max_position_embeddings times its RoPE factor, except for these RoPE types
    # and RoPE groups holding these keys (SGLang get_context_length); False: max_position_embeddings
    context_scaled: bool = False
    context_factor_exempt: tuple[str, ...] = ()
    # RoPE types whose frequencies or scale the release derives from max_position_embeddings, so raising
    # it to the target's runs the draft with another RoPE than its config's: (type, condition), the
    # condition "" (always), "with:KEY" or "without:KEY" (a key of that RoPE parameter group)
    rope_changed_by_raise: tuple[tuple[str, str], ...] = ()
    # keys SpeculativeConfig accepts as fields but refuses when set (not null): (key, the error it raises)
    refused_values: tuple[tuple[str, str], ...] = ()
    # method-specific options (config/speculative.py _METHOD_SPECIFIC_OPTIONS): set with a method whose
    # speculator config does not list them in supported_options, the server refuses to start
    method_options: tuple[str, ...] = ()
    eagle3_options: tuple[str, ...] = ()  # the method-specific options the eagle3 speculator supports
    sources: tuple[str, ...] = ()
    # the fields above whose rule ran through the release's own code on this CPU (the loader tier,
    # tests/loaders/test_vllm034_startup.py); the others were read. Findings from them say "ran".
    ran: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        for attr, enum in (("parallel_drafting", ParallelDrafting), ("context", ContextRule)):
            object.__setattr__(self, attr, enum(getattr(self, attr)))
        if self.runners and sum(r.default for r in self.runners) != 1:
            raise ValueError("startup rules: exactly one runner is the default")
        bad = [
            c for _, c in self.rope_changed_by_raise if c and c.partition(":")[0] not in ("with", "without")
        ]
        if bad:
            raise ValueError(f"startup rules: rope_changed_by_raise conditions {bad} are not with:/without:")
        if any(k in self.config_keys for k, _ in self.removed_keys):
            raise ValueError("startup rules: a removed key is still accepted")
        if not set(self.eagle3_options) <= set(self.method_options):
            raise ValueError("startup rules: eagle3_options must be method options")
        unknown = set(self.ran) - {f for f in self.__dataclass_fields__ if f != "ran"}
        if unknown:
            raise ValueError(f"startup rules: ran names unknown fields {sorted(unknown)}")

    @property
    def eagle3_refused_options(self) -> tuple[str, ...]:
        """The method-specific options an eagle3 launch may not set."""
        return tuple(o for o in self.method_options if o not in self.eagle3_options)

    def raises_draft(self, rope_types: list[str]) -> bool:
        """Whether a short draft that serves at all runs with its max_position_embeddings raised to the
        target's (REFUSED_UNLESS_ENV: it serves only with ``context_env`` set, which raises it)."""
        if self.context in (ContextRule.RAISES_DRAFT, ContextRule.REFUSED_UNLESS_ENV):
            return True
        return all(t in self.cache_only_rope_types for t in rope_types)

    def changed_by_raise(self, group: Mapping[str, Any]) -> bool:
        """Whether raising max_position_embeddings changes this RoPE parameter group's rotary."""
        kind = str(group.get("rope_type", group.get("type", "default")))
        return any(
            rope_type == kind and all(_holds(c, group) for c in conditions.split(",") if c)
            for rope_type, conditions in self.rope_changed_by_raise
        )

    def limit(self, max_position_embeddings: int, rope: Any) -> int:
        """A config's own context limit as the release derives it (``context_scaled``) from its
        ``max_position_embeddings`` and its RoPE dict (``rope_parameters``, else ``rope_scaling``)."""
        if not self.context_scaled or not isinstance(rope, Mapping):
            return max_position_embeddings
        kind = str(rope.get("rope_type", rope.get("type", "default")))
        factor = rope.get("factor", 1)
        exempt = kind in self.context_factor_exempt or any(k in rope for k in self.context_factor_exempt)
        if exempt or isinstance(factor, bool) or not isinstance(factor, int | float):
            return max_position_embeddings
        return int(factor * max_position_embeddings)

    def runner(self, name: str) -> RunnerRule | None:
        return next((r for r in self.runners if r.name == name), None)

    @property
    def default_runner(self) -> RunnerRule | None:
        return next((r for r in self.runners if r.default), None)


def _holds(condition: str, group: Mapping[str, Any]) -> bool:
    how, _, key = condition.partition(":")
    return (key in group) == (how == "with")


def startup_for(rules: EngineRules) -> StartupRules | None:
    """The start-up rules read in the release ``rules`` starts with (``None``: none read there)."""
    return _startup(rules.name, rules.first)


@cache
def _startup(engine: str, first: str) -> StartupRules | None:
    for record, body in each(engine, "startup"):
        if record.first == first:
            return decode(StartupRules, body, f"{record.label} startup")
    return None


__all__ = [
    "AuxEffect",
    "ContextRule",
    "ParallelDrafting",
    "RunnerRule",
    "StartupRules",
    "startup_for",
]
