"""extras.EXTRAS is pyproject's optional dependencies, and every optional import of the package is in it.

The table is what a missing module is reported by (``pip install 'eagle3-forensics[<extra>]'``), so a
dependency added to pyproject, or a new lazy import of a package outside the core, must show up here.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib

import pytest
from paths import ROOT

from eagle3_forensics import extras
from eagle3_forensics.errors import ExitCode

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]

# distribution name (normalised) -> the module it is imported as, where the two differ
IMPORT_NAME = {"pyyaml": "yaml", "prometheus-client": "prometheus_client"}
# declared for a tool, not imported by the package (make lab; the docs build)
NOT_IMPORTED = {"jupyterlab", "mkdocs-material"}
# imported by the package, brought by a declared dependency of the same extra
TRANSITIVE = {"IPython": "ipykernel", "jupyter_client": "nbclient", "jinja2": "nbconvert"}
CORE = {"numpy", "safetensors", "yaml", "tqdm"}


def _name(requirement: str) -> str:
    name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(extra: str) -> set[str]:
    """The distributions ``extra`` installs, its own includes (``eagle3-forensics[probe]``) resolved."""
    out: set[str] = set()
    for req in PROJECT["optional-dependencies"][extra]:
        if _name(req) == extras.DISTRIBUTION:
            for inner in re.search(r"\[(.*)\]", req).group(1).split(","):  # type: ignore[union-attr]
                out |= _declared(inner.strip())
        else:
            out.add(_name(req))
    return out


def test_core_has_no_torch_and_is_what_the_static_commands_import() -> None:
    core = {IMPORT_NAME.get(_name(r), _name(r)) for r in PROJECT["dependencies"]}
    assert core == CORE
    assert "version" in PROJECT["dynamic"] and "version" not in PROJECT


@pytest.mark.parametrize("extra", sorted(extras.EXTRAS))
def test_table_matches_pyproject(extra: str) -> None:
    declared = {IMPORT_NAME.get(d, d) for d in _declared(extra)} - NOT_IMPORTED
    table = set(extras.EXTRAS[extra])
    assert declared <= table, f"{extra}: declared in pyproject, missing from extras.EXTRAS"
    for module in table - declared:
        assert TRANSITIVE.get(module) in declared, f"{extra}: {module} is not declared in pyproject"


def test_dev_installs_every_extra() -> None:
    dev = _declared("dev")
    for extra in extras.EXTRAS:
        assert _declared(extra) <= dev, extra
    assert "mkdocs-material" in dev and "pyarrow" in _declared("offline")


def _optional_imports() -> set[str]:
    """Top-level modules the package imports that are neither stdlib, core nor the package itself."""
    found: set[str] = set()
    for path in (ROOT / "eagle3_forensics").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            found |= {n.split(".")[0] for n in names}
    # jsonschema: only the tests validate (schemas.validate, the dev extra)
    return found - set(sys.stdlib_module_names) - CORE - {"eagle3_forensics", "jsonschema"}


def test_every_optional_import_has_an_extra() -> None:
    assert _optional_imports() <= set(extras.PROVIDER), sorted(_optional_imports() - set(extras.PROVIDER))


def test_provider_is_the_narrowest_extra_with_the_module() -> None:
    for module, extra in extras.PROVIDER.items():
        assert module in extras.EXTRAS[extra]
        assert len(extras.EXTRAS[extra]) == min(len(m) for m in extras.EXTRAS.values() if module in m)


def test_require_and_translated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # blocked: import fails as if absent
    assert not extras.installed("prometheus_client") and extras.installed("json")
    assert extras.missing("server") == "prometheus_client"
    with pytest.raises(extras.MissingExtraError) as info:
        extras.require("server", "'probe-server'")
    err = info.value
    assert err.exit_code == ExitCode.UNUSABLE == 2 and err.code == "MISSING_EXTRA"
    assert str(err) == (
        "'probe-server' needs the 'server' extra (prometheus_client is not installed): "
        "pip install 'eagle3-forensics[server]'"
    )
    with (
        pytest.raises(extras.MissingExtraError, match=r"eagle3-forensics\[server\]"),
        extras.translated("'x'"),
    ):
        import prometheus_client
    # the stated extra wins when it brings the module; else the module's narrowest one
    monkeypatch.setitem(sys.modules, "transformers", None)
    with (
        pytest.raises(extras.MissingExtraError, match=r"'probe' extra \(transformers"),
        extras.translated("'p'", "probe"),
    ):
        import transformers
    with (
        pytest.raises(extras.MissingExtraError, match=r"'models' extra \(transformers"),
        extras.translated("'v'"),
    ):
        import transformers  # noqa: F401
    with (
        pytest.raises(extras.MissingExtraError, match=r"'server' extra \(prometheus"),
        extras.translated("'v'", "models"),
    ):
        import prometheus_client  # noqa: F401
    # a missing module that is no extra's is a bug: not translated
    with pytest.raises(ModuleNotFoundError), extras.translated("'x'"):
        import eagle3_forensics_no_such_module  # noqa: F401


def test_the_notebooks_kernel_guard_names_what_the_kernel_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    """``require_notebook_kernel`` (each notebook's first call): silent here, one line without pandas."""
    usage_error = pytest.importorskip("IPython.core.error").UsageError
    from eagle3_forensics.runs.kernel import require_notebook_kernel

    require_notebook_kernel()
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(
        usage_error, match=r"^this kernel lacks pandas, which the notebooks need: choose Kernel"
    ):
        require_notebook_kernel()
