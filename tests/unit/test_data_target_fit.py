"""``audit-data --target`` on data made outside the project from a chat target (tests/chat_data_builders):
target-regenerated against foreign responses, thinking against non-thinking renderings, short against
long, another template; each cause named, nothing on the healthy data; the CLI surface and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from paths import DEMO

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("jinja2")

from chat_data_builders import Target, build_chat_target, make_set, write_specforge

from eagle3_forensics.checks.data import audit_data, finish_audit, merge_scans, scan_data
from eagle3_forensics.io.dumps import ScanOptions
from eagle3_forensics.probe.offline.teacher import GreedyLabeller
from eagle3_forensics.vocab.chat import load_chat_template
from eagle3_forensics.vocab.renderings import classify, outcome, renderings

# generating five chat data sets with a real target is minutes of CPU (the fixture `world`): make test-all
pytestmark = pytest.mark.slow

OTHER_TEMPLATE = (  # the same markers with a newline after each: not byte-identical to the target's
    "{%- for m in messages -%}"
    "{%- if m.role == 'user' -%}<|user|>{{ m.content }}<|end|>{{ '\\n' }}"
    "{%- elif m.role == 'assistant' -%}<|assistant|>{{ '\\n' }}{{ m.content }}<|end|>{{ '\\n' }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{{ '\\n' }}{%- endif -%}"
)


DEMO_TARGET = DEMO / "target"
SERVED = "vllm serve target --max-model-len 256"  # the context every run is judged against


def _chat_target(root: Path) -> Path:
    """The demo target once it speaks the demo chat format (issue 22's i-demo), else a tiny one built here."""
    cfg = DEMO_TARGET / "tokenizer_config.json"
    if cfg.is_file() and "chat_template" in json.loads(cfg.read_text(encoding="utf-8")):
        return DEMO_TARGET
    return build_chat_target(root / "target", max_pos=256)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("chat")
    tdir = _chat_target(root)
    t = Target.load(tdir)
    sets = {
        "healthy": make_set(t, root / "healthy", count=6),
        "foreign": make_set(t, root / "foreign", writer="foreign", count=6),
        "no_thinking": make_set(t, root / "no_thinking", mode="non_thinking", count=6),
        "short": make_set(t, root / "short", count=6, n=8, cut=32),
        "other_template": make_set(t, root / "other", count=4, template=OTHER_TEMPLATE),
    }
    return {"target": tdir, **sets}


def run(world: dict[str, Path], name: str, **kw: Any) -> Any:
    kw.setdefault("launch", SERVED)
    return audit_data(
        world[name], ScanOptions(target=world["target"]), labeller=GreedyLabeller(world["target"]), **kw
    )


def codes(a: Any) -> dict[str, str]:
    return {f.code: f.severity.value for f in a.findings}


def test_healthy_regenerated_data_is_silent(world: dict[str, Path]) -> None:
    a = run(world, "healthy")
    assert codes(a) == {"DATA_TRAINED_LENGTH": "info"}, [f.to_dict() for f in a.findings]
    assert a.exit_code == 0
    tf = a.summary["target_fit"]
    assert tf["agreement"]["rate"] > 0.9 and tf["agreement"]["samples"] == 6
    assert tf["template"]["outcomes"] == {"reasoning": 6} and tf["template"]["reasoning_share"] == 1.0
    assert tf["template"]["served_mode"] == "thinking" and tf["template"]["data_mode"] == "thinking"
    assert tf["template"]["not_byte_identical"] == 0
    assert tf["serving_context"] == {"tokens": 256, "from": "--launch (--max-model-len)"}


def test_foreign_responses_are_named(world: dict[str, Path]) -> None:
    a = run(world, "foreign")
    assert codes(a)["DATA_NOT_FROM_TARGET"] in ("warning", "error")
    assert "DATA_TEMPLATE_MISMATCH" not in codes(a) and "CONTEXT_BEYOND_TRAINING" not in codes(a)
    f = next(f for f in a.findings if f.code == "DATA_NOT_FROM_TARGET")
    ev = f.evidence
    healthy = run(world, "healthy").summary["target_fit"]["agreement"]
    assert ev["rate"] < healthy["rate"] - 0.25 and len(ev["worst"]) == 6
    assert ev["per_sample"]["max"] < healthy["per_sample"]["min"]
    assert ev["cost"]["basis"] == "estimated" and ev["cost"]["share_of_positions"] == pytest.approx(
        ev["expected_at_temperature_max"] - ev["rate"], abs=1e-5
    )
    assert ev["decision"]["z"] < -3 and ev["thresholds"]["margin"] > 0
    assert ev["teacher"]["kind"] == "target" and a.exit_code == (1 if f.severity.value == "error" else 0)


def test_non_thinking_data_served_thinking(world: dict[str, Path]) -> None:
    a = run(world, "no_thinking")
    assert codes(a) == {"DATA_TEMPLATE_MISMATCH": "error", "DATA_TRAINED_LENGTH": "info"}
    f = next(f for f in a.findings if f.code == "DATA_TEMPLATE_MISMATCH")
    assert f.evidence["data_mode"] == "non_thinking" and f.evidence["served_mode"] == "thinking"
    assert f.evidence["outcomes"] == {"empty_think": 6} and f.evidence["cost"]["share_of_positions"] == 1.0
    assert f.evidence["prompt_modes"] == {"non_thinking": 6} and "rendered in non_thinking mode" in f.message
    # served the way it was made: silent; the thinking data served without thinking: named
    off = {"enable_thinking": False}
    assert codes(run(world, "no_thinking", template_kwargs=off)) == {"DATA_TRAINED_LENGTH": "info"}
    got = run(world, "healthy", template_kwargs=off)
    assert codes(got)["DATA_TEMPLATE_MISMATCH"] == "error"
    assert next(f for f in got.findings if f.code == "DATA_TEMPLATE_MISMATCH").evidence["served_from"] == (
        "--chat-template-kwargs"
    )


def _skipping_and_plain(world: dict[str, Path], root: Path) -> tuple[Path, Path]:
    """Thinking-mode data whose target skipped its reasoning (it wrote ``<think></think>`` itself,
    inside the loss mask), and plain-text data (no turn marker at all)."""
    t = Target.load(world["target"])
    skip, plain = [], []
    for i in range(6):
        p = t.prompt_ids(f"{i}: the cat maps a kite.", True)
        r = [
            t.tid("<think>"),
            t.tid("</think>"),
            *t.continue_([*p, t.tid("<think>"), t.tid("</think>")], 12, seed=i),
        ]
        r.append(t.tid("<|end|>"))
        skip.append((p + r, [0] * len(p) + [1] * len(r)))
        text = t.text_ids(f"the model finds a new table again, {i} times. a small bird trains the weights.")
        plain.append((text, [0] + [1] * (len(text) - 1)))
    return write_specforge(t, root / "skip", skip), write_specforge(t, root / "plain", plain)


def test_mode_from_the_prompt_side_and_plain_text(world: dict[str, Path], tmp_path: Path) -> None:
    skip, plain = _skipping_and_plain(world, tmp_path)
    lab = GreedyLabeller(world["target"])
    a = audit_data(skip, ScanOptions(target=world["target"]), labeller=lab, launch=SERVED)
    assert "DATA_TEMPLATE_MISMATCH" not in codes(a), [f.to_dict() for f in a.findings]
    tpl = a.summary["target_fit"]["template"]
    assert tpl["outcomes"] == {"empty_think": 6} and tpl["prompt_modes"] == {"thinking": 6}
    # served without thinking, the same data is named: its prompt side is the thinking one
    off = audit_data(
        skip,
        ScanOptions(target=world["target"]),
        labeller=lab,
        launch=SERVED,
        template_kwargs={"enable_thinking": False},
    )
    assert codes(off)["DATA_TEMPLATE_MISMATCH"] == "error"
    p = audit_data(plain, ScanOptions(target=world["target"]), labeller=lab, launch=SERVED)
    f = next(f for f in p.findings if f.code == "DATA_TEMPLATE_MISMATCH")
    assert f.severity.value == "warning" and "plain text" in f.message and f.evidence["plain_text"] == 6


def test_the_agreement_test_is_relative_to_the_target() -> None:
    from eagle3_forensics.checks.data.target_findings import MARGIN, Z_CRIT, agreement_test

    # a flat target (E = 0.2 per position) agreeing 0.19 with its own data: no absolute floor flags it
    assert not agreement_test(190, 1000, 200.0, 160.0)["flagged"]
    # the same shortfall is noise on 10 positions and evidence on 100000: power grows with the data
    e, var = 0.9, 0.09
    short = (1 - MARGIN) * e - 0.03
    assert not agreement_test(int(short * 10), 10, e * 10, var * 10)["flagged"]
    big = agreement_test(int(short * 100000), 100000, e * 100000, var * 100000)
    assert big["flagged"] and big["z"] < -Z_CRIT and big["severity"] == "warning"
    assert agreement_test(300, 1000, 900.0, 90.0)["severity"] == "error"  # a third of the target's own


def test_other_template_is_not_byte_identical(world: dict[str, Path]) -> None:
    a = run(world, "other_template")
    f = next(f for f in a.findings if f.code == "DATA_TEMPLATE_MISMATCH")
    assert f.severity.value == "warning" and f.evidence["not_byte_identical"] == 4
    assert "not byte-identical" in f.message


def test_short_against_long(world: dict[str, Path]) -> None:
    a = run(world, "short", launch=None)
    c = codes(a)
    assert c["CONTEXT_BEYOND_TRAINING"] == "info"  # the target's default context only
    assert "DATA_NOT_FROM_TARGET" not in c and "DATA_TEMPLATE_MISMATCH" not in c
    served = run(world, "short", launch="vllm serve target --max-model-len 256")
    f = next(f for f in served.findings if f.code == "CONTEXT_BEYOND_TRAINING")
    p90 = f.evidence["trained_p90"]
    assert (
        f.severity.value == "warning"
        and p90 <= 32
        and f.evidence["ratio"] == pytest.approx(256 / p90, abs=1e-3)
    )
    assert f.evidence["serving_context_from"] == "--launch (--max-model-len)"
    assert f.evidence["cost"]["share_of_positions"] == pytest.approx(1 - p90 / 256)
    # a context near the trained length is fine; the long data against a long served context is not
    assert "CONTEXT_BEYOND_TRAINING" not in codes(
        run(world, "short", launch="vllm serve target --max-model-len 96")
    )
    sg = run(world, "healthy", launch="python -m sglang.launch_server --model-path t --context-length 4096")
    assert codes(sg)["CONTEXT_BEYOND_TRAINING"] == "warning"
    assert "CONTEXT_BEYOND_TRAINING" not in codes(
        run(world, "healthy", launch="trtllm-serve t --max_seq_len 256")
    )


def test_shards_merge_to_the_single_run(world: dict[str, Path]) -> None:
    lab = GreedyLabeller(world["target"])
    single = audit_data(world["foreign"], ScanOptions(target=world["target"]), labeller=lab)
    parts = [
        scan_data(world["foreign"], ScanOptions(target=world["target"], shard=(i, 2)), labeller=lab).to_dict()
        for i in range(2)
    ]
    from eagle3_forensics.checks.data.merge import AuditScan

    merged = finish_audit(merge_scans([AuditScan.from_dict(json.loads(json.dumps(p))) for p in parts]))
    assert [f.to_dict() for f in merged.findings] == [f.to_dict() for f in single.findings]
    # a partial written before these records existed still reads (with none of them)
    old = {k: v for k, v in parts[0].items() if k not in ("lengths", "agreement", "renderings", "teacher")}
    back = AuditScan.from_dict(old)
    assert back.agreement == [] and back.lengths == {} and back.teacher is None


def test_outcomes_from_ids(world: dict[str, Path]) -> None:
    chat = load_chat_template(world["target"])
    assert chat is not None
    r = renderings(chat)
    assert r.modes == ["thinking", "non_thinking"]
    assert r.expected == {"thinking": "reasoning", "non_thinking": "empty_think"}
    msgs = [{"role": "user", "content": "the cat"}]
    plain = chat.render([*msgs, {"role": "assistant", "content": "a kite"}])
    think = chat.render([*msgs, {"role": "assistant", "content": "<think>plan it</think>a kite"}])
    empty = chat.render(msgs, mode="non_thinking", add_generation_prompt=True) + "a kite<|end|>"
    assert outcome(chat.encode(plain), r) == "no_think"
    assert outcome(chat.encode(think), r) == "reasoning"
    assert outcome(chat.encode(empty), r) == "empty_think"
    got = classify(chat.encode(empty), r)
    assert got["template_match"] and "non_thinking" in got["modes"]
    assert not classify(chat.encode("<|user|>\nthe cat<|end|>\n"), r)["template_match"]


def test_without_weights_or_template(world: dict[str, Path], tmp_path: Path) -> None:
    """A config-only target: template and length, no agreement (the CLI passes no labeller)."""
    cfg_only = tmp_path / "cfg"
    cfg_only.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (cfg_only / name).write_bytes((world["target"] / name).read_bytes())
    code, obj = _cli("audit-data", str(world["no_thinking"]), "--target", str(cfg_only))
    assert code == 1 and obj["summary"]["target_fit"]["agreement"] is None
    assert "DATA_TEMPLATE_MISMATCH" in {f["code"] for f in obj["findings"]}


def _cli(*args: str) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "eagle3_forensics", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode, json.loads(proc.stdout)


def test_cli(world: dict[str, Path]) -> None:
    code, obj = _cli("audit-data", str(world["healthy"]), "--target", str(world["target"]))
    assert code == 0 and obj["summary"]["target_fit"]["agreement"]["rate"] > 0.9
    code, obj = _cli(
        "audit-data",
        str(world["no_thinking"]),
        "--target",
        str(world["target"]),
        "--chat-template-kwargs",
        '{"enable_thinking": false}',
        "--launch",
        "vllm serve t --max-model-len 256",
    )
    assert code == 0 and {f["code"] for f in obj["findings"]} == {"DATA_TRAINED_LENGTH"}
    code, obj = _cli("audit-data", str(world["foreign"]), "--target", str(world["target"]))
    f = next(f for f in obj["findings"] if f["code"] == "DATA_NOT_FROM_TARGET")
    assert code == (1 if f["severity"] == "error" else 0)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--chat-template-kwargs", "{"], "--chat-template-kwargs is not valid JSON"),
        (["--chat-template-kwargs", "[1]"], "must be a JSON object"),
        (["--launch", "nginx -g x"], "--launch"),
        (["--launch", "vllm serve t --max-model-len lots"], "--launch"),
    ],
)
def test_bad_input_is_one_line(world: dict[str, Path], extra: list[str], says: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eagle3_forensics",
            "audit-data",
            str(world["healthy"]),
            "--target",
            str(world["target"]),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in proc.stderr


def test_serving_options_need_a_target(world: dict[str, Path]) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eagle3_forensics",
            "audit-data",
            str(world["healthy"]),
            "--launch",
            "vllm serve t",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and "need --target" in proc.stderr
