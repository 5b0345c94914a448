"""A small deterministic corpus for the demo target, and its token ids.

``write_demo_corpus(demo_dir)`` writes, next to ``demo_dir/target/``::

    corpus.jsonl             texts and prompt/completion pairs from the demo world (seeded)
    corpus_ids.safetensors   input_ids [records, max_len] int64 (right-padded) + loss_mask bool,
                             tokenised with demo_dir/target/tokenizer.json

The texts come from the same world as the demo target's training documents and
``prompts.jsonl`` (:func:`eagle3_forensics.demo.world.make_world`). The loss mask is what the
trainers count: every token of a text (the tokenizer's ``<s>`` included), the completion tokens
of a prompt/completion pair (their ``</s>`` included), nothing on padding. A few records carry
phrases from outside the world, some non-ASCII, so that rare pieces and raw bytes show up in the
coverage breakdown. The safetensors
metadata records the sha256 of the tokenizer and of the corpus, so a stale file is detectable
after the demo target is regenerated: rerun this after ``make-demo``::

    python -m eagle3_forensics.demo.corpus data/demo
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

from eagle3_forensics.errors import UnusableInputError

CORPUS_FILE = "corpus.jsonl"
IDS_FILE = "corpus_ids.safetensors"
TARGET_SUBDIR = "target"
N_RECORDS = 320
EOS = "</s>"

# phrases outside the demo world: they split into rarer pieces (and raw bytes for the non-ASCII ones)
_RARE = (
    "in the café",
    "with a naïve plan",
    "über fast",
    "near the fjord",
    "→ next step",
    "for 3 €",
    "like a jazzy quiz",
    "during the zephyr",
)


def demo_records(seed: int = 0, n: int = N_RECORDS) -> list[dict[str, Any]]:
    """Records drawn from the demo world (:func:`eagle3_forensics.demo.world.make_world`): the facts the
    target was trained on, chained the way its documents chain them.

    About 55% are texts (a document of 2-6 facts; 1 in 12 carries a phrase from outside the world);
    the rest are prompt/completion pairs: two chained facts as the prompt (like ``prompts.jsonl``)
    and the next one to three facts of the chain as the completion, ending in ``</s>``, which is what
    the target's greedy continuation (the drafter's training text) looks like.
    """
    from eagle3_forensics.demo.world import make_world  # heavy: torch

    world = make_world(seed)
    rng = random.Random(seed * 1_000_003 + 50)  # noqa: S311 - demo data, not cryptography
    out: list[dict[str, Any]] = []
    for _ in range(n):
        if rng.random() < 0.55:
            text = world.document(rng, rng.randint(2, 6))
            if rng.random() < 1 / 12:
                words = text.split(" ")
                at = rng.randrange(1, len(words))
                text = " ".join([*words[:at], rng.choice(_RARE), *words[at:]])
            out.append({"text": text})
            continue
        f = rng.randrange(len(world.facts))
        chain = [f]
        for _ in range(1 + rng.randint(1, 3)):
            chain.append(world.successor[chain[-1]])
        prompt = " ".join(world.facts[i] for i in chain[:2])
        completion = " " + " ".join(world.facts[i] for i in chain[2:]) + EOS
        out.append({"prompt": prompt, "completion": completion})
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_demo_corpus(demo_dir: str | Path, *, seed: int = 0, n_records: int = N_RECORDS) -> dict[str, Path]:
    """Write ``corpus.jsonl`` and ``corpus_ids.safetensors`` under ``demo_dir`` (byte-identical per seed)."""
    import torch  # heavy: torch
    from safetensors.torch import save_file  # heavy: torch

    from eagle3_forensics.vocab.inputs.corpus import tokenize_corpus  # heavy: torch
    from eagle3_forensics.vocab.inputs.maps import safetensors_metadata  # heavy: torch

    root = Path(demo_dir)
    tok_dir = root / TARGET_SUBDIR
    if not (tok_dir / "tokenizer.json").is_file():
        raise UnusableInputError(
            f"no demo target tokenizer at {tok_dir / 'tokenizer.json'} (run make-demo first)"
        )
    root.mkdir(parents=True, exist_ok=True)
    corpus = root / CORPUS_FILE
    lines = [json.dumps(r, ensure_ascii=False, sort_keys=True) for r in demo_records(seed, n_records)]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tc = tokenize_corpus(corpus, tok_dir)
    ids, mask = tc.padded(pad_id=0)
    out = root / IDS_FILE
    meta = {
        "tokenizer_sha256": _sha256(tok_dir / "tokenizer.json"),
        "corpus_sha256": _sha256(corpus),
        "records": len(tc.rows),
        "counted_tokens": tc.counted,
        "seed": seed,
    }
    save_file(
        {"input_ids": torch.from_numpy(ids), "loss_mask": torch.from_numpy(mask)},
        str(out),
        metadata=safetensors_metadata(meta),
    )
    out.chmod(0o644)
    return {"corpus": corpus, "ids": out}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    paths = write_demo_corpus(args[0] if args else "data/demo")
    for name, path in paths.items():
        print(f"{name:8} {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
