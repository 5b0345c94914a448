"""The maintainer's extractor: engine knowledge derived from the released wheels by static analysis.

Engines ship every few weeks and each release adds target classes, too many to transcribe by hand.
This package reads a release's ``.py`` files with :mod:`ast` (the wheel is never imported: it needs
CUDA and the serving stack) and derives what is mechanical: vLLM's and SGLang's whole target
surface (captures, valid and default ids, the failure a user sees), vLLM's speculative-config
rules and SGLang's speculative options, each fact with ``file:line`` and the file's sha256. What it
cannot decide it lists, for a hand entry marked ``read`` in the release record. Entry point:
``python -m eagle3_forensics.engines.extract`` (``make engine-extract`` / ``make engine-drift``);
:mod:`.run` extracts, :mod:`.records` turns an extraction into a record's ``targets`` section,
:mod:`.drift` compares a release with its record. Not imported by the user-facing tool.
"""
