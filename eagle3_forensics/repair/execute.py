"""``repair``: write an engine-ready copy of a drafter from its plan, never touching the original.

``repair(src, engine, out)`` plans (:func:`~eagle3_forensics.repair.plan.repair_plan`) and then
writes the plan:

* ``src`` is only ever read;
* everything is written into ``.<DST name>.tmp-<pid>-<random>`` beside ``DST``, fsynced, diagnosed
  again for the engine (any error: the temporary directory is removed, exit 1) and only then renamed
  into place; an existing ``DST`` is refused unless ``force``;
* tensors that are not changed are copied bit-exactly (checked by sha256 of their raw bytes);
* ``repair.json`` records every step, the sha256 of every changed tensor before and after, the tool
  version and a fingerprint of the source;
* a repair that dies part-way (even ``kill -9``) leaves at most its temporary directory beside
  ``DST``, never a ``DST``; the next repair to that ``DST`` removes temporary directories whose
  process is gone.

Exit codes (:attr:`RepairResult.exit_code`): 0 repaired and verified (or, with ``dry_run``, a plan
that would be carried out); 1 refused or not verified (nothing at ``DST``); 2 unusable input or bad
arguments.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import struct
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from eagle3_forensics import __version__
from eagle3_forensics.checks.aux_measured import MeasuredAux
from eagle3_forensics.checks.diagnose import Diagnosis, diagnose
from eagle3_forensics.engines import resolve_release
from eagle3_forensics.errors import ExitCode, UnusableInputError
from eagle3_forensics.findings import Severity
from eagle3_forensics.io.checkpoint import CONFIG_FILE, SAFETENSORS_FILE, Checkpoint
from eagle3_forensics.repair.plan.planner import check_engine, check_trust, repair_plan
from eagle3_forensics.repair.plan.result import RECORD_FILE, RepairArgumentError, RepairPlan
from eagle3_forensics.repair.policy import REPAIRABLE_ENGINES

RECORD_VERSION = 1
PAUSE_ENV = "E3F_REPAIR_TEST_PAUSE"
"""Test hook: seconds to sleep after the weights are written and before the config, the verification
and the rename. Lets a test kill the process part-way; never set it otherwise."""


@dataclass
class RepairResult:
    """The outcome of :func:`repair`: status, exit code, the plan, and the verification of DST."""

    status: str  # repaired | dry-run | refused | not-verified | unusable
    exit_code: int
    message: str
    plan: RepairPlan | None
    dest: str | None = None
    verification: Diagnosis | None = None
    record: dict[str, Any] | None = None
    # the confirm step (repair --target): live acceptance before and after, under the engine
    confirm: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        verification = None
        if self.verification is not None and self.plan is not None:
            engine = self.plan.engine
            verification = {
                "engine": engine,
                "errors": [
                    f.to_dict()
                    for f in self.verification.findings
                    if f.severity is Severity.ERROR and f.engine in (None, engine)
                ],
                "warnings": [
                    f.code
                    for f in self.verification.findings
                    if f.severity is Severity.WARNING and f.engine in (None, engine)
                ],
                "verdict": self.verification.verdict(engine),
            }
        return {
            "status": self.status,
            "exit_code": self.exit_code,
            "message": self.message,
            "dest": self.dest,
            "plan": self.plan.to_dict() if self.plan is not None else None,
            "verification": verification,
            "record": self.record,
            **({"confirm": self.confirm} if self.confirm is not None else {}),
        }


# -- hashing ------------------------------------------------------------------------------------------

_CHUNK = 1 << 24


def tensor_sha256(t: torch.Tensor) -> str:
    """sha256 of a tensor's raw little-endian bytes (what safetensors stores)."""
    t = t.detach().cpu().contiguous()
    h = hashlib.sha256()
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy().data)
    return h.hexdigest()


def scan_safetensors(file: str | Path) -> tuple[str, int, dict[str, str]]:
    """(file sha256, file size, tensor name -> sha256 of its raw bytes), in one sequential read."""
    path = Path(file)
    with path.open("rb") as fh:
        head8 = fh.read(8)
        if len(head8) < 8:
            raise UnusableInputError(f"safetensors file truncated: {path}", path=str(path))
        (n,) = struct.unpack("<Q", head8)
        header = fh.read(n)
        try:
            meta = json.loads(header)
        except ValueError:
            raise UnusableInputError(f"unreadable safetensors header: {path}", path=str(path)) from None
        file_h = hashlib.sha256(head8)
        file_h.update(header)
        spans = sorted(
            (int(v["data_offsets"][0]), int(v["data_offsets"][1]), k)
            for k, v in meta.items()
            if k != "__metadata__"
        )
        hashers = {k: hashlib.sha256() for _, _, k in spans}
        first, pos = 0, 0
        while True:
            chunk = fh.read(_CHUNK)
            if not chunk:
                break
            file_h.update(chunk)
            view = memoryview(chunk)
            end = pos + len(chunk)
            j = first
            while j < len(spans) and spans[j][0] < end:
                b, e, name = spans[j]
                lo, hi = max(b, pos), min(e, end)
                if lo < hi:
                    hashers[name].update(view[lo - pos : hi - pos])
                j += 1
            while first < len(spans) and spans[first][1] <= end:
                first += 1
            pos = end
    return file_h.hexdigest(), path.stat().st_size, {k: h.hexdigest() for k, h in hashers.items()}


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _source_hashes(ckpt: Checkpoint) -> tuple[dict[str, Any], dict[str, str]]:
    """(fingerprint of config + weight files, tensor name -> raw sha256)."""
    files: dict[str, Any] = {}
    tensors: dict[str, str] = {}
    cfg = ckpt.path / CONFIG_FILE
    if cfg.is_file():
        files[CONFIG_FILE] = {"bytes": cfg.stat().st_size, "sha256": _file_sha256(cfg)}
    for shard in sorted({t.shard for t in ckpt.tensors.values()}):
        p = ckpt.path / shard
        if ckpt.weight_format.startswith("safetensors"):
            digest, size, per = scan_safetensors(p)
            tensors.update({k: v for k, v in per.items() if k in ckpt.tensors})
        else:
            digest, size = _file_sha256(p), p.stat().st_size
            for name, info in ckpt.tensors.items():
                if info.shard == shard:
                    tensors[name] = tensor_sha256(ckpt.read_tensor(name))
        files[shard] = {"bytes": size, "sha256": digest}
    return {"files": files}, tensors


# -- execution ----------------------------------------------------------------------------------------


def _fsync_path(path: Path, directory: bool = False) -> None:
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        fd = os.open(str(path), flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


_TEMP_RE = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)-[0-9a-f]+$")


def stale_temp_dirs(dest: str | Path) -> list[Path]:
    """Temporary directories beside ``dest`` left by repairs whose process is gone."""
    d = Path(dest)
    parent = d.parent
    if not parent.is_dir():
        return []
    out = []
    for p in parent.iterdir():
        m = _TEMP_RE.match(p.name)
        if m and m.group("name") == d.name and not _pid_alive(int(m.group("pid"))):
            out.append(p)
    return sorted(out)


def clean_stale_temp_dirs(dest: str | Path) -> list[str]:
    """Remove what :func:`stale_temp_dirs` finds; returns the removed paths."""
    removed = []
    for p in stale_temp_dirs(dest):
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                p.unlink()
        removed.append(str(p))
    return removed


def _test_pause() -> None:
    value = os.environ.get(PAUSE_ENV)
    if not value:
        return
    try:
        seconds = float(value)
    except ValueError:
        return
    time.sleep(max(0.0, min(seconds, 600.0)))


def _resolve_dirs(src: str | Path, dest: str | Path) -> tuple[Path, Path]:
    s = Path(src)
    src_dir = (s.parent if s.is_file() else s).resolve()
    d = Path(dest).absolute()
    d_res = d.resolve()
    if d_res == src_dir or src_dir in d_res.parents or d_res in src_dir.parents:
        raise RepairArgumentError(
            f"the output {dest} must not be the source, inside it, or contain it "
            "(repair never modifies the source)"
        )
    return src_dir, d


def _write_weights(plan: RepairPlan, tmp: Path) -> dict[str, str]:
    """Write ``model.safetensors``; returns output name -> sha256 of the bytes planned for it."""
    ckpt = plan._ckpt
    assert ckpt is not None
    out_file = tmp / SAFETENSORS_FILE
    copy_whole = (
        not plan.tensors_changed
        and ckpt.weight_format == "safetensors"
        and {t.shard for t in ckpt.tensors.values()} <= {SAFETENSORS_FILE}
    )
    if copy_whole:
        shutil.copyfile(ckpt.path / SAFETENSORS_FILE, out_file)
        return {}
    metadata: dict[str, str] = {}
    if ckpt.weight_format.startswith("safetensors"):
        first = sorted({t.shard for t in ckpt.tensors.values()})[0]
        with safe_open(str(ckpt.path / first), framework="pt") as fh:
            metadata = dict(fh.metadata() or {})
    metadata.setdefault("format", "pt")
    tensors: dict[str, torch.Tensor] = {}
    new_hashes: dict[str, str] = {}
    for name in sorted(plan._planned):
        p = plan._planned[name]
        if p.data is not None:
            t = p.data.contiguous()
            new_hashes[name] = tensor_sha256(t)
        else:
            assert p.source is not None
            t = ckpt.read_tensor(p.source)
            if not ckpt.weight_format.startswith("safetensors"):
                t = t.clone()  # .bin tensors can share storage; save_file refuses shared tensors
            t = t.contiguous()
        tensors[name] = t
    save_file(tensors, str(out_file), metadata=metadata)
    return new_hashes


def _write_json(path: Path, obj: Any) -> None:
    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _commit(tmp: Path, dest: Path, force: bool) -> None:
    parent = dest.parent
    if dest.exists() or dest.is_symlink():
        if not force:
            raise RepairArgumentError(f"{dest} exists; pass --force to replace it")
        old = parent / f".{dest.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
        os.rename(dest, old)
        try:
            os.rename(tmp, dest)
        except BaseException:
            os.rename(old, dest)
            raise
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink()
    else:
        os.rename(tmp, dest)
    _fsync_path(parent, directory=True)


def _tensor_changes(
    plan: RepairPlan, src_hashes: dict[str, str], new_hashes: dict[str, str]
) -> tuple[list[dict[str, Any]], int]:
    changes: list[dict[str, Any]] = []
    kept_sources = set()
    unchanged = 0
    for name in sorted(plan._planned):
        p = plan._planned[name]
        entry: dict[str, Any] = {"name": name, "shape": list(p.info.shape), "dtype": p.info.dtype}
        if p.data is not None:
            before = src_hashes.get(name)
            entry.update(
                change="rewritten" if name in src_hashes else "added",
                sha256_before=before,
                sha256_after=new_hashes.get(name),
            )
            changes.append(entry)
        else:
            assert p.source is not None
            kept_sources.add(p.source)
            if p.source != name:
                h = src_hashes.get(p.source)
                entry.update(change="renamed", source=p.source, sha256_before=h, sha256_after=h)
                changes.append(entry)
            else:
                unchanged += 1
    for name in sorted(src_hashes):
        if name not in kept_sources and name not in plan._planned:
            changes.append(
                {"name": name, "change": "removed", "sha256_before": src_hashes[name], "sha256_after": None}
            )
    return changes, unchanged


def execute(plan: RepairPlan, dest: str | Path, *, force: bool = False) -> RepairResult:
    """Carry out a ready plan into ``dest`` (temporary directory, verification, rename)."""
    if not plan.ok or plan._ckpt is None:
        return _refused(plan)
    ckpt = plan._ckpt
    _, d = _resolve_dirs(ckpt.path, dest)
    if (d.exists() or d.is_symlink()) and not force:
        raise RepairArgumentError(f"{dest} exists; pass --force to replace it")
    d.parent.mkdir(parents=True, exist_ok=True)
    cleaned = clean_stale_temp_dirs(d)
    tmp = d.parent / f".{d.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir()
    display = _display(plan)
    try:
        fingerprint, src_hashes = _source_hashes(ckpt)
        new_hashes = _write_copy(plan, ckpt, tmp)
        verification = diagnose(tmp, target=plan.target, engines=[plan.spec or plan.engine])
        why = _not_verified(plan, verification, tmp, src_hashes, new_hashes)
        if why:
            shutil.rmtree(tmp, ignore_errors=True)
            return RepairResult(
                "not-verified",
                ExitCode.FINDINGS,
                f"the repaired drafter did not verify for {display}, so nothing was left at {dest}: {why}",
                plan,
                None,
                verification,
            )
        record = _record(plan, ckpt, d, tmp, fingerprint, src_hashes, new_hashes, verification, cleaned)
        _write_json(tmp / RECORD_FILE, record)
        _fsync_path(tmp, directory=True)
        _commit(tmp, d, force)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    verification.checkpoint = str(dest)
    n = len(plan.steps)
    msg = (
        f"repaired for {display} and verified: {n} step(s) applied; diagnose --engine {plan.spec or plan.engine} finds no "
        f"error in {dest}"
        if n
        else f"already ready for {display}: copied to {dest} unchanged and verified (no error)"
    )
    return RepairResult("repaired", ExitCode.OK, msg, plan, str(dest), verification, record)


def _write_copy(plan: RepairPlan, ckpt: Checkpoint, tmp: Path) -> dict[str, str]:
    """Write the planned weights, the config and the copied files into ``tmp``; the new tensors' hashes."""
    new_hashes = _write_weights(plan, tmp)
    _fsync_path(tmp / SAFETENSORS_FILE)
    _test_pause()
    cfg_path = tmp / CONFIG_FILE
    if plan.config_changed:
        _write_json(cfg_path, plan.config_after)
    else:
        shutil.copyfile(ckpt.path / CONFIG_FILE, cfg_path)
        _fsync_path(cfg_path)
    for name in plan.files_copied:
        shutil.copyfile(ckpt.path / name, tmp / name)
        _fsync_path(tmp / name)
    return new_hashes


def _not_verified(
    plan: RepairPlan,
    verification: Diagnosis,
    tmp: Path,
    src_hashes: dict[str, str],
    new_hashes: dict[str, str],
) -> str:
    """Why the written copy is not what was planned (an error finding left, bytes that differ), or ``""``."""
    errors = [
        f for f in verification.findings if f.severity is Severity.ERROR and f.engine in (None, plan.engine)
    ]
    _, _, out_hashes = scan_safetensors(tmp / SAFETENSORS_FILE)
    mismatched = []
    for name, p in plan._planned.items():
        want = new_hashes.get(name) if p.data is not None else src_hashes.get(p.source or "")
        if want is not None and out_hashes.get(name) != want:
            mismatched.append(name)
    if set(out_hashes) != set(plan._planned):
        mismatched.append("(tensor set differs from the plan)")
    return "; ".join(
        [f"{f.code}: {f.message}" for f in errors]
        + ([f"bytes differ from the plan for {', '.join(mismatched[:5])}"] if mismatched else [])
    )


def _previous_repairs(ckpt: Checkpoint) -> list[dict[str, Any]]:
    """The source's own repair record and the ones before it (a repaired drafter repaired again)."""
    prev_path = ckpt.path / RECORD_FILE
    if prev_path.is_file():
        with contextlib.suppress(OSError, ValueError):
            prev = json.loads(prev_path.read_text(encoding="utf-8"))
            return [
                *(prev.get("previous_repairs") or []),
                {k: v for k, v in prev.items() if k != "previous_repairs"},
            ]
    return []


def _record(
    plan: RepairPlan,
    ckpt: Checkpoint,
    d: Path,
    tmp: Path,
    fingerprint: dict[str, Any],
    src_hashes: dict[str, str],
    new_hashes: dict[str, str],
    verification: Diagnosis,
    cleaned: list[str],
) -> dict[str, Any]:
    """The repair record written beside the copy (``RECORD_FILE``): what was done, from what, verified how."""
    changes, unchanged = _tensor_changes(plan, src_hashes, new_hashes)
    return {
        "record_version": RECORD_VERSION,
        "tool": "eagle3-forensics",
        "tool_version": __version__,
        "created_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "engine": plan.engine,
        "engine_release": plan.release,
        "engine_revision": resolve_release(plan.spec or plan.engine).revision,
        "source": {
            "path": str(ckpt.path.resolve()),
            "format": plan.diagnosis.format if plan.diagnosis else None,
            "weight_format": ckpt.weight_format,
            "fingerprint": fingerprint,
        },
        "destination": str(d),
        "options": plan.options,
        "steps": [s.to_dict() for s in plan.steps],
        "coverage": plan.coverage,
        "tensors": {
            "changed": changes,
            "unchanged": unchanged,
            "copied_bit_exact": sum(1 for p in plan._planned.values() if p.data is None),
        },
        "config": {
            "changed": plan.config_changed,
            "sha256_before": fingerprint["files"].get(CONFIG_FILE, {}).get("sha256"),
            "sha256_after": _file_sha256(tmp / CONFIG_FILE),
        },
        "files_copied": plan.files_copied,
        "files_not_copied": plan.files_not_copied,
        "verification": {
            "engine": plan.engine,
            "errors": [],
            "warnings": sorted(
                {
                    f.code
                    for f in verification.findings
                    if f.severity is Severity.WARNING and f.engine in (None, plan.engine)
                }
            ),
            "verdict": verification.verdict(plan.engine),
        },
        "stale_temp_dirs_removed": cleaned,
        "previous_repairs": _previous_repairs(ckpt),
    }


def _display(plan: RepairPlan) -> str:
    rules = resolve_release(plan.spec or plan.engine)
    return f"{rules.display} ({plan.release or rules.release})"


def _refused(plan: RepairPlan) -> RepairResult:
    if plan.unusable is not None:
        return RepairResult("unusable", ExitCode.UNUSABLE, plan.unusable, plan)
    display = _display(plan)
    lines = [r.text() for r in plan.refusals]
    return RepairResult(
        "refused",
        ExitCode.FINDINGS,
        f"refused: this drafter cannot be made ready for {display}; nothing was written. " + " ".join(lines),
        plan,
    )


def repair(
    src: str | Path,
    engine: str,
    out: str | Path,
    *,
    target: str | Path | None = None,
    rebuild_vocab_from: str | Path | None = None,
    trust: str | None = None,
    dry_run: bool = False,
    force: bool = False,
    measured_aux: MeasuredAux | None = None,
) -> RepairResult:
    """Plan and (unless ``dry_run``) write an engine-ready copy of ``src`` at ``out``.

    ``measured_aux``: the aux layers measured on the target (:mod:`eagle3_forensics.probe.aux_trained`);
    the copy pins them where they beat the config's ids (or the engine's fallback) beyond the noise.

    Never modifies ``src``. Raises :class:`RepairArgumentError` (a ``ValueError``) for bad arguments:
    an engine other than sglang/vllm, ``out`` equal to / inside / containing ``src``, an existing ``out``
    without ``force``, or ``trust`` together with ``rebuild_vocab_from``.
    """
    check_engine(engine)
    check_trust(trust, rebuild_vocab_from)
    _resolve_dirs(src, out)
    o = Path(out)
    if (o.exists() or o.is_symlink()) and not force:
        raise RepairArgumentError(f"{out} exists; pass --force to replace it")
    plan = repair_plan(
        src,
        engine,
        target=target,
        rebuild_vocab_from=rebuild_vocab_from,
        trust=trust,
        measured_aux=measured_aux,
    )
    if not plan.ok:
        return _refused(plan)
    if dry_run:
        display = _display(plan)
        return RepairResult(
            "dry-run",
            ExitCode.OK,
            f"dry run: {len(plan.steps)} step(s) would make {src} ready for {display} at {out}; "
            "nothing was written",
            plan,
            str(out),
        )
    return execute(plan, out, force=force)


def repair_overview(
    src: str | Path,
    *,
    target: str | Path | None = None,
    engines: tuple[str, ...] = REPAIRABLE_ENGINES,
) -> list[dict[str, Any]]:
    """Repair ``src`` for each engine into a throw-away directory and re-diagnose the result.

    One row per engine: what was wrong, what repair did (or why it refused), and what ``diagnose``
    says about the written copy. ``src`` is only read; nothing is left behind.
    """
    rows: list[dict[str, Any]] = []
    if not (Path(src) / "config.json").is_file():
        return [{"engine": "-", "status": "skipped", "refused because": f"{src} is not a drafter directory"}]
    with tempfile.TemporaryDirectory(prefix="e3f-repair-") as tmp:
        for engine in engines:
            out = Path(tmp) / engine
            result = repair(src, engine, out, target=target)
            plan = result.plan
            after = result.verification
            rows.append(
                {
                    "engine": engine,
                    "errors before": ", ".join(sorted({f.code for f in plan.source_errors()}))
                    if plan
                    else "",
                    "status": result.status,
                    "steps": "; ".join(f"{s.kind}: {s.description}" for s in plan.steps)[:400]
                    if plan
                    else "",
                    "refused because": "; ".join(r.reason for r in plan.refusals) if plan else result.message,
                    "errors after": (
                        ", ".join(
                            sorted(
                                {
                                    f.code
                                    for f in after.findings
                                    if f.severity is Severity.ERROR and f.engine in (None, engine)
                                }
                            )
                        )
                        if after
                        else ""
                    ),
                    "verdict after": after.verdict(engine) if after else "",
                }
            )
    return rows
