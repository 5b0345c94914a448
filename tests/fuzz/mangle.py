"""Mangled inputs for the contract fuzz: a tiny valid drafter and target, and hypothesis strategies
that break them the ways real files break (header byte flips, truncations, header-length lies,
structured header edits, config garbage, mangled JSON/YAML/text documents).

Every ``draw_*`` function takes hypothesis's ``data`` object and returns new bytes (or a new
document), so one example can combine several manglings.
"""

from __future__ import annotations

import copy
import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
from builders import DrafterSpec, V, build_drafter, build_target, drafter_config, selection, speculators_spec
from hypothesis import strategies as st

# -- the seeds: the shared builders' healthy drafters and target ------------------------------------

AUX = "eagle_aux_hidden_state_layer_ids"
FLAT = DrafterSpec()
# speculators with every field the engines read spelled out, nested aux ids included
SPECULATORS = speculators_spec(aux_nested=[1, 3, 4], norm_before_fc=False, fc_norm=False, norm_output=False)
FLAT_CONFIG: dict[str, Any] = drafter_config(FLAT)
SPECULATORS_CONFIG: dict[str, Any] = drafter_config(SPECULATORS)


def write_drafter(out: Path, style: str = "flat") -> Path:
    """A healthy drafter (tests/builders.py): SpecForge-style ``flat`` or ``speculators``."""
    return build_drafter(out, FLAT if style == "flat" else SPECULATORS)


def write_target(out: Path) -> Path:
    return build_target(out, with_weights=True)


def vocab_map() -> tuple[np.ndarray, np.ndarray]:
    """The healthy drafters' ``d2t`` (offsets) and ``t2d``."""
    sel = selection().numpy()
    t2d = np.zeros(V, dtype=bool)
    t2d[sel] = True
    return (sel - np.arange(sel.shape[0])).astype(np.int64), t2d


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


# -- drawing whole mangled files ---------------------------------------------------------------------

SAFETENSORS_KINDS = ["bytes", "length", "structured", "valid", "valid", "mixed", "truncate", "append"]


def draw_safetensors(data: st.DataObject, original: bytes) -> bytes:
    """``original`` (a valid .safetensors file) with its header flipped, edited, lied about or cut."""
    (hlen,) = struct.unpack("<Q", original[:8])
    region = 8 + hlen
    kind = data.draw(st.sampled_from(SAFETENSORS_KINDS), label="safetensors mangling")
    mutated = original
    if kind in ("structured", "valid", "mixed"):
        edit = _valid_header_edit() if kind == "valid" else _header_edit()
        edits = data.draw(st.lists(edit, min_size=1, max_size=4), label="header edits")
        mutated = apply_header_edits(mutated, edits, pad=data.draw(st.booleans(), label="pad"))
    if kind in ("bytes", "mixed"):
        ops = data.draw(st.lists(_byte_ops(region), min_size=1, max_size=6), label="byte ops")
        mutated = apply_byte_ops(mutated[:region], ops) + mutated[region:]
    if kind == "truncate":
        mutated = mutated[: data.draw(st.integers(0, len(mutated) - 1), label="truncate at")]
    if kind == "append":
        mutated += data.draw(st.binary(min_size=1, max_size=64), label="appended")
    if len(mutated) >= 8 and (
        kind == "length" or data.draw(st.sampled_from([False, False, False, True]), label="set length field")
    ):
        new_len = data.draw(_length_field(hlen, len(mutated)), label="length field")
        mutated = struct.pack("<Q", new_len) + mutated[8:]
    return mutated


def draw_config(data: st.DataObject, cfg: dict[str, Any]) -> bytes:
    """A drafter ``config.json``: edited fields, flipped bytes, or another JSON document altogether."""
    kind = data.draw(
        st.sampled_from(["structure", "structure", "bytes", "both", "whole"]), label="config kind"
    )
    if kind == "whole":  # the whole document replaced by some other JSON value
        return json.dumps(data.draw(_weird_value, label="document")).encode()
    doc = cfg
    if kind in ("structure", "both"):
        edit = st.tuples(st.sampled_from(_PATHS), st.sampled_from([False, False, False, True]), _config_value)
        doc = apply_config_edits(cfg, data.draw(st.lists(edit, min_size=1, max_size=5), label="edits"))
    raw = json.dumps(doc, indent=data.draw(st.sampled_from([None, 2]), label="indent")).encode()
    if kind in ("bytes", "both"):
        ops = data.draw(st.lists(_byte_ops(len(raw)), min_size=1, max_size=6), label="byte ops")
        raw = apply_byte_ops(raw, ops)
    return raw


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    if not path:
        return value
    node = doc
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


def draw_document(data: st.DataObject, doc: Any, keys: list[str] | None = None) -> Any:
    """``doc`` (parsed JSON/YAML) with values replaced by wrong types, members deleted or added."""
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, 4), label="document edits")):
        paths = _paths(doc)
        path = data.draw(st.sampled_from(paths), label="at")
        op = data.draw(st.sampled_from(["replace", "replace", "delete", "add"]), label="edit")
        value = data.draw(_weird_value, label="value")
        if op == "delete" and path:
            doc = _set(doc, path, None, delete=True)
        elif op == "add":
            parent: Any = doc
            for key in path:
                parent = parent[key]
            if isinstance(parent, dict):
                name = data.draw(st.sampled_from(keys) if keys else st.text(max_size=8), label="new key")
                parent[name] = value
            elif isinstance(parent, list):
                parent.append(value)
        else:
            doc = _set(doc, path, value, delete=False)
    return doc


def draw_text_bytes(data: st.DataObject, raw: bytes) -> bytes:
    """A text file's bytes flipped, cut, emptied, doubled, or replaced by binary/odd text."""
    kind = data.draw(
        st.sampled_from(
            ["bytes", "bytes", "truncate", "empty", "blank", "binary", "text", "bom", "huge line"]
        ),
        label="text kind",
    )
    if kind == "bytes":
        return apply_byte_ops(
            raw, data.draw(st.lists(_byte_ops(len(raw)), min_size=1, max_size=6), label="ops")
        )
    if kind == "truncate":
        return raw[: data.draw(st.integers(0, max(0, len(raw) - 1)), label="truncate at")]
    if kind == "empty":
        return b""
    if kind == "blank":
        return b"\n \n\t\n"
    if kind == "binary":
        return data.draw(st.binary(min_size=1, max_size=200), label="binary")
    if kind == "bom":
        return b"\xef\xbb\xbf" + raw
    if kind == "huge line":
        return raw + b'{"prompt": "' + b"x" * 100_000 + b'"}\n'
    return data.draw(st.text(max_size=200), label="text").encode("utf-8", "surrogatepass")


def draw_json_file(data: st.DataObject, doc: Any, keys: list[str] | None = None) -> bytes:
    """A JSON file for ``doc``: structurally edited, byte-mangled, or some other document."""
    kind = data.draw(st.sampled_from(["structure", "structure", "bytes", "whole"]), label="json kind")
    if kind == "whole":
        return json.dumps(data.draw(_weird_value, label="document")).encode()
    if kind == "structure":
        return json.dumps(draw_document(data, doc, keys)).encode()
    return draw_text_bytes(data, json.dumps(doc, indent=2).encode())


def draw_jsonl(data: st.DataObject, rows: list[Any], keys: list[str] | None = None) -> bytes:
    """A JSONL file of ``rows``: rows edited into wrong types, or the text mangled."""
    if data.draw(st.booleans(), label="edit rows"):
        rows = draw_document(data, rows, keys)
        body = rows if isinstance(rows, list) else [rows]
        return "".join(json.dumps(r) + "\n" for r in body).encode()
    return draw_text_bytes(data, "".join(json.dumps(r) + "\n" for r in rows).encode())
