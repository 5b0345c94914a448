"""vLLM 0.34.0's start-up rules run through its own code on the CPU (the loader tier, `make test-loaders`).

The GPU wheel has no CPU build, but its config classes import (.venv-vllm034, built by
``tests/loaders/build_venv.sh vllm 0.34.0 .venv-vllm034``). What they decide must equal the 0.34.0
tables (engines/startup.py, engines/vllm.py); the rules checked here are the ones
``StartupRules.ran`` marks ``ran``. Skipped when the venv is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

from eagle3_forensics.engines import resolve_release
from eagle3_forensics.engines.launch import launch_rules_for
from eagle3_forensics.engines.startup import StartupRules, startup_for

VLLM_0_34_0 = launch_rules_for(resolve_release("vllm==0.34.0"))
_STARTUP = startup_for(resolve_release("vllm==0.34.0"))
assert _STARTUP is not None
STARTUP: StartupRules = _STARTUP

pytestmark = pytest.mark.loaders

HARNESS = ROOT / "tests" / "loaders" / "harness" / "vllm034_startup.py"
PYTHON = Path(os.environ.get("E3F_LOADERS_VLLM034_VENV") or ROOT / ".venv-vllm034") / "bin" / "python"


@pytest.fixture(scope="module")
def ran() -> dict[str, Any]:
    if not PYTHON.is_file():
        pytest.skip(
            f"no vLLM 0.34.0 venv at {PYTHON.parent.parent}: tests/loaders/build_venv.sh vllm 0.34.0 .venv-vllm034"
        )
    job = {
        "cwd": str(ROOT),
        "speculators_checkpoint": str(ROOT / "data" / "demo" / "drafters" / "speculators_layout"),
        "keys": [
            "disable_padded_drafter_batch",
            "use_heterogeneous_vocab",
            "num_spec_tokens",
            "enforce_eager",
        ],
    }
    done = subprocess.run(
        [str(PYTHON), str(HARNESS)],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_speculative_config_fields_are_the_tables_keys(ran: dict[str, Any]) -> None:
    assert set(ran["fields"]) == set(STARTUP.config_keys)
    assert "config_keys" in STARTUP.ran and VLLM_0_34_0.startup == STARTUP


def test_removed_and_unknown_keys_are_refused_by_its_own_validation(ran: dict[str, Any]) -> None:
    for key in ("disable_padded_drafter_batch", "use_heterogeneous_vocab", "num_spec_tokens"):
        assert ran["keys"][key] is not None and "ValidationError" in ran["keys"][key], key
    # a field passes validation (it then needs a target config, which the harness does not build)
    assert "ValidationError" not in (ran["keys"]["enforce_eager"] or "")


def test_verifier_peagle_and_runner_environment_are_refused(ran: dict[str, Any]) -> None:
    assert "Speculators verifier must name a remote model repository" in ran["verifier"]
    assert dict(STARTUP.speculators_refused)["peagle"] in ran["peagle"]
    assert "Model Runner V1 has been removed" in ran["env"]
    assert {"verifier_must_be_remote", "speculators_refused", "env_must_be"} <= STARTUP.ran


def test_registry_has_no_peagle_architecture_and_every_table_architecture(ran: dict[str, Any]) -> None:
    archs = set(ran["archs"])
    assert not {"PEagleDraftModel", "PeagleLlamaForCausalLM", "PeagleQwen3ForCausalLM"} & archs
    table = resolve_release("vllm==0.34.0")
    registered = [a for a in table.flat_architectures or () if a.startswith("Eagle3") or a.endswith("Eagle3")]
    assert registered and set(registered) <= archs
