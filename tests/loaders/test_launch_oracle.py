"""`diagnose --launch` against SGLang's own argument parser (the loader tier: `make test-loaders`).

Each command line below is parsed twice: by the released SGLang's ``ServerArgs.add_cli_args``
parser in its venv (tests/loaders/harness/sglang_args.py) and by
:func:`eagle3_forensics.engines.launch.read_launch` under that release's launch table. The stored
values must agree, and a line SGLang's parser refuses must be refused here too (a
``BadArgumentsError``, or a ``method_refused`` for an algorithm outside the release's choices).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

from eagle3_forensics.engines import resolve_release
from eagle3_forensics.engines.launch import LaunchSettings, launch_rules_for, read_launch
from eagle3_forensics.errors import BadArgumentsError
from eagle3_forensics.io.launch import split_command

pytestmark = pytest.mark.loaders

HARNESS = ROOT / "tests" / "loaders" / "harness" / "sglang_args.py"
VENVS = {
    "0.5.23": ("E3F_LOADERS_SGLANG_VENV", ".venv-sglang"),
    "0.5.11": ("E3F_LOADERS_SGLANG_OLD_VENV", ".venv-sglang-0.5.11"),
}

ARGS = [
    "--model-path m --speculative-algorithm EAGLE3 --speculative-draft-model-path d "
    "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
    "--model m --speculative-algorithm=EAGLE --speculative-draft-model=d --speculative-num-steps=5",
    "--model-path m --speculative-algorithm NEXTN --tp-size 2",
    "--model-path m --speculative-algorithm eagle3 --speculative-draft-model-path d",
    "--model-path m --speculative-algorithm DFLASH --speculative-eagle-topk 4",
    "--model-path m --speculative_algorithm EAGLE3",
    "--model-path m --speculative-num-steps three",
    "--model-path m --speculative-draft-model-path /a --speculative-draft-model-path /b",
    "--model-path m --tensor-parallel-size 4 --speculative-num-draft-tokens 8",
]
# our setting -> SGLang's dest
DEST = {
    "target": "model_path",
    "method": "speculative_algorithm",
    "draft": "speculative_draft_model_path",
    "num_steps": "speculative_num_steps",
    "topk": "speculative_eagle_topk",
    "num_draft_tokens": "speculative_num_draft_tokens",
    "tensor_parallel_size": "tp_size",
}


def _python(version: str) -> Path:
    var, default = VENVS[version]
    python = Path(os.environ.get(var) or ROOT / default) / "bin" / "python"
    if not python.is_file():
        pytest.fail(f"no SGLang {version} venv at {python.parent.parent}: run `make loaders-env`")
    return python


def _ours(version: str, args: str) -> LaunchSettings | BadArgumentsError:
    rules = launch_rules_for(resolve_release(f"sglang=={version}"))
    try:
        return read_launch(split_command(f"python -m sglang.launch_server {args}"), rules)
    except BadArgumentsError as exc:
        return exc


@pytest.mark.parametrize("version", sorted(VENVS))
def test_launch_flags_agree_with_sglangs_own_parser(version: str) -> None:
    argvs = [shlex.split(a) for a in ARGS]
    done = subprocess.run(
        [str(_python(version)), str(HARNESS)],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout)
    assert answer["sglang"] == version
    differences: list[str] = []
    for args, theirs in zip(ARGS, answer["results"], strict=True):
        ours = _ours(version, args)
        if "error" in theirs:
            refused = isinstance(ours, BadArgumentsError) or ours.method_refused is not None
            if not refused:
                differences.append(f"{args!r}: SGLang refuses ({theirs['error']}), we read {ours.settings}")  # type: ignore[union-attr]
            continue
        if isinstance(ours, BadArgumentsError):
            differences.append(f"{args!r}: SGLang parses it, we refuse: {ours}")
            continue
        if ours.method_refused is not None:
            differences.append(f"{args!r}: SGLang parses it, we say it refuses the method")
        got: dict[str, Any] = {DEST[k]: v for k, v in ours.settings.items() if k in DEST}
        want = {
            k: v for k, v in theirs["fields"].items() if v is not None and not (k == "tp_size" and v == 1)
        }
        if got != want:
            differences.append(f"{args!r}: SGLang {want}, we {got}")
    assert not differences, "\n".join(differences)
