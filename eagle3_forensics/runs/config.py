"""Run configurations: the YAML a run reads, resolved into jobs (one per drafter × notebook).

A run configuration (see ``configs/demo.yaml`` for every key) names the notebooks, the drafters
and the parameters; :func:`config_from_dict` merges the parameters (later wins: ``parameters`` <
``notebooks.<nb>`` < ``drafters.<d>.parameters``), checks every name against the notebooks'
``parameters`` cells, resolves path parameters against the config file and lists the jobs in
config order. :attr:`RunConfig.fingerprint` identifies the configuration across machines (the
parsed YAML, not its resolved paths, plus the job list), so shards of one run can be told from
shards of another (:mod:`eagle3_forensics.runs.shard`).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle3_forensics.engines import resolve_release
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
DEFAULT_PATH_PARAMETERS = ("checkpoint", "target", "ids", "corpus", "prompts", "variants")
DEFAULT_TOLERANCE = {"acceptance_length": 0.1, "per_position": 0.1}
DEFAULT_POOL = "default"
KERNEL_MODES = ("warm", "fresh")
_CONFIG_KEYS = {
    "name",
    "description",
    "notebooks_dir",
    "timeout",
    "start_timeout",
    "workers",
    "kernels",
    "env",
    "show_code",
    "path_parameters",
    "parameters",
    "notebooks",
    "drafters",
    "drafters_from",
    "gate",
    "pools",
    "profiles",  # read by load_config (apply_profile); config_from_dict ignores them
}


@dataclass
class Job:
    drafter: str
    notebook: str  # stem, e.g. "01_checkpoint_keys"
    path: str  # the notebook file
    parameters: dict[str, Any]
    stem: str  # file-name stem of this run's outputs
    pool: str = DEFAULT_POOL  # which machines run it when sharded (config `pools`)

    @property
    def key(self) -> tuple[str, str]:
        return (self.drafter, self.notebook)


@dataclass
class RunConfig:
    name: str
    source: str | None
    notebooks_dir: Path
    timeout: int
    start_timeout: int
    workers: int
    env: dict[str, str]
    show_code: bool
    notebooks: list[str]
    drafters: list[str]
    jobs: list[Job]
    tolerance: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TOLERANCE))
    description: str = ""
    fingerprint: str = ""
    pools: dict[str, list[str]] = field(default_factory=dict)  # pool -> notebooks (the rest: DEFAULT_POOL)
    kernels: str = "fresh"  # "fresh": papermill/nbclient start each kernel; opt-in "warm": runs.warm
    profile: str | None = None  # the config's `profiles.<name>` laid over it (load_config), if any


def notebook_parameters(path: str | Path) -> dict[str, Any]:
    """The names and default values in a notebook's ``parameters`` cell (plain literals)."""
    import nbformat  # optional: nbformat (the notebooks extra)

    nb = nbformat.read(str(path), as_version=4)
    cells = [
        c for c in nb.cells if c.cell_type == "code" and "parameters" in c.get("metadata", {}).get("tags", [])
    ]
    if not cells:
        return {}
    out: dict[str, Any] = {}
    for node in ast.parse(cells[0].source).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    try:
                        out[t.id] = ast.literal_eval(node.value)
                    except ValueError:
                        out[t.id] = None
    return out


#: notebook parameters that name engine releases (``sglang``, ``sglang==0.5.11``, ``all``, ``reference``)
ENGINE_PARAMETERS = ("engine", "engines", "probe_engine", "server_engine")


def _check_engines(params: dict[str, Any], where: str) -> None:
    """An unknown engine or release in a run config is bad arguments before any notebook runs."""
    for name in ENGINE_PARAMETERS:
        value = params.get(name)
        specs = value if isinstance(value, list) else [value] if isinstance(value, str) else []
        for spec in specs:
            if spec in ("all", "reference") or spec is None:
                continue
            try:
                resolve_release(str(spec))
            except BadArgumentsError as exc:
                raise BadArgumentsError(f"config: {where}: parameter {name}: {exc}") from None


def _safe_stem(text: str) -> str:
    """A file-name-safe rendering of a drafter / notebook name (the original stays in the summary)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")
    return stem or "x"


def _resolve_paths(params: dict[str, Any], names: Sequence[str], base: Path) -> dict[str, Any]:
    out = dict(params)
    for k, v in params.items():
        if k in names and isinstance(v, str) and v:
            p = Path(os.path.expanduser(v))
            out[k] = str(p if p.is_absolute() else (base / p).resolve())
    return out


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UnusableInputError(f"config: {what} must be a mapping, got {type(value).__name__}")
    return {str(k): v for k, v in value.items()}


def _config_number(value: Any, what: str, cast: type[int] | type[float]) -> Any:
    """``cast(value)``; a value that is not a number is an unusable config, named by its key."""
    try:
        return cast(value)
    except (TypeError, ValueError, OverflowError):
        raise UnusableInputError(f"config: {what} must be a number, got {value!r}") from None


def _config_names(value: Any, what: str) -> list[str]:
    """A list of names (strings); anything else is an unusable config."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UnusableInputError(f"config: {what} must be a list of names, got {value!r}")
    return value


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, e.g. a container's or Slurm's share)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _workers(value: Any) -> int:
    """``workers``: a number, or ``auto``: one per usable core plus one, which keeps every core busy
    while a worker waits on a kernel start or renders HTML (docs/benchmarks.md "Notebook report")."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return usable_cores() + 1
    return max(1, _config_number(value or 1, "workers", int))


def _overlay(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` laid over ``base``: mappings merge key by key, any other value replaces."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _overlay(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def apply_profile(data: dict[str, Any], profile: str | None) -> dict[str, Any]:
    """The parsed config without its ``profiles`` section, with ``profiles.<profile>`` laid over it.

    Why: one file keeps the quick report (the top level, ``make report``) and the full matrix
    (``profiles.full``, ``make report-full`` and CI) in step; a profile names only what differs."""
    profiles = _mapping(data.get("profiles"), "profiles")
    rest = {k: v for k, v in data.items() if k != "profiles"}
    if profile is None:
        return rest
    if profile not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        raise BadArgumentsError(f"config has no profile {profile!r} (profiles: {known})")
    over = _mapping(profiles[profile], f"profiles.{profile}")
    if "profiles" in over:
        raise UnusableInputError(f"config: profiles.{profile} cannot hold profiles")
    return _overlay(rest, over)


def load_config(path: str | Path, profile: str | None = None) -> RunConfig:
    """Read a run configuration (YAML), with ``profiles.<profile>`` laid over it when given.
    Relative paths are relative to the config file."""
    import yaml  # heavy: yaml

    p = Path(path)
    if not p.is_file():
        raise UnusableInputError(f"run config not found: {p}", path=str(p))
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UnusableInputError(f"unreadable run config {p}: {' '.join(str(exc).split())[:300]}") from None
    data = apply_profile(_mapping(data, "the top level"), profile)
    config = config_from_dict(data, base=p.resolve().parent, source=str(p))
    config.profile = profile
    return config


def config_from_dict(data: dict[str, Any], base: str | Path = ".", source: str | None = None) -> RunConfig:
    """Build a :class:`RunConfig` from parsed YAML (see ``configs/demo.yaml`` for every key)."""
    base = Path(base).resolve()
    unknown = set(data) - _CONFIG_KEYS
    if unknown:
        raise UnusableInputError(
            f"config: unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(_CONFIG_KEYS))}"
        )
    path_names = tuple(
        _config_names(data.get("path_parameters") or list(DEFAULT_PATH_PARAMETERS), "path_parameters")
    )
    nb_dir_raw = data.get("notebooks_dir")
    nb_dir = NOTEBOOKS_DIR if nb_dir_raw is None else (base / os.path.expanduser(str(nb_dir_raw))).resolve()
    global_params = _resolve_paths(_mapping(data.get("parameters"), "parameters"), path_names, base)
    declared, nb_params = _notebooks(data, nb_dir, path_names, base)
    names = list(declared)
    drafters = _drafters(data, base)
    pools = _pools(data.get("pools"), names)
    pool_of = {n: p for p, nbs in pools.items() for n in nbs}
    jobs: list[Job] = []
    stems: set[str] = set()
    for dname, spec in drafters.items():
        d_params, selected = _drafter_parameters(dname, spec, declared, path_names, base)
        for n in selected:
            params = {k: v for k, v in global_params.items() if k in declared[n]}
            params.update(nb_params[n])
            params.update({k: v for k, v in d_params.items() if k in declared[n]})
            stem = f"{_safe_stem(dname)}__{_safe_stem(n)}"
            while stem in stems:
                stem += "_"
            stems.add(stem)
            _check_engines(params, f"{dname}/{n}")
            jobs.append(Job(dname, n, str(nb_dir / f"{n}.ipynb"), params, stem, pool_of.get(n, DEFAULT_POOL)))
    tolerance = _tolerance(data)
    workers = _workers(data.get("workers"))
    kernels = str(data.get("kernels") or "fresh")
    if kernels not in KERNEL_MODES:
        raise UnusableInputError(f"config: kernels must be one of {', '.join(KERNEL_MODES)}, not {kernels!r}")
    return RunConfig(
        name=str(data.get("name") or (Path(source).stem if source else "run")),
        source=source,
        notebooks_dir=nb_dir,
        timeout=_config_number(data.get("timeout") or 300, "timeout", int),
        start_timeout=_config_number(data.get("start_timeout") or 120, "start_timeout", int),
        workers=max(1, workers),
        env={str(k): str(v) for k, v in _mapping(data.get("env"), "env").items()},
        show_code=bool(data.get("show_code", False)),
        notebooks=names,
        drafters=list(drafters),
        jobs=jobs,
        tolerance=tolerance,
        description=str(data.get("description") or ""),
        fingerprint=config_fingerprint(data, jobs),
        pools=pools,
        kernels=kernels,
    )


def _notebooks(
    data: dict[str, Any], nb_dir: Path, path_names: Sequence[str], base: Path
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The listed notebooks: ``(parameters each declares, parameters the config sets for each)``."""
    nb_spec = data.get("notebooks")
    if isinstance(nb_spec, list):
        nb_spec = {str(n): {} for n in nb_spec}
    notebooks = _mapping(nb_spec, "notebooks")
    if not notebooks:
        raise UnusableInputError("config: no notebooks listed")
    declared: dict[str, dict[str, Any]] = {}
    nb_params: dict[str, dict[str, Any]] = {}
    for name, spec in notebooks.items():
        stem = name[:-6] if name.endswith(".ipynb") else name
        f = nb_dir / f"{stem}.ipynb"
        if not f.is_file():
            raise UnusableInputError(f"config: notebook {f} not found")
        declared[stem] = notebook_parameters(f)
        params = _resolve_paths(_mapping(spec, f"notebooks.{name}"), path_names, base)
        bad = set(params) - set(declared[stem])
        if bad:
            raise UnusableInputError(
                f"config: notebook {stem} has no parameter(s) {', '.join(sorted(bad))} "
                f"(it declares {', '.join(declared[stem]) or 'none'})"
            )
        nb_params[stem] = params
    return declared, nb_params


def _drafters(data: dict[str, Any], base: Path) -> dict[str, dict[str, Any]]:
    """Every drafter directory under ``drafters_from``, then the ``drafters`` listed by name."""
    drafters: dict[str, dict[str, Any]] = {}
    if data.get("drafters_from") is not None:
        root = (base / os.path.expanduser(str(data["drafters_from"]))).resolve()
        if not root.is_dir():
            raise UnusableInputError(
                f"config: drafters_from {root} is not a directory (create the demo with `make data`)"
            )
        for d in sorted(x for x in root.iterdir() if x.is_dir() and not x.name.startswith(".")):
            drafters[d.name] = {"checkpoint": str(d)}
    for dname, spec in _mapping(data.get("drafters"), "drafters").items():
        drafters[dname] = (
            {"checkpoint": spec} if isinstance(spec, str) else _mapping(spec, f"drafters.{dname}")
        )
    if not drafters:
        raise UnusableInputError("config: no drafters (give `drafters` or `drafters_from`)")
    return drafters


def _drafter_parameters(
    dname: str,
    spec: dict[str, Any],
    declared: dict[str, dict[str, Any]],
    path_names: Sequence[str],
    base: Path,
) -> tuple[dict[str, Any], list[str]]:
    """One drafter's parameters (its checkpoint among them) and the notebooks it runs, checked."""
    unknown_d = set(spec) - {"checkpoint", "parameters", "notebooks"}
    if unknown_d:
        raise UnusableInputError(
            f"config: drafters.{dname}: unknown key(s) {', '.join(sorted(unknown_d))} "
            "(checkpoint, parameters, notebooks)"
        )
    d_params = _resolve_paths(
        _mapping(spec.get("parameters"), f"drafters.{dname}.parameters"), path_names, base
    )
    if spec.get("checkpoint") is not None:
        d_params = {**_resolve_paths({"checkpoint": str(spec["checkpoint"])}, path_names, base), **d_params}
    chosen = spec.get("notebooks")
    if chosen is not None:
        chosen = _config_names(chosen, f"drafters.{dname}.notebooks")
    selected = (
        list(declared)
        if chosen is None
        else [str(n)[:-6] if str(n).endswith(".ipynb") else str(n) for n in chosen]
    )
    missing = [n for n in selected if n not in declared]
    if missing:
        raise UnusableInputError(
            f"config: drafters.{dname}.notebooks names {', '.join(missing)}, "
            "which the config's notebooks do not list"
        )
    for k in d_params:
        if not any(k in declared[n] for n in selected):
            raise UnusableInputError(f"config: drafters.{dname}: no listed notebook has a parameter {k!r}")
    return d_params, selected


def _tolerance(data: dict[str, Any]) -> dict[str, float]:
    """The gate's tolerances: the defaults, overridden by ``gate.tolerance``."""
    gate = _mapping(data.get("gate"), "gate")
    tolerance = dict(DEFAULT_TOLERANCE)
    tolerance.update(
        {
            k: _config_number(v, f"gate.tolerance.{k}", float)
            for k, v in _mapping(gate.get("tolerance"), "gate.tolerance").items()
        }
    )
    return tolerance


def _pools(value: Any, notebooks: Sequence[str]) -> dict[str, list[str]]:
    """``pools: {gpu: [00_triage, 04_accept_rate_probe]}``: named groups of notebooks that shard
    separately (``run --shard gpu:1/2``); notebooks in no pool form the pool ``default``."""
    pools: dict[str, list[str]] = {}
    seen: dict[str, str] = {}
    for pname, listed in _mapping(value, "pools").items():
        if pname == DEFAULT_POOL or not re.fullmatch(r"[A-Za-z0-9_-]+", pname):
            raise UnusableInputError(
                f"config: pools: bad pool name {pname!r} (letters, digits, _ and -; "
                f"{DEFAULT_POOL!r} is the pool of the notebooks listed in none)"
            )
        if not isinstance(listed, list) or not listed:
            raise UnusableInputError(f"config: pools.{pname} must be a non-empty list of notebooks")
        stems = [str(n)[:-6] if str(n).endswith(".ipynb") else str(n) for n in listed]
        for n in stems:
            if n not in notebooks:
                raise UnusableInputError(
                    f"config: pools.{pname} names {n}, which the config's notebooks do not list"
                )
            if n in seen:
                raise UnusableInputError(f"config: notebook {n} is in two pools ({seen[n]}, {pname})")
            seen[n] = pname
        pools[pname] = stems
    return pools


def config_fingerprint(data: dict[str, Any], jobs: Sequence[Job]) -> str:
    """The identity of a run configuration on any machine: the parsed YAML (relative paths as
    written, so a checkout mounted elsewhere has the same fingerprint) and the job list (which
    also pins what ``drafters_from`` found)."""
    canonical = json.dumps(
        {"config": data, "jobs": [[j.drafter, j.notebook, j.stem, j.pool] for j in jobs]},
        sort_keys=True,
        default=str,
        ensure_ascii=True,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


__all__ = [
    "DEFAULT_POOL",
    "DEFAULT_TOLERANCE",
    "KERNEL_MODES",
    "Job",
    "RunConfig",
    "apply_profile",
    "config_fingerprint",
    "config_from_dict",
    "load_config",
    "notebook_parameters",
    "usable_cores",
]
