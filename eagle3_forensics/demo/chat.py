"""The demo world's chat format: role and think tokens, a Qwen3-style template, conversations.

The demo target learns chat turns as well as plain documents::

    <s><|user|>{corpus sentences}<|end|><|assistant|><think>{plan}</think>{answer}<|end|>

* **thinking** (the template's default, ``enable_thinking`` true): the assistant writes a
  reasoning span first — a deterministic *plan* in other words than the answer (:func:`plan_text`)
  — then the answer;
* **non-thinking** (``enable_thinking=False``): the generation prompt ends with the empty think
  block ``<think></think>`` (as Qwen3 writes ``<think>\\n\\n</think>\\n\\n``) and the target goes
  straight to the answer.

The answer is the successor walk from the last sentence of the user turn (:data:`ANSWER_FACTS`
facts), so a response depends on the prompt, and the plan names the verbs of the same walk.
Rendering always goes through the real ``transformers`` tokenizer's ``apply_chat_template`` (as
vLLM and SGLang do); this module only builds the message lists and says which positions the
trainers' loss mask covers.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

USER, ASSISTANT, END, THINK, THINK_END = "<|user|>", "<|assistant|>", "<|end|>", "<think>", "</think>"
CHAT_TOKENS: tuple[str, ...] = (USER, ASSISTANT, END, THINK, THINK_END)
ANSWER_FACTS = 3  # facts in an answer: the successor walk from the user's last fact
MODES: tuple[str, ...] = ("thinking", "non_thinking")

# Qwen3's switch in the demo's own tokens: thinking unless `enable_thinking` is false; an assistant
# turn is rendered as written (its content carries its think block, Qwen3 style) or, given
# `reasoning_content`, as <think>reasoning</think>content.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}<|assistant|>"
    "{% if message['reasoning_content'] is defined and message['reasoning_content'] is not none %}"
    "<think>{{ message['reasoning_content'] }}</think>{% endif %}"
    "{{ message['content'] }}<|end|>"
    "{% else %}<|user|>{{ message['content'] }}<|end|>{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>"
    "{% if enable_thinking is defined and enable_thinking is false %}<think></think>{% endif %}"
    "{% endif %}"
)


def _verb(fact: str, verbs: Sequence[str]) -> str:
    return next(w for w in fact.split(" ") if w in verbs)


def _subject(fact: str, verbs: Sequence[str]) -> str:
    words = fact.split(" ")
    return " ".join(words[: words.index(_verb(fact, verbs))])


def walk(successor: Sequence[int], start: int, n: int = ANSWER_FACTS) -> list[int]:
    out, f = [], start
    for _ in range(n):
        f = successor[f]
        out.append(f)
    return out


def plan_text(facts: Sequence[str], successor: Sequence[int], last: int, verbs: Sequence[str]) -> str:
    """The reasoning span: who the user ended with and the verbs of the walk ahead, in other words."""
    steps = ", ".join(_verb(facts[f], verbs) for f in walk(successor, last))
    return f"hmm, the user ends with {_subject(facts[last], verbs)}. next: {steps}. so i answer."


def answer_text(facts: Sequence[str], successor: Sequence[int], last: int) -> str:
    return " ".join(facts[f] for f in walk(successor, last))


def assistant_content(reasoning: str | None, answer: str) -> str:
    """Qwen3-style assistant content: the think block (empty in non-thinking mode) then the answer."""
    return f"{THINK}{reasoning or ''}{THINK_END}{answer}"


@dataclass(frozen=True)
class Turn:
    user: str
    last_fact: int  # the user turn's last fact (the answer walks on from it)


def user_turn(facts: Sequence[str], successor: Sequence[int], rng: random.Random, p_follow: float) -> Turn:
    """One to three corpus sentences, chained like the documents."""
    f = rng.randrange(len(facts))
    out = [f]
    for _ in range(rng.randint(1, 3) - 1):
        f = successor[f] if rng.random() < p_follow else rng.randrange(len(facts))
        out.append(f)
    return Turn(" ".join(facts[i] for i in out), out[-1])


def messages_for(
    turns: Sequence[Turn], responses: Sequence[str], *, upto: int | None = None
) -> list[dict[str, Any]]:
    """``[user, assistant, user, assistant, ...]``; ``responses`` may be one shorter (a prompt)."""
    out: list[dict[str, Any]] = []
    for i, t in enumerate(turns[:upto]):
        out.append({"role": "user", "content": t.user})
        if i < len(responses):
            out.append({"role": "assistant", "content": responses[i]})
    return out


def render_ids(tok: Any, messages: list[dict[str, Any]], mode: str, *, generation_prompt: bool) -> list[int]:
    """Token ids of the rendering, through ``apply_chat_template`` (as vLLM and SGLang do)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    text = tok.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=generation_prompt, enable_thinking=mode == "thinking"
    )
    return [int(i) for i in tok(text, add_special_tokens=False)["input_ids"]]


def rendered_with_mask(
    tok: Any, turns: Sequence[Turn], responses: Sequence[str], mode: str
) -> tuple[list[int], list[int]]:
    """The whole conversation's ids and the trainers' loss mask: 1 on each assistant response
    (everything after its generation prompt, ``<|end|>`` included), 0 on prompts and scaffolding."""
    ids = render_ids(tok, messages_for(turns, responses), mode, generation_prompt=False)
    mask = [0] * len(ids)
    for i in range(len(responses)):
        start = len(
            render_ids(tok, messages_for(turns, responses[:i], upto=i + 1), mode, generation_prompt=True)
        )
        stop = len(
            render_ids(
                tok, messages_for(turns, responses[: i + 1], upto=i + 1), mode, generation_prompt=False
            )
        )
        mask[start:stop] = [1] * (stop - start)
    return ids, mask
