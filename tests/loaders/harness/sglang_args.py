"""Parse SGLang command lines with the released SGLang's own argument parser (no server, no GPU).

    .venv-sglang/bin/python tests/loaders/harness/sglang_args.py < ARGVS.json > RESULTS.json

stdin: a JSON list of argv lists (the arguments after ``python -m sglang.launch_server``). For each,
the parser ``prepare_server_args`` builds (``argparse.ArgumentParser`` + ``ServerArgs.add_cli_args``)
parses it; the answer is the speculative fields it stored, or the one-line error argparse printed.
Validation after parsing (``ServerArgs.__post_init__`` / the resolution hooks) needs the target's
config and is not run: this is an oracle of the flags, spellings and argparse-level checks only.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata as md
import io
import json
import sys
import warnings
from typing import Any

import torch

warnings.filterwarnings("ignore")

# The PyPI torchvision wheel is a CUDA build whose fake-op registrations refer to these ops: declare
# them before SGLang's imports reach torchvision (as sglang_loader.py does).
try:
    _TV = torch.library.Library("torchvision", "DEF")
    _TV.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _TV.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
except RuntimeError:  # already defined
    pass

FIELDS = (
    "model_path",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "tp_size",
)


def parser() -> argparse.ArgumentParser:
    from sglang.srt.server_args import ServerArgs

    p = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(p)
    return p


def parse(p: argparse.ArgumentParser, argv: list[str]) -> dict[str, Any]:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = p.parse_args(argv)
    except SystemExit:
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        return {"error": lines[-1] if lines else "argparse exited"}
    fields = {f: getattr(ns, f, None) for f in FIELDS}
    # up to 0.5.11 the tensor-parallel flag's dest is its first spelling (from_cli_args renames it)
    if getattr(ns, "tensor_parallel_size", None) is not None:
        fields["tp_size"] = ns.tensor_parallel_size
    return {"fields": fields}


def main() -> int:
    argvs = json.load(sys.stdin)
    p = parser()
    out = {"sglang": md.version("sglang"), "results": [parse(p, list(a)) for a in argvs]}
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
