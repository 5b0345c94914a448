# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: -jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: eagle3-forensics (.venv)
#     language: python
#     name: eagle3-forensics
# ---

# %% [markdown]
# # 05 · Offline probe: acceptance from training dumps, and the data-prep audit
#
# For targets too big to run here: the trainer already ran the target once and wrote its hidden
# states to disk (SpecForge `prepare_hidden_states.py`, speculators `data_generation_offline.py`).
# This notebook runs **only the drafter** over those dumps.

# %% jupyter={"source_hidden": true} tags=["parameters"]
checkpoint = "../data/demo/drafters/healthy"  # drafter directory (config.json + weights)
data = "../data/demo/dumps/specforge"  # dump directory (SpecForge, speculators or EAGLE layout)
target = "../data/demo/target"  # target directory (config, lm_head, final norm), or None: the data teacher
# engine: "reference" or an engine release ("sglang", "vllm", ...: the newest; "sglang==0.5.11": that one)
engine = "reference"
k = 3  # draft steps
device = "cpu"  # "auto" (CUDA in bf16 when present), "cpu" or "cuda"
bucket = 8  # tokens per bucket of the along-the-sequence table
prep = "../data/demo/prep_broken"  # a data-prep directory to audit as well (the seed's situation), or None
explore_sample = (
    None  # sample the static sample browser shows: an index or a file under data; None: the worst
)

# %% jupyter={"source_hidden": true}
# No module named 'eagle3_forensics'? This kernel lacks it: choose Kernel › Change Kernel › eagle3-forensics
from eagle3_forensics.runs.kernel import require_notebook_kernel

require_notebook_kernel()
# %matplotlib inline
from IPython.display import HTML

from eagle3_forensics.checks.data import audit_data
from eagle3_forensics.io.dumps import ScanOptions
from eagle3_forensics.probe.offline import probe_offline
from eagle3_forensics.probe.samples import SampleScorer
from eagle3_forensics.runs.record import record
from eagle3_forensics.views.explorers import sample_browser
from eagle3_forensics.views.html import show_table
from eagle3_forensics.views.next_steps import diagnosis_for, next_html
from eagle3_forensics.views.offline import (
    along_sequence_figure,
    along_sequence_table,
    audit_cards_html,
    audit_records,
    audit_summary_table,
    layouts_table,
    offline_per_position_figure,
    offline_per_position_table,
    offline_record,
    offline_summary_table,
    token_class_figure,
    token_class_table,
    worst_samples_table,
)

# %% [markdown]
# ## Teacher-forced acceptance per draft step
#
# *Accuracy*: step `j` right at a slot; *conditional*: right given steps `0..j-1` were;
# *cumulative*: steps `0..j` all right (what a chain accepts). Simulated acceptance length
# `1 + Σ_j Π_{i≤j} conditional_i` includes the bonus token, as `probe` reports it.

# %%
reading = ScanOptions(target=target)  # how every reader below reads the dumps
r = probe_offline(checkpoint, data, reading, engine=engine, k=k, device=device, bucket=bucket)
show_table(offline_summary_table(r))

# %%
show_table(offline_per_position_table(r))

# %%
offline_per_position_figure(r)

# %% [markdown]
# ## About this notebook
#
# * **Audit** of the data (`audit-data`): unreadable or broken files, loss masks, non-finite states,
#   aux widths, lengths, and whether the vocabulary map was built from these samples
#   (`DATA_VOCAB_MAP_NOT_FROM_DATA`, under each trainer's tie-break) — the check the seed's user
#   needed before days of training.
# * **Teacher-forced acceptance per draft step**, computed by the same code and under the same
#   names as `probe`'s `teacher_forced` block. With `target`, the teacher is the target's greedy
#   token from the dumped last hidden state (`lm_head`, and the final norm when the dump holds the
#   state before it); without, the next data token.
# * **Along the sequence** and **by token class**, and the **worst samples** decoded with the
#   target tokenizer.
# * **Explore**: a sample browser (tokens, loss mask, per-slot draft hits of any dumped sample).
#
# Headless: `papermill notebooks/05_offline_probe.ipynb out.ipynb --cwd notebooks -p checkpoint PATH -p data DIR`.
# CLI: `eagle3-forensics probe-offline DRAFTER --data DIR [--target DIR]` and
# `eagle3-forensics audit-data DIR`; `--shard I/N --out PART.json` and `merge` split big dumps
# over machines (docs/offline.md). All logic lives in `eagle3_forensics`.

# %% [markdown]
# ## The dumps and the audit
#
# The layout is detected from the files (by widths, never by the key name `hidden_state`, which
# means the last layer to SpecForge and the aux concat to speculators' research code).

# %%
audit = audit_data(data, reading, drafter=checkpoint)
show_table(audit_summary_table(audit))

# %%
HTML(audit_cards_html(audit, "dumps"))

# %% [markdown]
# ## Along the sequence
#
# The same counts per bucket of positions in the sample: a drop late in long samples points at
# the drafter's context (RoPE, `max_position_embeddings`); a drop at the start at the prompt.

# %%
show_table(along_sequence_table(r))

# %%
along_sequence_figure(r)

# %% [markdown]
# ## By token class
#
# Classes of the token to predict at step 0 (from the target's `tokenizer.json` when the target
# directory has one). A teacher outside the draft vocabulary can never be proposed.

# %%
show_table(token_class_table(r))

# %%
token_class_figure(r)

# %% [markdown]
# ## Worst samples
#
# Lowest simulated acceptance length per sample, with the trained (loss-masked) text decoded.

# %%
show_table(worst_samples_table(r, tokenizer=target))

# %% [markdown]
# ## A data-prep directory: was the map built from these samples?
#
# `prep` holds speculators' `d2t.npy`/`t2d.npy` beside the dumps. Offsets that start with zeros
# are right whenever target ids 0..19 are selected; what is wrong is a `d2t` built from other
# data than the `t2d` beside it (the demo's `prep_broken`), which the identity check and the
# data check both show, with the first differing ids.

# %%
prep_audit = audit_data(prep, reading) if prep else None
HTML(audit_cards_html(prep_audit, "prep")) if prep_audit is not None else print(
    "prep audit skipped (prep is None)"
)

# %%
show_table(audit_summary_table(prep_audit)) if prep_audit is not None else None

# %% [markdown]
# ## The layouts this reader knows

# %%
show_table(layouts_table())

# %% [markdown]
# ## Explore
#
# The sample browser: pick a dumped sample (the worst ones first) to see its tokens, its loss mask and,
# at every scored slot, the teacher's next token, which draft steps hit (✓/✗) and how many drafts a
# chain accepts there.
#
# Live widgets in JupyterLab; static tables under papermill and in reports (the `explore_*` parameters
# choose what the static view shows).

# %%
scorer = SampleScorer(checkpoint, data, reading, engine=engine, k=k, device=device)
sample_browser(scorer, result=r, sample=explore_sample, target=target)

# %% [markdown]
# ## Next
#
# Run this notebook on your drafter, repair what it found, and confirm the repair: the commands
# below carry this run's paths (`eagle3_forensics.views.next_steps`).

# %%
HTML(
    next_html(
        "05_offline_probe",
        {"checkpoint": checkpoint, "data": data, "target": target, "engine": engine},
        diagnosis_for(checkpoint, target, engine),
    )
)

# %% [markdown]
# ## Machine-readable record
#
# Written to the file named by `$E3F_RECORD` (nothing is written when it is unset).

# %%
rec = audit_records(audit)
record("verdict", rec["verdict"])
record("counts", rec["counts"])
record("codes", rec["codes"])
record("findings", rec["findings"])
record("acceptance", offline_record(r))
record("offline_probe", r.to_dict())
