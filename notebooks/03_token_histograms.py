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
# # 03 · Token histograms and draft-vocabulary coverage
#
# A drafter only proposes target ids inside its draft vocabulary, so the share of corpus tokens
# whose id is selected is a hard ceiling on what it can ever get accepted, whatever the weights.
# This notebook counts a corpus tokenised by the **target** tokenizer (only tokens with
# `loss_mask == 1`, as the trainers count): the coverage first, the rest under *About this notebook*.

# %% jupyter={"source_hidden": true} tags=["parameters"]
checkpoint = "../data/demo/drafters/healthy"  # drafter directory, or a map file with d2t/t2d
target = "../data/demo/target"  # target model directory with tokenizer.json
ids = "../data/demo/corpus_ids.safetensors"  # token ids (input_ids + loss_mask) by the target tokenizer, or None
corpus = "../data/demo/corpus.jsonl"  # when ids is None: JSONL of texts, prompt+completion or conversations
top_n = 20  # most frequent uncovered tokens to list
explore_size = None  # draft vocabulary size the static coverage explorer shows; None: the checkpoint's
explore_class = "all"  # token class it shows: "all", "special/added", "byte-fallback", "ordinary", "no token"

# %% jupyter={"source_hidden": true}
# No module named 'eagle3_forensics'? This kernel lacks it: choose Kernel › Change Kernel › eagle3-forensics
from eagle3_forensics.runs.kernel import require_notebook_kernel

require_notebook_kernel()
# %matplotlib inline
from IPython.display import HTML

from eagle3_forensics.runs.record import record
from eagle3_forensics.views.explorers import coverage_explorer
from eagle3_forensics.views.next_steps import diagnosis_for, next_html
from eagle3_forensics.views.plots import (
    plot_coverage_by_class,
    plot_coverage_curve,
    plot_selected_density,
    plot_token_frequencies,
    plot_top_uncovered,
)
from eagle3_forensics.views.vocab_tables import (
    class_table,
    counts_table,
    coverage_table,
    mapping_table,
    token_class_table,
    uncovered_table,
)
from eagle3_forensics.vocab.coverage import corpus_counts, coverage_report, token_table
from eagle3_forensics.vocab.inputs import load_mapping
from eagle3_forensics.vocab.mapping import select_draft_vocab

# %% [markdown]
# ## Coverage of the checkpoint's draft vocabulary
#
# The share of counted corpus tokens the draft vocabulary can propose at all: a ceiling on acceptance.

# %% jupyter={"source_hidden": true}
m = load_mapping(checkpoint, target)
big_v, v = m.sizes()
counts = corpus_counts(ids=ids, corpus=corpus, tokenizer=target, target_vocab_size=big_v)
tokens = token_table(target, m.target_vocab_size)
cov = coverage_report(counts, m, tokens, top_n=top_n, label="checkpoint")
coverage_table(cov)

# %% [markdown]
# ## About this notebook
#
# 1. the token-frequency histogram with the draft vocabulary marked;
# 2. the coverage of the checkpoint's map, and the **coverage curve**: the best share any draft
#    vocabulary of each size could reach on this corpus, with the checkpoint's size marked;
# 3. coverage by **token class** (special/added, byte-fallback, ordinary) and the most frequent
#    **uncovered tokens** with their strings;
# 4. what a map rebuilt from this corpus would cover, side by side;
# 5. **Explore**: coverage by draft-vocabulary size (a slider) and token class.
#
# Parameters: the drafter (or a map file), the target directory (tokenizer), and the corpus as a
# token-id file (`ids`, preferred) or a JSONL (`corpus`, used when `ids` is None). Headless:
# `papermill notebooks/03_token_histograms.ipynb out.ipynb --cwd notebooks -p checkpoint PATH`.

# %% [markdown]
# ## The map

# %%
mapping_table(m)

# %% [markdown]
# ## The corpus
#
# Counted tokens per target id (`loss_mask == 1`; a JSONL text counts every token).

# %%
counts_table(counts)

# %%
token_class_table(tokens)

# %% [markdown]
# ## Token-frequency histogram

# %%
plot_token_frequencies(counts, m)

# %%
plot_selected_density(m, counts)

# %% [markdown]
# ## The coverage curve

# %%
plot_coverage_curve(cov)

# %% [markdown]
# ## By token class

# %%
class_table(cov)

# %%
plot_coverage_by_class(cov)

# %% [markdown]
# ## Most frequent uncovered tokens

# %%
uncovered_table(cov)

# %%
plot_top_uncovered(cov, top_n)

# %% [markdown]
# ## A map built from this corpus
#
# The trainers' selection (top `v` ids by count, ties by id) on this corpus. When the checkpoint's
# map was built from similar data, both cover about the same share; a large gap means the draft
# vocabulary does not fit this traffic.

# %%
rebuilt = select_draft_vocab(counts, v, warn=False)  # padding: "draft ids never seen in corpus" in the table
cov_rebuilt = coverage_report(counts, rebuilt, tokens, top_n=top_n, label="rebuilt from this corpus")
coverage_table(cov, cov_rebuilt)

# %%
plot_coverage_curve([cov, cov_rebuilt])

# %% [markdown]
# ## Explore
#
# Coverage by draft-vocabulary size: slide the size to see what the best draft vocabulary of that size
# would cover on this corpus next to the checkpoint's map, overall or for one token class.
#
# Live widgets in JupyterLab; static tables under papermill and in reports (the `explore_*` parameters
# choose what the static view shows).

# %%
coverage_explorer(counts, m, tokens, size=explore_size, klass=explore_class)

# %% [markdown]
# ## Next
#
# Run this notebook on your drafter, repair what it found, and confirm the repair: the commands
# below carry this run's paths (`eagle3_forensics.views.next_steps`).

# %%
HTML(
    next_html(
        "03_token_histograms", {"checkpoint": checkpoint, "target": target}, diagnosis_for(checkpoint, target)
    )
)

# %% [markdown]
# ## Machine-readable record
#
# Written to the file named by `$E3F_RECORD` (nothing is written when it is unset).

# %%
record("coverage", cov.to_dict())
record("coverage_rebuilt", cov_rebuilt.coverage)
