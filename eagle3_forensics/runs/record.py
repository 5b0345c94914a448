"""Machine-readable results from notebooks: a JSON sidecar the report runner reads back.

A notebook calls ``record("verdict", d.verdict())``; the value is added under its name to the
JSON object in the file named by the environment variable ``E3F_RECORD``. When the variable
is unset (an interactive session) nothing is written. The file needs no Jupyter to read, is
diff-able, and survives nbconvert.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ENV_VAR = "E3F_RECORD"


def record_path() -> Path | None:
    """The sidecar file this process records into, or ``None`` when recording is off."""
    value = os.environ.get(ENV_VAR, "").strip()
    return Path(value) if value else None


def read_records(path: str | Path) -> dict[str, Any]:
    """The recorded values in ``path`` ({} when the file does not exist)."""
    p = Path(path)
    if not p.exists():
        return {}
    data = json.loads(p.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{p} does not hold a JSON object of records")
    return data


def record(name: str, value: Any) -> None:
    """Add ``name: value`` to the sidecar named by ``$E3F_RECORD`` (a later call with the same name replaces it).

    ``value`` must be JSON-serialisable (``TypeError`` otherwise, even when recording is off,
    so a notebook that works interactively also works under the runner).
    """
    if not isinstance(name, str) or not name:
        raise ValueError("record name must be a non-empty string")
    try:
        encoded = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"record {name!r}: value is not JSON-serialisable ({exc})") from None
    path = record_path()
    if path is None:
        return
    data = read_records(path)
    data[name] = encoded
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# -- standard records the runner understands ---------------------------------------------------------


def finding_records(diagnosis: Any) -> list[dict[str, Any]]:
    """Every finding of a :class:`~eagle3_forensics.checks.diagnose.Diagnosis` as ``{code, severity, engine}``."""
    return [{"code": f.code, "severity": f.severity.value, "engine": f.engine} for f in diagnosis.findings]


def record_diagnosis(diagnosis: Any) -> None:
    """Record ``verdict``, ``verdicts`` (per engine, for the run index's drafter rows), ``counts``
    (by severity), ``codes`` and ``findings`` (code + severity + engine)."""
    record("verdict", diagnosis.verdict())
    record("verdicts", {str(e): diagnosis.verdict(e) for e in diagnosis.engines})
    record("counts", diagnosis.counts())
    record("codes", list(dict.fromkeys(f.code for f in diagnosis.findings)))
    record("findings", finding_records(diagnosis))


def acceptance_metrics(value: Any) -> dict[str, Any] | None:
    """The gateable probe metrics of a ``ProbeResult`` (or its ``to_dict()``, or this function's own
    output): acceptance length, per-position cumulative/conditional acceptance and the settings
    they were measured with. ``None`` when ``value`` holds no probe result."""
    if value is None:
        return None
    if hasattr(value, "to_dict") and not isinstance(value, dict):
        value = value.to_dict()
    if not isinstance(value, dict) or "acceptance_length" not in value:
        return None
    pp = value.get("per_position")
    if isinstance(pp, dict):
        cumulative, conditional = pp.get("cumulative"), pp.get("conditional")
    else:
        cumulative, conditional = pp, value.get("per_position_conditional")
    keys = (
        "engine",
        "k",
        "prompts",
        "max_new_tokens",
        "device",
        "lossless",
        "acceptance_rate",
        "tokens_per_s",
        "speedup_vs_greedy",
    )
    out: dict[str, Any] = {
        "acceptance_length": value["acceptance_length"],
        "per_position": list(cumulative or []),
        "per_position_conditional": list(conditional or []),
    }
    out.update({k: value[k] for k in keys if k in value})
    return out


def record_acceptance(result: Any, name: str = "acceptance") -> None:
    """Record a probe result's gateable metrics (see :func:`acceptance_metrics`); ``None`` records ``None``."""
    record(name, acceptance_metrics(result))


def record_triage(t: Any) -> None:
    """Record a :class:`~eagle3_forensics.views.triage.Triage`: the diagnosis (verdict, counts, codes, findings) and the acceptance metrics."""
    record_diagnosis(t.diagnosis)
    record_acceptance(t.probe)
    record("probe_note", t.probe_note)


def record_why(w: Any) -> None:
    """Record a :class:`~eagle3_forensics.views.why.WhyReport` (notebook 06): ``counts``, ``codes`` and
    ``findings`` of every source it read (diagnose for the engine served, the data audit, the server),
    the acceptance under the engine's view, and ``causes`` (the ranking) with ``cause_codes``.

    No ``verdict``: 06 judges one engine, so the gate must not read the codes it does not report (00's
    other engines) as findings that went away."""
    found = [*w.diagnosis.findings, *([] if w.audit is None else w.audit.findings), *w.server_findings]
    counts = {s: sum(1 for f in found if f.severity.value == s) for s in ("error", "warning", "info")}
    record("counts", counts)
    record("codes", list(dict.fromkeys(f.code for f in found)))
    record("findings", [{"code": f.code, "severity": f.severity.value, "engine": f.engine} for f in found])
    record_acceptance(None if w.measured is None else w.measured.served)
    record("causes", w.ranking.to_dict())
    record("cause_codes", w.ranking.codes)
    # the scale of a data cause's share of positions in acceptance length (the index shows both)
    record("trained_acceptance_length", w.trained_acceptance_length)
