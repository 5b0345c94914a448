"""Generate the committed notebooks under notebooks/ (no outputs, no execution counts).

    python scripts/make_notebooks.py           # (re)write notebooks/*.ipynb
    python scripts/make_notebooks.py --check   # exit 1 if a committed notebook differs

The notebooks are thin: each code cell calls one eagle3_forensics function and displays the
result; anything non-trivial lives in eagle3_forensics.display. Cell ids are fixed so the
output is byte-identical across runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {
    "name": "python",
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "pygments_lexer": "ipython3",
    "codemirror_mode": {"name": "ipython", "version": 3},
    "nbconvert_exporter": "python",
}


def md(source: str) -> NotebookNode:
    return nbformat.v4.new_markdown_cell(source.strip("\n"))


def code(source: str, *tags: str) -> NotebookNode:
    cell = nbformat.v4.new_code_cell(source.strip("\n"))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def notebook(cells: list[NotebookNode], stem: str) -> NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": dict(LANGUAGE_INFO)}
    for i, cell in enumerate(cells):
        cell["id"] = f"{stem.split('_')[0]}-{i:02d}"
    nb.cells = cells
    return nb


def checkpoint_keys() -> NotebookNode:
    cells = [
        md("""
# 01 · Checkpoint keys: what each engine would load

Static forensics of one EAGLE-3 drafter checkpoint: nothing runs on a GPU and no weights are
loaded into a model. The workflow:

1. **Parameters** (next cell): the drafter directory (`config.json` + weights), an optional
   target model directory for cross-checks (`None` skips them), and the engine to look at
   (`"all"`, `"sglang"`, `"vllm"`, `"eagle"` or `"speculators"`). Relative paths are relative to
   this notebook's folder.
2. **Verdict**: overall and per engine (`healthy`, `warnings`, `broken`, `unusable`, `not applicable`).
3. **Detected format** and the **tensor table**, from the safetensors header alone.
4. **Load simulation**: for every engine, how many tensors it uses, renames, overwrites from the
   target, drops silently or rejects, and which engine parameters nothing fills.
5. **Key fates**: the fate of every checkpoint key under the chosen engine(s).
6. **Findings** with their evidence and the fix for each.

Run it headless over the demo drafters with `python -m eagle3_forensics report --out reports`
(papermill + nbconvert), or for one drafter:
`papermill notebooks/01_checkpoint_keys.ipynb out.ipynb --cwd notebooks -k python3 -p checkpoint PATH`.
All logic lives in `eagle3_forensics`; this notebook only calls it and displays the results.
"""),
        code(
            """
checkpoint = "../data/demo/drafters/speculators_layout"  # drafter directory: config.json + weights
target = "../data/demo/target"  # target model directory, or None to skip target cross-checks
engine = "all"  # "all", "sglang", "vllm", "eagle" or "speculators"
""",
            "parameters",
        ),
        code("""
from IPython.display import HTML

from eagle3_forensics.diagnose import diagnose, inspect_checkpoint
from eagle3_forensics.display import (
    finding_codes,
    findings_html,
    format_html,
    key_fates_html,
    load_table,
    show_table,
    tensor_table,
    verdict_html,
)
from eagle3_forensics.record import record
"""),
        md("## Verdict"),
        code("""
d = diagnose(checkpoint, target=target, engines=engine)
HTML(verdict_html(d))
"""),
        md("## Detected format"),
        code("""
ins = inspect_checkpoint(checkpoint)
HTML(format_html(ins))
"""),
        md("## Tensors\n\nRead from the weight-file headers only: no tensor data is loaded."),
        code("show_table(tensor_table(ins))"),
        md("""
## Load simulation per engine

`used` = loaded as is, renamed or fused; `overwritten` = replaced by the target's tensor;
`dropped` = silently ignored; `rejected` = the loader would fail loudly; `consumed` = read into
something else (e.g. `d2t` into a token map); `skipped` = ignored by design; `unfilled` = engine
parameters that no checkpoint tensor fills (they stay at initialisation).
"""),
        code("show_table(load_table(d))"),
        md(
            "## Key fates\n\nEvery checkpoint key and what the engine does with it, then the parameters nothing fills."
        ),
        code("HTML(key_fates_html(d, engine))"),
        md("## Findings and fixes"),
        code("HTML(findings_html(d))"),
        md(
            "## Machine-readable record\n\nWritten to the file named by `$E3F_RECORD` (nothing is written when it is unset)."
        ),
        code("""
record("verdict", d.verdict())
record("counts", d.counts())
record("codes", finding_codes(d))
"""),
    ]
    return notebook(cells, "01_checkpoint_keys")


NOTEBOOK_BUILDERS = {"01_checkpoint_keys.ipynb": checkpoint_keys}


def render(nb: NotebookNode) -> str:
    nbformat.validate(nb)
    return nbformat.writes(nb) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed notebook is out of date")
    parser.add_argument("--out", type=Path, default=NOTEBOOKS)
    args = parser.parse_args(argv)
    stale = []
    for name, build in NOTEBOOK_BUILDERS.items():
        text = render(build())
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    if stale:
        print(f"out of date (run python scripts/make_notebooks.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
