"""``eagle3-forensics vocab classify|build|compare|coverage``: the command bodies.

``add_parser`` registers the ``vocab`` command with :mod:`eagle3_forensics.cli.main`. Every command prints one JSON object with
``--json``, or a few readable lines. Exit codes: ``classify`` 0 when the map is consistent, 1
when not (or when an error-level VOCAB_SPECIAL_TOKENS_MISSING is found with ``--target``); ``compare`` 0 when both maps select the same ids, 1 when they differ (like ``cmp``);
``build`` and ``coverage`` 0; 2 for unusable input or bad arguments (raised as ``UnusableInputError``/
``BadArgumentsError`` and turned into one stderr line, and with ``--json`` one JSON object, by ``cli.main``).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

from eagle3_forensics.cli.output import emit_json
from eagle3_forensics.errors import BadArgumentsError, ExitCode, UnusableInputError

MAX_VOCAB = 1 << 24
"""The largest target vocabulary ``vocab build`` accepts (real ones stay below 300k)."""


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def classify(args: argparse.Namespace) -> int:
    from eagle3_forensics.vocab.inputs.maps import lm_head_row_check, load_mapping  # heavy: numpy, torch
    from eagle3_forensics.vocab.mapping.compare import mapping_fingerprint  # heavy: numpy, torch
    from eagle3_forensics.vocab.mapping.convert import suggest_d2t_fix  # heavy: numpy, torch

    m = load_mapping(args.path, args.target)
    res = m.classify()
    fix = suggest_d2t_fix(m.d2t, m.t2d, m.target_vocab_size, m.draft_vocab_size)
    try:
        sel, src = m.selected()
        selection: dict[str, Any] = {
            "from": src,
            "size": int(sel.shape[0]),
            "fingerprint": mapping_fingerprint(m.target_vocab_size or 0, sel),
        }
    except (ValueError, UnusableInputError) as exc:
        selection = {"error": str(exc)}
    check = None
    if args.target is not None and m.source == "checkpoint":
        check = lm_head_row_check(args.path, args.target, required=False)
    special, findings = _special_tokens(args, m)
    bad = any(f.severity.value == "error" for f in findings)
    code = ExitCode.OK if res.consistent and not bad else ExitCode.FINDINGS
    if args.json:
        extra: dict[str, Any] = {}
        if special is not None:
            extra = {"special_tokens": special, "findings": [f.to_dict() for f in findings]}
        emit_json(
            "vocab-classify",
            {
                **extra,
                "path": str(args.path),
                "source": m.source,
                "consistent": res.consistent,
                "classification": res.evidence(),
                "meaning": res.meaning,
                "fix": fix.to_dict(),
                "selection": selection,
                "lm_head_check": None if check is None else check.to_dict(),
            },
            code,
        )
    else:
        print(f"{args.path}: {m.source}, V={m.target_vocab_size} v={m.draft_vocab_size}")
        print(f"kind: {res.kind} ({res.meaning})")
        if res.agreement:
            print(
                "agreement with nonzero(t2d): "
                + ", ".join(f"{k} {_pct(v)}" for k, v in res.agreement.items())
            )
        if res.first_bad_index is not None:
            print(f"first wrong draft id: {res.first_bad_index}; wrong runs: {res.bad_runs}")
        for p in res.t2d_problems + res.d2t_problems:
            print(f"problem: {p}")
        if fix.needed:
            via = f" (eagle3_forensics.vocab.mapping.{fix.function})" if fix.function else ""
            after = f" -> verified {fix.verified_kind}" if fix.verified_kind else ""
            print(f"fix: {fix.action}{via}{after}")
        if "fingerprint" in selection:
            print(f"selection ({selection['from']}): {selection['fingerprint']}")
        if check is not None:
            names = {
                "offsets": "d2t read as offsets",
                "absolute": "d2t read as absolute ids",
                "double_offset": "d2t read as double offsets",
                "t2d": "nonzero(t2d)",
                "identity": "the identity (no map)",
            }
            best = names.get(check.best or "", "no candidate that stands out")
            print(
                f"lm_head rows ({check.method}): the head matches {best}; "
                f"what engines use confirmed: {check.d2t_confirmed}"
            )
        if special is not None:
            share = special["share_of_positions"].get("structural")
            cost = f", {_pct(share)} of the loss-masked positions" if share is not None else ""
            print(
                f"structural tokens: {special['structural']}, missing {special['missing_count']}{cost}; "
                f"byte pieces: {special['byte_pieces']}, missing {special['missing_bytes']}"
            )
            for f in findings:
                print(f"{f.severity.value}: {f.code}: {f.message}")
    return code


def _special_tokens(args: argparse.Namespace, m: Any) -> tuple[dict[str, Any] | None, list[Any]]:
    """VOCAB_SPECIAL_TOKENS_MISSING with ``--target`` (its tokenizer), costed with ``--ids``."""
    if args.target is None:
        if args.ids is not None:
            raise UnusableInputError("--ids needs --target (the structural tokens come from its tokenizer)")
        return None, []
    from eagle3_forensics.checks.special_tokens import special_token_findings  # heavy: numpy
    from eagle3_forensics.vocab.inputs.tokens import iter_token_chunks  # heavy: numpy, torch
    from eagle3_forensics.vocab.special import (  # heavy: numpy
        add_data_cost,
        generation_eos_ids,
        special_coverage,
        target_chat,
    )

    chat = target_chat(args.target)
    if chat is None:
        if args.ids is not None:
            raise UnusableInputError(f"--ids needs the target's tokenizer.json ({args.target} has none)")
        return None, []
    try:
        mask = m.t2d_mask
    except (ValueError, UnusableInputError):
        return None, []  # which ids are selected is unknown: the classification says why
    cov = special_coverage(mask, chat, generation_eos_ids(args.target))
    if args.ids is not None:
        add_data_cost(cov, iter_token_chunks(args.ids))
    return cov.to_dict(), special_token_findings(cov)


def build(args: argparse.Namespace) -> int:
    from eagle3_forensics.vocab.inputs.corpus import tokenize_corpus  # heavy: numpy, torch
    from eagle3_forensics.vocab.inputs.maps import save_mapping  # heavy: numpy, torch
    from eagle3_forensics.vocab.inputs.tokens import build_vocab_mapping_from_file  # heavy: numpy, torch
    from eagle3_forensics.vocab.mapping.build import build_vocab_mapping  # heavy: numpy, torch

    if Path(args.out).suffix.lower() not in (".safetensors", ".pt"):
        raise UnusableInputError(f"--out {args.out} must end in .safetensors or .pt")
    if args.target_vocab_size > MAX_VOCAB:  # (0 and below: the API names the problem)
        raise BadArgumentsError(
            f"--target-vocab-size {args.target_vocab_size} is not in 1..{MAX_VOCAB} (the counts take 8 bytes per id)"
        )
    if args.ids is not None:
        source = str(args.ids)
        mapping = build_vocab_mapping_from_file(
            args.ids, args.draft_vocab_size, args.target_vocab_size, args.tie_break, progress=args.progress
        )
    else:
        if args.tokenizer is None:
            raise UnusableInputError("--corpus needs --tokenizer (the target's tokenizer directory)")
        source = str(args.corpus)
        tc = tokenize_corpus(args.corpus, args.tokenizer, chat_template=args.chat_template)
        mapping = build_vocab_mapping(
            tc.pairs,
            args.draft_vocab_size,
            args.target_vocab_size,
            tie_break=args.tie_break,
            progress=args.progress,
            total_tokens=tc.tokens,
        )
    summary = mapping.summary()
    out = save_mapping(mapping, args.out, {**summary, "source": Path(source).name})
    if args.json:
        emit_json("vocab-build", {"out": str(out), "source": source, **summary}, ExitCode.OK)
    else:
        print(f"wrote {out}: d2t int64 [{mapping.draft_vocab_size}], t2d bool [{mapping.target_vocab_size}]")
        print(
            f"counted {summary['counted_tokens']} tokens (loss_mask == 1) of {summary['tokens']} ids read, "
            f"{summary['distinct_ids']} distinct; tie-break {args.tie_break}; "
            f"the selection covers {_pct(mapping.coverage)} of the counted tokens"
        )
        print(f"fingerprint: {summary['fingerprint']}")
    return ExitCode.OK


def compare(args: argparse.Namespace) -> int:
    from eagle3_forensics.vocab.inputs.maps import load_mapping  # heavy: numpy, torch
    from eagle3_forensics.vocab.mapping.compare import compare_mappings  # heavy: numpy, torch

    a = load_mapping(args.a, args.target)
    b = load_mapping(args.b, args.target)
    if (
        a.target_vocab_size is not None
        and b.target_vocab_size is not None
        and (a.target_vocab_size != b.target_vocab_size)
    ):
        sys.stderr.write(
            f"eagle3-forensics: warning: different target vocabularies "
            f"({a.target_vocab_size} vs {b.target_vocab_size})\n"
        )
    cmp = compare_mappings(a, b, labels=(str(args.a), str(args.b)))
    code = ExitCode.OK if cmp.identical else ExitCode.FINDINGS
    if args.json:
        emit_json("vocab-compare", cmp.to_dict(limit=args.limit), code)
    else:
        d = cmp.to_dict(limit=args.limit)
        for side in ("a", "b"):
            s = d[side]
            print(
                f"{side}: {s['label']}: V={s['target_vocab_size']} v={s['draft_vocab_size']} {s['kind']}, "
                f"selection from {s['selection_from']}, {s['fingerprint']}"
            )
        print(
            f"common ids {cmp.common}, jaccard {cmp.jaccard:.3f}, only in a {d['only_in_a']['count']}, "
            f"only in b {d['only_in_b']['count']}; d2t tensors equal: {cmp.d2t_equal}"
        )
        for side in ("a", "b"):
            ids = d[f"only_in_{side}"]["ids"]
            if ids:
                print(f"only in {side} (first {len(ids)}): {ids}")
        print(cmp.headline())
    return code


def coverage(args: argparse.Namespace) -> int:
    from eagle3_forensics.vocab.coverage import corpus_coverage  # heavy: numpy, torch

    if args.corpus is not None and args.tokenizer is None and args.target is None:
        raise UnusableInputError("--corpus needs --tokenizer or --target (the target's tokenizer directory)")
    report = corpus_coverage(
        args.path,
        ids=args.ids,
        corpus=args.corpus,
        tokenizer=args.tokenizer,
        target=args.target,
        top_n=args.top,
        chat_template=args.chat_template,
    )
    if args.json:
        emit_json("vocab-coverage", report.to_dict(), ExitCode.OK)
        return ExitCode.OK
    print(f"{args.path}: v={report.draft_vocab_size} of V={report.target_vocab_size}")
    print(
        f"covers {report.covered} of {report.total} counted tokens: {_pct(report.coverage)} "
        f"(best possible with v={report.draft_vocab_size} on this corpus: {_pct(report.oracle)})"
    )
    print(f"{report.selected_unseen} draft ids never occur in this corpus")
    for row in report.by_class:
        if row["tokens"]:
            print(f"  {row['class']:14} {_pct(row['coverage']):>7} of {row['tokens']} tokens")
    if report.top_uncovered:
        print("most frequent uncovered tokens:")
        for row in report.top_uncovered:
            text = repr(row["text"]) if "text" in row else ""
            print(f"  {row['id']:>8} {row['count']:>10} {_pct(row['share']):>7} {text}")
    return ExitCode.OK


COMMANDS = {"classify": classify, "build": build, "compare": compare, "coverage": coverage}


def run(args: argparse.Namespace) -> int:
    """Run one ``vocab`` subcommand; warnings become one stderr line each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = COMMANDS[args.vocab_command](args)
    for w in caught:
        sys.stderr.write(f"eagle3-forensics: warning: {' '.join(str(w.message).split())}\n")
    return code


def add_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """The ``vocab`` parser block (called from :func:`eagle3_forensics.cli.main.build_parser`)."""
    v = sub.add_parser("vocab", help="vocabulary-map forensics: classify, build, compare, coverage")
    vs = v.add_subparsers(dest="vocab_command", required=True, parser_class=parser_class)
    where = "drafter directory / weights file, or a map file (.safetensors/.pt/.npz with d2t/t2d, or a d2t.npy dir)"

    c = vs.add_parser("classify", help="classify d2t/t2d and show the evidence and the fix (exit 1 if wrong)")
    c.add_argument("path", help=where)
    c.add_argument(
        "--target",
        help="target model directory: vocabulary size, the lm_head row check and (with its tokenizer) "
        "the structural tokens the draft vocabulary must hold",
    )
    c.add_argument(
        "--ids",
        help="token ids of the training data (.safetensors/.pt/.npz with input_ids + loss_mask, or .npy): "
        "what the missing structural tokens and byte pieces cost (needs --target)",
    )
    c.add_argument("--json", action="store_true", help="print exactly one JSON object")
    c.set_defaults(json_command="vocab-classify")

    b = vs.add_parser("build", help="build d2t/t2d from token counts the way the trainers do")
    src = b.add_mutually_exclusive_group(required=True)
    src.add_argument("--ids", help="token ids: .safetensors/.pt/.npz with input_ids (+ loss_mask), or .npy")
    src.add_argument(
        "--corpus", help="JSONL of texts, prompt/completion pairs or conversations (needs --tokenizer)"
    )
    b.add_argument("--tokenizer", help="directory with the target's tokenizer.json (and chat template)")
    b.add_argument("--chat-template", help="Jinja chat template file, overriding the tokenizer's")
    b.add_argument("--draft-vocab-size", type=int, required=True, help="v")
    b.add_argument("--target-vocab-size", type=int, required=True, help="V")
    b.add_argument(
        "--tie-break",
        default="id",
        choices=["id", "first_seen", "first_row"],
        help="id: speculators; first_seen: EAGLE; first_row: SpecForge (default: id)",
    )
    b.add_argument("--out", required=True, help="output .safetensors (or .pt) with d2t and t2d")
    b.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar (default: only for long inputs)",
    )
    b.add_argument("--json", action="store_true", help="print exactly one JSON object")
    b.set_defaults(json_command="vocab-build")

    m = vs.add_parser("compare", help="compare two maps: sizes, Jaccard, ids only in one, fingerprints")
    m.add_argument("a", help=where)
    m.add_argument("b", help=where)
    m.add_argument("--target", help="target model directory (vocabulary size when a map lacks t2d)")
    m.add_argument("--limit", type=int, default=50, help="ids listed per side (default 50)")
    m.add_argument("--json", action="store_true", help="print exactly one JSON object")
    m.set_defaults(json_command="vocab-compare")

    g = vs.add_parser("coverage", help="share of a corpus's tokens inside the draft vocabulary")
    g.add_argument("path", help=where)
    csrc = g.add_mutually_exclusive_group(required=True)
    csrc.add_argument(
        "--ids", help="token ids tokenised by the target tokenizer (.safetensors/.pt/.npy/.npz)"
    )
    csrc.add_argument(
        "--corpus", help="JSONL corpus (tokenised with --tokenizer or the --target's tokenizer)"
    )
    g.add_argument("--tokenizer", help="directory with tokenizer.json (token strings and classes)")
    g.add_argument("--target", help="target model directory (vocabulary size, tokenizer)")
    g.add_argument("--chat-template", help="Jinja chat template file, overriding the tokenizer's")
    g.add_argument("--top", type=int, default=20, help="most frequent uncovered tokens to list (default 20)")
    g.add_argument("--json", action="store_true", help="print exactly one JSON object")
    g.set_defaults(json_command="vocab-coverage")
    v.set_defaults(func=run)
