"""Vocabulary maps on disk: :func:`load_mapping` / :func:`save_mapping` read and write ``d2t``/``t2d``
(a drafter checkpoint, a ``vocab build`` output, a SpecForge ``.pt`` cache, speculators'
``d2t.npy``/``t2d.npy``); :func:`lm_head_row_check` loads both heads for
:func:`eagle3_forensics.vocab.mapping.check_lm_head_rows`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from eagle3_forensics.errors import BadArgumentsError, UnusableInputError, error_line
from eagle3_forensics.io.checkpoint import open_checkpoint, safe_torch_load
from eagle3_forensics.io.drafter import read_drafter
from eagle3_forensics.io.target import open_target
from eagle3_forensics.vocab.mapping.classify import VocabClassification, classify_mapping
from eagle3_forensics.vocab.mapping.compare import selected_ids
from eagle3_forensics.vocab.mapping.lm_head import LmHeadRowCheck, check_lm_head_rows

# -- vocabulary maps on disk -------------------------------------------------------------------------


@dataclass
class LoadedMapping:
    """``d2t``/``t2d`` read from disk, with the sizes that go with them."""

    label: str
    path: Path
    source: str  # "checkpoint" | "mapping file" | "speculators d2t.npy/t2d.npy"
    d2t: torch.Tensor | None
    t2d: torch.Tensor | None
    target_vocab_size: int | None
    draft_vocab_size: int | None
    metadata: dict[str, str] = field(default_factory=dict)

    def classify(self) -> VocabClassification:
        return classify_mapping(self.d2t, self.t2d, self.target_vocab_size, self.draft_vocab_size)

    def sizes(self) -> tuple[int, int]:
        """``(V, v)``, the target and draft vocabulary sizes, for the functions that need both;
        :class:`UnusableInputError` when the map and its config do not say them."""
        if self.target_vocab_size is None or self.draft_vocab_size is None:
            raise UnusableInputError(
                f"{self.label}: the vocabulary sizes are unknown (target {self.target_vocab_size}, draft "
                f"{self.draft_vocab_size}); pass a checkpoint with its config.json or a target",
                path=str(self.path),
            )
        return self.target_vocab_size, self.draft_vocab_size

    def selected(self) -> tuple[np.ndarray, str]:
        """The target ids this map selects and where they were read from (see ``vocab.selected_ids``)."""
        return selected_ids(self.d2t, self.t2d, self.target_vocab_size, self.draft_vocab_size)

    @property
    def t2d_mask(self) -> np.ndarray:
        """The selection as a bool ``[V]`` mask (from ``t2d`` or decoded ``d2t``)."""
        sel, _ = self.selected()
        big_v = self.target_vocab_size if self.target_vocab_size is not None else int(sel.max()) + 1
        mask = np.zeros(big_v, dtype=bool)
        mask[sel[sel < big_v]] = True
        return mask

    def summary(self) -> dict[str, Any]:
        def desc(t: torch.Tensor | None) -> str | None:
            return None if t is None else f"{str(t.dtype).replace('torch.', '')} {list(t.shape)}"

        return {
            "label": self.label,
            "path": str(self.path),
            "source": self.source,
            "target_vocab_size": self.target_vocab_size,
            "draft_vocab_size": self.draft_vocab_size,
            "d2t": desc(self.d2t),
            "t2d": desc(self.t2d),
            "t2d_selected": None if self.t2d is None else int(self.t2d.bool().sum()),
            **self.metadata,
        }


def _tensor_dict_from_file(p: Path) -> dict[str, Any]:
    suffix = p.suffix.lower()
    if suffix == ".safetensors":
        try:
            with safe_open(str(p), framework="pt") as fh:
                meta = fh.metadata() or {}
                out: dict[str, Any] = {k: fh.get_tensor(k) for k in fh.keys() if k in ("d2t", "t2d")}  # noqa: SIM118
                out["__metadata__"] = meta
                out["__keys__"] = list(fh.keys())
                return out
        except Exception as exc:
            raise UnusableInputError(
                f"unreadable safetensors file {p}: {error_line(exc)}", path=str(p)
            ) from None
    if suffix in (".pt", ".pth", ".bin"):
        obj = safe_torch_load(p)
        if not isinstance(obj, dict):
            raise UnusableInputError(
                f"{p} holds a {type(obj).__name__}, expected a dict with 'd2t'/'t2d'", path=str(p)
            )
        return {**{k: v for k, v in obj.items() if k in ("d2t", "t2d")}, "__keys__": list(obj)}
    if suffix == ".npz":
        try:
            with np.load(str(p), allow_pickle=False) as archive:
                return {
                    **{k: torch.from_numpy(archive[k]) for k in archive.files if k in ("d2t", "t2d")},
                    "__keys__": list(archive.files),
                }
        except Exception as exc:
            raise UnusableInputError(f"unreadable NumPy file {p}: {error_line(exc)}", path=str(p)) from None
    raise UnusableInputError(
        f"unsupported map file {p}: expected .safetensors, .pt or .npz (or a drafter directory)", path=str(p)
    )


def _npy_tensor(p: Path) -> torch.Tensor:
    try:
        return torch.from_numpy(np.array(np.load(str(p), allow_pickle=False)))
    except Exception as exc:
        raise UnusableInputError(f"unreadable NumPy file {p}: {error_line(exc)}", path=str(p)) from None


def load_mapping(
    path: str | Path, target: str | Path | None = None, label: str | None = None
) -> LoadedMapping:
    """Read ``d2t``/``t2d`` from a drafter checkpoint (directory or weights file beside its
    ``config.json``), a map file (``.safetensors``/``.pt``/``.npz`` with ``d2t``/``t2d``, e.g. a
    ``vocab build`` output or a SpecForge cache) or a directory with speculators'
    ``d2t.npy``/``t2d.npy``. Sizes come from the same logic ``diagnose`` uses."""
    p = Path(path)
    name = label or (p.name if p.name not in ("", ".") else str(p))
    big_v_target = None
    if target is not None:
        big_v_target = open_target(target).vocab_size
    if not p.exists():
        raise UnusableInputError(f"no such checkpoint or map file: {p}", path=str(p))
    if p.is_dir() and not (p / "config.json").is_file():
        if (p / "d2t.npy").is_file() or (p / "t2d.npy").is_file():
            d2t = _npy_tensor(p / "d2t.npy") if (p / "d2t.npy").is_file() else None
            t2d = _npy_tensor(p / "t2d.npy") if (p / "t2d.npy").is_file() else None
            big_v = int(t2d.shape[0]) if t2d is not None and t2d.dim() == 1 else big_v_target
            return LoadedMapping(
                name,
                p,
                "speculators d2t.npy/t2d.npy",
                d2t,
                t2d,
                big_v,
                None if d2t is None else int(d2t.numel()),
            )
        raise UnusableInputError(
            f"{p} has neither config.json (a drafter) nor d2t.npy/t2d.npy (a map)", path=str(p)
        )
    if p.is_file() and p.suffix.lower() in (".npy",):
        if p.name in ("d2t.npy", "t2d.npy"):
            return load_mapping(p.parent, target, label)
        raise UnusableInputError(
            f"a lone .npy map file is ambiguous: {p} (pass the directory holding d2t.npy and t2d.npy)",
            path=str(p),
        )
    if p.is_file() and (not (p.parent / "config.json").is_file() or _looks_like_map_file(p)):
        obj = _tensor_dict_from_file(p)
        d2t, t2d = obj.get("d2t"), obj.get("t2d")
        if d2t is None and t2d is None:
            keys = ", ".join(map(str, obj.get("__keys__", [])[:10])) or "none"
            raise UnusableInputError(f"{p} holds neither 'd2t' nor 't2d' (keys: {keys})", path=str(p))
        meta = read_safetensors_metadata(obj.get("__metadata__") or {})
        big_v = int(t2d.shape[0]) if isinstance(t2d, torch.Tensor) and t2d.dim() == 1 else big_v_target
        v = (
            int(d2t.numel())
            if isinstance(d2t, torch.Tensor)
            else (int(t2d.bool().sum()) if isinstance(t2d, torch.Tensor) else None)
        )
        return LoadedMapping(name, p, "mapping file", d2t, t2d, big_v, v, meta)

    drafter = read_drafter(p, target)
    d2t_name, t2d_name = drafter.find("d2t"), drafter.find("t2d")
    d2t = drafter.ckpt.read_tensor(d2t_name) if d2t_name else None
    t2d = drafter.ckpt.read_tensor(t2d_name) if t2d_name else None
    return LoadedMapping(name, p, "checkpoint", d2t, t2d, drafter.target_vocab_size, drafter.draft_vocab_size)


def _looks_like_map_file(p: Path) -> bool:
    """A weights file that holds ``d2t``/``t2d`` and no ``lm_head``: a map, even beside a config.json."""
    if p.suffix.lower() != ".safetensors":
        return False

    try:
        with safe_open(str(p), framework="pt") as fh:
            keys = set(fh.keys())
    except Exception:
        return False
    return bool(keys & {"d2t", "t2d"}) and not any(k.endswith("lm_head.weight") for k in keys)


METADATA_KEY = "eagle3_forensics"


def safetensors_metadata(meta: dict[str, Any]) -> dict[str, str]:
    """Metadata as one JSON string under :data:`METADATA_KEY`: safetensors writes a metadata map in
    arbitrary key order, so a single key is what keeps the file byte-identical across runs."""
    return {METADATA_KEY: json.dumps({str(k): v for k, v in meta.items()}, sort_keys=True, default=str)}


def read_safetensors_metadata(raw: dict[str, str]) -> dict[str, str]:
    out = {str(k): str(v) for k, v in raw.items() if k not in ("format", METADATA_KEY)}
    try:
        packed = json.loads(raw.get(METADATA_KEY, "{}"))
    except json.JSONDecodeError:
        packed = {}
    if isinstance(packed, dict):
        out.update({str(k): str(v) for k, v in packed.items()})
    return out


def save_mapping(mapping: Any, out: str | Path, metadata: dict[str, Any] | None = None) -> Path:
    """Write ``d2t`` (int64 ``[v]``) and ``t2d`` (bool ``[V]``) to ``.safetensors`` (string metadata
    attached) or ``.pt`` (a ``{"d2t", "t2d"}`` dict, as SpecForge caches it). Atomic."""
    p = Path(out)
    d2t = torch.as_tensor(mapping.d2t).to(torch.int64).contiguous()
    t2d = torch.as_tensor(mapping.t2d).to(torch.bool).contiguous()
    suffix = p.suffix.lower()
    if suffix not in (".safetensors", ".pt"):
        raise BadArgumentsError(f"output {p} must end in .safetensors or .pt")
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp")
    if suffix == ".safetensors":
        save_file({"d2t": d2t, "t2d": t2d}, str(tmp), metadata=safetensors_metadata(metadata or {}))
    else:
        torch.save({"d2t": d2t, "t2d": t2d}, str(tmp))
    tmp.replace(p)
    return p


# -- lm_head rows -------------------------------------------------------------------------------------


def lm_head_row_check(
    checkpoint: str | Path, target: str | Path | None, *, required: bool = True
) -> LmHeadRowCheck | None:
    """Load the drafter's ``lm_head`` and its map and the target's ``lm_head`` (or tied embedding),
    then :func:`~eagle3_forensics.vocab.mapping.check_lm_head_rows`. A missing head (or ``target=None``)
    raises ``UnusableInputError``, or returns ``None`` when ``required`` is false."""

    def missing(reason: str) -> LmHeadRowCheck | None:
        if required:
            raise UnusableInputError(reason)
        return None

    if target is None:
        return missing("the lm_head row check needs the target model directory")
    m = load_mapping(checkpoint, target)
    ckpt = open_checkpoint(checkpoint)
    head_name = next((n for n in ("lm_head.weight", "model.lm_head.weight") if ckpt.has(n)), None)
    if head_name is None:
        return missing(f"{checkpoint} has no lm_head.weight to compare")
    tgt = open_target(target)
    if tgt.weights is None:
        return missing(f"target {target} has no weights: the lm_head row check needs them")
    target_head = tgt.lm_head()
    if target_head is None:
        target_head = tgt.embedding()  # tied embeddings
    if target_head is None:
        return missing(f"target {target} has neither lm_head.weight nor an embedding")
    try:
        return check_lm_head_rows(ckpt.read_tensor(head_name), target_head, m.d2t, m.t2d)
    except (ValueError, UnusableInputError) as exc:
        if required:
            raise UnusableInputError(f"lm_head row check: {exc}") from None
        return None
