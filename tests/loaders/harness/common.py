"""What every loader harness shares: read a drafter, fill an engine model's parameters with a
sentinel, feed the engine's own ``load_weights`` and classify what each checkpoint key and each
engine parameter became.

These scripts run inside an engine's venv (``make loaders-env``), never in the project's
``.venv``: they import the engine's released code and call it, and import nothing from
eagle3_forensics. Nothing from the engines is copied here.

A key's ``effect``:
  changed   while the loader handled the key, a parameter (or the tracked extra, SGLang's
            ``hot_token_id``) changed
  deferred  nothing changed at that moment, but leaving the key out changes the final state
            (SGLang's Kimi class caches ``q_a_proj`` until ``kv_a_proj_with_mqa`` arrives)
  dropped   nothing changed and leaving it out changes nothing: silently ignored
  rejected  the loader raised on it (the load is repeated without it, so the other keys are
            still classified)
A parameter's ``fate``: filled (no element still holds the sentinel), partial (some do),
unfilled (all do).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import torch

# Tiny tensors: with more than one OpenMP thread, torch.equal/clone wake the pool on every call
# (measured ~10x slower on 2 cores). The harnesses are CPU-bound Python loops over tiny models.
torch.set_num_threads(1)

SENTINEL_F = -3.25  # exact in fp32/bf16/fp16; the corpus never writes it
SENTINEL_I = -7777

Model = torch.nn.Module
Loader = Callable[[Model, Iterable[tuple[str, torch.Tensor]]], object]


def read_checkpoint(d: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of a drafter directory (safetensors, else ``.bin`` with ``weights_only``)."""
    d = Path(d)
    files = sorted(d.glob("*.safetensors"))
    out: dict[str, torch.Tensor] = {}
    if files:
        from safetensors.torch import load_file

        for f in files:
            out.update(load_file(str(f)))
        return out
    for f in sorted(d.glob("*.bin")):
        out.update(torch.load(f, map_location="cpu", weights_only=True))
    return out


def read_config(d: str | Path) -> dict[str, Any]:
    return json.loads((Path(d) / "config.json").read_text())


def fill_sentinel(model: Model) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(SENTINEL_F if p.is_floating_point() else SENTINEL_I)


def snapshot(model: Model, extra: Callable[[], object] | None = None) -> dict[str, object]:
    s: dict[str, object] = {n: p.detach().clone() for n, p in model.named_parameters()}
    if extra is not None:
        x = extra()
        s["<extra>"] = x.detach().clone() if isinstance(x, torch.Tensor) else x
    return s


def _same(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return False
    return a == b


def diff(a: dict[str, object], b: dict[str, object]) -> list[str]:
    return sorted(n for n in set(a) | set(b) if n not in a or n not in b or not _same(a[n], b[n]))


def param_fates(model: Model) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for n, p in model.named_parameters():
        sentinel = SENTINEL_F if p.is_floating_point() else SENTINEL_I
        still = int((p.detach() == sentinel).sum())
        fate = "unfilled" if still == p.numel() else ("partial" if still else "filled")
        out[n] = {"fate": fate, "shape": list(p.shape)}
    return out


def _error(e: BaseException, limit: int = 500) -> str:
    return f"{type(e).__name__}: {e}"[:limit]


def instrumented_load(
    make_model: Callable[[], Model],
    load: Loader,
    weights: dict[str, torch.Tensor],
    extra: Callable[[Model], object] | None = None,
    leave_one_out: bool = True,
) -> dict[str, Any]:
    """Run ``load(model, iterator)`` once over all keys, as the engine does, attributing each
    parameter change to the key being handled. ``extra(model)`` is a non-parameter result to
    track (SGLang's ``hot_token_id``)."""
    order = list(weights)
    rejected: dict[str, str] = {}
    runs = 0

    def run(keys: list[str]) -> tuple[Model, dict[str, list[str]], tuple[str | None, str] | None, dict]:
        nonlocal runs
        runs += 1
        model = make_model()
        fill_sentinel(model)
        ex = (lambda: extra(model)) if extra else None
        effects: dict[str, list[str]] = {}
        state: dict[str, Any] = {"prev": snapshot(model, ex), "cur": None}

        def items() -> Iterator[tuple[str, torch.Tensor]]:
            for k in keys:
                state["cur"] = k
                yield k, weights[k]
                now = snapshot(model, ex)
                effects[k] = diff(state["prev"], now)
                state["prev"] = now
            state["cur"] = None

        err: tuple[str | None, str] | None = None
        try:
            load(model, items())
        except Exception as e:
            err = (state["cur"], _error(e))
        return model, effects, err, snapshot(model, ex)

    keys = list(order)
    model, effects, err, final = run(keys)
    while err is not None:
        bad = err[0]
        if bad is None:  # raised before the first key or after the last: the load as a whole
            rejected["<load>"] = err[1]
            break
        rejected[bad] = err[1]
        keys = [k for k in keys if k != bad]
        model, effects, err, final = run(keys)
    per_key: dict[str, dict[str, Any]] = {}
    for k in order:
        if k in rejected:
            per_key[k] = {"effect": "rejected", "error": rejected[k]}
        elif k in effects:
            per_key[k] = {"effect": "changed" if effects[k] else "dropped", "changed": effects[k]}
        else:
            per_key[k] = {"effect": "not_reached"}
    if leave_one_out and "<load>" not in rejected:
        for k in order:
            if per_key[k]["effect"] != "dropped":
                continue
            _, _, err2, final2 = run([x for x in keys if x != k])
            if err2 is not None or diff(final, final2):
                per_key[k] = {"effect": "deferred", "changed_final": diff(final, final2)}
    return {"model": model, "per_key": per_key, "rejected": rejected, "runs": runs}


def per_key_calls(make_model: Callable[[], Model], load: Loader, weights: dict[str, torch.Tensor]) -> dict:
    """For loaders that buffer the whole iterator (vLLM's Eagle3 classes): one ``load`` call per
    key on one model attributes each change, then one real all-keys call on a fresh model says
    whether the actual load raises."""
    model = make_model()
    fill_sentinel(model)
    per_key: dict[str, dict[str, Any]] = {}
    prev = snapshot(model)
    for k, t in weights.items():
        try:
            load(model, [(k, t)])
        except Exception as e:
            per_key[k] = {"effect": "rejected", "error": _error(e)}
            prev = snapshot(model)
            continue
        now = snapshot(model)
        changed = diff(prev, now)
        per_key[k] = {"effect": "changed" if changed else "dropped", "changed": changed}
        prev = now
    full = make_model()
    fill_sentinel(full)
    full_error = None
    try:
        load(full, list(weights.items()))
    except Exception as e:
        full_error = _error(e, 800)
    return {"model": model, "full_model": full, "per_key": per_key, "full_load_error": full_error}


def d2t_result(weights: dict[str, torch.Tensor], targets: torch.Tensor | None) -> dict[str, Any]:
    """What the engine made of ``d2t``: its target ids compared with the offset reading
    ``i + d2t[i]`` and with the raw values."""
    out: dict[str, Any] = {"present": "d2t" in weights, "engine_targets": targets is not None}
    if targets is None or "d2t" not in weights:
        return out
    t = targets.detach().to(torch.int64).flatten()
    d = weights["d2t"].to(torch.int64).flatten()
    same_len = t.numel() == d.numel()
    out["equals_i_plus_d2t"] = bool(same_len and torch.equal(t, d + torch.arange(d.numel())))
    out["equals_d2t_raw"] = bool(same_len and torch.equal(t, d))
    return out


def summarize(per_key: dict[str, dict], params: dict[str, dict]) -> dict[str, Any]:
    return {
        "keys": dict(Counter(v["effect"] for v in per_key.values())),
        "params": dict(Counter(v["fate"] for v in params.values())),
    }


def drafter_dirs(root: str | Path) -> list[Path]:
    """The drafters of a corpus: every sub-directory holding a config.json, sorted by name."""
    return sorted(p for p in Path(root).iterdir() if (p / "config.json").is_file())


def run_batch(root: str, out: str, run_one: Callable[[Path], dict[str, Any]], setup_info: dict) -> int:
    """One process, many drafters: the import cost is paid once. One JSON line per drafter."""
    t0 = time.perf_counter()
    n = 0
    tmp = out + ".tmp"
    with open(tmp, "w") as fo:
        for d in drafter_dirs(root):
            t1 = time.perf_counter()
            try:
                r = run_one(d)
            except Exception as e:  # a harness bug: recorded, and the comparison fails on it
                r = {
                    "status": "harness_error",
                    "error": _error(e, 800),
                    "traceback": traceback.format_exc()[-1500:],
                }
            r["drafter"] = d.name
            r["seconds"] = round(time.perf_counter() - t1, 4)
            fo.write(json.dumps(r, default=str) + "\n")
            n += 1
    os.replace(tmp, out)
    print(
        json.dumps({"drafters": n, "batch_s": round(time.perf_counter() - t0, 2), "setup": setup_info}),
        file=sys.stderr,
    )
    return 0
