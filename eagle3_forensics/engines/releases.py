"""The drafter-loader tables of every engine, built from the ``loader`` sections of the records.

:data:`ENGINE_NAMES` fixes which engines exist and in what order they are reported; the tables
themselves come from ``engines/records/`` on first use (:func:`engine_releases`), so importing the
package reads no file. A loader section is the JSON of an :class:`EngineRules` without its identity
(the record's engine, package and range); its ``classes`` hold each drafter class as the
differences from the release's main table, and vLLM's ``rejected_model_types`` come from the
record's ``knobs.mtp_rewrites`` unless the section lists them.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from functools import cache
from typing import Any, TypeVar

from eagle3_forensics.engines.catalog import Run, runs
from eagle3_forensics.engines.codec import convert, decode
from eagle3_forensics.engines.rules import ClassChoice, ConfigStyle, EngineRules

# Every engine the tool judges, in report order (each has records in engines/records/).
ENGINE_NAMES: tuple[str, ...] = ("sglang", "vllm", "eagle", "speculators", "tensorrt_llm")

# What vLLM does with a draft model_type its hf_config_override rewrites into an MTP model.
MTP_WHAT = "rewritten to an MTP model by config/speculative.py hf_config_override, which eagle3 refuses"

V = TypeVar("V")


class EngineMap(Mapping[str, V]):
    """A mapping over :data:`ENGINE_NAMES` whose values are built on first access (then cached)."""

    def __init__(self, build: Callable[[str], V], names: tuple[str, ...] = ENGINE_NAMES) -> None:
        self._build = cache(build)
        self._names = names

    def __getitem__(self, name: str) -> V:
        if name not in self._names:
            raise KeyError(name)
        value = self._build(name)
        if isinstance(value, tuple) and not value:
            raise KeyError(name)  # an engine whose records have no such section
        return value

    def __iter__(self) -> Iterator[str]:
        return (n for n in self._names if n in self)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str) or name not in self._names:
            return False
        value = self._build(name)
        return not (isinstance(value, tuple) and not value)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"EngineMap({', '.join(self._names)})"


def mtp_rejections(run: Run) -> tuple[tuple[str, str], ...]:
    """``(model_type, what happens)`` for the MTP rewrite list read in the run's record (none: ``()``)."""
    knobs = run.record.section("knobs") or {}
    mtp = knobs.get("mtp_rewrites")
    if mtp is None:
        return ()
    cited = run.record.cited([mtp["cite"]])[0]
    return tuple((t, f"{MTP_WHAT} ({cited.package}=={mtp['version']})") for t in mtp["model_types"])


def _choice(data: dict[str, Any], main: EngineRules, where: str) -> ClassChoice:
    diff = data.get("rules", {})
    fields = {k: convert(_hint(k), v, f"{where}.rules.{k}") for k, v in diff.items()}
    rest = {k: v for k, v in data.items() if k != "rules"}
    styles = rest.pop("styles", None)
    choice = decode(ClassChoice, rest, where, rules=replace(main, classes=(), **fields))
    if styles is not None:
        choice = replace(choice, styles=frozenset(ConfigStyle(s) for s in styles))
    return choice


@cache
def _hints() -> dict[str, Any]:
    return typing.get_type_hints(EngineRules)


def _hint(name: str) -> Any:
    hints = _hints()
    if name not in hints:
        raise ValueError(f"unknown EngineRules field {name!r}")
    return hints[name]


def build(engine: str, run: Run) -> EngineRules:
    """The :class:`EngineRules` of one loader run."""
    where = f"{run.record.path.name if run.record.path else engine} loader"
    body = run.fields("classes")
    given: dict[str, Any] = {
        "name": engine,
        "package": run.records[0].package,
        "first": run.first,
        "last": run.last,
        "pinned": run.pinned,
        "citations": run.citations(),
    }
    if "rejected_model_types" not in body:
        given["rejected_model_types"] = mtp_rejections(run)
    main = decode(EngineRules, body, where, **given)
    classes = tuple(
        _choice(c, main, f"{where}.classes[{i}]") for i, c in enumerate(run.body.get("classes", ()))
    )
    return replace(main, classes=classes) if classes else main


def engine_releases(engine: str) -> tuple[EngineRules, ...]:
    """``engine``'s loader tables, oldest first (empty for an engine without records)."""
    return tuple(build(engine, run) for run in runs(engine, "loader"))


ENGINE_RELEASES: EngineMap[tuple[EngineRules, ...]] = EngineMap(engine_releases)

__all__ = [
    "ENGINE_NAMES",
    "ENGINE_RELEASES",
    "MTP_WHAT",
    "EngineMap",
    "build",
    "engine_releases",
    "mtp_rejections",
]
