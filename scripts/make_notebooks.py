"""Generate the committed notebooks under notebooks/ (no outputs, no execution counts).

    python scripts/make_notebooks.py           # (re)write notebooks/*.ipynb
    python scripts/make_notebooks.py --check   # exit 1 if a committed notebook differs

The notebooks are thin: each code cell calls one eagle3_forensics function and displays the
result; anything non-trivial lives in eagle3_forensics.views.html. Cell ids are fixed so the
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


def triage() -> NotebookNode:
    cells = [
        md("""
# 00 · Triage: open this first

One drafter, one page: the **verdict** (overall and per engine), the **top findings with their
fixes**, what each engine's loader would do with the checkpoint (**load summary**), and the live
**acceptance** (acceptance length and per-position acceptance) when a target and prompts are given.
The other notebooks go deeper: 01 every key and its fate per engine, 02 the vocabulary map, 03
corpus coverage, 04 the full accept-rate probe with the aux-layer sweep.

The **Explore** section at the end has three explorers: a tensor/key browser with a filter, a
draft↔target token lookup (type a token string, a target id, or `d:<draft id>`) and probe controls.
In JupyterLab they are live widgets; under papermill and in HTML reports the same cells show static
tables and figures (the parameters `key_filter` and `lookup` choose what they show).

Headless: `papermill notebooks/00_triage.ipynb out.ipynb --cwd notebooks -p checkpoint PATH`
(`-p target None` for static checks only). All logic lives in `eagle3_forensics`.
"""),
        code(
            """
checkpoint = "../data/demo/drafters/d2t_absolute"  # drafter directory: config.json + weights
target = "../data/demo/target"  # target model directory, or None (no cross-checks, no acceptance)
engine = "all"  # engines to simulate: "all", "sglang", "vllm", "eagle" or "speculators"
prompts = "../data/demo/prompts.jsonl"  # probe prompts (.jsonl with {"prompt": ...} or one per line), or None
max_prompts = 4  # how many of the prompts the probe uses (the first ones)
k = 3  # draft tokens per cycle
max_new_tokens = 32  # new tokens per prompt (EOS ignored)
probe_engine = "reference"  # probe view: "reference", "sglang", "vllm", "eagle" or "speculators"
device = "auto"  # "auto" (CUDA in bf16 when present, else CPU in fp32), "cpu" or "cuda"
ids = "../data/demo/corpus_ids.safetensors"  # token ids (input_ids + loss_mask) for coverage, or None
top = 5  # finding codes shown in full (errors first)
lookup = None  # token strings / ids the static token lookup shows; None: the most frequent corpus tokens
key_filter = ""  # filter of the tensor browser: a substring, or "re:PATTERN"
""",
            "parameters",
        ),
        code("""
%matplotlib inline
from IPython.display import HTML

from eagle3_forensics.views.html import show_table, verdict_html
from eagle3_forensics.views.triage import (
    acceptance_figure,
    acceptance_html,
    load_summary_table,
    top_findings_html,
    triage,
)
from eagle3_forensics.runs.record import record_triage
from eagle3_forensics.views.widgets import probe_controls, tensor_browser, token_lookup
"""),
        md("## Verdict"),
        code("""
t = triage(checkpoint, target, engine, prompts, max_prompts=max_prompts, k=k, max_new_tokens=max_new_tokens,
           probe_engine=probe_engine, device=device)
HTML(verdict_html(t.diagnosis))
"""),
        md(
            "## Top findings and fixes\n\nOne card per finding code, with the engines it hits; notebook 01 lists every finding."
        ),
        code("HTML(top_findings_html(t.diagnosis, top))"),
        md("""
## Per-engine load summary

`used` = loaded as is, renamed, fused or consumed (e.g. `d2t` into the engine's token map);
`dropped` = silently ignored; `rejected` = the loader fails loudly; `overwritten by target` = replaced
by the target's tensor; `unfilled params` = engine parameters no checkpoint tensor fills.
"""),
        code("show_table(load_summary_table(t.diagnosis))"),
        md("""
## Acceptance

Live greedy speculative decoding in process (notebook 04 has the teacher-forced estimate, the
aux-layer sweep and the engine-view comparison). Acceptance length follows vLLM: `1 + accepted /
num_drafts`, bonus token included; per-position *cumulative* is vLLM's `accepted_per_pos[i] /
num_drafts`.
"""),
        code("HTML(acceptance_html(t))"),
        code("acceptance_figure(t)"),
        md(
            "## Explore\n\nLive widgets in JupyterLab; static tables and figures under papermill and in reports."
        ),
        code("tensor_browser(t.diagnosis, inspection=t.inspection, query=key_filter)"),
        code("token_lookup(checkpoint, target, queries=lookup, ids=ids, diagnosis=t.diagnosis)"),
        code("""
probe_controls(checkpoint, target, prompts, result=t.probe, k=k, max_new_tokens=max_new_tokens,
               max_prompts=max_prompts, engine=probe_engine, device=device)
"""),
        md(
            "## Machine-readable record\n\nWritten to the file named by `$E3F_RECORD` (nothing is written when it is unset)."
        ),
        code("record_triage(t)"),
    ]
    return notebook(cells, "00_triage")


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

from eagle3_forensics.checks.diagnose import diagnose, inspect_checkpoint
from eagle3_forensics.views.html import (
    finding_codes,
    findings_html,
    format_html,
    key_fates_html,
    load_table,
    show_table,
    tensor_table,
    verdict_html,
)
from eagle3_forensics.views.repair import repair_table
from eagle3_forensics.runs.record import finding_records, record
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
        md("""
## Repair, and diagnose again

`eagle3-forensics repair` writes an engine-ready copy (never touching the original) for each engine
it supports, here into a throw-away directory, and re-runs `diagnose` on the copy. A refusal names
the reason and the options.
"""),
        code("show_table(repair_table(checkpoint, target))"),
        md(
            "## Machine-readable record\n\nWritten to the file named by `$E3F_RECORD` (nothing is written when it is unset)."
        ),
        code("""
record("verdict", d.verdict())
record("counts", d.counts())
record("codes", finding_codes(d))
record("findings", finding_records(d))
"""),
    ]
    return notebook(cells, "01_checkpoint_keys")


def vocab_mapping() -> NotebookNode:
    cells = [
        md("""
# 02 · Vocabulary mapping: classify, see the evidence, rebuild, compare, fix

An EAGLE-3 drafter proposes draft ids `i` in `[0, v)`; every engine turns them into target ids
with `target = i + d2t[i]`. The trainers select the draft vocabulary as target ids sorted
ascending, so a correct map satisfies, with `sel = nonzero(t2d)`:

    d2t[i] = sel[i] - i        nonzero(t2d) == d2t + arange(v)

This notebook decides from that full identity, never from how a few entries look (`d2t[:20] == 0`
is exactly right when the first selected ids are `0..19`). The workflow:

1. **Parameters** (next cell): the drafter (or a map file), the target model directory, and the
   training data to rebuild the map from (`ids`, a token-id file; or `corpus`, a JSONL tokenised
   with the target's tokenizer). Relative paths are relative to this notebook's folder.
2. **The map as stored**, its **classification** and the **evidence**: agreement of `nonzero(t2d)`
   with each reading of `d2t`, the first wrong draft id, the first entries side by side.
3. **The staircase**: `d2t[i]` against `i` over the offsets `t2d` implies; absolute ids climb above
   it, a double conversion falls below zero.
4. **`lm_head` rows**: which reading of `d2t` the drafter's head agrees with (exact for frozen
   speculators >= 0.5 heads, row cosine as a labelled heuristic otherwise).
5. **Rebuild from the data** with the trainer's tie-break and **compare** (Jaccard, ids only in
   one, fingerprints for provenance).
6. **The fix**, applied in memory and re-classified. Write a repaired checkpoint with
   `eagle3-forensics repair` (or `vocab build` for a fresh map file).

Headless: `papermill notebooks/02_vocab_mapping.ipynb out.ipynb --cwd notebooks -p checkpoint PATH`.
All logic lives in `eagle3_forensics`; this notebook only calls it and displays the results.
"""),
        code(
            """
checkpoint = "../data/demo/drafters/d2t_double_offset"  # drafter directory, or a map file with d2t/t2d
target = "../data/demo/target"  # target model directory (vocab size, tokenizer, lm_head), or None
ids = "../data/demo/corpus_ids.safetensors"  # training token ids (input_ids + loss_mask), or None
corpus = "../data/demo/corpus.jsonl"  # used when ids is None: JSONL tokenised with the target's tokenizer
tie_break = "id"  # "id" (speculators), "first_seen" (EAGLE) or "first_row" (SpecForge)
""",
            "parameters",
        ),
        code("""
%matplotlib inline
from eagle3_forensics.vocab.coverage import token_table
from eagle3_forensics.views.html import show_table
from eagle3_forensics.views.repair import repair_table
from eagle3_forensics.views.plots import plot_d2t_staircase, plot_offset_histogram, plot_selected_density
from eagle3_forensics.runs.record import record
from eagle3_forensics.vocab.mapping import classify_mapping, compare_mappings, suggest_d2t_fix
from eagle3_forensics.vocab.inputs import build_vocab_mapping_from_data, lm_head_row_check, load_mapping
from eagle3_forensics.views.vocab_tables import (
    build_table,
    comparison_table,
    evidence_table,
    first_entries_table,
    fix_table,
    mapping_table,
    only_ids_table,
    row_check_table,
    samples_table,
)
"""),
        md("## The map as stored\n\nShapes and dtypes of `d2t` and `t2d`, and the sizes `diagnose` uses."),
        code("""
m = load_mapping(checkpoint, target)
mapping_table(m)
"""),
        md("""
## Classification and evidence

`agreement if offsets / absolute / double_offset` is the share of draft ids for which
`nonzero(t2d)[i]` equals `i + d2t[i]`, `d2t[i]` and `2i + d2t[i]` respectively: exactly one
reading at 100% names the encoding.
"""),
        code("""
cls = classify_mapping(m.d2t, m.t2d, m.target_vocab_size, m.draft_vocab_size)
evidence_table(cls)
"""),
        md("""
## The first draft ids

What an engine computes (`i + d2t[i]`) next to what `t2d` selects. Leading zeros in `d2t` are
right whenever the first selected target ids are `0, 1, 2, ...`.
"""),
        code("first_entries_table(m)"),
        md("Wrong draft ids (first few): the target an engine proposes and the one it should."),
        code("samples_table(cls)"),
        md("## The staircase"),
        code("plot_d2t_staircase(m)"),
        code("plot_offset_histogram(m)"),
        md("""
## `lm_head` rows

Draft `lm_head[i]` against target `lm_head[target(i)]` for each reading of `d2t` (and for
`nonzero(t2d)`). `exact rows = 1.0` proves the map the head was built with (speculators >= 0.5
freezes the head as those target rows); otherwise the mean row cosine against mismatched rows is a
heuristic. Skipped when the target has no weights.
"""),
        code("""
rows = lm_head_row_check(checkpoint, target, required=False)
row_check_table(rows)
"""),
        md("""
## Rebuild from the training data

Counted as the trainers count (`loss_mask == 1`), ordered by count with the chosen tie-break,
padded with the smallest unused ids if the data has fewer distinct ids than `v`, sorted ascending.
"""),
        code("""
rebuilt = build_vocab_mapping_from_data(
    ids=ids,
    corpus=corpus,
    tokenizer=target,
    draft_vocab_size=m.draft_vocab_size,
    target_vocab_size=m.target_vocab_size,
    tie_break=tie_break,
)
build_table(rebuilt)
"""),
        md("""
## Compare: checkpoint against the data

Equal fingerprints (`sha256` over `V`, `v` and the selected ids) mean the checkpoint's vocabulary
came from this data with this tie-break. The demo drafters' vocabulary was built from the target's
own continuations in the same world as the demo corpus, so the two largely agree; the differences
are padding ids (both saw fewer distinct tokens than `v`) and the corpus's rare out-of-world tokens.
"""),
        code("""
cmp = compare_mappings(m, rebuilt, labels=("checkpoint", "rebuilt from data"))
comparison_table(cmp)
"""),
        code("only_ids_table(cmp, token_table(target, m.target_vocab_size), rebuilt.counts)"),
        code("plot_selected_density(m, rebuilt.counts)"),
        md("""
## The fix

The repair the classification calls for, applied in memory and classified again: convert absolute
ids once (`d2t - arange(v)`), undo a double conversion (`d2t + arange(v)`), or rebuild `d2t` from
`t2d`. Without a usable `t2d`, rebuild both from the data (above).
"""),
        code("""
fix = suggest_d2t_fix(m.d2t, m.t2d, m.target_vocab_size, m.draft_vocab_size)
fix_table(fix)
"""),
        code('plot_d2t_staircase(fix.d2t, m.t2d, title="after the fix")'),
        code("first_entries_table(fix.d2t, m.t2d)"),
        md("""
## Repair on disk, and diagnose again

The same fix as a checkpoint: `eagle3-forensics repair` writes an engine-ready copy for each engine
it supports (here into a throw-away directory; the original is never touched) and re-runs `diagnose`.
"""),
        code("show_table(repair_table(checkpoint, target))"),
        md(
            "## Machine-readable record\n\nWritten to the file named by `$E3F_RECORD` (nothing is written when it is unset)."
        ),
        code("""
record("vocab_kind", cls.kind)
record("vocab_fix", fix.to_dict())
record("vocab_vs_data", {"jaccard": cmp.jaccard, "identical": cmp.identical, "fingerprints": list(cmp.fingerprints)})
"""),
    ]
    return notebook(cells, "02_vocab_mapping")


def token_histograms() -> NotebookNode:
    cells = [
        md("""
# 03 · Token histograms and draft-vocabulary coverage

A drafter only proposes target ids inside its draft vocabulary, so the share of corpus tokens
whose id is selected is a hard ceiling on what it can ever get accepted, whatever the weights.
This notebook counts a corpus tokenised by the **target** tokenizer (only tokens with
`loss_mask == 1`, as the trainers count), then shows:

1. the token-frequency histogram with the draft vocabulary marked;
2. the coverage of the checkpoint's map, and the **coverage curve**: the best share any draft
   vocabulary of each size could reach on this corpus, with the checkpoint's size marked;
3. coverage by **token class** (special/added, byte-fallback, ordinary) and the most frequent
   **uncovered tokens** with their strings;
4. what a map rebuilt from this corpus would cover, side by side.

Parameters: the drafter (or a map file), the target directory (tokenizer), and the corpus as a
token-id file (`ids`, preferred) or a JSONL (`corpus`, used when `ids` is None). Headless:
`papermill notebooks/03_token_histograms.ipynb out.ipynb --cwd notebooks -p checkpoint PATH`.
"""),
        code(
            """
checkpoint = "../data/demo/drafters/healthy"  # drafter directory, or a map file with d2t/t2d
target = "../data/demo/target"  # target model directory with tokenizer.json
ids = "../data/demo/corpus_ids.safetensors"  # token ids (input_ids + loss_mask) by the target tokenizer, or None
corpus = "../data/demo/corpus.jsonl"  # used when ids is None: JSONL of texts / prompt+completion / conversations
top_n = 20  # most frequent uncovered tokens to list
""",
            "parameters",
        ),
        code("""
%matplotlib inline
from eagle3_forensics.vocab.coverage import corpus_counts, coverage_report, token_table
from eagle3_forensics.views.plots import (
    plot_coverage_by_class,
    plot_coverage_curve,
    plot_selected_density,
    plot_token_frequencies,
    plot_top_uncovered,
)
from eagle3_forensics.runs.record import record
from eagle3_forensics.vocab.mapping import select_draft_vocab
from eagle3_forensics.vocab.inputs import load_mapping
from eagle3_forensics.views.vocab_tables import (
    class_table,
    counts_table,
    coverage_table,
    mapping_table,
    token_class_table,
    uncovered_table,
)
"""),
        md("## The map"),
        code("""
m = load_mapping(checkpoint, target)
mapping_table(m)
"""),
        md(
            "## The corpus\n\nCounted tokens per target id (`loss_mask == 1`; a JSONL text counts every token)."
        ),
        code("""
counts = corpus_counts(ids=ids, corpus=corpus, tokenizer=target, target_vocab_size=m.target_vocab_size)
counts_table(counts)
"""),
        code("""
tokens = token_table(target, m.target_vocab_size)
token_class_table(tokens)
"""),
        md("## Token-frequency histogram"),
        code("plot_token_frequencies(counts, m)"),
        code("plot_selected_density(m, counts)"),
        md("## Coverage of the checkpoint's draft vocabulary"),
        code("""
cov = coverage_report(counts, m, tokens, top_n=top_n, label="checkpoint")
coverage_table(cov)
"""),
        code("plot_coverage_curve(cov)"),
        md("## By token class"),
        code("class_table(cov)"),
        code("plot_coverage_by_class(cov)"),
        md("## Most frequent uncovered tokens"),
        code("uncovered_table(cov)"),
        code("plot_top_uncovered(cov, top_n)"),
        md("""
## A map built from this corpus

The trainers' selection (top `v` ids by count, ties by id) on this corpus. When the checkpoint's
map was built from similar data, both cover about the same share; a large gap means the draft
vocabulary does not fit this traffic.
"""),
        code("""
rebuilt = select_draft_vocab(counts, m.draft_vocab_size)
cov_rebuilt = coverage_report(counts, rebuilt, tokens, top_n=top_n, label="rebuilt from this corpus")
coverage_table(cov, cov_rebuilt)
"""),
        code("plot_coverage_curve([cov, cov_rebuilt])"),
        md(
            "## Machine-readable record\n\nWritten to the file named by `$E3F_RECORD` (nothing is written when it is unset)."
        ),
        code("""
record("coverage", cov.to_dict())
record("coverage_rebuilt", cov_rebuilt.coverage)
"""),
    ]
    return notebook(cells, "03_token_histograms")


def accept_rate_probe() -> NotebookNode:
    cells = [
        md("""
# 04 · Accept-rate probe: live speculative decoding with the drafter

Runs the target (any local Hugging Face causal LM) and the EAGLE-3 drafter **in process**, in
plain PyTorch: greedy chain speculative decoding with KV caches for both models, `K` drafts per
cycle verified by one target forward. Nothing needs a serving engine or a GPU (CUDA is used when
present, in bf16).

* **Acceptance length** and **per-position acceptance** (vLLM's conventions; each number says
  which convention it follows), **speed** against plain greedy decoding of the same target.
* **Lossless check**: the committed tokens must equal plain greedy decoding.
* **Teacher-forced estimate** (per-step accuracy, simulated acceptance length `1 + Σ Π c_j`)
  beside the live figure, and the **aux-layer sweep** (aux ids shifted by −1, 0, +1).
* **Engine view**: `engine = "reference"` loads the drafter as its writer meant it (the
  intrinsic acceptance); `"sglang"`, `"vllm"`, `"eagle"` or `"speculators"` first apply that
  engine's load rules from the diagnose rule tables (dropped keys stay uninitialised, `d2t`,
  aux ids and norm flags read the engine's way): the acceptance that engine would deliver.
* **Variants side by side**: every drafter under `variants`, under each engine view.

Headless: `papermill notebooks/04_accept_rate_probe.ipynb out.ipynb --cwd notebooks -p checkpoint PATH`.
CLI equivalent: `eagle3-forensics probe DRAFTER --target DIR --prompts FILE [--engine E] [--json]`.
"""),
        code(
            """
checkpoint = "../data/demo/drafters/healthy"  # drafter directory (config.json + weights)
target = "../data/demo/target"  # target model directory (local Hugging Face causal LM)
prompts = "../data/demo/prompts.jsonl"  # .jsonl with {"prompt": ...} per line, or one prompt per line
k = 3  # draft tokens per cycle
device = "auto"  # "auto" (CUDA in bf16 when present, else CPU in fp32), "cpu" or "cuda"
engine = "reference"  # "reference", "sglang", "vllm", "eagle" or "speculators"
max_new_tokens = 64  # new tokens per prompt (EOS ignored)
variants = "../data/demo/drafters"  # directory of drafters to compare, or None to skip the comparison
engines = ["reference", "sglang", "vllm"]  # engine views in the comparison
server_url = None  # live vLLM/SGLang server serving `target` with `checkpoint` (e.g. "http://127.0.0.1:8000"); None skips
server_engine = "vllm"  # "vllm" or "sglang": the engine behind server_url
""",
            "parameters",
        ),
        code("""
%matplotlib inline
from eagle3_forensics.probe.core import compare_variants, probe
from eagle3_forensics.probe.server.core import server_vs_reference
from eagle3_forensics.runs.record import record
from eagle3_forensics.views.html import show_table
from eagle3_forensics.views.probe import (
    aux_sweep_table,
    lossless_text,
    per_position_figure,
    per_position_table,
    summary_table,
    sweep_verdict,
    variants_figure,
    variants_table,
    view_table,
)
from eagle3_forensics.views.server import engine_gap_figure, engine_gap_table, render_server_probe
"""),
        md("## Acceptance and speed"),
        code("""
r = probe(checkpoint, target, prompts, k=k, max_new_tokens=max_new_tokens, device=device, engine=engine)
show_table(summary_table(r))
"""),
        md("""
## Per-position acceptance

*Cumulative* (vLLM): the share of verify steps in which draft position i was accepted (so were
0..i-1); acceptance length = 1 + their sum. *Conditional*: P(position i accepted | 0..i-1 were).
The teacher-forced columns come from the target's own greedy text.
"""),
        code("show_table(per_position_table(r))"),
        code("per_position_figure(r)"),
        md("""
## Aux-layer sweep

The teacher-forced estimate with the drafter's aux ids (Hugging Face `hidden_states` index: the
input of decoder layer i) shifted by −1, 0 and +1. A drafter read with the ids it was trained on
peaks at 0; a peak elsewhere means the ids are written in the wrong convention (or for the wrong
target).
"""),
        code("show_table(aux_sweep_table(r))"),
        code("print(sweep_verdict(r))"),
        md("## Lossless check"),
        code("print(lossless_text(r))"),
        md("## How this view loaded the drafter"),
        code("show_table(view_table(r))"),
        md("""
## Variants side by side

Every drafter under `variants`, probed under each view in `engines` on the first prompts. An
engine that would refuse a drafter at load shows the reason instead of numbers.
"""),
        code("""
rows = compare_variants(variants, target, prompts, engines=engines, k=k, device=device) if variants else None
show_table(variants_table(rows)) if rows is not None else print("comparison skipped (variants is None)")
"""),
        code("variants_figure(rows) if rows is not None else None"),
        md("""
## Live server: engine vs reference per position

With `server_url` set, the prompts go to the live server (greedy, EOS ignored, `max_new_tokens`
each) and its acceptance is read the way that engine reports it (vLLM: `/metrics` counters before
and after; SGLang: per-request `meta_info`), then the same drafter is probed in process under
`server_engine`'s view with the server's K. The gap per position separates a drafter the engine
loads differently (a gap from position 0) from numerics or the draft recurrence (a gap growing
with the position). CLI equivalent: `eagle3-forensics probe-server URL --engine E --prompts FILE
--compare-with RESULT.json`.
"""),
        code("""
sr = server_vs_reference(server_url, server_engine, checkpoint, target, prompts, max_new_tokens=max_new_tokens, device=device) if server_url else None
print(render_server_probe(sr) if sr is not None else "server section skipped (server_url is None)")
"""),
        code("show_table(engine_gap_table(sr)) if sr is not None and sr.compare else None"),
        code("engine_gap_figure(sr) if sr is not None and sr.compare else None"),
        md(
            "## Machine-readable record\n\nWritten to the file named by `$E3F_RECORD` (nothing is written when it is unset)."
        ),
        code("""
record("probe", r.to_dict())
record("variants", rows)
record("server", sr.to_dict() if sr is not None else None)
"""),
    ]
    return notebook(cells, "04_accept_rate_probe")


NOTEBOOK_BUILDERS = {
    "00_triage.ipynb": triage,
    "01_checkpoint_keys.ipynb": checkpoint_keys,
    "02_vocab_mapping.ipynb": vocab_mapping,
    "03_token_histograms.ipynb": token_histograms,
    "04_accept_rate_probe.ipynb": accept_rate_probe,
}


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
