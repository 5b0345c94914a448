"""Lazy public names for packages: ``import eagle3_forensics.vocab`` loads nothing heavy.

Each sub-package states its public names in ``__all__``; the module that defines a name is
imported the first time the name is touched, so numpy and torch load only when they are needed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, table: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, resolving ``name`` from ``package + '.' + table[name]``."""

    def __getattr__(name: str) -> Any:  # noqa: N807 - becomes the package's module __getattr__ (PEP 562)
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__() -> list[str]:  # noqa: N807 - the package's module __dir__ (PEP 562)
        return sorted(set(vars(importlib.import_module(package))) | set(table))

    return __getattr__, __dir__
