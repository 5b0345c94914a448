"""The optional dependencies by use (pyproject's extras) and the one error a command raises without one.

The core (numpy, safetensors, pyyaml, tqdm) runs the static commands, so the package installs beside
any engine's torch. Everything else is imported lazily where it is used; a missing one must reach the
user as "install this extra" (exit 2, one line, ``MISSING_EXTRA`` in the JSON), not as an internal
error. :data:`EXTRAS` is the table (a test keeps it equal to pyproject's optional dependencies);
:func:`require` checks up front, :func:`translated` turns an ``ImportError`` met later into the same error.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator, Mapping

from eagle3_forensics.errors import ForensicsError

DISTRIBUTION = "eagle3-forensics"

# extra -> the top-level modules it provides (import names), the extras it includes first.
EXTRAS: Mapping[str, tuple[str, ...]] = {
    "probe": ("torch", "transformers", "tokenizers"),
    "models": ("transformers", "tokenizers", "jinja2"),
    "server": ("prometheus_client", "torch", "transformers", "tokenizers"),
    "offline": ("pyarrow", "torch", "transformers", "tokenizers"),
    "notebooks": (
        "pandas",
        "matplotlib",
        "ipykernel",
        "ipywidgets",
        "IPython",
        "jupyter_client",
        "nbformat",
        "nbclient",
        "nbconvert",
        "papermill",
        "jupytext",
        "jinja2",
        "torch",
        "transformers",
        "tokenizers",
    ),
}

# module -> the narrowest extra that brings it, for an ImportError met without a stated purpose.
PROVIDER: Mapping[str, str] = {
    "torch": "probe",
    "transformers": "models",
    "tokenizers": "models",
    "jinja2": "models",
    "prometheus_client": "server",
    "pyarrow": "offline",
    **{
        m: "notebooks"
        for m in EXTRAS["notebooks"]
        if m not in ("torch", "transformers", "tokenizers", "jinja2")
    },
}


class MissingExtraError(ForensicsError):
    """A command needs an optional dependency that is not installed (exit 2, like unusable input:
    nothing was analysed, and the fix is on the user's side)."""

    code = "MISSING_EXTRA"

    def __init__(self, extra: str, module: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the '{extra}' extra ({module} is not installed): "
            f"pip install '{DISTRIBUTION}[{extra}]'"
        )
        self.extra = extra
        self.module = module


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (``sys.modules[name] = None`` blocks count as absent)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent missing, or a module without a spec in sys.modules
        return False


def missing(extra: str) -> str | None:
    """The first module of ``extra`` that is not installed, or ``None``."""
    return next((m for m in EXTRAS[extra] if not installed(m)), None)


def require(extra: str, purpose: str) -> None:
    """Raise :class:`MissingExtraError` unless every module of ``extra`` is installed."""
    absent = missing(extra)
    if absent is not None:
        raise MissingExtraError(extra, absent, purpose)


def error_for(exc: ImportError, purpose: str, extra: str | None = None) -> MissingExtraError | None:
    """The :class:`MissingExtraError` an ``ImportError`` of an optional module means, else ``None``
    (a missing core or project module is a bug, not the user's to fix)."""
    module = (exc.name or "").split(".")[0]
    if module not in PROVIDER:
        return None
    if extra is None or module not in EXTRAS[extra]:
        extra = PROVIDER[module]
    return MissingExtraError(extra, module, purpose)


@contextlib.contextmanager
def translated(purpose: str, extra: str | None = None) -> Iterator[None]:
    """Inside: an ``ImportError`` of an optional module becomes :class:`MissingExtraError`."""
    try:
        yield
    except ImportError as exc:
        err = error_for(exc, purpose, extra)
        if err is None:
            raise
        raise err from None


__all__ = [
    "EXTRAS",
    "PROVIDER",
    "MissingExtraError",
    "error_for",
    "installed",
    "missing",
    "require",
    "translated",
]
