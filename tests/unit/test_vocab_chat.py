"""eagle3_forensics.vocab.chat on a real byte-level BPE tokenizer with a Qwen3-style template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("jinja2")

from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.vocab.chat import (
    byte_pieces,
    default_mode,
    load_chat_template,
    reasoning_share,
    segment_labels,
    structural_tokens,
    supported_modes,
)

# Qwen3's switch, written for this test: thinking by default; enable_thinking=false closes an
# empty think block in the generation prompt.
QWEN_LIKE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}"
    "{% endif %}"
)
PLAIN = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
SPECIALS = ["<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"]


def make_target(tmp: Path, template: str | None) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", *SPECIALS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    text = ["the model finds a new table again.", "user assistant plan answer", "\n\n"] * 20
    tok.train_from_iterator(text, trainer)
    tmp.mkdir(parents=True, exist_ok=True)
    tok.save(str(tmp / "tokenizer.json"))
    cfg: dict[str, object] = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    if template is not None:
        cfg["chat_template"] = template
    (tmp / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return tmp


@pytest.fixture(scope="module")
def qwen_like(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_target(tmp_path_factory.mktemp("qwen"), QWEN_LIKE)


def test_modes_and_default(qwen_like: Path) -> None:
    chat = load_chat_template(qwen_like)
    assert chat is not None
    assert supported_modes(chat) == ["thinking", "non_thinking"]
    assert default_mode(chat) == "thinking"
    assert default_mode(chat, {"enable_thinking": False}) == "non_thinking"
    prompt = [{"role": "user", "content": "the table"}]
    off = chat.render(prompt, mode="non_thinking", add_generation_prompt=True)
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    with pytest.raises(UnusableInputError, match="unknown chat mode"):
        chat.render(prompt, mode="deep")


def test_template_without_switch(tmp_path: Path) -> None:
    chat = load_chat_template(make_target(tmp_path, PLAIN))
    assert chat is not None
    assert supported_modes(chat) == []
    assert default_mode(chat) is None
    assert load_chat_template(make_target(tmp_path / "none", None)) is None


def test_structural_tokens(qwen_like: Path) -> None:
    chat = load_chat_template(qwen_like)
    assert chat is not None
    st = structural_tokens(chat)
    by_text = {st.texts[i]: k for i, k in st.kinds.items()}
    assert by_text["<|im_end|>"] == "eos"
    assert by_text["<think>"] == by_text["</think>"] == "reasoning_tag"
    assert by_text["<tool_call>"] == "tool_tag"
    assert by_text["<|im_start|>"] == "special"
    # the role word and the newline after it are written by the template, not by any content
    scaffold = {chat.tokenizer.decode([i]) for i, k in st.kinds.items() if k == "scaffold"}
    assert "\n" in "".join(scaffold)
    assert set(chat.encode("assistant")) <= {i for i, k in st.kinds.items() if k == "scaffold"}
    assert byte_pieces(chat) == {}  # byte-level BPE: no fallback pieces


def test_segments(qwen_like: Path) -> None:
    chat = load_chat_template(qwen_like)
    assert chat is not None
    msgs = [
        {"role": "user", "content": "the table"},
        {"role": "assistant", "content": "<think>plan</think>answer<tool_call>model</tool_call>"},
    ]
    ids = chat.render_ids(msgs)
    labels = segment_labels(ids, chat)
    decoded = [
        (chat.tokenizer.decode([i], skip_special_tokens=False), lab)
        for i, lab in zip(ids, labels, strict=True)
    ]
    segs = {lab for _, lab in decoded}
    assert segs == {"scaffold", "reasoning", "answer", "tool_call"}
    reasoning = "".join(t for t, lab in decoded if lab == "reasoning")
    tool = "".join(t for t, lab in decoded if lab == "tool_call")
    assert reasoning == "plan" and tool == "model"
    assert [t for t, lab in decoded if lab == "scaffold"].count("<think>") == 1
    plain = chat.render_ids([{"role": "assistant", "content": "answer"}])
    assert reasoning_share([ids, plain], chat) == 0.5
    assert reasoning_share([], chat) == 0.0


def test_a_template_is_compiled_once_and_a_broken_one_is_one_line() -> None:
    """The checks render hundreds of conversations with one template: it is compiled once per process
    (the special-token check compiled it 180 times per call, ~1 s on the demo)."""
    from eagle3_forensics.vocab.inputs.chat import compiled_template, render_chat

    tpl = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}{{ bos_token }}"
    compiled_template.cache_clear()
    for text in ("a", "b", "c"):
        assert (
            render_chat(tpl, [{"role": "user", "content": text}], {"bos_token": "<s>"}) == f"<user>{text}<s>"
        )
    info = compiled_template.cache_info()
    assert (info.misses, info.hits) == (1, 2)
    with pytest.raises(UnusableInputError, match="the chat template failed"):
        render_chat("{% for m in messages %}", [], {})
    with pytest.raises(UnusableInputError, match="the chat template failed"):
        render_chat("{{ raise_exception('no system role') }}", [], {})
