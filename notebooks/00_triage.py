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
# # 00 · Triage: open this first
#
# One drafter, one page: the **verdict**, the **top findings with their fixes**, what each engine's
# loader does with the checkpoint, and the live **acceptance**. The parameters and imports are
# folded away (click the `…` to open them); the **Explore** section at the end has the live explorers.

# %% jupyter={"source_hidden": true} tags=["parameters"]
checkpoint = "../data/demo/drafters/d2t_absolute"  # drafter directory: config.json + weights
target = "../data/demo/target"  # target model directory, or None (no cross-checks, no acceptance)
# engine: "all", an engine ("sglang", "vllm", "eagle", "speculators", "tensorrt_llm": its newest
# release) or one release, e.g. "sglang==0.5.11", "vllm==0.32.0" (rules run here) or "vllm==0.34.0"
# (read from its wheel: no CPU build; vLLM releases 0.10.2, 0.20.0, 0.28.0, 0.32.0, 0.33.0, 0.34.0)
engine = "all"
prompts = "../data/demo/prompts.jsonl"  # probe prompts (.jsonl with {"prompt": ...} or one per line), or None
max_prompts = 4  # how many of the prompts the probe uses (the first ones)
k = 3  # draft tokens per cycle
max_new_tokens = 32  # new tokens per prompt (EOS ignored)
# probe_engine: the probe view, "reference" or an engine release ("sglang", "sglang==0.5.11", "vllm")
probe_engine = "reference"
device = "auto"  # "auto" (CUDA in bf16 when present, else CPU in fp32), "cpu" or "cuda"
ids = "../data/demo/corpus_ids.safetensors"  # token ids (input_ids + loss_mask) for coverage, or None
top = 5  # finding codes shown in full (errors first)
lookup = None  # token strings / ids the static token lookup shows; None: the most frequent corpus tokens
key_filter = ""  # filter of the tensor browser: a substring, or "re:PATTERN"

# %% jupyter={"source_hidden": true}
# No module named 'eagle3_forensics'? This kernel lacks it: choose Kernel › Change Kernel › eagle3-forensics
from eagle3_forensics.runs.kernel import require_notebook_kernel

require_notebook_kernel()
# %matplotlib inline
from IPython.display import HTML

from eagle3_forensics.runs.record import record_triage
from eagle3_forensics.views.html import show_table, verdict_html
from eagle3_forensics.views.next_steps import next_html
from eagle3_forensics.views.triage import (
    acceptance_figure,
    acceptance_html,
    load_summary_table,
    top_findings_html,
    triage,
)
from eagle3_forensics.views.widgets import probe_controls, tensor_browser, token_lookup

# %% [markdown]
# ## Verdict

# %% jupyter={"source_hidden": true}
t = triage(
    checkpoint,
    target,
    engine,
    prompts,
    max_prompts=max_prompts,
    k=k,
    max_new_tokens=max_new_tokens,
    probe_engine=probe_engine,
    device=device,
)
HTML(verdict_html(t.diagnosis))

# %% [markdown]
# ## Top findings and fixes
#
# One card per finding code, with the engines it hits; notebook 01 lists every finding.

# %%
HTML(top_findings_html(t.diagnosis, top))

# %% [markdown]
# ## Per-engine load summary
#
# `used` = loaded as is, renamed, fused or consumed (e.g. `d2t` into the engine's token map);
# `dropped` = silently ignored; `rejected` = the loader fails loudly; `overwritten by target` = replaced
# by the target's tensor; `unfilled params` = engine parameters no checkpoint tensor fills.

# %%
show_table(load_summary_table(t.diagnosis))

# %% [markdown]
# ## Acceptance
#
# Live greedy speculative decoding in process (notebook 04 has the teacher-forced estimate, the
# aux-layer sweep and the engine-view comparison). Acceptance length follows vLLM: `1 + accepted /
# num_drafts`, bonus token included; per-position *cumulative* is vLLM's `accepted_per_pos[i] /
# num_drafts`.

# %%
HTML(acceptance_html(t))

# %%
acceptance_figure(t)

# %% [markdown]
# ## Explore
#
# A tensor/key browser with a filter, a draft↔target token lookup (type a token string, a target id,
# or `d:<draft id>`; a string of several tokens shows how it splits) and probe controls. In
# JupyterLab they are live widgets; under papermill and in HTML reports the same cells show static
# tables and figures (the parameters `key_filter` and `lookup` choose what they show).
#
# The other notebooks go deeper: 01 every key and its fate per engine, 02 the vocabulary map, 03
# corpus coverage, 04 the full accept-rate probe with the aux-layer sweep. Headless:
# `papermill notebooks/00_triage.ipynb out.ipynb --cwd notebooks -p checkpoint PATH` (`-p target None`
# for static checks only). All logic lives in `eagle3_forensics`.

# %%
tensor_browser(t.diagnosis, inspection=t.inspection, query=key_filter)

# %%
token_lookup(checkpoint, target, queries=lookup, ids=ids, diagnosis=t.diagnosis)

# %%
probe_controls(
    checkpoint,
    target,
    prompts,
    result=t.probe,
    k=k,
    max_new_tokens=max_new_tokens,
    max_prompts=max_prompts,
    engine=probe_engine,
    device=device,
)

# %% [markdown]
# ## Next
#
# Run this notebook on your drafter, repair what it found, and confirm the repair: the commands
# below carry this run's paths (`eagle3_forensics.views.next_steps`).

# %%
HTML(next_html("00_triage", {"checkpoint": checkpoint, "target": target, "engine": engine}, t.diagnosis))

# %% [markdown]
# ## Machine-readable record
#
# Written to the file named by `$E3F_RECORD` (nothing is written when it is unset).

# %%
record_triage(t)
