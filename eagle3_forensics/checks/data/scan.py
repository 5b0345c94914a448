"""Scanning a data-prep output: :func:`scan_data` reads the samples one at a time into an
:class:`~eagle3_forensics.checks.data.merge.AuditScan`, plus the facts every shard computes identically
(the map files' ``D2T_*``/``T2D_*`` verdicts and selections, the chat template's assistant marker, the
drafter's and target's sizes). ``shard=(I, N)`` reads every N-th file of the sorted list.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from eagle3_forensics.checks.data.merge import AuditScan
from eagle3_forensics.checks.data.target_scan import Labeller, SampleFit, serving_settings
from eagle3_forensics.checks.vocab_map import fix_for_kind
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.checkpoint import safe_torch_load
from eagle3_forensics.io.drafter import read_drafter
from eagle3_forensics.io.dumps.bounded import declared_cap
from eagle3_forensics.io.dumps.options import DEFAULT_SCAN, ScanOptions
from eagle3_forensics.io.dumps.read import DumpSet, open_dumps
from eagle3_forensics.io.shard import parse_pair
from eagle3_forensics.io.target import open_target
from eagle3_forensics.vocab.inputs.chat import (
    load_tokenizer,
    read_chat_template,
    read_tokenizer_config,
    render_chat,
    token_text,
)
from eagle3_forensics.vocab.inputs.maps import load_mapping
from eagle3_forensics.vocab.mapping.classify import classify_mapping

# ---------------------------------------------------------------------------------------------
# what every shard computes identically: maps, drafter, target
# ---------------------------------------------------------------------------------------------


def _map_findings(m: Any) -> list[Finding]:
    """The ``D2T_*``/``T2D_*`` identity verdicts on one map file (every engine reads offsets)."""
    res = m.classify()
    ev = {"map": str(m.path), **res.evidence()}
    out: list[Finding] = []
    if res.t2d_problems and m.t2d is not None:
        cosmetic = all("expected bool" in p for p in res.t2d_problems)
        out.append(
            Finding(
                "T2D_INVALID",
                Severity.WARNING if cosmetic else Severity.ERROR,
                f"{m.label}: t2d is not a valid draft-vocabulary mask: " + "; ".join(res.t2d_problems) + ".",
                evidence={**ev, "problems": res.t2d_problems},
                fix="Rebuild t2d from a verified d2t (t2d[d2t + arange(v)] = True) or from the data "
                "(eagle3-forensics vocab build).",
            )
        )
    if res.consistent:
        return out
    code = {
        "absolute": "D2T_ABSOLUTE",
        "double_offset": "D2T_DOUBLE_OFFSET",
        "missing": "D2T_MISSING",
        "identity_default": "D2T_MISSING",
        "permuted": "D2T_T2D_MISMATCH",
        "partial_corruption": "D2T_T2D_MISMATCH",
    }.get(res.kind, "D2T_INVALID")
    if code == "D2T_MISSING" and m.d2t is None and m.t2d is not None:
        lead = "no d2t beside t2d"
    else:
        lead = f"d2t {res.meaning}"
    if code == "D2T_T2D_MISMATCH":
        at = res.first_bad_index
        lead = (
            f"nonzero(t2d) != d2t + arange(v): d2t selects other target ids than the t2d beside it from "
            f"draft id {at} on (built from other data, or a stale file)"
            if res.kind == "partial_corruption"
            else "d2t holds the t2d selection in another order"
        )
    out.append(Finding(code, Severity.ERROR, f"{m.label}: {lead}.", evidence=ev, fix=fix_for_kind(res.kind)))
    return out


def _selections(m: Any) -> list[dict[str, Any]]:
    """The selection(s) a map stands for: from t2d, and from d2t when it decodes to other ids."""
    out: list[dict[str, Any]] = []
    t2d_sel = None
    if m.t2d is not None and m.t2d.dim() == 1:
        arr = m.t2d.numpy()
        if arr.dtype == np.bool_ or np.isin(np.unique(arr[: 1 << 20]), [0, 1]).all():
            t2d_sel = np.flatnonzero(arr.astype(bool)).astype(np.int64)
            out.append({"of": "t2d", "selected": t2d_sel.tolist()})
    if m.d2t is not None and m.d2t.dim() == 1 and not m.d2t.is_floating_point():
        d = m.d2t.numpy().astype(np.int64)
        res = classify_mapping(m.d2t, None, m.target_vocab_size, None)
        step = {"absolute": 0, "double_offset": 2}.get(res.kind, 1)
        sel = np.sort(d + step * np.arange(d.shape[0], dtype=np.int64))
        how = {0: "d2t (decoded as absolute ids)", 2: "d2t (decoded as double offsets)"}.get(step, "d2t")
        if t2d_sel is None or not np.array_equal(sel, t2d_sel):
            out.append({"of": how, "selected": sel.tolist()})
    return out


def _find_maps(root: Path, explicit: str | Path | None) -> list[Path]:
    if explicit is not None:
        return [Path(explicit)]
    found: list[Path] = []
    base = root if root.is_dir() else root.parent
    dirs = sorted({p.parent for p in base.rglob("*.npy") if p.name in ("d2t.npy", "t2d.npy")})
    found.extend(dirs)
    for p in sorted(base.rglob("*.pt")):
        if p.parent.name == "vocab_mapping" or p.name == "cache.pt":
            found.append(p)
    return found


def _token_freq(root: Path) -> dict[str, Any] | None:
    base = root if root.is_dir() else root.parent
    files = sorted(base.rglob("token_freq.pt"))
    if not files:
        return None
    f = files[0]
    try:
        obj = safe_torch_load(f)
    except UnusableInputError as exc:
        return {"path": str(f), "error": str(exc)}
    if not isinstance(obj, dict) or not all(
        isinstance(k, int) and isinstance(v, int) and not isinstance(v, bool) for k, v in obj.items()
    ):
        return {"path": str(f), "error": "not a plain {token id: count} dict"}
    return {"path": str(f), "counts": {int(k): int(v) for k, v in sorted(obj.items())}}


_MARK_USER, _MARK_ASSISTANT = "QQXQQ", "ZZYZZ"  # placeholders no tokenizer merges with a template's markup


def _assistant_marker(target: str | Path | None) -> dict[str, Any] | None:
    """The token ids that open an assistant turn after a user turn, from the target's chat template:
    the text a rendered ``[user, assistant]`` chat holds between the two contents. ``None`` when the
    target has no tokenizer or template, or the boundary is not a stable token sequence."""
    if target is None or not (Path(target) / "tokenizer.json").is_file():
        return None
    try:
        template = read_chat_template(target)
        if template is None:
            return None
        cfg = read_tokenizer_config(target)
        special = {k: token_text(cfg.get(k)) for k in ("bos_token", "eos_token", "unk_token", "pad_token")}
        chat = [{"role": "user", "content": _MARK_USER}, {"role": "assistant", "content": _MARK_ASSISTANT}]
        text = render_chat(template, chat, special)
        i, j = text.find(_MARK_USER), text.find(_MARK_ASSISTANT)
        if i < 0 or j <= i:
            return None
        between = text[i + len(_MARK_USER) : j]
        if not between.strip():
            return None
        ids = [int(x) for x in load_tokenizer(target).encode(between, add_special_tokens=False).ids]
    except (UnusableInputError, OSError, ValueError, TypeError, AttributeError):
        return None
    return {"text": between, "ids": ids} if ids else None


def _drafter_facts(path: str | Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    d = read_drafter(path)
    fc = d.shape("fc.weight")
    maxpos = d.cfg.get("max_position_embeddings")
    return {
        "path": str(path),
        "fc_in": int(fc[1]) if fc and len(fc) == 2 else None,
        "hidden_size": d.cfg.get("hidden_size"),
        "target_hidden_size": d.cfg.get("target_hidden_size"),
        "max_position_embeddings": maxpos if isinstance(maxpos, int) else None,
        "vocab_size": d.target_vocab_size,
        "draft_vocab_size": d.draft_vocab_size,
    }


def _target_facts(path: str | Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    t = open_target(path)
    return {
        "path": str(path),
        "hidden_size": t.hidden_size,
        "vocab_size": t.vocab_size,
        "num_hidden_layers": t.num_hidden_layers,
        "max_position_embeddings": t.max_position_embeddings,
    }


def _sample_settings(
    ds: DumpSet,
    fmt: str,
    max_samples: int | None,
    map_path: str | Path | None,
    drafter: str | Path | None,
    target: str | Path | None,
    launch: str | None = None,
    template_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    dfacts = _drafter_facts(drafter)
    tfacts = _target_facts(target)
    maps: list[dict[str, Any]] = []
    map_errors: list[dict[str, str]] = []
    for p in _find_maps(ds.root, map_path):
        try:
            m = load_mapping(p, target)
        except UnusableInputError as exc:
            if map_path is not None:
                raise
            map_errors.append({"path": str(p), "reason": str(exc)})
            continue
        maps.append(
            {
                "path": str(p),
                "label": m.label if p.is_dir() else p.name,
                "source": m.source,
                "target_vocab_size": m.target_vocab_size,
                "draft_vocab_size": m.draft_vocab_size,
                "findings": [f.to_dict() for f in _map_findings(m)],
                "selections": _selections(m),
            }
        )
    if not maps and drafter is not None:
        try:
            m = load_mapping(drafter, target)
            if m.d2t is not None or m.t2d is not None:
                maps.append(
                    {
                        "path": str(drafter),
                        "label": "drafter",
                        "source": m.source,
                        "target_vocab_size": m.target_vocab_size,
                        "draft_vocab_size": m.draft_vocab_size,
                        "findings": [],  # diagnose judges the drafter's own map
                        "selections": _selections(m),
                        "role": "drafter",
                    }
                )
        except UnusableInputError:
            pass
    vocab = (tfacts or {}).get("vocab_size") or (dfacts or {}).get("vocab_size")
    if vocab is None:
        vocab = next((mp["target_vocab_size"] for mp in maps if mp["target_vocab_size"]), None)
    maxpos = (dfacts or {}).get("max_position_embeddings") or (tfacts or {}).get("max_position_embeddings")
    return {
        "dir": str(ds.root),
        "format": fmt,
        "family": ds.family,
        "max_samples": max_samples,
        "total_files": len(ds.select(max_samples)),
        "max_positions": maxpos,
        "max_positions_from": "drafter"
        if (dfacts or {}).get("max_position_embeddings")
        else ("target" if maxpos else None),
        "vocab_size": vocab,
        "drafter": dfacts,
        "target": tfacts,
        "maps": maps,
        "map_errors": map_errors,
        "token_freq": _token_freq(ds.root),
        "assistant_marker": _assistant_marker(target),
        "serving": serving_settings(target, tfacts, launch, template_kwargs)
        if target is not None or launch is not None
        else None,
    }


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"I/N"`` -> ``(I, N)`` with ``0 <= I < N``: the one convention (:mod:`eagle3_forensics.io.shard`)."""
    return parse_pair(text)


def scan_data(
    path: str | Path,
    options: ScanOptions = DEFAULT_SCAN,
    *,
    map_path: str | Path | None = None,
    drafter: str | Path | None = None,
    launch: str | None = None,
    template_kwargs: dict[str, Any] | None = None,
    labeller: Labeller | None = None,
) -> AuditScan:
    """Read the samples under ``path`` (this shard's share: ``options.shard``) into an :class:`AuditScan`.

    With ``options.target``: each sample's rendering against the target's chat template (in the serving mode:
    ``template_kwargs``, else the template's default) and its length against the serving context
    (``launch``'s, else the target's); with ``labeller`` (``probe.offline.teacher.GreedyLabeller``,
    which the CLI passes), the agreement of the data's next tokens with the target's greedy ones."""
    target, fmt, max_samples, shard = options.target, options.fmt, options.max_samples, options.shard
    max_sample_bytes, progress = options.max_sample_bytes, options.progress
    hint = None
    if target is not None:
        hint = (_target_facts(target) or {}).get("hidden_size")
    cap = max_sample_bytes if max_sample_bytes is not None else declared_cap(drafter, target)
    ds = open_dumps(path, fmt, hidden_size_hint=hint, max_sample_bytes=cap)
    # as JSON gives it back, so a partial read from disk carries exactly these settings
    settings = json.loads(
        json.dumps(_sample_settings(ds, fmt, max_samples, map_path, drafter, target, launch, template_kwargs))
    )
    items = ds.select(max_samples, shard)
    scan = AuditScan(settings, [list(shard) if shard else [0, 1]])
    fit = SampleFit(target, labeller, with_template=bool((settings.get("serving") or {}).get("template")))
    scan.files = len(items)
    bar = _bar(progress, len(items), "audit-data")
    try:
        for got in ds.iter_samples(items):
            if isinstance(got, tuple):
                scan.unreadable.add(got[0], got[1])
            else:
                scan.add(got)
                _measure(scan, fit, got, labeller)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return scan


def _measure(scan: AuditScan, fit: SampleFit, sample: Any, labeller: Any) -> None:
    """The per-sample records of ``audit-data --target`` (agreement, rendering)."""
    it = sample.item
    got = fit.agreement(sample)
    if got is not None and got[1] > 0:
        scan.agreement.append([it.index, it.rel, *got])
        if scan.teacher is None and hasattr(labeller, "describe"):
            scan.teacher = json.loads(json.dumps(labeller.describe(), default=str))
    rendered = fit.rendering(sample)
    if rendered is not None:
        masked = int(sample.loss_mask.numpy().sum())
        scan.renderings.append(
            [
                it.index,
                it.rel,
                rendered["outcome"],
                rendered["template_match"],
                rendered["modes"],
                masked,
                rendered.get("prompt_modes"),
            ]
        )


def _bar(on: bool, total: int, desc: str) -> Any:
    if not on:
        return None
    from tqdm import tqdm  # heavy: tqdm

    return tqdm(total=total, desc=desc, unit="sample", leave=False, dynamic_ncols=True)
