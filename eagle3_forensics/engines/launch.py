"""How each engine release reads its serving command's speculative-decoding settings, as data.

``LAUNCH_RELEASES[engine]`` is an ordered tuple of :class:`LaunchRules` (oldest first), the
``launch`` sections of the release records (a section unchanged over several releases is one
table over their range). Each names the files it was read from (``package==version path``).
:func:`read_launch` interprets a table over a split command line
(:class:`~eagle3_forensics.io.launch.CommandLine`) and returns :class:`LaunchSettings`: what the
release would run with. Every fact was read in the released code; the flag reading of the SGLang
releases marked ``ran`` is also checked against their own argparse in the loader tier
(tests/loaders/test_launch_oracle.py), while the validation after parsing was read, not run:

- SGLang: plain ``argparse`` (no underscore spellings); ``--speculative-algorithm`` is one of six
  exact choices in the oldest releases and any string upper-cased later (``method_case``); ``NEXTN``
  is an alias of ``EAGLE``; later releases take the model as the operand of ``sglang serve MODEL``.
  With ``--speculative-num-steps`` absent, ``--speculative-eagle-topk`` or
  ``--speculative-num-draft-tokens`` trip an ``assert``; with topk 1, num_draft_tokens is reset to
  steps + 1 with a log warning; with topk absent but steps given, ``speculative_eagle_topk > 1``
  compares ``None`` and fails. With no draft path, ``ModelConfig.from_server_args`` falls back to
  ``model_path``: the target is loaded as the drafter (sglang#36528).
- vLLM: ``FlexibleArgumentParser`` turns ``_`` into ``-`` in option names and merges
  ``--speculative-config.KEY VALUE`` into the JSON; ``-sc`` and ``--spec-method`` / ``--spec-model``
  / ``--spec-tokens`` (mutually exclusive with the same JSON key) exist. Without ``method`` the
  method is guessed from the draft's name (``eagle-`` -> eagle, ``eagle3`` -> eagle3, else
  ``draft_model``); a method needs ``model`` and ``num_speculative_tokens`` (> 0). What each release
  refuses or changes at start-up (keys, runners, P-EAGLE, the verifier and context rules, the
  explicit-method rule, method names, method-specific options) is its
  :class:`~eagle3_forensics.engines.startup.StartupRules` (``startup``).
- TensorRT-LLM (main branch, no installable release): ``trtllm-serve MODEL
  --config|--extra_llm_api_options FILE.yaml`` (click; read with ``yaml.safe_load``); the YAML's
  ``speculative_config`` holds ``decoding_type`` (``Eagle``; newer commits also ``Eagle3``),
  ``max_draft_len`` (> 0), ``speculative_model_dir`` / ``speculative_model`` (required) and
  ``eagle3_layers_to_capture``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from eagle3_forensics.engines.catalog import runs
from eagle3_forensics.engines.codec import decode
from eagle3_forensics.engines.proof import Citation, Proof
from eagle3_forensics.engines.releases import EngineMap
from eagle3_forensics.engines.rules import EngineRules, version_key
from eagle3_forensics.engines.startup import StartupRules
from eagle3_forensics.errors import BadArgumentsError
from eagle3_forensics.io.launch import (
    CommandLine,
    Option,
    json_or_text,
    local_config,
    parse_json_object,
    read_yaml_mapping,
)


class Setting(StrEnum):
    """A speculative-decoding setting a command line carries (the keys of ``LaunchSettings.settings``)."""

    TARGET = "target"
    METHOD = "method"
    DRAFT = "draft"
    NUM_STEPS = "num_steps"
    TOPK = "topk"
    NUM_DRAFT_TOKENS = "num_draft_tokens"
    NUM_SPECULATIVE_TOKENS = "num_speculative_tokens"
    MAX_DRAFT_LEN = "max_draft_len"
    TENSOR_PARALLEL_SIZE = "tensor_parallel_size"
    DRAFT_TENSOR_PARALLEL_SIZE = "draft_tensor_parallel_size"
    CAPTURE_LAYERS = "capture_layers"
    MAX_MODEL_LEN = "max_model_len"  # the server's context (vLLM --max-model-len)


INT_SETTINGS = frozenset(
    {
        Setting.NUM_STEPS,
        Setting.TOPK,
        Setting.NUM_DRAFT_TOKENS,
        Setting.NUM_SPECULATIVE_TOKENS,
        Setting.MAX_DRAFT_LEN,
        Setting.TENSOR_PARALLEL_SIZE,
        Setting.DRAFT_TENSOR_PARALLEL_SIZE,
        Setting.MAX_MODEL_LEN,
    }
)


class MethodCase(StrEnum):
    EXACT = "exact"  # compared as written (argparse choices, pydantic literals)
    UPPER = "upper"  # upper-cased before use (newer SGLang: `speculative_algorithm.upper()`)


class DraftMissing(StrEnum):
    """What a release does when speculative decoding is asked for without a draft path."""

    TARGET_AS_DRAFTER = "target_as_drafter"  # loads the target model as the drafter (SGLang)
    REFUSED = "refused"  # refuses to start (vLLM, TensorRT-LLM)


class Params(StrEnum):
    """Which draft-length settings a release reads and how it validates them."""

    STEPS_TOPK_TOKENS = "steps_topk_tokens"  # SGLang: num_steps, eagle_topk, num_draft_tokens
    NUM_SPECULATIVE_TOKENS = "num_speculative_tokens"  # vLLM: one K > 0; draft TP in {1, TP}
    MAX_DRAFT_LEN = "max_draft_len"  # TensorRT-LLM: max_draft_len > 0


class Source(StrEnum):
    """Where a flag's value goes."""

    VALUE = "value"  # the setting itself
    CONFIG_JSON = "config_json"  # a JSON object of speculative settings (vLLM --speculative-config)
    OPTIONS_FILE = "options_file"  # a YAML file whose `config_section` holds them (TensorRT-LLM)


@dataclass(frozen=True)
class LaunchFlag:
    """A command-line option and what it sets. ``exclusive_with_config``: naming the same key in the
    JSON config too is refused at startup (vLLM ``--spec-method`` and ``"method"``)."""

    names: tuple[str, ...]
    setting: Setting | None = None
    source: Source = Source.VALUE
    exclusive_with_config: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", Source(self.source))
        if self.setting is not None:
            object.__setattr__(self, "setting", Setting(self.setting))
        if (self.setting is None) == (self.source is Source.VALUE):
            raise ValueError(f"launch flag {self.names}: a VALUE flag names a setting, a config flag none")


@dataclass(frozen=True)
class ConfigKey:
    """A key of the JSON/YAML speculative config and the setting it carries (first spelling present wins)."""

    setting: Setting
    keys: tuple[str, ...]


@dataclass(frozen=True)
class LaunchRules:
    """How one engine release range reads its serving command (see the module docstring)."""

    engine: str
    display: str
    package: str
    first: str
    last: str
    sources: tuple[str, ...]
    programs: tuple[str, ...]  # programs (io.launch names) that start this engine
    operand_model: tuple[str, ...]  # programs whose first operand is the target model
    flags: tuple[LaunchFlag, ...]
    config_keys: tuple[ConfigKey, ...] = ()
    config_section: str | None = None  # the options file's section holding the speculative config
    underscore_spellings: bool = False  # `--a_b` is read as `--a-b` (vLLM FlexibleArgumentParser)
    dotted_config: bool = False  # `--speculative-config.KEY VALUE` merged into the JSON (vLLM)
    normalise_config_keys: bool = False  # `-` in JSON keys read as `_` (vLLM create_speculative_config)
    method_case: MethodCase = MethodCase.EXACT
    method_choices: tuple[str, ...] | None = None  # any other value is refused at startup
    method_refusal: str = ""  # how the release refuses another value ("": the parser's choices)
    method_aliases: tuple[tuple[str, str], ...] = ()  # (written, used): SGLang NEXTN -> EAGLE
    eagle3_methods: tuple[str, ...] = ()
    eagle_methods: tuple[str, ...] = ()  # EAGLE-1/2: an EAGLE-3 drafter served as EAGLE (acceptance ~1.0)
    # without a method: (substring of the lower-cased draft name, method) tried in order, else the default
    method_from_draft_name: tuple[tuple[str, str], ...] = ()
    method_detect_fallback: str | None = None  # the method when no substring matches (vLLM: draft_model)
    method_fix: str = ""  # the exact setting that serves EAGLE-3
    draft_fix: str = ""  # how to name the drafter ({path})
    draft_missing: DraftMissing = DraftMissing.REFUSED
    draft_missing_effect: str = ""
    params: Params = Params.STEPS_TOPK_TOKENS
    capture_option: str | None = None  # the launch option naming the captured target layers
    # the model operand may be a speculators checkpoint: it becomes the drafter, its verifier the
    # target, its speculators_model_type the method (mapped by these pairs) and its
    # proposal_methods[0].speculative_tokens the K (vLLM maybe_override_with_speculators)
    speculators_model: tuple[tuple[str, str], ...] | None = None
    pinned: bool = True
    notes: tuple[str, ...] = ()
    startup: StartupRules | None = None  # start-up validation and runner choice (vLLM; engines/startup.py)
    proof: Proof = Proof.READ  # RAN: the release's own parser/validation ran here (engines/proof.py)
    citations: tuple[Citation, ...] = ()  # sha256 of the cited wheel files (make engine-drift)

    def __post_init__(self) -> None:
        for attr, enum in (("method_case", MethodCase), ("draft_missing", DraftMissing), ("params", Params)):
            object.__setattr__(self, attr, enum(getattr(self, attr)))
        if self.pinned and version_key(self.first) > version_key(self.last):
            raise ValueError(f"launch rules {self.engine} {self.first}: first is after last {self.last}")
        names = [n for f in self.flags for n in f.names]
        if len(names) != len(set(names)):
            raise ValueError(f"launch rules {self.engine} {self.first}: a flag name is listed twice")
        if not set(self.operand_model) <= set(self.programs):
            raise ValueError(f"launch rules {self.engine} {self.first}: operand_model names unknown programs")

    @property
    def versions(self) -> str:
        return self.first if self.first == self.last else f"{self.first}–{self.last}"

    @property
    def release(self) -> str:
        if not self.pinned:
            return f"{self.engine} {self.package}@{self.versions} (not a release)"
        return f"{self.engine} {self.versions}"

    def flag(self, name: str) -> LaunchFlag | None:
        return next((f for f in self.flags if name in f.names), None)

    def canonical(self, name: str) -> str:
        """The option name this release reads ``name`` as (vLLM: ``--a_b`` -> ``--a-b`` before any ``.``)."""
        if not self.underscore_spellings or not name.startswith("--"):
            return name
        head, dot, tail = name[2:].partition(".")
        return "--" + head.replace("_", "-") + dot + tail

    def used_method(self, written: str) -> str:
        """The method the release runs for a written value (case rule, then aliases)."""
        value = written.upper() if self.method_case is MethodCase.UPPER else written
        return dict(self.method_aliases).get(value, value)


# -- the tables, from the release records ------------------------------------------------------------


def _launch_tables(engine: str) -> tuple[LaunchRules, ...]:
    """``engine``'s launch tables from the ``launch`` (and ``startup``) sections of its records."""
    out = []
    for run in runs(engine, "launch", also=("startup",)):
        body = run.record.section("startup")
        startup_rules = decode(StartupRules, body, f"{engine} startup") if body is not None else None
        out.append(
            decode(
                LaunchRules,
                run.fields(),
                f"{engine} {run.first} launch",
                engine=engine,
                first=run.first,
                last=run.last,
                citations=run.citations(),
                startup=startup_rules,
            )
        )
    return tuple(out)


# engine -> its launch tables, oldest first (engines without a launch section have none)
LAUNCH_RELEASES: EngineMap[tuple[LaunchRules, ...]] = EngineMap(_launch_tables)


def launch_rules_for(rules: EngineRules) -> LaunchRules:
    """The launch table for the release a drafter is judged by (the newest table not newer than it)."""
    tables = LAUNCH_RELEASES.get(rules.name)
    if not tables:
        known = ", ".join(LAUNCH_RELEASES)
        raise BadArgumentsError(f"--launch: no launch rules for engine {rules.name!r}; known: {known}")
    if not rules.pinned or not tables[0].pinned:
        return tables[-1]
    key = version_key(rules.requested or rules.last)
    chosen = tables[0]
    for table in tables:
        if version_key(table.first) <= key:
            chosen = table
    return chosen


# -- reading a command line -------------------------------------------------------------------------


@dataclass
class LaunchSettings:
    """What a release runs a command line with (``settings``), and how it got there.

    ``method_used`` is the method after the release's case rule, aliases and name-based detection
    (``None``: no speculative decoding); ``method_source`` says which; ``method_refused`` is the
    reason the release refuses the written value at startup, when it does.
    """

    command: str
    engine: str
    program: str
    launch_release: str  # the launch table's release label
    sources: tuple[str, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    given: dict[str, str] = field(default_factory=dict)  # setting -> the flag or key it came from
    method_used: str | None = None
    method_source: str = "absent"  # flag | draft name | default | absent
    method_refused: str | None = None
    options_file: str | None = None
    speculative_config: dict[str, Any] | None = None
    judged_by: str = ""  # the engine release label the drafter was judged by (set by diagnose)
    environment: dict[str, str] = field(default_factory=dict)  # NAME=value assignments before the program
    speculators_type: str | None = None  # `vllm serve CHECKPOINT`: its speculators_model_type
    verifier: str | None = None  # `vllm serve CHECKPOINT`: speculators_config.verifier.name_or_path

    def get(self, setting: Setting) -> Any:
        return self.settings.get(setting.value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "engine": self.engine,
            "program": self.program,
            "launch_release": self.launch_release,
            "judged_by": self.judged_by,
            "sources": list(self.sources),
            "settings": dict(self.settings),
            "given": dict(self.given),
            "method_used": self.method_used,
            "method_source": self.method_source,
            "method_refused": self.method_refused,
            "options_file": self.options_file,
            "speculative_config": self.speculative_config,
            **({"environment": dict(self.environment)} if self.environment else {}),
            **({"speculators_type": self.speculators_type} if self.speculators_type is not None else {}),
        }


def read_launch(line: CommandLine, rules: LaunchRules, base: Path | None = None) -> LaunchSettings:
    """Interpret ``line`` under ``rules``. Values the release's own parser refuses (a non-integer
    count, an option spelled the way this release does not accept, bad JSON, an unreadable
    options file) are :class:`BadArgumentsError` / :class:`UnusableInputError` (exit 2)."""
    if line.program not in rules.programs:
        raise BadArgumentsError(f"--launch: {line.program} does not start {rules.display} ({rules.release})")
    out = LaunchSettings(line.text, rules.engine, line.program, rules.release, rules.sources)
    out.environment = dict(line.environment)
    values: dict[Setting, tuple[Any, str]] = {}
    exclusive: dict[Setting, str] = {}
    config: dict[str, Any] | None = None
    config_from = ""
    if line.program in rules.operand_model and line.operands:
        values[Setting.TARGET] = (line.operands[0], "operand")
    for option in line.options:
        name = rules.canonical(option.name)
        base_name, _, dotted = (
            name.partition(".") if rules.dotted_config and name.startswith("--") else (name, "", "")
        )
        flag = rules.flag(base_name)
        if flag is None:
            _refuse_respelled(rules, option)
            continue  # an option this table does not model: not a speculative setting
        if dotted:
            if flag.source is not Source.CONFIG_JSON:
                continue
            config = config if config is not None else {}
            _merge_dotted(config, dotted.split("."), json_or_text(_need(option, name)))
            config_from = config_from or base_name
        elif flag.source is Source.CONFIG_JSON:
            config = {**(config or {}), **parse_json_object(option.value, name)}
            config_from = name
        elif flag.source is Source.OPTIONS_FILE:
            path, data = read_yaml_mapping(_need(option, name), name, base)
            out.options_file = str(path)
            section = data.get(rules.config_section) if rules.config_section else data
            if section is not None and not isinstance(section, dict):
                raise BadArgumentsError(
                    f"--launch: {rules.config_section} in {option.value} must be a mapping, got "
                    f"{type(section).__name__}"
                )
            config = dict(section) if section is not None else None
            config_from = f"{option.value}: {rules.config_section}"
        else:
            assert flag.setting is not None
            values[flag.setting] = (_need(option, name), name)
            if flag.exclusive_with_config:
                exclusive[flag.setting] = name
    config, config_from = _speculators_model(rules, values, config, config_from, base, out)
    if config is not None:
        if rules.normalise_config_keys:
            config = {str(k).replace("-", "_"): v for k, v in config.items()}
        out.speculative_config = config
        for ck in rules.config_keys:
            key = next((k for k in ck.keys if k in config), None)
            if key is None:
                continue
            if ck.setting in exclusive:
                raise BadArgumentsError(
                    f"--launch: {exclusive[ck.setting]} and {config_from}['{key}'] are mutually exclusive; "
                    f"{rules.display} ({rules.release}) refuses to start"
                )
            values[ck.setting] = (config[key], f"{config_from}.{key}")
    for setting, (raw, where) in values.items():
        out.settings[setting.value] = _coerce(setting, raw, where, rules)
        out.given[setting.value] = where
    _resolve_method(out, rules, speculative=config is not None or Setting.METHOD in values)
    return out


def _speculators_model(
    rules: LaunchRules,
    values: dict[Setting, tuple[Any, str]],
    config: dict[str, Any] | None,
    config_from: str,
    base: Path | None,
    out: LaunchSettings,
) -> tuple[dict[str, Any] | None, str]:
    """vLLM serving a speculators checkpoint as its model: the config it builds from that checkpoint,
    with the user's JSON applied first and ``method`` / ``model`` locked (as the release does);
    ``out`` records the checkpoint's type and verifier for the start-up checks."""
    if rules.speculators_model is None or Setting.TARGET not in values:
        return config, config_from
    model = str(values[Setting.TARGET][0])
    raw = local_config(model, base)
    spec = raw.get("speculators_config") if raw is not None else None
    if raw is None or not isinstance(spec, dict):
        return config, config_from
    methods = spec.get("proposal_methods")
    first = methods[0] if isinstance(methods, list) and methods and isinstance(methods[0], dict) else {}
    verifier = spec.get("verifier")
    kind = raw.get("speculators_model_type")
    built: dict[str, Any] = {**(config or {})}
    if first.get("speculative_tokens") is not None:
        built.setdefault("num_speculative_tokens", first["speculative_tokens"])
    built["method"] = dict(rules.speculators_model).get(str(kind), kind)
    built["model"] = model
    for model_type, key in rules.startup.speculators_sets if rules.startup else ():
        if kind == model_type:
            built[key] = True  # 0.32/0.33 base.py: peagle -> method eagle3 with parallel_drafting true
    out.speculators_type = str(kind) if kind is not None else None
    if isinstance(verifier, dict):
        out.verifier = verifier.get("name_or_path")
    if isinstance(verifier, dict) and isinstance(verifier.get("name_or_path"), str):
        values[Setting.TARGET] = (
            verifier["name_or_path"],
            f"{model}: speculators_config.verifier.name_or_path",
        )
    return built, f"{model}: speculators_config"


def _need(option: Option, name: str) -> str:
    if option.value is None:
        raise BadArgumentsError(f"--launch: {name} needs a value")
    return option.value


def _refuse_respelled(rules: LaunchRules, option: Option) -> None:
    """An option this release does not accept in this spelling, but whose other spelling is a
    modelled flag (SGLang's argparse refuses ``--speculative_algorithm``): the command would not start."""
    if rules.underscore_spellings or not option.name.startswith("--"):
        return
    for other in (option.name.replace("_", "-"), "--" + option.name[2:].replace("-", "_")):
        if other != option.name and rules.flag(other) is not None:
            raise BadArgumentsError(
                f"--launch: {rules.display} ({rules.release}) does not accept {option.name} "
                f"(its parser refuses it at startup); write {other}"
            )


def _merge_dotted(config: dict[str, Any], keys: list[str], value: Any) -> None:
    node = config
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[keys[-1]] = value


_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_MULTIPLIER = {
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "K": 2**10,
    "M": 2**20,
    "G": 2**30,
    "T": 2**40,
}


def _coerce(setting: Setting, raw: Any, where: str, rules: LaunchRules) -> Any:
    if setting is Setting.MAX_MODEL_LEN and isinstance(raw, str):
        # vLLM human_readable_int_or_auto: '32k' -> 32000, '32K' -> 32768, '-1' / 'auto' -> -1
        text = raw.strip()
        m = _HUMAN_INT.fullmatch(text)
        if text == "-1" or text.lower() == "auto":
            return -1
        if m is not None:
            return int(float(m[1]) * _MULTIPLIER[m[2]])
    if setting in INT_SETTINGS:
        if isinstance(raw, bool) or not isinstance(raw, (int, str)):
            raise BadArgumentsError(f"--launch: {where} must be an integer, got {raw!r}"[:200])
        try:
            return int(raw)
        except ValueError:
            raise BadArgumentsError(
                f"--launch: {where} must be an integer, got {raw!r}; {rules.display} refuses it at startup"[
                    :200
                ]
            ) from None
    if setting is Setting.CAPTURE_LAYERS:
        if (
            not isinstance(raw, list)
            or not raw
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in raw)
        ):
            raise BadArgumentsError(
                f"--launch: {where} must be a non-empty list of integers, got {raw!r}"[:200]
            )
        return sorted(set(raw))  # a set in the release (Optional[Set[int]])
    if not isinstance(raw, str):
        raise BadArgumentsError(f"--launch: {where} must be a string, got {raw!r}"[:200])
    return raw


def _resolve_method(out: LaunchSettings, rules: LaunchRules, speculative: bool) -> None:
    written = out.get(Setting.METHOD)
    if written is not None:
        out.method_source = "flag"
        if rules.method_choices is not None and written not in rules.method_choices:
            shown = (
                rules.method_choices
                if len(rules.method_choices) <= 12
                else (*rules.method_choices[:11], "...")
            )
            out.method_refused = (
                f"{written!r} is not one of its methods {', '.join(shown)} ({rules.method_refusal})"
                if rules.method_refusal
                else f"{written!r} is not one of its choices {', '.join(shown)} "
                "(compared exactly: the parser refuses it at startup)"
            )
        out.method_used = rules.used_method(written)
        kept = rules.startup.methods_kept if rules.startup is not None else None
        if out.method_refused is None and kept is not None and out.method_used not in kept:
            # vLLM <= 0.33: an explicit draft_model / mtp method still goes through the draft-name rule
            name = str(out.get(Setting.DRAFT) or "").lower()
            detected = next((m for sub, m in rules.method_from_draft_name if name and sub in name), None)
            if detected is not None and detected != out.method_used:
                out.method_used, out.method_source = detected, "draft name"
        return
    if not speculative or rules.method_detect_fallback is None:
        return  # no method: no speculative decoding (SGLang ignores the other speculative flags)
    draft = out.get(Setting.DRAFT)
    name = str(draft).lower() if draft is not None else ""
    detected = next((m for sub, m in rules.method_from_draft_name if name and sub in name), None)
    out.method_used = detected or rules.method_detect_fallback
    out.method_source = "draft name" if detected else "default"


__all__ = [
    "LAUNCH_RELEASES",
    "ConfigKey",
    "DraftMissing",
    "LaunchFlag",
    "LaunchRules",
    "LaunchSettings",
    "MethodCase",
    "Params",
    "Setting",
    "Source",
    "launch_rules_for",
    "read_launch",
]
