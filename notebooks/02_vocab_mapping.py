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
# # 02 · Vocabulary mapping: classify, see the evidence, rebuild, compare, fix
#
# An EAGLE-3 drafter proposes draft ids `i` in `[0, v)`; every engine turns them into target ids
# with `target = i + d2t[i]`. The trainers select the draft vocabulary as target ids sorted
# ascending, so a correct map satisfies, with `sel = nonzero(t2d)`:
#
#     d2t[i] = sel[i] - i        nonzero(t2d) == d2t + arange(v)

# %% jupyter={"source_hidden": true} tags=["parameters"]
checkpoint = "../data/demo/drafters/d2t_double_offset"  # drafter directory, or a map file with d2t/t2d
target = "../data/demo/target"  # target model directory (vocab size, tokenizer, lm_head), or None
ids = "../data/demo/corpus_ids.safetensors"  # training token ids (input_ids + loss_mask), or None
corpus = "../data/demo/corpus.jsonl"  # used when ids is None: JSONL tokenised with the target's tokenizer
tie_break = "id"  # "id" (speculators), "first_seen" (EAGLE) or "first_row" (SpecForge)
reference = "../data/demo/drafters/healthy"  # a drafter or map file to compare against in Explore, or None
lookup = None  # token strings / ids the static token lookup shows; None: the most frequent corpus tokens
# explore_compare: the two maps the static map comparison shows, by name: "checkpoint (stored)", "rebuilt from
# the data", "checkpoint after the fix" (when a fix is needed), "reference: <name>"
explore_compare = ["checkpoint (stored)", "rebuilt from the data"]

# %% jupyter={"source_hidden": true}
# No module named 'eagle3_forensics'? This kernel lacks it: choose Kernel › Change Kernel › eagle3-forensics
from eagle3_forensics.runs.kernel import require_notebook_kernel

require_notebook_kernel()
# %matplotlib inline
from IPython.display import HTML

from eagle3_forensics.runs.record import record
from eagle3_forensics.views.explorers import map_compare, named_maps
from eagle3_forensics.views.html import show_table
from eagle3_forensics.views.next_steps import diagnosis_for, next_html
from eagle3_forensics.views.plots import plot_d2t_staircase, plot_offset_histogram, plot_selected_density
from eagle3_forensics.views.repair import repair_table
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
from eagle3_forensics.views.widgets import token_lookup
from eagle3_forensics.vocab.coverage import token_table
from eagle3_forensics.vocab.inputs import build_vocab_mapping_from_data, lm_head_row_check, load_mapping
from eagle3_forensics.vocab.mapping import classify_mapping, compare_mappings, suggest_d2t_fix

# %% [markdown]
# ## Classification and evidence
#
# `agreement if offsets / absolute / double_offset` is the share of draft ids for which
# `nonzero(t2d)[i]` equals `i + d2t[i]`, `d2t[i]` and `2i + d2t[i]` respectively: exactly one
# reading at 100% names the encoding.

# %%
m = load_mapping(checkpoint, target)
cls = classify_mapping(m.d2t, m.t2d, m.target_vocab_size, m.draft_vocab_size)
evidence_table(cls)

# %% [markdown]
# ## About this notebook
#
# This notebook decides from that full identity, never from how a few entries look (`d2t[:20] == 0`
# is exactly right when the first selected ids are `0..19`). The workflow:
#
# 1. **Parameters** (the folded cell at the top): the drafter (or a map file), the target model directory, and the
#    training data to rebuild the map from (`ids`, a token-id file; or `corpus`, a JSONL tokenised
#    with the target's tokenizer). Relative paths are relative to this notebook's folder.
# 2. **The map as stored**, its **classification** and the **evidence**: agreement of `nonzero(t2d)`
#    with each reading of `d2t`, the first wrong draft id, the first entries side by side.
# 3. **The staircase**: `d2t[i]` against `i` over the offsets `t2d` implies; absolute ids climb above
#    it, a double conversion falls below zero.
# 4. **`lm_head` rows**: which reading of `d2t` the drafter's head agrees with (exact for frozen
#    speculators >= 0.5 heads, row cosine as a labelled heuristic otherwise).
# 5. **Rebuild from the data** with the trainer's tie-break and **compare** (Jaccard, ids only in
#    one, fingerprints for provenance).
# 6. **The fix**, applied in memory and re-classified. Write a repaired checkpoint with
#    `eagle3-forensics repair` (or `vocab build` for a fresh map file).
# 7. **Explore**: a draft↔target token lookup and a picker comparing any two maps.
#
# Headless: `papermill notebooks/02_vocab_mapping.ipynb out.ipynb --cwd notebooks -p checkpoint PATH`.
# All logic lives in `eagle3_forensics`; this notebook only calls it and displays the results.

# %% [markdown]
# ## The map as stored
#
# Shapes and dtypes of `d2t` and `t2d`, and the sizes `diagnose` uses.

# %%
mapping_table(m)

# %% [markdown]
# ## The first draft ids
#
# What an engine computes (`i + d2t[i]`) next to what `t2d` selects. Leading zeros in `d2t` are
# right whenever the first selected target ids are `0, 1, 2, ...`.

# %%
first_entries_table(m)

# %% [markdown]
# Wrong draft ids (first few): the target an engine proposes and the one it should.

# %%
samples_table(cls)

# %% [markdown]
# ## The staircase

# %%
plot_d2t_staircase(m)

# %%
plot_offset_histogram(m)

# %% [markdown]
# ## `lm_head` rows
#
# Draft `lm_head[i]` against target `lm_head[target(i)]` for each reading of `d2t` (and for
# `nonzero(t2d)`). `exact rows = 1.0` proves the map the head was built with (speculators >= 0.5
# freezes the head as those target rows); otherwise the mean row cosine against mismatched rows is a
# heuristic. Skipped when the target has no weights.

# %%
rows = lm_head_row_check(checkpoint, target, required=False)
row_check_table(rows)

# %% [markdown]
# ## Rebuild from the training data
#
# Counted as the trainers count (`loss_mask == 1`), ordered by count with the chosen tie-break,
# padded with the smallest unused ids if the data has fewer distinct ids than `v`, sorted ascending.

# %%
big_v, v = m.sizes()
rebuilt = build_vocab_mapping_from_data(
    ids=ids,
    corpus=corpus,
    tokenizer=target,
    draft_vocab_size=v,
    target_vocab_size=big_v,
    tie_break=tie_break,
    warn=False,  # padding shows in the table (`padded`), not as a warning on stderr
)
build_table(rebuilt)

# %% [markdown]
# ## Compare: checkpoint against the data
#
# Equal fingerprints (`sha256` over `V`, `v` and the selected ids) mean the checkpoint's vocabulary
# came from this data with this tie-break. The demo drafters' vocabulary was built from the target's
# own continuations in the same world as the demo corpus, so the two largely agree; the differences
# are padding ids (both saw fewer distinct tokens than `v`) and the corpus's rare out-of-world tokens.

# %%
cmp = compare_mappings(m, rebuilt, labels=("checkpoint", "rebuilt from data"))
comparison_table(cmp)

# %%
only_ids_table(cmp, token_table(target, m.target_vocab_size), rebuilt.counts)

# %%
plot_selected_density(m, rebuilt.counts)

# %% [markdown]
# ## The fix
#
# The repair the classification calls for, applied in memory and classified again: convert absolute
# ids once (`d2t - arange(v)`), undo a double conversion (`d2t + arange(v)`), or rebuild `d2t` from
# `t2d`. Without a usable `t2d`, rebuild both from the data (above).

# %%
fix = suggest_d2t_fix(m.d2t, m.t2d, m.target_vocab_size, m.draft_vocab_size)
fix_table(fix)

# %%
plot_d2t_staircase(fix.d2t, m.t2d, title="after the fix")

# %%
first_entries_table(fix.d2t, m.t2d)

# %% [markdown]
# ## Repair on disk, and diagnose again
#
# The same fix as a checkpoint: `eagle3-forensics repair` writes an engine-ready copy for each engine
# it supports (here into a throw-away directory; the original is never touched) and re-runs `diagnose`.

# %%
show_table(repair_table(checkpoint, target))

# %% [markdown]
# ## Explore
#
# The draft↔target token lookup (a token string, a target id, or `d:<draft id>`: its draft id, the
# stored and needed `d2t` entry, how each engine maps it), and a picker that compares any two maps:
# the stored one, the one rebuilt from the data, the fixed one and a reference drafter's.
#
# Live widgets in JupyterLab; static tables under papermill and in reports (the `explore_*` parameters
# choose what the static view shows).

# %%
token_lookup(checkpoint, target, queries=lookup, ids=ids, corpus=corpus)

# %%
maps = named_maps(m, rebuilt=rebuilt, fix=fix, reference=reference, target=target)
map_compare(
    maps, a=explore_compare[0], b=explore_compare[1], tokens=token_table(target, big_v), counts=rebuilt.counts
)

# %% [markdown]
# ## Next
#
# Run this notebook on your drafter, repair what it found, and confirm the repair: the commands
# below carry this run's paths (`eagle3_forensics.views.next_steps`).

# %%
HTML(
    next_html(
        "02_vocab_mapping", {"checkpoint": checkpoint, "target": target}, diagnosis_for(checkpoint, target)
    )
)

# %% [markdown]
# ## Machine-readable record
#
# Written to the file named by `$E3F_RECORD` (nothing is written when it is unset).

# %%
record("vocab_kind", cls.kind)
record("vocab_fix", fix.to_dict())
record(
    "vocab_vs_data",
    {"jaccard": cmp.jaccard, "identical": cmp.identical, "fingerprints": list(cmp.fingerprints)},
)
