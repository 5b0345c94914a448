"""The one result type every check returns, and the catalogue of finding codes.

Notebooks, the CLI, JSON output and HTML reports all consume :class:`Finding`, so a new
check never needs a new renderer. Codes are stable strings; each is documented in
``docs/findings.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    """How bad a finding is. ``error`` means the drafter will not work as trained."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 0, "warning": 1, "info": 2}[self.value]


# code -> one-line summary. The order of both tables is the order of docs/findings.md.
# The static checks (eagle3_forensics/checks/; docs/architecture.md maps each prefix to its module).
CHECK_CATALOGUE: dict[str, str] = {
    "CHECKPOINT_UNREADABLE": "The checkpoint or its config cannot be read at all.",
    "NOT_EAGLE3": "The files do not describe an EAGLE-3 drafter.",
    "CONFIG_UNREADABLE_BY_ENGINE": "The engine cannot parse or accept this config layout.",
    "KEYS_DROPPED_BY_ENGINE": "The engine silently ignores checkpoint tensors.",
    "KEYS_REJECTED_BY_ENGINE": "The engine refuses to load a checkpoint tensor (loud failure).",
    "PARAMS_UNFILLED": "Engine parameters that no checkpoint tensor fills stay at initialisation.",
    "MULTI_LAYER_DRAFTER": "More than one decoder layer, which the engine does not serve as trained.",
    "LM_HEAD_MISSING": "No draft lm_head for a reduced draft vocabulary.",
    "EMBED_TOKENS_PROBLEM": "The embedding the engine will use is missing, wrong-shaped or not the trained one.",
    "D2T_MISSING": "No usable d2t for a reduced vocabulary: the engine maps draft id i to target id i.",
    "D2T_ABSOLUTE": "d2t holds absolute target ids where the engine expects offsets.",
    "D2T_DOUBLE_OFFSET": "d2t had the absolute→offset conversion applied twice.",
    "D2T_T2D_MISMATCH": "d2t and t2d describe different draft vocabularies.",
    "D2T_INVALID": "d2t cannot be a draft→target map (dtype, shape, range or duplicates).",
    "T2D_INVALID": "t2d is not a valid draft-vocabulary mask.",
    "VOCAB_SPECIAL_TOKENS_MISSING": "Structural tokens (eos, think/tool tags, role markers) or byte pieces are outside the draft vocabulary.",
    "VOCAB_SIZE_INCONSISTENT": "Vocabulary sizes in config and tensors disagree.",
    "DRAFT_VOCAB_SIZE_MISSING": "draft_vocab_size is absent although the draft vocabulary is reduced.",
    "TIED_EMBEDDINGS_ON_REDUCED_VOCAB": "tie_word_embeddings is true on a reduced-vocabulary drafter.",
    "FC_WIDTH_MISMATCH": "fc input width does not match aux-layer count × target hidden size.",
    "TARGET_MISMATCH": "The drafter does not fit the given target model.",
    "TARGET_NO_EAGLE3_CAPTURE": "The target class cannot feed an EAGLE-3 drafter in this engine release.",
    "TARGET_CLASS_UNKNOWN": "The target class is not registered in the engine releases as read.",
    "AUX_LAYER_IDS_INVALID": "Aux-layer ids are malformed or out of range.",
    "AUX_LAYER_IDS_NOT_TRAINED": "The config's aux-layer ids are not the layers the drafter was trained on (measured).",
    "AUX_LAYER_IDS_NOT_RECORDED": "The config records no aux-layer ids; the engine falls back to its default.",
    "AUX_LAYER_IDS_IGNORED_BY_ENGINE": "The aux-layer ids are in a field the engine does not read.",
    "AUX_LAYER_IDS_CONVENTION_SHIFT": "The engine reads the aux-layer ids one layer away from training.",
    "AUX_LAYER_IDS_UNSORTED": "The aux-layer ids are not ascending; engines concatenate them in layer order.",
    "AUX_HIDDEN_STATE_DISABLED": "use_aux_hidden_state is false although fc was trained over several aux states.",
    "NORM_FLAGS_UNSUPPORTED": "A normalisation variant the drafter was trained with is not implemented by the engine.",
    "NORM_OUTPUT_MEANING_CLASH": "norm_output means something else to the engine than to the trainer.",
    "ROPE_MISMATCH": "A release runs the drafter with another RoPE than its config records (info: unlike the target's).",
    "CONTEXT_TOO_SHORT": "The drafter's max_position_embeddings is below the target's; what each release does with it.",
    "WEIGHTS_NONFINITE": "Weights contain NaN or Inf.",
    "WEIGHTS_LOOK_UNTRAINED": "Weights look like fresh initialisation.",
    "DTYPE_MISMATCH": "Tensor dtypes disagree with each other or with the config.",
}

# The live-server probe (eagle3_forensics/probe/server/): faults, launch settings, counters, the engine gap.
SERVER_CATALOGUE: dict[str, str] = {
    "SERVER_UNREACHABLE": "The server refused or dropped the connection (or the URL does not resolve).",
    "SERVER_TIMEOUT": "No complete answer within --timeout (one request), or the run's --budget was spent.",
    "SERVER_HTTP_ERROR": "The server answered with an HTTP error status.",
    "SERVER_BAD_RESPONSE": "The server's answer is not the JSON or Prometheus text the probe expects.",
    "NO_SPEC_DECODING": "The server reports no speculative-decoding counters or fields.",
    "COUNTERS_WENT_BACKWARDS": "A cumulative counter decreased (or the process start time changed): a restart.",
    "NO_DRAFTS": "No verify step carried drafts during the probe.",
    "COUNTERS_INCONSISTENT": "The counters disagree with each other or with the tokens the requests generated.",
    "COUNTERS_IMPOSSIBLE": "The server reports counters no run can produce (non-finite, negative, more accepted "
    "than drafted, ...): no figure is reported.",
    "LAUNCH_NOT_EAGLE3": "The server's speculative method is not EAGLE-3.",
    "LAUNCH_TREE_DRAFTING": "The server drafts a tree; rates and per-position figures are not chain figures.",
    "LAUNCH_SETTINGS_DISAGREE": "Two things the server reports about its launch settings disagree.",
    "LAUNCH_SETTINGS_UNKNOWN": "The server does not report (part of) its speculative launch settings.",
    "DRAFTER_NOT_READABLE": "The drafter the server loaded is not readable here; its config was not checked.",
    "AUX_LAYERS_DIFFER": "The engine reads other aux layers than the drafter was trained on.",
    "DRAFTER_DIAGNOSED_BROKEN": "diagnose finds errors for this engine in the drafter the server serves.",
    "VERIFY_MODE_LOSSY": "The server verifies lossily or drafts with a quantized draft/head: its acceptance "
    "is not the drafter's.",
    "COMPARE_SETTINGS_DIFFER": "The two sides of a comparison ran different settings (K, prompts, tokens, "
    "verification): their acceptance is not comparable.",
    "ENGINE_GAP": "The engine's acceptance length differs from the reference by more than the tolerance.",
}

# Every code, static: a Finding with any other code is a bug.
# audit-data: checks on a data-prep output (hidden-state dumps, loss masks, the vocabulary map);
# documented in docs/findings.md after the live-server codes.
DATA_CATALOGUE: dict[str, str] = {
    "DATA_UNREADABLE": "Dump files or the vocabulary map cannot be read.",
    "DATA_NOT_EAGLE3": "The dumps hold no EAGLE-3 features (EAGLE-1/2 or DFlash data).",
    "DATA_LAYOUT_BROKEN": "The dumps come from a writer version whose keys do not hold what they say.",
    "DATA_LOSS_MASK_EMPTY": "Samples whose loss mask is all zero: nothing to learn.",
    "DATA_LOSS_MASK_SUSPICIOUS": "Loss masks cover whole sequences or the prompt: not assistant-only.",
    "DATA_HIDDEN_NONFINITE": "Dumped hidden states contain NaN or Inf.",
    "DATA_AUX_WIDTH_MISMATCH": "The aux width is not k x the hidden size the drafter or target expects.",
    "DATA_SEQ_TOO_LONG": "Samples longer than the drafter's positions.",
    "DATA_TARGET_MISMATCH": "The data does not fit the target (hidden size, vocabulary).",
    "DATA_VOCAB_MAP_NOT_FROM_DATA": "The map's selection is not the top-v of these samples' token counts.",
    "DATA_COVERAGE_LOW": "The draft vocabulary covers too little of the trained tokens.",
    "DATA_DUPLICATE_SAMPLES": "Samples repeated exactly.",
    "DATA_NOT_FROM_TARGET": "The training responses were not written by the target (greedy agreement low).",
    "DATA_TEMPLATE_MISMATCH": "The samples' chat rendering or thinking mode differs from the serving one.",
    "DATA_TRAINED_LENGTH": "The trained sequence-length distribution (info).",
    "CONTEXT_BEYOND_TRAINING": "The serving context is far beyond the trained length.",
}

# diagnose --launch: the serving command checked against the drafter (eagle3_forensics/checks/launch.py);
# documented in docs/findings.md after the data-prep codes.
LAUNCH_CATALOGUE: dict[str, str] = {
    "LAUNCH_ALGORITHM_MISMATCH": "The command does not serve the drafter as EAGLE-3 (EAGLE, another method, or none).",
    "LAUNCH_DRAFT_PATH_MISSING": "The command asks for speculative decoding without a draft path.",
    "LAUNCH_DRAFT_PATH_OTHER": "The command serves another drafter than the one diagnosed (or one not found here).",
    "LAUNCH_SPEC_PARAMS_INCONSISTENT": "Draft steps, top-k and token counts the release refuses or silently adjusts.",
    "LAUNCH_CAPTURE_LAYERS_MISMATCH": "The launch option names other target layers than the drafter was trained on.",
    "LAUNCH_FAILS_AT_STARTUP": "The release refuses or crashes at start-up on the command's speculative settings.",
    "LAUNCH_CONTEXT_SHRUNK": "The release silently lowers the server's max_model_len to the drafter's.",
    "LAUNCH_DRAFT_WINDOW_MISSING": "A sliding-window drafter is served without the window the release needs on the command line.",
}

CATALOGUE: dict[str, str] = {**CHECK_CATALOGUE, **SERVER_CATALOGUE, **DATA_CATALOGUE, **LAUNCH_CATALOGUE}


@dataclass(frozen=True)
class Finding:
    """One problem (or fact) about a drafter, with the evidence and the fix.

    ``engine`` is ``None`` for facts about the checkpoint itself and the engine name for
    problems that depend on how a given engine loads it; the same problem on two engines
    is two findings.
    """

    code: str
    severity: Severity
    message: str
    engine: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    fix: str | None = None
    # how the release's rule behind an engine finding is known: "ran" (its own code ran here) or
    # "read" (read from its wheel); set by diagnose from the judged table (engines/proof.py)
    proof: str | None = None

    def __post_init__(self) -> None:
        if self.code not in CATALOGUE:
            raise ValueError(f"unknown finding code {self.code!r}")
        if not isinstance(self.severity, Severity):
            object.__setattr__(self, "severity", Severity(self.severity))

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity.value,
            "engine": self.engine,
            "message": self.message,
            "evidence": self.evidence,
            "fix": self.fix,
            **({"proof": self.proof} if self.proof is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(
            code=data["code"],
            severity=Severity(data["severity"]),
            message=data["message"],
            engine=data.get("engine"),
            evidence=dict(data.get("evidence") or {}),
            fix=data.get("fix"),
            proof=data.get("proof"),
        )


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Errors first, then by catalogue order, then engine name; stable for equal keys."""
    order = {code: i for i, code in enumerate(CATALOGUE)}
    return sorted(findings, key=lambda f: (f.severity.rank, order.get(f.code, len(order)), f.engine or ""))


def count_by_severity(findings: Iterable[Finding]) -> dict[str, int]:
    counts = {s.value: 0 for s in Severity}
    for f in findings:
        counts[f.severity.value] += 1
    return counts
