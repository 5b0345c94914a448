"""``probe-offline``: teacher-forced acceptance of a drafter over trainers' hidden-state dumps.

Only the drafter runs. Each dumped sample gives the target's aux states (what the drafter's ``fc``
eats) and its last hidden state; the **teacher** for draft step ``j`` at slot ``t`` (the feature of
position ``t`` paired with token ``t+1``, as every trainer pairs them) is

* with ``--target``: the target's greedy token at position ``t+1+j``, ``argmax lm_head(h)`` of the
  dumped last hidden state, with the target's final norm applied first when the dump holds the
  state *before* the norm (speculators v0.3+) — decided from the layout and checked on the data
  (``rms(h / norm.weight) = 1`` holds for a normed state); ``lm_head`` and the norm weight are read
  header-first from the target checkpoint, nothing else of it is loaded;
* without: the next data token ``t+2+j``.

A slot is scored when the token it is fed (``t+1``) is loss-masked and every step has a teacher,
so on a dump of the target's own greedy continuations (mask = the continuation) the slots are
exactly the in-process probe's. Every figure comes from plain counts (slots, hits per step, slots
whose steps ``0..j`` all hit) through :meth:`~eagle3_forensics.probe.teacher_forced.TeacherForced.from_counts`,
the same code and names as ``probe``'s ``teacher_forced`` block, so shards add up exactly
(:func:`merge_counts`). Added: the counts along the sequence (position buckets), by the class of
the teacher token, and the worst samples.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from eagle3_forensics.checks.data import Examples, check_shards
from eagle3_forensics.engines import resolve_release
from eagle3_forensics.errors import BadArgumentsError, ExitCode, UnusableInputError
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.dumps.bounded import cap_from_configs
from eagle3_forensics.io.dumps.layouts import LAYOUTS, POST, PRE
from eagle3_forensics.io.dumps.read import DumpSet, Sample, SampleError, open_dumps
from eagle3_forensics.io.target import open_target
from eagle3_forensics.probe.teacher_forced import CONVENTIONS, TeacherForced, hit_counts, score_sequence
from eagle3_forensics.reference.drafter import (
    Eagle3Drafter,
    default_dtype,
    load_drafter,
    resolve_device,
    target_files,
)
from eagle3_forensics.vocab.coverage import token_table

PARTIAL_SCHEMA = "eagle3-forensics/probe-offline-partial/1"
WORST = 10  # worst samples kept
DEFAULT_BUCKET = 32  # tokens per bucket of the along-the-sequence table
LABEL_CHUNK = 1024  # positions per lm_head matmul (bounded memory for big vocabularies)
RMS_TOLERANCE = 0.02  # |rms(h / w) - 1| of a normed state (bf16 rounding is ~0.4%)
_PLUS_ONE_NORM = ("gemma",)
SMALL_MODEL_PARAMS = 100_000_000  # below this, one CPU thread is fastest (as probe decides for targets)  # model types whose RMSNorm scales by (1 + weight)

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


def parse_engine(text: str) -> str:
    """``reference`` or one engine release, ``NAME[==VERSION]`` (``sglang``, ``sglang==0.5.11``,
    ``vllm``, …): the view the drafter is loaded in, as ``probe --engine`` takes it. An unknown
    engine or release is a :class:`~eagle3_forensics.errors.BadArgumentsError` naming the known ones."""
    spec = text.strip()
    if spec != "reference":
        resolve_release(spec)
    return spec


# ---------------------------------------------------------------------------------------------
# counts
# ---------------------------------------------------------------------------------------------


def _zero(k: int) -> list[Any]:
    return [0, [0] * k, [0] * k]


def _add_group(dst: list[Any], slots: int, hits: Sequence[int], prefix: Sequence[int]) -> None:
    dst[0] += slots
    dst[1] = [a + b for a, b in zip(dst[1], hits, strict=True)]
    dst[2] = [a + b for a, b in zip(dst[2], prefix, strict=True)]


def _merge_groups(a: dict[str, list[Any]], b: dict[str, list[Any]], k: int) -> dict[str, list[Any]]:
    out = {key: [v[0], list(v[1]), list(v[2])] for key, v in a.items()}
    for key, v in b.items():
        _add_group(out.setdefault(key, _zero(k)), v[0], v[1], v[2])
    return dict(sorted(out.items(), key=lambda kv: _group_key(kv[0])))


def _group_key(key: str) -> tuple[int, Any]:
    return (0, int(key)) if key.lstrip("-").isdigit() else (1, key)


@dataclass
class OfflineCounts:
    """Mergeable counts of one probe-offline run (one shard or all)."""

    settings: dict[str, Any]
    shards: list[list[int]]
    files: int = 0
    used: int = 0
    tokens: int = 0
    bytes: int = 0
    slots: int = 0
    hits: list[int] = field(default_factory=list)
    prefix: list[int] = field(default_factory=list)
    greedy_agree: int = 0  # slots whose step-0 teacher equals the next data token
    out_of_draft_vocab: int = 0  # slots whose step-0 teacher the drafter cannot propose
    along: dict[str, list[Any]] = field(default_factory=dict)  # bucket -> [slots, hits, prefix]
    classes: dict[str, list[Any]] = field(default_factory=dict)
    layouts: dict[str, int] = field(default_factory=dict)
    skipped: Examples = field(default_factory=Examples)
    nonfinite: Examples = field(default_factory=Examples)
    worst: list[list[Any]] = field(default_factory=list)  # [score, index, source, slots, hits0, prefix_last]
    seconds: float = 0.0  # wall time of this run (not merged into results: timing is not a count)

    @property
    def k(self) -> int:
        return int(self.settings["k"])

    def add(self, sample: Sample, slots: int, hits: list[int], prefix: list[int]) -> None:
        self.used += 1
        self.tokens += sample.length
        self.bytes += sample.nbytes
        self.layouts[sample.layout] = self.layouts.get(sample.layout, 0) + 1
        self.slots += slots
        self.hits = [a + b for a, b in zip(self.hits or [0] * self.k, hits, strict=True)]
        self.prefix = [a + b for a, b in zip(self.prefix or [0] * self.k, prefix, strict=True)]
        if slots:
            score = TeacherForced.from_counts(self.k, [], slots, hits, prefix).simulated_acceptance_length
            self.worst.append(
                [round(score, 9), sample.item.index, sample.item.rel, slots, hits[0], prefix[-1]]
            )
            self.worst = sorted(self.worst, key=lambda w: (w[0], w[1]))[:WORST]

    def merged(self, other: OfflineCounts) -> OfflineCounts:
        if other.settings != self.settings:
            diff = sorted(
                key
                for key in set(self.settings) | set(other.settings)
                if self.settings.get(key) != other.settings.get(key)
            )
            raise BadArgumentsError(
                f"partial results come from different runs (settings differ: {', '.join(diff)})"
            )
        k = self.k
        out = OfflineCounts(self.settings, sorted([*self.shards, *other.shards]))
        for name in ("files", "used", "tokens", "bytes", "slots", "greedy_agree", "out_of_draft_vocab"):
            setattr(out, name, getattr(self, name) + getattr(other, name))
        out.hits = [a + b for a, b in zip(self.hits or [0] * k, other.hits or [0] * k, strict=True)]
        out.prefix = [a + b for a, b in zip(self.prefix or [0] * k, other.prefix or [0] * k, strict=True)]
        out.along = _merge_groups(self.along, other.along, k)
        out.classes = _merge_groups(self.classes, other.classes, k)
        out.layouts = {
            key: self.layouts.get(key, 0) + other.layouts.get(key, 0)
            for key in sorted(set(self.layouts) | set(other.layouts))
        }
        out.skipped = self.skipped.merged(other.skipped)
        out.nonfinite = self.nonfinite.merged(other.nonfinite)
        out.worst = sorted([*self.worst, *other.worst], key=lambda w: (w[0], w[1]))[:WORST]
        out.seconds = self.seconds + other.seconds
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "shards": self.shards,
            **{
                n: getattr(self, n)
                for n in (
                    "files",
                    "used",
                    "tokens",
                    "bytes",
                    "slots",
                    "hits",
                    "prefix",
                    "greedy_agree",
                    "out_of_draft_vocab",
                    "along",
                    "classes",
                    "layouts",
                    "worst",
                    "seconds",
                )
            },
            "skipped": self.skipped.to_dict(),
            "nonfinite": self.nonfinite.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OfflineCounts:
        try:
            c = cls(dict(d["settings"]), [[int(a), int(b)] for a, b in d["shards"]])
            for n in ("files", "used", "tokens", "bytes", "slots", "greedy_agree", "out_of_draft_vocab"):
                setattr(c, n, int(d[n]))
            c.hits = [int(x) for x in d["hits"]]
            c.prefix = [int(x) for x in d["prefix"]]
            c.along = {
                str(key): [int(v[0]), [int(x) for x in v[1]], [int(x) for x in v[2]]]
                for key, v in d["along"].items()
            }
            c.classes = {
                str(key): [int(v[0]), [int(x) for x in v[1]], [int(x) for x in v[2]]]
                for key, v in d["classes"].items()
            }
            c.layouts = {str(key): int(v) for key, v in d["layouts"].items()}
            c.worst = [
                [float(w[0]), int(w[1]), str(w[2]), int(w[3]), int(w[4]), int(w[5])] for w in d["worst"]
            ]
            c.seconds = float(d.get("seconds", 0.0))
            c.skipped = Examples.from_dict(d["skipped"])
            c.nonfinite = Examples.from_dict(d["nonfinite"])
            if c.hits and len(c.hits) != c.k:
                raise ValueError("hit counts do not match K")
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise UnusableInputError(
                f"not a probe-offline partial result ({type(exc).__name__}: {exc})"
            ) from None
        return c


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


def _target_teacher(target: str | Path, device: torch.device) -> tuple[Teacher, Any]:
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


def _decide_norm(teacher: Teacher, layout: str, first: Sample | None) -> None:
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


# ---------------------------------------------------------------------------------------------
# token classes
# ---------------------------------------------------------------------------------------------


def _classifier(target: str | Path | None, in_vocab: torch.Tensor) -> tuple[Callable[[int], str], str]:
    """``class_of(target_id)`` for the step-0 teacher; the finer classes need the target's tokenizer.json."""
    table = None
    if target is not None and (Path(target) / "tokenizer.json").is_file():
        try:
            table = token_table(target)
        except UnusableInputError:
            table = None
    cache: dict[int, str] = {}

    def class_of(i: int) -> str:
        got = cache.get(i)
        if got is not None:
            return got
        if not (0 <= i < in_vocab.shape[0]) or not bool(in_vocab[i]):
            c = "outside the draft vocabulary"
        elif table is None:
            c = "in the draft vocabulary"
        else:
            base = table.class_of(i)
            if base != "ordinary":
                c = base
            else:
                text = table.text(i)
                core = text.strip()
                if not core:
                    c = "whitespace"
                elif core.isdigit():
                    c = "number"
                elif all(not ch.isalnum() for ch in core):
                    c = "punctuation"
                elif text[:1].isspace():
                    c = "word start"
                else:
                    c = "word piece"
        cache[i] = c
        return c

    return class_of, ("target tokenizer" if table is not None else "draft-vocabulary membership only")


# ---------------------------------------------------------------------------------------------
# scoring one sample
# ---------------------------------------------------------------------------------------------


def _slots(sample: Sample, labels: torch.Tensor, k: int) -> torch.Tensor:
    """Slots ``t`` whose fed token ``t+1`` is loss-masked and whose ``k`` teachers all exist."""
    n = sample.length
    has = labels >= 0
    last = int(torch.nonzero(has).max()) if bool(has.any()) else -1  # last position with a teacher
    if n < 2 or last < 1:
        return torch.zeros(0, dtype=torch.long)
    t = torch.arange(0, n - 1)
    ok = sample.loss_mask[1:] & (t + k <= last)
    return t[ok]


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------


@dataclass
class OfflineProbeResult:
    counts: OfflineCounts
    teacher_forced: TeacherForced | None
    findings: list[Finding]

    @property
    def exit_code(self) -> int:
        if self.teacher_forced is None:
            return int(ExitCode.UNUSABLE)
        return (
            int(ExitCode.FINDINGS)
            if any(f.severity is Severity.ERROR for f in self.findings)
            else int(ExitCode.OK)
        )

    @property
    def unusable_reason(self) -> str | None:
        """Why nothing could be measured (exit 2), or ``None``."""
        if self.teacher_forced is None:
            return "no slot could be scored (no usable sample with a loss-masked token)"
        return None

    @property
    def tokens_per_s(self) -> float | None:
        c = self.counts
        return c.tokens / c.seconds if c.seconds else None

    @property
    def bytes_per_s(self) -> float | None:
        c = self.counts
        return c.bytes / c.seconds if c.seconds else None

    def groups(self, which: str) -> list[dict[str, Any]]:
        c = self.counts
        src = c.along if which == "along" else c.classes
        width = int(c.settings["bucket"])
        rows = []
        for key, (slots, hits, prefix) in src.items():
            if not slots:
                continue
            tf = TeacherForced.from_counts(c.k, c.settings["aux_ids_hf"], slots, hits, prefix)
            row: dict[str, Any] = (
                {"from": int(key) * width, "to": int(key) * width + width - 1}
                if which == "along"
                else {"class": key}
            )
            row.update(
                {
                    "positions": slots,
                    "accuracy": tf.accuracy,
                    "conditional_accuracy": tf.conditional_accuracy,
                    "cumulative": tf.cumulative,
                    "simulated_acceptance_length": tf.simulated_acceptance_length,
                }
            )
            rows.append(row)
        if which == "classes":
            rows.sort(key=lambda r: (-r["positions"], r["class"]))
        return rows

    def to_dict(self) -> dict[str, Any]:
        c = self.counts
        s = c.settings
        tf = self.teacher_forced
        return {
            "drafter": s["drafter"],
            "data": s["data"],
            "format": s["format"],
            "layouts": c.layouts,
            "target": s["target"],
            "engine": s["engine"],
            "k": c.k,
            "device": s["device"],
            "dtype": s["dtype"],
            "teacher": s["teacher"],
            "samples": {
                "files": s["total_files"],
                "used": c.used,
                "skipped": c.skipped.count,
                "tokens": c.tokens,
                "bytes": c.bytes,
                "max_samples": s["max_samples"],
            },
            "teacher_forced": None if tf is None else tf.to_dict(),
            "greedy_agreement": None
            if not c.slots or s["teacher"]["kind"] != "target"
            else c.greedy_agree / c.slots,
            "out_of_draft_vocabulary": None if not c.slots else c.out_of_draft_vocab / c.slots,
            "along_sequence": {"bucket": s["bucket"], "rows": self.groups("along")},
            "by_token_class": {"classes_from": s["classes_from"], "rows": self.groups("classes")},
            "worst_samples": [
                {
                    "index": w[1],
                    "file": w[2],
                    "positions": w[3],
                    "step0_accuracy": w[4] / w[3] if w[3] else None,
                    "all_steps_accuracy": w[5] / w[3] if w[3] else None,
                    "simulated_acceptance_length": w[0],
                }
                for w in c.worst
            ],
            "skipped": c.skipped.evidence(),
            "findings": [f.to_dict() for f in self.findings],
            "view": s["view"],
            "conventions": OFFLINE_CONVENTIONS,
        }


def finish_probe(counts: OfflineCounts) -> OfflineProbeResult:
    """The figures of a run (one shard, or all of them merged)."""
    findings: list[Finding] = []
    if counts.skipped.count:
        first = counts.skipped.items[0]
        findings.append(
            Finding(
                "DATA_UNREADABLE",
                Severity.ERROR,
                f"{counts.skipped.count} of {counts.files} samples were skipped: {first[1]}: {first[2]}",
                evidence=counts.skipped.evidence(),
                fix="Run eagle3-forensics audit-data on the directory; regenerate the files it lists.",
            )
        )
    if counts.nonfinite.count:
        findings.append(
            Finding(
                "DATA_HIDDEN_NONFINITE",
                Severity.ERROR,
                f"{counts.nonfinite.count} samples hold NaN/Inf hidden states and were skipped.",
                evidence=counts.nonfinite.evidence(),
                fix="Regenerate these samples (capture in bf16/fp32).",
            )
        )
    tf = None
    if counts.slots:
        tf = TeacherForced.from_counts(
            counts.k, counts.settings["aux_ids_hf"], counts.slots, counts.hits, counts.prefix
        )
    return OfflineProbeResult(counts, tf, findings)


def merge_counts(parts: Sequence[OfflineCounts]) -> OfflineCounts:
    if not parts:
        raise BadArgumentsError("nothing to merge")
    out = parts[0]
    for p in parts[1:]:
        out = out.merged(p)
    check_shards(out.shards)
    return out


def _first_usable(ds: DumpSet, items: Sequence[Any]) -> Sample | None:
    for it in items[:64]:
        try:
            s = ds.read(it)
        except SampleError:
            continue
        if LAYOUTS[s.layout].eagle3 and s.last_hidden is not None:
            return s
    return None


@dataclass
class OfflineSetup:
    """What a probe-offline run loads once: the dumps, the drafter as ``engine`` loads it, the teacher."""

    engine: str
    device: torch.device
    dtype: torch.dtype
    dumps: DumpSet
    first: Sample  # the first sample that can feed an EAGLE-3 probe
    model: Any
    fc_in: int
    teacher: Teacher


def open_offline(
    drafter: str | Path,
    data: str | Path,
    *,
    target: str | Path | None = None,
    engine: str = "reference",
    fmt: str = "auto",
    max_samples: int | None = None,
    device: str = "auto",
    max_sample_bytes: int | None = None,
) -> OfflineSetup:
    """Open the dumps, load the drafter and the teacher, and check they fit together (one
    :class:`~eagle3_forensics.errors.UnusableInputError` naming the finding code when not):
    shared by :func:`scan_offline` and the sample browser (:mod:`eagle3_forensics.probe.samples`)."""
    engine = parse_engine(engine)
    if not Path(drafter).exists():
        raise UnusableInputError(f"no such drafter checkpoint: {drafter}", path=str(drafter))
    dev = resolve_device(device)
    dtype = default_dtype(dev)
    tside = target_files(target) if target is not None else None
    cap = max_sample_bytes if max_sample_bytes is not None else cap_from_configs(drafter, target)
    ds = open_dumps(
        data, fmt, hidden_size_hint=None if tside is None else tside.hidden_size, max_sample_bytes=cap
    )
    first = _first_usable(ds, ds.select(max_samples))
    if first is None:
        layouts = ", ".join(sorted(ds.layouts_seen)) or "none readable"
        probs = [LAYOUTS[n].problem for n in sorted(ds.layouts_seen) if LAYOUTS[n].problem]
        raise UnusableInputError(
            f"no sample under {data} can feed an EAGLE-3 probe (layouts found: {layouts})"
            + (f": {probs[0]}" if probs else "")
            + (f"; first unreadable: {ds.first_error}" if ds.first_error and not ds.layouts_seen else "")
        )
    try:
        model = load_drafter(drafter, tside, engine, device=dev, dtype=dtype)
    except UnusableInputError as exc:
        if tside is None:
            raise UnusableInputError(
                f"{exc} (pass --target: only its config, embedding, lm_head and final norm are read)"
            ) from None
        raise
    fc_in = int(model.fc.weight.shape[1])
    if first.aux_width != fc_in:
        raise UnusableInputError(
            f"the dumps' aux states are {first.aux_width} wide, the drafter's fc takes {fc_in} "
            f"(DATA_AUX_WIDTH_MISMATCH: run audit-data with --drafter)"
        )
    teacher = Teacher("data")
    if target is not None:
        teacher, info = _target_teacher(target, dev)
        if info.hidden_size is not None and first.hidden_size != info.hidden_size:
            raise UnusableInputError(
                f"the dumps' last hidden state is {first.hidden_size} wide, the target's hidden size is "
                f"{info.hidden_size} (DATA_TARGET_MISMATCH)"
            )
        _decide_norm(teacher, first.layout, first)
    return OfflineSetup(engine, dev, dtype, ds, first, model, fc_in, teacher)


def scan_offline(
    drafter: str | Path,
    data: str | Path,
    *,
    target: str | Path | None = None,
    engine: str = "reference",
    k: int = 3,
    fmt: str = "auto",
    max_samples: int | None = None,
    shard: tuple[int, int] | None = None,
    device: str = "auto",
    bucket: int = DEFAULT_BUCKET,
    progress: bool = False,
    max_sample_bytes: int | None = None,
) -> OfflineCounts:
    """Score this shard's samples: the mergeable counts (see :func:`finish_probe`)."""
    engine = parse_engine(engine)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise BadArgumentsError(f"--k must be a positive integer, got {k!r}")
    if max_samples is not None and max_samples < 1:
        raise BadArgumentsError("--max-samples must be at least 1")
    if bucket < 1:
        raise BadArgumentsError("--bucket must be at least 1")
    setup = open_offline(
        drafter,
        data,
        target=target,
        engine=engine,
        fmt=fmt,
        max_samples=max_samples,
        device=device,
        max_sample_bytes=max_sample_bytes,
    )
    engine, dev, dtype, ds = setup.engine, setup.device, setup.dtype, setup.dumps
    model, fc_in, teacher = setup.model, setup.fc_in, setup.teacher
    in_vocab = torch.zeros(
        max(int(model.spec.vocab_size), int(model.target_ids().max()) + 1), dtype=torch.bool
    )
    tids = model.target_ids().cpu()
    in_vocab[tids[(tids >= 0) & (tids < in_vocab.shape[0])]] = True
    class_of, classes_from = _classifier(target, in_vocab)
    view = model.view.to_dict() if model.view is not None else None
    settings = {
        "drafter": str(drafter),
        "data": str(data),
        "format": fmt,
        "target": None if target is None else str(target),
        "engine": engine,
        "k": k,
        "device": str(dev),
        "dtype": str(dtype).replace("torch.", ""),
        "max_samples": max_samples,
        "total_files": len(ds.select(max_samples)),
        "bucket": bucket,
        "aux_ids_hf": list(model.aux_ids),
        "teacher": teacher.to_dict(),
        "classes_from": classes_from,
        "view": view,
    }
    settings = json.loads(json.dumps(settings))  # as a partial file gives it back
    counts = OfflineCounts(settings, [list(shard) if shard else [0, 1]], hits=[0] * k, prefix=[0] * k)
    items = ds.select(max_samples, shard)
    counts.files = len(items)
    bar = None
    if progress:
        from tqdm import tqdm  # heavy: tqdm

        bar = tqdm(total=len(items), desc="probe-offline", unit="sample", leave=False, dynamic_ncols=True)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    threads = torch.get_num_threads()
    if dev.type == "cpu" and sum(p.numel() for p in model.parameters()) < SMALL_MODEL_PARAMS:
        torch.set_num_threads(1)  # tiny matmuls: thread synchronisation costs more than it saves
    t0 = time.perf_counter()
    try:
        for got in ds.iter_samples(items):
            if bar is not None:
                bar.update(1)
            if isinstance(got, tuple):
                counts.skipped.add(got[0], got[1])
                continue
            _score_one(model, teacher, got, counts, class_of, in_vocab, fc_in, dev)
    finally:
        torch.set_num_threads(threads)
        if bar is not None:
            bar.close()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    counts.seconds = time.perf_counter() - t0
    return counts


def _score_one(
    model: Eagle3Drafter,
    teacher: Teacher,
    sample: Sample,
    counts: OfflineCounts,
    class_of: Callable[[int], str],
    in_vocab: torch.Tensor,
    fc_in: int,
    dev: torch.device,
) -> None:
    it = sample.item
    layout = LAYOUTS[sample.layout]
    if not layout.eagle3 or sample.aux_hidden is None:
        counts.skipped.add(it, f"a {sample.layout} file: {layout.problem}")
        return
    if sample.aux_width != fc_in:
        counts.skipped.add(it, f"aux width {sample.aux_width}, the drafter's fc takes {fc_in}")
        return
    if teacher.kind == "target" and sample.last_hidden is None:
        counts.skipped.add(it, "no last hidden state")
        return
    bad = sample.nonfinite()
    if bad:
        counts.nonfinite.add(it, f"{bad} non-finite values")
        return
    labels = teacher.labels(sample, dev)
    slots = _slots(sample, labels, counts.k)
    if slots.numel():
        correct = score_sequence(model, sample.aux_hidden, sample.input_ids, slots, labels, counts.k)
        n, hits, prefix = hit_counts(correct)
    else:
        correct, n, hits, prefix = [], 0, [0] * counts.k, [0] * counts.k
    counts.add(sample, n, hits, prefix)
    if not n:
        return
    width = int(counts.settings["bucket"])
    teach0 = labels[slots + 1]
    ids = sample.input_ids
    nxt = torch.where(
        slots + 2 < sample.length, ids[(slots + 2).clamp(max=sample.length - 1)], torch.tensor(-1)
    )
    counts.greedy_agree += int((teach0 == nxt).sum())
    valid = (teach0 >= 0) & (teach0 < in_vocab.shape[0])
    inv = torch.zeros_like(teach0, dtype=torch.bool)
    inv[valid] = in_vocab[teach0[valid]]
    counts.out_of_draft_vocab += int((~inv).sum())
    stack = torch.stack([c.bool() for c in correct])  # [k, n]
    alive = torch.cumprod(stack.int(), dim=0).bool()
    buckets = (slots // width).tolist()
    classes = [class_of(int(x)) for x in teach0.tolist()]
    for keyset, target_groups in ((buckets, counts.along), (classes, counts.classes)):
        keys = [str(x) for x in keyset]
        for key in dict.fromkeys(keys):
            sel = torch.tensor([kk == key for kk in keys])
            _add_group(
                target_groups.setdefault(key, _zero(counts.k)),
                int(sel.sum()),
                [int(x) for x in stack[:, sel].sum(1).tolist()],
                [int(x) for x in alive[:, sel].sum(1).tolist()],
            )
    counts.along = dict(sorted(counts.along.items(), key=lambda kv: _group_key(kv[0])))
    counts.classes = dict(sorted(counts.classes.items()))


def probe_offline(
    drafter: str | Path,
    data: str | Path,
    *,
    target: str | Path | None = None,
    engine: str = "reference",
    k: int = 3,
    fmt: str = "auto",
    max_samples: int | None = None,
    device: str = "auto",
    bucket: int = DEFAULT_BUCKET,
    progress: bool = False,
) -> OfflineProbeResult:
    """Teacher-forced acceptance of ``drafter`` over the dumps under ``data`` (one machine)."""
    counts = scan_offline(
        drafter,
        data,
        target=target,
        engine=engine,
        k=k,
        fmt=fmt,
        max_samples=max_samples,
        device=device,
        bucket=bucket,
        progress=progress,
    )
    return finish_probe(counts)


def load_worst_sample(result: OfflineProbeResult, n: int = 0) -> Sample:
    """Re-read the ``n``-th worst sample of a result (for decoding it in a notebook)."""
    w = result.counts.worst[n]
    ds = open_dumps(result.counts.settings["data"], result.counts.settings["format"])
    item = next((it for it in ds.items if it.index == w[1] and it.rel == w[2]), None)
    if item is None:
        raise UnusableInputError(f"sample {w[2]} is no longer under {result.counts.settings['data']}")
    return ds.read(item)


__all__ = [
    "OFFLINE_CONVENTIONS",
    "PARTIAL_SCHEMA",
    "OfflineCounts",
    "OfflineProbeResult",
    "OfflineSetup",
    "finish_probe",
    "load_worst_sample",
    "merge_counts",
    "open_offline",
    "parse_engine",
    "probe_offline",
    "scan_offline",
]
