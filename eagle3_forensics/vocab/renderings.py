"""Which rendering a tokenised training sample is: the think-block outcome, and whether the target's
own template (in which mode) reproduces its text.

Training data is rendered once, at data prep; the server renders every request again with the
target's template in the serving mode. A drafter trained on one rendering and served on another
sees text it never learned (SpecForge#296, ms-swift#9276). Without the original messages, a sample's
text is matched against the template's rendering of a sentinel conversation in each mode: the
literal parts escaped, the sentinel contents as groups. Three outcomes are told apart, because
they train different things after the assistant marker:

* ``reasoning``: a think block with content (what a thinking-mode server generates);
* ``empty_think``: a think block holding only whitespace (the non-thinking generation prompt's
  ``<think></think>``, then the answer);
* ``no_think``: no think block at all (neither mode of a Qwen3-style template serves this).

The outcome is what the model wrote (a thinking-mode target may skip its reasoning with an empty
block); the *mode* a sample was rendered in is read from the prompt side instead: the text before
the first loss-masked token against each mode's generation prompt (:func:`prompt_modes`), where the
template's own markers sit (Qwen3's non-thinking prompt ends with ``<think></think>``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.vocab.chat import REASONING_TAGS, ChatTemplate, supported_modes

OUTCOMES: tuple[str, ...] = ("reasoning", "empty_think", "no_think")
MAX_MATCH_CHARS = 400_000
_USER, _ANSWER, _PLAN = "zqxuser", "zqxanswer", "zqxplan"  # sentinel contents (vocab.chat's words)


@dataclass(frozen=True)
class Form:
    """One way the template renders a one-turn sample: a full conversation, or a generation prompt
    followed by the generated response."""

    mode: str | None
    form: str  # conversation | conversation_reasoning | generation
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class Renderings:
    """A template's forms per mode and what each mode's generation prompt leads the model to write."""

    chat: ChatTemplate
    modes: list[str]
    forms: list[Form]
    expected: dict[str, str | None]  # mode -> the outcome a server in that mode trains for
    think_ids: list[tuple[int, int]]  # (open id, close id) of the reasoning tags the tokenizer has
    prompts: list[Form] = field(default_factory=list)  # each mode's generation prompt, whole

    def to_dict(self) -> dict[str, Any]:
        return {"modes": self.modes, "expected_outcome": self.expected, "forms": len(self.forms)}


def _pattern(text: str, bos: str | None, tail: bool) -> re.Pattern[str]:
    out: list[str] = []
    seen: set[str] = set()
    rest = text
    names = {_USER: "user", _ANSWER: "answer", _PLAN: "plan"}
    words = re.compile("|".join(names))
    pos = 0
    for m in words.finditer(rest):
        out.append(re.escape(rest[pos : m.start()]))
        name = names[m.group(0)]
        out.append(f"(?P={name})" if name in seen else f"(?P<{name}>.*?)")
        seen.add(name)
        pos = m.end()
    out.append(re.escape(rest[pos:]))
    if tail:
        out.append("(?P<response>.*)")
    lead = f"(?:{re.escape(bos)})?" if bos and not text.startswith(bos) else ""
    return re.compile(lead + "".join(out), re.DOTALL)


def _tags(chat: ChatTemplate) -> list[tuple[int, int]]:
    out = []
    for a, b in REASONING_TAGS:
        ia, ib = chat.token_id(a), chat.token_id(b)
        if ia is not None and ib is not None:
            out.append((ia, ib))
    return out


def renderings(chat: ChatTemplate) -> Renderings:
    """The sentinel forms of ``chat`` in each mode it tells apart (one mode ``None`` without a switch)."""
    modes: list[str | None] = [*supported_modes(chat)] or [None]
    bos = chat.special.get("bos_token")
    forms: list[Form] = []
    expected: dict[str, str | None] = {}
    user = {"role": "user", "content": _USER}
    shapes = (
        ("conversation", [user, {"role": "assistant", "content": _ANSWER}], False),
        (
            "conversation_reasoning",
            [user, {"role": "assistant", "content": f"<think>{_PLAN}</think>{_ANSWER}"}],
            False,
        ),
        ("generation", [user], True),
    )
    tags = _tags(chat)
    prompts: list[Form] = []
    for mode in modes:
        for form, msgs, gen in shapes:
            try:
                text = chat.render(msgs, mode=mode, add_generation_prompt=gen)
            except UnusableInputError:
                continue
            forms.append(Form(mode, form, _pattern(text, bos, tail=gen)))
        if mode is None:
            continue
        try:
            prompt = chat.render([user], mode=mode, add_generation_prompt=True)
        except UnusableInputError:
            expected[mode] = None
            continue
        prompts.append(Form(mode, "generation_prompt", _pattern(prompt, bos, tail=False)))
        closes = [b for a, b in REASONING_TAGS if chat.token_id(b) is not None]
        opens = [a for a, b in REASONING_TAGS if chat.token_id(a) is not None]
        tail = prompt.rstrip()
        if not tags:
            expected[mode] = None
        elif any(tail.endswith(c) for c in closes):
            expected[mode] = "empty_think"  # the prompt closed an empty block: the model answers
        elif any(tail.endswith(o) for o in opens) or mode == "thinking":
            expected[mode] = "reasoning"
        else:
            expected[mode] = None
    return Renderings(chat, [m for m in modes if m is not None], forms, expected, tags, prompts)


def outcome(ids: Sequence[int], r: Renderings) -> str:
    """``reasoning`` / ``empty_think`` / ``no_think`` of one sample's ids (any think block counts)."""
    seq = [int(t) for t in ids]
    found = "no_think"
    for open_id, close_id in r.think_ids:
        i = 0
        while i < len(seq):
            if seq[i] != open_id:
                i += 1
                continue
            j = i + 1
            while j < len(seq) and seq[j] != close_id:
                j += 1
            inner = r.chat.tokenizer.decode(seq[i + 1 : j], skip_special_tokens=False)
            if inner.strip():
                return "reasoning"
            found = "empty_think"
            i = j + 1
    return found


def _plain(ids: Sequence[int], r: Renderings) -> bool:
    """True when the sample holds none of the tokenizer's added tokens but bos/eos/unk/pad."""
    try:
        added = {int(i) for i in r.chat.tokenizer.get_added_tokens_decoder()}
    except AttributeError:
        return False
    kept = {r.chat.token_id(t) for t in r.chat.special.values() if t}
    markers = added - kept
    return bool(markers) and not markers.intersection(int(t) for t in ids)


def prompt_modes(ids: Sequence[int], mask: Sequence[bool] | None, r: Renderings) -> list[str] | None:
    """The modes whose generation prompt reproduces the text before the first loss-masked token:
    the mode the sample was rendered in, read from the template's markers, not from what the model
    wrote. ``None`` without a prompt side (no mask, a mask from the first token, or no modes)."""
    if mask is None or not r.prompts:
        return None
    first = next((i for i, m in enumerate(mask) if m), None)
    if not first:
        return None
    text = r.chat.tokenizer.decode([int(t) for t in ids[:first]], skip_special_tokens=False)
    if len(text) > MAX_MATCH_CHARS:
        return None
    return sorted({f.mode for f in r.prompts if f.mode is not None and f.pattern.fullmatch(text)})


def classify(ids: Sequence[int], r: Renderings, mask: Sequence[bool] | None = None) -> dict[str, Any]:
    """One sample: its outcome, the forms of the target's template that reproduce its text exactly
    (``template_match`` false: not byte-identical to any rendering of the template), and their modes;
    with the loss ``mask``, the modes its prompt side was rendered in (:func:`prompt_modes`)."""
    if _plain(ids, r):
        # no turn marker at all: a plain-text sample (continued pretraining style), not a chat rendering
        return {"outcome": "plain", "template_match": False, "forms": [], "modes": [], "prompt_modes": None}
    text = r.chat.tokenizer.decode([int(t) for t in ids], skip_special_tokens=False)
    # lazy groups backtrack: past this size the match is not attempted (counted as not matched)
    matched = [f for f in r.forms if f.pattern.fullmatch(text)] if len(text) <= MAX_MATCH_CHARS else []
    return {
        "outcome": outcome(ids, r),
        "template_match": bool(matched),
        "forms": sorted({f.form for f in matched}),
        "modes": sorted({f.mode for f in matched if f.mode is not None}),
        "prompt_modes": prompt_modes(ids, mask, r),
    }
