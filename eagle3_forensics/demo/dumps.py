"""Offline training data for the demo target, in the trainers' own layouts (``make data``).

``write_demo_dumps(demo_dir)`` runs the demo target on its own greedy continuations of
``prompts.jsonl`` (the same continuations the in-process probe scores) and writes what a trainer's
data preparation would have written::

    demo_dir/dumps/specforge/rows_0-2000/data_<i>.ckpt    SpecForge: input_ids, loss_mask,
        hidden_state [1,T,H] (last layer, after the final norm), aux_hidden_state [1,T,3H];
        rows right-padded with id 0 in batches of 4, as SpecForge's padded dataloader does
    demo_dir/dumps/speculators/                           speculators v0.5+: Arrow dataset
        (input_ids, loss_mask, seq_len) + hidden_states/hs_<i>.safetensors (token_ids,
        hidden_states [T,4,H]: the 3 aux layers + the last layer *before* the final norm), token_freq.pt
    demo_dir/prep/          a speculators data-prep output: dumps, token_freq.pt, d2t.npy, t2d.npy;
                            the map is the top-256 of these samples (speculators' tie-break), so,
                            with fewer distinct tokens than draft slots, target ids 0..19 are
                            selected and d2t starts with zeros: healthy
    demo_dir/prep_broken/   the same, but d2t.npy was built from other text (another demo world)
                            while t2d.npy is from these samples: the seed's situation

The aux layers are the healthy drafter's (HF index ``[2, 4, 5]``); the loss mask covers the
continuation (the "assistant" tokens). Everything is deterministic: a rerun writes the same bytes.
"""

from __future__ import annotations

import json
import pathlib
import random
import shutil
import sys
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

from eagle3_forensics.demo.world import (
    BOS_ID,
    DRAFT_VOCAB_SIZE,
    NUM_TARGET_LAYERS,
    PROMPTS_FILE,
    SPECULATORS_AUX_LAYER_IDS,
    TARGET_SUBDIR,
    VOCAB_SIZE,
    make_world,
)
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.io.dumps.arrow_dataset import write_stream
from eagle3_forensics.reference.target import TargetModel
from eagle3_forensics.reference.train import deterministic
from eagle3_forensics.vocab.mapping.build import build_vocab_mapping

DUMPS_SUBDIR = "dumps"
PREP_SUBDIR = "prep"
PREP_BROKEN_SUBDIR = "prep_broken"
MAX_NEW_TOKENS = 24  # the token budget of notebook 04 and configs/demo.yaml
SPECFORGE_BATCH = 4  # rows padded together (SpecForge pads to the batch maximum)
PREP_SAMPLES = 8
STORE = torch.bfloat16  # the target's dtype: what SpecForge and vLLM store
OTHER_WORLD_SEED = 7  # the "other data" the broken map is built from


def _prompts(demo_dir: pathlib.Path) -> list[str]:
    lines = (demo_dir / PROMPTS_FILE).read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["prompt"] for line in lines if line.strip()]


def _save_pt(obj: Any, path: pathlib.Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(obj, str(path))


def _save_st(tensors: dict[str, torch.Tensor], path: pathlib.Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: tensors[k].contiguous() for k in sorted(tensors)}, str(path))


class _Rows:
    """The target's states over one token row: aux (HF [2,4,5]), last pre- and post-norm."""

    def __init__(self, target: Any, ids: list[int]) -> None:
        want = [*SPECULATORS_AUX_LAYER_IDS, NUM_TARGET_LAYERS]
        step = target.forward(ids, None, want)
        hid = step.hidden
        self.aux = torch.cat([hid[i] for i in SPECULATORS_AUX_LAYER_IDS], dim=-1).float().cpu()
        self.pre = hid[NUM_TARGET_LAYERS].float().cpu()
        with torch.inference_mode():
            self.post = target.model.model.norm(hid[NUM_TARGET_LAYERS]).float().cpu()


def _sequences(target: Any, prompts: list[str]) -> list[tuple[list[int], list[int]]]:
    out = []
    for text in prompts:
        prompt = target.encode(text)
        out.append((prompt, target.greedy(prompt, MAX_NEW_TOKENS)))
    return out


def _write_specforge(target: Any, seqs: list[tuple[list[int], list[int]]], root: pathlib.Path) -> None:
    for b0 in range(0, len(seqs), SPECFORGE_BATCH):
        batch = seqs[b0 : b0 + SPECFORGE_BATCH]
        width = max(len(p) + len(c) for p, c in batch)
        for j, (prompt, cont) in enumerate(batch):
            ids = [*prompt, *cont]
            mask = [0] * len(prompt) + [1] * len(cont)
            pad = width - len(ids)
            ids, mask = ids + [0] * pad, mask + [0] * pad  # the padded row goes to the engine as is
            rows = _Rows(target, ids)
            record = {
                "input_ids": torch.tensor(ids, dtype=torch.long),
                "loss_mask": torch.tensor(mask, dtype=torch.long),
                "hidden_state": rows.post.to(STORE)[None].clone(),
                "aux_hidden_state": rows.aux.to(STORE)[None].clone(),
            }
            _save_pt(record, root / "rows_0-2000" / f"data_{b0 + j}.ckpt")


def _arrow_dataset(root: pathlib.Path, ids: list[list[int]], masks: list[list[int]]) -> None:
    features = {
        "input_ids": {"feature": {"dtype": "int64", "_type": "Value"}, "_type": "List"},
        "loss_mask": {"feature": {"dtype": "int64", "_type": "Value"}, "_type": "List"},
        "seq_len": {"dtype": "int64", "_type": "Value"},
    }
    root.mkdir(parents=True, exist_ok=True)
    write_stream(
        root / "data-00000-of-00001.arrow",
        {
            "input_ids": ("list<int64>", [np.asarray(x, dtype=np.int64) for x in ids]),
            "loss_mask": ("list<int64>", [np.asarray(m, dtype=np.int64) for m in masks]),
            "seq_len": ("int64", [len(x) for x in ids]),
        },
        {"huggingface": json.dumps({"info": {"features": features}}, sort_keys=True)},
    )
    (root / "dataset_info.json").write_text(
        json.dumps({"citation": "", "description": "", "features": features}, indent=2, sort_keys=True) + "\n"
    )
    state: dict[str, Any] = {
        "_data_files": [{"filename": "data-00000-of-00001.arrow"}],
        "_fingerprint": "eagle3-forensics-demo",
        "_format_columns": None,
        "_format_kwargs": {},
        "_format_type": "torch",
        "_output_all_columns": False,
        "_split": None,
    }
    (root / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")


def _token_freq(ids: list[list[int]], masks: list[list[int]]) -> dict[int, int]:
    """speculators' ``token_freq.pt``: a plain ``{id: count}`` over ``input_ids[loss_mask]``."""
    counts: dict[int, int] = {}
    for x, m in zip(ids, masks, strict=True):
        for t, keep in zip(x, m, strict=True):
            if keep:
                counts[t] = counts.get(t, 0) + 1
    return dict(sorted(counts.items()))


def _write_speculators(
    target: Any, rows: list[tuple[list[int], list[int]]], root: pathlib.Path
) -> tuple[list[list[int]], list[list[int]]]:
    """``rows`` are ``(ids, mask)``; writes the Arrow dataset, hs_<i> files and token_freq.pt."""
    ids = [r[0] for r in rows]
    masks = [r[1] for r in rows]
    _arrow_dataset(root, ids, masks)
    for i, x in enumerate(ids):
        st = _Rows(target, x)
        hs = torch.stack([*st.aux.split(st.pre.shape[-1], dim=-1), st.pre], dim=1)  # [T, 4, H]
        _save_st(
            {"token_ids": torch.tensor(x, dtype=torch.long), "hidden_states": hs.to(STORE)},
            root / "hidden_states" / f"hs_{i}.safetensors",
        )
    _save_pt(_token_freq(ids, masks), root / "token_freq.pt")
    return ids, masks


def _prep_rows(seqs: list[tuple[list[int], list[int]]]) -> list[tuple[list[int], list[int]]]:
    """The first samples as single-turn rows, plus one two-turn conversation written the way
    speculators' HEAD does: one row per assistant turn, the later row repeating the earlier one."""
    unique: list[tuple[list[int], list[int]]] = []
    for p, c in seqs:  # the demo prompts repeat some documents; a prep output should not
        if (p, c) not in unique:
            unique.append((p, c))
    rows = [([*p, *c], [0] * len(p) + [1] * len(c)) for p, c in unique[: PREP_SAMPLES - 2]]
    p, c = unique[PREP_SAMPLES - 2]
    half = len(c) // 2
    rows.append(([*p, *c[:half]], [0] * len(p) + [1] * half))
    rows.append(([*p, *c], [0] * (len(p) + half) + [1] * (len(c) - half)))
    return rows


def _map_from(ids: list[list[int]], masks: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    with warnings.catch_warnings():  # fewer distinct ids than draft slots: padded, as the trainers do
        warnings.simplefilter("ignore")
        m = build_vocab_mapping(
            [np.asarray(x, dtype=np.int64) for x in ids],
            DRAFT_VOCAB_SIZE,
            VOCAB_SIZE,
            [np.asarray(k, dtype=np.int64) for k in masks],
            tie_break="id",
        )
    return m.d2t.numpy().astype(np.int64), m.t2d.numpy().astype(bool)


def _other_text_ids(target: Any, n: int = 24) -> tuple[list[list[int]], list[list[int]]]:
    """Token rows of another world's documents: the "other data" a stale map was built from."""
    world = make_world(OTHER_WORLD_SEED)
    rng = random.Random(OTHER_WORLD_SEED)  # noqa: S311 - demo data
    ids = [target.encode(world.document(rng, 3)) for _ in range(n)]
    return ids, [[1] * len(x) for x in ids]


def _write_prep(target: Any, seqs: list[tuple[list[int], list[int]]], demo: pathlib.Path) -> None:
    prep, broken = demo / PREP_SUBDIR, demo / PREP_BROKEN_SUBDIR
    ids, masks = _write_speculators(target, _prep_rows(seqs), prep)
    d2t, t2d = _map_from(ids, masks)
    np.save(prep / "d2t.npy", d2t)
    np.save(prep / "t2d.npy", t2d)
    if broken.exists():
        shutil.rmtree(broken)
    shutil.copytree(prep, broken)
    other_d2t, _ = _map_from(*_other_text_ids(target))
    np.save(broken / "d2t.npy", other_d2t)  # t2d.npy stays the one built from these samples


_README = """\
# Demo hidden-state dumps (generated)

Written by `eagle3_forensics.demo.dumps` (`make data`; byte-identical on rerun). The demo target
ran on its own greedy continuations of `../prompts.jsonl` ({new} new tokens per prompt); the loss
mask covers the continuation; the aux states are the healthy drafter's layers (HF index
{aux}), stored in bfloat16 like the trainers store them.

* `specforge/rows_0-2000/data_<i>.ckpt`: SpecForge `prepare_hidden_states.py` records
  (`input_ids`, `loss_mask`, `hidden_state [1,T,H]` after the final norm, `aux_hidden_state
  [1,T,3H]`), rows right-padded with id 0 in batches of {batch} as SpecForge's dataloader pads them.
* `speculators/`: speculators v0.5+ (an Arrow dataset with `input_ids`, `loss_mask`, `seq_len`;
  `hidden_states/hs_<i>.safetensors` with `token_ids` and `hidden_states [T,4,H]`, slot -1 the last
  layer *before* the final norm; `token_freq.pt`).

`../prep/` is a speculators data-prep output with a map built from its samples (healthy; `d2t`
starts with zeros); `../prep_broken/` is the same with a `d2t.npy` built from other text.

    eagle3-forensics probe-offline ../drafters/healthy --data specforge --target ../target
    eagle3-forensics audit-data ../prep_broken
"""


def write_demo_dumps(
    demo_dir: str | pathlib.Path,
    out_dir: str | pathlib.Path | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, pathlib.Path]:
    """Write the demo's dumps and prep directories under ``out_dir`` (default ``demo_dir``), made by
    the target and prompts of ``demo_dir`` (see the module docstring)."""
    say = log or (lambda _m: None)
    demo = pathlib.Path(demo_dir)
    if not (demo / TARGET_SUBDIR / "config.json").is_file():
        raise UnusableInputError(f"no demo target under {demo / TARGET_SUBDIR} (run make-demo first)")
    dest = pathlib.Path(out_dir) if out_dir is not None else demo
    out = {
        "specforge": dest / DUMPS_SUBDIR / "specforge",
        "speculators": dest / DUMPS_SUBDIR / "speculators",
        "prep": dest / PREP_SUBDIR,
        "prep_broken": dest / PREP_BROKEN_SUBDIR,
    }
    for path in out.values():
        if path.exists():
            shutil.rmtree(path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with deterministic(0):
            target = TargetModel(demo / TARGET_SUBDIR, device="cpu", dtype=torch.float32)
            seqs = _sequences(target, _prompts(demo))
            if any(p[0] != BOS_ID for p, _ in seqs):
                raise RuntimeError("demo prompts do not start with <s>")
            _write_specforge(target, seqs, out["specforge"])
            say(f"SpecForge dumps: {len(seqs)} samples -> {out['specforge']}")
            _write_speculators(
                target, [([*p, *c], [0] * len(p) + [1] * len(c)) for p, c in seqs], out["speculators"]
            )
            say(f"speculators dumps: {len(seqs)} samples -> {out['speculators']}")
            _write_prep(target, seqs, dest)
            (out["specforge"].parent / "README.md").write_text(
                _README.format(new=MAX_NEW_TOKENS, aux=SPECULATORS_AUX_LAYER_IDS, batch=SPECFORGE_BATCH),
                encoding="utf-8",
            )
            say(f"prep dirs: {out['prep']}, {out['prep_broken']}")
    finally:
        torch.set_num_threads(threads)
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    paths = write_demo_dumps(args[0] if args else "data/demo", log=lambda m: print(m, file=sys.stderr))
    for name, path in paths.items():
        print(f"{name:12} {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
