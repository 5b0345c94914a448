"""Deterministic demo world: a trained tiny Llama target that also chats, EAGLE-3 drafters, variants.

``make_demo(out_dir)`` writes::

    out_dir/
      README.md
      prompts.jsonl                held-out plain prompts for the accept-rate probe
      chat_prompts.jsonl           single-turn chat prompts (thinking mode), chat_prompts_long.jsonl:
                                   the same after earlier turns (messages + the rendered prompt)
      target/                      tiny HF Llama (8 layers, V=512) trained on documents and chats
                                   + byte-level BPE tokenizer with role/think tokens and a chat template
      drafters/healthy/            EAGLE-3 drafter trained on target-regenerated chats (SpecForge layout)
      drafters/speculators_layout/ the same weights in the speculators layout (layers.0.*, embed_tokens)
      drafters/layers_flat/        the seed case: SpecForge's flat config, but layers.0.* tensor names
      drafters/d2t_absolute/       d2t stored as absolute target ids
      drafters/d2t_double_offset/  offset conversion applied twice
      drafters/d2t_missing/        no d2t tensor at all
      drafters/aux_shifted/        speculators layout whose aux ids are written one layer early
      drafters/foreign_data/ no_thinking/ short_trained/ vocab_no_think_end/
                                   load fine, accept less (:mod:`eagle3_forensics.demo.chat_variants`)
      train/<variant>/             a few samples of each chat drafter's data, as SpecForge writes them

The world (everything is a function of ``seed``):

1. **Corpus** — a fixed set of :data:`N_FACTS` sentences ("facts"), each with a successor fact
   (one cycle through all of them). A document starts at a random fact and follows the
   successor with probability :data:`P_FOLLOW`, else jumps to a random fact: low entropy, so
   the trained target's greedy continuation is predictable, yet it depends on context (which
   fact came before), so the drafter needs the target's features and not just the last token.
2. **Tokenizer** — a byte-level BPE of exactly :data:`VOCAB_SIZE` tokens trained on the corpus
   (``<s>`` is prepended by its post-processor, as for Llama); ids 3..7 are the chat tokens and
   ``tokenizer_config.json`` holds the Qwen3-style template (:data:`.chat.CHAT_TEMPLATE`).
3. **Target** — ``LlamaForCausalLM`` (8 layers, hidden 128, 4 heads of dim 32 — vLLM's CPU
   attention needs head_dim >= 32) trained for next-token prediction on documents and on chats
   in both modes, then stored in bfloat16.
4. **Drafter** — the draft vocabulary is the :data:`DRAFT_VOCAB_SIZE` most frequent loss-masked
   tokens of the drafter's training data (:func:`eagle3_forensics.vocab.mapping.build_vocab_mapping`,
   speculators' tie-break; the corpus uses fewer distinct tokens, so the rest is padded with the
   smallest unused ids and ``d2t`` starts with a run of zeros). Its training data is multi-turn
   chats whose responses the target regenerated (greedy, thinking mode: :mod:`.chat`); features
   are the target's HF hidden-state indices ``[2, 4, 5]``; training is EAGLE-3's training-time test
   (:func:`eagle3_forensics.reference.train.train_drafter`).

Training runs single-threaded with deterministic kernels: regenerating on the same machine and
software gives byte-identical files. Other CPUs or library versions may differ in the last
bits (the data is committed, so ``make report`` never retrains; tests check structure and
metrics, plus byte identity of a quick run).

Heavy imports (transformers, tokenizers) happen inside the functions that need them, so importing
this module stays cheap.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import random
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from eagle3_forensics.demo.chat import (
    CHAT_TEMPLATE,
    CHAT_TOKENS,
    END,
    THINK,
    THINK_END,
    Turn,
    answer_text,
    assistant_content,
    plan_text,
    rendered_with_mask,
    user_turn,
)
from eagle3_forensics.demo.chat_data import ChatSet, reasoning_share, write_chat_prompts, write_train_dump
from eagle3_forensics.demo.chat_variants import NEW_VARIANTS, build_sets, without_token
from eagle3_forensics.demo.facts import N_FACTS, P_FOLLOW, VERBS, World, make_world
from eagle3_forensics.demo.readme import write_readme
from eagle3_forensics.reference.drafter.export import export_tensors
from eagle3_forensics.reference.drafter.model import DrafterSpec, Eagle3Drafter, fresh_init
from eagle3_forensics.reference.train import (
    aux_features,
    deterministic,
    heldout_accuracy,
    train_causal_lm,
    train_drafter,
)
from eagle3_forensics.vocab.mapping.build import build_vocab_mapping

# ---------------------------------------------------------------------------------------------
# sizes and names
# ---------------------------------------------------------------------------------------------

VOCAB_SIZE = 512
DRAFT_VOCAB_SIZE = 256
HIDDEN_SIZE = 128
INTERMEDIATE_SIZE = 256
NUM_TARGET_LAYERS = 8
NUM_HEADS = 4
NUM_KV_HEADS = 4
HEAD_DIM = 32
MAX_POSITIONS = 2048
ROPE_THETA = 10000.0
BOS_ID = 0
EOS_ID = 1
SPECIAL_TOKENS = ("<s>", "</s>", "<unk>", *CHAT_TOKENS)  # ids 0..7: <|user|>=3 ... </think>=7
END_ID = SPECIAL_TOKENS.index(END)
THINK_ID, THINK_END_ID = SPECIAL_TOKENS.index(THINK), SPECIAL_TOKENS.index(THINK_END)
#: the dtype every committed weight is stored in
STORE_DTYPE = torch.bfloat16

TARGET_SUBDIR = "target"
DRAFTERS_SUBDIR = "drafters"
PROMPTS_FILE = "prompts.jsonl"
CHAT_PROMPTS_FILE = "chat_prompts.jsonl"
LONG_PROMPTS_FILE = "chat_prompts_long.jsonl"
TRAIN_SUBDIR = "train"
P_THINKING = 0.75  # share of the target's chat rows in thinking mode
#: speculators' default ``[2, N//2, N-3]`` (input-of-layer = HF index) for the 8-layer target
SPECULATORS_AUX_LAYER_IDS = [2, NUM_TARGET_LAYERS // 2, NUM_TARGET_LAYERS - 3]
#: the layers the drafter was trained on, written in the output-of-layer convention by mistake
SHIFTED_AUX_LAYER_IDS = [i - 1 for i in SPECULATORS_AUX_LAYER_IDS]

VARIANTS: tuple[str, ...] = (
    "healthy",
    "speculators_layout",
    "layers_flat",
    "d2t_absolute",
    "d2t_double_offset",
    "d2t_missing",
    "aux_shifted",
    *NEW_VARIANTS,
)

#: finding codes each variant is meant to trigger (empty: nothing should fire)
EXPECTED_FINDINGS: dict[str, tuple[str, ...]] = {
    "healthy": (),
    # No SGLang release up to 0.5.23 reads a speculators config (CONFIG_UNREADABLE_BY_ENGINE when
    # SGLang is named); the engines that read it load it as trained.
    "speculators_layout": (),
    # The seed case: SGLang <= 0.5.11 (the demo run judges it by sglang==0.5.11) and the EAGLE
    # reference drop layers.0.* silently; SGLang 0.5.12+ maps midlayer -> layers.0 and loads it.
    "layers_flat": ("KEYS_DROPPED_BY_ENGINE", "PARAMS_UNFILLED"),
    "d2t_absolute": ("D2T_ABSOLUTE",),
    "d2t_double_offset": ("D2T_DOUBLE_OFFSET",),
    "d2t_missing": ("D2T_MISSING",),
    "aux_shifted": ("AUX_LAYER_IDS_CONVENTION_SHIFT",),
    # issue 22: they load fine (nothing static fires); see EXPECTED_CAUSES. With the target given
    # (diagnose --target, as the demo run does), the missing </think> is seen statically.
    **dict.fromkeys(NEW_VARIANTS, ()),
    "vocab_no_think_end": ("VOCAB_SPECIAL_TOKENS_MISSING",),
}

#: the findings that name each low-acceptance variant's cause (data audit, served-setting checks)
EXPECTED_CAUSES: dict[str, tuple[str, ...]] = {
    "foreign_data": ("DATA_NOT_FROM_TARGET",),
    "no_thinking": ("DATA_TEMPLATE_MISMATCH",),
    "short_trained": ("DATA_TRAINED_LENGTH", "CONTEXT_BEYOND_TRAINING"),
    "vocab_no_think_end": ("VOCAB_SPECIAL_TOKENS_MISSING",),
}


@dataclass(frozen=True)
class Budget:
    """How much training the world gets. :data:`FULL` builds data/demo; :data:`QUICK` is for tests."""

    target_steps: int = 200
    target_batch: int = 16
    seq_len: int = 192  # target rows; also the drafters' conversations (the serving length)
    drafter_seqs: int = 96  # conversations per drafter
    drafter_steps: int = 100  # deliberately brief: acceptance ~3 at K=3, still sensitive to the aux layers
    drafter_batch: int = 16
    drafter_lr: float = 1e-3
    ttt_steps: int = 3
    prompts: int = 16
    short_len: int = 48  # short_trained: the conversations cut to a quarter of the serving length
    chat_prompts: int = 16  # single-turn chat prompts (thinking mode)
    long_prompts: int = 8  # chat prompts after `long_history` earlier turns
    long_history: int = 2
    train_samples: int = 8  # samples kept under train/<variant>/ (hidden states make them large)


FULL = Budget()
QUICK = Budget(
    target_steps=3,
    target_batch=4,
    seq_len=64,
    drafter_seqs=4,
    drafter_steps=3,
    drafter_batch=4,
    prompts=4,
    short_len=24,
    chat_prompts=2,
    long_prompts=1,
    long_history=1,
    train_samples=2,
)

Tensors = dict[str, torch.Tensor]

# ---------------------------------------------------------------------------------------------
# deterministic helpers
# ---------------------------------------------------------------------------------------------


def _write_json(path: pathlib.Path, obj: dict[str, Any]) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")


def _save_tensors(path: pathlib.Path, tensors: Tensors) -> None:
    ordered = {k: tensors[k].contiguous() for k in sorted(tensors)}
    save_file(ordered, str(path), metadata={"format": "pt"})


def _rng(seed: int, stream: int) -> random.Random:
    """An independent seeded stream per purpose (so one change does not shift the others)."""
    return random.Random(seed * 1_000_003 + stream)  # noqa: S311 - demo data


# ---------------------------------------------------------------------------------------------
# tokenizer + target
# ---------------------------------------------------------------------------------------------


def _build_tokenizer(world: World, seed: int) -> Any:
    """Byte-level BPE with exactly ``VOCAB_SIZE`` tokens; ids 0,1,2 = <s>, </s>, <unk>; ``<s>`` prepended."""
    from tokenizers import (  # optional: tokenizers (the models extra)
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    rng = _rng(seed, 10)
    plans = [plan_text(world.facts, world.successor, f, VERBS) for f in range(N_FACTS)]
    tok.train_from_iterator([world.document(rng, 20) for _ in range(1000)] + plans * 20, trainer=trainer)
    n = tok.get_vocab_size(with_added_tokens=True)
    if n < VOCAB_SIZE:
        tok.add_tokens([f"<x{i}>" for i in range(VOCAB_SIZE - n)])
    n = tok.get_vocab_size(with_added_tokens=True)
    if n != VOCAB_SIZE:
        raise RuntimeError(f"demo tokenizer has {n} tokens, expected {VOCAB_SIZE}")
    for i, name in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(name) != i:
            raise RuntimeError(f"demo tokenizer: {name} is not id {i}")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", BOS_ID)])
    return tok


def _target_config() -> Any:
    from transformers import LlamaConfig  # optional: transformers (the models extra)

    kwargs: dict[str, Any] = dict(
        vocab_size=VOCAB_SIZE,
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=NUM_TARGET_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_KV_HEADS,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=False,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA},
        attn_implementation="sdpa",
    )
    return LlamaConfig(**kwargs)


def _encode(tok: Any, text: str) -> list[int]:
    return list(tok.encode(text).ids)


def _fast_tokenizer(tok: Any) -> Any:
    """The ``transformers`` tokenizer with the chat template: what is saved and what renders chats."""
    from transformers import PreTrainedTokenizerFast  # optional: transformers (the models extra)

    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=SPECIAL_TOKENS[0],
        eos_token=SPECIAL_TOKENS[1],
        unk_token=SPECIAL_TOKENS[2],
        additional_special_tokens=list(CHAT_TOKENS),
        chat_template=CHAT_TEMPLATE,
    )


def true_responses(
    world: World, turns: list[Turn], mode: str, successor: tuple[int, ...] | None = None
) -> list[str]:
    """The world's answers to ``turns`` in ``mode`` (``successor``: another sampler's map)."""
    succ = world.successor if successor is None else successor
    out = []
    for t in turns:
        plan = plan_text(world.facts, succ, t.last_fact, VERBS) if mode == "thinking" else None
        out.append(assistant_content(plan, answer_text(world.facts, succ, t.last_fact)))
    return out


def chat_row(world: World, fast: Any, rng: random.Random, mode: str, length: int) -> list[int]:
    """A multi-turn conversation of the world in ``mode``, rendered by the template, cut to ``length``."""
    turns: list[Turn] = []
    while True:
        turns.extend(user_turn(world.facts, world.successor, rng, P_FOLLOW) for _ in range(length // 48 + 1))
        ids, _ = rendered_with_mask(fast, turns, true_responses(world, turns, mode), mode)
        if len(ids) >= length:
            return ids[:length]


def _token_batches(
    world: World, tok: Any, seed: int, budget: Budget, stream: int = 20
) -> Callable[[int], torch.Tensor]:
    """Half plain documents (``<s>`` + text), half chats (:data:`P_THINKING` of them thinking)."""
    rng = _rng(seed, stream)
    sentences = budget.seq_len // 4
    fast = _fast_tokenizer(tok)

    def batch(_step: int) -> torch.Tensor:
        rows = []
        for i in range(budget.target_batch):
            if i % 2 == 0:
                rows.append(_encode(tok, world.document(rng, sentences))[: budget.seq_len])
            else:
                # thinking is the default: after `<|assistant|><think>` the greedy target reasons
                # unless the prompt (or the conversation so far) closed the think block
                mode = "thinking" if rng.random() < P_THINKING else "non_thinking"
                rows.append(chat_row(world, fast, rng, mode, budget.seq_len))
        return torch.tensor(rows, dtype=torch.long)

    return batch


def _train_target(
    world: World, tok: Any, seed: int, budget: Budget, log: Callable[[str], None]
) -> tuple[Any, float]:
    from transformers import LlamaForCausalLM  # optional: transformers (the models extra)

    torch.manual_seed(seed)
    model = LlamaForCausalLM(_target_config())
    if any(p.dtype != torch.float32 for p in model.parameters()):
        raise RuntimeError("demo target must train in float32 (torch default dtype was changed?)")
    result = train_causal_lm(
        model, _token_batches(world, tok, seed, budget), budget.target_steps, lr=3e-3, log=log
    )
    with torch.no_grad():  # round to the stored precision: everything downstream sees the shipped weights
        for p in model.parameters():
            p.copy_(p.to(STORE_DTYPE).float())
    return model, result.final_loss


@torch.inference_mode()
def heldout_loss(model: Any, world: World, tok: Any, seed: int, budget: Budget) -> float:
    """Next-token loss of the stored target on two fresh batches (another stream than training)."""
    batches = _token_batches(world, tok, seed, budget, stream=21)
    losses = []
    for step in range(2):
        x = batches(step)
        logits = model(input_ids=x).logits
        losses.append(
            float(F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1)))
        )
    return sum(losses) / len(losses)


def _write_target(model: Any, tok: Any, target_dir: pathlib.Path) -> None:
    target_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(ImportError, AttributeError):  # no progress bars in make data
        from transformers.utils import logging as hf_logging  # optional: transformers (the models extra)

        hf_logging.disable_progress_bar()
    model.to(STORE_DTYPE).save_pretrained(str(target_dir))
    model.float()
    if not (target_dir / "model.safetensors").is_file():
        raise RuntimeError(f"save_pretrained did not write {target_dir / 'model.safetensors'}")
    _fast_tokenizer(tok).save_pretrained(str(target_dir))
    _template_into_config(target_dir)
    gen = json.loads((target_dir / "generation_config.json").read_text(encoding="utf-8"))
    gen["eos_token_id"] = [EOS_ID, END_ID]  # <|end|> closes each chat turn
    _write_json(target_dir / "generation_config.json", gen)


def _template_into_config(target_dir: pathlib.Path) -> None:
    """Keep the chat template in ``tokenizer_config.json`` (newer ``transformers`` writes a separate
    ``chat_template.jinja``; every reader, older ones included, finds it in the config)."""
    cfg_path = target_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    cfg["chat_template"] = CHAT_TEMPLATE
    _write_json(cfg_path, dict(sorted(cfg.items())))
    (target_dir / "chat_template.jinja").unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# drafter
# ---------------------------------------------------------------------------------------------


def _flat_llama_fields() -> dict[str, Any]:
    return {
        "model_type": "llama",
        "hidden_size": HIDDEN_SIZE,
        "intermediate_size": INTERMEDIATE_SIZE,
        "num_hidden_layers": 1,
        "num_attention_heads": NUM_HEADS,
        "num_key_value_heads": NUM_KV_HEADS,
        "head_dim": HEAD_DIM,
        "vocab_size": VOCAB_SIZE,
        "tie_word_embeddings": False,
        "rms_norm_eps": 1e-6,
        "rope_theta": ROPE_THETA,
        "max_position_embeddings": MAX_POSITIONS,
        "hidden_act": "silu",
        "torch_dtype": "bfloat16",
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
    }


def _specforge_config() -> dict[str, Any]:
    """Flat SpecForge/EAGLE config that records the trained layers where vLLM reads them (top-level
    ``eagle_aux_hidden_state_layer_ids``, HF index). Engines that read elsewhere (SGLang's
    ``eagle_config``, EAGLE's hard-coded set) fall back to their default, the same layers here: a
    healthy drafter is silent. Without the field every engine would warn that the trained layers are
    not recorded (AUX_LAYER_IDS_NOT_RECORDED), which the unit tests build on their own."""
    fields = _flat_llama_fields()
    cfg: dict[str, Any] = {"architectures": ["LlamaForCausalLMEagle3"]}
    for k, v in fields.items():
        cfg[k] = v
        if k == "vocab_size":
            cfg["draft_vocab_size"] = DRAFT_VOCAB_SIZE
    cfg["eagle_aux_hidden_state_layer_ids"] = list(SPECULATORS_AUX_LAYER_IDS)
    return cfg


def _speculators_config(aux_ids: list[int]) -> dict[str, Any]:
    return {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "speculators_version": "0.7.0",
        "speculators_config": {
            "algorithm": "eagle3",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
            "default_proposal_method": "greedy",
            "verifier": {"name_or_path": "data/demo/target", "architectures": ["LlamaForCausalLM"]},
        },
        "transformer_layer_config": _flat_llama_fields(),
        "draft_vocab_size": DRAFT_VOCAB_SIZE,
        "norm_before_residual": False,
        "norm_before_fc": False,
        "fc_norm": False,
        "norm_output": False,
        "target_hidden_size": None,
        "eagle_aux_hidden_state_layer_ids": list(aux_ids),
        "embed_requires_grad": False,
    }


def _drafter_spec() -> Any:
    return DrafterSpec(
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_heads=NUM_HEADS,
        num_kv_heads=NUM_KV_HEADS,
        head_dim=HEAD_DIM,
        vocab_size=VOCAB_SIZE,
        draft_vocab_size=DRAFT_VOCAB_SIZE,
        rope_theta=ROPE_THETA,
    )


@dataclass
class _Trained:
    tensors: Tensors  # SpecForge/EAGLE names, offsets d2t, t2d, stored dtype
    embed: torch.Tensor  # the target's embedding, stored dtype
    heldout_accuracy: list[float]
    draft_vocab_padded: int
    distinct_tokens: int


def draft_mapping(data: ChatSet) -> Any:
    """The draft vocabulary of a training set: its most frequent loss-masked tokens (speculators'
    tie-break); the demo text has fewer distinct tokens than slots, so the smallest unused ids pad
    it and ``d2t`` starts with zeros."""
    with warnings.catch_warnings():  # fewer distinct tokens than draft slots is the point
        warnings.simplefilter("ignore")
        return build_vocab_mapping(data.ids, DRAFT_VOCAB_SIZE, VOCAB_SIZE, data.mask, tie_break="id")


def _fit_drafter(
    model: Any,
    data: ChatSet,
    mapping: Any,
    seed: int,
    budget: Budget,
    log: Callable[[str], None],
    held: ChatSet | None = None,
) -> _Trained:
    """EAGLE-3 training-time test on ``data`` (loss on the assistant responses) with ``mapping``."""
    ids = SPECULATORS_AUX_LAYER_IDS
    aux, labels = aux_features(model, data.ids, ids)
    log(f"drafter data: {data.ids.shape[0]} {data.mode} conversations of {data.ids.shape[1]} tokens")
    drafter = Eagle3Drafter(_drafter_spec(), ids)
    fresh_init(drafter, seed)
    sel = torch.from_numpy(mapping.selected).to(torch.long)
    with torch.no_grad():
        drafter.embed_tokens.weight.copy_(model.get_input_embeddings().weight)
        drafter.lm_head.weight.copy_(model.get_output_embeddings().weight[sel])  # speculators-style init
        drafter.d2t.copy_(mapping.d2t)
    train_drafter(
        drafter,
        data.ids,
        aux,
        labels,
        budget.drafter_steps,
        batch=budget.drafter_batch,
        ttt_steps=budget.ttt_steps,
        lr=budget.drafter_lr,
        seed=seed,
        log=log,
        loss_mask=data.mask,
    )
    with torch.no_grad():
        for p in drafter.parameters():
            p.copy_(p.to(STORE_DTYPE).float())
    acc: list[float] = []
    if held is not None:
        held_aux, held_labels = aux_features(model, held.ids, ids)
        acc = heldout_accuracy(drafter, held.ids, held_aux, held_labels, budget.ttt_steps)
    tensors = export_tensors(
        drafter, layout="midlayer", include_embed=False, t2d=mapping.t2d, dtype=STORE_DTYPE
    )
    embed = drafter.embed_tokens.weight.detach().to(STORE_DTYPE).clone()
    return _Trained(tensors, embed, acc, mapping.padded, int((mapping.counts > 0).sum()))


def _to_speculators_layout(healthy: Tensors, embed: torch.Tensor) -> Tensors:
    """``midlayer.`` -> ``layers.0.`` plus the target's embedding, as speculators saves it."""
    out: Tensors = {}
    for k, t in healthy.items():
        out["layers.0." + k[len("midlayer.") :] if k.startswith("midlayer.") else k] = t.clone()
    out["embed_tokens.weight"] = embed.clone()
    return out


def _to_layers_names(healthy: Tensors) -> Tensors:
    """``midlayer.`` -> ``layers.0.`` and nothing else (the flat config stays SpecForge's)."""
    return {
        ("layers.0." + k[len("midlayer.") :] if k.startswith("midlayer.") else k): t.clone()
        for k, t in healthy.items()
    }


def _with_d2t(healthy: Tensors, d2t: torch.Tensor) -> Tensors:
    out = {k: t.clone() for k, t in healthy.items()}
    out["d2t"] = d2t.to(torch.int64)
    return out


def _d2t_absolute(healthy: Tensors) -> Tensors:
    """S2: ``d2t[i]`` holds the target id itself instead of the offset ``target_id - i``."""
    sel = torch.nonzero(healthy["t2d"]).flatten()
    return _with_d2t(healthy, sel)


def _d2t_double_offset(healthy: Tensors) -> Tensors:
    """Offset conversion applied twice: ``d2t[i] = sel[i] - 2 i``."""
    ar = torch.arange(DRAFT_VOCAB_SIZE, dtype=torch.int64)
    return _with_d2t(healthy, healthy["d2t"] - ar)


def _d2t_missing(healthy: Tensors) -> Tensors:
    """S4: ``d2t`` dropped (``t2d`` kept); engines fall back to zero offsets."""
    return {k: t.clone() for k, t in healthy.items() if k != "d2t"}


def _write_drafter(drafter_dir: pathlib.Path, config: dict[str, Any], tensors: Tensors) -> None:
    drafter_dir.mkdir(parents=True, exist_ok=True)
    _write_json(drafter_dir / "config.json", config)
    _save_tensors(drafter_dir / "model.safetensors", tensors)


def _write_prompts(path: pathlib.Path, world: World, seed: int, n: int) -> None:
    rng = _rng(seed, 40)
    lines = [json.dumps({"id": i, "prompt": world.document(rng, 2)}) for i in range(n)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# public entry point
# ---------------------------------------------------------------------------------------------


def _chat_drafters(
    model: Any,
    tok: Any,
    world: World,
    seed: int,
    budget: Budget,
    root: pathlib.Path,
    say: Callable[[str], None],
) -> tuple[_Trained, dict[str, Tensors], dict[str, Any]]:
    """The healthy drafter and the chat variants, their train/ dumps and chat prompts."""
    fast = _fast_tokenizer(tok)
    sets = build_sets(
        model,
        fast,
        world,
        lambda s: _rng(seed, s),
        true_responses,
        budget,
        stop=END_ID,
        p_follow=P_FOLLOW,
        log=say,
    )
    mapping = draft_mapping(sets.healthy)  # one draft vocabulary for all: the drop is the data's alone
    trained = _fit_drafter(model, sets.healthy, mapping, seed, budget, say, held=sets.held)
    extra: dict[str, Tensors] = {}
    for name, data in (
        ("foreign_data", sets.foreign_data),
        ("no_thinking", sets.no_thinking),
        ("short_trained", sets.short_trained),
    ):
        extra[name] = _fit_drafter(model, data, mapping, seed, budget, say).tensors
    head = model.get_output_embeddings().weight.detach()
    extra["vocab_no_think_end"] = without_token(trained.tensors, THINK_END_ID, head)
    train = root / TRAIN_SUBDIR
    n = budget.train_samples
    for name, data in (
        ("healthy", sets.healthy),
        ("foreign_data", sets.foreign_data),
        ("no_thinking", sets.no_thinking),
        ("short_trained", sets.short_trained),
    ):
        write_train_dump(train / name, model, data, SPECULATORS_AUX_LAYER_IDS, n, store=STORE_DTYPE)
    v = extra["vocab_no_think_end"]
    write_train_dump(
        train / "vocab_no_think_end",
        model,
        sets.healthy,
        SPECULATORS_AUX_LAYER_IDS,
        max(1, n // 3),
        store=STORE_DTYPE,
        vocab_mapping=(v["d2t"], v["t2d"]),
    )
    chat_lengths = write_chat_prompts(
        root / CHAT_PROMPTS_FILE,
        model,
        fast,
        world,
        _rng(seed, 41),
        n=budget.chat_prompts,
        history=0,
        stop=END_ID,
        p_follow=P_FOLLOW,
    )
    long_lengths = write_chat_prompts(
        root / LONG_PROMPTS_FILE,
        model,
        fast,
        world,
        _rng(seed, 42),
        n=budget.long_prompts,
        history=budget.long_history,
        stop=END_ID,
        p_follow=P_FOLLOW,
    )
    facts = {
        "chat_prompt_tokens": (min(chat_lengths), max(chat_lengths)),
        "long_prompt_tokens": (min(long_lengths), max(long_lengths)),
        "reasoning_share": reasoning_share(sets.healthy, THINK_ID, THINK_END_ID),
    }
    return trained, extra, facts


def make_demo(
    out_dir: str | os.PathLike[str],
    *,
    seed: int = 0,
    budget: Budget = FULL,
    log: Callable[[str], None] | None = None,
) -> dict[str, pathlib.Path]:
    """Train and write the demo target, drafters, prompts, train/ data and README under ``out_dir``.

    Returns ``{variant_name: drafter_dir}`` for every name in :data:`VARIANTS` (the target lives at
    ``out_dir / TARGET_SUBDIR``). Existing files are overwritten; nothing else is removed.
    """
    say = log or (lambda _msg: None)
    root = pathlib.Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    world = make_world(seed)
    with deterministic(seed):
        tok = _build_tokenizer(world, seed)
        model, _ = _train_target(world, tok, seed, budget, say)
        _write_target(model, tok, root / TARGET_SUBDIR)
        say(f"target written ({time.perf_counter() - t0:.0f} s)")
        paths = write_drafters(model, tok, world, root, seed=seed, budget=budget, log=say)
    say(f"demo written to {root} ({time.perf_counter() - t0:.0f} s)")
    return paths


def write_drafters(
    model: Any,
    tok: Any,
    world: World,
    root: pathlib.Path,
    *,
    seed: int,
    budget: Budget,
    log: Callable[[str], None],
) -> dict[str, pathlib.Path]:
    """Everything after the target: drafters, variants, train/ data, prompts and README (the caller
    holds :func:`deterministic`). ``model`` holds the stored (bfloat16-rounded) target weights."""
    say = log
    trained, extra, facts = _chat_drafters(model, tok, world, seed, budget, root, say)
    healthy = trained.tensors
    specforge_cfg = _specforge_config()
    speculators = _to_speculators_layout(healthy, trained.embed)
    built: dict[str, tuple[dict[str, Any], Tensors]] = {
        "healthy": (specforge_cfg, healthy),
        "speculators_layout": (_speculators_config(SPECULATORS_AUX_LAYER_IDS), speculators),
        "layers_flat": (specforge_cfg, _to_layers_names(healthy)),
        "d2t_absolute": (specforge_cfg, _d2t_absolute(healthy)),
        "d2t_double_offset": (specforge_cfg, _d2t_double_offset(healthy)),
        "d2t_missing": (specforge_cfg, _d2t_missing(healthy)),
        "aux_shifted": (
            _speculators_config(SHIFTED_AUX_LAYER_IDS),
            {k: t.clone() for k, t in speculators.items()},
        ),
        **{name: (specforge_cfg, extra[name]) for name in NEW_VARIANTS},
    }
    if tuple(built) != VARIANTS:  # keep the public list and the builders in step
        raise RuntimeError(f"demo variants {tuple(built)} != VARIANTS {VARIANTS}")

    paths: dict[str, pathlib.Path] = {}
    for name, (cfg, tensors) in built.items():
        d = root / DRAFTERS_SUBDIR / name
        _write_drafter(d, cfg, tensors)
        paths[name] = d
    _write_prompts(root / PROMPTS_FILE, world, seed, budget.prompts)

    values = {
        "seed": seed,
        "fact0": world.facts[0],
        "target_steps": budget.target_steps,
        "target_loss": heldout_loss(model, world, tok, seed, budget),
        "drafter_steps": budget.drafter_steps,
        "acc": trained.heldout_accuracy,
        "distinct": trained.distinct_tokens,
        "padded": trained.draft_vocab_padded,
        "zeros": int((healthy["d2t"] == 0).to(torch.int8).cumprod(0).sum()),
        "prompts": budget.prompts,
        "budget": budget,
        "world": sys.modules[__name__],
        **facts,
    }
    write_readme(root / "README.md", values)
    return paths
