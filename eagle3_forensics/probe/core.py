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
  ``1 + Σ_k Π_{j≤k} c_j`` (``acceptance.md`` §3).
* **aux-layer sweep** — the teacher-forced estimate with the aux ids shifted by −1, 0, +1.

Metric conventions (``acceptance.md`` §2): *acceptance length* is vLLM's
``1 + accepted / num_drafts`` (includes the bonus token); *per-position cumulative* is vLLM's
``accepted_per_pos[i] / num_drafts``; *conditional* is ``per_pos[i] / per_pos[i-1]``;
*acceptance rate* is ``accepted / drafted`` (no bonus). Sampling is greedy (temperature 0) and
EOS is ignored (a fixed budget of new tokens per prompt, like vLLM's ``ignore_eos``).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch

from eagle3_forensics.errors import UnusableInputError

if TYPE_CHECKING:
    from eagle3_forensics.reference.drafter import Eagle3Drafter
    from eagle3_forensics.reference.target import TargetModel

SWEEP_OFFSETS = (-1, 0, 1)

CONVENTIONS: dict[str, str] = {
    "acceptance_length": "vLLM: 1 + accepted / num_drafts; includes the bonus token; in [1, K+1]. SGLang's "
    "spec_accept_length (completion_tokens / verify steps) equals it up to the prefill token.",
    "mean_accepted_drafts": "accepted / num_drafts: EAGLE's accept_length, excludes the bonus token.",
    "acceptance_rate": "vLLM draft acceptance rate: accepted / drafted; excludes the bonus token, depends on K.",
    "per_position.cumulative": "vLLM: accepted_per_pos[i] / num_drafts (draft i accepted, so 0..i-1 were too); "
    "acceptance_length = 1 + sum.",
    "per_position.conditional": "per_pos[i] / per_pos[i-1] (per_pos[-1] = num_drafts): P(draft i accepted | 0..i-1 "
    "accepted).",
    "teacher_forced.accuracy": "unconditional top-1 per draft step over teacher-forced greedy text (EAGLE/SpecForge "
    "acc_k, speculators full_acc_k).",
    "teacher_forced.conditional_accuracy": "step-k accuracy where steps < k were right (speculators cond_acc_k).",
    "teacher_forced.simulated_acceptance_length": "1 + Σ_k Π_{j≤k} cond_acc_j, truncated at K; includes the bonus "
    "token (SpecForge's simulated_acc_len excludes it and uses "
    "unconditional acc: see simulated_acceptance_length_unconditional).",
}


# ---------------------------------------------------------------------------------------------
# proposers: the reference EAGLE-3 drafter and two controls
# ---------------------------------------------------------------------------------------------


class Proposer(Protocol):
    """Something that drafts target token ids for the chain (``-1`` = no valid proposal)."""

    aux_ids: list[int]

    def start(self, prompt: list[int], aux: torch.Tensor | None, bonus: int) -> None: ...

    def propose(self, k: int) -> list[int]: ...

    def accept(self, committed: list[int], aux: torch.Tensor | None) -> None: ...


class Eagle3Proposer:
    """Chain drafting with :class:`~eagle3_forensics.reference.drafter.Eagle3Drafter` and its KV cache."""

    def __init__(self, drafter: Eagle3Drafter, target_vocab_size: int) -> None:
        self.drafter = drafter
        self.aux_ids = list(drafter.aux_ids)
        self.vocab = target_vocab_size
        self.map: list[int] = drafter.target_ids().tolist()
        self.cache = drafter.new_cache()
        self.n = 0  # stable slots = committed tokens whose target features the drafter has seen
        self.last: torch.Tensor | None = None
        self.dev = drafter.device

    def _ids(self, ids: Sequence[int]) -> torch.Tensor:
        return torch.tensor(list(ids), dtype=torch.long, device=self.dev)

    @torch.inference_mode()
    def start(self, prompt: list[int], aux: torch.Tensor | None, bonus: int) -> None:
        assert aux is not None
        n = len(prompt)
        self.cache = self.drafter.new_cache()
        # feature of position t is paired with token t+1; the last slot gets the bonus token
        out = self.drafter.extend(
            self._ids([*prompt[1:], bonus]),
            self.drafter.fuse(aux),
            torch.arange(n, device=self.dev),
            self.cache,
        )
        self.last, self.n = out[-1:], n

    @torch.inference_mode()
    def propose(self, k: int) -> list[int]:
        assert self.last is not None
        h = self.last
        drafts: list[int] = []
        for j in range(k):
            d = int(self.drafter.logits(h[-1]).argmax())
            t = self.map[d]
            if not 0 <= t < self.vocab:  # e.g. an absolute-id d2t: no such target token
                break
            drafts.append(t)
            if j == k - 1:
                break
            h = self.drafter.extend(
                self._ids([t]),
                self.drafter.feedback(h),
                torch.tensor([self.n + j], device=self.dev),
                self.cache,
            )
        self.cache.truncate(self.n)
        return drafts + [-1] * (k - len(drafts))

    @torch.inference_mode()
    def accept(self, committed: list[int], aux: torch.Tensor | None) -> None:
        assert aux is not None
        m = len(committed)
        out = self.drafter.extend(
            self._ids(committed),
            self.drafter.fuse(aux),
            torch.arange(self.n, self.n + m, device=self.dev),
            self.cache,
        )
        self.last, self.n = out[-1:], self.n + m


class OracleProposer:
    """Control: proposes the target's own greedy continuation (acceptance length must be K+1)."""

    def __init__(self, continuations: Sequence[Sequence[int]]) -> None:
        self.aux_ids: list[int] = []
        self._conts = [list(c) for c in continuations]
        self._i = -1
        self._pos = 0

    def start(self, prompt: list[int], aux: torch.Tensor | None, bonus: int) -> None:
        self._i += 1
        self._pos = 1  # index in the continuation of the next token to propose

    def propose(self, k: int) -> list[int]:
        cont = self._conts[self._i]
        out = cont[self._pos : self._pos + k]
        return out + [-1] * (k - len(out))

    def accept(self, committed: list[int], aux: torch.Tensor | None) -> None:
        self._pos += len(committed)


class RandomProposer:
    """Control: uniform random target ids (acceptance length ≈ 1)."""

    def __init__(self, vocab_size: int, seed: int = 0) -> None:
        self.aux_ids: list[int] = []
        self.vocab = vocab_size
        self.g = torch.Generator().manual_seed(seed)

    def start(self, prompt: list[int], aux: torch.Tensor | None, bonus: int) -> None:
        return None

    def propose(self, k: int) -> list[int]:
        return [int(x) for x in torch.randint(0, self.vocab, (k,), generator=self.g)]

    def accept(self, committed: list[int], aux: torch.Tensor | None) -> None:
        return None


# ---------------------------------------------------------------------------------------------
# live decoding
# ---------------------------------------------------------------------------------------------


@dataclass
class LiveRun:
    """Counters of live speculative decoding (vLLM's counter names where they exist)."""

    k: int
    num_drafts: int = 0  # verify steps that carried drafts
    drafted: int = 0  # num_draft_tokens
    accepted: int = 0  # num_accepted_tokens
    per_pos: list[int] = field(default_factory=list)  # num_accepted_tokens_per_pos
    new_tokens: int = 0
    seconds: float = 0.0
    outputs: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.per_pos:
            self.per_pos = [0] * self.k


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def speculative_decode(
    target: TargetModel, proposer: Proposer, prompt: list[int], k: int, max_new_tokens: int, run: LiveRun
) -> list[int]:
    """Greedy chain speculative decoding of one prompt; counters accumulate in ``run``."""
    aux_ids = proposer.aux_ids
    _sync(target.device)
    t0 = time.perf_counter()
    cache = target.new_cache()
    step = target.forward(prompt, cache, aux_ids)
    bonus = int(step.logits[-1].argmax())
    out = [bonus]
    proposer.start(list(prompt), step.aux, bonus)
    n = len(prompt)  # tokens in the target cache; the bonus sits at position n, not yet cached
    while len(out) < max_new_tokens:
        drafts = proposer.propose(k)
        valid: list[int] = []
        for d in drafts:
            if not 0 <= d < target.vocab_size:
                break
            valid.append(d)
        step = target.forward([bonus, *valid], cache, aux_ids)
        greedy = step.logits.argmax(-1).tolist()
        n_acc = 0
        while n_acc < len(valid) and valid[n_acc] == greedy[n_acc]:
            n_acc += 1
        bonus = int(greedy[n_acc])
        committed = [*valid[:n_acc], bonus]
        target.crop(cache, n + 1 + n_acc)
        proposer.accept(committed, None if step.aux is None else step.aux[: n_acc + 1])
        n += 1 + n_acc
        out.extend(committed)
        run.num_drafts += 1
        run.drafted += k
        run.accepted += n_acc
        for i in range(n_acc):
            run.per_pos[i] += 1
    _sync(target.device)
    run.seconds += time.perf_counter() - t0
    out = out[:max_new_tokens]
    run.new_tokens += len(out)
    run.outputs.append(out)
    return out


@dataclass
class GreedyRun:
    outputs: list[list[int]] = field(default_factory=list)
    seconds: float = 0.0
    new_tokens: int = 0


def greedy_decode(target: TargetModel, prompt: list[int], max_new_tokens: int, run: GreedyRun) -> list[int]:
    _sync(target.device)
    t0 = time.perf_counter()
    out = target.greedy(prompt, max_new_tokens)
    _sync(target.device)
    run.seconds += time.perf_counter() - t0
    run.new_tokens += len(out)
    run.outputs.append(out)
    return out


# ---------------------------------------------------------------------------------------------
# teacher-forced estimate and the aux sweep
# ---------------------------------------------------------------------------------------------


@dataclass
class TeacherForced:
    """Teacher-forced per-step accuracy over the target's own greedy text."""

    k: int
    aux_ids: list[int]
    positions: int
    accuracy: list[float]
    conditional_accuracy: list[float]
    cumulative: list[float]

    @property
    def simulated_acceptance_length(self) -> float:
        total, prod = 1.0, 1.0
        for c in self.conditional_accuracy:
            prod *= c
            total += prod
        return total

    @property
    def simulated_acceptance_length_unconditional(self) -> float:
        total, prod = 1.0, 1.0
        for a in self.accuracy:
            prod *= a
            total += prod
        return total

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "aux_ids_hf": self.aux_ids,
            "positions": self.positions,
            "accuracy": self.accuracy,
            "conditional_accuracy": self.conditional_accuracy,
            "cumulative": self.cumulative,
            "simulated_acceptance_length": self.simulated_acceptance_length,
            "simulated_acceptance_length_unconditional": self.simulated_acceptance_length_unconditional,
            "convention": CONVENTIONS["teacher_forced.simulated_acceptance_length"],
        }


@dataclass
class _TFData:
    """Target pass over each teacher-forced sequence: hidden states by HF index and greedy labels."""

    sequences: list[list[int]]
    starts: list[int]  # first drafting slot (= prompt length - 1)
    hidden: list[dict[int, torch.Tensor]]
    labels: list[torch.Tensor]  # labels[s][p] = target argmax after tokens 0..p


def _tf_data(
    target: TargetModel, prompts: Sequence[list[int]], continuations: Sequence[list[int]], ids: Iterable[int]
) -> _TFData:
    want = sorted(set(ids))
    seqs, starts, hidden, labels = [], [], [], []
    for prompt, cont in zip(prompts, continuations, strict=True):
        seq = [*prompt, *cont]
        step = target.forward(seq, None, want)
        seqs.append(seq)
        starts.append(len(prompt) - 1)
        hidden.append(step.hidden)
        labels.append(step.logits.argmax(-1).cpu())
    return _TFData(seqs, starts, hidden, labels)


@torch.inference_mode()
def teacher_forced_estimate(
    drafter: Eagle3Drafter, data: _TFData, k: int, aux_ids: Sequence[int] | None = None
) -> TeacherForced:
    """Per-step accuracy of ``drafter`` under teacher forcing (EAGLE-3's training-time test)."""
    ids = list(drafter.aux_ids if aux_ids is None else aux_ids)
    dev = drafter.device
    tmap = drafter.target_ids().cpu()
    correct: list[list[torch.Tensor]] = [[] for _ in range(k)]
    for seq, start, hid, lab in zip(data.sequences, data.starts, data.hidden, data.labels, strict=True):
        t_len = len(seq)
        s = t_len - 1  # slots 0..T-2: feature t with token t+1
        last = t_len - k  # slot t needs labels up to position t+k
        if last <= start:
            continue
        aux = torch.cat([hid[i] for i in ids], dim=-1)[:s].to(dev)
        seq_t = torch.tensor(seq, dtype=torch.long)
        steps = []
        for j in range(k):
            toks = torch.zeros(s, dtype=torch.long)
            avail = seq_t[1 + j :]
            toks[: avail.shape[0]] = avail[:s]
            steps.append(toks.to(dev)[None])
        outs = drafter.ttt_forward(aux[None], steps)
        slots = torch.arange(start, last)
        for j, out in enumerate(outs):
            pred = tmap[drafter.logits(out[0, start:last]).argmax(-1).cpu()]
            correct[j].append(pred == lab[slots + 1 + j])
    if not correct[0]:
        raise UnusableInputError(
            "no teacher-forced positions: use longer continuations (--max-new-tokens > K)"
        )
    c = [torch.cat(x) for x in correct]
    positions = int(c[0].numel())
    acc = [float(x.float().mean()) for x in c]
    cond, cum = [], []
    alive = torch.ones(positions, dtype=torch.bool)
    for x in c:
        cond.append(float(x[alive].float().mean()) if bool(alive.any()) else 0.0)
        alive = alive & x
        cum.append(float(alive.float().mean()))
    return TeacherForced(k, ids, positions, acc, cond, cum)


@dataclass
class AuxSweep:
    """Teacher-forced estimate with the aux ids shifted by each offset."""

    base_ids: list[int]
    results: dict[int, TeacherForced | None]  # offset -> estimate (None: shifted ids leave the target)

    @property
    def scores(self) -> dict[int, float | None]:
        return {o: (None if r is None else r.simulated_acceptance_length) for o, r in self.results.items()}

    @property
    def best_offset(self) -> int:
        valid = {o: s for o, s in self.scores.items() if s is not None}
        return max(valid, key=lambda o: (valid[o], -abs(o)))

    @property
    def margin(self) -> float:
        """How much the best offset beats offset 0 (or, when 0 wins, the runner-up), in acceptance length."""
        valid = {o: s for o, s in self.scores.items() if s is not None}
        best = self.best_offset
        others = [s for o, s in valid.items() if o != best]
        if best != 0 and 0 in valid:
            return valid[best] - valid[0]
        return valid[best] - max(others) if others else 0.0

    def to_dict(self) -> dict[str, Any]:
        best = self.best_offset
        return {
            "base_aux_ids_hf": self.base_ids,
            "offsets": {
                str(o): {
                    "aux_ids_hf": None if r is None else r.aux_ids,
                    "simulated_acceptance_length": None if r is None else r.simulated_acceptance_length,
                    "accuracy": None if r is None else r.accuracy,
                }
                for o, r in self.results.items()
            },
            "best_offset": best,
            "best_aux_ids_hf": [i + best for i in self.base_ids],
            "margin": self.margin,
            "verdict": (
                "the aux ids as read are the best of the three"
                if best == 0
                else f"shifting the aux ids by {best:+d} (to HF {[i + best for i in self.base_ids]}) "
                f"raises the simulated acceptance length by {self.margin:.2f}"
            ),
        }


def aux_sweep(
    drafter: Eagle3Drafter, data: _TFData, k: int, num_layers: int, offsets: Sequence[int] = SWEEP_OFFSETS
) -> AuxSweep:
    results: dict[int, TeacherForced | None] = {}
    for off in offsets:
        ids = [i + off for i in drafter.aux_ids]
        results[off] = (
            teacher_forced_estimate(drafter, data, k, ids) if all(0 <= i <= num_layers for i in ids) else None
        )
    return AuxSweep(list(drafter.aux_ids), results)


# ---------------------------------------------------------------------------------------------
# the probe
# ---------------------------------------------------------------------------------------------


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
    from eagle3_forensics.reference.target import TargetModel

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
    for item in items:
        ids = target.encode(item) if isinstance(item, str) else [int(i) for i in item]
        if not ids:
            raise UnusableInputError("an empty prompt was given")
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
        from eagle3_forensics.reference.target import TargetModel

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
    from eagle3_forensics.reference.drafter import Eagle3Drafter, load_drafter

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
    for prompt in prompt_ids:
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
        data = _tf_data(tm, prompt_ids, reference, ids)
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


# ---------------------------------------------------------------------------------------------
# text rendering (CLI)
# ---------------------------------------------------------------------------------------------


def _f(x: float | None, nd: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def render_probe(r: ProbeResult) -> str:
    lines = [
        f"probe  {r.drafter}  (engine view: {r.engine})",
        f"target {r.target}  device {r.device} ({r.dtype})  K={r.k}  T=0  prompts={r.prompts}  "
        f"max_new_tokens={r.max_new_tokens}",
        "",
        f"acceptance length      {_f(r.acceptance_length)}   (vLLM: 1 + accepted/num_drafts, includes the bonus)",
        f"mean accepted drafts   {_f(r.mean_accepted_drafts)}   (excludes the bonus)",
        f"acceptance rate        {_f(r.acceptance_rate)}   (accepted/drafted = {r.live.accepted}/{r.live.drafted})",
        "per position           cumulative "
        + " ".join(_f(x, 2) for x in r.per_position_cumulative)
        + "   conditional "
        + " ".join(_f(x, 2) for x in r.per_position_conditional),
        f"lossless               {'yes' if r.lossless else 'NO (prompts ' + str(r.mismatched_prompts) + ')'}"
        "   (committed tokens == plain greedy decoding)",
        f"tokens/s               spec {_f(r.tokens_per_s, 1)}   greedy {_f(r.greedy_tokens_per_s, 1)}   "
        f"speedup {_f(r.speedup_vs_greedy, 2)}x",
    ]
    tf = r.teacher_forced
    if tf is not None:
        lines += [
            "",
            f"teacher-forced         simulated AL {_f(tf.simulated_acceptance_length)} (1 + Σ Π cond_acc; live "
            f"{_f(r.acceptance_length)})   over {tf.positions} positions",
            "                       accuracy "
            + " ".join(_f(x, 2) for x in tf.accuracy)
            + "   conditional "
            + " ".join(_f(x, 2) for x in tf.conditional_accuracy),
        ]
    sw = r.aux_sweep
    if sw is not None:
        d = sw.to_dict()
        scores = "   ".join(f"{o:+d}: {_f(s, 2)}" for o, s in sw.scores.items())
        lines += ["", f"aux sweep (HF {sw.base_ids})  {scores}", f"                       {d['verdict']}"]
    if r.view:
        v = r.view
        lines += [
            "",
            f"view                   aux {v['aux_ids_hf']} from {v['aux_source']}",
            f"                       d2t: {v['d2t_source']}",
        ]
        if v["unfilled"]:
            lines.append(
                f"                       never loaded (uninitialised): {len(v['unfilled'])} tensors "
                f"(e.g. {v['unfilled'][0]})"
            )
        if v["ignored_keys"]:
            lines.append(
                f"                       checkpoint keys not used: {len(v['ignored_keys'])} "
                f"(e.g. {v['ignored_keys'][0]})"
            )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# notebook display helpers (pandas / matplotlib imported lazily; no computation beyond tabulating)
# ---------------------------------------------------------------------------------------------


def summary_table(r: ProbeResult) -> Any:
    """Headline numbers with the convention each follows."""
    import pandas as pd

    tf = r.teacher_forced
    rows = [
        ("acceptance length (live)", r.acceptance_length, CONVENTIONS["acceptance_length"]),
        (
            "simulated acceptance length (teacher-forced)",
            None if tf is None else tf.simulated_acceptance_length,
            CONVENTIONS["teacher_forced.simulated_acceptance_length"],
        ),
        ("mean accepted drafts", r.mean_accepted_drafts, CONVENTIONS["mean_accepted_drafts"]),
        ("acceptance rate", r.acceptance_rate, CONVENTIONS["acceptance_rate"]),
        ("drafts (verify steps)", r.live.num_drafts, "vLLM num_drafts"),
        (
            "drafted / accepted tokens",
            f"{r.live.drafted} / {r.live.accepted}",
            "vLLM num_draft_tokens / num_accepted_tokens",
        ),
        ("lossless", r.lossless, "committed tokens == plain greedy decoding of the target, every prompt"),
        (
            "tokens/s speculative",
            r.tokens_per_s,
            f"{r.device} ({r.dtype}), new tokens / wall time incl. prefill",
        ),
        ("tokens/s plain greedy", r.greedy_tokens_per_s, "same target, prompts and device"),
        ("speedup", r.speedup_vs_greedy, "speculative / greedy tokens per second"),
    ]
    return pd.DataFrame(rows, columns=["metric", "value", "convention"])


def per_position_table(r: ProbeResult) -> Any:
    """Per draft position: live cumulative and conditional acceptance beside the teacher-forced figures."""
    import pandas as pd

    tf = r.teacher_forced
    data: dict[str, Any] = {
        "position": list(range(r.k)),
        "live cumulative (vLLM)": r.per_position_cumulative,
        "live conditional": r.per_position_conditional,
    }
    if tf is not None:
        data["teacher-forced cumulative"] = tf.cumulative
        data["teacher-forced conditional"] = tf.conditional_accuracy
        data["teacher-forced accuracy (unconditional)"] = tf.accuracy
    return pd.DataFrame(data)


def per_position_figure(r: ProbeResult) -> Any:
    """Bars of per-position acceptance: live cumulative and conditional, teacher-forced cumulative."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 3.2), layout="constrained")
    ax = fig.subplots()
    series = [
        ("live cumulative", r.per_position_cumulative),
        ("live conditional", r.per_position_conditional),
    ]
    if r.teacher_forced is not None:
        series.append(("teacher-forced cumulative", r.teacher_forced.cumulative))
    width = 0.8 / len(series)
    for n, (label, values) in enumerate(series):
        ax.bar([i + n * width for i in range(r.k)], values, width, label=label)
    ax.set_xticks([i + width * (len(series) - 1) / 2 for i in range(r.k)], [f"draft {i}" for i in range(r.k)])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("acceptance")
    ax.set_title(f"K={r.k}: acceptance length {r.acceptance_length:.2f} ({r.engine} view)")
    ax.legend(fontsize=8, loc="lower left")
    return fig


def aux_sweep_table(r: ProbeResult) -> Any:
    import pandas as pd

    sw = r.aux_sweep
    if sw is None:
        return pd.DataFrame(columns=["offset", "aux ids (HF)", "simulated acceptance length", "best"])
    rows = []
    for off, res in sw.results.items():
        rows.append(
            {
                "offset": f"{off:+d}",
                "aux ids (HF)": None if res is None else str(res.aux_ids),
                "simulated acceptance length": None if res is None else res.simulated_acceptance_length,
                "step-0 accuracy": None if res is None else res.accuracy[0],
                "best": "◀" if off == sw.best_offset else "",
            }
        )
    return pd.DataFrame(rows)


def sweep_verdict(r: ProbeResult) -> str:
    return "aux sweep not run" if r.aux_sweep is None else str(r.aux_sweep.to_dict()["verdict"])


def lossless_text(r: ProbeResult) -> str:
    if r.lossless:
        return (
            f"Lossless: the {r.live.new_tokens} committed tokens over {r.prompts} prompts equal plain greedy "
            "decoding of the target."
        )
    return (
        f"NOT lossless: prompts {r.mismatched_prompts} differ from plain greedy decoding (a bug or numerics)."
    )


def view_table(r: ProbeResult) -> Any:
    """How the chosen view built the drafter (aux ids, flags, d2t, what came from where)."""
    import pandas as pd

    v = r.view or {}
    rows = [
        ("engine view", v.get("engine")),
        ("revision", v.get("revision")),
        ("format family", v.get("family")),
        ("aux ids (HF index)", str(v.get("aux_ids_hf"))),
        ("aux ids from", v.get("aux_source")),
        ("norm flags", str(v.get("flags"))),
        ("d2t", v.get("d2t_source")),
        ("from the target", ", ".join(v.get("from_target", [])) or "—"),
        (
            "never loaded (uninitialised)",
            f"{len(v.get('unfilled', []))}: " + ", ".join(v.get("unfilled", [])[:6]),
        ),
        ("checkpoint keys not used", ", ".join(v.get("ignored_keys", [])[:8]) or "—"),
    ]
    return pd.DataFrame(rows, columns=["", "value"])


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
) -> Any:
    """Probe every drafter under every engine view on one target and prompt set, as one table.

    ``drafters`` is a directory of drafter directories (e.g. ``data/demo/drafters``; the demo's
    variant order is kept) or ``{name: path}``. An engine that would refuse a drafter at load gets
    the reason instead of numbers.
    """
    import pandas as pd

    from eagle3_forensics.demo.world import VARIANTS

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
        rows = []
        for name, path in items.items():
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
    return pd.DataFrame(rows)


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


def variants_figure(table: Any) -> Any:
    """Grouped bars: acceptance length per drafter, one bar per engine view (refused loads left empty)."""
    from matplotlib.figure import Figure

    names = list(dict.fromkeys(table["drafter"]))
    engines = list(dict.fromkeys(table["engine"]))
    fig = Figure(figsize=(8, 3.4), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / max(1, len(engines))
    for n, engine in enumerate(engines):
        sub = table[table["engine"] == engine].set_index("drafter")
        values = [sub["acceptance length"].get(name) for name in names]
        ax.bar(
            [i + n * width for i in range(len(names))],
            [v if v is not None else 0 for v in values],
            width,
            label=engine,
        )
    ax.set_xticks(
        [i + width * (len(engines) - 1) / 2 for i in range(len(names))], names, rotation=20, ha="right"
    )
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_ylabel("acceptance length")
    ax.legend(fontsize=8)
    return fig


def table_records(table: Any) -> list[dict[str, Any]]:
    """A comparison table as JSON-safe records (missing numbers as ``None``, not NaN)."""
    import math

    out = []
    for row in table.to_dict(orient="records"):
        out.append({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()})
    return out
