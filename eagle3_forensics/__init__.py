"""eagle3-forensics: find why an EAGLE-3 drafter accepts nothing, before spending GPU time."""

__version__ = "0.1.0"
