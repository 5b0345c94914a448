"""``eagle3-forensics merge``: combine the partial results of a sharded probe-offline or audit-data run.

The merged result is the one a single run gives, to the last digit: ``--out FILE`` writes exactly
what ``probe-offline --json`` / ``audit-data --json`` would have printed; stdout (``--json``) wraps
the same object in the ``merge`` schema.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from eagle3_forensics.cli.offline_common import read_partial, single_run_json, unusable_error, write_atomic
from eagle3_forensics.cli.output import emit_json
from eagle3_forensics.errors import BadArgumentsError
from eagle3_forensics.io.shard import MissingShardsError, Shard, missing_shards

COMMAND = "merge"


def merged_result(paths: list[str]) -> tuple[str, Any]:
    """``(command, result)`` of the partial files: an OfflineProbeResult or a DataAudit."""
    read = [read_partial(p) for p in paths]
    kinds = {c for c, _, _ in read}
    if len(kinds) != 1:
        raise BadArgumentsError(f"partial results of different commands: {', '.join(sorted(kinds))}")
    command = kinds.pop()
    check_missing(read)
    parts = [d for _, d, _ in read]
    if command == "probe-offline":
        from eagle3_forensics.probe.offline.counts import OfflineCounts, merge_counts  # heavy: torch
        from eagle3_forensics.probe.offline.result import finish_probe  # heavy: torch

        return command, finish_probe(merge_counts([OfflineCounts.from_dict(d) for d in parts]))
    from eagle3_forensics.checks.data.findings import finish_audit  # heavy: numpy, torch
    from eagle3_forensics.checks.data.merge import AuditScan, merge_scans  # heavy: numpy, torch

    return command, finish_audit(merge_scans([AuditScan.from_dict(d) for d in parts]))


def check_missing(read: list[tuple[str, dict[str, Any], list[str] | None]]) -> None:
    """Shards of one count of which some are absent: :class:`MissingShardsError` with the command
    lines that make them. (Everything else about the shards the merge itself checks.)"""
    made: list[tuple[Shard, list[str] | None]] = []
    try:
        for _, counts, argv in read:
            made += [(Shard(int(i), int(n)), argv) for i, n in counts["shards"]]
    except (KeyError, TypeError, ValueError):
        return  # a damaged partial: the merge says what is wrong with it
    counts_ = {s.count for s, _ in made}
    if len(counts_) != 1:
        return
    n = counts_.pop()
    missing = missing_shards(made, n)
    if missing:
        reruns = [m["command"] for m in missing if m["command"]]
        raise MissingShardsError(
            f"partial results do not cover shards 0..{n - 1} once: missing "
            + ", ".join(str(m["shard"]) for m in missing)
            + (f"; re-run: {reruns[0]}{' …' if len(reruns) > 1 else ''}" if reruns else ""),
            missing,
        )


def error_payload(args: argparse.Namespace, exc: BaseException) -> dict[str, Any] | None:
    """The members ``merge --json`` prints beside an error: the missing shards and how to make them."""
    if isinstance(exc, MissingShardsError):
        return {"missing": exc.missing}
    return None


def run(args: argparse.Namespace) -> int:
    from eagle3_forensics.views.offline import render_audit, render_offline_probe  # heavy: numpy, safetensors

    command, result = merged_result(args.parts)
    payload = result.to_dict()
    code = int(result.exit_code)
    error = unusable_error(result, payload["data" if command == "probe-offline" else "dir"])
    if args.out:
        write_atomic(args.out, single_run_json(command, payload, code, error))
    if args.json:
        emit_json(COMMAND, {"of": command, "parts": len(args.parts), "result": payload}, code, error)
    else:
        print(render_offline_probe(result) if command == "probe-offline" else render_audit(result))
    if error is not None:
        sys.stderr.write(f"eagle3-forensics: {error['message']}\n")
    return code


def add_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        COMMAND,
        help="combine the --shard partial results of probe-offline or audit-data into the single-run result",
        epilog="exit codes: those of the merged command; 2 when a partial is unreadable, missing or duplicated.",
    )
    p.add_argument(
        "parts", nargs="+", metavar="PART.json", help="partial results (every shard I/N exactly once)"
    )
    p.add_argument("--out", metavar="FILE", help="write the merged result as the single run's --json output")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.set_defaults(func=run, json_command=COMMAND, json_error_payload=error_payload)
