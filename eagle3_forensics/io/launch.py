"""A serving command line as data: the program, its operands and its options (``diagnose --launch``).

Syntax only. This module knows the programs that start an engine (SGLang, vLLM, TensorRT-LLM) so a
command picks its engine, and how a shell splits a line; what each flag means, and which spellings
and values a release accepts, is engine knowledge (:mod:`eagle3_forensics.engines.launch`).
A command line that cannot be split, names no known program or chains several commands is a
:class:`BadArgumentsError`; a JSON value or YAML file that cannot be read is one too (or an
:class:`UnusableInputError` for a file), so the CLI reports one line and exits 2.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle3_forensics.errors import BadArgumentsError, UnusableInputError

# (tokens that start the program, engine, how the program is named in reports). `python -m M` is
# matched on the module; a leading interpreter path (`/usr/bin/python3.11`) is accepted.
PROGRAMS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("-m", "sglang.launch_server"), "sglang", "python -m sglang.launch_server"),
    (("-m", "sglang.cli.main", "serve"), "sglang", "sglang serve"),
    (("sglang", "serve"), "sglang", "sglang serve"),
    (("-m", "vllm.entrypoints.cli.main", "serve"), "vllm", "vllm serve"),
    (("-m", "vllm.entrypoints.openai.api_server"), "vllm", "python -m vllm.entrypoints.openai.api_server"),
    (("vllm", "serve"), "vllm", "vllm serve"),
    (("trtllm-serve", "serve"), "tensorrt_llm", "trtllm-serve"),
    (("trtllm-serve",), "tensorrt_llm", "trtllm-serve"),
)
KNOWN_PROGRAMS = "python -m sglang.launch_server, sglang serve, vllm serve, trtllm-serve"

_INTERPRETER = re.compile(r"^(?:.*/)?python(?:\d+(?:\.\d+)?)?$")
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_NUMBER = re.compile(r"^-\d+(?:\.\d+)?$")
# shell operators that would make the line several commands: one command is judged at a time
_CHAINING = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1"}
MAX_COMMAND_CHARS = 100_000
MAX_OPTIONS_FILE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Option:
    """One option as written: ``name`` (``--speculative-algorithm``, ``-sc``), its value (``None``
    for a bare flag) and whether it was written ``--name=value``."""

    name: str
    value: str | None
    inline: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value}


@dataclass(frozen=True)
class CommandLine:
    """A command line split the way a POSIX shell splits it."""

    text: str
    engine: str  # sglang | vllm | tensorrt_llm
    program: str  # how reports name the program ("sglang serve", "vllm serve", ...)
    operands: tuple[str, ...]  # positional arguments after the program, in order
    options: tuple[Option, ...]
    environment: tuple[tuple[str, str], ...] = ()  # leading NAME=value assignments, in order

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "program": self.program,
            "operands": list(self.operands),
            "options": [o.to_dict() for o in self.options],
        }


def split_command(text: str) -> CommandLine:
    """Split ``text`` (one shell command) into its program, operands and options.

    ``--flag value`` and ``--flag=value`` are both read; a token after an option that does not
    start with ``-`` (or is a negative number) is that option's value. Leading ``NAME=value``
    environment assignments (kept in ``environment``) and ``env`` are skipped; backslash-newline continuations are joined.
    """
    if not isinstance(text, str) or not text.strip():
        raise BadArgumentsError("--launch: the command line is empty")
    if len(text) > MAX_COMMAND_CHARS:
        raise BadArgumentsError(f"--launch: the command line is longer than {MAX_COMMAND_CHARS} characters")
    if "\x00" in text:
        raise BadArgumentsError("--launch: the command line contains a NUL character")
    joined = re.sub(r"\\\r?\n", " ", text)
    try:
        tokens = shlex.split(joined, posix=True)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise BadArgumentsError(f"--launch: cannot split the command line as a shell would: {exc}") from None
    chained = [t for t in tokens if t in _CHAINING]
    if chained:
        raise BadArgumentsError(
            f"--launch: give one command, not a pipeline or a list (found {chained[0]!r}); "
            f"known programs: {KNOWN_PROGRAMS}"
        )
    environment: list[tuple[str, str]] = []
    while tokens and (_ENV_ASSIGNMENT.match(tokens[0]) or tokens[0] == "env"):
        if tokens[0] != "env":
            name, _, value = tokens[0].partition("=")
            environment.append((name, value))
        tokens = tokens[1:]
    if tokens and _INTERPRETER.match(tokens[0]):
        tokens = tokens[1:]
    engine, program, rest = _program(tokens)
    operands, options = _arguments(rest)
    return CommandLine(text.strip(), engine, program, tuple(operands), tuple(options), tuple(environment))


def _program(tokens: list[str]) -> tuple[str, str, list[str]]:
    for start, engine, name in PROGRAMS:
        if len(tokens) >= len(start) and tuple(_basename(t) for t in tokens[: len(start)]) == start:
            return engine, name, tokens[len(start) :]
    shown = " ".join(tokens[:3]) if tokens else "(nothing)"
    raise BadArgumentsError(f"--launch: unknown program {shown[:80]!r}; known programs: {KNOWN_PROGRAMS}")


def _basename(token: str) -> str:
    """``/opt/venv/bin/vllm`` -> ``vllm`` (a program given by path); module names stay as written."""
    return token.rsplit("/", 1)[-1] if "/" in token and not token.startswith("-") else token


def _arguments(tokens: list[str]) -> tuple[list[str], list[Option]]:
    operands: list[str] = []
    options: list[Option] = []
    i = 0
    while i < len(tokens):
        arg = tokens[i]
        if arg == "--":  # everything after is an operand
            operands.extend(tokens[i + 1 :])
            break
        if arg.startswith("-") and arg != "-" and not _NUMBER.match(arg):
            if arg.startswith("--") and "=" in arg:
                name, _, value = arg.partition("=")
                options.append(Option(name, value, inline=True))
            elif i + 1 < len(tokens) and (not tokens[i + 1].startswith("-") or _NUMBER.match(tokens[i + 1])):
                options.append(Option(arg, tokens[i + 1]))
                i += 1
            else:
                options.append(Option(arg, None))
        else:
            operands.append(arg)
        i += 1
    return operands, options


def parse_json_object(text: str | None, flag: str) -> dict[str, Any]:
    """The JSON object an option carries (vLLM ``--speculative-config``); anything else is an error."""
    if text is None:
        raise BadArgumentsError(f"--launch: {flag} needs a JSON object as its value")
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise BadArgumentsError(f"--launch: {flag} is not valid JSON ({detail}): {text[:80]!r}") from None
    if not isinstance(value, dict):
        raise BadArgumentsError(f"--launch: {flag} must be a JSON object, got {type(value).__name__}")
    return value


def json_or_text(text: str) -> Any:
    """A dotted option's value as vLLM's parser reads it: JSON when it parses, else the text."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text


def read_yaml_mapping(path: str, flag: str, base: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """Read an options file (TensorRT-LLM ``--extra_llm_api_options``) with ``yaml.safe_load``.

    A relative path is taken from ``base`` (default: the current directory), as the command would
    when started here. Missing, unreadable, oversized, invalid or non-mapping files are
    :class:`UnusableInputError` (exit 2).
    """
    p = Path(os.path.expanduser(path))
    if not p.is_absolute():
        p = (base or Path.cwd()) / p
    try:
        size = p.stat().st_size
        if not p.is_file():
            raise UnusableInputError(f"--launch: {flag} {path} is not a file", path=str(p))
        if size > MAX_OPTIONS_FILE_BYTES:
            raise UnusableInputError(
                f"--launch: {flag} {path} is {size} bytes; an options file over "
                f"{MAX_OPTIONS_FILE_BYTES} bytes is refused",
                path=str(p),
            )
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UnusableInputError(f"--launch: {flag} {path} does not exist", path=str(p)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableInputError(f"--launch: cannot read {flag} {path}: {exc}", path=str(p)) from None
    import yaml  # heavy: yaml (~50 ms; only a --launch options file needs it, diagnose's start does not)

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        raise UnusableInputError(f"--launch: {flag} {path} is not valid YAML{at}", path=str(p)) from None
    except RecursionError:
        raise UnusableInputError(f"--launch: {flag} {path} is nested too deeply", path=str(p)) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UnusableInputError(
            f"--launch: {flag} {path} must hold a YAML mapping, got {type(data).__name__}", path=str(p)
        )
    return p, data


def local_config(path: str, base: Path | None = None) -> dict[str, Any] | None:
    """``config.json`` of a model directory named in a command, when it is a local directory here
    (``None`` otherwise: a hub id, another machine's path, an unreadable or non-object file)."""
    p = Path(os.path.expanduser(path))
    if not p.is_absolute():
        p = (base or Path.cwd()) / p
    cfg = p / "config.json"
    try:
        if not cfg.is_file() or cfg.stat().st_size > MAX_OPTIONS_FILE_BYTES:
            return None
        value = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


__all__ = [
    "KNOWN_PROGRAMS",
    "PROGRAMS",
    "CommandLine",
    "Option",
    "json_or_text",
    "local_config",
    "parse_json_object",
    "read_yaml_mapping",
    "split_command",
]
