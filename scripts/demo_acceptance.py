"""Measure the demo's low-acceptance variants with ``probe`` and write the table into data/demo/README.md.

    python scripts/demo_acceptance.py data/demo [--json OUT.json]

Each variant is probed next to ``healthy`` in the setting that shows its cause (the in-process
reference probe, K=3, fp32 on the CPU, one thread: deterministic): single-turn chat prompts in
thinking mode (the serving mode) for every chat variant, and the long prompts (earlier turns in the
context) for ``short_trained``. ``make data`` runs it after the generator; the probe sits above the
demo generator's layer, hence a script.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROWS: tuple[tuple[str, str, str], ...] = (
    # (drafter, prompts file, what the setting shows)
    ("healthy", "chat_prompts.jsonl", "thinking, single turn"),
    ("foreign_data", "chat_prompts.jsonl", "thinking, single turn"),
    ("no_thinking", "chat_prompts.jsonl", "thinking, single turn"),
    ("vocab_no_think_end", "chat_prompts.jsonl", "thinking, single turn"),
    ("short_trained", "chat_prompts.jsonl", "thinking, single turn"),
    ("healthy", "chat_prompts_long.jsonl", "thinking, long"),
    ("short_trained", "chat_prompts_long.jsonl", "thinking, long"),
    ("healthy", "prompts.jsonl", "plain text"),
)
MAX_NEW_TOKENS = 40  # the plan, </think> and most of the answer (a response is about 55 tokens)
K = 3


def measure(demo: pathlib.Path) -> list[dict[str, object]]:
    from eagle3_forensics.probe.core import load_target, probe

    target = load_target(demo / "target", device="cpu")
    out: list[dict[str, object]] = []
    for drafter, prompts, setting in ROWS:
        r = probe(
            demo / "drafters" / drafter,
            target,
            demo / prompts,
            k=K,
            max_new_tokens=MAX_NEW_TOKENS,
            device="cpu",
            teacher_forced=False,
            sweep=False,
            threads=1,
        )
        d = r.to_dict()
        out.append(
            {
                "drafter": drafter,
                "prompts": prompts,
                "setting": setting,
                "acceptance_length": round(float(d["acceptance_length"]), 3),
                "per_position": [round(float(x), 3) for x in d["per_position"]["cumulative"]],
                "lossless": d["lossless"],
            }
        )
        print(f"{drafter:20} {prompts:26} {out[-1]['acceptance_length']}", file=sys.stderr, flush=True)
    return out


def table(rows: list[dict[str, object]]) -> str:
    base = {r["prompts"]: float(r["acceptance_length"]) for r in rows if r["drafter"] == "healthy"}  # type: ignore[arg-type]
    lines = [
        f"Acceptance length measured by `eagle3-forensics probe` (reference engine, K={K}, "
        f"{MAX_NEW_TOKENS} new tokens per prompt, fp32 CPU; every run lossless):",
        "",
        "| drafter | prompts | setting | acceptance length | per position (cumulative) | vs healthy |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        acc = float(r["acceptance_length"])  # type: ignore[arg-type]
        ref = base[str(r["prompts"])]
        drop = "—" if r["drafter"] == "healthy" else f"{acc - ref:+.3f} ({(acc - ref) / ref:+.0%})"
        pos = " / ".join(f"{x:.2f}" for x in r["per_position"])  # type: ignore[attr-defined]
        lines.append(f"| `{r['drafter']}` | `{r['prompts']}` | {r['setting']} | {acc:.3f} | {pos} | {drop} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("demo", nargs="?", default="data/demo")
    ap.add_argument("--json", help="also write the measurements here")
    args = ap.parse_args(argv)
    from eagle3_forensics.demo.readme import replace_acceptance

    demo = pathlib.Path(args.demo)
    rows = measure(demo)
    if not all(r["lossless"] for r in rows):
        print("a probe run was not lossless", file=sys.stderr)
        return 1
    replace_acceptance(demo / "README.md", table(rows))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
