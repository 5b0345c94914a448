"""Write each committed notebook ``notebooks/NN_name.ipynb`` from its jupytext source ``NN_name.py``.

    python scripts/make_notebooks.py           # rewrite every .ipynb from its .py (make notebooks)
    python scripts/make_notebooks.py --check   # exit 1 when a pair is out of sync

The percent-format ``.py`` is the source of truth; jupytext reads it and, through the pairing
(``formats: ipynb,py:percent`` in both files), JupyterLab with jupytext installed saves an edit
to both. This script adds only what jupytext does not do: stable cell ids (``NN-ii``, so the
``.ipynb`` is byte-identical across runs and machines), no outputs or execution counts, and the
same notebook metadata for every notebook.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import jupytext
import nbformat
from nbformat.notebooknode import NotebookNode

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SOURCE = re.compile(r"\d\d_[a-z0-9_]+\.py")

#: the pairing, and no jupytext version stamp in the .py header (it would change with every upgrade)
JUPYTEXT = {
    "formats": "ipynb,py:percent",
    "notebook_metadata_filter": "-jupytext.text_representation.jupytext_version",
}
KERNELSPEC = {"display_name": "eagle3-forensics (.venv)", "language": "python", "name": "eagle3-forensics"}
LANGUAGE_INFO = {
    "name": "python",
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "pygments_lexer": "ipython3",
    "codemirror_mode": {"name": "ipython", "version": 3},
    "nbconvert_exporter": "python",
}


def sources(directory: Path = NOTEBOOKS) -> list[Path]:
    """Every notebook source ``NN_name.py`` in ``directory``."""
    return sorted(p for p in directory.glob("*.py") if SOURCE.fullmatch(p.name))


def notebook(source: Path) -> NotebookNode:
    """The committed form of the notebook whose jupytext source is ``source``."""
    nb = jupytext.read(source, fmt="py:percent")
    nb.metadata = {
        "jupytext": dict(JUPYTEXT),
        "kernelspec": dict(KERNELSPEC),
        "language_info": dict(LANGUAGE_INFO),
    }
    number = source.name[:2]
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{number}-{i:02d}"
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nbformat.validate(nb)
    return nb


def render(nb: NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a .ipynb differs from its source")
    parser.add_argument("--dir", type=Path, default=NOTEBOOKS)
    args = parser.parse_args(argv)
    found = sources(args.dir)
    stale = []
    for src in found:
        text, out = render(notebook(src)), src.with_suffix(".ipynb")
        if args.check:
            if not out.is_file() or out.read_text(encoding="utf-8") != text:
                stale.append(out.name)
            continue
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)
        print(f"wrote {out}")
    orphans = sorted(p.name for p in args.dir.glob("*.ipynb") if not p.with_suffix(".py").is_file())
    if orphans:
        print(f"notebooks without a jupytext source (.py): {', '.join(orphans)}", file=sys.stderr)
    if stale:
        print(f"out of date (run python scripts/make_notebooks.py): {', '.join(stale)}", file=sys.stderr)
    return 1 if stale or orphans or not found else 0


if __name__ == "__main__":
    raise SystemExit(main())
