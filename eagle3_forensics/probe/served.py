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

from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.probe.core import ProbeResult, load_target, probe, read_prompts
from eagle3_forensics.vocab.chat import (
    SEGMENTS,
    ChatTemplate,
    default_mode,
    segment_labels,
    structural_tokens,
)
from eagle3_forensics.vocab.special import generation_eos_ids, target_chat

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
) -> dict[str, Any]:
    """Acceptance per segment (:data:`SEGMENT_DEFINITIONS`) of a live run's verify steps."""
    st = structural_tokens(chat, generation_eos_ids(chat.directory) if chat.directory else ())
    counts = {
        s: {"positions": 0, "proposed": 0, "accepted": 0, "steps": 0, "step_accepted": 0} for s in SEGMENTS
    }
    for prompt, out, steps in zip(prompts, outputs, cycles, strict=True):
        labels = segment_labels([*prompt, *out], chat, st)[len(prompt) :]
        for seg in labels:
            counts[seg]["positions"] += 1
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
    return {"by_segment": rows, "definitions": SEGMENT_DEFINITIONS}


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
        result.segments = segment_acceptance(ids, result.live.outputs, result.live.cycles, k, tchat)
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
