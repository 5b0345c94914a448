"""Run SGLang's released target classes' aux capture in-process on the CPU (no server, no kernels).

    .venv-sglang/bin/python tests/loaders/harness/sglang_targets.py --out RESULTS.json

Per target class (a tiny config of that architecture, ``N`` layers): SGLang's ``ModelRegistry``
resolves and builds the class; the class's own ``set_eagle3_layers_to_capture`` receives each id set
(or ``None``: its default), and the decoder's own ``forward`` runs with its layers replaced by
markers. The decoder decides which layers get a capture callback (``i in self.layers_to_capture``)
and in which order; a marker hands its callback the state holding its own index, standing in for
the layer's ``attn_boundary.prepare``, which captures the layer's input. A captured state therefore
holds its HF index. The final norm is an identity (no CPU kernel needed).
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sglang_loader

N = 6
HIDDEN = 128
_BASE: dict[str, Any] = {
    "hidden_size": HIDDEN,
    "intermediate_size": 2 * HIDDEN,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 32,
    "num_hidden_layers": N,
    "vocab_size": 512,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}
# Qwen3-MoE's decoder needs a real ForwardBatch (two-batch overlap flags): not built here.
CLASSES: dict[str, dict[str, Any]] = {
    "LlamaForCausalLM": {"model_type": "llama"},
    "Qwen2ForCausalLM": {"model_type": "qwen2"},
    "Qwen3ForCausalLM": {"model_type": "qwen3"},
}
ID_SETS: tuple[list[int] | None, ...] = ([0, N - 2, N - 1, N], [N - 2, 1, 0], [1, 1, 3], None)


class Marker(torch.nn.Module):
    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index

    def forward(
        self, positions: Any, hidden: torch.Tensor, forward_batch: Any, capture_output: Any = None
    ) -> Any:
        if capture_output is not None:
            capture_output(torch.full_like(hidden, float(self.index)))
        return hidden + 1.0


def run_class(arch: str) -> dict[str, Any]:
    from sglang.srt.models.registry import ModelRegistry
    from sglang.srt.utils.hf_transformers_utils import get_config

    out: dict[str, Any] = {"architecture": arch, "n_layers": N}
    d = Path(tempfile.gettempdir()) / "e3f-loaders-sglang-targets" / f"{arch}_N{N}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps({**_BASE, "architectures": [arch], **CLASSES[arch]}))
    try:
        cfg = get_config(str(d), trust_remote_code=False)
        cls, _ = ModelRegistry.resolve_model_cls([arch])
        with torch.device("cpu"):
            model = cls(config=copy.deepcopy(cfg), quant_config=None)
    except Exception as e:
        return {**out, "status": "build_error", "error": f"{type(e).__name__}: {e}"[:600]}
    decoder = model.model
    out["model_class"] = f"{cls.__module__}.{cls.__name__}"
    out["decoder_class"] = f"{type(decoder).__module__}.{type(decoder).__name__}"
    for i in range(decoder.start_layer, decoder.end_layer):
        decoder.layers[i] = Marker(i)
    decoder.norm = torch.nn.Identity()
    runs = []
    for ids in ID_SETS:
        row: dict[str, Any] = {"ids": ids}
        try:
            model.set_eagle3_layers_to_capture(ids)
            res = decoder(None, torch.arange(2), types.SimpleNamespace(), torch.zeros(2, HIDDEN))
            aux = res[1] if isinstance(res, tuple) else []
            row["captured"] = [round(float(t[0, 0])) for t in aux]
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"[:400]
        runs.append(row)
    return {**out, "status": "ran", "runs": runs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    logging.disable(logging.WARNING)
    sglang_loader.setup()
    results = [run_class(arch) for arch in CLASSES]
    doc = {"engine": "sglang", "version": sglang_loader.sglang_version(), "classes": results}
    Path(a.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
