"""``diagnose --launch``: a sliding-window drafter served without the window its release needs.

Where the judged release takes the draft window from a launch option only (newer SGLang:
``--speculative-draft-window-size``) or from nowhere (older SGLang), a drafter whose config trains
layers with a sliding window runs full attention unless the command sets the window
(``LAUNCH_DRAFT_WINDOW_MISSING``). vLLM reads the window from the drafter config: no finding.
Without ``--launch``, :func:`check_draft_window_static` says the same from the config alone, naming
the flag (a warning: every command of that release needs it).
"""

from __future__ import annotations

from collections.abc import Iterator

from eagle3_forensics.checks.context import Context
from eagle3_forensics.engines.knobs import WindowSource, draft_window_for, drafter_window
from eagle3_forensics.engines.launch import LaunchSettings
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.launch import split_command


def _option_value(command: str, option: str) -> str | None:
    """The value the command gives ``option`` (the last one wins, as argparse), else ``None``."""
    value = None
    for opt in split_command(command).options:
        if opt.name == option:
            value = opt.value
    return value


def check_draft_window(ctx: Context, launch: LaunchSettings) -> Iterator[Finding]:
    window = drafter_window(ctx.cfg)
    if window is None or launch.engine not in ctx.engine_names:
        return
    rules = next(r for r in ctx.releases if r.name == launch.engine)
    rule = draft_window_for(rules)
    if rule is None or rule.source is WindowSource.CONFIG:
        return
    name = f"{rules.display} ({launch.judged_by or rules.release})"
    evidence = {
        "launch_release": launch.launch_release,
        "engine_release": launch.judged_by,
        "program": launch.program,
        "sliding_window": window,
        "window_source": rule.source.value,
        "source": f"{rule.citation.package}=={rule.citation.version} {rule.citation.path}",
    }
    if rule.source is WindowSource.NONE:
        yield Finding(
            "LAUNCH_DRAFT_WINDOW_MISSING",
            Severity.WARNING,
            f"The drafter trains layers with sliding_window {window} (layer_types), but {name} applies no "
            "draft window at all: the drafter attends to the whole context, and acceptance falls on long prompts.",
            engine=launch.engine,
            evidence=evidence,
            fix="Serve on a release that applies the window (SGLang with --speculative-draft-window-size, or "
            "vLLM, which reads it from the drafter config).",
        )
        return
    assert rule.option is not None
    given = _option_value(launch.command, rule.option)
    if given is not None and given.strip() == str(window):
        return
    what = "without" if given is None else f"with {rule.option} {given}, not"
    yield Finding(
        "LAUNCH_DRAFT_WINDOW_MISSING",
        Severity.WARNING,
        f"The drafter trains layers with sliding_window {window} (layer_types), but {name} ignores the config "
        f"and applies only {rule.option}; this command runs it {what} that window.",
        engine=launch.engine,
        evidence={**evidence, "option": rule.option, "given": given},
        fix=f"Add {rule.option} {window} to the command.",
    )


def check_draft_window_static(ctx: Context) -> Iterator[Finding]:
    """Without ``--launch``: each judged release that needs a launch option for (or ignores) the
    window of a sliding-window drafter, from the config alone."""
    window = drafter_window(ctx.cfg)
    if window is None:
        return
    for rules in ctx.releases:
        rule = draft_window_for(rules)
        if rule is None or rule.source is WindowSource.CONFIG:
            continue
        evidence = {
            "engine_release": rules.release,
            "sliding_window": window,
            "window_source": rule.source.value,
            "source": f"{rule.citation.package}=={rule.citation.version} {rule.citation.path}",
            "option": rule.option,
        }
        if rule.source is WindowSource.NONE:
            message = (
                f"The drafter trains layers with sliding_window {window} (layer_types), but {rules.display} "
                f"({rules.release}) applies no draft window at all: the drafter attends to the whole context."
            )
            fix = "Serve on a release that applies the window (SGLang with --speculative-draft-window-size, or vLLM)."
        else:
            message = (
                f"The drafter trains layers with sliding_window {window} (layer_types), but {rules.display} "
                f"({rules.release}) ignores the config and applies only {rule.option}: serve with "
                f"{rule.option} {window}, or the drafter runs full attention and acceptance falls on long prompts."
            )
            fix = f"Add {rule.option} {window} to the serving command (diagnose --launch checks a command)."
        yield Finding(
            "LAUNCH_DRAFT_WINDOW_MISSING",
            Severity.WARNING,
            message,
            engine=rules.name,
            evidence=evidence,
            fix=fix,
        )
