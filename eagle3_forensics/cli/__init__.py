"""The command line: argument parsing and dispatch only."""

from eagle3_forensics.cli.main import main

__all__ = ["main"]
