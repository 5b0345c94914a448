"""Training data made outside the project from a chat target, the way data-prep pipelines make it.

A tiny real ``LlamaForCausalLM`` with a byte-level BPE tokenizer and a Qwen3-style chat template (the
demo chat format of issue 22: ``<|user|>``, ``<|assistant|>``, ``<|end|>``, ``<think>``, ``</think>``;
``enable_thinking`` defaults to true; false closes an empty think block in the generation prompt).
Responses are generated with ``transformers`` directly (greedy: target-regenerated; sampled; or
foreign corpus text), rendered with ``apply_chat_template`` in a mode, cut to a length, run through
the target for the hidden states, and written as SpecForge ``data_<i>.ckpt`` dumps. Nothing here
comes from ``eagle3_forensics``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
import torch
from dump_builders import save

SPECIALS = ["<s>", "</s>", "<|user|>", "<|assistant|>", "<|end|>", "<think>", "</think>"]
TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'user' -%}<|user|>{{ m.content }}<|end|>"
    "{%- elif m.role == 'assistant' -%}<|assistant|>{{ m.content }}<|end|>{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>"
    "{%- if enable_thinking is defined and enable_thinking is false -%}<think></think>{%- endif -%}"
    "{%- endif -%}"
)
CORPUS = [
    "the model finds a new table again.",
    "a small bird trains the weights every day.",
    "the server builds two apples today.",
    "our robot maps the blue kite without errors.",
    "her sister accepts every token in the morning.",
    "the cat counts the vocabulary on the server.",
    "a farmer moves some numbers quickly!",
    "the team checks a new plan before lunch.",
]
PROMPTS = [f"{i}: {CORPUS[(i * 3 + 1) % len(CORPUS)]}" for i in range(12)]
AUX = (1, 2, 3)  # HF hidden_states indices captured as aux (the last is the final layer's, normed)


def build_chat_target(directory: Path, *, max_pos: int = 256, seed: int = 0) -> Path:
    """Tokenizer (trained BPE + the chat specials), template, and a random-init tiny Llama."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM

    directory.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS * 20 + PROMPTS, trainer)
    tok.save(str(directory / "tokenizer.json"))
    vocab = tok.get_vocab_size()
    cfg_tok = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "<|end|>",
        "pad_token": "</s>",
        "chat_template": TEMPLATE,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(cfg_tok), encoding="utf-8")
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=max_pos,
        bos_token_id=0,
        eos_token_id=tok.token_to_id("<|end|>"),
        tie_word_embeddings=False,
        initializer_range=0.3,  # peaked logits: a random model with clear greedy preferences
    )
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(str(directory), safe_serialization=True)
    gen = {"bos_token_id": 0, "eos_token_id": [tok.token_to_id("<|end|>")]}
    (directory / "generation_config.json").write_text(json.dumps(gen), encoding="utf-8")
    return directory


@dataclass
class Target:
    directory: Path
    tokenizer: Any
    model: Any

    @classmethod
    def load(cls, directory: Path) -> Target:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(directory))
        model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float32).eval()
        return cls(directory, tok, model)

    def tid(self, text: str) -> int:
        return int(self.tokenizer.convert_tokens_to_ids(text))

    def prompt_ids(self, prompt: str, thinking: bool, template: str | None = None) -> list[int]:
        out = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}],
            tokenize=True,
            add_generation_prompt=True,
            enable_thinking=thinking,
            chat_template=template,
        )
        ids = out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out
        return [int(x) for x in ids]

    @torch.inference_mode()
    def continue_(self, ids: list[int], n: int, *, sample: float | None = None, seed: int = 0) -> list[int]:
        """``n`` tokens the target writes after ``ids`` (greedy, or sampled at temperature ``sample``);
        never an end or think tag (the caller places those)."""
        from transformers import GenerationConfig

        banned = [
            [self.tid(t)]
            for t in ("<|end|>", "<think>", "</think>", "<s>", "</s>", "<|user|>", "<|assistant|>")
        ]
        torch.manual_seed(seed)
        cfg = GenerationConfig(
            max_new_tokens=n,
            min_new_tokens=n,
            do_sample=sample is not None,
            temperature=sample if sample is not None else None,
            top_k=0 if sample is not None else None,
            bad_words_ids=banned,
            eos_token_id=None,
            pad_token_id=self.tid("</s>"),
        )
        x = torch.tensor([ids])
        out = self.model.generate(x, attention_mask=torch.ones_like(x), generation_config=cfg)
        return [int(t) for t in out[0, len(ids) :]]

    def text_ids(self, text: str) -> list[int]:
        return [int(t) for t in self.tokenizer.encode(text, add_special_tokens=False)]


def response(
    t: Target,
    prompt_ids: list[int],
    *,
    reasoning: bool,
    writer: str,
    n: int,
    seed: int,
    temperature: float = 1.0,
) -> list[int]:
    """A response after ``prompt_ids``: ``<think>…</think>`` (reasoning) then the answer, then ``<|end|>``.
    ``writer``: ``greedy`` (the target), ``sampled`` (the target at ``temperature``), ``foreign`` (corpus text)."""
    out: list[int] = []
    ctx = list(prompt_ids)

    def write(k: int, salt: int) -> None:
        if writer == "foreign":
            text = " ".join(CORPUS[(seed + salt + j) % len(CORPUS)] for j in range(6))
            got = t.text_ids(" " + text)[:k]
        else:
            got = t.continue_(
                ctx + out, k, sample=temperature if writer == "sampled" else None, seed=seed * 7 + salt
            )
        out.extend(got)

    if reasoning:
        out.append(t.tid("<think>"))
        write(n // 2, 1)
        out.append(t.tid("</think>"))
    write(n, 2)
    out.append(t.tid("<|end|>"))
    return out


def render_sample(
    t: Target,
    prompt: str,
    *,
    mode: str,
    writer: str,
    n: int,
    seed: int,
    temperature: float = 1.0,
    template: str | None = None,
) -> tuple[list[int], list[int]]:
    """``(ids, loss_mask)``: the generation prompt in ``mode`` (thinking / non_thinking) plus the response,
    as speculators' and SpecForge's regenerate scripts build it; the mask covers the response."""
    thinking = mode == "thinking"
    p = t.prompt_ids(prompt, thinking, template)
    r = response(t, p, reasoning=thinking, writer=writer, n=n, seed=seed, temperature=temperature)
    return p + r, [0] * len(p) + [1] * len(r)


@torch.inference_mode()
def write_specforge(t: Target, root: Path, samples: list[tuple[list[int], list[int]]]) -> Path:
    """SpecForge dumps: ``hidden_state`` = the last layer (after the final norm, as HF returns it) and
    ``aux_hidden_state`` = layers :data:`AUX`, bfloat16, one ``data_<i>.ckpt`` per sample."""
    d = root / "rows_0-2000"
    d.mkdir(parents=True, exist_ok=True)
    for i, (ids, mask) in enumerate(samples):
        x = torch.tensor([ids])
        hs = t.model(x, output_hidden_states=True).hidden_states
        rec = {
            "input_ids": torch.tensor(ids, dtype=torch.long),
            "loss_mask": torch.tensor(mask, dtype=torch.long),
            "hidden_state": hs[-1].to(torch.bfloat16),
            "aux_hidden_state": torch.cat([hs[k] for k in AUX], dim=-1).to(torch.bfloat16),
        }
        save(rec, d / f"data_{i}.ckpt")
    return root


def make_set(
    t: Target,
    root: Path,
    *,
    mode: str = "thinking",
    writer: str = "greedy",
    n: int = 48,
    count: int = 8,
    cut: int | None = None,
    temperature: float = 1.0,
    template: str | None = None,
) -> Path:
    """One data set of ``count`` samples (prompt + response of about ``1.5 n`` tokens), each cut to its
    first ``cut`` tokens when given (a trainer's ``max_length`` truncation); ``template`` renders the
    prompt with another chat template than the target's."""
    samples = []
    for i in range(count):
        ids, mask = render_sample(
            t,
            PROMPTS[i % len(PROMPTS)],
            mode=mode,
            writer=writer,
            n=n,
            seed=i,
            temperature=temperature,
            template=template,
        )
        samples.append((ids[:cut], mask[:cut]) if cut else (ids, mask))
    return write_specforge(t, root, samples)
