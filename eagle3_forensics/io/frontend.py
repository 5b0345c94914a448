"""Who drives this kernel: a person in JupyterLab (live widgets, progress bars) or a headless
executor (papermill, nbconvert, the report runner: static output only).

One decision for the explorers (:mod:`eagle3_forensics.views.widgets`) and the progress bars
(:mod:`eagle3_forensics.io.progress`), so a papermill run inside a lab terminal shows neither.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Any

ENV_INTERACTIVE = "E3F_INTERACTIVE"


#: jupyter_server (2.x, ``SessionManager.get_kernel_env``) starts a notebook's kernel with this
#: variable; nbclient (papermill, nbconvert, nbmake) and a bare jupyter_client never set it (a
#: process started from such a kernel inherits it, hence the cell request decides first)
SESSION_ENV = "JPY_SESSION_NAME"


@dataclass(frozen=True)
class Frontend:
    """Whether explorers show live widgets here, and the fact that decided it."""

    interactive: bool
    reason: str


def frontend() -> Frontend:
    """Whether widgets can be shown, decided from facts about this kernel and who drives it.

    In order: ``$E3F_INTERACTIVE`` (``0``/``false`` forces static, which the report runner sets;
    ``1``/``true`` forces live where a kernel and ipywidgets exist); no IPython kernel (plain
    Python, terminal IPython) or no ipywidgets: static. Then the request the kernel is handling: a
    widget's ``comm_msg`` (a frontend with a widget manager is talking): live; an
    ``execute_request`` with cell metadata (JupyterLab and Notebook 7 send ``cellId``, VS Code too):
    live; one without (nbclient, which papermill and nbconvert execute through, sends none:
    nbclient 0.10 ``NotebookClient.async_execute_cell``): static, even when a papermill run started
    inside a JupyterLab kernel inherited that kernel's environment. With no request to go by (a
    thread of its own): live in a kernel jupyter_server started for a notebook session
    (``$JPY_SESSION_NAME``), else static. No directory name or command line is consulted.
    """
    forced = os.environ.get(ENV_INTERACTIVE, "").strip().lower()
    if forced in ("0", "false", "no", "off"):
        return Frontend(False, f"${ENV_INTERACTIVE}={forced}")
    try:
        from IPython import get_ipython  # optional: IPython
    except ImportError:
        return Frontend(False, "no IPython")
    ip = get_ipython()
    kernel = getattr(ip, "kernel", None) if ip is not None else None
    if kernel is None:
        return Frontend(False, "no Jupyter kernel")
    if importlib.util.find_spec("ipywidgets") is None:
        return Frontend(False, "ipywidgets is not installed")
    if forced in ("1", "true", "yes", "on"):
        return Frontend(True, f"${ENV_INTERACTIVE}={forced}")
    parent = _parent_message(kernel)
    msg_type = parent.get("header", {}).get("msg_type")
    if msg_type == "comm_msg":
        return Frontend(True, "a widget message from the frontend")
    if msg_type == "execute_request":
        if parent.get("metadata"):
            return Frontend(True, "a frontend's cell request")
        return Frontend(False, "a headless executor's cell request (no cell metadata)")
    if os.environ.get(SESSION_ENV):
        return Frontend(True, "a jupyter_server notebook session")
    return Frontend(False, "no frontend request and no notebook session")


def _parent_message(kernel: Any) -> dict[str, Any]:
    """The request the kernel is handling now (ipykernel >= 6), or ``{}``."""
    try:
        parent = kernel.get_parent("shell")
    except (AttributeError, TypeError, LookupError):
        return {}
    return parent if isinstance(parent, dict) else {}


def interactive_frontend() -> bool:
    """Whether widgets can be shown here (:func:`frontend`)."""
    return frontend().interactive


__all__ = ["ENV_INTERACTIVE", "SESSION_ENV", "Frontend", "frontend", "interactive_frontend"]
