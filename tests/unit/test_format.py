"""eagle3_forensics.views.format: the one set of rules for values a person reads."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eagle3_forensics.views import format as fmt

pd = pytest.importorskip("pandas")


def _clean(text: str) -> bool:
    return text not in ("None", "NaN", "nan") and "\\x" not in text


def test_numbers_follow_one_rule() -> None:
    assert fmt.acceptance_length(3.1) == "3.10"
    assert fmt.acceptance_length(np.float32(1.0)) == "1.00"
    assert fmt.rate(0.87345) == "0.873"
    assert fmt.speed(297.63911) == "297.6 tok/s"
    assert fmt.ratio(0.6645) == "0.66×"
    assert fmt.percent(0.8734) == "87.3%"
    assert fmt.number(7) == "7" and fmt.number(np.int64(7)) == "7"
    assert fmt.yes_no(True) == "yes" and fmt.value(np.bool_(False)) == "no"


@pytest.mark.parametrize("gone", [None, float("nan"), np.nan, np.float64("nan"), pd.NA, pd.NaT])
def test_missing_is_a_dash_never_none_or_nan(gone: object) -> None:
    assert fmt.is_missing(gone)
    assert fmt.value(gone) == "–"
    assert fmt.acceptance_length(gone, "no target") == "– (no target)"
    assert fmt.speed(gone) == fmt.ratio(gone) == fmt.rate(gone) == "–"
    assert not fmt.is_missing(0) and not fmt.is_missing(0.0) and not fmt.is_missing("")


def test_tokens_are_readable() -> None:
    assert fmt.token(" the") == "␣the"
    assert fmt.token("<0xCF>") == "<0xCF>" and fmt.token("<0xcf>") == "<0xCF>"
    assert fmt.token("\\xcf") == "<0xCF>"  # TokenTable's spelling of a lone byte
    assert fmt.token("Ġthe", byte_level=True) == "␣the"  # GPT-2 byte-level piece mapped back
    assert fmt.token("Ï", byte_level=True) == "<0xCF>"  # byte 0xCF alone is not UTF-8
    assert fmt.token("Ċ", byte_level=True) == "\\n"
    assert fmt.token("▁the") == "␣the"  # SentencePiece word boundary
    assert fmt.token("a\tb\x07") == "a\\tb<0x07>"
    assert fmt.token("x\u200by") == "x<U+200B>y"  # zero-width space shown
    assert fmt.token(None, reason="beyond the tokenizer") == "– (beyond the tokenizer)"
    assert fmt.token("") == "– (empty)"
    assert fmt.token_with_id(" the", 262) == "␣the (#262)"
    assert fmt.out_of_range(512) == "out of range (vocab 512)"


def test_flags_become_a_two_column_table() -> None:
    flags = {"norm_before_fc": True, "final_norm": False, "eps": None}
    t = fmt.flags_table(flags)
    assert list(t.columns) == ["flag", "value"]
    assert t.values.tolist() == [["norm_before_fc", "yes"], ["final_norm", "no"], ["eps", "–"]]
    assert fmt.flags_text(flags) == "norm_before_fc yes · final_norm no · eps –"
    assert fmt.flags_text({}) == "–" and fmt.flags_table(None).empty


def test_tidy_drops_a_meaningless_index_and_formats_cells() -> None:
    df = pd.DataFrame(
        {"a": [1.0, None, float("nan")], "b": [None, "x", "a\x07"], "c": [True, False, None]}, dtype=object
    )
    out = fmt.tidy(df)
    assert list(out.columns) == ["a", "b", "c"]  # no index column
    cells = out.values.ravel().tolist()
    assert cells == ["1.000", "–", "yes", "–", "x", "no", "–", "a<0x07>", "–"]
    assert all(isinstance(c, str) and _clean(c) for c in cells)
    named = fmt.tidy(pd.DataFrame({"value": [1, 2]}, index=pd.Index(["p", "q"], name="field")))
    assert list(named.columns) == ["field", "value"] and named["field"].tolist() == ["p", "q"]
    labelled = fmt.tidy(pd.DataFrame({"v": [1]}, index=["row"]))  # unnamed but meaningful
    assert labelled.values.tolist() == [["row", "1"]]
    assert fmt.tidy(pd.DataFrame(columns=["a"])).empty
    ids = fmt.tidy(pd.DataFrame({"draft id": [159, None], "share": [0.5, 0.25]}))  # NaN made the ids floats
    assert ids.values.tolist() == [["159", "0.500"], ["–", "0.250"]]


def test_value_of_containers_and_floats() -> None:
    assert fmt.value([1, None, 2.5]) == "1, –, 2.500"
    assert fmt.value([]) == "–"
    assert fmt.value({"a": 1}) == "a=1"
    assert fmt.value(math.inf) == "inf"
    assert fmt.value(0.000123) == "0.00012" and fmt.value(0.0) == "0.000"
