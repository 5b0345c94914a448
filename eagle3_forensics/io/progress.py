"""Progress bars for the long loops of a notebook cell (the probes' prompts, 04's variants).

Why: in JupyterLab a cell of 04 or 06 runs for up to a minute on 2 cores with nothing on screen,
which reads as a hang. A bar shows only where a person watches the kernel (the decision
:mod:`eagle3_forensics.io.frontend` makes for the explorers too): not the CLI, whose stderr belongs
to its own messages, and never a headless run (papermill, the report runner), where an executed
notebook would keep the bar's widget as a dead output; and only once the loop has run ``DELAY_S``:
a quick loop shows nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

from eagle3_forensics.io.frontend import interactive_frontend

T = TypeVar("T")

#: seconds a loop runs before its bar appears (tqdm's ``delay``): the demo's short loops show none
DELAY_S = 2.0


def progress(items: Iterable[T], *, desc: str, total: int | None = None, unit: str = "it") -> Iterator[T]:
    """``items``, with a notebook progress bar when a person watches the kernel (:func:`~eagle3_forensics.io.frontend.interactive_frontend`)."""
    if not interactive_frontend():
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


__all__ = ["DELAY_S", "progress"]
