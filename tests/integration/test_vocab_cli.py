"""``eagle3-forensics vocab ...`` end to end, and the inputs it reads (token-id files, JSONL corpora, maps)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier (tests/packaging)
import torch
from paths import DEMO
from safetensors.torch import load_file, save_file

from eagle3_forensics import cli
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.vocab.inputs import (
    iter_token_chunks,
    load_mapping,
    load_token_ids,
    save_mapping,
    tokenize_corpus,
)
from eagle3_forensics.vocab.mapping import build_vocab_mapping

TARGET = DEMO / "target"
DRAFTERS = DEMO / "drafters"
V, v = 512, 256


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["vocab", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code, out, _err = run(capsys, *argv, "--json")
    return code, json.loads(out)


@pytest.fixture(scope="module")
def demo_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private demo dir (target linked) with a freshly written corpus: always self-consistent."""
    from eagle3_forensics.demo.corpus import write_demo_corpus

    root = tmp_path_factory.mktemp("demo")
    (root / "target").symlink_to(TARGET, target_is_directory=True)
    write_demo_corpus(root)
    return root


@pytest.fixture
def ids_2d() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    ids = (rng.zipf(1.3, size=(64, 40)) % V).astype(np.int64)
    mask = np.zeros_like(ids, dtype=bool)
    mask[:, 15:] = True
    return ids, mask


# -- classify ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variant", "kind", "fix", "rc"),
    [
        ("healthy", "consistent_offsets", None, 0),
        ("d2t_absolute", "absolute", "absolute_to_offsets", 1),
        ("d2t_double_offset", "double_offset", "undo_double_offset", 1),
        ("d2t_missing", "missing", "d2t_from_t2d", 1),
    ],
)
def test_classify_demo(
    capsys: pytest.CaptureFixture[str], variant: str, kind: str, fix: str | None, rc: int
) -> None:
    code, out = run_json(capsys, "classify", str(DRAFTERS / variant), "--target", str(TARGET))
    assert code == rc
    assert out["classification"]["kind"] == kind and out["consistent"] is (rc == 0)
    assert out["fix"]["function"] == fix and out["fix"]["verified_kind"] == "consistent_offsets"
    assert out["selection"]["from"] == "t2d" and out["selection"]["fingerprint"].startswith("sha256:")
    check = out["lm_head_check"]
    assert check is not None and check["method"] in ("exact", "cosine (heuristic)")
    if variant in ("healthy", "d2t_absolute", "d2t_double_offset"):
        assert (
            check["best"]
            == {"healthy": "offsets", "d2t_absolute": "absolute", "d2t_double_offset": "double_offset"}[
                variant
            ]
        )
        assert check["d2t_confirmed"] is (variant == "healthy")


def test_classify_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "classify", str(DRAFTERS / "d2t_double_offset"))
    assert code == 1 and err == ""
    assert "kind: double_offset" in out and "first wrong draft id: 1" in out and "undo_double_offset" in out


# -- build ------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".safetensors", ".pt", ".npz", ".npy"])
def test_build_from_each_format(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, ids_2d: Any, suffix: str
) -> None:
    ids, mask = ids_2d
    src = tmp_path / f"ids{suffix}"
    if suffix == ".safetensors":
        save_file({"input_ids": torch.from_numpy(ids), "loss_mask": torch.from_numpy(mask)}, str(src))
    elif suffix == ".pt":
        torch.save({"input_ids": torch.from_numpy(ids), "loss_mask": torch.from_numpy(mask)}, str(src))
    elif suffix == ".npz":
        np.savez(src, input_ids=ids, loss_mask=mask)
    else:
        np.save(src, ids)
    with_mask = suffix != ".npy"
    out = tmp_path / "map.safetensors"
    code, res = run_json(
        capsys,
        "build",
        "--ids",
        str(src),
        "--draft-vocab-size",
        "32",
        "--target-vocab-size",
        str(V),
        "--out",
        str(out),
        "--tie-break",
        "first_row",
    )
    assert code == 0
    expect = build_vocab_mapping(ids, 32, V, loss_mask=mask if with_mask else None, tie_break="first_row")
    written = load_file(str(out))
    assert written["d2t"].dtype == torch.int64 and written["t2d"].dtype == torch.bool
    assert torch.equal(written["d2t"], expect.d2t) and torch.equal(written["t2d"], expect.t2d)
    assert res["fingerprint"] == expect.fingerprint and res["counted_tokens"] == expect.counted
    assert res["out"] == str(out) and res["padded"] == 0
    loaded = load_mapping(out)
    assert loaded.source == "mapping file" and loaded.metadata["fingerprint"] == expect.fingerprint
    assert loaded.classify().kind == "consistent_offsets"


def test_build_from_corpus_equals_build_from_ids(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, demo_copy: Path
) -> None:
    a, b = tmp_path / "a.safetensors", tmp_path / "b.pt"
    ca, ra = run_json(
        capsys,
        "build",
        "--ids",
        str(demo_copy / "corpus_ids.safetensors"),
        "--draft-vocab-size",
        "100",
        "--target-vocab-size",
        str(V),
        "--out",
        str(a),
    )
    cb, rb = run_json(
        capsys,
        "build",
        "--corpus",
        str(demo_copy / "corpus.jsonl"),
        "--tokenizer",
        str(TARGET),
        "--draft-vocab-size",
        "100",
        "--target-vocab-size",
        str(V),
        "--out",
        str(b),
    )
    assert ca == cb == 0
    assert ra["fingerprint"] == rb["fingerprint"] and ra["counted_tokens"] == rb["counted_tokens"]
    assert torch.load(str(b), weights_only=True)["d2t"].tolist() == load_file(str(a))["d2t"].tolist()
    code, out, _ = run(capsys, "compare", str(a), str(b))
    assert code == 0 and "same selection" in out


def test_build_pads_with_one_warning_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "ids.npy"
    np.save(src, np.array([5, 5, 7, 9], dtype=np.int64))
    code, _out, err = run(
        capsys,
        "build",
        "--ids",
        str(src),
        "--draft-vocab-size",
        "6",
        "--target-vocab-size",
        "20",
        "--out",
        str(tmp_path / "m.safetensors"),
    )
    assert code == 0
    assert err.count("\n") == 1 and err.startswith("eagle3-forensics: warning: only 3 distinct")
    assert load_file(str(tmp_path / "m.safetensors"))["d2t"].tolist() == [0, 0, 0, 2, 3, 4]


# -- compare and coverage ----------------------------------------------------------------------------


def test_compare(capsys: pytest.CaptureFixture[str]) -> None:
    code, res = run_json(capsys, "compare", str(DRAFTERS / "healthy"), str(DRAFTERS / "d2t_absolute"))
    assert code == 0  # the same selection (both t2d), stored differently
    assert res["identical"] and res["jaccard"] == 1.0 and res["d2t_equal"] is False
    assert (
        res["same_map"] is False and res["read_differ"] == 255
    )  # engines read d2t[i] + i: all but id 0 differ
    assert res["a"]["kind"] == "consistent_offsets" and res["b"]["kind"] == "absolute"


def test_compare_differs(capsys: pytest.CaptureFixture[str], tmp_path: Path, demo_copy: Path) -> None:
    out = tmp_path / "rebuilt.safetensors"
    run(
        capsys,
        "build",
        "--ids",
        str(demo_copy / "corpus_ids.safetensors"),
        "--draft-vocab-size",
        str(v),
        "--target-vocab-size",
        str(V),
        "--out",
        str(out),
    )
    code, res = run_json(capsys, "compare", str(DRAFTERS / "healthy"), str(out), "--limit", "3")
    assert code == 1 and not res["identical"]
    assert res["common"] + res["only_in_a"]["count"] == v == res["common"] + res["only_in_b"]["count"]
    assert len(res["only_in_a"]["ids"]) == 3
    assert 0 < res["jaccard"] < 1


def test_coverage(capsys: pytest.CaptureFixture[str], demo_copy: Path) -> None:
    code, res = run_json(
        capsys,
        "coverage",
        str(DRAFTERS / "healthy"),
        "--ids",
        str(demo_copy / "corpus_ids.safetensors"),
        "--target",
        str(TARGET),
        "--top",
        "5",
    )
    assert code == 0
    ids, mask = load_token_ids(demo_copy / "corpus_ids.safetensors")
    t2d = load_file(str(DRAFTERS / "healthy" / "model.safetensors"))["t2d"].numpy()
    counted = ids[mask]
    assert res["counted_tokens"] == counted.size
    assert res["coverage"] == pytest.approx(t2d[counted].mean(), abs=1e-6)
    assert res["best_possible_coverage"] >= res["coverage"]
    assert len(res["top_uncovered"]) == 5 and all(not t2d[r["id"]] for r in res["top_uncovered"])
    assert sum(r["tokens"] for r in res["by_class"]) == res["counted_tokens"]
    code, res2 = run_json(
        capsys,
        "coverage",
        str(DRAFTERS / "healthy"),
        "--corpus",
        str(demo_copy / "corpus.jsonl"),
        "--target",
        str(TARGET),
    )
    assert code == 0 and res2["coverage"] == res["coverage"]
    code, out, _ = run(
        capsys,
        "coverage",
        str(DRAFTERS / "healthy"),
        "--ids",
        str(demo_copy / "corpus_ids.safetensors"),
        "--target",
        str(TARGET),
    )
    assert code == 0 and "most frequent uncovered tokens" in out


# -- bad input: one line on stderr, exit 2 -------------------------------------------------------------


def _no_template_target(tmp: Path) -> Path:
    """The demo target's tokenizer without its chat template (the demo target chats since issue 22)."""
    d = tmp / "plain-target"
    d.mkdir(exist_ok=True)
    shutil.copy(TARGET / "tokenizer.json", d / "tokenizer.json")
    cfg = json.loads((TARGET / "tokenizer_config.json").read_text(encoding="utf-8"))
    cfg.pop("chat_template", None)
    (d / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return d


def _bad_inputs(tmp: Path) -> dict[str, list[str]]:
    np.save(tmp / "high.npy", np.array([1, 2, 600]))
    np.save(tmp / "neg.npy", np.array([1, -2, 3]))
    save_file(
        {"input_ids": torch.zeros(2, 3, dtype=torch.int64), "loss_mask": torch.ones(3, 2, dtype=torch.bool)},
        str(tmp / "shape.safetensors"),
    )
    save_file(
        {"input_ids": torch.ones(2, 3, dtype=torch.int64), "loss_mask": torch.zeros(2, 3, dtype=torch.bool)},
        str(tmp / "nomask.safetensors"),
    )
    np.save(tmp / "empty.npy", np.zeros(0, dtype=np.int64))
    (tmp / "empty.jsonl").write_text("\n")
    (tmp / "chat.jsonl").write_text(
        json.dumps(
            {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "the cat"}]}
        )
        + "\n"
    )
    (tmp / "bad.jsonl").write_text("{not json\n")
    out = ["--out", str(tmp / "o.safetensors")]
    sizes = ["--draft-vocab-size", "4", "--target-vocab-size", str(V)]
    return {
        "out of range": ["build", "--ids", str(tmp / "high.npy"), *sizes, *out],
        "negative": ["build", "--ids", str(tmp / "neg.npy"), *sizes, *out],
        "mask shape": ["build", "--ids", str(tmp / "shape.safetensors"), *sizes, *out],
        "all-zero mask": ["build", "--ids", str(tmp / "nomask.safetensors"), *sizes, *out],
        "empty ids": ["build", "--ids", str(tmp / "empty.npy"), *sizes, *out],
        "empty corpus": [
            "build",
            "--corpus",
            str(tmp / "empty.jsonl"),
            "--tokenizer",
            str(TARGET),
            *sizes,
            *out,
        ],
        "draft > target": [
            "build",
            "--ids",
            str(tmp / "neg.npy"),
            "--draft-vocab-size",
            "600",
            "--target-vocab-size",
            str(V),
            *out,
        ],
        "missing tokenizer": [
            "build",
            "--corpus",
            str(tmp / "chat.jsonl"),
            "--tokenizer",
            str(tmp / "nope"),
            *sizes,
            *out,
        ],
        "no --tokenizer": ["build", "--corpus", str(tmp / "chat.jsonl"), *sizes, *out],
        "no chat template": [
            "build",
            "--corpus",
            str(tmp / "chat.jsonl"),
            "--tokenizer",
            str(_no_template_target(tmp)),
            *sizes,
            *out,
        ],
        "bad jsonl": ["build", "--corpus", str(tmp / "bad.jsonl"), "--tokenizer", str(TARGET), *sizes, *out],
        "missing file": ["build", "--ids", str(tmp / "absent.npy"), *sizes, *out],
        "bad output": [
            "build",
            "--ids",
            str(tmp / "high.npy"),
            "--draft-vocab-size",
            "1",
            "--target-vocab-size",
            str(V),
            "--out",
            str(tmp / "o.txt"),
        ],
        "no ids or corpus": ["build", *sizes, *out],
        "classify missing": ["classify", str(tmp / "nothing")],
        "coverage mismatch": [
            "coverage",
            str(DRAFTERS / "healthy"),
            "--ids",
            str(tmp / "high.npy"),
            "--target",
            str(TARGET),
        ],
        "no subcommand": [],
    }


_REASONS = {
    "out of range": "must lie in [0, 512); found 1..600",
    "negative": "found -2..3",
    "mask shape": "loss_mask",
    "all-zero mask": "no counted tokens",
    "empty ids": "is empty",
    "empty corpus": "empty corpus",
    "draft > target": "draft_vocab_size 600",
    "missing tokenizer": "nope/tokenizer.json not found",
    "no chat template": "no chat template",
    "bad output": "must end in .safetensors or .pt",
}


def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for name, argv in _bad_inputs(tmp_path).items():
        code, out, err = _run_raw(capsys, argv)
        assert code == 2, (name, out, err)
        assert err.count("\n") == 1 and err.startswith("eagle3-forensics"), (name, err)
        assert "Traceback" not in err and "internal error" not in err, (name, err)
        assert _REASONS.get(name, "") in err, (name, err)


def _run_raw(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    try:
        code = cli.main(["vocab", *argv])
    except SystemExit as exc:  # argparse errors exit 2 from the parser
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


# -- inputs -----------------------------------------------------------------------------------------


def test_iter_token_chunks_streams_rows(tmp_path: Path, ids_2d: Any) -> None:
    ids, mask = ids_2d
    save_file(
        {"input_ids": torch.from_numpy(ids), "loss_mask": torch.from_numpy(mask)},
        str(tmp_path / "a.safetensors"),
    )
    np.save(tmp_path / "b.npy", ids)
    chunks = list(iter_token_chunks(tmp_path / "a.safetensors", chunk_tokens=100))
    assert len(chunks) == 32 and all(c.shape == (2, 40) and m is not None for c, m in chunks)
    assert np.array_equal(np.concatenate([c for c, _ in chunks]), ids)
    assert np.array_equal(np.concatenate([m for _, m in chunks if m is not None]), mask)
    npy = list(iter_token_chunks(tmp_path / "b.npy", chunk_tokens=1000))
    assert len(npy) == 3 and npy[0][1] is None
    flat = tmp_path / "flat.npy"
    np.save(flat, ids.reshape(-1))
    (one,) = list(iter_token_chunks(flat))  # a 1-D file is one row, streamed lazily by the counter
    assert one[0].shape == (ids.size,)
    by_rows = build_vocab_mapping(
        iter_token_chunks(tmp_path / "a.safetensors", chunk_tokens=100), 16, V, tie_break="first_row"
    )
    assert torch.equal(
        by_rows.t2d, build_vocab_mapping(ids, 16, V, loss_mask=mask, tie_break="first_row").t2d
    )
    ids_loaded, mask_loaded = load_token_ids(tmp_path / "a.safetensors")
    assert np.array_equal(ids_loaded, ids) and mask_loaded is not None and np.array_equal(mask_loaded, mask)


def test_load_mapping_forms(tmp_path: Path) -> None:
    healthy = load_mapping(DRAFTERS / "healthy")
    assert healthy.source == "checkpoint" and (healthy.target_vocab_size, healthy.draft_vocab_size) == (V, v)
    assert load_mapping(DRAFTERS / "healthy" / "model.safetensors").source == "checkpoint"
    torch.save({"d2t": healthy.d2t, "t2d": healthy.t2d}, str(tmp_path / "cache.pt"))  # SpecForge cache
    spec = tmp_path / "speculators"
    spec.mkdir()
    assert healthy.d2t is not None and healthy.t2d is not None
    np.save(spec / "d2t.npy", healthy.d2t.numpy())
    np.save(spec / "t2d.npy", healthy.t2d.numpy())
    save_mapping(healthy, tmp_path / "out" / "map.safetensors", {"note": "x"})
    for p, source in (
        (tmp_path / "cache.pt", "mapping file"),
        (spec, "speculators d2t.npy/t2d.npy"),
        (spec / "d2t.npy", "speculators d2t.npy/t2d.npy"),
        (tmp_path / "out" / "map.safetensors", "mapping file"),
    ):
        m = load_mapping(p)
        assert m.source == source and m.classify().kind == "consistent_offsets", p
        assert m.d2t is not None and torch.equal(m.d2t, healthy.d2t)
        assert m.selected()[0].tolist() == healthy.selected()[0].tolist()
    assert load_mapping(tmp_path / "out" / "map.safetensors").metadata == {"note": "x"}
    np.save(tmp_path / "lone.npy", np.zeros(3))
    for bad in (tmp_path / "lone.npy", tmp_path / "absent", tmp_path):
        with pytest.raises(UnusableInputError):
            load_mapping(bad)
    missing = load_mapping(DRAFTERS / "d2t_missing", TARGET)
    assert missing.d2t is None and missing.classify().kind == "missing"


def test_tokenize_corpus_masks(tmp_path: Path) -> None:
    tok = tmp_path / "tok"
    tok.mkdir()
    (tok / "tokenizer.json").symlink_to(TARGET / "tokenizer.json")
    template = (
        "{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{{ eos_token }}{% endfor %}"
    )
    (tok / "tokenizer_config.json").write_text(
        json.dumps({"bos_token": "<s>", "eos_token": "</s>", "chat_template": template})
    )
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"text": "the cat sees the red ball"},
                {"prompt": "Q: who?\nA:", "completion": " the dog</s>"},
                {
                    "conversations": [
                        {"from": "human", "value": "what does the cat see?"},
                        {"from": "gpt", "value": "the red ball"},
                    ]
                },
            ]
        )
        + "\n"
    )
    tc = tokenize_corpus(corpus, tok)
    assert tc.kinds == {"text": 1, "prompt_completion": 1, "conversation": 1} and tc.unlocated_turns == 0
    from tokenizers import Tokenizer

    t = Tokenizer.from_file(str(tok / "tokenizer.json"))
    assert tc.masks[0].all()
    counted = [
        t.decode([i]) for i, keep in zip(tc.rows[1].tolist(), tc.masks[1].tolist(), strict=True) if keep
    ]
    assert "".join(counted) == " the dog" and tc.rows[1][-1] == 1 and tc.masks[1][-1]  # </s> counted
    chat = t.decode(tc.rows[2][tc.masks[2]].tolist())
    assert chat.strip() == "the red ball" and tc.rows[2][0] == 0  # <s> from the template, not counted
    ids, mask = tc.padded()
    assert ids.shape == mask.shape == (3, max(len(r) for r in tc.rows)) and mask.sum() == tc.counted
    (tmp_path / "inline.jinja").write_text(template)
    assert tokenize_corpus(corpus, TARGET, chat_template=str(tmp_path / "inline.jinja")).counted == tc.counted
    with pytest.raises(UnusableInputError, match="no chat template"):
        tokenize_corpus(corpus, _no_template_target(tmp_path))


def test_package_exports_lazily() -> None:
    code = (
        "import sys, eagle3_forensics as e; assert 'torch' not in sys.modules and 'numpy' not in sys.modules; "
        "assert callable(e.build_vocab_mapping) and callable(e.classify_mapping); print('ok')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
    import eagle3_forensics

    with pytest.raises(AttributeError):
        _ = eagle3_forensics.not_a_name
