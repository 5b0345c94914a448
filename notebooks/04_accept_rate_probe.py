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
# # 04 · Accept-rate probe: live speculative decoding with the drafter
#
# Runs the target (any local Hugging Face causal LM) and the EAGLE-3 drafter **in process**, in
# plain PyTorch: greedy chain speculative decoding with KV caches for both models, `K` drafts per
# cycle verified by one target forward. Nothing needs a serving engine or a GPU (CUDA is used when
# present, in bf16).

# %% jupyter={"source_hidden": true} tags=["parameters"]
checkpoint = "../data/demo/drafters/healthy"  # drafter directory (config.json + weights)
target = "../data/demo/target"  # target model directory (local Hugging Face causal LM)
prompts = "../data/demo/prompts.jsonl"  # .jsonl with {"prompt": ...} per line, or one prompt per line
k = 3  # draft tokens per cycle
device = "auto"  # "auto" (CUDA in bf16 when present, else CPU in fp32), "cpu" or "cuda"
# engine: "reference" or an engine release, e.g. "sglang" (the newest), "sglang==0.5.11", "vllm"
engine = "reference"
max_new_tokens = 64  # new tokens per prompt (EOS ignored)
# variants: a directory of drafters to compare side by side (e.g. "../data/demo/drafters"; about 40 s
# on 2 CPU cores for the demo's drafters and three views), or None: the comparison is opt-in
variants = None
engines = ["reference", "sglang", "vllm"]  # engine views in the comparison
server_url = None  # live vLLM/SGLang server serving `target` with `checkpoint` (e.g. "http://127.0.0.1:8000"); None skips
# server_engine: the engine behind server_url, "vllm" or "sglang" ("sglang==0.5.23" pins a release)
server_engine = "vllm"
explore_prompts = (
    None  # prompts (by position in the file) the explorer starts with; None: all, as the probe above
)
# as the server sees it: the request's chat_template_kwargs (None: the template's default; the
# prompts are rendered with the template whenever the target has one), prompt lengths to probe, and
# the trained length (or training dumps to take it from; None: unknown)
chat_template_kwargs = None  # e.g. {"enable_thinking": False}
lengths = [64, 256, 1024]  # prompt lengths in tokens; [] skips
trained_length = None
dumps = None  # e.g. "../data/demo/train/healthy"
served_view = True  # the "as the server sees it" section (a second probe); False skips it (the quick report)

# %% jupyter={"source_hidden": true}
# No module named 'eagle3_forensics'? This kernel lacks it: choose Kernel › Change Kernel › eagle3-forensics
from eagle3_forensics.runs.kernel import require_notebook_kernel

require_notebook_kernel()
# %matplotlib inline
from IPython.display import HTML

from eagle3_forensics.probe.core import compare_variants, probe
from eagle3_forensics.probe.served import probe_as_served
from eagle3_forensics.probe.server.core import server_vs_reference
from eagle3_forensics.runs.record import record
from eagle3_forensics.views.explorers import probe_explorer
from eagle3_forensics.views.html import show_table
from eagle3_forensics.views.next_steps import diagnosis_for, next_html
from eagle3_forensics.views.probe import (
    acceptance_chart,
    aux_sweep_table,
    length_figure,
    length_table,
    lossless_text,
    per_position_table,
    segment_table,
    summary_table,
    sweep_verdict,
    variants_figure,
    variants_table,
    view_table,
)
from eagle3_forensics.views.server import engine_gap_figure, engine_gap_table, render_server_probe

# %% [markdown]
# ## Acceptance and speed

# %%
r = probe(checkpoint, target, prompts, k=k, max_new_tokens=max_new_tokens, device=device, engine=engine)
show_table(summary_table(r))

# %% [markdown]
# ## About this notebook
#
# * **Acceptance length** and **per-position acceptance** (vLLM's conventions; each number says
#   which convention it follows), **speed** against plain greedy decoding of the same target.
# * **Lossless check**: the committed tokens must equal plain greedy decoding.
# * **Teacher-forced estimate** (per-step accuracy, simulated acceptance length `1 + Σ Π c_j`)
#   beside the live figure, and the **aux-layer sweep** (aux ids shifted by −1, 0, +1).
# * **Engine view**: `engine = "reference"` loads the drafter as its writer meant it (the
#   intrinsic acceptance); `"sglang"`, `"vllm"`, `"eagle"` or `"speculators"` first apply that
#   engine's load rules from the diagnose rule tables (dropped keys stay uninitialised, `d2t`,
#   aux ids and norm flags read the engine's way): the acceptance that engine would deliver.
# * **Variants side by side**: every drafter under `variants`, under each engine view.
# * **Explore**: run the probe again with another K, engine release or choice of prompts.
#
# Headless: `papermill notebooks/04_accept_rate_probe.ipynb out.ipynb --cwd notebooks -p checkpoint PATH`.
# CLI equivalent: `eagle3-forensics probe DRAFTER --target DIR --prompts FILE [--engine E] [--json]`.


# %% [markdown]
# ## Per-position acceptance
#
# *Cumulative* (vLLM): the share of verify steps in which draft position i was accepted (so were
# 0..i-1); acceptance length = 1 + their sum. *Conditional*: P(position i accepted | 0..i-1 were).
# The teacher-forced columns come from the target's own greedy text.

# %%
show_table(per_position_table(r))

# %%
acceptance_chart(r)  # the per-position bars, or a line saying nothing was accepted

# %% [markdown]
# ## Aux-layer sweep
#
# The teacher-forced estimate with the drafter's aux ids (Hugging Face `hidden_states` index: the
# input of decoder layer i) shifted by −1, 0 and +1. A drafter read with the ids it was trained on
# peaks at 0; a peak elsewhere means the ids are written in the wrong convention (or for the wrong
# target).

# %%
show_table(aux_sweep_table(r))

# %%
print(sweep_verdict(r))

# %% [markdown]
# ## Lossless check

# %%
print(lossless_text(r))

# %% [markdown]
# ## How this view loaded the drafter

# %%
show_table(view_table(r))

# %% [markdown]
# ## Variants side by side
#
# Every drafter under `variants`, probed under each view in `engines` on the first prompts. An
# engine that would refuse a drafter at load shows the reason instead of numbers.

# %%
rows = compare_variants(variants, target, prompts, engines=engines, k=k, device=device) if variants else None
show_table(variants_table(rows)) if rows is not None else print("comparison skipped (variants is None)")

# %%
variants_figure(rows) if rows is not None else None

# %% [markdown]
# ## Live server: engine vs reference per position
#
# With `server_url` set, the prompts go to the live server (greedy, EOS ignored, `max_new_tokens`
# each) and its acceptance is read the way that engine reports it (vLLM: `/metrics` counters before
# and after; SGLang: per-request `meta_info`), then the same drafter is probed in process under
# `server_engine`'s view with the server's K. The gap per position separates a drafter the engine
# loads differently (a gap from position 0) from numerics or the draft recurrence (a gap growing
# with the position). CLI equivalent: `eagle3-forensics probe-server URL --engine E --prompts FILE
# --compare-with RESULT.json`.

# %%
sr = (
    server_vs_reference(
        server_url, server_engine, checkpoint, target, prompts, max_new_tokens=max_new_tokens, device=device
    )
    if server_url
    else None
)
print(render_server_probe(sr) if sr is not None else "server section skipped (server_url is None)")

# %%
show_table(engine_gap_table(sr)) if sr is not None and sr.compare else None

# %%
engine_gap_figure(sr) if sr is not None and sr.compare else None

# %% [markdown]
# ## Explore
#
# Run the probe again with another K, engine release (`sglang==0.5.10.post1`, `vllm==0.10.2`, `vllm==0.34.0`, ...) or
# choice of prompts (the live probe only: no teacher-forced estimate, no sweep).
#
# Live widgets in JupyterLab; static tables under papermill and in reports (the `explore_*` parameters
# choose what the static view shows).

# %%
probe_explorer(
    checkpoint,
    target,
    prompts,
    result=r,
    k=k,
    engine=engine,
    max_new_tokens=max_new_tokens,
    device=device,
    picked=explore_prompts,
)

# %% [markdown]
# ## As the server sees it: by segment and by prompt length
#
# A server renders each chat request with the target's template, the request's
# `chat_template_kwargs` and the generation prompt, so drafting starts after the template's
# scaffolding and, for a reasoning model, runs through a think block before the answer. Below:
# live acceptance by **segment** of the position each draft token lands on (scaffold, reasoning,
# answer, tool call — labelled from the full rendering), and against **prompt length** (prompts of
# about N tokens built by concatenating the prompt texts), the trained length marked. CLI:
# `eagle3-forensics probe ... --chat-template-kwargs JSON --lengths 64,256,1024 --trained-length N`.

# %%
served = (
    probe_as_served(
        checkpoint,
        target,
        prompts,
        template_kwargs=chat_template_kwargs,
        lengths=lengths,
        trained_length=trained_length,
        dumps=dumps,
        k=k,
        max_new_tokens=max_new_tokens,
        device=device,
        engine=engine,
    )
    if served_view
    else None
)
if served is None:
    print("skipped (served_view=False)")
else:
    print(f"rendered with the chat template: {served.chat is not None}  {served.chat or ''}")
    seg_table = segment_table(served)
    if seg_table is not None:
        show_table(seg_table)

# %%
len_table = None if served is None else length_table(served)
if len_table is not None:
    show_table(len_table)
None if served is None else length_figure(served)  # acceptance against prompt length; nothing without lengths

# %%
record(
    "served",
    None if served is None else {k_: served.to_dict().get(k_) for k_ in ("chat", "segments", "by_length")},
)

# %% [markdown]
# ## Next
#
# Run this notebook on your drafter, repair what it found, and confirm the repair: the commands
# below carry this run's paths (`eagle3_forensics.views.next_steps`).

# %%
HTML(
    next_html(
        "04_accept_rate_probe",
        {"checkpoint": checkpoint, "target": target, "engine": engine},
        diagnosis_for(checkpoint, target, engine),
    )
)

# %% [markdown]
# ## Machine-readable record
#
# Written to the file named by `$E3F_RECORD` (nothing is written when it is unset).

# %%
record("probe", r.to_dict())
record("variants", rows)
record("server", sr.to_dict() if sr is not None else None)
