"""The target-side oracle's comparison itself (part of `make test`: no engine needed).

A harness result that captures exactly what the vLLM 0.32.0 target table says agrees on every row;
one captured id more, an unexpected error, or a class the table does not list is a disagreement.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import target_oracle as oracle

N = 6


def _perfect() -> dict[str, Any]:
    """A harness result that does exactly what the table predicts."""
    tab = oracle.table("0.32.0")
    classes = []
    for arch, decoder in (("LlamaForCausalLM", "LlamaModel"), ("DeepseekV2ForCausalLM", "DeepseekV2Model")):
        runs = []
        for ids in ([0, N - 1, N, N + 1], [N, 2, 0], [1, 1, 3]):
            want = oracle.predict(tab, arch, ids, N)
            runs.append(
                {"ids": ids, "error": "TypeError"}
                if want == "error"
                else {"ids": ids, "captured": json.loads(want)}
            )
        classes.append(
            {
                "architecture": arch,
                "n_layers": N,
                "status": "ran",
                "decoder_class": decoder,
                "default": [2, 3, 3],
                "runs": runs,
            }
        )
    return {"engine": "vllm", "version": "0.32.0+cpu", "classes": classes}


def test_a_perfect_engine_agrees_on_every_row() -> None:
    rows = oracle.judge(_perfect())
    assert rows and all(r.agree for r in rows), [r for r in rows if not r.agree]
    deepseek = [r for r in rows if r.architecture == "DeepseekV2ForCausalLM" and 0 in r.ids]
    assert deepseek and all(r.real == "error" for r in deepseek)  # id 0: residual is None before layer 0


def test_each_single_difference_is_a_disagreement() -> None:
    more = copy.deepcopy(_perfect())
    more["classes"][0]["runs"][0]["captured"].append(N + 1)  # captured beyond N
    crash = copy.deepcopy(_perfect())
    crash["classes"][0]["runs"][1] = {"ids": [N, 2, 0], "error": "TypeError"}
    default = copy.deepcopy(_perfect())
    default["classes"][1]["default"] = [1, 3, 3]
    unknown = copy.deepcopy(_perfect())
    unknown["classes"][0]["architecture"] = "NotListedForCausalLM"
    for result in (more, crash, default, unknown):
        rows = oracle.judge(result)
        assert sum(not r.agree for r in rows) >= 1
