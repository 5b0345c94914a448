"""The teacher of ``probe-offline``: the target's greedy token from the dumped last hidden state
(``argmax lm_head(h)``, with the final norm applied first when the dump holds the state before it,
decided from the layout and checked on the data), or the next data token without a target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from eagle3_forensics.checks.data.target_scan import TEMPERATURES
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.io.dumps.layouts import LAYOUTS, POST, PRE
from eagle3_forensics.io.dumps.read import Sample
from eagle3_forensics.io.target import open_target
from eagle3_forensics.probe.teacher_forced import CONVENTIONS

LABEL_CHUNK = 1024  # positions per lm_head matmul (bounded memory for big vocabularies)
RMS_TOLERANCE = 0.02  # |rms(h / w) - 1| of a normed state (bf16 rounding is ~0.4%)
_PLUS_ONE_NORM = ("gemma",)  # model types whose RMSNorm scales by (1 + weight)

OFFLINE_CONVENTIONS: dict[str, str] = {
    **{k: v for k, v in CONVENTIONS.items() if k.startswith("teacher_forced")},
    "slots": "slot t = the target feature of position t paired with input token t+1; scored when token t+1 is "
    "loss-masked and steps 0..K-1 all have a teacher (positions t+1..t+K).",
    "teacher.target": "argmax over the full target vocabulary of lm_head(h) (norm(h) for pre-norm dumps) of the "
    "dumped last hidden state at position t+1+j; a teacher outside the draft vocabulary counts as a miss.",
    "teacher.data": "the next data token t+2+j (no target given).",
    "along_sequence": "the same counts per bucket of slot positions t.",
    "by_token_class": "the same counts per class of the step-0 teacher token.",
}


# ---------------------------------------------------------------------------------------------
# the teacher
# ---------------------------------------------------------------------------------------------


@dataclass
class Teacher:
    """How slot labels are made: the target's greedy token from the dumped state, or the data."""

    kind: str  # "target" | "data"
    lm_head: torch.Tensor | None = None  # [V, H] float32 on the device
    norm_weight: torch.Tensor | None = None  # [H] float32
    eps: float = 1e-6
    plus_one: bool = False
    apply_norm: bool = False
    norm: dict[str, Any] = field(default_factory=dict)

    def normed(self, h: torch.Tensor) -> torch.Tensor:
        assert self.norm_weight is not None
        x = h.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        w = self.norm_weight + 1.0 if self.plus_one else self.norm_weight
        return x * w

    @torch.inference_mode()
    def labels(self, sample: Sample, device: torch.device) -> torch.Tensor:
        """``labels[p]``: the teacher for the token after position ``p`` (``-1``: none)."""
        n = sample.length
        if self.kind == "data":
            lab = torch.full((n,), -1, dtype=torch.long)
            lab[: n - 1] = sample.input_ids[1:]
            return lab
        assert self.lm_head is not None and sample.last_hidden is not None
        out = torch.empty(n, dtype=torch.long)
        for lo in range(0, n, LABEL_CHUNK):
            h = sample.last_hidden[lo : lo + LABEL_CHUNK].to(device).float()
            if self.apply_norm:
                h = self.normed(h)
            out[lo : lo + LABEL_CHUNK] = (h @ self.lm_head.T).argmax(-1).cpu()
        return out

    @torch.inference_mode()
    def top_probability(
        self, sample: Sample, device: torch.device, temperatures: tuple[float, ...] = (1.0,)
    ) -> torch.Tensor:
        """``top[p, j]``: the target's probability of its own greedy token after position ``p`` when
        sampled at ``temperatures[j]`` (the agreement data sampled so would have there)."""
        assert self.lm_head is not None and sample.last_hidden is not None
        n = sample.length
        out = torch.empty(n, len(temperatures), dtype=torch.float32)
        for lo in range(0, n, LABEL_CHUNK):
            h = sample.last_hidden[lo : lo + LABEL_CHUNK].to(device).float()
            if self.apply_norm:
                h = self.normed(h)
            logits = h @ self.lm_head.T
            for j, t in enumerate(temperatures):
                out[lo : lo + LABEL_CHUNK, j] = torch.softmax(logits / t, -1).amax(-1).cpu()
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "description": OFFLINE_CONVENTIONS["teacher." + self.kind],
            "final_norm": self.norm or None,
        }


def _rms_test(teacher: Teacher, h: torch.Tensor) -> dict[str, Any]:
    """Median ``|rms(h / w) - 1|`` over tokens: ~0 for a state already through the final norm."""
    assert teacher.norm_weight is not None
    w = teacher.norm_weight.detach().cpu().float()
    if teacher.plus_one:
        w = w + 1.0
    keep = w.abs() > 1e-6
    if not bool(keep.any()):
        return {"median_deviation": None}
    x = h.float()[:, keep] / w[keep]
    r = x.pow(2).mean(-1).sqrt()
    dev = float((r - 1.0).abs().median())
    return {"median_deviation": round(dev, 6), "says": POST if dev < RMS_TOLERANCE else PRE}


def target_teacher(target: str | Path, device: torch.device) -> tuple[Teacher, Any]:
    """The target's greedy teacher (its lm_head and final norm) and the opened target."""
    info = open_target(target)
    if info.weights is None:
        raise UnusableInputError(
            f"the target at {target} has no weights: the teacher needs its lm_head and final norm"
        )
    head = info.lm_head()
    how = "lm_head.weight"
    if head is None:
        tied = info.config.get("tie_word_embeddings", True)
        head = info.embedding() if tied else None
        how = "embed_tokens.weight (tied embeddings)"
    if head is None:
        raise UnusableInputError(f"the target at {target} has no lm_head.weight (and untied embeddings)")
    names = [
        n
        for n in info.weights.names()
        if n.endswith("norm.weight") and ".layers." not in n and "layers." not in n
    ]
    names = [n for n in names if n.split(".")[-2] == "norm" or n.endswith("final_layernorm.weight")]
    norm_name = min(names, key=len) if names else None
    norm = info.weights.read_tensor(norm_name) if norm_name else None
    eps = (
        info.config.get("rms_norm_eps") or (info.config.get("text_config") or {}).get("rms_norm_eps") or 1e-6
    )
    model_type = str(info.config.get("model_type") or "")
    t = Teacher(
        "target",
        lm_head=head.to(device=device, dtype=torch.float32),
        norm_weight=None if norm is None else norm.to(device=device, dtype=torch.float32),
        eps=float(eps),
        plus_one=model_type.startswith(_PLUS_ONE_NORM),
    )
    t.norm = {"lm_head_from": how, "norm_weight": norm_name}
    return t, info


def decide_norm(teacher: Teacher, layout: str, first: Sample | None) -> None:
    """Decide whether the dump's last hidden state still needs the final norm (data first, layout knowledge second)."""
    said = LAYOUTS[layout].last_norm
    test = (
        _rms_test(teacher, first.last_hidden)
        if first is not None and first.last_hidden is not None and teacher.norm_weight is not None
        else {}
    )
    says = test.get("says")
    if says is None:
        state = said or POST
        by = f"layout knowledge ({layout}: last hidden state {'after' if state == POST else 'before'} the final norm)"
    elif said is None or says == said:
        state = says
        by = f"layout knowledge ({layout}), confirmed by the RMS test on {first.item.rel if first else '?'}"
    else:
        state = says
        by = f"the RMS test on {first.item.rel if first else '?'} (the {layout} layout says {said}-norm)"
    if state == PRE and teacher.norm_weight is None:
        raise UnusableInputError(
            "the dump holds the last hidden state before the final norm, and the target has no final norm weight"
        )
    teacher.apply_norm = state == PRE
    teacher.norm.update(
        {
            "dump_state": f"{state}-norm",
            "applied": teacher.apply_norm,
            "decided_by": by,
            "layout_says": None if said is None else f"{said}-norm",
            "rms_test": test or None,
        }
    )


class GreedyLabeller:
    """``audit-data --target``'s provenance teacher: per sample, the target's greedy token after each
    position (``argmax lm_head(h)`` of the dumped last hidden state, the final norm applied when the
    dump holds the state before it: decided once, on the first sample, as probe-offline decides it).

    Called with a :class:`~eagle3_forensics.io.dumps.read.Sample`; returns int64 labels (``labels[p]``:
    the target's token for position ``p + 1``) with the target's probability of that token at each of
    :data:`~eagle3_forensics.checks.data.target_scan.TEMPERATURES` (``[T, k]``), or ``None`` for a
    sample without a last hidden state.
    The audit (a layer below) takes it as a plain callable, so the checks stay free of torch."""

    def __init__(self, target: str | Path, device: str = "cpu") -> None:
        self.device = torch.device(device)
        self.teacher, info = target_teacher(target, self.device)
        self.hidden_size = info.hidden_size
        self.decided = False

    def __call__(self, sample: Sample) -> Any:
        if sample.last_hidden is None or sample.length < 2:
            return None
        if self.hidden_size is not None and sample.hidden_size != self.hidden_size:
            return None  # DATA_TARGET_MISMATCH says why; the greedy token of another width means nothing
        if not self.decided:
            decide_norm(self.teacher, sample.layout, sample)
            self.decided = True
        labels = self.teacher.labels(sample, self.device).numpy()
        # the target's confidence in its own token at each judged temperature: data it wrote greedily or
        # sampled at up to the highest of them agrees at least as often as that temperature's column says
        return labels, self.teacher.top_probability(sample, self.device, TEMPERATURES).numpy()

    def describe(self) -> dict[str, Any]:
        return {**self.teacher.to_dict(), "temperatures": list(TEMPERATURES)}


def greedy_labeller(target: str | Path | None, device: str = "cpu") -> GreedyLabeller | None:
    """``audit-data --target``'s provenance teacher, or None without a target or its weights (a
    config-only target judges fit, not provenance)."""
    if target is None or open_target(target).weights is None:
        return None
    return GreedyLabeller(target, device)
