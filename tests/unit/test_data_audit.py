"""audit-data: a positive and a negative case for every DATA_* code, the seed's situation, and exact merging."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
from builders import build_target
from dump_builders import H, ge_data, rows, save, specforge, specforge_broken, speculators, write_map

from eagle3_forensics.checks.data import (
    DATA_CODES,
    AuditScan,
    audit_data,
    finish_audit,
    merge_scans,
    scan_data,
)
from eagle3_forensics.findings import DATA_CATALOGUE, Severity
from eagle3_forensics.io.dumps import ScanOptions

V = 64


def codes(path: Path, target: Path | None = None, max_samples: int | None = None) -> dict[str, str]:
    a = audit_data(path, ScanOptions(target=target, max_samples=max_samples))
    return {f.code: f.severity.value for f in a.findings}


def healthy(root: Path, n: int = 6, **kw: object) -> Path:
    return speculators(root, rows(n), **kw)  # type: ignore[arg-type]


def data_map(root: Path, data: list[tuple[list[int], list[int]]], v: int = 48, tie: str = "id") -> np.ndarray:
    from eagle3_forensics.vocab.mapping import build_vocab_mapping

    with warnings.catch_warnings():  # fewer distinct ids than v: padded, as the trainers do
        warnings.simplefilter("ignore")
        m = build_vocab_mapping(
            [np.asarray(i) for i, _ in data], v, V, [np.asarray(k) for _, k in data], tie_break=tie
        )
    return m.selected


def test_catalogue_lists_every_data_code() -> None:
    assert set(DATA_CODES) == set(DATA_CATALOGUE)


def test_healthy_data_has_no_findings(tmp_path: Path) -> None:
    data = rows(6)
    speculators(tmp_path, data)
    write_map(tmp_path, data_map(tmp_path, data), V)
    a = audit_data(tmp_path)
    assert a.findings == [], [f.to_dict() for f in a.findings]
    assert a.exit_code == 0
    assert a.summary["vocab"][0]["matches"]  # recognised as built from these samples


# -- the seed's situation --------------------------------------------------------------------------


def test_offsets_starting_with_zeros_are_healthy(tmp_path: Path) -> None:
    """Fewer distinct ids than draft slots: padding selects 0..19 and d2t[:20] == 0 — which is right."""
    data = rows(6, vocab=40)
    speculators(tmp_path, data)
    sel = data_map(tmp_path, data, v=48)
    assert list(sel[:20]) == list(range(20))
    write_map(tmp_path, sel, V)
    d2t = np.load(tmp_path / "d2t.npy")
    assert not d2t[:20].any()
    a = audit_data(tmp_path)
    assert not [f for f in a.findings if f.code.startswith(("D2T", "T2D", "DATA_VOCAB"))], a.findings


def test_d2t_from_other_data_beside_t2d_is_caught(tmp_path: Path) -> None:
    data = rows(6)
    speculators(tmp_path, data)
    other = data_map(tmp_path, rows(6, seed=9), v=48)
    write_map(tmp_path, data_map(tmp_path, data), V, d2t_from=other)
    a = audit_data(tmp_path)
    got = {f.code: f for f in a.findings}
    assert got["D2T_T2D_MISMATCH"].severity is Severity.ERROR
    assert "first_bad_index" in got["D2T_T2D_MISMATCH"].evidence
    nf = got["DATA_VOCAB_MAP_NOT_FROM_DATA"]
    assert nf.evidence["selection"] == "d2t"
    assert nf.evidence["overlap"] < 48 and nf.evidence["per_tie_break"][0]["only_in_map"]
    assert a.exit_code == 1


# -- one case each ------------------------------------------------------------------------------------


def test_unreadable(tmp_path: Path) -> None:
    specforge(tmp_path / "ok", rows(2))
    assert "DATA_UNREADABLE" not in codes(tmp_path / "ok")
    specforge(tmp_path / "bad", rows(2))
    f = tmp_path / "bad" / "rows_0-2000" / "data_1.ckpt"
    f.write_bytes(f.read_bytes()[:100])
    a = audit_data(tmp_path / "bad")
    assert a.exit_code == 2 and a.findings[0].code == "DATA_UNREADABLE"
    assert a.findings[0].evidence["examples"][0]["file"] == "rows_0-2000/data_1.ckpt"


def test_not_eagle3(tmp_path: Path) -> None:
    ge_data(tmp_path / "ge", rows(2))
    a = audit_data(tmp_path / "ge")
    assert {f.code for f in a.findings} >= {"DATA_NOT_EAGLE3"}
    assert "EAGLE-1/2" in next(f.message for f in a.findings if f.code == "DATA_NOT_EAGLE3")
    assert "DATA_NOT_EAGLE3" not in codes(healthy(tmp_path / "ok"))


def test_layout_broken(tmp_path: Path) -> None:
    specforge_broken(tmp_path / "b", rows(2), "2025-11-10")
    assert codes(tmp_path / "b")["DATA_LAYOUT_BROKEN"] == "error"
    specforge(tmp_path / "ok", rows(2), pad_to=20)
    assert "DATA_LAYOUT_BROKEN" not in codes(tmp_path / "ok")


def test_loss_mask_empty(tmp_path: Path) -> None:
    data = rows(3)
    data[1] = (data[1][0], [0] * len(data[1][0]))
    speculators(tmp_path / "e", data)
    assert codes(tmp_path / "e")["DATA_LOSS_MASK_EMPTY"] == "warning"
    assert "DATA_LOSS_MASK_EMPTY" not in codes(healthy(tmp_path / "ok"))


def test_loss_mask_suspicious(tmp_path: Path) -> None:
    data = [(ids, [1] * len(ids)) for ids, _ in rows(3)]
    speculators(tmp_path / "s", data)
    assert codes(tmp_path / "s")["DATA_LOSS_MASK_SUSPICIOUS"] == "warning"
    assert "DATA_LOSS_MASK_SUSPICIOUS" not in codes(healthy(tmp_path / "ok"))
    speculators(tmp_path / "nomask", rows(3), arrow=False)  # no mask at all: not judged
    assert "DATA_LOSS_MASK_SUSPICIOUS" not in codes(tmp_path / "nomask")


def test_hidden_nonfinite(tmp_path: Path) -> None:
    specforge(tmp_path, rows(2))
    f = tmp_path / "rows_0-2000" / "data_1.ckpt"
    rec = torch.load(str(f), weights_only=True)
    rec["aux_hidden_state"][0, 2, 3] = float("nan")
    save(rec, f)
    assert codes(tmp_path)["DATA_HIDDEN_NONFINITE"] == "error"
    assert "DATA_HIDDEN_NONFINITE" not in codes(healthy(tmp_path / "ok"))


def test_aux_width_mismatch(tmp_path: Path) -> None:
    speculators(tmp_path / "a", rows(2), k=3)
    speculators(tmp_path / "b", rows(2), k=2)
    (tmp_path / "b" / "hidden_states" / "hs_1.safetensors").replace(
        tmp_path / "a" / "hidden_states" / "hs_1.safetensors"
    )
    assert codes(tmp_path / "a")["DATA_AUX_WIDTH_MISMATCH"] == "error"
    t = build_target(tmp_path / "t", vocab=V, hidden=H)
    assert "DATA_AUX_WIDTH_MISMATCH" not in codes(healthy(tmp_path / "ok"), target=t)
    t20 = build_target(tmp_path / "t20", vocab=V, hidden=20)  # 48 is not k x 20
    assert codes(healthy(tmp_path / "ok2"), target=t20)["DATA_AUX_WIDTH_MISMATCH"] == "error"


def test_seq_too_long(tmp_path: Path) -> None:
    short = build_target(tmp_path / "short", vocab=V, hidden=H, max_pos=8)
    long_ = build_target(tmp_path / "long", vocab=V, hidden=H, max_pos=4096)
    d = healthy(tmp_path / "d")
    assert codes(d, target=short)["DATA_SEQ_TOO_LONG"] == "warning"
    assert "DATA_SEQ_TOO_LONG" not in codes(d, target=long_)


def test_target_mismatch(tmp_path: Path) -> None:
    d = healthy(tmp_path / "d")
    small_vocab = build_target(tmp_path / "v", vocab=16, hidden=H)
    assert codes(d, target=small_vocab)["DATA_TARGET_MISMATCH"] == "error"
    wide = build_target(tmp_path / "w", vocab=V, hidden=2 * H)
    assert "DATA_TARGET_MISMATCH" in codes(d, target=wide)
    assert "DATA_TARGET_MISMATCH" not in codes(d, target=build_target(tmp_path / "ok", vocab=V, hidden=H))


def test_vocab_map_not_from_data_both_files(tmp_path: Path) -> None:
    data = rows(6)
    speculators(tmp_path / "x", data)
    write_map(tmp_path / "x", data_map(tmp_path, rows(6, seed=5), v=40), V)  # d2t and t2d agree: other data
    got = codes(tmp_path / "x")
    assert got["DATA_VOCAB_MAP_NOT_FROM_DATA"] == "error" and "D2T_T2D_MISMATCH" not in got
    for tie in ("id", "first_row", "first_seen"):  # every trainer's tie-break is recognised
        d = tmp_path / f"ok_{tie}"
        speculators(d, data)
        write_map(d, data_map(tmp_path, data, v=40, tie=tie), V)
        assert "DATA_VOCAB_MAP_NOT_FROM_DATA" not in codes(d), tie


def test_vocab_map_partial_read_is_a_warning(tmp_path: Path) -> None:
    data = rows(8)
    speculators(tmp_path, data)
    write_map(tmp_path, data_map(tmp_path, rows(8, seed=3), v=40), V)
    assert codes(tmp_path, max_samples=3)["DATA_VOCAB_MAP_NOT_FROM_DATA"] == "warning"


def test_coverage_low(tmp_path: Path) -> None:
    data = rows(6)
    speculators(tmp_path / "low", data)
    used = {t for ids, m in data for t, k in zip(ids, m, strict=True) if k}
    unused = [i for i in range(V) if i not in used][:8]
    write_map(tmp_path / "low", unused + sorted(used)[:2], V)
    assert codes(tmp_path / "low")["DATA_COVERAGE_LOW"] in ("warning", "error")
    speculators(tmp_path / "ok", data)
    write_map(tmp_path / "ok", data_map(tmp_path, data), V)
    assert "DATA_COVERAGE_LOW" not in codes(tmp_path / "ok")


def test_duplicates_but_not_per_turn_rows(tmp_path: Path) -> None:
    data = rows(3)
    speculators(tmp_path / "dup", [*data, data[1]])
    got = audit_data(tmp_path / "dup")
    dup = next(f for f in got.findings if f.code == "DATA_DUPLICATE_SAMPLES")
    assert dup.evidence["duplicates"] == 1
    ids, _mask = data[0]
    turns = [
        (ids[:8], [0] * 4 + [1] * 4),
        (ids, [0] * 8 + [1] * (len(ids) - 8)),
    ]  # one row per assistant turn
    speculators(tmp_path / "turns", [*turns, data[1]])
    assert "DATA_DUPLICATE_SAMPLES" not in codes(tmp_path / "turns")


# -- merging ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 5])
def test_merged_shards_equal_the_single_run(tmp_path: Path, n: int) -> None:
    data = rows(9)
    data.append(data[2])  # a duplicate across shards
    speculators(tmp_path, data)
    write_map(tmp_path, data_map(tmp_path, rows(9, seed=4), v=40), V)
    single = finish_audit(scan_data(tmp_path))
    parts = [
        AuditScan.from_dict(json.loads(json.dumps(scan_data(tmp_path, ScanOptions(shard=(i, n))).to_dict())))
        for i in range(n)
    ]
    merged = finish_audit(merge_scans(parts[::-1]))
    assert json.dumps(merged.to_dict(), sort_keys=True) == json.dumps(single.to_dict(), sort_keys=True)
    assert {f.code for f in single.findings} >= {"DATA_VOCAB_MAP_NOT_FROM_DATA", "DATA_DUPLICATE_SAMPLES"}


def test_merge_refuses_missing_or_foreign_parts(tmp_path: Path) -> None:
    from eagle3_forensics.errors import BadArgumentsError, UnusableInputError

    healthy(tmp_path / "a")
    healthy(tmp_path / "b", n=7)
    p0 = scan_data(tmp_path / "a", ScanOptions(shard=(0, 2)))
    with pytest.raises(UnusableInputError, match="missing 1/2"):
        merge_scans([p0])
    with pytest.raises(BadArgumentsError, match="settings differ"):
        merge_scans([p0, scan_data(tmp_path / "b", ScanOptions(shard=(1, 2)))])
    with pytest.raises(UnusableInputError, match="duplicated"):
        merge_scans([p0, p0, scan_data(tmp_path / "a", ScanOptions(shard=(1, 2)))])


def _chat_target(root: Path) -> tuple[Path, dict[str, int]]:
    """A target whose tokenizer has ChatML markers and a chat template (word-level, so ids are known)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<unk>", "<|im_start|>", "<|im_end|>", "user", "assistant", *[f"w{i}" for i in range(40)]]
    vocab = {w: i for i, w in enumerate(words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    t = build_target(root, vocab=V, hidden=H)
    tok.save(str(t / "tokenizer.json"))
    template = (
        "{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> {% endfor %}"
    )
    (t / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": template, "eos_token": "<|im_end|>"})
    )
    return t, vocab


def test_masks_that_miss_every_assistant_turn(tmp_path: Path) -> None:
    t, w = _chat_target(tmp_path / "t")
    s, e, user, asst = w["<|im_start|>"], w["<|im_end|>"], w["user"], w["assistant"]
    conv = [s, user, 10, 11, 12, e, s, asst, 20, 21, 22, 23, e]
    right = [0] * 8 + [1] * 5  # the assistant content and its end-of-turn
    wrong = [0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]  # the user's turn instead
    speculators(tmp_path / "ok", [(conv, right)] * 2)
    speculators(tmp_path / "bad", [(conv, wrong), (conv, right)])
    assert "DATA_LOSS_MASK_SUSPICIOUS" not in codes(tmp_path / "ok", target=t)
    a = audit_data(tmp_path / "bad", ScanOptions(target=t))
    f = next(x for x in a.findings if x.code == "DATA_LOSS_MASK_SUSPICIOUS")
    assert f.evidence["off_assistant_turns"]["count"] == 1
    assert f.evidence["off_assistant_turns"]["examples"][0]["index"] == 0
    assert "assistant" in f.evidence["assistant_marker"]
