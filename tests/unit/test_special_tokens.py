"""VOCAB_SPECIAL_TOKENS_MISSING through ``vocab classify --target --ids``: what is missing and its cost.

Real files throughout: a drafter checkpoint, a word-level ``tokenizer.json`` with the demo chat
format's special tokens and a Qwen3-like template, and a token-id file with a loss mask.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("jinja2")
pytest.importorskip("torch")  # the probe extra: the token-id files and drafters are written with it
import torch
from builders import CHAT_SPECIALS, build_drafter, build_target, selection
from safetensors.torch import save_file

from eagle3_forensics.cli import main

OUT = 10  # not in the default draft vocabulary (0..9, then scattered ids from 11 on)


def _ids(path: Path, rows: list[list[int]], masks: list[list[int]]) -> Path:
    save_file(
        {
            "input_ids": torch.tensor(rows, dtype=torch.int64),
            "loss_mask": torch.tensor(masks, dtype=torch.int64),
        },
        str(path),
    )
    return path


def _classify(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main(["vocab", "classify", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_missing_think_end_costed_by_its_share_of_masked_positions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert OUT not in set(selection().tolist())
    drafter = build_drafter(tmp_path / "d")
    target = build_target(tmp_path / "t", chat={**CHAT_SPECIALS, "</think>": OUT})
    # 8 masked positions, 2 of them </think>; the unmasked one at the end is not counted
    rows = [[3, 20, 5, 4, 6, 21, OUT, 22], [3, 23, 5, 4, 6, 24, OUT, OUT]]
    masks = [[0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 0]]
    code, obj = _classify(
        capsys,
        str(drafter),
        "--target",
        str(target),
        "--ids",
        str(_ids(tmp_path / "i.safetensors", rows, masks)),
    )
    assert code == 1  # an error-level finding
    (f,) = obj["findings"]
    assert f["code"] == "VOCAB_SPECIAL_TOKENS_MISSING" and f["severity"] == "error"
    cost = f["evidence"]["cost"]
    assert cost["share_of_positions"] == pytest.approx(2 / 8)
    assert cost["basis"] == "estimated" and cost["acceptance_length_drop"] is None
    assert f["evidence"]["missing"] == [
        {"id": OUT, "text": "</think>", "kind": "reasoning_tag", "role": "critical", "count": 2}
    ]
    assert obj["special_tokens"]["positions"] == 8


def test_healthy_map_gets_no_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    drafter = build_drafter(tmp_path / "d")
    target = build_target(tmp_path / "t", chat=CHAT_SPECIALS)
    rows, masks = [[3, 20, 5, 4, 6, 21, 7, 22]], [[0, 0, 0, 1, 1, 1, 1, 1]]
    code, obj = _classify(
        capsys,
        str(drafter),
        "--target",
        str(target),
        "--ids",
        str(_ids(tmp_path / "i.safetensors", rows, masks)),
    )
    assert code == 0 and obj["findings"] == []
    assert obj["special_tokens"]["missing_count"] == 0


def test_prompt_side_marker_only_when_data_shows_it_and_byte_pieces_by_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sel = selection().tolist()
    outside = [i for i in range(11, 64) if i not in sel]
    byte_in, byte_out = 8, outside[1]  # two SentencePiece byte pieces: one selected, one not
    chat = {**CHAT_SPECIALS, "<|user|>": OUT, "<0x41>": byte_in, "<0xC3>": byte_out}
    drafter = build_drafter(tmp_path / "d")
    target = build_target(tmp_path / "t", chat=chat)
    code, obj = _classify(capsys, str(drafter), "--target", str(target))
    assert code == 0 and obj["findings"] == []  # <|user|> is prompt-side; byte pieces need data
    assert obj["special_tokens"]["missing"][0]["role"] == "prompt"
    rows = [[OUT, 20, 5, 4, 6, 21, byte_out, 22]]
    masks = [[0, 0, 0, 1, 1, 1, 1, 1]]  # <|user|> only in the prompt; the missing byte piece once in 5
    ids = str(_ids(tmp_path / "i.safetensors", rows, masks))
    code, obj = _classify(capsys, str(drafter), "--target", str(target), "--ids", ids)
    assert code == 0
    (f,) = obj["findings"]
    assert f["evidence"]["what"] == "byte_fallback" and f["severity"] == "warning"
    assert f["evidence"]["cost"]["share_of_positions"] == pytest.approx(1 / 5)
    assert obj["special_tokens"]["byte_pieces"] == 2 and obj["special_tokens"]["missing_bytes"] == 1
    # a data set whose responses do contain the marker (multi-turn text in the loss mask): a warning
    ids = str(_ids(tmp_path / "j.safetensors", rows, [[1, 1, 1, 1, 1, 1, 0, 1]]))
    code, obj = _classify(capsys, str(drafter), "--target", str(target), "--ids", ids)
    (f,) = obj["findings"]
    assert f["severity"] == "warning" and f["evidence"]["roles"] == ["prompt"]
    assert f["evidence"]["cost"]["share_of_positions"] == pytest.approx(1 / 7)


def test_without_ids_no_cost_and_ids_need_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    drafter = build_drafter(tmp_path / "d")
    target = build_target(tmp_path / "t", chat={**CHAT_SPECIALS, "<|end|>": OUT})
    code, obj = _classify(capsys, str(drafter), "--target", str(target))
    assert code == 1
    (f,) = obj["findings"]
    assert f["evidence"]["kinds"] == ["eos"] and f["evidence"]["cost"]["share_of_positions"] is None
    code = main(["vocab", "classify", str(drafter), "--ids", "x.npy"])
    assert code == 2 and "--ids needs --target" in capsys.readouterr().err
