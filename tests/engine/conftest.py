"""Fixtures of the engine tests (``make test-engine``); the server helper is engine_server.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib.util import find_spec
from typing import Any

import pytest
from engine_server import SCRATCH

# Outside .venv-engine there is no vLLM: `make test` neither collects nor reports these tests;
# `make test-engine` in an environment without vLLM then finds no test and fails (pytest exit 5).
collect_ignore_glob = [] if find_spec("vllm") is not None else ["test_*.py"]

FIGURES: dict[str, Any] = {}


@pytest.fixture(scope="session")
def figures() -> Iterator[dict[str, Any]]:
    """Measured numbers, written to .engine-scratch/figures.json at the end (docs/probe.md quotes them)."""
    yield FIGURES
    SCRATCH.mkdir(parents=True, exist_ok=True)
    (SCRATCH / "figures.json").write_text(json.dumps(FIGURES, indent=2, default=str) + "\n", encoding="utf-8")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per drafter: the server's acceptance length beside the in-process reference's."""
    if not FIGURES:
        return
    tr = terminalreporter
    tr.section("vLLM server vs in-process probe (vLLM view), K=3, 16 prompts x 48 tokens")

    def line(name: str, entry: dict[str, Any]) -> None:
        srv, ref = entry.get("server"), entry.get("reference_vllm_view") or {}
        if isinstance(srv, dict):
            tr.write_line(
                f"{name:28} server AL {srv['acceptance_length']:.4f} per-pos {srv['per_position_cumulative']}"
                f"   reference AL {ref.get('acceptance_length', float('nan')):.4f}"
            )
        else:
            tr.write_line(
                f"{name:28} server: {srv}   reference AL {ref.get('acceptance_length', float('nan')):.4f}"
            )

    for name, entry in FIGURES.items():
        if name == "refused":
            for variant, message in entry.items():
                tr.write_line(f"{'refused ' + variant:28} {message[:90]}")
        elif name == "repaired":
            for variant, sub in entry.items():
                line(f"repaired {variant}", sub)
        elif "server" in entry:
            line(name, entry)
