"""What ``repair`` does about each finding code, as data: fixed by which kinds of step, refused
(with the options left), or never an error.

A leaf: it imports only the finding catalogue, so ``diagnose`` can name the ``repair`` command in a
fix without importing the repair machinery (no import circle).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from eagle3_forensics.findings import CATALOGUE, LAUNCH_CATALOGUE, SERVER_CATALOGUE, Finding

# The serving engines repair makes a copy ready for (any described release: ``--engine sglang==0.5.11``).
# The config layout written follows the release table: one that reads no speculators config (every
# SGLang release up to 0.5.23) gets the flat config of its model class; vLLM reads both layouts, so
# the source's layout is kept.
REPAIRABLE_ENGINES: tuple[str, ...] = ("sglang", "vllm")

# -- step kinds ---------------------------------------------------------------------------------------


class StepKind(StrEnum):
    """The kinds of change a repair plan is made of (``Step.kind``)."""

    CONFIG = "config"
    RENAME = "rename"
    DROP = "drop"
    STRIP = "strip"
    SHIP = "ship"
    VOCAB = "vocab"
    FORMAT = "format"


STEP_KINDS: dict[StepKind, str] = {
    StepKind.CONFIG: "config.json rewritten (fields listed)",
    StepKind.RENAME: "tensors renamed to the names the engine looks up (bytes unchanged)",
    StepKind.DROP: "tensors removed that are not drafter weights (harmless; the engine drops or rejects them)",
    StepKind.STRIP: "tensors removed that the engine replaces with the target's anyway",
    StepKind.SHIP: "tensors added from the target's weights because the engine needs them from the checkpoint",
    StepKind.VOCAB: "d2t / t2d rewritten into the offsets encoding every engine reads",
    StepKind.FORMAT: "weights rewritten as a single model.safetensors",
}
assert set(STEP_KINDS) == set(StepKind)

# -- the finding → repair table -----------------------------------------------------------------------


class Action(StrEnum):
    """What ``repair`` does about a finding code."""

    FIX = "fix"  # fixed by steps of the listed kinds (the planned drafter is checked to no longer have it)
    REFUSE = "refuse"  # no conversion can fix it
    UNUSABLE = "unusable"  # input cannot be read at all (exit 2)
    NOTHING = "nothing"  # never an error; nothing to change


@dataclass(frozen=True)
class Policy:
    """What ``repair`` does about one finding code. ``{engine}`` in texts is the engine's display name."""

    action: Action
    fixed_by: tuple[StepKind, ...] = ()
    reason: str = ""  # why it cannot be (or was not) fixed
    options: tuple[str, ...] = ()  # what the user can do instead
    fixable_if: str | None = None  # FIX only when the finding's evidence has this key; refused otherwise

    def __post_init__(self) -> None:
        """A mistyped action or step kind fails when the table is built (at import)."""
        object.__setattr__(self, "action", Action(self.action))
        object.__setattr__(self, "fixed_by", tuple(StepKind(k) for k in self.fixed_by))
        if (self.action is Action.FIX) != bool(self.fixed_by):
            raise ValueError(
                f"policy {self.action.value!r}: fixed_by {self.fixed_by} (only FIX lists step kinds)"
            )

    def refuses(self, finding: Finding) -> bool:
        """True when this finding is refused before any planning."""
        if self.action in (Action.REFUSE, Action.NOTHING):
            return True
        return (
            self.action == Action.FIX
            and self.fixable_if is not None
            and self.fixable_if not in finding.evidence
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "fixed_by": list(self.fixed_by),
            "reason": self.reason,
            "options": list(self.options),
            "fixable_if": self.fixable_if,
        }


SERVE_VLLM = "serve it on vLLM, which implements it"
POLICY: dict[str, Policy] = {
    "CHECKPOINT_UNREADABLE": Policy(
        Action.UNUSABLE,
        reason="the checkpoint cannot be read",
        options=("check the path; re-copy or re-export the checkpoint",),
    ),
    "NOT_EAGLE3": Policy(
        Action.REFUSE,
        reason="the files do not describe an EAGLE-3 drafter; no conversion makes one",
        options=(
            "point the tool at the drafter directory (not the target)",
            "serve it with the algorithm it implements (EAGLE / EAGLE-2)",
        ),
    ),
    "CONFIG_UNREADABLE_BY_ENGINE": Policy(
        Action.FIX,
        (StepKind.CONFIG,),
        "the config could not be rewritten into a form {engine} reads",
        ("write the missing fields into a copy of config.json and repair that copy",),
    ),
    "KEYS_DROPPED_BY_ENGINE": Policy(
        Action.FIX,
        (StepKind.RENAME, StepKind.DROP, StepKind.STRIP, StepKind.CONFIG),
        "trained drafter weights that {engine} has no parameter for under any "
        "spelling; dropping them would serve a different model",
        (SERVE_VLLM, "retrain without them for {engine}"),
    ),
    "KEYS_REJECTED_BY_ENGINE": Policy(
        Action.FIX,
        (StepKind.RENAME, StepKind.DROP, StepKind.STRIP, StepKind.CONFIG),
        "trained drafter weights that {engine} has no parameter for (it refuses to "
        "load them); dropping them would serve a different model",
        (
            "serve it on an engine with a model class for these weights",
            "retrain with a Llama-style draft layer",
        ),
    ),
    "PARAMS_UNFILLED": Policy(
        Action.FIX,
        (StepKind.RENAME, StepKind.SHIP, StepKind.CONFIG),
        "engine parameters that no tensor of the checkpoint (or of --target) can fill",
        (
            "re-export the drafter with every trained tensor",
            "pass --target with weights when the engine needs the target's embedding shipped",
        ),
    ),
    "MULTI_LAYER_DRAFTER": Policy(
        Action.REFUSE,
        reason="{engine} builds one decoder layer and the drafter has more; dropping the others "
        "serves a truncated model",
        options=("serve it on vLLM (multi-layer EAGLE-3)", "retrain with one decoder layer"),
    ),
    "LM_HEAD_MISSING": Policy(
        Action.REFUSE,
        reason="there is no trained draft lm_head, and none can be derived",
        options=("re-export the drafter with its [draft_vocab_size, hidden] lm_head.weight",),
    ),
    "EMBED_TOKENS_PROBLEM": Policy(
        Action.FIX,
        (StepKind.STRIP, StepKind.SHIP),
        "the embedding {engine} needs cannot be supplied",
        (
            "pass --target with weights whose embedding is [vocab_size, hidden_size]",
            "re-export the drafter with the embedding it was trained with",
            SERVE_VLLM,
        ),
    ),
    "D2T_MISSING": Policy(
        Action.FIX,
        (StepKind.VOCAB,),
        "there is no d2t and no trustworthy t2d to rebuild it from",
        ("pass --rebuild-vocab-from FILE with the training token ids (input_ids, optional loss_mask)",),
    ),
    "D2T_ABSOLUTE": Policy(
        Action.FIX,
        (StepKind.VOCAB,),
        "the absolute ids could not be converted to a consistent map",
        ("pass --rebuild-vocab-from FILE with the training token ids",),
    ),
    "D2T_DOUBLE_OFFSET": Policy(
        Action.FIX,
        (StepKind.VOCAB,),
        "the double offsets could not be undone into a consistent map",
        ("pass --rebuild-vocab-from FILE with the training token ids",),
    ),
    "D2T_T2D_MISMATCH": Policy(
        Action.FIX,
        (StepKind.VOCAB,),
        "d2t and t2d describe different draft vocabularies and nothing says which one the "
        "weights were trained with",
        (
            "pass --trust-t2d to rebuild d2t from t2d",
            "pass --trust-d2t to rebuild t2d from d2t",
            "pass --rebuild-vocab-from FILE with the training token ids to rebuild both",
        ),
    ),
    "D2T_INVALID": Policy(
        Action.FIX,
        (StepKind.VOCAB,),
        "d2t cannot be a draft→target map and cannot be repaired from itself",
        (
            "pass --trust-t2d to rebuild d2t from a valid t2d",
            "pass --rebuild-vocab-from FILE with the training token ids",
        ),
    ),
    "T2D_INVALID": Policy(
        Action.FIX,
        (StepKind.VOCAB,),
        "t2d is not a valid mask and does not agree with d2t",
        (
            "pass --trust-d2t to rebuild t2d from d2t",
            "pass --rebuild-vocab-from FILE with the training token ids",
        ),
    ),
    "VOCAB_SIZE_INCONSISTENT": Policy(
        Action.FIX,
        (StepKind.CONFIG, StepKind.VOCAB),
        "sizes disagree between the tensors themselves (usually tensors from two runs)",
        (
            "use lm_head, d2t and t2d from the same training run",
            "pass --rebuild-vocab-from FILE to rebuild d2t/t2d for the shipped lm_head",
        ),
    ),
    "VOCAB_SPECIAL_TOKENS_MISSING": Policy(
        Action.REFUSE,
        reason="the head has no rows for the missing tokens; adding them to the map needs retraining",
        options=("rebuild the map with the structural tokens forced in and retrain the head",),
    ),
    "DRAFT_VOCAB_SIZE_MISSING": Policy(
        Action.FIX,
        (StepKind.CONFIG,),
        "draft_vocab_size could not be derived",
        ("write draft_vocab_size = lm_head rows into a copy of config.json",),
    ),
    "TIED_EMBEDDINGS_ON_REDUCED_VOCAB": Policy(
        Action.FIX,
        (StepKind.CONFIG,),
        "tie_word_embeddings could not be turned off",
        ("write tie_word_embeddings: false by hand",),
    ),
    "FC_WIDTH_MISMATCH": Policy(
        Action.REFUSE,
        reason="fc takes a different number of aux states (or target width) than {engine} builds",
        options=(
            "serve it on vLLM, which sizes fc from the number of aux ids",
            "if target_hidden_size or the aux ids in the config are wrong, correct them by hand",
        ),
    ),
    "TARGET_MISMATCH": Policy(
        Action.REFUSE,
        reason="the drafter was not trained for this target",
        options=("use the drafter trained for this target", "retrain"),
    ),
    "AUX_LAYER_IDS_INVALID": Policy(
        Action.REFUSE,
        reason="the aux-layer ids are malformed or out of range; the trained ones cannot be inferred",
        options=("write the ids the drafter was trained with into a copy of config.json and repair that",),
    ),
    "AUX_LAYER_IDS_NOT_TRAINED": Policy(
        Action.FIX,
        (StepKind.CONFIG,),
        "the measured aux layers could not be written where {engine} reads them",
        ("write the measured ids (the finding's evidence) into a copy of config.json",),
        fixable_if="pin_hf_ids",
    ),
    "AUX_LAYER_IDS_NOT_RECORDED": Policy(
        Action.FIX,
        (StepKind.CONFIG,),
        "the trained aux layers are not known",
        (
            "pass --target (and --prompts) so repair can measure them",
            "write the trained ids into a copy of config.json",
        ),
        fixable_if="pin_hf_ids",
    ),
    "AUX_LAYER_IDS_IGNORED_BY_ENGINE": Policy(
        Action.FIX,
        (StepKind.CONFIG,),
        "the trained aux-layer ids are not known",
        (
            "pass --target so the trainer's default ids can be resolved",
            "write the trained ids into a copy of config.json",
        ),
    ),
    "AUX_LAYER_IDS_CONVENTION_SHIFT": Policy(
        Action.FIX,
        (StepKind.CONFIG,),
        "the trained aux-layer ids cannot be expressed where {engine} reads them",
        ("check the trained ids with the probe's aux sweep and write them by hand",),
    ),
    "AUX_LAYER_IDS_UNSORTED": Policy(
        Action.NOTHING,
        reason="the trainer's concatenation order is not recorded; permuting fc blindly could break it",
    ),
    "AUX_HIDDEN_STATE_DISABLED": Policy(
        Action.FIX,
        (StepKind.CONFIG,),
        "use_aux_hidden_state could not be re-enabled in the config",
        ("remove eagle_config.use_aux_hidden_state from a copy of config.json",),
    ),
    # Fixable only when the engine implements the variant and merely reads another value ("mismatched");
    # a variant the engine does not implement is refused before planning, whatever the conversion does.
    "NORM_FLAGS_UNSUPPORTED": Policy(
        Action.FIX,
        (StepKind.CONFIG,),
        "the drafter was trained with a normalisation variant {engine} does not implement; "
        "no weight-space conversion exists",
        (
            "serve it on vLLM, which implements norm_before_residual, norm_before_fc, fc_norm and norm_output",
            "retrain with these variants off for {engine}",
        ),
        fixable_if="mismatched",
    ),
    "NORM_OUTPUT_MEANING_CLASH": Policy(
        Action.FIX, (StepKind.CONFIG,), "norm_output could not be removed", ()
    ),
    "TARGET_NO_EAGLE3_CAPTURE": Policy(
        Action.REFUSE,
        reason="the target class captures no aux states in {engine}; no change to the drafter makes it",
        options=("serve the target on a release whose class captures aux states",),
    ),
    "TARGET_CLASS_UNKNOWN": Policy(
        Action.NOTHING, reason="a fact about the target class, not the drafter's files"
    ),
    "ROPE_MISMATCH": Policy(Action.FIX, (StepKind.CONFIG,), "RoPE fields could not be mirrored", ()),
    "CONTEXT_TOO_SHORT": Policy(
        Action.NOTHING, reason="the trained context length is not changed by a conversion"
    ),
    "WEIGHTS_NONFINITE": Policy(
        Action.REFUSE,
        reason="weights contain NaN or Inf; no conversion restores them",
        options=("re-export from the last good training checkpoint",),
    ),
    "WEIGHTS_LOOK_UNTRAINED": Policy(Action.NOTHING, reason="a warning about training, not about the format"),
    "DTYPE_MISMATCH": Policy(Action.NOTHING, reason="dtypes are kept as trained"),
    # Live-server findings describe a server run (faults, launch flags, counters, the gap to a
    # reference), never the drafter's files: repair never sees them and never acts on them.
    **{
        code: Policy(
            Action.NOTHING,
            reason="a live-server finding: it describes the server run, not the drafter's files",
        )
        for code in SERVER_CATALOGUE
    },
    # audit-data codes are about training data, which repair never touches
    "DATA_UNREADABLE": Policy(
        Action.UNUSABLE,
        reason="dump files cannot be read",
        options=("regenerate the unreadable files with the trainer's data prep",),
    ),
    "DATA_NOT_EAGLE3": Policy(
        Action.REFUSE, reason="the data holds no EAGLE-3 features; no conversion makes them"
    ),
    "DATA_LAYOUT_BROKEN": Policy(
        Action.REFUSE, reason="the dumps were written by a broken writer; regenerate them"
    ),
    "DATA_LOSS_MASK_EMPTY": Policy(
        Action.NOTHING, reason="a fact about the training data, not the checkpoint"
    ),
    "DATA_LOSS_MASK_SUSPICIOUS": Policy(
        Action.NOTHING, reason="a fact about the training data, not the checkpoint"
    ),
    "DATA_HIDDEN_NONFINITE": Policy(
        Action.REFUSE, reason="non-finite features cannot be repaired; regenerate them"
    ),
    "DATA_AUX_WIDTH_MISMATCH": Policy(
        Action.REFUSE, reason="the dumps hold other layers than the drafter takes; regenerate them"
    ),
    "DATA_SEQ_TOO_LONG": Policy(Action.NOTHING, reason="a fact about the training data, not the checkpoint"),
    "DATA_TARGET_MISMATCH": Policy(Action.REFUSE, reason="the data was made for another target"),
    "DATA_VOCAB_MAP_NOT_FROM_DATA": Policy(
        Action.REFUSE,
        reason="the head was trained against a map from other data; a rebuilt map needs retraining",
        options=("rebuild d2t/t2d from the data (eagle3-forensics vocab build) and retrain the head",),
    ),
    "DATA_COVERAGE_LOW": Policy(Action.NOTHING, reason="a fact about the training data, not the checkpoint"),
    "DATA_DUPLICATE_SAMPLES": Policy(
        Action.NOTHING, reason="a fact about the training data, not the checkpoint"
    ),
    "DATA_NOT_FROM_TARGET": Policy(
        Action.REFUSE,
        reason="the head learned another model's responses; regenerate them with the target and retrain",
    ),
    "DATA_TEMPLATE_MISMATCH": Policy(
        Action.REFUSE,
        reason="the head learned another rendering; re-render the data in the serving mode and retrain",
    ),
    "DATA_TRAINED_LENGTH": Policy(
        Action.NOTHING, reason="a fact about the training data, not the checkpoint"
    ),
    "CONTEXT_BEYOND_TRAINING": Policy(
        Action.NOTHING,
        reason="a fact about training against serving: train longer or serve a shorter context",
    ),
    # diagnose --launch findings are about the serving command, which repair never writes
    **{
        code: Policy(
            Action.NOTHING, reason="a launch-command finding: fix the command line, not the drafter's files"
        )
        for code in LAUNCH_CATALOGUE
    },
}
assert set(POLICY) == set(CATALOGUE), "every finding code needs a repair policy"

PRECONDITION = "PRECONDITION"  # refusal code for conversion preconditions that no finding covers
