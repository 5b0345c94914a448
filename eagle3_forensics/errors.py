"""Errors that surfaces turn into a one-line message and a documented exit code."""

from __future__ import annotations

EXIT_OK = 0
"""No error-severity finding (or the command succeeded)."""
EXIT_FINDINGS = 1
"""At least one error-severity finding, or a refused/unverified operation."""
EXIT_UNUSABLE = 2
"""Unusable input: missing/truncated/unparseable file, refused pickle, missing shard, bad arguments."""


class UnusableInputError(Exception):
    """The input cannot be analysed at all. Its message is one line meant for the user."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path

    def __str__(self) -> str:
        msg = super().__str__()
        return " ".join(msg.split())  # guarantee one line
