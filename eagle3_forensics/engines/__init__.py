"""Engine knowledge by release: the rule tables and the load simulator that interprets them.

``ENGINE_RELEASES[name]`` is the ordered tuple of release tables of one engine (oldest first), read
from the release records (``engines/records/``) on first use; ``ENGINES[name]`` is the newest
described release. An engine spec on the command line is ``NAME``
(the newest release) or ``NAME==VERSION`` (the table whose range holds VERSION);
:func:`resolve_release` turns one into its table and :func:`resolve_engines` a list of them.
"""

from __future__ import annotations

from dataclasses import replace

from eagle3_forensics.engines.releases import ENGINE_NAMES, ENGINE_RELEASES, EngineMap
from eagle3_forensics.engines.rules import EngineRules, version_key
from eagle3_forensics.errors import BadArgumentsError

# The newest described release of each engine (what a bare engine name means).
ENGINES: EngineMap[EngineRules] = EngineMap(lambda name: ENGINE_RELEASES[name][-1])
# The engines `diagnose --engine all` judges: every engine that loads drafters from a config.
DEFAULT_ENGINES: tuple[str, ...] = ENGINE_NAMES


def described(name: str) -> str:
    """What is described for one engine, e.g. ``sglang 1.0.0, 1.1.0–1.2.0``."""
    releases = ENGINE_RELEASES[name]
    if not releases[0].pinned:
        return f"{name} ({releases[-1].package}@{releases[-1].last}, no release described)"
    versions = ", ".join(r.versions for r in releases)
    return f"{name} ({versions})"


def known_engines() -> str:
    """One line naming every engine and the releases described."""
    return "; ".join(described(n) for n in ENGINE_NAMES)


def split_spec(spec: str) -> tuple[str, str | None]:
    """``"sglang==1.2.0"`` -> ``("sglang", "1.2.0")``; ``"vllm"`` -> ``("vllm", None)``."""
    text = spec.strip()
    if "==" in text:
        name, _, version = text.partition("==")
        return name.strip().lower(), version.strip()
    return text.lower(), None


def resolve_release(spec: str | EngineRules) -> EngineRules:
    """The release table an engine spec names. Unknown engines and versions are :class:`BadArgumentsError`.

    ``NAME`` -> the newest table; ``NAME==VERSION`` -> the table whose range holds VERSION (a version
    between two tables read -> the nearest older one; newer than the newest read -> the newest one;
    the table records the version asked for). Older than the oldest described is an error.
    """
    if isinstance(spec, EngineRules):
        return spec
    name, version = split_spec(spec)
    if name not in ENGINE_RELEASES:
        raise BadArgumentsError(f"unknown engine {name!r}; known: {known_engines()}")
    releases = ENGINE_RELEASES[name]
    if version is None:
        return releases[-1]
    if not version:
        raise BadArgumentsError(f"no version after '{name}=='; known: {described(name)}")
    if not releases[0].pinned:
        return replace(releases[-1], requested=version)
    try:
        key = version_key(version)
    except ValueError:
        raise BadArgumentsError(f"{version!r} is not a version of {name}; known: {described(name)}") from None
    if key < version_key(releases[0].first):
        raise BadArgumentsError(
            f"{name} {version} is older than the oldest release described ({releases[0].first}); "
            f"known: {described(name)}"
        )
    chosen = releases[0]
    for table in releases:
        if version_key(table.first) <= key:
            chosen = table
    return replace(chosen, requested=version)


def resolve_engines(spec: str | list[str] | tuple[str, ...] | None) -> list[EngineRules]:
    """``None``/``"all"`` -> the newest release of every engine; else each spec resolved (one per engine)."""
    if spec is None or spec == "all":
        return [ENGINES[n] for n in DEFAULT_ENGINES]
    specs = [spec] if isinstance(spec, str) else list(spec)
    expand_all = "all" in specs
    out: list[EngineRules] = []
    for s in (s for s in specs if s != "all"):
        rules = resolve_release(s)
        same = next((r for r in out if r.name == rules.name), None)
        if same is not None:
            if same.release == rules.release and same.requested == rules.requested:
                continue  # named twice, identically
            raise BadArgumentsError(f"engine {rules.name!r} named twice; judge one release per run")
        out.append(rules)
    if expand_all:  # "all" next to explicit releases: every other engine at its newest release
        out += [ENGINES[n] for n in DEFAULT_ENGINES if all(r.name != n for r in out)]
    return out


def releases_building(layers: int) -> list[str]:
    """For each engine, the first described release whose default drafter class builds ``layers`` layers."""
    out = []
    for name, releases in ENGINE_RELEASES.items():
        first = next((r for r in releases if r.max_layers is None or r.max_layers >= layers), None)
        if first is not None:
            newest = releases[-1]
            out.append(first.release if first is newest else f"{name} >= {first.first}")
    return out


def release_label(rules: EngineRules) -> str:
    """The release a drafter was judged by, with the version asked for when it says more."""
    label = rules.release
    asked = rules.requested
    if asked is None or not rules.pinned:
        return label if asked is None else f"{label}; asked {asked}"
    if rules.covers(asked):
        return label
    if version_key(asked) > version_key(ENGINE_RELEASES[rules.name][-1].last):
        return f"{label} (asked {asked}: newer than the newest release read)"
    return f"{label} (asked {asked}: not read; the nearest older release read)"


__all__ = [
    "DEFAULT_ENGINES",
    "ENGINES",
    "ENGINE_NAMES",
    "ENGINE_RELEASES",
    "EngineRules",
    "known_engines",
    "release_label",
    "releases_building",
    "resolve_engines",
    "resolve_release",
    "split_spec",
]
