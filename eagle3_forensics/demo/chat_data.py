"""The demo drafters' chat training data, the chat prompts, and the data as a trainer writes it.

* :func:`regenerated` — conversations whose every assistant turn the target wrote itself (greedy,
  until ``<|end|>``), rendered by the template in one mode: what SpecForge's/speculators'
  "regenerate the responses with the target" step produces.
* :func:`foreign` — the same conversations with responses the target did not write (another
  sampler: another successor map and its plan), rendered in thinking mode.
* :func:`write_train_dump` — samples in SpecForge's ``prepare_hidden_states`` layout
  (``rows_0-2000/data_<i>.ckpt``: ``input_ids``, ``loss_mask`` over the assistant responses,
  ``hidden_state`` [1,T,H] after the final norm, ``aux_hidden_state`` [1,T,3H]) and, for a map
  built another way, ``vocab_mapping/vocab_mapping.pt``.
* :func:`write_chat_prompts` — single-turn and long (multi-turn history) prompts for ``probe``.

Everything is seeded and single-threaded (the caller holds :func:`deterministic`).
"""

from __future__ import annotations

import json
import pathlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from eagle3_forensics.demo.chat import (
    THINK,
    THINK_END,
    Turn,
    messages_for,
    render_ids,
    rendered_with_mask,
    user_turn,
)

Responses = Callable[[list[Turn], str], list[str]]  # (turns, mode) -> assistant contents
MAX_RESPONSE = 80  # tokens; a demo response is about 55 (thinking) or 32 (non-thinking)


@dataclass
class ChatSet:
    """Equal-length rows (cut to the trained length) and their loss masks."""

    ids: torch.Tensor  # [N, T] long
    mask: torch.Tensor  # [N, T] long: 1 on assistant-response tokens
    mode: str

    def plus(self, other: ChatSet) -> ChatSet:
        """These rows, then ``other``'s (same length)."""
        return ChatSet(torch.cat([self.ids, other.ids]), torch.cat([self.mask, other.mask]), self.mode)

    def cut(self, length: int) -> ChatSet:
        return ChatSet(self.ids[:, :length].clone(), self.mask[:, :length].clone(), self.mode)


@torch.inference_mode()
def greedy_until(model: Any, ids: Sequence[int], stop: int, max_new: int) -> list[int]:
    """Greedy continuation of one prompt, ``stop`` included when reached."""
    from transformers import DynamicCache  # optional: transformers (the models extra)

    cache = DynamicCache(config=model.config)
    out = model(input_ids=torch.tensor([list(ids)]), cache=cache, use_cache=True)
    new: list[int] = []
    while len(new) < max_new:
        nxt = int(out.logits[0, -1].argmax())
        new.append(nxt)
        if nxt == stop:
            break
        out = model(input_ids=torch.tensor([[nxt]]), cache=cache, use_cache=True)
    return new


def _decode(fast: Any, ids: Sequence[int]) -> str:
    return str(fast.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False))


def regenerate_turns(
    model: Any, fast: Any, turns: list[Turn], mode: str, stop: int, budget: int | None = None
) -> list[str]:
    """The target's own response to each user turn, in ``mode``, as assistant contents; stops once
    the rendering reaches ``budget`` tokens (the last response may then be cut)."""
    responses: list[str] = []
    for i in range(len(turns)):
        prompt = render_ids(fast, messages_for(turns, responses, upto=i + 1), mode, generation_prompt=True)
        room = MAX_RESPONSE if budget is None else min(MAX_RESPONSE, budget - len(prompt))
        if room <= 0:
            return responses
        new = greedy_until(model, prompt, stop, room)
        text = _decode(fast, new[:-1] if new and new[-1] == stop else new)
        responses.append(text if mode == "thinking" else f"{THINK}{THINK_END}{text}")
    return responses


def _conversation_turns(world: Any, rng: random.Random, p_follow: float, n: int) -> list[Turn]:
    return [user_turn(world.facts, world.successor, rng, p_follow) for _ in range(n)]


def regenerated(
    model: Any,
    fast: Any,
    world: Any,
    rng: random.Random,
    *,
    mode: str,
    length: int,
    n: int,
    stop: int,
    p_follow: float,
) -> ChatSet:
    """``n`` multi-turn conversations, every response the target's own, rendered in ``mode``, cut to
    ``length`` tokens."""
    rows, masks = [], []
    for _ in range(n):
        turns = _conversation_turns(world, rng, p_follow, length // 24 + 1)
        budget = length
        while True:
            responses = regenerate_turns(model, fast, turns, mode, stop, budget=budget)
            ids, mask = rendered_with_mask(fast, turns[: len(responses)], responses, mode)
            if len(ids) >= length:
                break
            # re-tokenising the decoded responses can come out shorter than generated: go on a little
            budget += 16
            if len(responses) == len(turns):
                turns.extend(_conversation_turns(world, rng, p_follow, 2))
        rows.append(ids[:length])
        masks.append(mask[:length])
    return ChatSet(torch.tensor(rows), torch.tensor(masks), mode)


def foreign(
    fast: Any, world: Any, rng: random.Random, responses: Responses, *, length: int, n: int, p_follow: float
) -> ChatSet:
    """``n`` conversations whose responses come from ``responses`` (not the target), thinking mode."""
    rows, masks = [], []
    for _ in range(n):
        turns = _conversation_turns(world, rng, p_follow, length // 24 + 1)
        ids, mask = rendered_with_mask(fast, turns, responses(turns, "thinking"), "thinking")
        rows.append(ids[:length])
        masks.append(mask[:length])
    return ChatSet(torch.tensor(rows), torch.tensor(masks), "thinking")


def reasoning_share(data: ChatSet, think: int, think_end: int) -> float:
    """The share of loss-masked tokens inside reasoning spans (``<think>`` .. ``</think>``)."""
    inside = total = 0
    for row, mask in zip(data.ids.tolist(), data.mask.tolist(), strict=True):
        thinking = False
        for t, m in zip(row, mask, strict=True):
            thinking = thinking or t == think
            total += m
            inside += m and thinking
            thinking = thinking and t != think_end
    return inside / max(1, total)


# ---------------------------------------------------------------------------------------------
# prompts for the probe
# ---------------------------------------------------------------------------------------------


def _prompt_record(fast: Any, i: int, messages: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    text = fast.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, enable_thinking=mode == "thinking"
    )
    bos = str(fast.bos_token)
    if not text.startswith(bos):
        raise RuntimeError("the demo chat template must start with the bos token")
    # `prompt` is the rendering without its leading <s>: the tokenizer adds <s> itself, so `probe
    # --prompts` sees exactly the ids apply_chat_template(tokenize=True) gives.
    return {"id": i, "messages": messages, "enable_thinking": mode == "thinking", "prompt": text[len(bos) :]}


def write_chat_prompts(
    path: pathlib.Path,
    model: Any,
    fast: Any,
    world: Any,
    rng: random.Random,
    *,
    n: int,
    history: int,
    stop: int,
    p_follow: float,
) -> list[int]:
    """``n`` chat prompts in thinking mode after ``history`` earlier turns (the target's own answers);
    returns the prompts' token lengths."""
    lines, lengths = [], []
    for i in range(n):
        turns = _conversation_turns(world, rng, p_follow, history + 1)
        responses = regenerate_turns(model, fast, turns[:history], "thinking", stop)
        messages = messages_for(turns, responses)
        rec = _prompt_record(fast, i, messages, "thinking")
        lengths.append(len(render_ids(fast, messages, "thinking", generation_prompt=True)))
        lines.append(json.dumps(rec, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lengths


# ---------------------------------------------------------------------------------------------
# the data as a trainer writes it
# ---------------------------------------------------------------------------------------------


@torch.inference_mode()
def write_train_dump(
    root: pathlib.Path,
    model: Any,
    data: ChatSet,
    aux_ids: Sequence[int],
    n: int,
    *,
    store: torch.dtype,
    vocab_mapping: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> None:
    """The first ``n`` rows of ``data`` as SpecForge ``prepare_hidden_states`` records."""
    rows = root / "rows_0-2000"
    rows.mkdir(parents=True, exist_ok=True)
    for i in range(min(n, data.ids.shape[0])):
        ids = data.ids[i : i + 1]
        out = model(input_ids=ids, output_hidden_states=True)
        aux = torch.cat([out.hidden_states[k] for k in aux_ids], dim=-1)
        record = {
            "input_ids": ids[0].clone(),
            "loss_mask": data.mask[i].clone(),
            "hidden_state": out.hidden_states[-1].to(store).clone(),  # HF: the last one is after the norm
            "aux_hidden_state": aux.to(store).clone(),
        }
        torch.save(record, str(rows / f"data_{i}.ckpt"))
    if vocab_mapping is not None:
        (root / "vocab_mapping").mkdir(exist_ok=True)
        d2t, t2d = vocab_mapping
        torch.save({"d2t": d2t.clone(), "t2d": t2d.clone()}, str(root / "vocab_mapping" / "vocab_mapping.pt"))
