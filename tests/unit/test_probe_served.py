"""``probe`` as the server sees it: segment accounting on a real chat tokenizer, and the CLI's
--chat-template-kwargs / --lengths / --trained-length on the demo target (a real model, CPU)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("jinja2")
from builders import CHAT_SPECIALS, build_target
from paths import DEMO

from eagle3_forensics.probe.served import (
    length_prompt_ids,
    measured_special_findings,
    render_prompts,
    segment_acceptance,
)
from eagle3_forensics.vocab.chat import ChatTemplate
from eagle3_forensics.vocab.special import special_coverage, target_chat

THINK, END_THINK, EOS = CHAT_SPECIALS["<think>"], CHAT_SPECIALS["</think>"], CHAT_SPECIALS["<|end|>"]


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> ChatTemplate:
    c = target_chat(build_target(tmp_path_factory.mktemp("t"), chat=CHAT_SPECIALS))
    assert c is not None
    return c


def test_segments_count_each_draft_at_the_position_it_lands_on(chat: ChatTemplate) -> None:
    (prompt,) = render_prompts(chat, ["w20 w21"])
    assert prompt[-1] == CHAT_SPECIALS["<|assistant|>"]  # the generation prompt, as a server renders it
    out = [THINK, 30, 31, END_THINK, 40, 41, EOS]
    # out[0] is the prefill's bonus; then (first draft's index in out, drafts accepted) per verify step, K=2
    cycles = [(1, 1), (3, 2), (6, 0)]
    seg = segment_acceptance([prompt], [out], [cycles], 2, chat)["by_segment"]
    assert seg["reasoning"] == {
        "positions": 2,
        "share_of_positions": 2 / 7,
        "proposed": 2,
        "accepted": 1,
        "acceptance_rate": 0.5,
        "verify_steps": 1,
        "acceptance_length": 2.0,
    }
    assert (seg["scaffold"]["proposed"], seg["scaffold"]["accepted"], seg["scaffold"]["verify_steps"]) == (
        2,
        1,
        2,
    )
    assert seg["scaffold"]["acceptance_length"] == 2.0  # steps at out[3] (2 accepted) and out[6] (none)
    assert (seg["answer"]["proposed"], seg["answer"]["accepted"], seg["answer"]["acceptance_length"]) == (
        1,
        1,
        None,
    )
    assert seg["tool_call"]["positions"] == 0


def test_tokens_outside_the_draft_vocabulary_measured(chat: ChatTemplate) -> None:
    import numpy as np

    (prompt,) = render_prompts(chat, ["w20 w21"])
    out = [THINK, 30, 31, END_THINK, 40, 41, EOS]
    cycles = [(1, 2), (3, 0), (4, 2)]  # the second step stops at </think>
    vocab = np.ones(64, dtype=bool)
    vocab[END_THINK] = False
    seg = segment_acceptance([prompt], [out], [cycles], 2, chat, vocab)["by_segment"]
    assert (
        seg["scaffold"]["outside_draft_vocab"] == 1 and seg["scaffold"]["steps_cut_outside_draft_vocab"] == 1
    )
    assert seg["reasoning"]["outside_draft_vocab"] == 0
    (f,) = measured_special_findings(special_coverage(vocab, chat, [EOS]), [out], [cycles], 2)
    assert f.code == "VOCAB_SPECIAL_TOKENS_MISSING" and f.severity.value == "error"
    cost = f.evidence["cost"]
    assert cost["basis"] == "measured" and cost["share_of_positions"] == pytest.approx(1 / 7)
    assert cost["acceptance_length_drop"] == pytest.approx(1 / 3)
    assert (
        measured_special_findings(special_coverage(np.ones(64, dtype=bool), chat, [EOS]), [out], [cycles], 2)
        == []
    )


def test_non_thinking_generation_prompt_labels_the_output_answer(chat: ChatTemplate) -> None:
    (prompt,) = render_prompts(chat, ["w20"], {"enable_thinking": False})
    assert prompt[-2:] == [THINK, END_THINK]
    seg = segment_acceptance([prompt], [[40, 41, 42]], [[(1, 2)]], 2, chat)["by_segment"]
    assert seg["answer"]["positions"] == 3 and seg["answer"]["accepted"] == 2
    # the same output after a generation prompt that leaves a think block open is reasoning
    seg = segment_acceptance([[*prompt[:-1]]], [[40, 41, 42]], [[(1, 2)]], 2, chat)["by_segment"]
    assert seg["reasoning"]["positions"] == 3


def test_length_prompts_reach_the_length(chat: ChatTemplate) -> None:
    texts = ["w20 w21 w22", "w23 w24"]
    ids = length_prompt_ids(chat.encode, texts, 9, 2)
    assert [len(i) for i in ids] == [10, 10] and ids[0][:3] == [20, 21, 22] and ids[1][:2] == [23, 24]


@pytest.mark.skipif(not (DEMO / "target" / "model.safetensors").is_file(), reason="no demo data")
def test_cli_chat_kwargs_and_lengths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers")
    from eagle3_forensics.cli.main import main

    target = tmp_path / "target"
    shutil.copytree(DEMO / "target", target)
    cfg = json.loads((target / "tokenizer_config.json").read_text(encoding="utf-8"))
    if "chat_template" not in cfg:  # the demo target before it became chat-capable: a plain template
        cfg["chat_template"] = "{% for m in messages %}{{ m.content }}{% endfor %}"
        (target / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("\n".join(json.dumps({"prompt": p}) for p in _demo_prompts(2)), encoding="utf-8")
    argv = [
        "probe", str(DEMO / "drafters" / "healthy"), "--target", str(target), "--prompts", str(prompts),
        "--device", "cpu", "--max-new-tokens", "16", "--no-sweep", "--no-teacher-forced",
        "--chat-template-kwargs", '{"enable_thinking": false}', "--lengths", "48,4000",
        "--trained-length", "100", "--length-prompts", "1", "--json",
    ]  # fmt: skip
    code = main(argv)
    obj = json.loads(capsys.readouterr().out)
    assert code == 0 and obj["lossless"] is True
    assert obj["chat"]["template_kwargs"] == {"enable_thinking": False}
    seg = obj["segments"]["by_segment"]
    assert sum(s["proposed"] for s in seg.values()) > 0
    # drafts past the output budget (the last step may overshoot it) have no label and are not counted
    assert 0 < sum(s["accepted"] for s in seg.values()) <= obj["accepted"]
    short, long = obj["by_length"]["rows"]
    assert (
        short["beyond_trained"] is False and short["acceptance_length"] >= 1 and short["prompt_tokens"] >= 48
    )
    assert long["beyond_trained"] is True and long["acceptance_length"] is None and "exceed" in long["note"]
    assert obj["by_length"]["trained_length"] == 100
    assert obj["findings"] == []  # the healthy drafter holds every structural token the target generates
    assert all("outside_draft_vocab" in row for row in seg.values())


def _demo_prompts(n: int) -> list[str]:
    lines = (DEMO / "prompts.jsonl").read_text(encoding="utf-8").splitlines()[:n]
    return [json.loads(line)["prompt"] for line in lines]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--chat-template-kwargs", "[1]"], "must be a JSON object"),
        (["--chat-template-kwargs", "{bad"], "is not JSON"),
        (["--lengths", "12,x"], "--lengths"),
    ],
)
def test_cli_bad_served_options(extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    from eagle3_forensics.cli.main import main

    argv = ["probe", "d", "--target", "t", "--prompts", "p.jsonl", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.skipif(not (DEMO / "dumps" / "specforge").is_dir(), reason="no demo data")
def test_trained_length_from_dumps() -> None:
    pytest.importorskip("torch")
    from eagle3_forensics.probe.served import trained_length_from_dumps

    t = trained_length_from_dumps(DEMO / "dumps" / "specforge")
    assert t["samples"] > 0 and t["p99"] <= t["max"] and t["max"] > 0
