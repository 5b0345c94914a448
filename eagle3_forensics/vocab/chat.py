"""What a target's chat template makes of a conversation: renderings per mode, structural tokens, segments.

Servers render prompts with the target's own template (vLLM and SGLang call the tokenizer's
``apply_chat_template`` with the request's ``chat_template_kwargs``), so a drafter trained on another
rendering — thinking off where the server thinks, an empty think block where it does not — sees text
it never learned. This module answers three questions for the checks and probes above it:

* which *mode* a rendering belongs to (:data:`MODES`: the Qwen3-style ``enable_thinking`` switch,
  which Qwen3, DeepSeek-V3.1, GLM-4.5 and others share), and which mode the template uses by default;
* which tokens the template and generation emit *structurally* (eos/bos, role markers, think and tool
  tags, scaffolding pieces such as the newline after a role): a draft vocabulary without them cannot
  propose them, wherever they occur;
* which *segment* each position of a rendered conversation is in (``scaffold``, ``reasoning``,
  ``answer``, ``tool_call``), so acceptance and data can be split by segment.

Rendering is Jinja in a sandbox exactly as ``transformers`` does it (:func:`render_chat`) and
tokenisation is the ``tokenizers`` library over ``tokenizer.json``: no torch, no transformers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.vocab.inputs.chat import (
    load_tokenizer,
    read_chat_template,
    read_tokenizer_config,
    render_chat,
    token_text,
)

# mode -> the template kwargs a server passes for it (vLLM/SGLang `chat_template_kwargs`)
MODES: Mapping[str, Mapping[str, Any]] = {
    "thinking": {"enable_thinking": True},
    "non_thinking": {"enable_thinking": False},
}

# Reasoning and tool-call delimiters as the templates in the field spell them (added tokens):
# Qwen3 / DeepSeek-R1 / GLM `<think>`, Kimi K2 `◁think▷`; Qwen/Hermes `<tool_call>`, Kimi's sections.
REASONING_TAGS: tuple[tuple[str, str], ...] = (("<think>", "</think>"), ("◁think▷", "◁/think▷"))
TOOL_TAGS: tuple[tuple[str, str], ...] = (
    ("<tool_call>", "</tool_call>"),
    ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"),
)

SEGMENTS: tuple[str, ...] = ("scaffold", "reasoning", "answer", "tool_call")

# Sentinel contents: distinct words no template produces, so their spans can be found in a rendering.
_PROBE_USER = "zqxuser"
_PROBE_ANSWER = "zqxanswer"


@dataclass(frozen=True)
class ChatTemplate:
    """A target's tokenizer and chat template, ready to render and tokenise conversations."""

    directory: str
    template: str
    tokenizer: Any  # tokenizers.Tokenizer
    special: dict[str, str | None] = field(default_factory=dict)

    def render(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        mode: str | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
        add_generation_prompt: bool = False,
    ) -> str:
        """The rendered text; ``mode`` (a :data:`MODES` key) and ``template_kwargs`` (wins) merge."""
        kwargs = {**mode_kwargs(mode), **(template_kwargs or {})}
        return render_chat(
            self.template,
            [dict(m) for m in messages],
            self.special,
            add_generation_prompt=add_generation_prompt,
            template_kwargs=kwargs,
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of rendered text as ``apply_chat_template(tokenize=True)`` gives them (no added bos)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def render_ids(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        mode: str | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
        add_generation_prompt: bool = False,
    ) -> list[int]:
        return self.encode(
            self.render(
                messages,
                mode=mode,
                template_kwargs=template_kwargs,
                add_generation_prompt=add_generation_prompt,
            )
        )

    def token_id(self, text: str) -> int | None:
        tid = self.tokenizer.token_to_id(text)
        return None if tid is None else int(tid)


def mode_kwargs(mode: str | None) -> dict[str, Any]:
    if mode is None:
        return {}
    if mode not in MODES:
        raise UnusableInputError(f"unknown chat mode {mode!r}: one of {', '.join(MODES)}")
    return dict(MODES[mode])


def load_chat_template(target_dir: str | Path, template: str | None = None) -> ChatTemplate | None:
    """The target's tokenizer and template (``template`` overrides the shipped one); None without a template."""
    d = Path(target_dir)
    tokenizer = load_tokenizer(d)
    text = template if template is not None else (read_chat_template(d) if d.is_dir() else None)
    if text is None:
        return None
    cfg = read_tokenizer_config(d) if d.is_dir() else {}
    special = {k: token_text(cfg.get(k)) for k in ("bos_token", "eos_token", "unk_token", "pad_token")}
    return ChatTemplate(directory=str(d), template=text, tokenizer=tokenizer, special=special)


def _probe_conversation(reasoning: bool) -> list[dict[str, str]]:
    answer = f"<think>zqxplan</think>{_PROBE_ANSWER}" if reasoning else _PROBE_ANSWER
    return [{"role": "user", "content": _PROBE_USER}, {"role": "assistant", "content": answer}]


def supported_modes(chat: ChatTemplate) -> list[str]:
    """The :data:`MODES` the template tells apart (a template without the switch renders them alike)."""
    prompt = [{"role": "user", "content": _PROBE_USER}]
    renders = {m: chat.render(prompt, mode=m, add_generation_prompt=True) for m in MODES}
    return list(MODES) if len(set(renders.values())) > 1 else []


def default_mode(chat: ChatTemplate, template_kwargs: Mapping[str, Any] | None = None) -> str | None:
    """The mode a server renders in with these kwargs (none given: the template's default), or None
    when the template has no mode switch or the rendering matches no mode."""
    if not supported_modes(chat):
        return None
    prompt = [{"role": "user", "content": _PROBE_USER}]
    served = chat.render(prompt, template_kwargs=template_kwargs, add_generation_prompt=True)
    for m in MODES:
        if chat.render(prompt, mode=m, add_generation_prompt=True) == served:
            return m
    return None


def _added_tokens(chat: ChatTemplate) -> dict[int, str]:
    try:
        decoder = chat.tokenizer.get_added_tokens_decoder()
    except AttributeError:  # tokenizers < 0.14
        return {}
    return {int(i): str(getattr(t, "content", t)) for i, t in decoder.items()}


@dataclass(frozen=True)
class StructuralTokens:
    """Token ids the template and generation emit structurally, each with its kind."""

    kinds: dict[int, str]  # id -> eos | bos | reasoning_tag | tool_tag | special | scaffold
    texts: dict[int, str]

    def ids(self) -> list[int]:
        return sorted(self.kinds)


def structural_tokens(chat: ChatTemplate, eos_ids: Sequence[int] = ()) -> StructuralTokens:
    """Specials, eos/bos, reasoning and tool tags, and every piece the template itself writes
    (found by rendering sentinel conversations in each mode and keeping what is not content).

    ``eos_ids``: the generation config's eos ids (a server stops on them; the drafter must propose them)."""
    kinds: dict[int, str] = {}
    texts: dict[int, str] = {}

    def put(tid: int | None, kind: str, text: str | None = None) -> None:
        if tid is None or (tid in kinds and kinds[tid] != "scaffold"):
            return
        kinds[tid] = kind
        texts[tid] = text if text is not None else str(chat.tokenizer.id_to_token(tid))

    for name, kind in (("eos_token", "eos"), ("bos_token", "bos")):
        text = chat.special.get(name)
        if text:
            put(chat.token_id(text), kind, text)
    for tid in eos_ids:
        put(int(tid), "eos")
    for pairs, kind in ((REASONING_TAGS, "reasoning_tag"), (TOOL_TAGS, "tool_tag")):
        for pair in pairs:
            for text in pair:
                put(chat.token_id(text), kind, text)
    modes: list[str | None] = [None, *supported_modes(chat)]
    for mode in modes:
        for reasoning in (False, True):
            for gen in (False, True):
                msgs = _probe_conversation(reasoning)[: 1 if gen else 2]
                try:
                    text = chat.render(msgs, mode=mode, add_generation_prompt=gen)
                except UnusableInputError:
                    continue  # a template that refuses this shape (e.g. no generation prompt)
                for tid in _scaffold_ids(chat, text):
                    put(tid, "scaffold")
    added = _added_tokens(chat)
    for tid, kind in list(kinds.items()):
        if kind == "scaffold" and tid in added:
            kinds[tid] = "special"
    return StructuralTokens(kinds=kinds, texts=texts)


def generated_structural_ids(chat: ChatTemplate) -> set[int]:
    """Ids the template writes *inside the assistant's turn* — after the generation prompt, up to and
    including the turn's end — in each mode, with and without reasoning: what the generation itself
    emits structurally (the turn-end eos, think tags, pieces around them), as opposed to prompt-side
    scaffolding (role markers, the generation prompt) that a drafter never proposes."""
    out: set[int] = set()
    modes: list[str | None] = [None, *supported_modes(chat)]
    for mode in modes:
        for reasoning in (False, True):
            conv = _probe_conversation(reasoning)
            try:
                prompt = chat.render(conv[:1], mode=mode, add_generation_prompt=True)
                full = chat.render(conv, mode=mode)
            except UnusableInputError:
                continue
            common = 0  # where the rendered turn leaves the generation prompt
            while common < min(len(prompt), len(full)) and prompt[common] == full[common]:
                common += 1
            out.update(_scaffold_ids(chat, full[common:]))
    return out


def _scaffold_ids(chat: ChatTemplate, text: str) -> list[int]:
    """Ids of the tokens of ``text`` that lie outside the sentinel contents: what the template wrote."""
    content: list[tuple[int, int]] = []
    for word in (_PROBE_USER, _PROBE_ANSWER, "zqxplan"):
        at = text.find(word)
        while at >= 0:
            content.append((at, at + len(word)))
            at = text.find(word, at + 1)
    enc = chat.tokenizer.encode(text, add_special_tokens=False)
    out = []
    for tid, (a, b) in zip(enc.ids, enc.offsets, strict=True):
        if b > a and not any(a < e and s < b for s, e in content):
            out.append(int(tid))
    return out


def byte_pieces(chat: ChatTemplate) -> dict[int, str]:
    """SentencePiece byte-fallback pieces (``<0x00>`` … ``<0xFF>``): the only way such a tokenizer
    spells a character outside its vocabulary. Empty for byte-level BPE, where every byte has a base
    token and a character is never spelled by a fallback piece."""
    out: dict[int, str] = {}
    for b in range(256):
        text = f"<0x{b:02X}>"
        tid = chat.token_id(text)
        if tid is not None:
            out[tid] = text
    return out


def segment_labels(
    ids: Sequence[int], chat: ChatTemplate, structural: StructuralTokens | None = None
) -> list[str]:
    """One :data:`SEGMENTS` label per position of a rendered conversation (or a response).

    Added/special tokens and tags are ``scaffold``; between a reasoning tag pair ``reasoning``;
    between tool tags ``tool_call``; everything else ``answer``. ``start`` state is ``answer``: a
    response that begins inside a think block (the generation prompt opened it) should be labelled
    from the full rendering, not from the response alone."""
    st = structural if structural is not None else structural_tokens(chat)
    opens: dict[int, str] = {}
    closes: dict[int, str] = {}
    for pairs, seg in ((REASONING_TAGS, "reasoning"), (TOOL_TAGS, "tool_call")):
        for a, b in pairs:
            ia, ib = chat.token_id(a), chat.token_id(b)
            if ia is not None and ib is not None:
                opens[ia], closes[ib] = seg, seg
    scaffold_ids = {t for t, k in st.kinds.items() if k != "scaffold"}
    state = "answer"
    labels: list[str] = []
    for tid in ids:
        t = int(tid)
        if t in opens:
            labels.append("scaffold")
            state = opens[t]
        elif t in closes:
            labels.append("scaffold")
            state = "answer"
        elif t in scaffold_ids:
            labels.append("scaffold")
            if st.kinds.get(t) == "eos":
                state = "answer"
        else:
            labels.append(state)
    return labels


def reasoning_share(ids_per_sample: Sequence[Sequence[int]], chat: ChatTemplate) -> float:
    """The share of samples that contain a non-empty reasoning span."""
    if not ids_per_sample:
        return 0.0
    st = structural_tokens(chat)
    n = sum(1 for ids in ids_per_sample if "reasoning" in segment_labels(ids, chat, st))
    return n / len(ids_per_sample)
