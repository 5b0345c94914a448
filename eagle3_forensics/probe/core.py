"""In-process accept-rate probe: live greedy chain speculative decoding with an EAGLE-3 drafter.

:func:`probe` loads a target (any local Hugging Face causal LM) and a drafter — as its writer
meant it (``engine="reference"``) or as an engine would load it (``"sglang"``, ``"vllm"``,
``"eagle"``, ``"speculators"``, from the rule tables) — and measures:

* **live acceptance** — per cycle the drafter proposes ``K`` tokens (its own KV cache; the
  "stable" part holds target features of committed tokens, draft steps are discarded after
  each cycle), the target verifies them with **one** forward over ``[bonus, d_1..d_K]``
  against its KV cache, the matching prefix plus the target's next token (the bonus) is
  committed, and both caches are cropped back. Nothing is recomputed per step.
* **lossless check** — the committed tokens must equal plain greedy decoding of the target
  (run on the same prompts, same device, one token per forward). Speed of both is reported.
* **teacher-forced estimate** — over the target's own greedy continuations, per-step top-1
  accuracy (unconditional and conditional) and the simulated acceptance length
  ``1 + Σ_k Π_{j≤k} c_j`` (``docs/reference/acceptance.md`` §3).
* **aux-layer sweep** — the teacher-forced estimate with the aux ids shifted by −1, 0, +1.

Metric conventions (``docs/reference/acceptance.md`` §2): *acceptance length* is vLLM's
``1 + accepted / num_drafts`` (includes the bonus token); *per-position cumulative* is vLLM's
``accepted_per_pos[i] / num_drafts``; *conditional* is ``per_pos[i] / per_pos[i-1]``;
*acceptance rate* is ``accepted / drafted`` (no bonus). Sampling is greedy (temperature 0) and
EOS is ignored (a fixed budget of new tokens per prompt, like vLLM's ``ignore_eos``).

The parts live beside this module: :mod:`.proposers` (what drafts), :mod:`.decode` (live and
greedy decoding), :mod:`.teacher_forced` (the estimate, the sweep and the metric conventions);
:mod:`eagle3_forensics.views.probe` renders the results.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from eagle3_forensics.demo.world import VARIANTS
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.findings import Finding
from eagle3_forensics.io.progress import progress
from eagle3_forensics.probe.decode import GreedyRun, LiveRun, greedy_decode, speculative_decode
from eagle3_forensics.probe.proposers import Eagle3Proposer, Proposer
from eagle3_forensics.probe.teacher_forced import (
    CONVENTIONS,
    SWEEP_OFFSETS,
    AuxSweep,
    TeacherForced,
    aux_sweep,
    teacher_forced_data,
    teacher_forced_estimate,
)
from eagle3_forensics.reference.drafter.loader import load_drafter
from eagle3_forensics.reference.drafter.model import Eagle3Drafter
from eagle3_forensics.reference.target import TargetModel

if TYPE_CHECKING:
    from eagle3_forensics.reference.drafter.model import Eagle3Drafter
    from eagle3_forensics.reference.target import TargetModel


@dataclass
class ProbeResult:
    drafter: str
    target: str
    engine: str
    k: int
    device: str
    dtype: str
    prompts: int
    max_new_tokens: int
    live: LiveRun
    greedy: GreedyRun | None
    lossless: bool | None
    mismatched_prompts: list[int]
    teacher_forced: TeacherForced | None
    aux_sweep: AuxSweep | None
    view: dict[str, Any] | None
    temperature: float = 0.0
    # probe as the server sees it (probe/served.py): how prompts were rendered, acceptance by
    # segment, acceptance against prompt length; None when not measured (then absent from to_dict)
    chat: dict[str, Any] | None = None
    segments: dict[str, Any] | None = None
    by_length: dict[str, Any] | None = None
    findings: list[Finding] | None = None  # what the served probe measured (VOCAB_SPECIAL_TOKENS_MISSING)

    # -- live metrics ------------------------------------------------------------------------
    @property
    def acceptance_length(self) -> float:
        return 1.0 + self.live.accepted / self.live.num_drafts if self.live.num_drafts else 1.0

    @property
    def mean_accepted_drafts(self) -> float:
        return self.live.accepted / self.live.num_drafts if self.live.num_drafts else 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.live.accepted / self.live.drafted if self.live.drafted else 0.0

    @property
    def per_position_cumulative(self) -> list[float]:
        d = self.live.num_drafts
        return [p / d if d else 0.0 for p in self.live.per_pos]

    @property
    def per_position_conditional(self) -> list[float]:
        out, prev = [], self.live.num_drafts
        for p in self.live.per_pos:
            out.append(p / prev if prev else 0.0)
            prev = p
        return out

    @property
    def tokens_per_s(self) -> float:
        return self.live.new_tokens / self.live.seconds if self.live.seconds else 0.0

    @property
    def greedy_tokens_per_s(self) -> float | None:
        g = self.greedy
        return g.new_tokens / g.seconds if g is not None and g.seconds else None

    @property
    def speedup_vs_greedy(self) -> float | None:
        g = self.greedy_tokens_per_s
        return self.tokens_per_s / g if g else None

    def to_dict(self) -> dict[str, Any]:
        tf = self.teacher_forced
        return {
            "drafter": self.drafter,
            "target": self.target,
            "engine": self.engine,
            "k": self.k,
            "temperature": self.temperature,
            "device": self.device,
            "dtype": self.dtype,
            "prompts": self.prompts,
            "max_new_tokens": self.max_new_tokens,
            "acceptance_length": self.acceptance_length,
            "mean_accepted_drafts": self.mean_accepted_drafts,
            "acceptance_rate": self.acceptance_rate,
            "per_position": {
                "cumulative": self.per_position_cumulative,
                "conditional": self.per_position_conditional,
                "accepted": list(self.live.per_pos),
            },
            "num_drafts": self.live.num_drafts,
            "drafted": self.live.drafted,
            "accepted": self.live.accepted,
            "new_tokens": self.live.new_tokens,
            "lossless": self.lossless,
            "mismatched_prompts": self.mismatched_prompts,
            "tokens_per_s": self.tokens_per_s,
            "greedy_tokens_per_s": self.greedy_tokens_per_s,
            "speedup_vs_greedy": self.speedup_vs_greedy,
            "teacher_forced": None if tf is None else tf.to_dict(),
            "aux_sweep": None if self.aux_sweep is None else self.aux_sweep.to_dict(),
            "view": self.view,
            "conventions": CONVENTIONS,
            **{
                key: value
                for key, value in (
                    ("chat", self.chat),
                    ("segments", self.segments),
                    ("by_length", self.by_length),
                )
                if value is not None
            },
            **({"findings": [f.to_dict() for f in self.findings]} if self.findings is not None else {}),
        }


def read_prompts(path: str | Path) -> list[str]:
    """Prompts from a ``.jsonl`` file (``{"prompt": ...}`` or ``{"text": ...}`` or a JSON string per
    line) or from a text file (one prompt per non-empty line)."""
    p = Path(path)
    if not p.is_file():
        raise UnusableInputError(f"prompts file not found: {p}", path=str(p))
    try:
        lines = [ln for ln in p.read_text(encoding="utf-8").splitlines() if ln.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableInputError(f"cannot read prompts file {p}: {exc}", path=str(p)) from None
    if not lines:
        raise UnusableInputError(f"prompts file is empty: {p}", path=str(p))
    if p.suffix not in (".jsonl", ".json"):
        return lines
    out: list[str] = []
    for n, line in enumerate(lines, 1):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            raise UnusableInputError(f"{p}:{n}: not a JSON line") from None
        text = obj.get("prompt", obj.get("text")) if isinstance(obj, dict) else obj
        if not isinstance(text, str) or not text:
            raise UnusableInputError(f"{p}:{n}: expected a non-empty string or an object with 'prompt'")
        out.append(text)
    return out


def load_target(
    target: str | Path | TargetModel, device: str | torch.device = "auto", dtype: torch.dtype | None = None
) -> TargetModel:
    if isinstance(target, TargetModel):
        return target
    return TargetModel(target, device=device, dtype=dtype)


def _prompt_ids(
    target: TargetModel, prompts: str | Path | Sequence[str] | Sequence[Sequence[int]]
) -> list[list[int]]:
    items: Sequence[Any] = read_prompts(prompts) if isinstance(prompts, (str, Path)) else prompts
    if not items:
        raise UnusableInputError("no prompts given")
    out = []
    limit = getattr(target, "max_positions", None)
    for n, item in enumerate(items, 1):
        ids = target.encode(item) if isinstance(item, str) else [int(i) for i in item]
        if not ids:
            raise UnusableInputError("an empty prompt was given")
        if limit is not None and len(ids) >= limit:
            raise UnusableInputError(
                f"prompt {n} has {len(ids)} tokens; the target handles {limit} positions (max_position_embeddings)"
            )
        out.append(ids)
    return out


def probe(
    drafter: str | Path | Eagle3Drafter | Proposer,
    target: str | Path | TargetModel,
    prompts: str | Path | Sequence[str] | Sequence[Sequence[int]],
    *,
    k: int = 3,
    max_new_tokens: int = 64,
    device: str = "auto",
    engine: str = "reference",
    dtype: torch.dtype | None = None,
    teacher_forced: bool = True,
    sweep: bool = True,
    greedy: GreedyRun | None = None,
    threads: int | None = None,
) -> ProbeResult:
    """Run the live probe (and, for EAGLE-3 drafters, the teacher-forced estimate and aux sweep).

    ``greedy`` may pass a previous :class:`GreedyRun` of the same target and prompts (e.g. when
    comparing drafters) to skip re-decoding; otherwise plain greedy decoding runs interleaved
    with the speculative runs so both see the same machine load.

    ``threads``: CPU threads for the run (restored afterwards). ``None`` picks one thread for
    targets under :data:`SMALL_MODEL_PARAMS` parameters on the CPU — for such models thread
    synchronisation costs more than the matrix products — and leaves torch's setting otherwise.
    """
    with _threads(target, device, threads):
        return _probe(
            drafter,
            target,
            prompts,
            k=k,
            max_new_tokens=max_new_tokens,
            device=device,
            engine=engine,
            dtype=dtype,
            teacher_forced=teacher_forced,
            sweep=sweep,
            greedy=greedy,
        )


SMALL_MODEL_PARAMS = 100_000_000


@contextlib.contextmanager
def _threads(target: Any, device: str, threads: int | None) -> Iterator[None]:
    before = torch.get_num_threads()
    n = threads
    if n is None and str(device) != "cuda" and not (str(device) == "auto" and torch.cuda.is_available()):
        if isinstance(target, TargetModel):
            size = sum(p.numel() for p in target.model.parameters())
        else:
            size = _weights_bytes(Path(target)) // 2
        if size < SMALL_MODEL_PARAMS:
            n = 1
    if n is not None:
        torch.set_num_threads(max(1, int(n)))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _weights_bytes(path: Path) -> int:
    if not path.is_dir():
        return 0
    return sum(f.stat().st_size for f in path.iterdir() if f.suffix in (".safetensors", ".bin"))


def _probe(
    drafter: str | Path | Eagle3Drafter | Proposer,
    target: str | Path | TargetModel,
    prompts: str | Path | Sequence[str] | Sequence[Sequence[int]],
    *,
    k: int,
    max_new_tokens: int,
    device: str,
    engine: str,
    dtype: torch.dtype | None,
    teacher_forced: bool,
    sweep: bool,
    greedy: GreedyRun | None,
) -> ProbeResult:
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise UnusableInputError(f"K must be a positive integer, got {k!r}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens <= 0:
        raise UnusableInputError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    if isinstance(drafter, (str, Path)) and not Path(drafter).exists():
        raise UnusableInputError(f"no such drafter checkpoint: {drafter}", path=str(drafter))
    if isinstance(target, (str, Path)) and not Path(target).is_dir():
        raise UnusableInputError(f"target directory not found: {target}", path=str(target))
    if isinstance(prompts, (str, Path)):
        prompts = read_prompts(prompts)  # fail fast, before loading any model
    tm = load_target(target, device, dtype)
    prompt_ids = _prompt_ids(tm, prompts)
    model: Eagle3Drafter | None
    if isinstance(drafter, (str, Path)):
        model = load_drafter(drafter, tm, engine, device=tm.device, dtype=tm.dtype)
        drafter_name = str(drafter)
    elif isinstance(drafter, Eagle3Drafter):
        model = drafter.to(device=tm.device, dtype=tm.dtype)
        drafter_name = "<Eagle3Drafter>"
    else:
        model = None
        drafter_name = f"<{type(drafter).__name__}>"

    run = LiveRun(k)
    reuse = (
        greedy is not None
        and len(greedy.outputs) == len(prompt_ids)
        and all(len(o) >= max_new_tokens for o in greedy.outputs)
    )
    gr = GreedyRun() if not reuse else greedy
    assert gr is not None
    _warm_up(tm, model, prompt_ids[0])
    outputs: list[list[int]] = []
    for prompt in progress(prompt_ids, desc=f"probe ({engine})", unit="prompt"):
        if not reuse:
            greedy_decode(tm, prompt, max_new_tokens, gr)
        proposer = Eagle3Proposer(model, tm.vocab_size) if model is not None else drafter
        assert not isinstance(proposer, (str, Path, Eagle3Drafter))
        outputs.append(speculative_decode(tm, proposer, prompt, k, max_new_tokens, run))
    reference = [o[:max_new_tokens] for o in gr.outputs]
    mismatched = [i for i, (a, b) in enumerate(zip(outputs, reference, strict=True)) if a != b]

    tf: TeacherForced | None = None
    sw: AuxSweep | None = None
    if model is not None and (teacher_forced or sweep):
        offsets = SWEEP_OFFSETS if sweep else (0,)
        ids = {i + o for i in model.aux_ids for o in offsets if 0 <= i + o <= tm.num_layers}
        data = teacher_forced_data(tm, prompt_ids, reference, ids)
        tf = teacher_forced_estimate(model, data, k)
        if sweep:
            sw = aux_sweep(model, data, k, tm.num_layers)
    view = model.view.to_dict() if model is not None and model.view is not None else None
    return ProbeResult(
        drafter=drafter_name,
        target=str(tm.path),
        engine=engine if model is not None else "control",
        k=k,
        device=str(tm.device),
        dtype=str(tm.dtype).replace("torch.", ""),
        prompts=len(prompt_ids),
        max_new_tokens=max_new_tokens,
        live=run,
        greedy=gr,
        lossless=not mismatched,
        mismatched_prompts=mismatched,
        teacher_forced=tf,
        aux_sweep=sw,
        view=view,
    )


def _warm_up(tm: TargetModel, model: Eagle3Drafter | None, prompt: list[int]) -> None:
    """One untimed pass through both models (lazy initialisation, allocator warm-up)."""
    with torch.inference_mode():
        step = tm.forward(prompt[:8], tm.new_cache(), model.aux_ids if model is not None else ())
        if model is not None and step.aux is not None:
            p = Eagle3Proposer(model, tm.vocab_size)
            p.start(prompt[:8], step.aux, 0)
            p.propose(2)


def compare_variants(
    drafters: str | Path | dict[str, str | Path],
    target: str | Path | TargetModel,
    prompts: str | Path | Sequence[str],
    *,
    engines: Sequence[str] = ("reference", "sglang", "vllm"),
    k: int = 3,
    max_new_tokens: int = 48,
    max_prompts: int | None = 8,
    device: str = "auto",
) -> list[dict[str, Any]]:
    """Probe every drafter under every engine view on one target and prompt set: one record each.

    ``drafters`` is a directory of drafter directories (e.g. ``data/demo/drafters``; the demo's
    variant order is kept) or ``{name: path}``. An engine that would refuse a drafter at load gets
    the reason instead of numbers. The records are JSON-safe (``None`` for a number not measured);
    :func:`eagle3_forensics.views.probe.variants_table` shows them.
    """
    if isinstance(drafters, (str, Path)):
        root = Path(drafters)
        if not root.is_dir():
            raise UnusableInputError(f"drafters directory not found: {root}")
        found = sorted(p.name for p in root.iterdir() if (p / "config.json").is_file())
        order = [v for v in VARIANTS if v in found] + [v for v in found if v not in VARIANTS]
        items: dict[str, str | Path] = {name: root / name for name in order}
    else:
        items = dict(drafters)
    with _threads(target, device, None):
        tm = load_target(target, device)
        texts: Sequence[Any] = read_prompts(prompts) if isinstance(prompts, (str, Path)) else prompts
        texts = list(texts)[:max_prompts] if max_prompts else list(texts)
        ids = _prompt_ids(tm, texts)
        greedy: GreedyRun | None = None
        rows: list[dict[str, Any]] = []
        for name, path in progress(items.items(), desc="variants", total=len(items), unit="drafter"):
            for engine in engines:
                row: dict[str, Any] = {"drafter": name, "engine": engine}
                try:
                    r = _probe(
                        path,
                        tm,
                        ids,
                        k=k,
                        max_new_tokens=max_new_tokens,
                        device=device,
                        engine=engine,
                        dtype=None,
                        teacher_forced=True,
                        sweep=True,
                        greedy=greedy,
                    )
                except UnusableInputError as exc:
                    row.update(
                        {
                            "acceptance length": None,
                            "simulated AL": None,
                            "lossless": None,
                            "best aux offset": None,
                            "speedup": None,
                            "note": str(exc),
                        }
                    )
                    rows.append(row)
                    continue
                greedy = r.greedy
                tf, sw = r.teacher_forced, r.aux_sweep
                row.update(
                    {
                        "acceptance length": round(r.acceptance_length, 3),
                        "simulated AL": None if tf is None else round(tf.simulated_acceptance_length, 3),
                        "lossless": r.lossless,
                        "best aux offset": None if sw is None else sw.best_offset,
                        "speedup": None if r.speedup_vs_greedy is None else round(r.speedup_vs_greedy, 2),
                        "note": _view_note(r),
                    }
                )
                rows.append(row)
    return rows


def _view_note(r: ProbeResult) -> str:
    v = r.view or {}
    notes = []
    if v.get("unfilled"):
        notes.append(f"{len(v['unfilled'])} tensors never loaded")
    src = str(v.get("d2t_source", ""))
    if src.startswith("no d2t"):
        notes.append("no d2t: identity")
    notes.append(f"aux {v.get('aux_ids_hf')}")
    return "; ".join(notes)
