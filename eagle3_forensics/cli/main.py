"""The ``eagle3-forensics`` command line (also ``python -m eagle3_forensics``).

Exit codes: 0 no error finding / success; 1 at least one error finding; 2 unusable input
or bad arguments (one line on stderr, never a traceback); 3 an internal error (a bug: please report).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import NoReturn

from eagle3_forensics.engines import ENGINE_NAMES
from eagle3_forensics.errors import EXIT_INTERNAL, EXIT_UNUSABLE, ForensicsError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {' '.join(message.split())}\n")
        raise SystemExit(EXIT_UNUSABLE)


def _print_json(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def cmd_diagnose(args: argparse.Namespace) -> int:
    from eagle3_forensics.checks.diagnose import diagnose
    from eagle3_forensics.views.text import render_diagnosis

    d = diagnose(args.path, target=args.target, engines=args.engine)
    if args.json:
        _print_json(d.to_dict())
    else:
        print(render_diagnosis(d))
    if d.unusable:
        sys.stderr.write(f"eagle3-forensics: {d.findings[0].message}\n")
    return d.exit_code


def cmd_inspect(args: argparse.Namespace) -> int:
    from eagle3_forensics.checks.diagnose import inspect_checkpoint
    from eagle3_forensics.views.text import render_inspection

    ins = inspect_checkpoint(args.path)
    if args.json:
        _print_json(ins.to_dict())
    else:
        print(render_inspection(ins))
    return 0


def cmd_make_demo(args: argparse.Namespace) -> int:
    from eagle3_forensics.demo.world import make_demo

    paths = make_demo(args.out, log=lambda msg: print(msg, file=sys.stderr, flush=True))
    for name, path in paths.items():
        print(f"{name:20} {path}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from eagle3_forensics.runs.runner import build_demo_report

    return build_demo_report(args.out, demo_dir=args.demo, timeout=args.timeout)


def cmd_run(args: argparse.Namespace) -> int:
    from eagle3_forensics.runs.runner import load_config, run

    config = load_config(args.config)
    return run(
        config,
        args.out,
        baseline=args.baseline,
        previous=args.previous,
        workers=args.workers,
        progress=not args.no_progress,
        write_baseline=args.write_baseline,
    )


def cmd_repair(args: argparse.Namespace) -> int:
    from eagle3_forensics.repair.core import RepairArgumentError, render_repair, repair

    trust = "t2d" if args.trust_t2d else "d2t" if args.trust_d2t else None
    try:
        result = repair(
            args.path,
            args.engine,
            args.out,
            target=args.target,
            rebuild_vocab_from=args.rebuild_vocab_from,
            trust=trust,
            dry_run=args.dry_run,
            force=args.force,
        )
    except RepairArgumentError as exc:
        if args.json:
            _print_json({"status": "unusable", "exit_code": EXIT_UNUSABLE, "message": str(exc)})
        sys.stderr.write(f"eagle3-forensics: {' '.join(str(exc).split())}\n")
        return EXIT_UNUSABLE
    if args.json:
        _print_json(result.to_dict())
    else:
        print(render_repair(result))
    if result.exit_code == EXIT_UNUSABLE:
        sys.stderr.write(f"eagle3-forensics: {' '.join(result.message.split())}\n")
    return result.exit_code


def cmd_probe(args: argparse.Namespace) -> int:
    from eagle3_forensics.probe.core import probe, render_probe

    result = probe(
        args.drafter,
        args.target,
        args.prompts,
        k=args.k,
        max_new_tokens=args.max_new_tokens,
        device=args.device,
        engine=args.engine,
        teacher_forced=not args.no_teacher_forced,
        sweep=not args.no_sweep,
    )
    if args.json:
        _print_json(result.to_dict())
    else:
        print(render_probe(result))
    return 0 if result.lossless else 1


def cmd_probe_server(args: argparse.Namespace) -> int:
    from eagle3_forensics.probe.server import probe_server, render_server_probe

    result = probe_server(
        args.url,
        args.engine,
        args.prompts,
        max_new_tokens=args.max_new_tokens,
        concurrency=args.concurrency,
        timeout=args.timeout,
        retries=args.retries,
        model=args.model,
        drafter=args.drafter,
        target=args.target,
        compare_with=args.compare_with,
        tolerance=args.tolerance,
    )
    if args.json:
        _print_json(result.to_dict())
    else:
        print(render_server_probe(result))
    if result.faulted:
        first = next(f for f in result.findings if f.code.startswith("SERVER_"))
        sys.stderr.write(f"eagle3-forensics: {first.code}: {' '.join(first.message.split())}\n")
    return result.exit_code


def cmd_vocab(args: argparse.Namespace) -> int:
    from eagle3_forensics.cli.vocab import run

    return run(args)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="eagle3-forensics", description="Forensic debugging of EAGLE-3 drafters.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    d = sub.add_parser("diagnose", help="run every static check on a drafter checkpoint")
    d.add_argument("path", help="drafter directory (config.json + weights)")
    d.add_argument("--target", help="target model directory for cross-checks")
    d.add_argument(
        "--engine", default="all", choices=[*ENGINE_NAMES, "all"], help="engine to simulate (default: all)"
    )
    d.add_argument("--json", action="store_true", help="print exactly one JSON object")
    d.set_defaults(func=cmd_diagnose)

    i = sub.add_parser("inspect", help="tensor table and detected format (header only)")
    i.add_argument("path")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=cmd_inspect)

    rp = sub.add_parser("repair", help="write an engine-ready copy of a drafter (never modifies the source)")
    rp.add_argument("path", help="drafter directory (read only)")
    rp.add_argument("--engine", required=True, choices=["sglang", "vllm"], help="engine to make it ready for")
    rp.add_argument("--out", required=True, help="output directory (must not exist unless --force)")
    rp.add_argument(
        "--target", help="target model directory (cross-checks; embedding when one must be shipped)"
    )
    rp.add_argument(
        "--rebuild-vocab-from",
        metavar="FILE",
        help="token ids (input_ids [+ loss_mask]) to rebuild d2t/t2d from when t2d cannot be trusted",
    )
    trust = rp.add_mutually_exclusive_group()
    trust.add_argument(
        "--trust-t2d", action="store_true", help="when d2t and t2d disagree, rebuild d2t from t2d"
    )
    trust.add_argument(
        "--trust-d2t", action="store_true", help="when d2t and t2d disagree, rebuild t2d from d2t"
    )
    rp.add_argument("--dry-run", action="store_true", help="print the plan; write nothing")
    rp.add_argument("--force", action="store_true", help="replace an existing --out")
    rp.add_argument("--json", action="store_true", help="print exactly one JSON object")
    rp.set_defaults(func=cmd_repair)

    m = sub.add_parser("make-demo", help="regenerate the deterministic demo drafters")
    m.add_argument("out", nargs="?", default="data/demo")
    m.set_defaults(func=cmd_make_demo)

    r = sub.add_parser("report", help="run notebook 01 over every demo drafter and write HTML reports")
    r.add_argument("--out", default="reports")
    r.add_argument("--demo", default="data/demo")
    r.add_argument("--timeout", type=int, default=300, help="per-notebook execution timeout (s)")
    r.set_defaults(func=cmd_report)

    ru = sub.add_parser(
        "run",
        help="execute the notebooks of a run config over its drafters: HTML reports, "
        "summary.json, index.html, regression gate",
    )
    ru.add_argument("--config", required=True, help="run configuration (YAML; see configs/demo.yaml)")
    ru.add_argument(
        "--out", required=True, help="output directory (index.html, summary.json, one HTML per run)"
    )
    ru.add_argument(
        "--baseline",
        help="gate baseline JSON (or a previous run's summary.json): exit 1 on a "
        "metric beyond tolerance, a new error finding or a failed notebook",
    )
    ru.add_argument(
        "--previous", help="a previous run's summary.json (or its directory) to show changes against"
    )
    ru.add_argument(
        "--workers", type=int, help="notebooks executed at once (default: the config's `workers`)"
    )
    ru.add_argument("--write-baseline", metavar="FILE", help="also write a baseline from this run's results")
    ru.add_argument("--no-progress", action="store_true", help="no progress bar")
    ru.set_defaults(func=cmd_run)

    pr = sub.add_parser(
        "probe",
        help="live speculative decoding with an EAGLE-3 drafter: acceptance, lossless "
        "check, speed, teacher-forced estimate, aux-layer sweep",
    )
    pr.add_argument("drafter", help="drafter directory (config.json + weights)")
    pr.add_argument("--target", required=True, help="target model directory (local Hugging Face causal LM)")
    pr.add_argument(
        "--prompts", required=True, help='.jsonl ({"prompt": ...} per line) or one prompt per line'
    )
    pr.add_argument("--k", type=int, default=3, help="draft tokens per cycle (default 3)")
    pr.add_argument("--max-new-tokens", type=int, default=64, help="new tokens per prompt (default 64)")
    pr.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cpu", "cuda"],
        help="auto: CUDA (bf16) when present, else the CPU (fp32)",
    )
    pr.add_argument(
        "--engine",
        default="reference",
        choices=["reference", *ENGINE_NAMES],
        help="load the drafter as its writer meant it (reference) or as this engine would",
    )
    pr.add_argument("--no-sweep", action="store_true", help="skip the aux-layer sweep")
    pr.add_argument("--no-teacher-forced", action="store_true", help="skip the teacher-forced estimate")
    pr.add_argument("--json", action="store_true", help="print exactly one JSON object")
    pr.set_defaults(func=cmd_probe)

    ps = sub.add_parser(
        "probe-server",
        help="accept-rate probe against a live vLLM or SGLang server (counters "
        "before/after, launch-settings check, gap to an in-process probe)",
        epilog="exit codes: 0 measured, no error finding; 1 an error finding (no speculative "
        "decoding, restart mid-run, engine gap beyond --tolerance, aux layers differ); "
        "2 bad arguments or input files; 4 the server could not be probed (refused, "
        "timed out, HTTP error, malformed answer).",
    )
    ps.add_argument("url", help="server base URL, e.g. http://127.0.0.1:8000")
    ps.add_argument("--engine", required=True, choices=["vllm", "sglang"], help="which engine serves URL")
    ps.add_argument(
        "--prompts", required=True, help='.jsonl ({"prompt": ...} per line) or one prompt per line'
    )
    ps.add_argument(
        "--max-new-tokens", type=int, default=64, help="new tokens per prompt, EOS ignored (default 64)"
    )
    ps.add_argument("--concurrency", type=int, default=1, help="requests in flight at once (default 1)")
    ps.add_argument("--timeout", type=float, default=60.0, help="seconds per HTTP request (default 60)")
    ps.add_argument(
        "--retries", type=int, default=3, help="extra attempts per request on transient faults (default 3)"
    )
    ps.add_argument("--model", help="vLLM: served model name (default: the first of /v1/models)")
    ps.add_argument(
        "--drafter",
        help="local drafter directory for the aux-layer/diagnose check (default: the path "
        "the server reports, when readable here)",
    )
    ps.add_argument("--target", help="local target directory for the aux-layer check (default: the server's)")
    ps.add_argument(
        "--compare-with",
        metavar="RESULT.json",
        help="an in-process `probe --json` result on the same prompts: report the engine gap per position",
    )
    ps.add_argument(
        "--tolerance",
        type=float,
        default=0.10,
        help="relative acceptance-length gap to --compare-with that is an error (default 0.10)",
    )
    ps.add_argument("--json", action="store_true", help="print exactly one JSON object")
    ps.set_defaults(func=cmd_probe_server)

    from eagle3_forensics.cli.vocab import (
        add_parser as add_vocab_parser,  # vocab classify | build | compare | coverage
    )

    add_vocab_parser(sub, _Parser)
    sub.choices["vocab"].set_defaults(func=cmd_vocab)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ForensicsError as exc:
        if getattr(args, "json", False) and args.command == "inspect":
            _print_json({"checkpoint": args.path, "error": str(exc)})
        sys.stderr.write(f"eagle3-forensics: {exc}\n")
        return int(exc.exit_code)
    except ValueError as exc:
        sys.stderr.write(f"eagle3-forensics: {' '.join(str(exc).split())}\n")
        return EXIT_UNUSABLE
    except KeyboardInterrupt:
        sys.stderr.write("eagle3-forensics: interrupted\n")
        return 130
    except Exception as exc:  # last resort: one line, never a traceback
        sys.stderr.write(
            f"eagle3-forensics: internal error ({type(exc).__name__}: {' '.join(str(exc).split())[:300]}); "
            "please report it\n"
        )
        return EXIT_INTERNAL
