"""``probe`` as the server will see it: chat-rendered prompts, acceptance by segment and by length.

A server renders a chat request with the target's template and the request's
``chat_template_kwargs`` (vLLM and SGLang call ``apply_chat_template(..., add_generation_prompt=True)``),
so a drafter is judged on text that starts with the template's scaffolding and, for a reasoning
model, runs through a think block before the answer. Two drafters with the same overall
acceptance can differ exactly there; and a drafter trained on short sequences drafts worse as the
prompt grows past its trained length. This module adds to :func:`eagle3_forensics.probe.core.probe`:

* :func:`render_prompts` — each prompt as one user turn rendered by the template (+ kwargs and the
  generation prompt), tokenised without added specials as ``apply_chat_template(tokenize=True)``;
* :func:`segment_acceptance` — acceptance split by segment (:data:`~eagle3_forensics.vocab.chat.SEGMENTS`)
  of the *output* position each draft landed on, labelled from the full rendering (prompt +
  output, so a think block the generation prompt opened is seen); definitions in :data:`SEGMENT_DEFINITIONS`;
* :func:`probe_lengths` — acceptance against prompt length, prompts of about ``N`` tokens built by
  concatenating the prompt texts (:func:`length_prompt_ids`), with the trained length marked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from eagle3_forensics.checks.special_tokens import CODE as SPECIAL_CODE
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.probe.core import ProbeResult, load_target, probe, read_prompts
from eagle3_forensics.vocab.chat import (
    SEGMENTS,
    ChatTemplate,
    default_mode,
    segment_labels,
    structural_tokens,
)
from eagle3_forensics.vocab.special import SpecialCoverage, generation_eos_ids, special_coverage, target_chat

SEGMENT_DEFINITIONS: dict[str, str] = {
    "segment": "the segment of the output position a draft token would occupy, from segment_labels over the "
    "full rendering (prompt + greedy output): scaffold (specials, tags, eos), reasoning (inside a think "
    "block), answer, tool_call (inside tool-call tags).",
    "proposed": "draft tokens proposed at positions of this segment (a verify step's K drafts, up to the "
    "output budget).",
    "accepted": "draft tokens accepted at positions of this segment.",
    "acceptance_rate": "accepted / proposed.",
    "acceptance_length": "1 + accepted drafts / verify steps, over the verify steps whose first draft "
    "position is in this segment (vLLM's convention, bonus included).",
    "share_of_positions": "share of the generated positions in this segment.",
    "outside_draft_vocab": "generated positions of this segment whose token is outside the drafter's draft "
    "vocabulary (t2d): no draft can be accepted there.",
    "steps_cut_outside_draft_vocab": "verify steps whose accepted chain stopped at such a position in this "
    "segment.",
}

LENGTH_HOW = (
    "each prompt of about N tokens is the prompt texts concatenated (space-separated, starting at a "
    "different text for each prompt, cycling) until the rendered prompt reaches N tokens; live acceptance "
    "over a few prompts per length, no teacher-forced estimate"
)

MAX_DUMP_SAMPLES = 2000


def render_prompts(
    chat: ChatTemplate, texts: Sequence[str], template_kwargs: Mapping[str, Any] | None = None
) -> list[list[int]]:
    """Each text as one user turn, rendered with the generation prompt as a server renders it."""
    out = []
    for text in texts:
        ids = chat.render_ids(
            [{"role": "user", "content": text}], template_kwargs=template_kwargs, add_generation_prompt=True
        )
        if not ids:
            raise UnusableInputError("the chat template rendered a prompt to no tokens")
        out.append(ids)
    return out


def segment_acceptance(
    prompts: Sequence[Sequence[int]],
    outputs: Sequence[Sequence[int]],
    cycles: Sequence[Sequence[tuple[int, int]]],
    k: int,
    chat: ChatTemplate,
    draft_vocab: Any | None = None,
) -> dict[str, Any]:
    """Acceptance per segment (:data:`SEGMENT_DEFINITIONS`) of a live run's verify steps.

    ``draft_vocab`` (a bool ``[V]`` mask of the drafter's draft vocabulary) adds, per segment, the
    positions whose token the drafter cannot propose and the verify steps whose chain stopped there."""
    st = structural_tokens(chat, generation_eos_ids(chat.directory) if chat.directory else ())
    keys = ("positions", "proposed", "accepted", "steps", "step_accepted", "unreachable", "cut")
    counts = {seg: dict.fromkeys(keys, 0) for seg in SEGMENTS}
    size = 0 if draft_vocab is None else len(draft_vocab)

    def unreachable(tid: int) -> bool:
        return draft_vocab is not None and not (0 <= tid < size and bool(draft_vocab[tid]))

    for prompt, out, steps in zip(prompts, outputs, cycles, strict=True):
        labels = segment_labels([*prompt, *out], chat, st)[len(prompt) :]
        for seg, tid in zip(labels, out, strict=True):
            counts[seg]["positions"] += 1
            counts[seg]["unreachable"] += int(unreachable(tid))
        for start, n_acc in steps:
            if start >= len(labels):
                continue
            c0 = counts[labels[start]]
            c0["steps"] += 1
            c0["step_accepted"] += n_acc
            for i in range(k):
                if start + i >= len(labels):
                    break
                c = counts[labels[start + i]]
                c["proposed"] += 1
                c["accepted"] += int(i < n_acc)
            stop = start + n_acc
            if n_acc < k and stop < len(out) and unreachable(out[stop]):
                counts[labels[stop]]["cut"] += 1
    total = sum(c["positions"] for c in counts.values())
    rows: dict[str, Any] = {}
    for seg, c in counts.items():
        rows[seg] = {
            "positions": c["positions"],
            "share_of_positions": c["positions"] / total if total else None,
            "proposed": c["proposed"],
            "accepted": c["accepted"],
            "acceptance_rate": c["accepted"] / c["proposed"] if c["proposed"] else None,
            "verify_steps": c["steps"],
            "acceptance_length": 1 + c["step_accepted"] / c["steps"] if c["steps"] else None,
        }
        if draft_vocab is not None:
            rows[seg]["outside_draft_vocab"] = c["unreachable"]
            rows[seg]["steps_cut_outside_draft_vocab"] = c["cut"]
    steps_total = sum(c["steps"] for c in counts.values())
    return {"by_segment": rows, "definitions": SEGMENT_DEFINITIONS, "verify_steps": steps_total}


def measured_special_findings(
    cov: SpecialCoverage,
    outputs: Sequence[Sequence[int]],
    cycles: Sequence[Sequence[tuple[int, int]]],
    k: int,
) -> list[Finding]:
    """VOCAB_SPECIAL_TOKENS_MISSING with its cost measured on the live run: the structural tokens
    outside the draft vocabulary that the target generated, their share of the generated positions,
    and the acceptance length lost at them (verify steps whose chain stopped at one / verify steps: a
    lower bound — each such stop loses that token, and the drafts after it)."""
    missing = set(cov.missing)
    occurrences: dict[int, int] = {}
    cut = 0
    for out, steps in zip(outputs, cycles, strict=True):
        for tid in out:
            if tid in missing:
                occurrences[tid] = occurrences.get(tid, 0) + 1
        for start, n_acc in steps:
            stop = start + n_acc
            cut += int(n_acc < k and stop < len(out) and out[stop] in missing)
    found = [t for t in cov.missing if occurrences.get(t) or cov.role(t) == "critical"]
    if not found:
        return []
    positions = sum(len(o) for o in outputs)
    steps_total = sum(len(c) for c in cycles)
    share = sum(occurrences.values()) / positions if positions else None
    drop = cut / steps_total if steps_total else None
    roles = sorted({cov.role(t) for t in found})
    names = ", ".join(repr(cov.texts.get(t, str(t))) for t in found[:8])
    return [
        Finding(
            SPECIAL_CODE,
            Severity.ERROR if "critical" in roles else Severity.WARNING,
            f"The draft vocabulary lacks structural token(s) the target generates: {names}; they are "
            f"{share or 0:.2%} of the generated positions and stopped {cut} of {steps_total} verify steps "
            f"(acceptance length lost: at least {drop or 0:.3f}).",
            evidence={
                "what": "structural",
                "missing": [
                    {
                        "id": t,
                        "text": cov.texts.get(t, ""),
                        "kind": cov.structural[t],
                        "role": cov.role(t),
                        "generated": occurrences.get(t, 0),
                    }
                    for t in found[:32]
                ],
                "roles": roles,
                "positions": positions,
                "steps_cut": cut,
                "cost": {
                    "acceptance_length_drop": drop,
                    "share_of_positions": share,
                    "basis": "measured",
                    "how": "live probe: verify steps whose accepted chain stopped at a missing structural "
                    "token / verify steps (a lower bound); share: their occurrences / generated positions",
                },
            },
            fix="Rebuild the map with these ids forced in and retrain the head on them (see the static "
            "finding of diagnose --target).",
        )
    ]


def length_prompt_ids(
    encode: Callable[[str], list[int]], texts: Sequence[str], length: int, count: int
) -> list[list[int]]:
    """``count`` prompts of at least ``length`` tokens (the first text count that reaches it)."""
    if not texts:
        raise UnusableInputError("no prompts given")
    out = []
    for j in range(count):
        parts: list[str] = []
        ids: list[int] = []
        while len(ids) < length:
            parts.append(texts[(j + len(parts)) % len(texts)])
            ids = encode(" ".join(parts))
            if len(parts) > 4 * length:  # texts that render to nothing cannot reach the length
                raise UnusableInputError(f"the prompts do not reach {length} tokens")
        out.append(ids)
    return out


def trained_length_from_dumps(path: str | Path, max_samples: int = MAX_DUMP_SAMPLES) -> dict[str, Any]:
    """The sample lengths of training dumps: max and p99 (the max is what is marked as trained)."""
    from eagle3_forensics.io.dumps.read import open_dumps  # heavy: numpy, torch

    dumps = open_dumps(path)
    lengths = []
    for item in dumps.select(max_samples):
        try:
            lengths.append(int(dumps.read(item).input_ids.shape[-1]))
        except UnusableInputError:
            continue  # an unreadable sample: audit-data reports it
    if not lengths:
        raise UnusableInputError(f"no readable sample in {path} to take the trained length from")
    lengths.sort()
    p99 = lengths[min(len(lengths) - 1, int(0.99 * len(lengths)))]
    return {"max": lengths[-1], "p99": p99, "samples": len(lengths)}


def probe_lengths(
    drafter: Any,
    tm: Any,
    texts: Sequence[str],
    lengths: Sequence[int],
    *,
    encode: Callable[[str], list[int]],
    k: int,
    max_new_tokens: int,
    engine: str,
    device: str,
    prompts_per_length: int = 2,
    trained_length: int | None = None,
    trained_from: str | None = None,
) -> dict[str, Any]:
    """Live acceptance at each prompt length (rows in order), the trained length marked."""
    rows = []
    limit = getattr(tm, "max_positions", None)
    for n in lengths:
        row: dict[str, Any] = {
            "length": n,
            "beyond_trained": None if trained_length is None else n > trained_length,
        }
        ids = length_prompt_ids(encode, texts, n, prompts_per_length)
        longest = max(len(i) for i in ids)
        if limit is not None and longest + max_new_tokens > limit:
            row.update(
                {
                    "prompt_tokens": longest,
                    "acceptance_length": None,
                    "acceptance_rate": None,
                    "lossless": None,
                    "note": f"{longest} + {max_new_tokens} new tokens exceed the target's {limit} positions",
                }
            )
            rows.append(row)
            continue
        r = probe(
            drafter,
            tm,
            ids,
            k=k,
            max_new_tokens=max_new_tokens,
            device=device,
            engine=engine,
            teacher_forced=False,
            sweep=False,
        )
        row.update(
            {
                "prompt_tokens": round(sum(len(i) for i in ids) / len(ids), 1),
                "acceptance_length": r.acceptance_length,
                "acceptance_rate": r.acceptance_rate,
                "lossless": r.lossless,
                "note": "",
            }
        )
        rows.append(row)
    return {
        "rows": rows,
        "trained_length": trained_length,
        "trained_length_from": trained_from,
        "prompts_per_length": prompts_per_length,
        "max_new_tokens": max_new_tokens,
        "how": LENGTH_HOW,
    }


def parse_lengths(value: str) -> list[int]:
    """``"256,1024"`` -> ``[256, 1024]`` (positive integers, ascending as given)."""
    try:
        out = [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise BadArgumentsError(
            f"--lengths {value!r}: expected comma-separated token counts, e.g. 256,1024"
        ) from None
    if not out or any(n <= 0 for n in out):
        raise BadArgumentsError(f"--lengths {value!r}: expected positive token counts")
    return out


def probe_served(
    drafter: str | Path,
    target: str | Path,
    prompts: str | Path | Sequence[str],
    *,
    chat: bool = False,
    template_kwargs: Mapping[str, Any] | None = None,
    lengths: Sequence[int] = (),
    trained_length: int | None = None,
    dumps: str | Path | None = None,
    prompts_per_length: int = 2,
    length_new_tokens: int | None = None,
    k: int = 3,
    max_new_tokens: int = 64,
    device: str = "auto",
    engine: str = "reference",
    teacher_forced: bool = True,
    sweep: bool = True,
) -> ProbeResult:
    """:func:`~eagle3_forensics.probe.core.probe` with prompts rendered as the server would
    (``chat`` or ``template_kwargs``), acceptance by segment (whenever the target has a
    ``tokenizer.json``) and, with ``lengths``, acceptance against prompt length."""
    texts = read_prompts(prompts) if isinstance(prompts, (str, Path)) else list(prompts)
    if not Path(target).is_dir():
        raise UnusableInputError(f"target directory not found: {target}", path=str(target))
    render = chat or template_kwargs is not None
    tchat = target_chat(target)
    if render and (tchat is None or not tchat.template):
        raise UnusableInputError(f"{target} has no chat template to render the prompts with")
    trained_from = "--trained-length" if trained_length is not None else None
    if trained_length is None and dumps is not None:
        t = trained_length_from_dumps(dumps)
        trained_length = int(t["max"])
        trained_from = f"dumps: max of {t['samples']} samples (p99 {t['p99']})"
    tm = load_target(target, device)
    rendered = render and tchat is not None
    ids = render_prompts(tchat, texts, template_kwargs) if rendered and tchat is not None else []
    result = probe(
        drafter,
        tm,
        ids if rendered else texts,
        k=k,
        max_new_tokens=max_new_tokens,
        device=device,
        engine=engine,
        teacher_forced=teacher_forced,
        sweep=sweep,
    )
    if not rendered:
        ids = [tm.encode(t) for t in texts]  # as probe encodes them
    if render and tchat is not None:
        kw = dict(template_kwargs or {})
        result.chat = {"template_kwargs": kw, "mode": default_mode(tchat, kw), "add_generation_prompt": True}
    if tchat is not None:
        mask = _draft_vocab(drafter, target)
        result.segments = segment_acceptance(ids, result.live.outputs, result.live.cycles, k, tchat, mask)
        if mask is not None:
            cov = special_coverage(mask, tchat, generation_eos_ids(target))
            result.findings = measured_special_findings(cov, result.live.outputs, result.live.cycles, k)

    if lengths:
        if render and tchat is not None:
            rchat = tchat

            def encode(text: str) -> list[int]:
                return rchat.render_ids(
                    [{"role": "user", "content": text}],
                    template_kwargs=template_kwargs,
                    add_generation_prompt=True,
                )
        else:
            encode = tm.encode
        result.by_length = probe_lengths(
            drafter,
            tm,
            texts,
            lengths,
            encode=encode,
            k=k,
            max_new_tokens=length_new_tokens or min(max_new_tokens, 32),
            engine=engine,
            device=device,
            prompts_per_length=prompts_per_length,
            trained_length=trained_length,
            trained_from=trained_from,
        )
    elif trained_length is not None:
        result.by_length = {"rows": [], "trained_length": trained_length, "trained_length_from": trained_from}
    return result


def probe_as_served(
    drafter: str | Path,
    target: str | Path,
    prompts: str | Path | Sequence[str],
    *,
    template_kwargs: Mapping[str, Any] | None = None,
    lengths: Sequence[int] = (),
    trained_length: int | None = None,
    dumps: str | Path | None = None,
    **probe_options: Any,
) -> ProbeResult:
    """Notebook 04's second view, the prompts as a server sees them: rendered with the target's chat
    template whenever it has one, by segment and, with ``lengths``, one prompt per length. Only the
    live run: the teacher-forced pass and the aux sweep are the first view's. ``probe_options`` are
    :func:`probe_served`'s ``k``, ``max_new_tokens``, ``device`` and ``engine``."""
    tchat = target_chat(target)
    return probe_served(
        drafter,
        target,
        prompts,
        chat=tchat is not None and bool(tchat.template),
        template_kwargs=template_kwargs,
        lengths=lengths,
        trained_length=trained_length,
        dumps=dumps,
        prompts_per_length=1,
        teacher_forced=False,
        sweep=False,
        **probe_options,
    )


def _draft_vocab(drafter: str | Path, target: str | Path) -> Any | None:
    """The drafter's draft vocabulary as a bool ``[V]`` mask (t2d, or d2t decoded); None when the
    checkpoint does not say (a full-vocabulary drafter: everything is reachable)."""
    from eagle3_forensics.vocab.inputs.maps import load_mapping  # heavy: torch

    try:
        return load_mapping(drafter, target).t2d_mask
    except (ValueError, UnusableInputError):
        return None
