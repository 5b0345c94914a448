"""The loader oracle: run each engine's real loader over the drafter corpus (one process per
engine release, in that engine's venv) and compare, drafter by drafter, with the project's
simulation under that release's table.

What is compared, per drafter (both sides reduced to the same vocabulary first):
  status  loads | rejected (the load raised) | refused (config, class or constructor failed)
  keys    each checkpoint key: used (it changed a parameter, at once or later) | dropped (it
          changed nothing) | rejected (the loader raised on it)
  params  each engine parameter after ``load_weights``: filled | partial | unfilled
          (only when both sides load)
  shared  whether the embedding / lm_head are then taken from the target (SGLang, vLLM)
  d2t     what ``d2t`` became: absent | offsets (target = i + d2t[i]) | absolute | ignored | rejected
A refused drafter is compared on its status only.

    .venv/bin/python tests/loaders/loader_oracle.py                 # everything: corpus, loaders, compare
    .venv/bin/python tests/loaders/loader_oracle.py --compare-only  # re-judge the stored loader results

``--compare-only`` needs no engine venv: it re-reads build/loaders/*.jsonl and the corpus, so a
table edit is judged in seconds. The tables judged are those of the eagle3_forensics the Python
imports: run this file with another checkout's ``.venv/bin/python`` to judge that checkout's
tables (``--results DIR`` reads stored loader results from elsewhere).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import loader_corpus
import loader_tables as tables

from eagle3_forensics.io.checkpoint import open_checkpoint

ROOT = Path(__file__).resolve().parents[2]
HARNESS = Path(__file__).resolve().parent / "harness"
BUILD = ROOT / "build"
WORK = BUILD / "loaders"
ORACLE_JSON = BUILD / "loader-oracle.json"
REPORT_TXT = BUILD / "loader-disagreements.txt"
MIN_DRAFTERS = 200
CAPTURE_LAYERS = 36


@dataclass(frozen=True)
class Run:
    """One engine release: which venv runs which harness."""

    engine: str
    venv_var: str  # environment variable that overrides the venv path
    venv_default: str  # relative to the repository root
    harness: str
    capture: bool = False  # also run SGLang's target-class aux-id conversion

    @property
    def venv(self) -> Path:
        return Path(os.environ.get(self.venv_var) or ROOT / self.venv_default)

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def label(self) -> str:
        return f"{self.engine}:{self.venv_default}"

    @property
    def results(self) -> Path:
        return WORK / f"{self.venv_default.lstrip('.')}.jsonl"

    @property
    def capture_results(self) -> Path:
        return WORK / f"{self.venv_default.lstrip('.')}.capture.json"


RUNS: tuple[Run, ...] = (
    Run("sglang", "E3F_LOADERS_SGLANG_VENV", ".venv-sglang", "sglang_loader.py", capture=True),
    Run("sglang", "E3F_LOADERS_SGLANG_OLD_VENV", ".venv-sglang-0.5.11", "sglang_loader.py", capture=True),
    Run("vllm", "E3F_LOADERS_VLLM_VENV", ".venv-engine", "vllm_loader.py"),
    Run("speculators", "E3F_LOADERS_SPECULATORS_VENV", ".venv-speculators", "speculators_loader.py"),
)


# -- one vocabulary for both sides -------------------------------------------------------------

USED_ACTIONS = frozenset({"loaded", "renamed", "fused", "overwritten", "consumed"})
DROPPED_ACTIONS = frozenset({"skipped", "dropped", "warned"})


@dataclass
class Outcome:
    status: str
    keys: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    shared: dict[str, bool] = field(default_factory=dict)
    d2t: str = "absent"
    detail: str = ""
    attributed: bool = True  # False: the loader failed as a whole and named only some keys (speculators)
    # simulated only: the table says the load fails unless uninitialised memory happens to be valid,
    # so a real load that succeeds agrees too (speculators without t2d)
    may_load: bool = False


@dataclass(frozen=True)
class Difference:
    drafter: str
    channel: str  # status | key | param | shared | d2t | harness
    item: str
    real: str
    simulated: str

    def line(self) -> str:
        return f"{self.drafter}  {self.channel} {self.item}: real {self.real} / simulated {self.simulated}"


def real_outcome(result: dict[str, Any], exclude_params: Collection[str] = ()) -> Outcome:
    """A harness's JSON line in the shared vocabulary."""
    status = {
        "loaded": "loads",
        "rejected": "rejected",
        "config_error": "refused",
        "class_error": "refused",
        "build_error": "refused",
    }.get(result.get("status", ""), "harness_error")
    first_rejection = next(
        (v.get("error", "") for v in result.get("per_key", {}).values() if v.get("effect") == "rejected"), ""
    )
    out = Outcome(
        status, detail=str(result.get("error") or result.get("full_load_error") or first_rejection or "")
    )
    if status in ("refused", "harness_error"):
        return out
    effect = {"changed": "used", "deferred": "used", "dropped": "dropped", "rejected": "rejected"}
    out.keys = {k: effect.get(v["effect"], v["effect"]) for k, v in result.get("per_key", {}).items()}
    out.attributed = bool(result.get("per_key_complete", True))
    out.params = {n: p["fate"] for n, p in result.get("per_param", {}).items() if n not in exclude_params}
    share = result.get("serving_share") or {}
    out.shared = {
        part: bool(share[f"{part}_from_target"])
        for part in ("embed", "lm_head")
        if f"{part}_from_target" in share
    }
    d2t = result.get("d2t") or {}
    if not d2t.get("present"):
        out.d2t = "absent"
    elif out.keys.get("d2t") == "rejected":
        out.d2t = "rejected"
    elif d2t.get("equals_i_plus_d2t"):
        out.d2t = "offsets"
    elif d2t.get("equals_d2t_raw"):
        out.d2t = "absolute"
    elif d2t.get("engine_targets"):
        out.d2t = "other"
    else:
        out.d2t = "ignored"
    return out


def simulated_outcome(table: Any, drafter: Path) -> tuple[Outcome, set[str]]:
    """The project's simulation of the same load, in the shared vocabulary, and the parameters
    that stand for ``d2t`` in the simulated class (compared as ``d2t``, not as parameters)."""
    ckpt = open_checkpoint(drafter)
    exclude = tables.d2t_destinations(table, ckpt)
    report = tables.simulate(table, ckpt)
    refused = tables.refusal(report)
    if refused is not None:
        return Outcome("refused", detail=refused), exclude
    keys: dict[str, str] = {}
    filled: set[str] = set()
    for fate in report.fates:
        if fate.action in USED_ACTIONS:
            keys[fate.key] = "used"
            if fate.param:
                filled.add(fate.param)
        elif fate.action in DROPPED_ACTIONS:
            keys[fate.key] = "dropped"
        else:
            keys[fate.key] = fate.action
    # After load_weights a parameter holds checkpoint data or not, whatever happens to it next
    # (a target copy, a default): that next step is the ``shared`` channel.
    every = (filled | tables.parameters(report)) - exclude
    halves = tables.partial(report)
    params = {n: ("partial" if n in halves else "filled" if n in filled else "unfilled") for n in every}
    from_target = tables.shared_from_target(report)
    shared = {
        "embed": any("embed_tokens" in n for n in from_target),
        "lm_head": any(n.startswith("lm_head") for n in from_target),
    }
    if "d2t" not in keys:
        d2t = "absent"
    elif keys["d2t"] == "used":
        d2t = tables.d2t_encoding(report, table)
    else:
        d2t = "rejected" if keys["d2t"] == "rejected" else "ignored"
    status = "rejected" if "rejected" in keys.values() or tables.load_failed(report) else "loads"
    may_load = "rejected" not in keys.values() and tables.load_failure_by_chance(report)
    return Outcome(status, keys, params, shared, d2t, may_load=may_load), exclude


def compare(drafter: str, real: Outcome, sim: Outcome) -> list[Difference]:
    """Every way the real load and the simulation disagree on one drafter."""
    if real.status == "harness_error":
        return [Difference(drafter, "harness", "error", real.detail[:300], "-")]
    diffs: list[Difference] = []
    if sim.may_load and real.status == "loads":
        sim = replace(sim, status="loads")
    if real.status != sim.status:
        detail = f"{real.status} ({real.detail[:160]})" if real.detail else real.status
        sim_detail = f"{sim.status} ({sim.detail[:160]})" if sim.detail else sim.status
        diffs.append(Difference(drafter, "status", "load", detail, sim_detail))
    if "refused" in (real.status, sim.status):
        return diffs
    if not real.attributed:  # only the keys the loader named can be compared
        diffs += [
            Difference(drafter, "key", k, v, sim.keys.get(k, "absent"))
            for k, v in sorted(real.keys.items())
            if v != sim.keys.get(k, "absent")
        ]
        return diffs
    for k in sorted(set(real.keys) | set(sim.keys)):
        a, b = real.keys.get(k, "absent"), sim.keys.get(k, "absent")
        if a != b:
            diffs.append(Difference(drafter, "key", k, a, b))
    if real.d2t != sim.d2t:
        diffs.append(Difference(drafter, "d2t", "d2t", real.d2t, sim.d2t))
    if real.status == sim.status == "loads":
        for n in sorted(set(real.params) | set(sim.params)):
            a, b = real.params.get(n, "absent"), sim.params.get(n, "absent")
            if a != b:
                diffs.append(Difference(drafter, "param", n, a, b))
        for part in sorted(real.shared):
            if real.shared[part] != sim.shared.get(part):
                diffs.append(
                    Difference(
                        drafter,
                        "shared",
                        f"{part} from target",
                        str(real.shared[part]).lower(),
                        str(sim.shared.get(part)).lower(),
                    )
                )
    return diffs


# -- one engine release ------------------------------------------------------------------------


@dataclass
class EngineReport:
    name: str
    release: str
    table: str
    drafters: int
    agree: int
    harness_errors: int
    seconds: float | None
    differences: list[Difference]

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "release": self.release,
            "drafters": self.drafters,
            "agree": self.agree,
            "table": self.table,
            "harness_errors": self.harness_errors,
            "loader_seconds": self.seconds,
        }


def read_results(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def release_of(results: Iterable[dict[str, Any]]) -> str:
    versions = {str(r["version"]).split("+")[0] for r in results if r.get("version")}
    if len(versions) != 1:
        raise AssertionError(f"the harness reported {sorted(versions) or 'no'} engine versions")
    return versions.pop()


def judge(
    engine: str, results: list[dict[str, Any]], corpus: Path, seconds: float | None = None
) -> EngineReport:
    release = release_of(results)
    table = tables.table_for(engine, release)
    diffs: list[Difference] = []
    agree = errors = 0
    for r in results:
        sim, exclude = simulated_outcome(table, corpus / r["drafter"])
        real = real_outcome(r, exclude)
        errors += real.status == "harness_error"
        found = compare(r["drafter"], real, sim)
        agree += not found
        diffs.extend(found)
    return EngineReport(
        engine, release, tables.table_label(table), len(results), agree, errors, seconds, diffs
    )


@dataclass
class CaptureReport:
    name: str
    release: str
    architectures: int
    agree: int
    not_evaluable: list[str]
    differences: list[Difference]

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "release": self.release,
            "architectures": self.architectures,
            "agree": self.agree,
            "not_evaluable": self.not_evaluable,
        }


def judge_capture(engine: str, capture: dict[str, Any]) -> CaptureReport:
    """SGLang's real ``set_eagle3_layers_to_capture`` per target class against the table's rule."""
    release = str(capture["version"])
    table = tables.table_for(engine, release)
    n = int(capture["n_layers"])
    samples: dict[str, list[int] | None] = capture["samples"]
    diffs: list[Difference] = []
    skipped: list[str] = []
    agree = 0
    for row in capture["classes"]:
        arch = row["architecture"]
        results = row["results"]
        if any(
            isinstance(res.get("capture"), list) and res["capture"][:1] == ["passed_through"]
            for res in results.values()
        ):
            skipped.append(f"{arch}: hands the ids to an external model ({row['defined_in']})")
            continue
        found = []
        for label, ids in samples.items():
            res = results.get(label, {})
            real = res.get("capture") if "error" not in res else f"error: {res['error']}"
            predicted = tables.capture_prediction(table, arch, ids, n)
            if real != predicted:
                found.append(Difference(arch, "capture", f"{label} {ids}", str(real), str(predicted)))
        agree += not found
        diffs.extend(found)
    evaluated = len(capture["classes"]) - len(skipped)
    return CaptureReport(engine, release, evaluated, agree, skipped, diffs)


# -- reports ---------------------------------------------------------------------------------


def patterns(diffs: list[Difference], examples: int = 4) -> list[dict[str, Any]]:
    """Differences grouped by (channel, item, real, simulated): what a table fix addresses."""
    groups: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
    for d in diffs:
        real = d.real if d.channel != "status" else d.real.split(" (")[0]
        sim = d.simulated if d.channel != "status" else d.simulated.split(" (")[0]
        groups[(d.channel, d.item, real, sim)].append(d.drafter)
    rows = [
        {"channel": c, "item": i, "real": r, "simulated": s, "drafters": len(ds), "examples": ds[:examples]}
        for (c, i, r, s), ds in groups.items()
    ]
    return sorted(rows, key=lambda x: (-x["drafters"], x["channel"], x["item"]))


def render_text(engines: list[EngineReport], captures: list[CaptureReport], corpus: Path) -> str:
    manifest = {e["name"]: e for e in json.loads((corpus / "manifest.json").read_text())}
    out = ["# make test-loaders: real loaders vs eagle3_forensics' simulation", ""]
    for rep in engines:
        out.append(
            f"## {rep.name} {rep.release}: {rep.agree}/{rep.drafters} drafters agree "
            f"(table: {rep.table}; harness errors: {rep.harness_errors})"
        )
    for cap in captures:
        out.append(
            f"## {cap.name} {cap.release} set_eagle3_layers_to_capture: {cap.agree}/{cap.architectures} "
            f"target architectures agree ({len(cap.not_evaluable)} not evaluable)"
        )
    for rep in engines:
        if not rep.differences:
            continue
        out += [
            "",
            f"=== {rep.name} {rep.release}: difference patterns (count, channel item: real / simulated)",
        ]
        for p in patterns(rep.differences):
            out.append(
                f"{p['drafters']:5d}  {p['channel']} {p['item']}: real {p['real']} / simulated {p['simulated']}"
                f"   e.g. {', '.join(p['examples'])}"
            )
        out += ["", f"=== {rep.name} {rep.release}: every difference, by drafter"]
        by_drafter: dict[str, list[Difference]] = defaultdict(list)
        for d in rep.differences:
            by_drafter[d.drafter].append(d)
        for name, ds in by_drafter.items():
            entry = manifest.get(name, {})
            out.append(
                f"-- {name} ({entry.get('kind', '?')} {json.dumps(entry.get('opts', {}), sort_keys=True)})"
            )
            out += [f"     {d.channel} {d.item}: real {d.real} / simulated {d.simulated}" for d in ds]
    for cap in captures:
        if not cap.differences:
            continue
        out += ["", f"=== {cap.name} {cap.release}: aux-id capture (architecture, sample ids: real / table)"]
        out += [f"  {d.drafter}  {d.item}: real {d.real} / table {d.simulated}" for d in cap.differences]
    return "\n".join(out) + "\n"


def write_reports(
    engines: list[EngineReport],
    captures: list[CaptureReport],
    corpus: Path,
    extra: dict[str, Any] | None = None,
    out: Path | None = None,
) -> dict[str, Any]:
    """build/loader-oracle.json and build/loader-disagreements.txt (or the same names under ``out``)."""
    doc: dict[str, Any] = {
        "engines": [r.summary() for r in engines],
        "capture": [c.summary() for c in captures],
        "corpus": {"drafters": len(list(loader_corpus_dirs(corpus))), "path": str(corpus)},
        **(extra or {}),
        "patterns": {f"{r.name}=={r.release}": patterns(r.differences) for r in engines if r.differences},
        "differences": {f"{r.name}=={r.release}": [asdict(d) for d in r.differences] for r in engines},
        "capture_differences": {
            f"{c.name}=={c.release}": [asdict(d) for d in c.differences] for c in captures
        },
    }
    oracle_json, report_txt = (
        (ORACLE_JSON, REPORT_TXT) if out is None else (out / ORACLE_JSON.name, out / REPORT_TXT.name)
    )
    oracle_json.parent.mkdir(parents=True, exist_ok=True)
    _write(oracle_json, json.dumps(doc, indent=1) + "\n")
    _write(report_txt, render_text(engines, captures, corpus))
    return doc


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def loader_corpus_dirs(corpus: Path) -> Iterable[Path]:
    return (p for p in sorted(corpus.iterdir()) if (p / "config.json").is_file())


# -- running the loaders ---------------------------------------------------------------------


class LoaderEnvMissing(RuntimeError):
    pass


def run_loader(run: Run, corpus: Path, timeout: int = 1200) -> float:
    """Run one engine release's harness over the corpus in its own venv; returns its wall time."""
    if not run.python.is_file():
        raise LoaderEnvMissing(f"{run.venv} does not exist: run `make loaders-env` (or set {run.venv_var})")
    scratch = WORK / "scratch" / run.venv_default.lstrip(".")
    scratch.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "TMPDIR": str(scratch),
        "HARNESS_SCRATCH": str(scratch),
        "PYTHONHASHSEED": "0",
        "OMP_NUM_THREADS": "1",
    }
    env.pop("PYTHONPATH", None)  # the engine venv imports nothing from this checkout
    t0 = time.perf_counter()
    cmd = [str(run.python), str(HARNESS / run.harness), "--batch", str(corpus), "--out", str(run.results)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{run.label} harness failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    if run.capture:
        cmd = [str(run.python), str(HARNESS / run.harness), "--capture", "--layers", str(CAPTURE_LAYERS)]
        proc = subprocess.run(
            [*cmd, "--out", str(run.capture_results)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{run.label} capture failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t0


def run_all(corpus: Path, runs: tuple[Run, ...] = RUNS, jobs: int | None = None) -> dict[str, float]:
    """Every engine release, ``jobs`` at a time (default: E3F_LOADERS_JOBS, else 2)."""
    jobs = jobs or int(os.environ.get("E3F_LOADERS_JOBS", "2"))
    missing = [r for r in runs if not r.python.is_file()]
    if missing:
        raise LoaderEnvMissing(
            "missing loader venvs: " + ", ".join(str(r.venv) for r in missing) + " (run `make loaders-env`)"
        )
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {r.label: pool.submit(run_loader, r, corpus) for r in runs}
        return {label: round(f.result(), 1) for label, f in futures.items()}


def judge_all(
    corpus: Path, runs: tuple[Run, ...] = RUNS, seconds: dict[str, float] | None = None
) -> tuple[list[EngineReport], list[CaptureReport]]:
    engines, captures = [], []
    for run in runs:
        results = read_results(run.results)
        engines.append(judge(run.engine, results, corpus, (seconds or {}).get(run.label)))
        if run.capture:
            captures.append(judge_capture(run.engine, json.loads(run.capture_results.read_text())))
    return engines, captures


def main(argv: list[str] | None = None) -> int:
    global WORK
    ap = argparse.ArgumentParser(description="Real engine loaders vs the project's simulation.")
    ap.add_argument("--compare-only", action="store_true", help="re-judge the stored loader results")
    ap.add_argument("--results", type=Path, help="read stored results (corpus/, *.jsonl) from this directory")
    ap.add_argument("--out", type=Path, help="write the two reports here (default: build/)")
    ap.add_argument("--fuzz", type=int, default=loader_corpus.DEFAULT_FUZZ)
    a = ap.parse_args(argv)
    if a.results:
        WORK = a.results.resolve()
    corpus = WORK / "corpus"
    t0 = time.perf_counter()
    seconds: dict[str, float] = {}
    if not a.compare_only:
        loader_corpus.write_corpus(corpus, fuzz=a.fuzz)
        seconds = run_all(corpus)
    engines, captures = judge_all(corpus, seconds=seconds)
    timing = {"loaders": seconds, "total": round(time.perf_counter() - t0, 1)}
    out = a.out.resolve() if a.out else None
    write_reports(engines, captures, corpus, {"seconds": timing}, out=out)
    print(
        "\n".join(
            line for line in render_text(engines, captures, corpus).splitlines() if line.startswith("## ")
        )
    )
    print(f"details: {(out or BUILD) / ORACLE_JSON.name}, {(out or BUILD) / REPORT_TXT.name}")
    ok = all(r.agree == r.drafters for r in engines) and all(c.agree == c.architectures for c in captures)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
