"""Running ``probe-offline``: :func:`open_offline` (the drafter in its view, the dumps, the teacher),
:func:`scan_offline` (every sample of a shard scored into counts) and :func:`probe_offline` (scan and
finish in one call).

Only the drafter runs. A slot ``t`` (the feature of position ``t`` paired with token ``t+1``, as every
trainer pairs them) is scored when the token it is fed (``t+1``) is loss-masked and every step has a
teacher, so on a dump of the target's own greedy continuations (mask = the continuation) the slots
are exactly the in-process probe's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from eagle3_forensics.engines import resolve_release
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.io.dumps.bounded import cap_from_configs
from eagle3_forensics.io.dumps.layouts import LAYOUTS
from eagle3_forensics.io.dumps.options import DEFAULT_SCAN, ScanOptions
from eagle3_forensics.io.dumps.read import DumpSet, Sample, SampleError, open_dumps
from eagle3_forensics.probe.offline.counts import OfflineCounts, add_group, group_order, zero_group
from eagle3_forensics.probe.offline.result import OfflineProbeResult, finish_probe
from eagle3_forensics.probe.offline.teacher import Teacher, decide_norm, target_teacher
from eagle3_forensics.probe.teacher_forced import hit_counts, score_sequence
from eagle3_forensics.reference.drafter.loader import load_drafter
from eagle3_forensics.reference.drafter.model import Eagle3Drafter, default_dtype, resolve_device
from eagle3_forensics.reference.drafter.views import target_files
from eagle3_forensics.vocab.coverage import token_table

DEFAULT_BUCKET = 32  # tokens per bucket of the along-the-sequence table
SMALL_MODEL_PARAMS = 100_000_000  # below this, one CPU thread is fastest (as probe decides for targets)


def parse_engine(text: str) -> str:
    """``reference`` or one engine release, ``NAME[==VERSION]`` (``sglang``, ``sglang==0.5.11``,
    ``vllm``, …): the view the drafter is loaded in, as ``probe --engine`` takes it. An unknown
    engine or release is a :class:`~eagle3_forensics.errors.BadArgumentsError` naming the known ones."""
    spec = text.strip()
    if spec != "reference":
        resolve_release(spec)
    return spec


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


def scored_slots(sample: Sample, labels: torch.Tensor, k: int) -> torch.Tensor:
    """Slots ``t`` whose fed token ``t+1`` is loss-masked and whose ``k`` teachers all exist."""
    n = sample.length
    has = labels >= 0
    last = int(torch.nonzero(has).max()) if bool(has.any()) else -1  # last position with a teacher
    if n < 2 or last < 1:
        return torch.zeros(0, dtype=torch.long)
    t = torch.arange(0, n - 1)
    ok = sample.loss_mask[1:] & (t + k <= last)
    return t[ok]


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
    options: ScanOptions = DEFAULT_SCAN,
    *,
    engine: str = "reference",
    device: str = "auto",
) -> OfflineSetup:
    """Open the dumps, load the drafter and the teacher, and check they fit together (one
    :class:`~eagle3_forensics.errors.UnusableInputError` naming the finding code when not):
    shared by :func:`scan_offline` and the sample browser (:mod:`eagle3_forensics.probe.samples`)."""
    target, fmt, max_samples, max_sample_bytes = (
        options.target,
        options.fmt,
        options.max_samples,
        options.max_sample_bytes,
    )
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
        teacher, info = target_teacher(target, dev)
        if info.hidden_size is not None and first.hidden_size != info.hidden_size:
            raise UnusableInputError(
                f"the dumps' last hidden state is {first.hidden_size} wide, the target's hidden size is "
                f"{info.hidden_size} (DATA_TARGET_MISMATCH)"
            )
        decide_norm(teacher, first.layout, first)
    return OfflineSetup(engine, dev, dtype, ds, first, model, fc_in, teacher)


def scan_offline(
    drafter: str | Path,
    data: str | Path,
    options: ScanOptions = DEFAULT_SCAN,
    *,
    engine: str = "reference",
    k: int = 3,
    device: str = "auto",
    bucket: int = DEFAULT_BUCKET,
) -> OfflineCounts:
    """Score this shard's samples (``options.shard``): the mergeable counts (see :func:`finish_probe`)."""
    target, fmt, max_samples, shard = options.target, options.fmt, options.max_samples, options.shard
    engine = parse_engine(engine)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise BadArgumentsError(f"--k must be a positive integer, got {k!r}")
    if bucket < 1:
        raise BadArgumentsError("--bucket must be at least 1")
    setup = open_offline(drafter, data, options, engine=engine, device=device)
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
    if options.progress:
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
    slots = scored_slots(sample, labels, counts.k)
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
            add_group(
                target_groups.setdefault(key, zero_group(counts.k)),
                int(sel.sum()),
                [int(x) for x in stack[:, sel].sum(1).tolist()],
                [int(x) for x in alive[:, sel].sum(1).tolist()],
            )
    counts.along = dict(sorted(counts.along.items(), key=lambda kv: group_order(kv[0])))
    counts.classes = dict(sorted(counts.classes.items()))


def probe_offline(
    drafter: str | Path,
    data: str | Path,
    options: ScanOptions = DEFAULT_SCAN,
    *,
    engine: str = "reference",
    k: int = 3,
    device: str = "auto",
    bucket: int = DEFAULT_BUCKET,
) -> OfflineProbeResult:
    """Teacher-forced acceptance of ``drafter`` over the dumps under ``data`` (one machine)."""
    return finish_probe(
        scan_offline(drafter, data, options, engine=engine, k=k, device=device, bucket=bucket)
    )
