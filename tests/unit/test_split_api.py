"""The six modules split into packages (issue 23) keep their public API at the old paths.

Each name below was defined in the old single module; it stays importable from the old path (a
package whose ``__init__`` resolves it lazily) and is the very object its new home defines.
"""

from __future__ import annotations

import importlib

import pytest

from eagle3_forensics.extras import PROVIDER

OLD_NAMES: dict[str, tuple[str, ...]] = {
    "vocab.inputs": (
        "CHUNK_TOKENS", "IDS_KEY", "LoadedMapping", "MASK_KEY", "METADATA_KEY", "SUFFIXES", "TOKENIZER_FILE",
        "TokenizedCorpus", "build_vocab_mapping_from_data", "build_vocab_mapping_from_file", "iter_token_chunks",
        "lm_head_row_check", "load_mapping", "load_token_ids", "load_tokenizer", "read_chat_template", "read_jsonl",
        "read_safetensors_metadata", "read_tokenizer_config", "render_chat", "safetensors_metadata", "save_mapping",
        "token_file_size", "tokenize_corpus",
        "_token_text",  # used by checks.data
    ),
    "vocab.mapping": (
        "BLOCK_TOKENS", "CONSISTENT_KINDS", "D2TFix", "KINDS", "LmHeadRowCheck", "MappingComparison",
        "PROGRESS_MIN_TOKENS", "TIE_BREAKS", "TokenCounts", "VocabClassification", "VocabMapping",
        "VocabPaddingWarning", "absolute_to_offsets", "build_vocab_mapping", "check_lm_head_rows", "check_t2d",
        "classify_mapping", "compare_mappings", "count_token_ids", "d2t_from_t2d", "mapping_fingerprint",
        "offsets_to_absolute", "padding_note", "select_draft_vocab", "selected_ids", "suggest_d2t_fix",
        "t2d_from_d2t", "undo_double_offset",
    ),
    "reference.drafter": (
        "Attention", "DecoderLayer", "DraftCache", "DrafterSpec", "DrafterView", "Eagle3Drafter", "FRESH_INIT_SEED",
        "MLP", "REFERENCE", "RMSNorm", "Rotary", "TRAIN_INIT_STD", "TargetFiles", "TargetSide", "UNFILLED_STD",
        "VIEW_NAMES", "canonical_name", "default_dtype", "export_tensors", "fill_unfilled", "fresh_init",
        "load_drafter", "resolve_device", "target_files",
    ),
    "repair.plan": (
        "RECORD_FILE", "Refusal", "RepairArgumentError", "RepairPlan", "Step", "repair_plan",
        "_check_engine", "_check_trust",  # used by repair.execute
    ),
    "checks.data": (
        "AuditScan", "COVERAGE_ERROR", "COVERAGE_GAP", "COVERAGE_WARN", "DATA_CODES", "DataAudit", "Examples",
        "MASKED_SHARE_SUSPICIOUS", "POS_BITS", "SCAN_SCHEMA", "TIE_BREAKS_AUDITED", "audit_data", "check_shards",
        "finish_audit", "merge_scans", "parse_shard", "scan_data", "select_top",
    ),
    "probe.offline": (
        "DEFAULT_BUCKET", "LABEL_CHUNK", "OFFLINE_CONVENTIONS", "OfflineCounts", "OfflineProbeResult", "OfflineSetup",
        "PARTIAL_SCHEMA", "RMS_TOLERANCE", "SMALL_MODEL_PARAMS", "Teacher", "WORST", "finish_probe",
        "load_worst_sample", "merge_counts", "open_offline", "parse_engine", "probe_offline", "scan_offline",
        "_slots",  # used by probe.samples
    ),
}  # fmt: skip


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_every_old_name_imports_from_the_old_path_as_its_new_homes_object(old: str) -> None:
    package = importlib.import_module(f"eagle3_forensics.{old}")
    for name in OLD_NAMES[old]:
        try:
            value = getattr(package, name)  # what `from eagle3_forensics.<old> import name` does
        except ModuleNotFoundError as exc:  # the core-only tier (tests/packaging): torch & co. absent
            if (exc.name or "").split(".")[0] not in PROVIDER:
                raise
            pytest.skip(f"eagle3_forensics.{old}.{name} needs {exc.name} (an extra)")
        home = importlib.import_module(f"eagle3_forensics.{old}.{package._EXPORTS[name]}")
        assert vars(home)[name] is value, (old, name)
        if callable(value):  # a class or function is defined there, not re-imported from elsewhere
            assert value.__module__ == home.__name__, (old, name, value.__module__)


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_the_packages_public_names_are_the_old_modules(old: str) -> None:
    package = importlib.import_module(f"eagle3_forensics.{old}")
    assert sorted(package.__all__) == sorted(n for n in OLD_NAMES[old] if not n.startswith("_"))
    with pytest.raises(AttributeError, match="has no attribute"):
        package.no_such_name  # noqa: B018
