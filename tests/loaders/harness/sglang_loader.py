"""Run SGLang's released EAGLE-3 drafter loader in-process on the CPU (no server, no GPU).

    .venv-sglang/bin/python tests/loaders/harness/sglang_loader.py --batch CORPUS --out RESULTS.jsonl
    .venv-sglang/bin/python tests/loaders/harness/sglang_loader.py DRAFTER_DIR       # one drafter, JSON
    .venv-sglang/bin/python tests/loaders/harness/sglang_loader.py --capture [--layers 36]

Works with the released wheels 0.5.11 to 0.5.23 (the set-up adapts to the release). Per drafter:
  1. the config is read with SGLang's own ``get_config`` and the class resolved with its
     ``ModelRegistry`` from ``architectures`` (a config SGLang cannot parse fails here, as in SGLang);
  2. the model is built on the CPU and every parameter filled with a sentinel;
  3. ``load_weights`` gets one iterator over all checkpoint tensors, as in the real loader;
  4. ``hot_token_id`` (what d2t became) is read back, and the EAGLE-3 worker's embedding/head
     sharing step (``set_embed``, or ``set_embed_and_head`` with ``load_lm_head_from_target``, then
     the read of ``model.hot_token_id``) is run on stand-in target tensors. A class the registry
     resolved that the worker cannot use (a plain ``LlamaForCausalLM`` or ``TransformersForCausalLM``
     for a config that names no EAGLE-3 class: no ``set_embed`` or no ``hot_token_id``) is a
     ``class_error``: the server stops at start-up whatever its ``load_weights`` did (the load fates
     stay in the record).
``--capture`` calls every registered target class's own ``set_eagle3_layers_to_capture`` on a
stand-in ``self`` (those methods only touch ``config``, ``pp_group`` and ``model``).
"""

from __future__ import annotations

import argparse
import copy
import importlib
import inspect
import json
import logging
import os
import re
import sys
import types
import warnings
from pathlib import Path
from typing import Any

import torch
from common import d2t_result, instrumented_load, param_fates, read_checkpoint, run_batch, summarize

warnings.filterwarnings("ignore")
os.environ.setdefault("SGLANG_DISABLE_CUDNN_CHECK", "1")

# The PyPI torchvision wheel is a CUDA build whose fake-op registrations refer to these ops:
# declare them before anything imports torchvision.
try:
    _TV = torch.library.Library("torchvision", "DEF")
    _TV.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _TV.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
except RuntimeError:  # already defined
    pass

SETUP: dict[str, Any] = {}


def sglang_version() -> str:
    import importlib.metadata as md

    return md.version("sglang")


def setup() -> None:
    """World size 1 on gloo and published server args, adapting to the release."""
    if SETUP:
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    from sglang.srt.distributed import parallel_state as ps
    from sglang.srt.server_args import ServerArgs

    ps.init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo")
    args = ServerArgs(model_path="dummy", device="cpu")
    try:
        import sglang.srt.runtime_context as rc  # 0.5.16+
    except ImportError:
        rc = None
    if rc is not None and hasattr(rc, "publish") and "ranks" in inspect.signature(rc.publish).parameters:
        rc.reset_context()
        rc.publish(args, role="test", ranks=rc.SpawnRanks(world_rank=0))
        SETUP["context"] = "runtime_context.publish(ranks)"
    else:
        from sglang.srt.server_args import set_global_server_args_for_scheduler

        set_global_server_args_for_scheduler(args)
        SETUP["context"] = "set_global_server_args_for_scheduler"
    if rc is not None and hasattr(rc, "get_parallel"):
        parallel = rc.get_parallel()
        if hasattr(parallel, "override_permanently"):
            parallel.override_permanently(world_group=ps._WORLD)
    ps.initialize_model_parallel(backend="gloo")
    # The rotary embedding module imports vllm._custom_ops unless the platform is a known one.
    import sglang.srt.layers.rotary_embedding.base as rotary

    rotary._is_cpu = True
    SETUP["version"] = sglang_version()


def run_drafter(d: Path, loo: bool = True) -> dict[str, Any]:
    setup()
    from sglang.srt.models.registry import ModelRegistry
    from sglang.srt.utils.hf_transformers_utils import get_config

    res: dict[str, Any] = {"engine": "sglang", "version": sglang_version()}
    try:
        cfg = get_config(str(d), trust_remote_code=False)
    except Exception as e:
        return {**res, "status": "config_error", "error": f"{type(e).__name__}: {e}"[:800]}
    archs = list(getattr(cfg, "architectures", None) or [])
    try:
        cls, arch = ModelRegistry.resolve_model_cls(archs)
    except Exception as e:
        return {**res, "status": "class_error", "error": f"{type(e).__name__}: {e}"[:800]}
    res["model_class"] = f"{cls.__module__}.{cls.__name__}"
    res["architecture"] = arch
    weights = read_checkpoint(d)

    def make() -> torch.nn.Module:
        with torch.device("cpu"):
            return cls(config=copy.deepcopy(cfg), quant_config=None)

    try:
        make()
    except Exception as e:
        return {**res, "status": "build_error", "error": f"{type(e).__name__}: {e}"[:800]}

    out = instrumented_load(
        make,
        lambda model, items: model.load_weights(items),
        weights,
        extra=lambda model: getattr(model, "hot_token_id", None),
        leave_one_out=loo,
    )
    model = out["model"]
    params = param_fates(model)
    share = emulate_share(model, cfg)
    status = "rejected" if out["rejected"] else "loaded"
    missing = worker_api_missing(model)
    if missing:
        status = "class_error"
        load_error = next(
            (v.get("error", "") for v in out["per_key"].values() if v.get("effect") == "rejected"), ""
        )
        res["error"] = (
            f"AttributeError: the EAGLE-3 worker's init_lm_head needs {', '.join(missing)}, which "
            f"{cls.__name__} lacks"
            + (f" (its load_weights also failed: {load_error[:200]})" if load_error else "")
        )
    res.update(
        status=status,
        per_key=out["per_key"],
        per_param=params,
        d2t=d2t_result(weights, getattr(model, "hot_token_id", None)),
        serving_share=share,
        summary=summarize(out["per_key"], params),
        load_runs=out["runs"],
    )
    return res


def worker_api_missing(model: torch.nn.Module) -> list[str]:
    """What the EAGLE-3 worker uses right after loading that this class lacks.

    init_lm_head (0.5.23 speculative/eagle_worker_v2.py:357-367; 0.5.11 eagle_worker.py:177-190)
    calls ``set_embed_and_head`` (``load_lm_head_from_target``) or ``set_embed``, then reads
    ``model.hot_token_id``: a class without them stops the server at start-up (AttributeError).
    """
    call = "set_embed_and_head" if getattr(model, "load_lm_head_from_target", False) else "set_embed"
    return [a for a in (call, "hot_token_id") if not hasattr(model, a)]


def emulate_share(model: torch.nn.Module, cfg: Any) -> dict[str, Any]:
    """What the EAGLE-3 worker's ``init_lm_head`` does next, on stand-in target tensors."""
    out: dict[str, Any] = {}
    try:
        vocab, hidden = cfg.vocab_size, cfg.hidden_size
        embed, head = torch.full((vocab, hidden), 0.5), torch.full((vocab, hidden), 0.25)
        if getattr(model, "load_lm_head_from_target", False):
            model.set_embed_and_head(embed, head)
            out["call"] = "set_embed_and_head"
        else:
            model.set_embed(embed)
            out["call"] = "set_embed"
        out["embed_from_target"] = model.model.embed_tokens.weight is embed
        lm_head = getattr(model, "lm_head", None)
        out["lm_head_from_target"] = lm_head is not None and getattr(lm_head, "weight", None) is head
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"[:300]
    return out


# -- aux-layer capture of every target class ----------------------------------------------------


class Stand:
    """A stand-in object: every attribute exists, calls are recorded."""

    def __init__(self, name: str = "stand") -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_calls", [])

    def __getattr__(self, k: str) -> Stand:
        if k.startswith("__"):
            raise AttributeError(k)
        v = Stand(f"{self._name}.{k}")
        object.__setattr__(self, k, v)
        return v

    def __call__(self, *a: object, **kw: object) -> None:
        self._calls.append((a, kw))


def _stand_target(n_layers: int) -> Stand:
    """``self`` for a target's setter: a config with N layers, the last pipeline rank, N layers."""
    target = Stand("self")
    cfg = types.SimpleNamespace(
        num_hidden_layers=n_layers, text_config=types.SimpleNamespace(num_hidden_layers=n_layers)
    )
    object.__setattr__(target, "config", cfg)
    object.__setattr__(target, "pp_group", types.SimpleNamespace(is_last_rank=True, is_first_rank=True))
    for attr in ("model", "language_model"):
        inner = Stand(f"self.{attr}")
        object.__setattr__(inner, "layers", [Stand(f"{attr}.layer{i}") for i in range(n_layers)])
        object.__setattr__(target, attr, inner)
    return target


def _read_capture(target: Stand) -> tuple[Any, str]:
    """The ids the setter stored, or the ids it handed on to an inner model."""
    for attr in ("model", "language_model"):
        inner = target.__dict__[attr]
        stored = inner.__dict__.get("layers_to_capture")
        if stored is not None and not isinstance(stored, Stand):
            return list(stored), f"{attr}.layers_to_capture"
        setter = inner.__dict__.get("set_eagle3_layers_to_capture")
        if isinstance(setter, Stand) and setter._calls:
            arg = setter._calls[-1][0][0] if setter._calls[-1][0] else None
            if attr == "language_model":
                return (
                    "delegated",
                    None if arg is None else list(arg),
                ), f"{attr}.set_eagle3_layers_to_capture"
            if arg is None:
                return ("passed_through", None), "model.set_eagle3_layers_to_capture(None)"
            return list(arg), "model.set_eagle3_layers_to_capture(ids)"
    return None, "nothing set"


def _delegate_class(cls: type) -> type | None:
    """The class a wrapper builds ``self.language_model`` from (read from the wrapper's source)."""
    try:
        src = inspect.getsource(cls)
    except (OSError, TypeError):
        return None
    m = re.search(r"self\.language_model\s*=\s*([A-Za-z_]\w*)\(", src)
    if not m:
        return None
    name = m.group(1)
    found = getattr(sys.modules[cls.__module__], name, None)
    if found is None:  # imported inside __init__
        imp = re.search(r"from\s+([\w.]+)\s+import\s+[^\n]*\b" + name + r"\b", src)
        if imp:
            found = getattr(importlib.import_module(imp.group(1)), name, None)
    return found


def _setter_of(cls: type) -> tuple[type, Any]:
    definer = next(c for c in cls.__mro__ if "set_eagle3_layers_to_capture" in c.__dict__)
    return definer, definer.__dict__["set_eagle3_layers_to_capture"]


def capture_table(n_layers: int, samples: list[tuple[str, list[int] | None]]) -> dict[str, Any]:
    setup()
    from sglang.srt.models.registry import ModelRegistry

    rows = []
    for arch, cls in sorted(ModelRegistry.models.items()):
        if not hasattr(cls, "set_eagle3_layers_to_capture"):
            continue
        definer, fn = _setter_of(cls)
        row: dict[str, Any] = {
            "architecture": arch,
            "class": f"{cls.__module__}.{cls.__name__}",
            "defined_in": f"{definer.__module__}.{definer.__name__}",
            "results": {},
        }
        for label, ids in samples:
            target = _stand_target(n_layers)
            try:
                fn(target, None if ids is None else list(ids))
                got, where = _read_capture(target)
                if isinstance(got, tuple) and got[0] == "delegated":
                    dcls = _delegate_class(cls)
                    row["delegates_to"] = f"{dcls.__module__}.{dcls.__name__}" if dcls else "unknown"
                    if dcls is not None and hasattr(dcls, "set_eagle3_layers_to_capture"):
                        inner = _stand_target(n_layers)
                        _setter_of(dcls)[1](inner, None if ids is None else list(ids))
                        got, where = _read_capture(inner)
                        where = "via " + where
                row["results"][label] = {"capture": got, "where": where}
            except Exception as e:
                row["results"][label] = {"error": f"{type(e).__name__}: {e}"[:200]}
        rows.append(row)
    return {
        "engine": "sglang",
        "version": sglang_version(),
        "n_layers": n_layers,
        "samples": dict(samples),
        "classes": rows,
        "note": "capture = SGLang's layers_to_capture: the hidden state at the INPUT of decoder layer i "
        "(= Hugging Face hidden_states[i])",
    }


def capture_samples(n: int) -> list[tuple[str, list[int] | None]]:
    """Ids chosen to tell the known conversion rules apart (first id 1, max id N, ...)."""
    return [
        ("none", None),
        ("first_is_1", [1, n // 2 - 1, n - 4]),
        ("first_is_2", [2, n // 2, n - 3]),
        ("first_is_0", [0, n // 2, n - 1]),
        ("max_is_N", [1, n // 2, n]),
        ("four_ids", [1, n // 4, n // 2, 3 * n // 4]),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("drafter", nargs="?")
    ap.add_argument("--batch", help="directory whose sub-directories are drafters")
    ap.add_argument("--out", help="JSONL output of --batch (JSON of --capture)")
    ap.add_argument("--no-loo", action="store_true", help="skip the leave-one-out check of dropped keys")
    ap.add_argument("--capture", action="store_true")
    ap.add_argument("--layers", type=int, default=36)
    a = ap.parse_args(argv)
    if not os.environ.get("HARNESS_LOGS"):
        logging.disable(logging.WARNING)
    if a.capture:
        result = json.dumps(capture_table(a.layers, capture_samples(a.layers)), indent=1, default=str)
        if a.out:
            Path(a.out).write_text(result + "\n")
        else:
            print(result)
        return 0
    if a.batch:
        setup()
        return run_batch(a.batch, a.out, lambda d: run_drafter(d, loo=not a.no_loo), SETUP)
    print(json.dumps(run_drafter(Path(a.drafter), loo=not a.no_loo), indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
