"""Runs split across machines: ``run --shard I/N`` executes a slice, ``merge-runs`` joins the slices.

**Slicing.** The jobs (drafter × notebook) of the config — or of one of its ``pools`` with
``--shard POOL:I/N`` — are sorted by (drafter, notebook) and dealt round-robin: job *k* (from 0)
goes to shard ``k mod N`` (shards count from 0, as schedulers do: :mod:`eagle3_forensics.io.shard`). Round-robin spreads each notebook's jobs over the shards, so slow
notebooks do not pile up in one shard; the slice depends only on the config, never on the machine
or on timing, so any node computes the same split. A shard may be empty (N larger than the jobs).

**A part.** A shard writes its executed notebooks, HTML reports and record sidecars into its own
``--out`` directory, as a single run would, plus ``part.json`` (schema ``eagle3-forensics/run-part/2``):
the config's fingerprint, the shard, every job of the config, the jobs this shard ran, the run's
identity (name, notebooks, drafters, git, versions) and the per-job results before the gate. It
writes no ``index.html`` and no gate: those belong to the whole run.

**Merging.** :func:`merge_runs` checks the parts (same config fingerprint, same code, each pool's
shards exactly 0..N-1 once, every job run exactly once), copies their files into ``--out`` and
finishes the run through :func:`eagle3_forensics.runs.summary.finalize` — the same function a
single run ends with, so ``summary.json`` and ``index.html`` are the same as a single run's, apart
from the members in :data:`VOLATILE_TOP` / :data:`VOLATILE_RUN` / :data:`VOLATILE_METRICS`
(timings, machine, workers) and the ``<span class="v">`` parts of the index.
"""

from __future__ import annotations

import copy
import json
import platform
import re
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from eagle3_forensics.errors import BadArgumentsError, UnusableInputError, one_line
from eagle3_forensics.io.shard import MissingShardsError, Shard, missing_shards
from eagle3_forensics.io.shard import parse_shard as _parse
from eagle3_forensics.runs.config import DEFAULT_POOL, Job, RunConfig
from eagle3_forensics.runs.gate import check_run_records
from eagle3_forensics.runs.summary import (
    Finish,
    Finished,
    Log,
    contract_json,
    finalize,
    machine,
    to_stderr,
    write_atomic,
)

PART_SCHEMA = "eagle3-forensics/run-part/2"
# run-part/1 counted shards from 1; its parts cannot be merged with 0-based ones
OLD_PART_SCHEMAS = {"eagle3-forensics/run-part/1": "counts shards from 1 (an older release)"}
PART_FILE = "part.json"
VOLATILE_TOP = ("generated", "wall_s", "workers", "machine", "shards")
VOLATILE_RUN = ("duration_s", "attempts")
VOLATILE_METRICS = ("tokens_per_s", "speedup_vs_greedy")


def parse_shard(text: str) -> Shard:
    """``I/N`` or ``POOL:I/N`` with 0 ≤ I < N (the one convention, :mod:`eagle3_forensics.io.shard`)."""
    return _parse(text, pools=True)


def pool_jobs(config: RunConfig, pool: str | None) -> list[Job]:
    """The jobs a shard of ``pool`` slices (``None``: all of them)."""
    if pool is None:
        return list(config.jobs)
    known = [*config.pools, DEFAULT_POOL]
    if pool not in known:
        raise BadArgumentsError(
            f"--shard {pool}:…: the config has no pool {pool!r} (pools: {', '.join(known)})"
        )
    return [j for j in config.jobs if j.pool == pool]


def shard_jobs(config: RunConfig, shard: Shard) -> list[Job]:
    """The jobs of ``shard``: round-robin over the (pool's) jobs sorted by (drafter, notebook); in config order."""
    ordered = sorted(pool_jobs(config, shard.pool), key=lambda j: j.key)
    mine = {j.key for j in ordered[shard.index :: shard.count]}
    return [j for j in config.jobs if j.key in mine]


def write_part(
    out: Path,
    config: RunConfig,
    shard: Shard,
    jobs: Sequence[Job],
    runs: list[dict[str, Any]],
    meta: dict[str, Any],
    *,
    started: float,
    workers: int,
    argv: Sequence[str] | None = None,
) -> Path:
    """Write ``part.json`` for a shard's results (atomically: a killed shard leaves none); returns its path.

    ``argv``, the command line that made the shard, lets ``merge-runs`` say how to make a missing one.
    """
    failed = sum(r["status"] != "ok" for r in runs)
    part = {
        "schema": PART_SCHEMA,
        "fingerprint": config.fingerprint,
        "shard": shard.to_dict(),
        "jobs": [[j.drafter, j.notebook, j.pool] for j in config.jobs],
        "executed": [[j.drafter, j.notebook] for j in jobs],
        "meta": meta,
        "tolerance": config.tolerance,
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "wall_s": round(time.perf_counter() - started, 1),
        "workers": workers,
        "host": platform.node(),
        "machine": machine(),
        "ok": len(runs) - failed,
        "failed": failed,
        "runs": runs,
    }
    if argv:
        part["argv"] = [str(a) for a in argv]
    path = out / PART_FILE
    write_atomic(path, contract_json(part))
    return path


# -- merging ---------------------------------------------------------------------------------------


@dataclass
class Part:
    dir: Path
    data: dict[str, Any]

    @property
    def shard(self) -> Shard:
        s = self.data["shard"]
        return Shard(int(s["index"]), int(s["count"]), s.get("pool"))

    def __str__(self) -> str:
        return f"{self.dir} (shard {self.shard})"


def read_part(path: str | Path) -> Part:
    p = Path(path)
    d = p.parent if p.name == PART_FILE else p
    f = d / PART_FILE
    if not f.is_file():
        raise UnusableInputError(
            f"{d}: no {PART_FILE} — not the output of `eagle3-forensics run --shard I/N`", path=str(d)
        )
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UnusableInputError(f"unreadable {f}: {one_line(exc)[:200]}", path=str(f)) from None
    if not isinstance(data, dict) or data.get("schema") != PART_SCHEMA:
        schema = data.get("schema") if isinstance(data, dict) else None
        why = OLD_PART_SCHEMAS.get(str(schema))
        if why:
            raise UnusableInputError(
                f"{f}: schema {schema} {why}; re-run the shard with this release (shards count from 0)",
                path=str(f),
            )
        raise UnusableInputError(f"{f}: schema {schema!r}, expected {PART_SCHEMA!r}", path=str(f))
    try:
        if not all(type(data["shard"][k]) is int for k in ("index", "count")):
            raise ValueError("the shard is not I/N")
        if not 0 <= data["shard"]["index"] < data["shard"]["count"]:
            raise ValueError("the shard is not I/N with 0 ≤ I < N")
        argv = data.get("argv")
        if argv is not None and not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
            raise ValueError("argv is not a list of strings")
        if not isinstance(data["shard"].get("pool"), (str, type(None))):
            raise ValueError("the shard's pool is not a name")
        if not isinstance(data["fingerprint"], str):
            raise ValueError("the fingerprint is not a string")
        if not all(
            isinstance(j, list) and len(j) == 3 and all(isinstance(x, (str, type(None))) for x in j)
            for j in data["jobs"]
        ):
            raise ValueError("the job list is not [drafter, notebook, pool] triples")
        if not all(isinstance(e, list) and all(isinstance(x, str) for x in e) for e in data["executed"]):
            raise ValueError("the executed jobs are not [drafter, notebook] pairs")
        executed = [(str(d_), str(n)) for d_, n in data["executed"]]
        runs = check_run_records(data["runs"], str(f))
        tolerance = data.get("tolerance") or {}
        if not isinstance(tolerance, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in tolerance.values()
        ):
            raise ValueError("the tolerances are not numbers")
        if not all(isinstance(data.get(k, 0), (int, float)) for k in ("wall_s", "workers", "ok", "failed")):
            raise ValueError("wall_s, workers, ok and failed are not numbers")
        if not all(isinstance(data.get(k, ""), str) for k in ("generated", "host")):
            raise ValueError("generated and host are not strings")
        meta = data["meta"]
        if not isinstance(meta, dict) or not all(
            isinstance(meta.get(k), (str, type(None))) for k in ("name", "description", "config", "git")
        ):
            raise ValueError("meta is not an object of names")
        for names in ("notebooks", "drafters"):
            if not isinstance(meta.get(names, []), list) or not all(
                isinstance(x, str) for x in meta.get(names, [])
            ):
                raise ValueError(f"meta.{names} is not a list of names")
        if not isinstance(meta.get("versions", {}), dict):
            raise ValueError("meta.versions is not an object")
        if len(runs) != len(executed):
            raise ValueError("runs do not match the executed jobs")
        for r, key in zip(runs, executed, strict=True):
            if not isinstance(r, dict) or not isinstance(r.get("status"), str):
                raise ValueError("a run is not an object with a status")
            if (r.get("drafter"), r.get("notebook")) != key:
                raise ValueError(
                    f"run {r.get('drafter')} × {r.get('notebook')} is not the job {key[0]} × {key[1]}"
                )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UnusableInputError(f"{f} is damaged: {one_line(exc)[:200]}", path=str(f)) from None
    return Part(d.resolve(), data)


def check_parts(parts: Sequence[Part], unfinished: Sequence[Path] = ()) -> list[tuple[str, str]]:
    """Refuse parts that do not make exactly one run; returns the config's jobs in order.

    ``unfinished``: given directories without ``part.json`` (a shard killed or still running),
    named when shards are missing.
    """
    if not parts:
        if unfinished:
            raise UnusableInputError(
                f"merge-runs: no finished shard: {', '.join(map(str, unfinished))} have no {PART_FILE}"
            )
        raise BadArgumentsError("merge-runs: give the output directories of the shards")
    dirs: dict[Path, Part] = {}
    for p in parts:
        if p.dir in dirs:
            raise BadArgumentsError(f"merge-runs: {p.dir} given twice")
        dirs[p.dir] = p
    first = parts[0]
    for p in parts[1:]:
        if p.data["fingerprint"] != first.data["fingerprint"]:
            raise UnusableInputError(
                f"parts come from different run configs: {first} is config "
                f"{first.data['meta'].get('name')!r} (fingerprint {first.data['fingerprint']}), {p} is config "
                f"{p.data['meta'].get('name')!r} (fingerprint {p.data['fingerprint']})"
            )
        a, b = first.data["meta"].get("git"), p.data["meta"].get("git")
        if a and b and a != b:
            raise UnusableInputError(
                f"parts ran different code: {first} at git {a[:12]}, {p} at git {b[:12]}"
            )
    by_pool: dict[str | None, dict[int, Part]] = {}
    for p in parts:
        s = p.shard
        group = by_pool.setdefault(s.pool, {})
        other = next(iter(group.values()), None)
        if other is not None and other.shard.count != s.count:
            raise UnusableInputError(f"parts split {_pool(s.pool)} differently: {other} and {p}")
        if s.index in group:
            raise UnusableInputError(f"shard {s} given twice: {group[s.index].dir} and {p.dir}")
        group[s.index] = p
    for pool, group in by_pool.items():
        count = next(iter(group.values())).shard.count
        if len(group) < count:
            made = [(p.shard, p.data.get("argv")) for p in group.values()]
            missing = missing_shards(made, count)
            note = f"; unfinished (no {PART_FILE}): {', '.join(map(str, unfinished))}" if unfinished else ""
            reruns = [m["command"] for m in missing if m["command"]]
            raise MissingShardsError(
                f"missing shard{'s' if len(missing) > 1 else ''} {', '.join(str(m['shard']) for m in missing)} "
                f"of {_pool(pool)} (have {', '.join(str(Shard(i, count, pool)) for i in sorted(group))}){note}"
                + (f"; re-run: {reruns[0]}{' …' if len(reruns) > 1 else ''}" if reruns else ""),
                missing,
            )
    if unfinished:
        raise UnusableInputError(
            f"{', '.join(map(str, unfinished))}: no {PART_FILE} — not the output of a finished "
            "`eagle3-forensics run --shard I/N`"
        )
    jobs = [(str(d), str(n), str(pool)) for d, n, pool in first.data["jobs"]]
    ran: dict[tuple[str, str], Part] = {}
    for p in parts:
        for d, n in p.data["executed"]:
            if (d, n) in ran:
                raise UnusableInputError(f"job {d} × {n} ran in two parts: {ran[(d, n)]} and {p}")
            ran[(d, n)] = p
    not_run = [(d, n, pool) for d, n, pool in jobs if (d, n) not in ran]
    if not_run:
        pools = sorted({pool for _, _, pool in not_run})
        raise UnusableInputError(
            f"no part ran {len(not_run)} job(s) ({', '.join(f'{d} × {n}' for d, n, _ in not_run[:3])}"
            f"{', …' if len(not_run) > 3 else ''}): give the shards of pool {', '.join(pools)} "
            f"(`run --shard {pools[0]}:I/N`) or of the whole config (`run --shard I/N`)"
        )
    extra = set(ran) - {(d, n) for d, n, _ in jobs}
    if extra:
        d, n = sorted(extra)[0]
        raise UnusableInputError(f"job {d} × {n} is not in the config the parts were made from")
    return [(d, n) for d, n, _ in jobs]


def _pool(pool: str | None) -> str:
    return "the whole config" if pool is None else f"pool {pool!r}"


def _copy_files(part: Part, run: dict[str, Any], out: Path) -> None:
    for key in ("html", "executed_notebook", "record"):
        rel = run.get(key)
        if rel is None:
            continue
        pp = PurePosixPath(str(rel))
        if pp.is_absolute() or ".." in pp.parts or not str(rel):
            raise UnusableInputError(f"{part.dir / PART_FILE}: {key} {rel!r} is not a path inside the part")
        src = part.dir / str(rel)
        if not src.is_file():
            raise UnusableInputError(
                f"{part}: {rel} is missing (the part was copied incompletely?)", path=str(src)
            )
        dst = out / str(rel)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)


def merge_runs(
    paths: Sequence[str | Path],
    out_dir: str | Path,
    finish: Finish | None = None,
    *,
    say: Log = to_stderr,
) -> tuple[Finished, list[Part]]:
    """Merge shard outputs into one run in ``out_dir``: the reports, ``summary.json``, ``index.html``,
    the gate and, as asked, the history entry and the bundle."""
    started = time.perf_counter()
    finish = finish or Finish()
    parts: list[Part] = []
    unfinished: list[Path] = []
    for path in paths:
        d = Path(path)
        if d.is_dir() and not (d / PART_FILE).exists():
            unfinished.append(d)  # a shard killed mid-run (or still running): its shards are missing
        else:
            parts.append(read_part(path))
    order = check_parts(parts, unfinished)
    out = Path(out_dir).resolve()
    for p in parts:
        if out == p.dir:
            raise BadArgumentsError(f"merge-runs: --out {out} is one of the parts; give a new directory")
    tolerance = {str(k): float(v) for k, v in (parts[0].data.get("tolerance") or {}).items()}
    finish.check(tolerance)
    out.mkdir(parents=True, exist_ok=True)
    by_key: dict[tuple[str, str], dict[str, Any]] = {}
    for p in parts:
        for r in p.data["runs"]:
            _copy_files(p, r, out)
            by_key[(r["drafter"], r["notebook"])] = copy.deepcopy(r)
    runs = [by_key[k] for k in order]
    parts.sort(key=lambda p: (p.shard.pool or "", p.shard.index))
    meta = parts[0].data["meta"]
    shards = [
        {
            "shard": str(p.shard),
            "dir": str(p.dir),
            "jobs": len(p.data["executed"]),
            "failed": p.data.get("failed"),
            "wall_s": p.data.get("wall_s"),
            "workers": p.data.get("workers"),
            "host": p.data.get("host"),
            "generated": p.data.get("generated"),
        }
        for p in parts
    ]
    say(f"eagle3-forensics merge-runs: {len(parts)} part(s), {len(runs)} notebook runs -> {out}")
    slowest = max((float(p.data.get("wall_s") or 0) for p in parts), default=0.0)
    done = finalize(
        runs,
        meta,
        out,
        finish,
        tolerance=tolerance,
        started=started,
        workers=sum(int(p.data.get("workers") or 0) for p in parts),
        extra={"shards": shards},
        wall_offset=slowest,
        say=say,
    )
    return done, parts


# -- "identical, timings aside" ----------------------------------------------------------------------

_VOLATILE_SPAN = re.compile(r'<span class="v">[^<]*</span>')


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` without what differs between two runs of the same config on the same inputs:
    timings, the machine, the worker count, the shards, the history entry's name."""
    s = copy.deepcopy(summary)
    for k in VOLATILE_TOP:
        s.pop(k, None)
    if isinstance(s.get("history"), dict):
        s["history"].pop("entry", None)
    for r in s.get("runs") or []:
        for k in VOLATILE_RUN:
            r.pop(k, None)
        for k in VOLATILE_METRICS:
            (r.get("metrics") or {}).pop(k, None)
    return s


def comparable_html(page: str) -> str:
    """An index page with its volatile parts (``<span class="v">``: timings, workers, shards) blanked."""
    return _VOLATILE_SPAN.sub('<span class="v"></span>', page)


__all__ = [
    "OLD_PART_SCHEMAS",
    "PART_FILE",
    "PART_SCHEMA",
    "Part",
    "Shard",
    "check_parts",
    "comparable",
    "comparable_html",
    "merge_runs",
    "parse_shard",
    "read_part",
    "shard_jobs",
    "write_part",
]
