"""Run vLLM 0.34.0's own start-up validation on this CPU (inside .venv-vllm034); print JSON.

No CPU build of vLLM 0.34 exists, but its config classes import with torch 2.13.0+cpu and a few
light dependencies (tests/loaders/build_venv.sh vllm): ``SpeculativeConfig``'s pydantic fields, the
speculators verifier rule, the speculators ``peagle`` refusal, the platform's
``VLLM_USE_V2_MODEL_RUNNER`` check and the model registry. Building a ``ModelConfig`` (needed for
``parallel_drafting`` and the context rule) imports the serving stack, so those stay read.
Input on stdin: ``{"speculators_checkpoint": DIR, "keys": [...], "cwd": DIR}``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Any


def _error(fn: Any) -> str | None:
    try:
        fn()
    except Exception as exc:  # the release's own refusal, whatever its type
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    return None


def main() -> None:
    job = json.load(sys.stdin)
    os.chdir(job["cwd"])
    from vllm.config import SpeculativeConfig
    from vllm.model_executor.models.registry import ModelRegistry
    from vllm.platforms.interface import Platform
    from vllm.transformers_utils.config import maybe_override_with_speculators
    from vllm.transformers_utils.configs.speculators.base import SpeculatorsConfig

    out: dict[str, Any] = {"fields": sorted(f.name for f in dataclasses.fields(SpeculativeConfig) if f.init)}
    out["keys"] = {
        key: _error(
            lambda key=key: SpeculativeConfig(
                method="eagle3", model="x", num_speculative_tokens=3, **{key: True}
            )
        )
        for key in job["keys"]
    }
    ckpt = job["speculators_checkpoint"]
    out["verifier"] = _error(lambda: maybe_override_with_speculators(ckpt, ckpt, False, None))
    with open(os.path.join(ckpt, "config.json"), encoding="utf-8") as fh:
        cfg = json.load(fh)
    out["peagle"] = _error(
        lambda: SpeculatorsConfig.extract_vllm_speculative_config({**cfg, "speculators_model_type": "peagle"})
    )
    os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "0"
    out["env"] = _error(lambda: Platform.validate_environ(hard_fail=True))
    del os.environ["VLLM_USE_V2_MODEL_RUNNER"]
    out["archs"] = sorted(ModelRegistry.get_supported_archs())
    print(json.dumps(out))


if __name__ == "__main__":
    main()
