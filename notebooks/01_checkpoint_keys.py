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
# # 01 · Checkpoint keys: what each engine would load
#
# Static forensics of one EAGLE-3 drafter checkpoint: nothing runs on a GPU and no weights are
# loaded into a model.

# %% jupyter={"source_hidden": true} tags=["parameters"]
checkpoint = "../data/demo/drafters/speculators_layout"  # drafter directory: config.json + weights
target = "../data/demo/target"  # target model directory, or None to skip target cross-checks
# engine: "all", an engine ("sglang", "vllm", "eagle", "speculators", "tensorrt_llm": its newest
# release) or one release, e.g. "sglang==0.5.11", "vllm==0.32.0" (rules run here) or "vllm==0.34.0"
# (read from its wheel: no CPU build; vLLM releases 0.10.2, 0.20.0, 0.28.0, 0.32.0, 0.33.0, 0.34.0)
engine = "all"
# explore_fate: what the static key browser shows, "ENGINE: ACTION" (e.g. "eagle: dropped") or "" (every key)
explore_fate = ""

# %% jupyter={"source_hidden": true}
# No module named 'eagle3_forensics'? This kernel lacks it: choose Kernel › Change Kernel › eagle3-forensics
from eagle3_forensics.runs.kernel import require_notebook_kernel

require_notebook_kernel()
from IPython.display import HTML

from eagle3_forensics.checks.diagnose import diagnose, inspect_checkpoint
from eagle3_forensics.runs.record import finding_records, record
from eagle3_forensics.views.explorers import key_browser
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
from eagle3_forensics.views.next_steps import next_html
from eagle3_forensics.views.repair import repair_table

# %% [markdown]
# ## Verdict

# %%
d = diagnose(checkpoint, target=target, engines=engine)
HTML(verdict_html(d))

# %% [markdown]
# ## About this notebook
#
# 1. **Parameters** (the folded cell at the top): the drafter directory (`config.json` + weights), an optional
#    target model directory for cross-checks (`None` skips them), and the engine to look at
#    (`"all"`, `"sglang"`, `"vllm"`, `"eagle"` or `"speculators"`). Relative paths are relative to
#    this notebook's folder.
# 2. **Verdict**: overall and per engine (`healthy`, `warnings`, `broken`, `unusable`, `not applicable`).
# 3. **Detected format** and the **tensor table**, from the safetensors header alone.
# 4. **Load simulation**: for every engine, how many tensors it uses, renames, overwrites from the
#    target, drops silently or rejects, and which engine parameters nothing fills.
# 5. **Key fates**: the fate of every checkpoint key under the chosen engine(s).
# 6. **Findings** with their evidence and the fix for each.
# 7. **Explore**: a key browser filtered by one engine's fate (live in JupyterLab, static in reports).
#
# Run it headless over the demo drafters with `python -m eagle3_forensics report --out reports`
# (papermill + nbconvert), or for one drafter:
# `papermill notebooks/01_checkpoint_keys.ipynb out.ipynb --cwd notebooks -k python3 -p checkpoint PATH`.
# All logic lives in `eagle3_forensics`; this notebook only calls it and displays the results.


# %% [markdown]
# ## Detected format

# %%
ins = inspect_checkpoint(checkpoint)
HTML(format_html(ins))

# %% [markdown]
# ## Tensors
#
# Read from the weight-file headers only: no tensor data is loaded.

# %%
show_table(tensor_table(ins))

# %% [markdown]
# ## Load simulation per engine
#
# `used` = loaded as is, renamed or fused; `overwritten` = replaced by the target's tensor;
# `dropped` = silently ignored; `rejected` = the loader would fail loudly; `consumed` = read into
# something else (e.g. `d2t` into a token map); `skipped` = ignored by design; `unfilled` = engine
# parameters that no checkpoint tensor fills (they stay at initialisation).

# %%
show_table(load_table(d))

# %% [markdown]
# ## Key fates
#
# Every checkpoint key and what the engine does with it, then the parameters nothing fills.

# %%
HTML(key_fates_html(d, engine))

# %% [markdown]
# ## Findings and fixes

# %%
HTML(findings_html(d))

# %% [markdown]
# ## Repair, and diagnose again
#
# `eagle3-forensics repair` writes an engine-ready copy (never touching the original) for each engine
# it supports, here into a throw-away directory, and re-runs `diagnose` on the copy. A refusal names
# the reason and the options.

# %%
show_table(repair_table(checkpoint, target))

# %% [markdown]
# ## Explore
#
# The key browser: pick one engine's fate (`sglang: dropped`, `vllm: renamed`, ...) to see the keys it
# treats that way, and filter by name.
#
# Live widgets in JupyterLab; static tables under papermill and in reports (the `explore_*` parameters
# choose what the static view shows).

# %%
key_browser(d, ins, fate=explore_fate)

# %% [markdown]
# ## Next
#
# Run this notebook on your drafter, repair what it found, and confirm the repair: the commands
# below carry this run's paths (`eagle3_forensics.views.next_steps`).

# %%
HTML(next_html("01_checkpoint_keys", {"checkpoint": checkpoint, "target": target, "engine": engine}, d))

# %% [markdown]
# ## Machine-readable record
#
# Written to the file named by `$E3F_RECORD` (nothing is written when it is unset).

# %%
record("verdict", d.verdict())
record("counts", d.counts())
record("codes", finding_codes(d))
record("findings", finding_records(d))
