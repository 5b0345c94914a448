"""Small notebooks for runner tests: ``write_notebook(path, ("parameters", src), ("code", src), ("md", text))``."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_notebook(path: Path, *cells: tuple[str, str]) -> Path:
    """A notebook of ``cells`` (kind, source); kind ``parameters`` is a code cell tagged for papermill."""
    import nbformat  # optional: nbformat (the notebooks extra; the callers skip without it)

    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}}
    for i, (kind, src) in enumerate(cells):
        cell = nbformat.v4.new_code_cell(src) if kind != "md" else nbformat.v4.new_markdown_cell(src)
        if kind == "parameters":
            cell.metadata["tags"] = ["parameters"]
        cell["id"] = f"c{i}"
        nb.cells.append(cell)
    nbformat.write(nb, str(path))
    return path


def run_config(nbs: Path, notebooks: list[str], drafters: dict[str, Any], **settings: Any) -> dict[str, Any]:
    """A runner configuration (as ``run --config`` reads it) over the notebooks in ``nbs``: a 60 s
    cell timeout unless ``settings`` say otherwise, which also add any other key."""
    return {
        "notebooks_dir": str(nbs),
        "timeout": 60,
        "notebooks": list(notebooks),
        "drafters": drafters,
        **settings,
    }
