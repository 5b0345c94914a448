"""Run vLLM's released target classes' aux capture in-process on the CPU (no server, no kernels).

    .venv-engine/bin/python tests/loaders/harness/vllm_targets.py --out RESULTS.json

Per target class (a tiny config of that architecture, ``N`` layers): vLLM's ``ModelRegistry``
resolves and builds the class under ``set_current_vllm_config``; the model's own
``set_aux_hidden_state_layers`` receives each id set, and the decoder's own ``forward`` runs with
its decoder layers replaced by markers (layer ``i`` adds 1 to the hidden state), so a captured state
holds the number of layers run before it: its id. What is compared is the release's capture code
(the ``forward`` loop, ``EagleModelMixin``), not the attention kernels, which vLLM's CPU build cannot
run outside a scheduler.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vllm_loader

N = 6
HIDDEN = 128
HEADS = 4  # head_dim 32: vLLM's CPU attention refuses smaller heads
_BASE: dict[str, Any] = {
    "hidden_size": HIDDEN,
    "intermediate_size": 2 * HIDDEN,
    "num_attention_heads": HEADS,
    "num_key_value_heads": HEADS,
    "head_dim": HIDDEN // HEADS,
    "num_hidden_layers": N,
    "vocab_size": 512,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "torch_dtype": "float32",
}
_MOE = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64, "decoder_sparse_step": 1}
CLASSES: dict[str, dict[str, Any]] = {
    # an MoE class first: the one gloo world is set up from the first config, and only an MoE
    # config makes vLLM create the expert-parallel group
    "Qwen3MoeForCausalLM": {"model_type": "qwen3_moe", **_MOE, "mlp_only_layers": []},
    "LlamaForCausalLM": {"model_type": "llama"},
    "Qwen2ForCausalLM": {"model_type": "qwen2"},
    "Qwen3ForCausalLM": {"model_type": "qwen3"},
    "GptOssForCausalLM": {
        "model_type": "gpt_oss",
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "experts_per_token": 2,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * (N // 2),
    },
    "DeepseekV2ForCausalLM": {
        "model_type": "deepseek_v2",
        "kv_lora_rank": 64,
        "q_lora_rank": None,
        "qk_nope_head_dim": 32,
        "qk_rope_head_dim": 32,
        "v_head_dim": 32,
        "n_routed_experts": 4,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 64,
        "first_k_dense_replace": N,
        "moe_layer_freq": 1,
        "topk_method": "greedy",
        "n_group": 1,
        "topk_group": 1,
    },
}
ID_SETS: tuple[tuple[int, ...], ...] = ((0, N - 1, N, N + 1), (2, N // 2, N - 3), (N, 2, 0), (1, 1, 3))


class Marker(torch.nn.Module):
    """A decoder layer stand-in: adds 1 to the hidden state, keeps a zero residual."""

    def forward(self, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        floats = [
            a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor) and a.is_floating_point()
        ]
        hidden = kwargs.get("hidden_states", floats[0])
        if "x" in kwargs:
            hidden = kwargs["x"]
        return hidden + 1.0, torch.zeros_like(hidden)


def _config_dir(arch: str) -> str:
    d = vllm_loader.SCRATCH / f"target_{arch}_N{N}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps({**_BASE, "architectures": [arch], **CLASSES[arch]}))
    return str(d)


def _decoder(model: torch.nn.Module) -> torch.nn.Module:
    """The module holding ``layers`` (as vLLM's SupportsEagle3 finds it)."""
    parent = model.get_language_model() if hasattr(model, "get_language_model") else model
    return getattr(parent, "model", parent)


def _world(vc: Any) -> None:
    """The one-process gloo world vLLM's layers need (tensor and pipeline groups of size 1), once."""
    if "dist" in vllm_loader.STATE:
        return
    import os

    from vllm.config import set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel

    with set_current_vllm_config(vc):
        init_distributed_environment(
            world_size=1,
            rank=0,
            local_rank=0,
            distributed_init_method=f"tcp://127.0.0.1:{29500 + os.getpid() % 1000}",
            backend="gloo",
        )
        initialize_model_parallel(1, 1)
    vllm_loader.STATE["dist"] = True


def run_class(arch: str) -> dict[str, Any]:
    from vllm.config import set_current_vllm_config
    from vllm.engine.arg_utils import EngineArgs
    from vllm.forward_context import set_forward_context
    from vllm.model_executor.models import ModelRegistry

    out: dict[str, Any] = {"architecture": arch, "n_layers": N}
    try:
        vc = EngineArgs(
            model=_config_dir(arch),
            skip_tokenizer_init=True,
            dtype="float32",
            max_model_len=256,
            enforce_eager=True,
        ).create_engine_config()
        _world(vc)
        cls, _ = ModelRegistry.resolve_model_cls([arch], model_config=vc.model_config)
        vc.compilation_config.static_forward_context.clear()
        with set_current_vllm_config(vc):
            model = cls(vllm_config=vc, prefix="")
    except Exception as e:
        return {**out, "status": "build_error", "error": f"{type(e).__name__}: {e}"[:600]}
    out["model_class"] = f"{cls.__module__}.{cls.__name__}"
    decoder = _decoder(model)
    out["decoder_class"] = f"{type(decoder).__module__}.{type(decoder).__name__}"
    for i in range(int(decoder.start_layer), int(decoder.end_layer)):  # type: ignore[arg-type]
        decoder.layers[i] = Marker()
    with set_current_vllm_config(vc):
        out["default"] = [int(i) for i in model.get_eagle3_default_aux_hidden_state_layers()]
    runs = []
    positions = torch.arange(2)
    for ids in ID_SETS:
        row: dict[str, Any] = {"ids": list(ids)}
        try:
            model.set_aux_hidden_state_layers(tuple(ids))
            with set_current_vllm_config(vc), set_forward_context(None, vc):
                res = decoder(None, positions, None, torch.zeros(2, HIDDEN))
            aux = res[1] if isinstance(res, tuple) else []
            row["captured"] = [round(float(t[0, 0])) for t in aux]
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"[:400]
        runs.append(row)
    return {**out, "status": "ran", "runs": runs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*", default=None)
    a = ap.parse_args(argv)
    logging.disable(logging.WARNING)
    results = [run_class(arch) for arch in (a.only or CLASSES)]
    Path(a.out).write_text(
        json.dumps(
            {"engine": "vllm", "version": vllm_loader._vllm_aware_version("vllm"), "classes": results},
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
