"""The project's Jupyter kernel: the named kernelspec ``eagle3-forensics`` the notebooks carry.

``make setup`` installs it into the environment itself (``python -m ipykernel install --sys-prefix
--name eagle3-forensics``: ``.venv/share/jupyter/kernels/eagle3-forensics``), so a JupyterLab of
that environment offers it and nothing outside the environment changes. The runner and
``make lab`` call :func:`kernel_env`: when the kernelspec that Jupyter would find under that name
does not start this very interpreter (a pip-installed package without ``make setup``, or a spec
left by another environment), a private one for ``sys.executable`` is written to a temporary
directory and put first on ``$JUPYTER_PATH`` for the kernels started from here, so a run never
depends on what happens to be installed, and never executes in some other Python.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from eagle3_forensics import extras

KERNEL_NAME = "eagle3-forensics"
DISPLAY_NAME = "eagle3-forensics (.venv)"

_private_dir: Path | None = None


def kernelspec(display_name: str = DISPLAY_NAME) -> dict[str, Any]:
    """The ``kernel.json`` that ``ipykernel install`` writes for this interpreter, renamed."""
    from ipykernel.kernelspec import get_kernel_dict  # optional: ipykernel (the notebooks extra)

    return {**get_kernel_dict(), "display_name": display_name}


def installed_python(name: str = KERNEL_NAME) -> str | None:
    """The interpreter the kernelspec ``name`` that Jupyter finds here starts, or ``None`` without one."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel  # optional: the notebooks extra

    try:
        spec = KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        return None
    return spec.argv[0] if spec.argv else None


def _same_python(a: str, b: str) -> bool:
    # absolute, not resolved: two venvs symlink the same base interpreter but see different packages
    return os.path.abspath(a) == os.path.abspath(b)


def kernel_env() -> dict[str, str]:
    """Environment variables under which kernel name ``eagle3-forensics`` starts this interpreter.

    Empty when the installed kernelspec already does; else ``JUPYTER_PATH`` with a private
    kernelspec directory (written once per process, removed at exit) ahead of the current value.
    """
    global _private_dir
    if _private_dir is None:
        found = installed_python()
        if found is not None and _same_python(found, sys.executable):
            return {}
        _private_dir = Path(tempfile.mkdtemp(prefix="e3f-kernel-"))
        atexit.register(shutil.rmtree, _private_dir, True)
        spec_dir = _private_dir / "kernels" / KERNEL_NAME
        spec_dir.mkdir(parents=True)
        text = json.dumps(kernelspec(display_name=f"eagle3-forensics ({sys.prefix})"), indent=1)
        (spec_dir / "kernel.json").write_text(text + "\n", encoding="utf-8")
    current = [
        p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p and p != str(_private_dir)
    ]
    return {"JUPYTER_PATH": os.pathsep.join([str(_private_dir), *current])}


def require_notebook_kernel() -> None:
    """The first call of every notebook: stop in one line when this kernel cannot run the notebooks.

    A kernel with the package but without the ``notebooks`` extra (another environment's kernel with
    an old install, say) gets IPython's ``UsageError``, which IPython shows as its one line, no
    traceback (``IPython.core.error``, public). A kernel without the package never gets here: the
    import of this function fails, and the comment on that import line in the notebook, which
    IPython shows with the error, says how to switch.
    """
    try:
        extras.require("notebooks", "the notebooks")
    except extras.MissingExtraError as exc:
        hint = f"choose Kernel › Change Kernel › {KERNEL_NAME} (or open the notebooks with `make lab`)"
        message = f"this kernel lacks {exc.module}, which the notebooks need: {hint}"
        try:
            from IPython.core.error import UsageError  # optional: IPython (every Jupyter kernel has it)
        except ImportError:
            raise exc from None
        raise UsageError(message) from None


__all__ = [
    "DISPLAY_NAME",
    "KERNEL_NAME",
    "installed_python",
    "kernel_env",
    "kernelspec",
    "require_notebook_kernel",
]
