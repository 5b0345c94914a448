"""From a (merged) scan to findings: :func:`finish_audit` gives the :class:`DataAudit` with the
``DATA_*`` codes (:data:`DATA_CODES`); :func:`audit_data` is scan and finish in one call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eagle3_forensics.checks.data.merge import AuditScan
from eagle3_forensics.checks.data.scan import scan_data
from eagle3_forensics.checks.data.target_findings import target_fit_findings
from eagle3_forensics.checks.data.target_scan import Labeller
from eagle3_forensics.errors import ExitCode
from eagle3_forensics.findings import DATA_CATALOGUE, Finding, Severity, count_by_severity, sort_findings
from eagle3_forensics.io.dumps.layouts import LAYOUTS
from eagle3_forensics.io.dumps.options import DEFAULT_SCAN, ScanOptions
from eagle3_forensics.io.dumps.read import MAX_LIST
from eagle3_forensics.vocab.mapping.build import select_draft_vocab
from eagle3_forensics.vocab.mapping.counts import TokenCounts

DATA_CODES: tuple[str, ...] = tuple(DATA_CATALOGUE)  # the catalogue is the one list
COVERAGE_WARN = 0.90  # below: a drafter can accept at most this share of the trained tokens
COVERAGE_ERROR = 0.50
COVERAGE_GAP = 0.02  # a map leaving this much coverage on the table that a map from the data would get
MASKED_SHARE_SUSPICIOUS = 0.98  # nearly every token trained: prompts are in the loss
TIE_BREAKS_AUDITED: tuple[tuple[str, str, str], ...] = (
    # label, vocab.mapping tie_break, which first-occurrence table it needs
    ("speculators (id)", "id", ""),
    ("SpecForge dataset order (first_row by file number)", "first_row", "first_num"),
    ("SpecForge dump order (first_row by sorted path)", "first_row", "first_lex"),
    ("EAGLE (first_seen)", "first_seen", "first_pos"),
)


# ---------------------------------------------------------------------------------------------
# findings
# ---------------------------------------------------------------------------------------------


@dataclass
class DataAudit:
    """The verdict on one data-prep output."""

    scan: AuditScan
    findings: list[Finding]
    summary: dict[str, Any]

    @property
    def unusable(self) -> bool:
        return any(f.code == "DATA_UNREADABLE" for f in self.findings) or self.scan.read == 0

    @property
    def unusable_reason(self) -> str | None:
        """Why the data cannot be audited (exit 2), or ``None``."""
        if not self.unusable:
            return None
        first = next((f for f in self.findings if f.code == "DATA_UNREADABLE"), None)
        return first.message if first else "no sample could be read"

    @property
    def exit_code(self) -> int:
        if self.unusable:
            return int(ExitCode.UNUSABLE)
        return (
            int(ExitCode.FINDINGS)
            if any(f.severity is Severity.ERROR for f in self.findings)
            else int(ExitCode.OK)
        )

    def to_dict(self) -> dict[str, Any]:
        s = self.scan.settings
        return {
            "dir": s["dir"],
            "format": s["format"],
            "summary": self.summary,
            "counts": count_by_severity(self.findings),
            "findings": [f.to_dict() for f in self.findings],
        }


def _threshold(counts: np.ndarray, v: int) -> int:
    """The v-th largest count (0 when fewer than v ids were seen)."""
    seen = counts[counts > 0]
    if seen.shape[0] < v:
        return 0
    return int(np.partition(seen, seen.shape[0] - v)[seen.shape[0] - v])


def _dense(table: dict[int, int], size: int, fill: int) -> np.ndarray:
    arr = np.full(size, fill, dtype=np.int64)
    for key, v in table.items():
        k = int(key)
        if 0 <= k < size:
            arr[k] = v
    return arr


def _expected(scan: AuditScan, counts: np.ndarray, v: int) -> list[tuple[str, np.ndarray]]:
    """The selection each trainer would have made from these samples' counts."""
    size = counts.shape[0]
    unseen = np.iinfo(np.int64).max
    firsts = {
        "first_lex": _dense(scan.first_lex, size, unseen),
        "first_num": _dense(scan.first_num, size, unseen),
        "first_pos": _dense(scan.first_pos, size, unseen),
    }
    out = []
    for label, tie, table in TIE_BREAKS_AUDITED:
        tc = TokenCounts(
            counts,
            scan.tokens,
            scan.read,
            first_pos=firsts["first_pos"] if table == "first_pos" else None,
            first_row=firsts[table] if table in ("first_lex", "first_num") else None,
        )
        out.append((label, select_draft_vocab(tc, v, tie, warn=False).selected))
    return out


def _vocab_findings(scan: AuditScan, complete: bool) -> tuple[list[Finding], list[dict[str, Any]]]:
    s = scan.settings
    findings: list[Finding] = []
    report: list[dict[str, Any]] = []
    if not scan.counts:
        return findings, report
    size = max(
        [int(s["vocab_size"] or 0), max(scan.counts) + 1]
        + [int(mp["target_vocab_size"] or 0) for mp in s["maps"]]
    )
    counts = _dense(scan.counts, size, 0)
    total = int(counts.sum())
    tf = s.get("token_freq") or {}
    tf_counts = _dense(tf["counts"], size, 0) if "counts" in tf else None
    for mp in s["maps"]:
        for sel_d in mp["selections"]:
            sel = np.asarray(sel_d["selected"], dtype=np.int64)
            sel = sel[(sel >= 0) & (sel < size)]
            v = int(sel.shape[0])
            if v == 0 or v > size:
                continue
            label = f"{mp['label']} {sel_d['of']}"
            expected = _expected(scan, counts, v)
            exact = [name for name, e in expected if np.array_equal(e, sel)]
            best_name, best = max(expected, key=lambda x: np.intersect1d(x[1], sel).shape[0])
            overlap = int(np.intersect1d(best, sel).shape[0])
            cov = float(counts[sel].sum() / total) if total else 0.0
            opt = float(counts[best].sum() / total) if total else 0.0
            entry: dict[str, Any] = {
                "map": mp["path"],
                "selection": label,
                "draft_vocab_size": v,
                "matches": exact,
                "overlap": overlap,
                "coverage": round(cov, 6),
                "best_coverage": round(opt, 6),
            }
            if tf_counts is not None:
                tf_best = select_top(tf_counts, v)
                entry["token_freq_matches_data"] = bool(np.array_equal(tf_counts, counts))
                entry["map_matches_token_freq"] = bool(np.array_equal(tf_best, sel))
            report.append(entry)
            m = _Judged(mp, sel_d, label, sel, v, counts, size, total)
            findings.extend(_coverage_low(m, cov, opt))
            if exact or mp.get("role") == "drafter":
                continue  # a drafter's map may come from other data than the samples audited
            findings.extend(
                _not_from_data(scan, m, expected, best_name, overlap, entry, tf_counts is not None, complete)
            )
    return findings, report


@dataclass
class _Judged:
    """One selection of one map file, judged against these samples' counts."""

    mp: dict[str, Any]
    sel_d: dict[str, Any]
    label: str
    sel: np.ndarray
    v: int
    counts: np.ndarray
    size: int
    total: int


def _coverage_low(m: _Judged, cov: float, opt: float) -> list[Finding]:
    """DATA_COVERAGE_LOW: the selection covers too little of the trained tokens, or less than it could."""
    mp, sel_d, label, sel, counts, size, total = m.mp, m.sel_d, m.label, m.sel, m.counts, m.size, m.total
    findings: list[Finding] = []
    if total and (cov < COVERAGE_WARN or cov < opt - COVERAGE_GAP):
        sev = Severity.ERROR if cov < COVERAGE_ERROR else Severity.WARNING
        sel_mask = np.zeros(size, dtype=bool)
        sel_mask[sel] = True
        missed = np.flatnonzero(~sel_mask & (counts > 0))
        top = missed[np.argsort(-counts[missed], kind="stable")][:10]
        findings.append(
            Finding(
                "DATA_COVERAGE_LOW",
                sev,
                f"{label}: the draft vocabulary covers {cov:.1%} of these samples' trained tokens "
                f"(a map from these samples would cover {opt:.1%}); the drafter can never propose the rest.",
                evidence={
                    "map": mp["path"],
                    "selection": sel_d["of"],
                    "coverage": round(cov, 6),
                    "best_coverage": round(opt, 6),
                    "counted_tokens": total,
                    "most_frequent_uncovered": [{"id": int(i), "count": int(counts[i])} for i in top],
                },
                fix="Build the map from the training data itself (eagle3-forensics vocab build, or the "
                "trainer's own vocab step on these samples), or raise draft_vocab_size.",
            )
        )
    return findings


def _not_from_data(
    scan: AuditScan,
    m: _Judged,
    expected: list[tuple[str, np.ndarray]],
    best_name: str,
    overlap: int,
    entry: dict[str, Any],
    with_token_freq: bool,
    complete: bool,
) -> list[Finding]:
    """DATA_VOCAB_MAP_NOT_FROM_DATA: the selection is not the top-v of these samples beyond ties."""
    mp, sel_d, label, sel, v, counts, size = m.mp, m.sel_d, m.label, m.sel, m.v, m.counts, m.size
    findings: list[Finding] = []
    c_star = _threshold(counts, v)
    sel_mask = np.zeros(size, dtype=bool)
    sel_mask[sel] = True
    margin = max(1, math.ceil(0.01 * c_star))
    missing = np.flatnonzero(~sel_mask & (counts > c_star))
    rare = np.flatnonzero(sel_mask & (counts > 0) & (counts < c_star))
    bad_pad: np.ndarray = np.zeros(0, dtype=np.int64)
    if c_star == 0 and not missing.size:
        n_seen = int((counts[sel] > 0).sum())
        free = np.flatnonzero(counts[: max(v, 1)] == 0)  # padding takes the smallest unseen ids < v
        pads = free[: v - n_seen]
        sel_unseen = sel[counts[sel] == 0]
        bad_pad = np.setdiff1d(sel_unseen, pads)
    if not missing.size and not rare.size and not bad_pad.size:
        return findings  # the same selection up to ties: nothing to report
    # Error when the difference costs coverage (frequent ids left out); ids never seen in these
    # samples picked instead of the trainers' padding prove other data but cost nothing here.
    clear = bool((counts[missing] > c_star + margin).any()) or (bool(missing.size) and overlap < 0.99 * v)
    sev = Severity.ERROR if clear and complete else Severity.WARNING
    per_tie = []
    for name, e in expected:
        per_tie.append(
            {
                "tie_break": name,
                "overlap": int(np.intersect1d(e, sel).shape[0]),
                "only_in_map": np.setdiff1d(sel, e)[:10].tolist(),
                "only_in_data_top": np.setdiff1d(e, sel)[:10].tolist(),
            }
        )
    top_missing = missing[np.argsort(-counts[missing], kind="stable")][:10]
    ev: dict[str, Any] = {
        "map": mp["path"],
        "selection": sel_d["of"],
        "draft_vocab_size": v,
        "overlap": overlap,
        "overlap_fraction": round(overlap / v, 6),
        "best_matching_tie_break": best_name,
        "threshold_count": c_star,
        "frequent_ids_missing": [{"id": int(i), "count": int(counts[i])} for i in top_missing],
        "selected_ids_rarer_than_threshold": rare[:10].tolist(),
        "selected_unseen_ids_not_padding": bad_pad[:10].tolist(),
        "per_tie_break": per_tie,
        "samples_read": scan.read,
        "complete": complete,
    }
    if with_token_freq:
        ev["map_matches_token_freq"] = entry.get("map_matches_token_freq")
        ev["token_freq_matches_data"] = entry.get("token_freq_matches_data")
    first = per_tie[[n for n, _ in expected].index(best_name)]
    findings.append(
        Finding(
            "DATA_VOCAB_MAP_NOT_FROM_DATA",
            sev,
            f"{label} is not the top-{v} of these samples' loss-masked token counts beyond ties: "
            f"{overlap}/{v} ids agree under the best-matching tie-break ({best_name}); first ids only "
            f"in the map {first['only_in_map'][:5]}, only in the data's top-{v} {first['only_in_data_top'][:5]}"
            + ("" if complete else " (only part of the data was read)")
            + ".",
            evidence=ev,
            fix="Rebuild d2t/t2d from these samples with the trainer's own tie-break (eagle3-forensics "
            "vocab build --tie-break id|first_row|first_seen), delete stale caches (SpecForge "
            "vocab_mapping/*.pt, speculators d2t.npy/t2d.npy, EAGLE cache.pt) and retrain the head.",
        )
    )
    return findings


def select_top(counts: np.ndarray, v: int) -> np.ndarray:
    """speculators' selection from ``token_freq.pt`` counts (tie-break: smallest id, padded)."""
    if not counts.any():
        return np.zeros(0, dtype=np.int64)
    return select_draft_vocab(counts, v, "id", warn=False).selected


def _duplicates(scan: AuditScan) -> list[list[list[Any]]]:
    groups: dict[str, list[list[Any]]] = {}
    for h, i, src in scan.hashes:
        groups.setdefault(h, []).append([i, src])
    return [g for g in groups.values() if len(g) > 1]


def finish_audit(scan: AuditScan) -> DataAudit:
    """Findings and summary of a (merged) scan."""
    s = scan.settings
    complete = s["max_samples"] is None
    f: list[Finding] = []
    for mp in s["maps"]:
        f.extend(Finding.from_dict(x) for x in mp["findings"])
    f.extend(_file_findings(scan))
    f.extend(_mask_findings(scan))
    f.extend(_nonfinite_findings(scan))
    f.extend(_width_findings(scan))
    f.extend(_length_findings(scan))
    f.extend(_target_findings(scan))
    vf, vreport = _vocab_findings(scan, complete)
    f.extend(vf)
    f.extend(_duplicate_findings(scan))
    tf, target_summary = target_fit_findings(scan)
    f.extend(tf)
    return DataAudit(scan, sort_findings(f), _summary(scan, vreport, target_summary, complete))


def _file_findings(scan: AuditScan) -> list[Finding]:
    """DATA_UNREADABLE (dumps, maps), DATA_LAYOUT_BROKEN, DATA_NOT_EAGLE3: files that cannot be trained on."""
    s = scan.settings
    f: list[Finding] = []
    if scan.unreadable.count:
        f.append(
            Finding(
                "DATA_UNREADABLE",
                Severity.ERROR,
                f"{scan.unreadable.count} of {scan.files} dump files cannot be used: "
                f"{scan.unreadable.items[0][1]}: {scan.unreadable.items[0][2]}",
                evidence=scan.unreadable.evidence(),
                fix="Regenerate these files (a truncated write, a wrong writer, or a pickle that needs code "
                "to load: never unpickle it outside a trusted environment); trainers crash on them or skip "
                "them silently.",
            )
        )
    for err in s.get("map_errors") or []:
        f.append(
            Finding(
                "DATA_UNREADABLE",
                Severity.ERROR,
                f"vocabulary map {err['path']} cannot be read: {err['reason']}",
                evidence={"count": 1, "examples": [{"file": err["path"], "detail": err["reason"]}]},
                fix="Regenerate the map from the data (eagle3-forensics vocab build).",
            )
        )
    broken = {k: n for k, n in scan.layouts.items() if LAYOUTS[k].broken}
    if broken:
        name = sorted(broken)[0]
        lay = LAYOUTS[name]
        f.append(
            Finding(
                "DATA_LAYOUT_BROKEN",
                Severity.ERROR,
                f"{sum(broken.values())} files were written by {lay.trainer} {lay.versions}: {lay.problem}.",
                evidence={
                    "layouts": {
                        k: {"files": n, "first": scan.layout_first.get(k), **LAYOUTS[k].to_dict()}
                        for k, n in broken.items()
                    },
                },
                fix="Regenerate the dumps with a current writer (SpecForge from 2025-11-13 on writes "
                "hidden_state = last layer and aux_hidden_state = the k captured layers).",
            )
        )
    not3 = {k: n for k, n in scan.layouts.items() if not LAYOUTS[k].eagle3 and not LAYOUTS[k].broken}
    if not3:
        name = sorted(not3)[0]
        lay = LAYOUTS[name]
        f.append(
            Finding(
                "DATA_NOT_EAGLE3",
                Severity.ERROR,
                f"{sum(not3.values())} files are {lay.trainer} {name} data: {lay.problem}. The other checks "
                "still ran on their tokens and masks.",
                evidence={
                    "layouts": {
                        k: {"files": n, "first": scan.layout_first.get(k), **LAYOUTS[k].to_dict()}
                        for k, n in not3.items()
                    }
                },
                fix="Generate EAGLE-3 data (SpecForge prepare_hidden_states.py with aux states, or speculators "
                "data_generation_offline.py); EAGLE-3 itself trains online from the target.",
            )
        )
    return f


def _mask_findings(scan: AuditScan) -> list[Finding]:
    """DATA_LOSS_MASK_EMPTY, DATA_LOSS_MASK_SUSPICIOUS: masks that train nothing, or the wrong tokens."""
    s = scan.settings
    f: list[Finding] = []
    if scan.mask_empty.count:
        sev = Severity.ERROR if scan.mask_empty.count == scan.read - scan.no_mask else Severity.WARNING
        f.append(
            Finding(
                "DATA_LOSS_MASK_EMPTY",
                sev,
                f"{scan.mask_empty.count} of {scan.read} samples have an all-zero loss mask: nothing to learn, "
                "compute spent for nothing (the chat template's assistant markers were probably not matched).",
                evidence=scan.mask_empty.evidence(),
                fix="Check the chat template / assistant-header regex of the data prep against these samples; "
                "drop unsupervised rows (speculators does since 2026-08).",
            )
        )
    masked_share = scan.masked / max(1, scan.tokens) if scan.read - scan.no_mask > 0 else 0.0
    suspicious = scan.mask_whole.count + scan.mask_first.count + scan.mask_off_turns.count
    if suspicious or (scan.read - scan.no_mask > 1 and masked_share > MASKED_SHARE_SUSPICIOUS):
        marker = s.get("assistant_marker") or {}
        off = (
            f"; {scan.mask_off_turns.count} samples have assistant turns (after {marker.get('text')!r}, the "
            "target's chat template) none of which is in the mask"
            if scan.mask_off_turns.count
            else ""
        )
        f.append(
            Finding(
                "DATA_LOSS_MASK_SUSPICIOUS",
                Severity.WARNING,
                f"loss masks look wrong: {scan.mask_whole.count} samples are masked over the whole sequence and "
                f"{scan.mask_first.count} more from the first token on ({masked_share:.1%} of all tokens are "
                f"trained){off}; the loss is not on the assistant turns.",
                evidence={
                    "whole_sequence": scan.mask_whole.evidence(),
                    "from_first_token": scan.mask_first.evidence(),
                    "off_assistant_turns": scan.mask_off_turns.evidence(),
                    "assistant_marker": marker.get("text"),
                    "masked_share": round(masked_share, 6),
                },
                fix="Mask only the assistant spans (the trainers' regex on the chat template); check that the "
                "template used at data prep is the target's.",
            )
        )
    return f


def _nonfinite_findings(scan: AuditScan) -> list[Finding]:
    """DATA_HIDDEN_NONFINITE."""
    f: list[Finding] = []
    if scan.nonfinite.count:
        f.append(
            Finding(
                "DATA_HIDDEN_NONFINITE",
                Severity.ERROR,
                f"{scan.nonfinite.count} samples hold NaN/Inf hidden states (SpecForge skips NaN at write time "
                "but not Inf; speculators checks only with --validate-outputs).",
                evidence=scan.nonfinite.evidence(),
                fix="Regenerate these samples (fp16 overflow is the usual cause: capture in bf16/fp32) or drop them.",
            )
        )
    return f


def _length_findings(scan: AuditScan) -> list[Finding]:
    """DATA_SEQ_TOO_LONG: samples beyond the drafter's (or target's) positions."""
    s = scan.settings
    f: list[Finding] = []
    if scan.too_long.count:
        f.append(
            Finding(
                "DATA_SEQ_TOO_LONG",
                Severity.WARNING,
                f"{scan.too_long.count} samples are longer than the {s['max_positions_from']}'s "
                f"max_position_embeddings {s['max_positions']} (longest {scan.max_len}).",
                evidence={**scan.too_long.evidence(), "limit": s["max_positions"], "longest": scan.max_len},
                fix="Truncate to the drafter's context (the trainers' max_length) or raise its "
                "max_position_embeddings with matching RoPE settings.",
            )
        )
    return f


def _duplicate_findings(scan: AuditScan) -> list[Finding]:
    """DATA_DUPLICATE_SAMPLES: rows repeated exactly."""
    f: list[Finding] = []
    dups = _duplicates(scan)
    if dups:
        n = sum(len(g) - 1 for g in dups)
        f.append(
            Finding(
                "DATA_DUPLICATE_SAMPLES",
                Severity.WARNING,
                f"{n} samples repeat another one exactly (same input_ids and loss mask) in {len(dups)} groups; "
                "rows that share only a prefix (one row per assistant turn) are not counted.",
                evidence={"groups": len(dups), "duplicates": n, "examples": dups[:MAX_LIST]},
                fix="Deduplicate before training: repeated rows overweight their tokens (SpecForge's data-parallel "
                "sampler padding can write the same row twice).",
            )
        )
    return f


def _summary(
    scan: AuditScan, vreport: list[dict[str, Any]], target_summary: Any, complete: bool
) -> dict[str, Any]:
    """The audit's summary: what was read, the maps judged, the target fit."""
    s = scan.settings
    return {
        "files": s["total_files"],
        "samples_read": scan.read,
        "unreadable": scan.unreadable.count,
        "bytes": scan.bytes,
        "tokens": scan.tokens,
        "masked_tokens": scan.masked,
        "samples_without_mask": scan.no_mask,
        "padded_samples": scan.padded_samples,
        "pad_positions_trimmed": scan.pad_trimmed,
        "longest": scan.max_len,
        "layouts": scan.layouts,
        "dtypes": scan.dtypes,
        "hidden_sizes": {str(k): v for k, v in scan.hidden_sizes.items()},
        "aux_widths": {str(k): v for k, v in scan.aux_widths.items()},
        "distinct_ids": len(scan.counts),
        "maps": [{"path": m["path"], "label": m["label"], "source": m["source"]} for m in s["maps"]],
        "vocab": vreport,
        "token_freq": None if not s.get("token_freq") else s["token_freq"]["path"],
        "drafter": s["drafter"],
        "target": s["target"],
        "complete": complete,
        "target_fit": target_summary,
    }


def _width_findings(scan: AuditScan) -> list[Finding]:
    s = scan.settings
    out: list[Finding] = []
    problems: list[str] = []
    ev: dict[str, Any] = {
        "aux_widths": {str(k): v for k, v in scan.aux_widths.items()},
        "hidden_sizes": {str(k): v for k, v in scan.hidden_sizes.items()},
    }
    if scan.aux_odd.count:
        problems.append(
            f"{scan.aux_odd.count} samples have an aux width that is not a multiple of their hidden size"
        )
        ev["not_a_multiple"] = scan.aux_odd.evidence()
    if len(scan.aux_widths) > 1:
        problems.append(f"aux widths differ between samples: {sorted(scan.aux_widths)}")
    d = s.get("drafter") or {}
    if d.get("fc_in") and scan.aux_widths:
        bad = sorted(w for w in scan.aux_widths if w != d["fc_in"])
        if bad:
            problems.append(f"the drafter's fc takes {d['fc_in']}-wide inputs, the dumps hold {bad}")
            ev["drafter_fc_in"] = d["fc_in"]
    t = s.get("target") or {}
    if t.get("hidden_size") and scan.aux_widths:
        h = t["hidden_size"]
        bad = sorted(w for w in scan.aux_widths if w % h)
        if bad:
            problems.append(f"aux widths {bad} are not k x the target's hidden size {h}")
            ev["target_hidden_size"] = h
    if problems:
        out.append(
            Finding(
                "DATA_AUX_WIDTH_MISMATCH",
                Severity.ERROR,
                "aux hidden states do not fit: " + "; ".join(problems) + ".",
                evidence=ev,
                fix="Capture the same k layers of the target the drafter is built for (fc input = k x target "
                "hidden size), in every sample.",
            )
        )
    return out


def _target_findings(scan: AuditScan) -> list[Finding]:
    s = scan.settings
    t = s.get("target") or {}
    problems: list[str] = []
    ev: dict[str, Any] = {}
    if t.get("hidden_size") and scan.hidden_sizes:
        bad = sorted(h for h in scan.hidden_sizes if h != t["hidden_size"])
        if bad:
            problems.append(f"dumped hidden size {bad} != the target's {t['hidden_size']}")
            ev["hidden_sizes"] = {str(k): v for k, v in scan.hidden_sizes.items()}
            ev["target_hidden_size"] = t["hidden_size"]
    if scan.out_of_vocab.count:
        problems.append(
            f"{scan.out_of_vocab.count} samples hold token ids outside the vocabulary {s['vocab_size']}"
        )
        ev["ids_out_of_range"] = scan.out_of_vocab.evidence()
    for mp in s["maps"]:
        if t.get("vocab_size") and mp["target_vocab_size"] and mp["target_vocab_size"] != t["vocab_size"]:
            problems.append(
                f"map {mp['label']} is for vocabulary {mp['target_vocab_size']}, the target has {t['vocab_size']}"
            )
            ev.setdefault("maps", []).append(
                {"map": mp["path"], "target_vocab_size": mp["target_vocab_size"]}
            )
    if not problems:
        return []
    return [
        Finding(
            "DATA_TARGET_MISMATCH",
            Severity.ERROR,
            "the data does not fit the target: " + "; ".join(problems) + ".",
            evidence={**ev, "target": t.get("path")},
            fix="Audit against the target the data was generated from; regenerate the dumps or the map for "
            "this target.",
        )
    ]


def audit_data(
    path: str | Path,
    options: ScanOptions = DEFAULT_SCAN,
    *,
    map_path: str | Path | None = None,
    drafter: str | Path | None = None,
    launch: str | None = None,
    template_kwargs: dict[str, Any] | None = None,
    labeller: Labeller | None = None,
    on_scan: Callable[[AuditScan], None] | None = None,
) -> DataAudit:
    """Scan every sample under ``path`` and judge the data (the one-machine run); the arguments as
    :func:`~eagle3_forensics.checks.data.scan.scan_data`."""
    scan = scan_data(
        path,
        options,
        map_path=map_path,
        drafter=drafter,
        launch=launch,
        template_kwargs=template_kwargs,
        labeller=labeller,
    )
    if on_scan is not None:
        on_scan(scan)
    return finish_audit(scan)
