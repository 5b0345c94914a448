"""Small dumps in every trainer's layout, written the way each writer writes them (for the offline tests)."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

# The fixtures are built with torch (the probe extra): where it is absent (the core-only tier of
# tests/packaging), every test module importing this one skips.
pytest.importorskip("torch")
import torch
from safetensors.torch import save_file

from eagle3_forensics.io.dumps.arrow_dataset import write_stream

H = 16  # hidden size of the synthetic dumps
K = 3  # aux layers


def rows(n: int = 4, length: int = 12, seed: int = 0, vocab: int = 64) -> list[tuple[list[int], list[int]]]:
    """``n`` (ids, mask) rows: a 4-token prompt, then a masked continuation."""
    g = np.random.default_rng(seed)
    out = []
    for i in range(n):
        ln = length + i % 3
        ids = [0, *g.integers(3, vocab, size=ln - 1).tolist()]
        out.append((ids, [0] * 4 + [1] * (ln - 4)))
    return out


def states(length: int, seed: int, hidden: int = H, k: int = K) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(length, hidden, generator=g), torch.randn(length, k * hidden, generator=g)


def specforge(
    root: Path,
    data: Sequence[tuple[list[int], list[int]]],
    *,
    pad_to: int | None = None,
    group: int = 2000,
    gz: bool = False,
    dtype: torch.dtype = torch.bfloat16,
    hidden: int = H,
) -> Path:
    """``rows_0-<group>/data_<i>.ckpt`` dicts; rows right-padded with id 0 / mask 0 to ``pad_to``."""
    d = root / f"rows_0-{group}"
    d.mkdir(parents=True, exist_ok=True)
    for i, (ids, mask) in enumerate(data):
        n = len(ids)
        width = max(n, pad_to or 0)
        ids_p = ids + [0] * (width - n)
        mask_p = mask + [0] * (width - n)
        last, aux = states(width, i, hidden)
        rec = {
            "input_ids": torch.tensor(ids_p, dtype=torch.long),
            "loss_mask": torch.tensor(mask_p, dtype=torch.long),
            "hidden_state": last.to(dtype)[None],
            "aux_hidden_state": aux.to(dtype)[None],
        }
        save(rec, d / f"data_{i}.ckpt", gz=gz)
    return root


def save(obj: object, path: Path, gz: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        buf = io.BytesIO()
        torch.save(obj, buf)
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(buf.getvalue(), mtime=0))
    else:
        torch.save(obj, str(path))
    return path


def speculators(
    root: Path,
    data: Sequence[tuple[list[int], list[int]]],
    *,
    layer_major: bool = False,
    arrow: bool = True,
    bool_mask: bool = False,
    hidden: int = H,
    k: int = K,
) -> Path:
    """v0.5+: Arrow dataset (``input_ids``, ``loss_mask``, ``seq_len``) + ``hidden_states/hs_<i>.safetensors``."""
    root.mkdir(parents=True, exist_ok=True)
    if arrow:
        write_stream(
            root / "data-00000-of-00001.arrow",
            {
                "input_ids": ("list<int64>", [np.asarray(i, dtype=np.int64) for i, _ in data]),
                "loss_mask": (
                    "list<bool>" if bool_mask else "list<int64>",
                    [np.asarray(m, dtype=bool if bool_mask else np.int64) for _, m in data],
                ),
                "seq_len": ("int64", [len(i) for i, _ in data]),
            },
        )
        (root / "state.json").write_text(
            json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]})
        )
    for i, (ids, _) in enumerate(data):
        last, aux = states(len(ids), i, hidden, k)
        hs = torch.stack([*aux.split(hidden, dim=-1), last], dim=1)  # [T, k+1, H]
        if layer_major:
            hs = hs.transpose(0, 1).contiguous()
        (root / "hidden_states").mkdir(exist_ok=True)
        save_file(
            {"token_ids": torch.tensor(ids, dtype=torch.long), "hidden_states": hs.to(torch.bfloat16)},
            str(root / "hidden_states" / f"hs_{i}.safetensors"),
        )
    return root


def speculators_v04(root: Path, data: Sequence[tuple[list[int], list[int]]]) -> Path:
    """v0.3/v0.4: flat ``data_<i>.pt`` with ``hidden_states`` a list of k+1 ``[T, H]``."""
    for i, (ids, mask) in enumerate(data):
        last, aux = states(len(ids), i)
        save(
            {
                "input_ids": torch.tensor(ids, dtype=torch.long),
                "hidden_states": [*aux.split(H, dim=-1), last],
                "loss_mask": torch.tensor(mask, dtype=torch.long),
            },
            root / f"data_{i}.pt",
        )
    (root / "data_config.json").write_text(json.dumps({"layer_ids": [2, 4, 5, 7], "hidden_size": H}))
    return root


def research(root: Path, data: Sequence[tuple[list[int], list[int]]]) -> Path:
    """speculators research: ``<k>/data_<n>.ckpt`` with ``hidden_state`` = aux, ``target`` = last."""
    for i, (ids, mask) in enumerate(data):
        last, aux = states(len(ids), i)
        save(
            {
                "input_ids": torch.tensor(ids),
                "hidden_state": aux,
                "loss_mask": torch.tensor(mask),
                "target": last,
            },
            root / "0" / f"data_{i}.ckpt",
        )
    return root


def ge_data(root: Path, data: Sequence[tuple[list[int], list[int]]]) -> Path:
    """EAGLE-1/2 ``ge_data``: ``{input_ids, hidden_state [T,H] fp16, loss_mask}``."""
    for i, (ids, mask) in enumerate(data):
        last, _ = states(len(ids), i)
        save(
            {"input_ids": torch.tensor(ids), "hidden_state": last.half(), "loss_mask": torch.tensor(mask)},
            root / "sharegpt_0_3_mufp16" / "0" / f"data_{i}.ckpt",
        )
    return root


def specforge_broken(
    root: Path, data: Sequence[tuple[list[int], list[int]]], which: str, vocab: int = 64
) -> Path:
    """The short-lived SpecForge writers: ``2025-11-09`` (aux under hidden_state) or ``2025-11-10`` (logits)."""
    d = root / "rows_0-2000"
    for i, (ids, mask) in enumerate(data):
        n = len(ids)
        _last, aux = states(n, i)
        if which == "2025-11-09":
            rec = {
                "input_ids": torch.tensor([*ids, 0, 0]),
                "loss_mask": torch.tensor([*mask, 0, 0]),
                "hidden_state": aux[None],
            }
        else:
            rec = {
                "input_ids": torch.tensor(ids),
                "loss_mask": torch.tensor(mask),
                "hidden_state": torch.randn(1, n, vocab + 3),
                "aux_hidden_state": aux[None],
            }
        save(rec, d / f"data_{i}.ckpt")
    return root


class _Evil:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (print, ("this must never run",))


def evil_pickle(path: Path) -> Path:
    """A pickle that needs a global beyond tensors: torch.load(weights_only=True) refuses it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"input_ids": torch.tensor([1, 2]), "x": _Evil()}, str(path))
    return path


def write_map(
    root: Path,
    selected: Sequence[int] | np.ndarray,
    vocab: int,
    *,
    d2t_from: Sequence[int] | np.ndarray | None = None,
) -> Path:
    """speculators ``d2t.npy``/``t2d.npy``: offsets of ``d2t_from`` (default the same selection)."""
    sel = np.sort(np.asarray(selected, dtype=np.int64))
    t2d = np.zeros(vocab, dtype=bool)
    t2d[sel] = True
    src = np.sort(np.asarray(d2t_from if d2t_from is not None else selected, dtype=np.int64))
    np.save(root / "d2t.npy", src - np.arange(src.shape[0], dtype=np.int64))
    np.save(root / "t2d.npy", t2d)
    return root
