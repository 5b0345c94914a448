"""Load EAGLE-3 drafters with vllm-project/speculators' released classes and report each key's fate.

    .venv-speculators/bin/python tests/loaders/harness/speculators_loader.py --batch CORPUS --out RESULTS.jsonl
    .venv-speculators/bin/python tests/loaders/harness/speculators_loader.py DRAFTER_DIR   # one drafter, JSON

The loader is ``SpeculatorModel.from_pretrained`` (Transformers loading, then
``load_vocab_mappings`` and ``load_verifier_weights``), in two steps so that a refused config is
told apart from a refused load: ``SpeculatorModelConfig.from_pretrained`` first, then the model.
A config without ``speculators_model_type`` is handed to ``from_pretrained`` as it is: 0.9.0
auto-converts only DFlash checkpoints and refuses the rest (the refusal is the result).

Both steps need the verifier: a tiny random Llama of the drafter's vocabulary and width is written
to a scratch folder, and a copy of the drafter points its ``verifier.name_or_path`` at it (the
corpus itself is never modified).

A parameter or buffer is ``filled`` when it equals the checkpoint tensor of the same name; anything
else (the verifier's copy, NaN, initialisation) did not come from the checkpoint: ``unfilled``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from common import d2t_result, read_checkpoint, read_config, run_batch  # noqa: E402

SCRATCH = Path(os.environ.get("HARNESS_SCRATCH") or Path(tempfile.gettempdir()) / "e3f-loaders-speculators")
SCRATCH.mkdir(parents=True, exist_ok=True)


def speculators_version() -> str:
    import importlib.metadata as md

    return md.version("speculators")


def tiny_verifier(vocab: int, hidden: int, layers: int = 8) -> Path:
    d = SCRATCH / f"verifier_llama_V{vocab}_H{hidden}_N{layers}"
    if (d / "model.safetensors").is_file():
        return d
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    heads = max(1, hidden // 32)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        head_dim=hidden // heads,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=1,
    )
    LlamaForCausalLM(cfg).save_pretrained(d)
    return d


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:800]


def run_drafter(d: Path) -> dict[str, Any]:
    from speculators import SpeculatorModel, SpeculatorModelConfig

    res: dict[str, Any] = {"engine": "speculators", "version": speculators_version()}
    cfg = read_config(d)
    layer = cfg.get("transformer_layer_config") or cfg
    vocab = int(layer.get("vocab_size") or 512)
    hidden = int(cfg.get("target_hidden_size") or layer.get("hidden_size") or 128)
    verifier = tiny_verifier(vocab, hidden)
    work = Path(tempfile.mkdtemp(prefix="drafter_", dir=SCRATCH))
    try:
        src = work / "drafter"
        shutil.copytree(d, src)
        if "speculators_model_type" not in cfg:
            try:
                SpeculatorModel.from_pretrained(str(src), verifier=str(verifier))
            except Exception as e:
                return {**res, "status": "config_error", "error": _error(e)}
        else:
            sc = dict(cfg.get("speculators_config") or {})
            sc["verifier"] = {**(sc.get("verifier") or {}), "name_or_path": str(verifier)}
            (src / "config.json").write_text(json.dumps({**cfg, "speculators_config": sc}))
        try:
            config = SpeculatorModelConfig.from_pretrained(str(src))
        except Exception as e:
            return {**res, "status": "config_error", "error": _error(e)}
        with _LoadReport() as report:
            try:
                model = SpeculatorModel.from_pretrained(str(src), config=config)
            except Exception as e:
                # Transformers' load report names the keys it refused (size mismatches); any other
                # failure is the load as a whole, attributed to no key.
                rejected = {k: {"effect": "rejected"} for k in report.mismatched()}
                return {
                    **res,
                    "status": "rejected",
                    "error": _error(e),
                    "per_key": rejected,
                    "per_key_complete": False,
                }
        return {**res, **_fates(model, read_checkpoint(src))}
    finally:
        shutil.rmtree(work, ignore_errors=True)


class _LoadReport(logging.Handler):
    """Collects Transformers' log records during one load (its LOAD REPORT table among them),
    keeping them off the terminal."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> _LoadReport:
        self._logger = logging.getLogger("transformers")
        self._saved = (self._logger.level, self._logger.propagate, list(self._logger.handlers))
        self._logger.handlers = [self]
        self._logger.setLevel(logging.INFO)
        self._logger.propagate = False
        return self

    def __exit__(self, *exc: object) -> None:
        level, propagate, handlers = self._saved
        self._logger.handlers = handlers
        self._logger.setLevel(level)
        self._logger.propagate = propagate

    def mismatched(self) -> list[str]:
        text = "\n".join(self.messages)
        return re.findall(r"^\s*([\w.]+)\s*\|\s*MISMATCH\s*\|", text, flags=re.MULTILINE)


def _fates(model: torch.nn.Module, weights: dict[str, torch.Tensor]) -> dict[str, Any]:
    state = model.state_dict()
    per_param: dict[str, dict[str, Any]] = {}
    for n, p in state.items():
        w = weights.get(n)
        from_ckpt = w is not None and w.shape == p.shape and bool(torch.equal(w.to(p.dtype), p.detach()))
        per_param[n] = {"fate": "filled" if from_ckpt else "unfilled", "shape": list(p.shape)}
    per_key: dict[str, dict[str, Any]] = {}
    for k in weights:
        used = k in per_param and per_param[k]["fate"] == "filled"
        per_key[k] = {"effect": "changed" if used else "dropped"}
    d2t = getattr(model, "d2t", None)
    targets = d2t.detach() + torch.arange(d2t.numel()) if isinstance(d2t, torch.Tensor) else None
    return {
        "status": "loaded",
        "model_class": f"{type(model).__module__}.{type(model).__name__}",
        "per_key": per_key,
        "per_param": per_param,
        "d2t": d2t_result(weights, targets),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("drafter", nargs="?")
    ap.add_argument("--batch", help="directory whose sub-directories are drafters")
    ap.add_argument("--out", help="JSONL output of --batch")
    a = ap.parse_args(argv)
    if not os.environ.get("HARNESS_LOGS"):
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()
        except ImportError:
            pass
        try:
            from loguru import logger

            logger.remove()
        except ImportError:
            pass
    if a.batch:
        return run_batch(a.batch, a.out, run_drafter, {"version": speculators_version()})
    print(json.dumps(run_drafter(Path(a.drafter)), indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
