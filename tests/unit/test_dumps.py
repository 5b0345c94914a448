"""io.dumps: Arrow datasets read through pyarrow (also mangled ones), and every trainer's layout read into one sample shape."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
from dump_builders import (
    H,
    K,
    evil_pickle,
    ge_data,
    research,
    rows,
    save,
    specforge,
    specforge_broken,
    speculators,
    speculators_v04,
)

from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.extras import MissingExtraError
from eagle3_forensics.io.dumps import (
    LAYOUTS,
    ArrowError,
    ArrowStream,
    SampleError,
    arrow_dataset,
    open_dumps,
    write_stream,
)

ARROW = Path(__file__).resolve().parents[1] / "data" / "arrow"


# -- Arrow --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["pa_stream.arrow", "pa_file.arrow"])
def test_reads_pyarrow_files(name: str) -> None:
    with ArrowStream(ARROW / name) as s:
        assert s.num_rows == 3
        assert s.column_names == ["input_ids", "loss_mask", "seq_len", "messages"]
        assert "huggingface" in s.metadata
        assert s.value("input_ids", 0).tolist() == [1, 2, 3]
        assert s.value("loss_mask", 1).tolist() == [False, True]
        assert s.value("input_ids", 2).tolist() == [7] * 9  # second record batch
        assert s.value("seq_len", 2) == 9
        assert s.value("messages", 0)[1] == {"role": "assistant", "content": "yo é"}


def test_reads_large_lists_and_compressed_bodies() -> None:
    with ArrowStream(ARROW / "pa_large.arrow") as s:
        assert s.value("input_ids", 1).tolist() == [3]
        assert s.value("loss_mask", 0).tolist() == [0, 1]
        assert s.value("seq_len", 1) == 1
    with ArrowStream(ARROW / "pa_zstd.arrow") as s:  # ZSTD bodies: pyarrow decodes them
        assert s.num_rows == 2 and s.value("input_ids", 0).tolist() == [1, 2]


def test_decoding_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compressed body is decoded into memory: past the budget the file is refused, in one line."""
    monkeypatch.setattr(arrow_dataset, "MAX_DECODED_BYTES", 0)
    with pytest.raises(ArrowError, match=r"^pa_zstd.arrow decodes to more than 0 GiB \(refused\)$"):
        ArrowStream(ARROW / "pa_zstd.arrow")
    with ArrowStream(ARROW / "pa_stream.arrow") as s:  # uncompressed: views of the map, nothing decoded
        assert s.num_rows == 3


def test_every_mangled_byte_is_a_clean_error_or_a_valid_read(tmp_path: Path) -> None:
    """Flip each byte of a stream and of a file: pyarrow either reads a valid table or the reader
    raises ArrowError with one line; never another exception, never a crash."""
    outcomes = {"read": 0, "refused": 0}
    for name, step in (("pa_stream.arrow", 1), ("pa_file.arrow", 3)):  # the file repeats the stream
        raw = (ARROW / name).read_bytes()
        for at in range(0, len(raw), step):
            bad = bytearray(raw)
            bad[at] ^= 0xFF
            q = tmp_path / f"flip{at}.arrow"
            q.write_bytes(bytes(bad))
            try:
                with ArrowStream(q) as s:
                    for c in s.column_names:
                        for r in range(s.num_rows):
                            s.value(c, r)
                outcomes["read"] += 1
            except ArrowError as exc:
                assert "\n" not in str(exc) and str(exc)
                outcomes["refused"] += 1
    assert outcomes["refused"] > 100 and outcomes["read"] > 0, outcomes


def test_missing_pyarrow_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    with pytest.raises(MissingExtraError, match=r"pip install 'eagle3-forensics\[offline\]'$") as got:
        ArrowStream(ARROW / "pa_stream.arrow")
    assert got.value.exit_code == 2 and got.value.code == "MISSING_EXTRA"


def test_writer_round_trip_and_truncation(tmp_path: Path) -> None:
    p = tmp_path / "x.arrow"
    write_stream(
        p,
        {
            "input_ids": ("list<int64>", [np.arange(5), np.arange(3)]),
            "loss_mask": ("list<bool>", [np.array([0, 1, 1, 0, 1], bool), np.ones(3, bool)]),
            "seq_len": ("int64", [5, 3]),
        },
        {"k": "v"},
    )
    with ArrowStream(p) as s:
        assert s.value("input_ids", 0).tolist() == [0, 1, 2, 3, 4]
        assert s.value("loss_mask", 0).tolist() == [False, True, True, False, True]
        assert s.metadata == {"k": "v"}
    raw = p.read_bytes()
    for cut in (0, 7, len(raw) // 2, len(raw) - 9):
        q = tmp_path / f"cut{cut}.arrow"
        q.write_bytes(raw[:cut])
        with pytest.raises(ArrowError):
            ArrowStream(q)


# -- layouts ------------------------------------------------------------------------------------------


def _read_all(path: Path, fmt: str = "auto", hint: int | None = None) -> list:
    ds = open_dumps(path, fmt, hidden_size_hint=hint)
    return list(ds.iter_samples(ds.items))


def test_specforge_padded_rows_are_trimmed(tmp_path: Path) -> None:
    data = rows(3)
    specforge(tmp_path, data, pad_to=20)
    got = _read_all(tmp_path)
    assert [s.layout for s in got] == ["specforge"] * 3
    for s, (ids, mask) in zip(got, data, strict=True):
        assert s.input_ids.tolist() == ids
        assert s.loss_mask.tolist() == [bool(m) for m in mask]
        assert s.trimmed == 20 - len(ids)
        assert s.last_hidden.shape == (len(ids), H) and s.aux_hidden.shape == (len(ids), K * H)
        assert s.num_aux == K and s.dtype == "bfloat16"


def test_specforge_v01_and_gzip(tmp_path: Path) -> None:
    specforge(tmp_path / "a", rows(2), group=5000)
    specforge(tmp_path / "b", rows(2), gz=True)
    assert {s.layout for s in _read_all(tmp_path / "a")} == {"specforge-v0.1"}
    got = _read_all(tmp_path / "b")
    assert [s.item.rel for s in got] == ["rows_0-2000/data_0.ckpt.gz", "rows_0-2000/data_1.ckpt.gz"]
    assert all(s.layout == "specforge" for s in got)


def test_speculators_v05_token_and_layer_major(tmp_path: Path) -> None:
    data = rows(3)
    for sub, layer_major, bool_mask in (("a", False, False), ("b", True, True)):
        speculators(tmp_path / sub, data, layer_major=layer_major, bool_mask=bool_mask)
        got = _read_all(tmp_path / sub)
        assert [s.layout for s in got] == ["speculators"] * 3
        assert [s.item.number for s in got] == [0, 1, 2]
        for s, (ids, mask) in zip(got, data, strict=True):
            assert s.input_ids.tolist() == ids and s.loss_mask.tolist() == [bool(m) for m in mask]
            assert s.aux_hidden.shape == (len(ids), K * H)
        assert LAYOUTS["speculators"].last_norm == "pre"


def test_speculators_without_arrow_has_no_mask(tmp_path: Path) -> None:
    speculators(tmp_path, rows(2), arrow=False)
    got = _read_all(tmp_path)
    assert all(bool(s.loss_mask.all()) and "no loss mask" in s.notes[0] for s in got)


def test_speculators_token_mismatch_is_unusable_sample(tmp_path: Path) -> None:
    data = rows(2)
    speculators(tmp_path, data)
    write_stream(  # the Arrow rows now disagree with hs_1's token_ids
        tmp_path / "data-00000-of-00001.arrow",
        {
            "input_ids": ("list<int64>", [np.asarray(data[0][0]), np.asarray(data[0][0])]),
            "loss_mask": ("list<int64>", [np.asarray(data[0][1])] * 2),
        },
    )
    got = _read_all(tmp_path)
    assert not isinstance(got[0], tuple)
    assert isinstance(got[1], tuple) and "token_ids differ" in got[1][1]


@pytest.mark.parametrize(
    ("build", "layout"),
    [
        (speculators_v04, "speculators-v0.4"),
        (research, "speculators-research"),
        (ge_data, "eagle-ge-data"),
    ],
)
def test_other_layouts(tmp_path: Path, build, layout: str) -> None:
    build(tmp_path, rows(2))
    got = _read_all(tmp_path)
    assert [s.layout for s in got] == [layout] * 2
    assert LAYOUTS[layout].eagle3 == (layout != "eagle-ge-data")
    if layout != "eagle-ge-data":
        assert got[0].aux_hidden.shape[-1] == K * H


@pytest.mark.parametrize("which", ["2025-11-09", "2025-11-10"])
def test_broken_specforge_windows_are_recognised(tmp_path: Path, which: str) -> None:
    specforge_broken(tmp_path, rows(2), which)
    got = _read_all(tmp_path, hint=H)
    assert [s.layout for s in got] == [f"specforge-{which}"] * 2
    assert LAYOUTS[f"specforge-{which}"].broken


def test_format_filter_and_errors(tmp_path: Path) -> None:
    ge_data(tmp_path, rows(1))
    got = _read_all(tmp_path, fmt="specforge")
    assert isinstance(got[0], tuple) and "not one --format specforge reads" in got[0][1]
    with pytest.raises(BadArgumentsError):
        open_dumps(tmp_path, "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UnusableInputError, match="no dump files"):
        open_dumps(tmp_path / "empty")
    with pytest.raises(UnusableInputError, match="not found"):
        open_dumps(tmp_path / "missing")


def test_unusable_files_are_sample_errors_never_executed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "rows_0-2000"
    specforge(tmp_path, rows(1))
    evil_pickle(d / "data_1.ckpt")
    raw = (d / "data_0.ckpt").read_bytes()
    (d / "data_2.ckpt").write_bytes(raw[: len(raw) // 2])
    save(
        {
            "input_ids": torch.arange(5),
            "loss_mask": torch.ones(4),
            "hidden_state": torch.zeros(1, 5, H),
            "aux_hidden_state": torch.zeros(1, 5, K * H),
        },
        d / "data_3.ckpt",
    )
    save({"foo": torch.zeros(2)}, d / "data_4.ckpt")
    (d / "data_5.ckpt.gz").write_bytes(b"\x1f\x8b not really")
    ds = open_dumps(tmp_path)
    got = {
        it.rel: r
        for it, r in ((g.item, None) if not isinstance(g, tuple) else g for g in ds.iter_samples(ds.items))
    }
    assert got["rows_0-2000/data_0.ckpt"] is None
    assert "refused to unpickle" in got["rows_0-2000/data_1.ckpt"]
    assert got["rows_0-2000/data_2.ckpt"]
    assert "mismatched lengths" in got["rows_0-2000/data_3.ckpt"]
    assert (
        "no 'loss_mask'" in got["rows_0-2000/data_4.ckpt"]
        or "no hidden states" in got["rows_0-2000/data_4.ckpt"]
    )
    assert got["rows_0-2000/data_5.ckpt.gz"]
    assert "this must never run" not in capsys.readouterr().out
    with pytest.raises(SampleError):
        ds.read(ds.items[1])


def test_sorted_order_and_sharding(tmp_path: Path) -> None:
    specforge(tmp_path, rows(12))
    ds = open_dumps(tmp_path)
    rels = [it.rel for it in ds.items]
    assert rels == sorted(rels)  # data_10 before data_2: SpecForge's own dump order
    assert [it.number for it in ds.items][:3] == [0, 1, 10]
    shards = [ds.select(None, (i, 3)) for i in range(3)]
    assert sorted(it.index for s in shards for it in s) == list(range(12))
    assert [it.index for it in ds.select(5, (1, 2))] == [1, 3]
