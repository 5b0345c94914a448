"""Fuzzing: mutated safetensors headers and config.json files always end in a Diagnosis.

Whatever the bytes, ``diagnose`` must return a report (exit code 0, 1 or 2) quickly: never
raise, never hang. The number of examples per test comes from ``FUZZ_EXAMPLES`` (default
1000, so CI runs at least 2,000 in total across the two fuzz tests).
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import signal
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import DrafterSpec, build_drafter, build_target, drafter_config, speculators_spec
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from eagle3_forensics.checks.diagnose import Diagnosis, diagnose, inspect_checkpoint
from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.views.text import render_diagnosis, render_inspection

FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "1000"))
TIME_LIMIT_S = 5.0  # one diagnose call on a tiny drafter takes milliseconds
HARD_LIMIT_S = 20  # SIGALRM: a hang fails the example instead of blocking the run

FUZZ_SETTINGS = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

# -- the seeds: the shared builders' healthy drafters and target ---------------------------------

AUX = "eagle_aux_hidden_state_layer_ids"
FLAT = DrafterSpec()
# speculators with every field the engines read spelled out, nested aux ids included
SPECULATORS = speculators_spec(aux_nested=[1, 3, 4], norm_before_fc=False, fc_norm=False, norm_output=False)
FLAT_CONFIG: dict[str, Any] = drafter_config(FLAT)
SPECULATORS_CONFIG: dict[str, Any] = drafter_config(SPECULATORS)


# -- running one example ------------------------------------------------------------------------


class _Hang(BaseException):  # BaseException: no `except Exception` in the package can swallow it
    pass


@contextlib.contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    def on_alarm(signum: int, frame: object) -> None:
        raise _Hang(f"diagnose still running after {seconds} s")

    if threading.current_thread() is not threading.main_thread():
        yield  # signals only reach the main thread; the elapsed-time assertion still applies
        return
    old = signal.signal(signal.SIGALRM, on_alarm)
    pending = signal.alarm(seconds)  # another alarm (e.g. pytest-timeout's) is re-armed afterwards
    start = time.monotonic()
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        if pending:
            signal.alarm(max(1, pending - int(time.monotonic() - start)))


def run_bounded(path: Path, target: Path | None) -> Diagnosis:
    """diagnose + every renderer the CLI uses; must finish, never raise."""
    start = time.perf_counter()
    with _alarm(HARD_LIMIT_S):
        d = diagnose(path, target=target)
        json.dumps(d.to_dict(), default=str)
        render_diagnosis(d)
        if not d.unusable:
            with contextlib.suppress(UnusableInputError):
                render_inspection(inspect_checkpoint(path))
    elapsed = time.perf_counter() - start
    assert isinstance(d, Diagnosis)
    assert d.exit_code in (0, 1, 2)
    if d.unusable:
        assert [f.code for f in d.findings] == ["CHECKPOINT_UNREADABLE"]
        assert "\n" not in d.findings[0].message
    assert elapsed < TIME_LIMIT_S, f"diagnose took {elapsed:.1f} s"
    return d


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fuzz_base")
    return {
        "flat": build_drafter(root / "flat", FLAT),
        "speculators": build_drafter(root / "speculators", SPECULATORS),
        "target": build_target(root / "target", with_weights=True),
        "work": root / "work",
    }


def test_base_drafters_are_clean(base: dict[str, Path]) -> None:
    """The fuzz seeds are valid: no error finding, with and without the target."""
    for style in ("flat", "speculators"):
        for target in (None, base["target"]):
            d = run_bounded(base[style], target)
            errors = [(f.code, f.engine) for f in d.errors]
            if style == "speculators":  # SGLang wants midlayer.* keys: the known layout problem
                errors = [e for e in errors if e[1] != "sglang"]
            assert errors == [], (style, target, errors)


# -- byte-level mutations ------------------------------------------------------------------------


def _byte_ops(limit: int) -> st.SearchStrategy[tuple[Any, ...]]:
    pos = st.integers(0, max(0, limit - 1))
    return st.one_of(
        st.tuples(st.just("flip"), pos, st.integers(0, 7)),
        st.tuples(st.just("replace"), pos, st.integers(0, 255)),
        st.tuples(st.just("replace_char"), pos, st.sampled_from(b'{}[]",:0123456789-eE.ntfa\\ \x00\xff')),
        st.tuples(st.just("insert"), pos, st.binary(min_size=1, max_size=8)),
        st.tuples(st.just("delete"), pos, st.integers(1, 16)),
    )


def apply_byte_ops(data: bytes, ops: list[tuple[Any, ...]]) -> bytes:
    buf = bytearray(data)
    for op, pos, arg in ops:
        pos = min(pos, max(0, len(buf) - 1))
        if op == "flip" and buf:
            buf[pos] ^= 1 << arg
        elif op in ("replace", "replace_char") and buf:
            buf[pos] = arg
        elif op == "insert":
            buf[pos:pos] = arg
        elif op == "delete":
            del buf[pos : pos + arg]
    return bytes(buf)


# -- safetensors header --------------------------------------------------------------------------

_DTYPES = ["F32", "F16", "BF16", "F64", "I64", "I32", "I8", "U8", "BOOL", "F8_E4M3", "F4", "X99", "", "f32"]
_NAMES = [
    "d2t",
    "t2d",
    "fc.weight",
    "lm_head.weight",
    "norm.weight",
    "embed_tokens.weight",
    "input_norm.weight",
    "midlayer.self_attn.q_proj.weight",
    "layers.0.self_attn.q_proj.weight",
    "layers.7.mlp.up_proj.weight",
    "fc_norm.0.weight",
    "model.fc.weight",
    "__metadata__",
    "",
    "x" * 300,
]
_ints = st.one_of(
    st.integers(-3, 70), st.sampled_from([0, 1, 2**31, 2**32 + 1, 2**63 - 1, 2**64 - 1, 10**30])
)
_json_scalar = st.one_of(st.none(), st.booleans(), _ints, st.floats(), st.text(max_size=6))


def _header_edit() -> st.SearchStrategy[tuple[Any, ...]]:
    return st.one_of(
        st.tuples(st.just("dtype"), st.integers(0, 99), st.sampled_from(_DTYPES)),
        st.tuples(st.just("shape"), st.integers(0, 99), st.one_of(st.lists(_ints, max_size=4), _json_scalar)),
        st.tuples(
            st.just("offsets"),
            st.integers(0, 99),
            st.one_of(st.lists(_ints, min_size=2, max_size=2), st.lists(_ints, max_size=3), _json_scalar),
        ),
        st.tuples(
            st.just("rename"), st.integers(0, 99), st.one_of(st.sampled_from(_NAMES), st.text(max_size=12))
        ),
        st.tuples(st.just("drop"), st.integers(0, 99), st.none()),
        st.tuples(st.just("entry"), st.integers(0, 99), _json_scalar),
        st.tuples(
            st.just("metadata"),
            st.integers(0, 99),
            st.one_of(_json_scalar, st.dictionaries(st.text(max_size=4), _json_scalar, max_size=3)),
        ),
    )


# Edits that keep the file readable (same byte size), so the checks run on odd tensors.
_SAME_SIZE = {
    1: ["BOOL", "U8", "I8", "F8_E4M3", "F8_E5M2"],
    2: ["F16", "BF16", "I16", "U16"],
    4: ["F32", "I32", "U32"],
    8: ["F64", "I64", "U64"],
}
_ITEMSIZE = {dtype: size for size, dtypes in _SAME_SIZE.items() for dtype in dtypes}


def _valid_header_edit() -> st.SearchStrategy[tuple[Any, ...]]:
    return st.one_of(
        st.tuples(st.just("retype"), st.integers(0, 99), st.integers(0, 10**6)),
        st.tuples(st.just("reshape"), st.integers(0, 99), st.integers(0, 10**6)),
        st.tuples(
            st.just("rename"), st.integers(0, 99), st.one_of(st.sampled_from(_NAMES), st.text(max_size=12))
        ),
    )


def _same_numel_shape(numel: int, choice: int) -> list[int]:
    divisors = [d for d in range(1, numel + 1) if numel % d == 0] or [1]
    d = divisors[choice % len(divisors)]
    rest = numel // d if numel else 0
    shapes = [[numel], [d, rest], [rest, d], [d, 1, rest], []]
    shape = shapes[(choice // 7) % len(shapes)]
    return shape if math.prod(shape) == numel else [numel]


def apply_header_edits(data: bytes, edits: list[tuple[Any, ...]], pad: bool) -> bytes:
    """Structured edits of the header JSON, re-encoded with a consistent length field."""
    (hlen,) = struct.unpack("<Q", data[:8])
    header: dict[str, Any] = json.loads(data[8 : 8 + hlen])
    body = data[8 + hlen :]
    for op, idx, arg in edits:
        names = sorted(header)
        if not names:
            header["t"] = {}
            names = ["t"]
        name = names[idx % len(names)]
        entry = header[name]
        if op == "rename":
            header[arg] = header.pop(name)
        elif op == "drop":
            del header[name]
        elif op == "entry":
            header[name] = arg
        elif op == "metadata":
            header["__metadata__"] = arg
        elif op == "retype" and isinstance(entry, dict) and entry.get("dtype") in _ITEMSIZE:
            group = _SAME_SIZE[_ITEMSIZE[entry["dtype"]]]
            entry["dtype"] = group[arg % len(group)]
        elif op == "reshape" and isinstance(entry, dict) and isinstance(entry.get("shape"), list):
            entry["shape"] = _same_numel_shape(math.prod(entry["shape"]), arg)
        elif isinstance(entry, dict) and op in ("dtype", "shape", "offsets"):
            entry[{"dtype": "dtype", "shape": "shape", "offsets": "data_offsets"}[op]] = arg
    raw = json.dumps(header).encode()
    if pad:
        raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + body


def _length_field(hlen: int, size: int) -> st.SearchStrategy[int]:
    return st.one_of(
        st.integers(0, 2**64 - 1),
        st.integers(max(0, hlen - 16), hlen + 16),
        st.sampled_from([0, 1, 7, 8, size - 8, size, size + 1, 100_000_000, 100_000_001, 2**63, 2**64 - 1]),
    )


@FUZZ_SETTINGS
@given(data=st.data())
def test_fuzz_safetensors_header(base: dict[str, Path], data: st.DataObject) -> None:
    style = data.draw(st.sampled_from(["flat", "speculators"]), label="style")
    original = (base[style] / "model.safetensors").read_bytes()
    (hlen,) = struct.unpack("<Q", original[:8])
    region = 8 + hlen
    kind = data.draw(
        st.sampled_from(["bytes", "length", "structured", "valid", "valid", "mixed"]), label="kind"
    )
    mutated = original
    if kind in ("structured", "valid", "mixed"):
        edit = _valid_header_edit() if kind == "valid" else _header_edit()
        edits = data.draw(st.lists(edit, min_size=1, max_size=4), label="header edits")
        mutated = apply_header_edits(mutated, edits, pad=data.draw(st.booleans(), label="pad"))
    if kind in ("bytes", "mixed"):
        ops = data.draw(st.lists(_byte_ops(region), min_size=1, max_size=6), label="byte ops")
        mutated = apply_byte_ops(mutated[:region], ops) + mutated[region:]
    if kind == "length" or data.draw(st.sampled_from([False, False, False, True]), label="set length field"):
        new_len = data.draw(_length_field(hlen, len(mutated)), label="length field")
        mutated = struct.pack("<Q", new_len) + mutated[8:]
    work = base["work"]
    work.mkdir(exist_ok=True)
    (work / "config.json").write_bytes((base[style] / "config.json").read_bytes())
    (work / "model.safetensors").write_bytes(mutated)
    target = base["target"] if data.draw(st.booleans(), label="with target") else None
    event(f"exit code {run_bounded(work, target).exit_code}")


# -- config.json ---------------------------------------------------------------------------------

_CONFIG_KEYS = [
    "hidden_size",
    "target_hidden_size",
    "vocab_size",
    "draft_vocab_size",
    "num_hidden_layers",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    AUX,
    "eagle_config",
    "rope_parameters",
    "rope_theta",
    "rope_scaling",
    "tie_word_embeddings",
    "architectures",
    "model_type",
    "speculators_config",
    "speculators_model_type",
    "transformer_layer_config",
    "norm_before_residual",
    "norm_before_fc",
    "fc_norm",
    "norm_output",
    "max_position_embeddings",
    "torch_dtype",
    "dtype",
    "bias",
    "verifier",
    "text_config",
]
_NESTED = ["transformer_layer_config", "eagle_config", "speculators_config"]
_PATHS: list[tuple[str, ...]] = [
    *[(k,) for k in _CONFIG_KEYS],
    *[(n, k) for n in _NESTED for k in _CONFIG_KEYS],
    ("transformer_layer_config", "eagle_config", AUX),
    ("speculators_config", "verifier", "architectures"),
    ("rope_parameters", "rope_theta"),
    ("rope_parameters", "rope_type"),
    ("transformer_layer_config", "rope_parameters", "rope_theta"),
]

_weird_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 1, 2, 3, 4, 7, 8, 16, 32, 64, 2**31, 2**63, 10**7, 10**12, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "",
            "llama",
            "qwen3",
            "eagle3",
            "eagle",
            "Eagle3Speculator",
            "LlamaForCausalLMEagle3",
            "LlamaForCausalLM",
            "float16",
            "bfloat16",
            "float32",
            "16",
            "1e5",
            "nan",
        ]
    ),
)
_weird_value = st.recursive(
    _weird_scalar,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.one_of(st.sampled_from(_CONFIG_KEYS), st.text(max_size=6)), children, max_size=5),
    ),
    max_leaves=10,
)
_aux_lists = st.lists(
    st.one_of(st.integers(-5, 40), st.sampled_from([2**63, 10**30]), _weird_scalar), max_size=6
)
_config_value = st.one_of(_weird_value, _aux_lists)


def apply_config_edits(cfg: dict[str, Any], edits: list[tuple[tuple[str, ...], bool, Any]]) -> dict[str, Any]:
    out = copy.deepcopy(cfg)
    for path, delete, value in edits:
        node: Any = out
        for key in path[:-1]:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        if delete:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value
    return out


@FUZZ_SETTINGS
@given(data=st.data())
def test_fuzz_config(base: dict[str, Path], data: st.DataObject) -> None:
    style = data.draw(st.sampled_from(["flat", "speculators"]), label="style")
    cfg = FLAT_CONFIG if style == "flat" else SPECULATORS_CONFIG
    kind = data.draw(st.sampled_from(["structure", "structure", "bytes", "both", "whole"]), label="kind")
    raw: bytes
    if kind == "whole":  # the whole document replaced by some other JSON value
        raw = json.dumps(data.draw(_weird_value, label="document")).encode()
    else:
        doc = cfg
        if kind in ("structure", "both"):
            edit = st.tuples(
                st.sampled_from(_PATHS), st.sampled_from([False, False, False, True]), _config_value
            )
            edits = data.draw(st.lists(edit, min_size=1, max_size=5), label="edits")
            doc = apply_config_edits(cfg, edits)
        raw = json.dumps(doc, indent=data.draw(st.sampled_from([None, 2]), label="indent")).encode()
        if kind in ("bytes", "both"):
            ops = data.draw(st.lists(_byte_ops(len(raw)), min_size=1, max_size=6), label="byte ops")
            raw = apply_byte_ops(raw, ops)
    work = base["work"]
    work.mkdir(exist_ok=True)
    (work / "model.safetensors").write_bytes((base[style] / "model.safetensors").read_bytes())
    (work / "config.json").write_bytes(raw)
    target = base["target"] if data.draw(st.booleans(), label="with target") else None
    event(f"exit code {run_bounded(work, target).exit_code}")


# -- a deterministic sweep: every named field, every wrong type ------------------------------------

_SWEEP_PATHS: list[tuple[str, ...]] = [
    ("hidden_size",),
    ("target_hidden_size",),
    ("vocab_size",),
    ("draft_vocab_size",),
    ("num_hidden_layers",),
    (AUX,),
    ("eagle_config",),
    ("eagle_config", AUX),
    ("rope_parameters",),
    ("rope_theta",),
    ("tie_word_embeddings",),
    ("architectures",),
    ("speculators_config",),
    ("speculators_config", "verifier"),
    ("speculators_config", "verifier", "architectures"),
    ("speculators_model_type",),
    ("transformer_layer_config",),
    ("transformer_layer_config", "hidden_size"),
    ("transformer_layer_config", "num_hidden_layers"),
    ("transformer_layer_config", "rope_theta"),
    ("norm_before_residual",),
    ("norm_before_fc",),
    ("fc_norm",),
    ("norm_output",),
    ("torch_dtype",),
]
_SWEEP_VALUES: list[Any] = [
    None, True, False, "x", "", [], [1], [-1, 2], [2, 2], ["a"], [[1]], {}, {"a": 1}, {"rope_theta": "x"},
    -1, 0, 1, 10**7, 10**12, 10**30, 10**400, 1.5, float("nan"), float("inf"),
]  # fmt: skip


@pytest.mark.parametrize("path", _SWEEP_PATHS, ids=".".join)
def test_config_wrong_types_sweep(base: dict[str, Path], path: tuple[str, ...]) -> None:
    """Each value at each field, on both config styles, with and without the target (and without rope_theta)."""
    work = base["work"]
    work.mkdir(exist_ok=True)
    no_theta = [(("rope_theta",), True, None), (("transformer_layer_config", "rope_theta"), True, None)]
    for style in ("flat", "speculators"):
        (work / "model.safetensors").write_bytes((base[style] / "model.safetensors").read_bytes())
        cfg = FLAT_CONFIG if style == "flat" else SPECULATORS_CONFIG
        for value in [*_SWEEP_VALUES, "<delete>"]:
            for extra in ([], no_theta) if "rope" in path[-1] else ([],):
                doc = apply_config_edits(cfg, [*extra, (path, value == "<delete>", value)])
                (work / "config.json").write_text(json.dumps(doc))
                for target in (None, base["target"]):
                    run_bounded(work, target)
