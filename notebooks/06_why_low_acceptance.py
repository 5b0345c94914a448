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
# # 06 · Why is acceptance low?
#
# One drafter, one page: the **causes found, ranked by what each costs** in acceptance length —
# measured before estimated, then by severity — each with its evidence and fix, then **Next**: the
# command per cause and how to confirm it. Sources: 00's verdict for the engine served and the live
# probe (checkpoint and engine), `audit-data --target` over the training data when `data` is given
# (data provenance, template and mode, length), the draft vocabulary, and the serving command or a
# live server when given. A healthy drafter gets **no cause found** and what was not checked.

# %% jupyter={"source_hidden": true} tags=["parameters"]
checkpoint = "../data/demo/drafters/d2t_absolute"  # drafter directory: config.json + weights
target = "../data/demo/target"  # target model directory, or None (no probe, no target cross-checks)
# engine: what the drafter is served on, an engine ("vllm", "sglang", "eagle", "speculators") or one
# release ("sglang==0.5.11"); the probe measures acceptance under this engine's view
engine = "vllm"
data = None  # the drafter's training data (a directory audit-data reads), or None
launch = None  # the serving command line (diagnose --launch), or None
server = None  # a live server's URL (probed with the prompts), or None
prompts = "../data/demo/prompts.jsonl"  # probe prompts (.jsonl with {"prompt": ...} or one per line), or None
max_prompts = 4  # how many of the prompts the probe uses (the first ones)
k = 3  # draft tokens per cycle
max_new_tokens = 24  # new tokens per prompt (EOS ignored)
lengths = [8, 16]  # more new-token budgets probed for acceptance by length (besides max_new_tokens)
device = "cpu"  # "cpu" (fp32, the same numbers everywhere), "cuda" or "auto"
# segment: the one the static explorer shows, "all", "scaffold", "reasoning", "answer" or "tool_call"
segment = "all"
length = "all"  # the length the static explorer shows: "all" or one of the probed budgets

# %% jupyter={"source_hidden": true}
# No module named 'eagle3_forensics'? This kernel lacks it: choose Kernel › Change Kernel › eagle3-forensics
from eagle3_forensics.runs.kernel import require_notebook_kernel

require_notebook_kernel()
from IPython.display import HTML

# %% [markdown]
# ## The answer: the causes, ranked
#
# Every cost is in acceptance length; a data cause's share of positions gets an estimate in
# acceptance length beside it (explained under its card). The reference is the trained view's
# acceptance length: what this drafter reaches when it runs as trained.
# %% jupyter={"source_hidden": true}
from eagle3_forensics.probe.why_next import why_next_steps
from eagle3_forensics.runs.record import record_why
from eagle3_forensics.views.causes import (
    acceptance_explorer,
    ranking_html,
    ranking_text,
    reference_html,
    why_next_html,
)
from eagle3_forensics.views.html import verdict_html
from eagle3_forensics.views.why import why_low_acceptance

why = why_low_acceptance(
    checkpoint,
    target,
    engine=engine,
    data=data,
    launch=launch,
    server=server,
    prompts=prompts,
    max_prompts=max_prompts,
    k=k,
    max_new_tokens=max_new_tokens,
    lengths=lengths,
    device=device,
)
served, trained = why.served_acceptance_length, why.trained_acceptance_length
HTML(ranking_html(why.ranking, trained) + reference_html(why.ranking, trained, why.trained_source))

# %% [markdown]
# ## How it was measured
#
# The checkpoint-and-engine cost is 00's: the live acceptance length (vLLM's `1 + accepted /
# num_drafts`, bonus included) under the engine's view of the checkpoint, against the trained view —
# the checkpoint as its writer meant it, or, when the checkpoint has errors for the engine, the copy
# `repair` makes ready for it (in a throw-away directory), whichever accepts more. The aux layers
# the drafter was trained on are measured first: candidate id sets (the config's, each engine's,
# each trainer's default, neighbours) scored by teacher-forced acceptance on the prompts; where the
# best beats the config's ids beyond the per-prompt noise, "the config's ids are not the layers it
# was trained on" (AUX_LAYER_IDS_NOT_TRAINED) carries that measured gap. The data checks' costs come with
# their findings (`evidence.cost`: measured or estimated, and how).

# %%
print(why.measured.note if why.measured is not None else "nothing was probed")
# the aux layers the drafter was trained on, measured on the target (AUX_LAYER_IDS_NOT_TRAINED / _NOT_RECORDED)
print(why.measured_aux.summary(None) if why.measured_aux is not None else "trained aux layers: not measured")

# %% [markdown]
# ## 00's verdict for the engine served

# %%
HTML(verdict_html(why.diagnosis))

# %% [markdown]
# ## Next
#
# Per cause: what to do, the commands (they run in `notebooks/`, where a `make lab` terminal starts,
# and write only into ignored places), and how to confirm the fix: the command, and which number
# should move.

# %%
run_parameters = {
    "checkpoint": checkpoint, "target": target, "engine": engine, "data": data, "launch": launch,
    "prompts": prompts, "max_prompts": max_prompts, "max_new_tokens": max_new_tokens,
}  # fmt: skip
HTML(why_next_html(why_next_steps(why.ranking, run_parameters, served, trained)))

# %% [markdown]
# ## Explore
#
# Acceptance by segment (scaffold, reasoning, answer, tool call, when the probe splits it) and by
# length (new tokens per prompt). Live in JupyterLab; under papermill and in HTML reports a static
# table (the parameters `segment` and `length` choose what it shows). Deeper: 00 (triage), 04 (the
# full probe with the aux sweep), 05 (the offline probe over the trainer's data).

# %%
acceptance_explorer(why.by_length, segment=segment, length=length)

# %% [markdown]
# ## Machine-readable record
#
# Written to the file named by `$E3F_RECORD` (nothing is written when it is unset).

# %%
record_why(why)
print("answer:", ranking_text(why.ranking).splitlines()[0])  # the answer where Run All leaves the view
