"""Deterministic demo world: a trained tiny Llama target, a trained EAGLE-3 drafter, broken variants.

``make_demo(out_dir)`` writes::

    out_dir/
      README.md
      prompts.jsonl                held-out prompts for the accept-rate probe
      target/                      tiny HF Llama (8 layers, V=512) trained on a low-entropy corpus
                                   + byte-level BPE tokenizer (tokenizer.json, tokenizer_config.json)
      drafters/healthy/            EAGLE-3 drafter trained on the target's hidden states (SpecForge layout)
      drafters/speculators_layout/ the same weights in the speculators layout (layers.0.*, embed_tokens)
      drafters/layers_flat/        the seed case: SpecForge's flat config, but layers.0.* tensor names
      drafters/d2t_absolute/       d2t stored as absolute target ids
      drafters/d2t_double_offset/  offset conversion applied twice
      drafters/d2t_missing/        no d2t tensor at all
      drafters/aux_shifted/        speculators layout whose aux ids are written one layer early

The world (everything is a function of ``seed``):

1. **Corpus** — a fixed set of :data:`N_FACTS` sentences ("facts"), each with a successor fact
   (one cycle through all of them). A document starts at a random fact and follows the
   successor with probability :data:`P_FOLLOW`, else jumps to a random fact: low entropy, so
   the trained target's greedy continuation is predictable, yet it depends on context (which
   fact came before), so the drafter needs the target's features and not just the last token.
2. **Tokenizer** — a byte-level BPE of exactly :data:`VOCAB_SIZE` tokens trained on the corpus
   (``<s>`` is prepended by its post-processor, as for Llama).
3. **Target** — ``LlamaForCausalLM`` (8 layers, hidden 128, 4 heads of dim 32 — vLLM's CPU
   attention needs head_dim >= 32) trained for next-token prediction, then stored in bfloat16.
4. **Drafter** — the draft vocabulary is the :data:`DRAFT_VOCAB_SIZE` most frequent target
   tokens of the drafter's training text (:func:`eagle3_forensics.vocab.mapping.build_vocab_mapping`,
   speculators' tie-break; the corpus uses fewer distinct tokens, so the rest is padded with the
   smallest unused ids and ``d2t`` starts with a run of zeros). Its training text is the
   target's own greedy continuation of corpus prefixes; features are the target's HF
   hidden-state indices ``[2, 4, 5]``; training is EAGLE-3's training-time test
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
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from safetensors.torch import save_file

from eagle3_forensics.reference.drafter.export import export_tensors
from eagle3_forensics.reference.drafter.model import DrafterSpec, Eagle3Drafter, fresh_init
from eagle3_forensics.reference.train import (
    aux_features,
    deterministic,
    greedy_continue,
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
SPECIAL_TOKENS = ("<s>", "</s>", "<unk>")
N_FACTS = 48
P_FOLLOW = 0.9
#: the dtype every committed weight is stored in
STORE_DTYPE = torch.bfloat16

TARGET_SUBDIR = "target"
DRAFTERS_SUBDIR = "drafters"
PROMPTS_FILE = "prompts.jsonl"
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
}


@dataclass(frozen=True)
class Budget:
    """How much training the world gets. :data:`FULL` builds data/demo; :data:`QUICK` is for tests."""

    target_steps: int = 150
    target_batch: int = 16
    seq_len: int = 128
    drafter_seqs: int = 192
    drafter_prompt_len: int = 16
    drafter_steps: int = 80  # deliberately brief: acceptance ~3 at K=3, still sensitive to the aux layers
    drafter_batch: int = 16
    drafter_lr: float = 1e-3
    ttt_steps: int = 3
    prompts: int = 16


FULL = Budget()
QUICK = Budget(
    target_steps=3,
    target_batch=4,
    seq_len=48,
    drafter_seqs=8,
    drafter_prompt_len=8,
    drafter_steps=3,
    drafter_batch=4,
    prompts=4,
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


# ---------------------------------------------------------------------------------------------
# the corpus
# ---------------------------------------------------------------------------------------------

_SUBJECTS = (
    "the cat",
    "a dog",
    "my friend",
    "the teacher",
    "our model",
    "the drafter",
    "a small bird",
    "the server",
    "this engine",
    "the old man",
    "a student",
    "the robot",
    "her sister",
    "the team",
    "the pilot",
    "a farmer",
)
_VERBS = (
    "sees",
    "likes",
    "finds",
    "builds",
    "reads",
    "writes",
    "checks",
    "loads",
    "drafts",
    "accepts",
    "rejects",
    "moves",
    "counts",
    "sorts",
    "maps",
    "trains",
)
_OBJECTS = (
    "the red ball",
    "a long book",
    "every token",
    "the weights",
    "a quiet river",
    "the big tree",
    "some numbers",
    "the offsets",
    "a new table",
    "the green door",
    "two apples",
    "the last layer",
    "a warm bowl of soup",
    "the vocabulary",
    "three small boxes",
    "the blue kite",
)
_TAILS = (
    "today.",
    "again.",
    "in the morning.",
    "very slowly.",
    "with care.",
    "before lunch.",
    "at night.",
    "for the test.",
    "without errors.",
    "on the server.",
    "every day.",
    "quickly!",
    "twice.",
    "at noon.",
)


@dataclass(frozen=True)
class World:
    facts: tuple[str, ...]
    successor: tuple[int, ...]

    def document(self, rng: random.Random, sentences: int) -> str:
        f = rng.randrange(len(self.facts))
        out = []
        for _ in range(sentences):
            out.append(self.facts[f])
            f = self.successor[f] if rng.random() < P_FOLLOW else rng.randrange(len(self.facts))
        return " ".join(out)


def make_world(seed: int) -> World:
    """:data:`N_FACTS` sentences with distinct (subject, verb) and a successor cycle through all of them."""
    rng = random.Random(seed * 7919 + 1)  # noqa: S311 - demo data, not cryptography
    seen: set[tuple[int, int]] = set()
    facts: list[str] = []
    while len(facts) < N_FACTS:
        s, v = rng.randrange(len(_SUBJECTS)), rng.randrange(len(_VERBS))
        if (s, v) in seen:
            continue
        seen.add((s, v))
        facts.append(f"{_SUBJECTS[s]} {_VERBS[v]} {rng.choice(_OBJECTS)} {rng.choice(_TAILS)}")
    order = list(range(N_FACTS))
    rng.shuffle(order)
    successor = [0] * N_FACTS
    for i, f in enumerate(order):
        successor[f] = order[(i + 1) % N_FACTS]
    return World(tuple(facts), tuple(successor))


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
    tok.train_from_iterator([world.document(rng, 20) for _ in range(1000)], trainer=trainer)
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


def _token_batches(world: World, tok: Any, seed: int, budget: Budget) -> Callable[[int], torch.Tensor]:
    rng = _rng(seed, 20)
    sentences = budget.seq_len // 4

    def batch(_step: int) -> torch.Tensor:
        rows = [
            _encode(tok, world.document(rng, sentences))[: budget.seq_len] for _ in range(budget.target_batch)
        ]
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


def _write_target(model: Any, tok: Any, target_dir: pathlib.Path) -> None:
    from transformers import PreTrainedTokenizerFast  # optional: transformers (the models extra)

    target_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(ImportError, AttributeError):  # no progress bars in make data
        from transformers.utils import logging as hf_logging  # optional: transformers (the models extra)

        hf_logging.disable_progress_bar()
    model.to(STORE_DTYPE).save_pretrained(str(target_dir))
    model.float()
    if not (target_dir / "model.safetensors").is_file():
        raise RuntimeError(f"save_pretrained did not write {target_dir / 'model.safetensors'}")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=SPECIAL_TOKENS[0],
        eos_token=SPECIAL_TOKENS[1],
        unk_token=SPECIAL_TOKENS[2],
    )
    fast.save_pretrained(str(target_dir))


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
    """Flat SpecForge/EAGLE config; no aux-layer field, so every engine uses its own default."""
    fields = _flat_llama_fields()
    cfg: dict[str, Any] = {"architectures": ["LlamaForCausalLMEagle3"]}
    for k, v in fields.items():
        cfg[k] = v
        if k == "vocab_size":
            cfg["draft_vocab_size"] = DRAFT_VOCAB_SIZE
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


def _train_drafter(
    model: Any, world: World, tok: Any, seed: int, budget: Budget, log: Callable[[str], None]
) -> _Trained:
    def prompts(stream: int, n: int) -> torch.Tensor:
        rng = _rng(seed, stream)
        rows = [_encode(tok, world.document(rng, 4))[: budget.drafter_prompt_len] for _ in range(n)]
        return torch.tensor(rows, dtype=torch.long)

    new = budget.seq_len - budget.drafter_prompt_len
    seqs = torch.cat([greedy_continue(model, p, new) for p in prompts(30, budget.drafter_seqs).split(64)])
    held = greedy_continue(model, prompts(31, max(2, budget.drafter_seqs // 8)), new)
    ids = SPECULATORS_AUX_LAYER_IDS
    aux, labels = aux_features(model, seqs, ids)
    held_aux, held_labels = aux_features(model, held, ids)
    log(f"drafter data: {seqs.shape[0]} greedy sequences of {seqs.shape[1]} tokens")

    with (
        warnings.catch_warnings()
    ):  # fewer distinct tokens than draft slots is the point: d2t starts with zeros
        warnings.simplefilter("ignore")
        mapping = build_vocab_mapping(seqs, DRAFT_VOCAB_SIZE, VOCAB_SIZE, tie_break="id")
    drafter = Eagle3Drafter(_drafter_spec(), ids)
    fresh_init(drafter, seed)
    sel = torch.from_numpy(mapping.selected).to(torch.long)
    with torch.no_grad():
        drafter.embed_tokens.weight.copy_(model.get_input_embeddings().weight)
        drafter.lm_head.weight.copy_(model.get_output_embeddings().weight[sel])  # speculators-style init
        drafter.d2t.copy_(mapping.d2t)
    train_drafter(
        drafter,
        seqs,
        aux,
        labels,
        budget.drafter_steps,
        batch=budget.drafter_batch,
        ttt_steps=budget.ttt_steps,
        lr=budget.drafter_lr,
        seed=seed,
        log=log,
    )
    with torch.no_grad():
        for p in drafter.parameters():
            p.copy_(p.to(STORE_DTYPE).float())
    acc = heldout_accuracy(
        drafter, held, held_aux, held_labels, budget.ttt_steps, start=budget.drafter_prompt_len
    )
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
# README
# ---------------------------------------------------------------------------------------------

_README = f"""\
# Demo data (generated)

Generated by `eagle3_forensics.demo.world.make_demo` (seed @SEED@); regenerate with `make data`
(`python -m eagle3_forensics make-demo data/demo`, single-threaded, deterministic, a few
minutes on a CPU). Do not edit these files by hand. Regenerating on the same machine and
software is byte-identical; another CPU or library version may differ in the last bits.

## The world

A corpus of {N_FACTS} fixed sentences ("facts", e.g. *@FACT0@*), each with a successor fact;
a document follows the successor with probability {P_FOLLOW} and jumps to a random fact
otherwise. The target learns it, so its greedy continuation walks the successor cycle: low
entropy, but the next sentence depends on the previous one.

## target/

A Hugging Face `LlamaForCausalLM` (vocab {VOCAB_SIZE}, hidden {HIDDEN_SIZE}, intermediate
{INTERMEDIATE_SIZE}, {NUM_TARGET_LAYERS} layers, {NUM_HEADS} heads of dim {HEAD_DIM}, untied `lm_head`),
trained for @TARGET_STEPS@ steps (final loss @TARGET_LOSS@) and stored in bfloat16, with a
byte-level BPE tokenizer of exactly {VOCAB_SIZE} tokens (`<s>`=0, `</s>`=1, `<unk>`=2; `<s>` is
prepended) in `tokenizer.json` + `tokenizer_config.json`. `head_dim` is {HEAD_DIM} because vLLM's
CPU attention needs >= 32; the layout is the standard one vLLM serves as is.

## drafters/

One-layer EAGLE-3 drafters (hidden {HIDDEN_SIZE}, `fc` over the target's HF hidden-state indices
{SPECULATORS_AUX_LAYER_IDS}, draft vocabulary {DRAFT_VOCAB_SIZE}, bfloat16). The drafter was trained on the
target's own greedy continuations ({FULL.ttt_steps}-step training-time test, @DRAFTER_STEPS@ steps;
held-out teacher-forced top-1 accuracy per step @ACC@). The draft vocabulary is the
{DRAFT_VOCAB_SIZE} most frequent target tokens of that text; only @DISTINCT@ distinct tokens occur, so
@PADDED@ ids are padding (the smallest unused ids) and a correct `d2t` starts with zeros.

| variant | what it is | expected findings |
|---|---|---|
| `healthy` | SpecForge/EAGLE layout (`midlayer.*`, flat config, no `embed_tokens`, no aux-layer field); `d2t` offsets, `t2d` | none |
| `speculators_layout` | the same weights saved the speculators way: `layers.0.*`, `embed_tokens.weight` (the target's), `Eagle3Speculator` config with `eagle_aux_hidden_state_layer_ids = {SPECULATORS_AUX_LAYER_IDS}` | fine on vLLM and speculators; no SGLang release up to 0.5.23 reads a speculators config (`CONFIG_UNREADABLE_BY_ENGINE` with `--engine sglang`) |
| `layers_flat` | the seed case: the healthy weights and SpecForge's flat config, but the decoder saved as `layers.0.*` | on `sglang==0.5.11` and the EAGLE reference: `KEYS_DROPPED_BY_ENGINE`, `PARAMS_UNFILLED` (they look up `midlayer.*`); SGLang 0.5.12+, vLLM and TensorRT-LLM load it |
| `d2t_absolute` | healthy, but `d2t = sel` (absolute target ids instead of offsets) | `D2T_ABSOLUTE` |
| `d2t_double_offset` | healthy, but `d2t = sel - 2*arange(v)` (offset conversion applied twice) | `D2T_DOUBLE_OFFSET` |
| `d2t_missing` | healthy without the `d2t` tensor (`t2d` kept) | `D2T_MISSING` |
| `aux_shifted` | `speculators_layout` with `eagle_aux_hidden_state_layer_ids = {SHIFTED_AUX_LAYER_IDS}`: the trained layers written in the output-of-layer convention, which vLLM/speculators read as input-of-layer (one layer early) | `AUX_LAYER_IDS_CONVENTION_SHIFT` (warning: ambiguous convention); the probe's aux sweep says +1 |

## prompts.jsonl

@PROMPTS@ held-out prompts (two corpus sentences each) for `eagle3-forensics probe`.
"""


# ---------------------------------------------------------------------------------------------
# public entry point
# ---------------------------------------------------------------------------------------------


def make_demo(
    out_dir: str | os.PathLike[str],
    *,
    seed: int = 0,
    budget: Budget = FULL,
    log: Callable[[str], None] | None = None,
) -> dict[str, pathlib.Path]:
    """Train and write the demo target, drafters, prompts and README under ``out_dir``.

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
        model, target_loss = _train_target(world, tok, seed, budget, say)
        _write_target(model, tok, root / TARGET_SUBDIR)
        say(f"target written ({time.perf_counter() - t0:.0f} s)")
        trained = _train_drafter(model, world, tok, seed, budget, say)
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
    }
    if tuple(built) != VARIANTS:  # keep the public list and the builders in step
        raise RuntimeError(f"demo variants {tuple(built)} != VARIANTS {VARIANTS}")

    paths: dict[str, pathlib.Path] = {}
    for name, (cfg, tensors) in built.items():
        d = root / DRAFTERS_SUBDIR / name
        _write_drafter(d, cfg, tensors)
        paths[name] = d
    _write_prompts(root / PROMPTS_FILE, world, seed, budget.prompts)

    readme = (
        _README.replace("@SEED@", str(seed))
        .replace("@FACT0@", world.facts[0])
        .replace("@TARGET_STEPS@", str(budget.target_steps))
        .replace("@DRAFTER_STEPS@", str(budget.drafter_steps))
        .replace("@ACC@", " / ".join(f"{a:.3f}" for a in trained.heldout_accuracy))
        .replace("@DISTINCT@", str(trained.distinct_tokens))
        .replace("@PADDED@", str(trained.draft_vocab_padded))
        .replace("@PROMPTS@", str(budget.prompts))
    )
    (root / "README.md").write_text(readme.replace("@TARGET_LOSS@", f"{target_loss:.3f}"), encoding="utf-8")
    say(f"demo written to {root} ({time.perf_counter() - t0:.0f} s)")
    return paths
