"""The "Next" section every notebook ends with: run it on your drafter, repair, confirm.

Three numbered steps with this run's paths: (1) the papermill line that runs this notebook with the
parameters it ran with (point ``checkpoint`` at your drafter; or edit the folded parameters cell
and *Run All*), (2) the repair or launch change the findings call for
(:meth:`eagle3_forensics.checks.diagnose.Diagnosis.next_steps`: one place decides "the next
command"), (3) how to confirm it: diagnose the copy, and probe it in notebook 04 under that engine.
Domain code decides the commands; this module only lays them out.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle3_forensics.checks.diagnose import diagnose
from eagle3_forensics.repair.next_steps import NextStep, StepAction, repair_out
from eagle3_forensics.views.html import esc

if TYPE_CHECKING:
    from eagle3_forensics.checks.diagnose import Diagnosis

PROBE_NOTEBOOK = "04_accept_rate_probe"
#: engines notebook 04 can take as its ``engine`` view (the others have no probe view)
PROBE_VIEWS = ("sglang", "vllm", "eagle", "speculators")


#: where the suggested papermill lines write, relative to ``notebooks/``: git ignores ``build/``, so
#: running a Next command leaves the checkout clean
OUT_DIR = "../build/notebooks"


def papermill_line(notebook: str, parameters: Mapping[str, Any], out: str | None = None) -> str:
    """``mkdir -p ../build/notebooks && papermill NB.ipynb ../build/notebooks/OUT -k eagle3-forensics
    -p NAME VALUE ...``, run in ``notebooks/`` (the kernel's working directory, which the notebooks'
    relative paths start from, as the repair and diagnose commands next to it do, and where a
    ``make lab`` terminal starts). The executed copy goes to the ignored ``build/notebooks/``.
    ``None`` values pass as ``None``, which papermill reads as Python's ``None``."""
    name = out or f"{notebook.split('_', 1)[-1]}.ipynb"
    words = ["papermill", f"{notebook}.ipynb", f"{OUT_DIR}/{name}"]
    words += ["-k", "eagle3-forensics"]
    for key, value in parameters.items():
        words += ["-p", key, "None" if value is None else str(value)]
    return f"mkdir -p {OUT_DIR} && {shlex.join(words)}"


def diagnosis_for(checkpoint: Any, target: Any = None, engine: Any = "all") -> Diagnosis | None:
    """The static diagnosis a "Next" section names commands from, for notebooks that did not run one
    (03-05): ``None`` when ``checkpoint`` is not a drafter directory (a map file) or cannot be read."""
    if checkpoint is None or not Path(str(checkpoint)).is_dir():
        return None
    spec = str(engine) if engine and str(engine).split("==")[0] in (*PROBE_VIEWS, "tensorrt_llm") else "all"
    try:
        return diagnose(str(checkpoint), target=None if target is None else str(target), engines=spec)
    except Exception:  # a drafter this notebook could read but diagnose cannot: no commands to name
        return None


def _code(command: str) -> str:
    return f'<pre class="e3f-command" style="white-space:pre-wrap;margin:0.3em 0">{esc(command)}</pre>'


def _step(step: NextStep) -> str:
    where = f' <span style="color:#555">[{esc(", ".join(step.engines))}]</span>' if step.engines else ""
    return f"<li>{esc(step.text)}{where}{_code(step.command) if step.command else ''}</li>"


def next_html(notebook: str, parameters: Mapping[str, Any], diagnosis: Diagnosis | None = None) -> str:
    """The "Next" section of ``notebook`` (e.g. ``"01_checkpoint_keys"``) run with ``parameters``.

    Step 2 lists the repair/launch/manual steps of ``diagnosis`` (none: "nothing to repair");
    step 3 the confirm commands and notebook 04's papermill line on each repaired copy."""
    checkpoint = str(parameters.get("checkpoint", "DRAFTER"))
    steps = diagnosis.next_steps() if diagnosis is not None else []
    fixes = [s for s in steps if s.action is not StepAction.CONFIRM]
    confirms = [s for s in steps if s.action is StepAction.CONFIRM]
    run = (
        "<li><b>Your drafter</b>: set <code>checkpoint</code> (and <code>target</code>) in the folded "
        "parameters cell at the top and <i>Run All</i>, or run it headless (every command here runs in "
        "<code>notebooks/</code>, where its relative paths start):"
        f"{_code(papermill_line(notebook, parameters))}</li>"
    )
    if diagnosis is None:
        fix = "<li><b>Repair</b>: no diagnosis here (not a drafter directory); see notebook 00 or 01.</li>"
    elif not fixes:
        fix = (
            f"<li><b>Repair</b>: nothing to repair for {esc(', '.join(diagnosis.engines))}: "
            "no error that a command or a launch flag fixes.</li>"
        )
    else:
        fix = f"<li><b>Repair</b>:<ul>{''.join(_step(s) for s in fixes)}</ul></li>"
    probes = []
    for s in confirms:
        spec = next(iter(diagnosis.specs.get(e, e) for e in s.engines), None) if diagnosis else None
        if spec is None or spec.split("==")[0] not in PROBE_VIEWS:
            continue
        params = {"checkpoint": repair_out(checkpoint, spec), "engine": spec}
        probes.append(
            NextStep(
                StepAction.CONFIRM,
                f"Probe the copy as {spec} loads it (notebook 04): the acceptance that engine delivers.",
                papermill_line(PROBE_NOTEBOOK, params, out="probe.ipynb"),
                s.codes,
                s.engines,
            )
        )
    if confirms:
        confirm = f"<li><b>Confirm</b>:<ul>{''.join(_step(s) for s in confirms + probes)}</ul></li>"
    else:
        params = {"checkpoint": checkpoint}
        if parameters.get("target") is not None:
            params["target"] = parameters["target"]
        confirm = (
            "<li><b>Confirm</b> with a live probe (notebook 04, its engine view as your server loads it):"
            f"{_code(papermill_line(PROBE_NOTEBOOK, {**params, 'engine': 'sglang'}, out='probe.ipynb'))}</li>"
        )
    return f'<ol class="e3f-next">{run}{fix}{confirm}</ol>'


__all__ = ["OUT_DIR", "diagnosis_for", "next_html", "papermill_line"]
