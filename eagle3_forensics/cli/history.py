"""``eagle3-forensics history DIR``: the acceptance series and finding changes of a run history.

``DIR`` is a ``run --history DIR`` directory. Text: per drafter × notebook that measured
acceptance, one line per run (time, git SHA, status, acceptance length, per-position acceptance,
error count); then the findings that appeared or went away and the run in which they did; then
the entries that were skipped as unusable (they never make the command fail). ``--json``: one
object (schema ``eagle3-forensics/history/1``) with ``entries``, ``series``, ``findings_changes``
and ``warnings``. Exit codes: 0; 2 when DIR is not a history directory, ``--last`` is below 1 or
``--drafter`` names a drafter no usable entry ran.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from eagle3_forensics.cli.output import emit_json
from eagle3_forensics.errors import BadArgumentsError, ForensicsError, UnusableInputError
from eagle3_forensics.runs.history import read_history, trend

COMMAND = "history"


def add_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser(
        COMMAND,
        help="acceptance per drafter over the runs kept by `run --history DIR`, and the findings that "
        "appeared or went away",
    )
    p.add_argument("dir", help="the history directory (`run --history DIR`)")
    p.add_argument("--last", type=int, default=30, metavar="N", help="only the last N runs (default 30)")
    p.add_argument("--drafter", metavar="NAME", help="only this drafter")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.set_defaults(func=run, json_command=COMMAND)
    return p


def history_data(directory: str, last: int, drafter: str | None) -> dict[str, Any]:
    if last < 1:
        raise BadArgumentsError(f"--last must be at least 1, got {last}")
    d = Path(directory)
    if not d.is_dir():
        raise UnusableInputError(f"no history directory {d} (`run --history DIR` creates one)", path=str(d))
    hist = read_history(d)
    if drafter is not None and not any(r["drafter"] == drafter for e in hist.entries for r in e.runs):
        known = sorted({r["drafter"] for e in hist.entries for r in e.runs})
        raise BadArgumentsError(
            f"--drafter {drafter}: no usable entry in {d} ran it (drafters: {', '.join(known) or 'none'})"
        )
    data = trend(hist, last, drafter)
    data["drafter"] = drafter
    return data


def render_text(data: dict[str, Any]) -> str:
    labels = {e["id"]: f"{e['time']}  {(e.get('git') or '-')[:7]:7}" for e in data["entries"]}
    skipped = len(data["warnings"])
    lines = [
        f"history {data['directory']}: {data['total_entries']} usable run(s)"
        + (f", {skipped} entr{'y' if skipped == 1 else 'ies'} skipped" if skipped else "")
        + f"; the last {len(data['entries'])} shown"
        + (f"; drafter {data['drafter']}" if data.get("drafter") else "")
    ]
    measured = [s for s in data["series"] if s["measured"]]
    for s in measured:
        lines += ["", f"{s['drafter']} · {s['notebook']}"]
        lines.append(f"  {'run (UTC)':19}  {'git':7}  {'status':6}  {'AL':>6}  per position        errors")
        for p in s["points"]:
            al = "–" if p["acceptance_length"] is None else f"{p['acceptance_length']:.3f}"
            pp = " / ".join(f"{v:.2f}" for v in p["per_position"] or []) or "–"
            err = "–" if p["errors"] is None else str(p["errors"])
            lines.append(f"  {labels.get(p['entry'], p['entry'])}  {p['status']:6}  {al:>6}  {pp:18}  {err}")
    others = len(data["series"]) - len(measured)
    if not measured:
        lines += ["", "no run measured acceptance (no probe notebook ran)"]
    if others:
        lines.append(f"\n({others} drafter × notebook series without acceptance measurements: see --json)")
    lines += ["", "findings that appeared or went away:"]
    if not data["findings_changes"]:
        lines.append("  none")
    for c in data["findings_changes"]:
        lines.append(
            f"  {labels.get(c['entry'], c['entry'])}  {c['drafter']}  {c['code']}  {c['change']}"
            f"  ({', '.join(c['notebooks'])})"
        )
    if data["warnings"]:
        lines += ["", "skipped entries:"]
        lines += [f"  {w['file']}: {w['message']}" for w in data["warnings"]]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        data = history_data(args.dir, args.last, args.drafter)
    except ForensicsError as exc:
        if args.json:
            emit_json(COMMAND, None, int(exc.exit_code), exc)
        sys.stderr.write(f"eagle3-forensics: {exc}\n")
        return int(exc.exit_code)
    if args.json:
        emit_json(COMMAND, data, 0)
    else:
        print(render_text(data))
        for w in data["warnings"]:
            sys.stderr.write(f"eagle3-forensics: warning: history entry {w['file']}: {w['message']}\n")
    return 0


__all__ = ["add_parser", "history_data", "render_text", "run"]
