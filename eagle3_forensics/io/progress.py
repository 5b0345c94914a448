"""Progress bars for the long loops of a notebook cell (the probes' prompts, 04's variants).

Why: in JupyterLab a cell of 04 or 06 runs for up to a minute on 2 cores with nothing on screen,
which reads as a hang. A bar shows only inside a Jupyter kernel (a notebook, not the CLI, whose
stderr belongs to its own messages), never in a report run (``E3F_INTERACTIVE=0``, which the
runner sets: an executed notebook would keep the bar's widget as a dead output), and only once the
loop has run ``DELAY_S``: a quick loop shows nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

#: seconds a loop runs before its bar appears (tqdm's ``delay``): the demo's short loops show none
DELAY_S = 2.0


def in_lab() -> bool:
    """A Jupyter kernel that someone is watching: ipykernel is running and the runner did not
    mark this run as a static report."""
    if os.environ.get("E3F_INTERACTIVE", "").strip() == "0":
        return False
    kernel = sys.modules.get("ipykernel")
    if kernel is None:
        return False
    try:
        from IPython import get_ipython  # optional: IPython (present wherever ipykernel is)
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def progress(items: Iterable[T], *, desc: str, total: int | None = None, unit: str = "it") -> Iterator[T]:
    """``items``, with a notebook progress bar when :func:`in_lab` (see the module docstring)."""
    if not in_lab():
        yield from items
        return
    from tqdm.auto import tqdm  # heavy: tqdm (and ipywidgets for the notebook bar)

    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    bar = tqdm(items, desc=desc, total=total, unit=unit, delay=DELAY_S, leave=False, dynamic_ncols=True)
    try:
        yield from bar
    finally:
        bar.close()


__all__ = ["DELAY_S", "in_lab", "progress"]
