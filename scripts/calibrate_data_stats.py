"""Calibrate DATA_NOT_FROM_TARGET on the demo target: its own data against other writers.

The statistic is ``audit-data --target``'s own (``SampleFit.agreement`` with the ``GreedyLabeller``
over SpecForge-style samples whose last hidden state is stored in bf16, as trainers dump it): the
number of loss-masked positions where the data's next token is the target's greedy token, against
``E = Σ p_T(greedy)`` at the highest judged temperature (``TEMPERATURES[-1]``) and its binomial sd.

* **Null** (the target's own data): the demo target (``data/demo/target``, a real tiny
  transformers Llama) and flatter copies of it (``lm_head`` × 0.75, × 0.5: the same greedy
  choices, lower confidence), each sampling its own replies greedily and at T = 0.7, 1.0, 1.2,
  several seeds; data sets of 10, 40 and 160 samples (disjoint subsets of 160).
* **Other writers**, judged by the demo target: the target with Gaussian weight noise of 10-50 %
  of each tensor's sd, greedy and at T = 1; the target's replies swapped between prompts;
  another model with the same tokenizer (a random initialisation of the target's config).

Writes ``docs/calibration/data_not_from_target.json`` (every data set's numbers) and
``docs/calibration/data_not_from_target.md`` (the tables ``docs/findings.md`` quotes). A few
minutes on 2 CPU cores.

Usage::

    PYTHONPATH=. .venv/bin/python scripts/calibrate_data_stats.py [--seeds 3] [--out docs/calibration]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

from eagle3_forensics.checks.data.target_findings import MARGIN, Z_CRIT, agreement_test
from eagle3_forensics.checks.data.target_scan import TEMPERATURES, SampleFit
from eagle3_forensics.io.dumps.read import Item, Sample
from eagle3_forensics.probe.offline.teacher import GreedyLabeller

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "data" / "demo" / "target"
NEW_TOKENS = 48
SIZES = (10, 40, 160)
POOL = max(SIZES)
NULL_TEMPS: tuple[float | None, ...] = (None, 0.7, 1.0, 1.2)  # None: greedy
SCALES = (1.0, 0.75, 0.5)
NOISE = (0.1, 0.2, 0.3, 0.5)


def prompts(tok: Any) -> list[list[int]]:
    """:data:`POOL` chat prompts rendered by the target's template (user turns from the demo corpus)."""
    rows = [json.loads(line) for line in (ROOT / "data" / "demo" / "corpus.jsonl").open(encoding="utf-8")]
    texts = [str(r.get("text") or r.get("prompt")) for r in rows]
    out = []
    for i in range(POOL):
        words = texts[i % len(texts)].split()
        user = " ".join(words[(i // len(texts)) * 3 :][:14])
        ids = tok.apply_chat_template(
            [{"role": "user", "content": user}], tokenize=True, add_generation_prompt=True
        )
        ids = ids["input_ids"] if hasattr(ids, "keys") else ids
        out.append([int(x) for x in ids])
    return out


@torch.inference_mode()
def generate(
    model: Any, prompt_ids: list[list[int]], temperature: float | None, seed: int, pad: int
) -> list[list[int]]:
    """:data:`NEW_TOKENS` tokens after each prompt (left-padded batches; greedy when ``temperature`` is None)."""
    torch.manual_seed(seed)
    out: list[list[int]] = []
    for lo in range(0, len(prompt_ids), 80):
        batch = prompt_ids[lo : lo + 80]
        width = max(map(len, batch))
        x = torch.tensor([[pad] * (width - len(p)) + p for p in batch])
        att = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
        got = model.generate(
            x,
            attention_mask=att,
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=temperature is not None,
            temperature=temperature,
            top_k=0 if temperature is not None else None,
            top_p=1.0 if temperature is not None else None,
            pad_token_id=pad,
        )
        out += [[int(t) for t in row[width:]] for row in got]
    return out


@torch.inference_mode()
def dumped(target: Any, prompt_ids: list[list[int]], replies: list[list[int]]) -> list[Sample]:
    """SpecForge-style samples: the target's last hidden state (after the final norm) in bf16, the
    loss mask over the reply (right-padded batches: causal attention keeps each row's states)."""
    out = []
    seqs = [p + r for p, r in zip(prompt_ids, replies, strict=True)]
    for lo in range(0, len(seqs), 80):
        batch = seqs[lo : lo + 80]
        width = max(map(len, batch))
        x = torch.tensor([q + [0] * (width - len(q)) for q in batch])
        att = torch.tensor([[1] * len(q) + [0] * (width - len(q)) for q in batch])
        hs = target(x, attention_mask=att, output_hidden_states=True).hidden_states[-1].to(torch.bfloat16)
        for j, q in enumerate(batch):
            i = lo + j
            n_p = len(prompt_ids[i])
            mask = torch.tensor([False] * n_p + [True] * (len(q) - n_p))
            item = Item(i, f"data_{i}.ckpt", Path(f"data_{i}.ckpt"), i)
            out.append(Sample(item, "specforge", torch.tensor(q), mask, hs[j, : len(q)].clone(), None))
    return out


def scored(fit: SampleFit, samples: list[Sample]) -> np.ndarray:
    """Per sample: agree, total, E(T=1), var(T=1), E(T max), var(T max) (audit-data's own records)."""
    rows = [fit.agreement(s) for s in samples]
    return np.asarray([r for r in rows if r is not None], dtype=np.float64)


def datasets(rows: np.ndarray) -> list[dict[str, Any]]:
    """The decision on disjoint subsets of each size."""
    out = []
    for n in SIZES:
        for lo in range(0, len(rows) - n + 1, n):
            s = rows[lo : lo + n].sum(axis=0)
            agree, total, e1, e_max, var_max = s[0], s[1], s[2], s[4], s[5]
            t = agreement_test(int(agree), int(total), float(e_max), float(var_max))
            z0 = (agree - e_max) / math.sqrt(var_max) if var_max > 0 else 0.0
            out.append(
                {
                    "n": n,
                    "positions": int(total),
                    "rate": agree / total,
                    "expected_t1": e1 / total,
                    "expected_tmax": e_max / total,
                    "z0": float(z0),  # (agree - E) / sd: N(0, 1) for data sampled at T max exactly
                    "deficit": float(1 - agree / e_max),  # relative shortfall against E at T max
                    "z": t["z"],
                    "flagged": t["flagged"],
                    "severity": t["severity"],
                }
            )
    return out


def noisy(model: Any, level: float, seed: int) -> Any:
    """A copy with Gaussian noise of ``level`` × each tensor's sd added to every weight."""
    m = copy.deepcopy(model)
    g = torch.Generator().manual_seed(1000 + seed)
    with torch.no_grad():
        for p in m.parameters():
            if p.numel() > 1:
                p.add_(torch.randn(p.shape, generator=g) * p.std() * level)
    return m


def variant(model: Any, scale: float, root: Path) -> Path:
    """The target with ``lm_head`` × ``scale``, saved with the target's tokenizer (the labeller reads it)."""
    d = root / f"target_x{scale}"
    m = copy.deepcopy(model)
    with torch.no_grad():
        m.lm_head.weight.mul_(scale)
    m.save_pretrained(str(d), safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TARGET / f, d / f)
    return d


def label(t: float | None) -> str:
    return "greedy" if t is None else f"T={t}"


def run(seeds: int) -> dict[str, Any]:
    tok = AutoTokenizer.from_pretrained(str(TARGET))
    base = AutoModelForCausalLM.from_pretrained(str(TARGET), dtype=torch.float32).eval()
    pad = int(tok.convert_tokens_to_ids("</s>"))
    ps = prompts(tok)
    root = Path(tempfile.mkdtemp(prefix="calib_"))
    null: list[dict[str, Any]] = []
    writers: list[dict[str, Any]] = []
    try:
        fits = {s: SampleFit(d, GreedyLabeller(d), False) for s in SCALES for d in [variant(base, s, root)]}
        for s in SCALES:
            flat = copy.deepcopy(base)
            with torch.no_grad():
                flat.lm_head.weight.mul_(s)
            for t in NULL_TEMPS:
                for seed in range(seeds if t is not None else 1):  # greedy: one data set per prompt pool
                    rows = scored(fits[s], dumped(base, ps, generate(flat, ps, t, seed, pad)))
                    for d in datasets(rows):
                        null.append({"scale": s, "temperature": label(t), "seed": seed, **d})
        judge = fits[1.0]
        for seed in range(max(1, seeds // 2 + 1)):
            cases: list[tuple[str, Any, float | None, int]] = [
                (f"noise {int(lv * 100)}%", noisy(base, lv, seed), t, 0) for lv in NOISE for t in (None, 1.0)
            ]
            other = LlamaForCausalLM(copy.deepcopy(base.config))
            torch.manual_seed(500 + seed)
            other.init_weights()
            cases += [("another model", other.eval(), t, 0) for t in (None, 1.0)]
            cases += [("replies swapped", base, t, 1) for t in (None, 1.0)]
            for name, model, t, shift in cases:
                replies = generate(model, ps, t, seed, pad)
                if shift:
                    replies = replies[shift:] + replies[:shift]
                rows = scored(judge, dumped(base, ps, replies))
                for d in datasets(rows):
                    writers.append({"writer": name, "temperature": label(t), "seed": seed, **d})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"null": null, "writers": writers}


def redecide(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored run's data sets decided again by :func:`agreement_test` (sums rebuilt from the rates)."""
    out: dict[str, Any] = {"null": stored["null"], "writers": stored["writers"]}
    for r in out["null"] + out["writers"]:
        e = r["expected_tmax"] * r["positions"]
        agree = round(r["rate"] * r["positions"])
        var = ((agree - e) / r["z0"]) ** 2 if r["z0"] else r["positions"] * 0.25
        r.update(
            {
                k: v
                for k, v in agreement_test(agree, r["positions"], e, var).items()
                if k in ("z", "flagged", "severity")
            }
        )
    return out


def summarise(got: dict[str, Any]) -> dict[str, Any]:
    """The tables: per null cell the worst z0 and deficit and the flagged share; per writer the detection rate."""
    null, writers = got["null"], got["writers"]
    cells: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in null:
        cells.setdefault((r["scale"], r["temperature"], r["n"]), []).append(r)
    null_rows = [
        {
            "lm_head_scale": k[0],
            "temperature": k[1],
            "n": k[2],
            "sets": len(v),
            "rate": float(np.mean([r["rate"] for r in v])),
            "expected_t1": float(np.mean([r["expected_t1"] for r in v])),
            "expected_tmax": float(np.mean([r["expected_tmax"] for r in v])),
            "min_z0": float(min(r["z0"] for r in v)),
            "max_deficit": float(max(r["deficit"] for r in v)),
            "flagged": sum(r["flagged"] for r in v),
        }
        for k, v in sorted(cells.items(), key=lambda kv: (-kv[0][0], kv[0][1], kv[0][2]))
    ]
    at_tmax = [r["z0"] for r in null if r["temperature"] == label(TEMPERATURES[-1])]
    mu, sd = float(np.mean(at_tmax)), float(np.std(at_tmax))
    # the false-alarm rate a normal fit of the null z0 at T max gives (the worst temperature)
    bound = [(r["z"] - r["z0"]) for r in null if r["temperature"] == label(TEMPERATURES[-1])]
    fa = (
        float(np.mean([0.5 * math.erfc((Z_CRIT + mu + b) / (sd * math.sqrt(2))) for b in bound]))
        if bound
        else 0.0
    )
    wcells: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in writers:
        wcells.setdefault((r["writer"], r["temperature"], r["n"]), []).append(r)
    writer_rows = [
        {
            "writer": k[0],
            "temperature": k[1],
            "n": k[2],
            "sets": len(v),
            "rate": float(np.mean([r["rate"] for r in v])),
            "expected_tmax": float(np.mean([r["expected_tmax"] for r in v])),
            "deficit": float(np.mean([r["deficit"] for r in v])),
            "detected": float(np.mean([r["flagged"] for r in v])),
            "errors": float(np.mean([r["severity"] == "error" for r in v])),
        }
        for k, v in sorted(wcells.items())
    ]
    return {
        "margin": MARGIN,
        "z_crit": Z_CRIT,
        "t_max": TEMPERATURES[-1],
        "null_z0_at_tmax": {"mean": mu, "sd": sd, "sets": len(at_tmax)},
        "false_alarm_rate_estimate": fa,
        "null_flagged": sum(r["flagged"] for r in null),
        "null_sets": len(null),
        "null": null_rows,
        "writers": writer_rows,
    }


def markdown(s: dict[str, Any]) -> str:
    lines = [
        "# Calibration: DATA_NOT_FROM_TARGET",
        "",
        "Written by `scripts/calibrate_data_stats.py` (how the code is decided: [finding codes](../findings.md#data_not_from_target)).",
        "",
        f"Null: the demo target's own data (margin {s['margin']}, z {s['z_crit']}, T max {s['t_max']}); "
        f"{s['null_flagged']} of {s['null_sets']} data sets flagged; z0 at T max: mean "
        f"{s['null_z0_at_tmax']['mean']:.2f}, sd {s['null_z0_at_tmax']['sd']:.2f} over {s['null_z0_at_tmax']['sets']} "
        f"sets; false-alarm estimate at T max {s['false_alarm_rate_estimate']:.2e}.",
        "",
        "| lm_head × | sampled | samples | sets | agreement | E(T=1) | E(T=1.2) | worst z0 | worst deficit | flagged |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in s["null"]:
        lines.append(
            f"| {r['lm_head_scale']} | {r['temperature']} | {r['n']} | {r['sets']} | {r['rate']:.3f} | "
            f"{r['expected_t1']:.3f} | {r['expected_tmax']:.3f} | {r['min_z0']:.2f} | {r['max_deficit']:.3f} | {r['flagged']} |"
        )
    lines += [
        "",
        "| writer | sampled | samples | sets | agreement | E(T=1.2) | deficit | detected | as error |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in s["writers"]:
        lines.append(
            f"| {r['writer']} | {r['temperature']} | {r['n']} | {r['sets']} | {r['rate']:.3f} | "
            f"{r['expected_tmax']:.3f} | {r['deficit']:.3f} | {r['detected']:.0%} | {r['errors']:.0%} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "docs" / "calibration"))
    ap.add_argument("--from-json", help="re-decide a stored run with the current thresholds (no sampling)")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)  # tiny matmuls: more threads only spin
    t0 = time.perf_counter()
    got = redecide(json.loads(Path(a.from_json).read_text())) if a.from_json else run(a.seeds)
    s = summarise(got)
    stored = json.loads(Path(a.from_json).read_text())["summary"] if a.from_json else {}
    s["seconds"] = stored.get("seconds", round(time.perf_counter() - t0, 1))  # the sampling run's time
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "data_not_from_target.json").write_text(json.dumps({"summary": s, **got}, indent=1) + "\n")
    (out / "data_not_from_target.md").write_text(markdown(s))
    print(markdown(s))
    print(f"{s['seconds']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
