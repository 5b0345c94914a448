"""The mergeable counts of ``probe-offline`` (:class:`OfflineCounts`): plain sums (slots, hits per
step, slots whose steps ``0..j`` all hit, per position bucket and per token class) and the worst
samples, so shards add up exactly (:func:`merge_counts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from eagle3_forensics.checks.data.merge import Examples, check_shards
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.io.dumps.read import Sample
from eagle3_forensics.probe.teacher_forced import TeacherForced

PARTIAL_SCHEMA = "eagle3-forensics/probe-offline-partial/1"
WORST = 10  # worst samples kept


# ---------------------------------------------------------------------------------------------
# counts
# ---------------------------------------------------------------------------------------------


def zero_group(k: int) -> list[Any]:
    """An empty group count ``[slots, hits per depth, prefix hits per depth]`` for ``k`` steps."""
    return [0, [0] * k, [0] * k]


def add_group(dst: list[Any], slots: int, hits: Sequence[int], prefix: Sequence[int]) -> None:
    """Add one group's counts into ``dst`` (scan and merge both sum this way)."""
    dst[0] += slots
    dst[1] = [a + b for a, b in zip(dst[1], hits, strict=True)]
    dst[2] = [a + b for a, b in zip(dst[2], prefix, strict=True)]


def _merge_groups(a: dict[str, list[Any]], b: dict[str, list[Any]], k: int) -> dict[str, list[Any]]:
    out = {key: [v[0], list(v[1]), list(v[2])] for key, v in a.items()}
    for key, v in b.items():
        add_group(out.setdefault(key, zero_group(k)), v[0], v[1], v[2])
    return dict(sorted(out.items(), key=lambda kv: group_order(kv[0])))


def group_order(key: str) -> tuple[int, Any]:
    """Sort key of a group: numeric keys (lengths, positions) first, by value; then names."""
    return (0, int(key)) if key.lstrip("-").isdigit() else (1, key)


@dataclass
class OfflineCounts:
    """Mergeable counts of one probe-offline run (one shard or all)."""

    settings: dict[str, Any]
    shards: list[list[int]]
    files: int = 0
    used: int = 0
    tokens: int = 0
    bytes: int = 0
    slots: int = 0
    hits: list[int] = field(default_factory=list)
    prefix: list[int] = field(default_factory=list)
    greedy_agree: int = 0  # slots whose step-0 teacher equals the next data token
    out_of_draft_vocab: int = 0  # slots whose step-0 teacher the drafter cannot propose
    along: dict[str, list[Any]] = field(default_factory=dict)  # bucket -> [slots, hits, prefix]
    classes: dict[str, list[Any]] = field(default_factory=dict)
    layouts: dict[str, int] = field(default_factory=dict)
    skipped: Examples = field(default_factory=Examples)
    nonfinite: Examples = field(default_factory=Examples)
    worst: list[list[Any]] = field(default_factory=list)  # [score, index, source, slots, hits0, prefix_last]
    seconds: float = 0.0  # wall time of this run (not merged into results: timing is not a count)

    @property
    def k(self) -> int:
        return int(self.settings["k"])

    def add(self, sample: Sample, slots: int, hits: list[int], prefix: list[int]) -> None:
        self.used += 1
        self.tokens += sample.length
        self.bytes += sample.nbytes
        self.layouts[sample.layout] = self.layouts.get(sample.layout, 0) + 1
        self.slots += slots
        self.hits = [a + b for a, b in zip(self.hits or [0] * self.k, hits, strict=True)]
        self.prefix = [a + b for a, b in zip(self.prefix or [0] * self.k, prefix, strict=True)]
        if slots:
            score = TeacherForced.from_counts(self.k, [], slots, hits, prefix).simulated_acceptance_length
            self.worst.append(
                [round(score, 9), sample.item.index, sample.item.rel, slots, hits[0], prefix[-1]]
            )
            self.worst = sorted(self.worst, key=lambda w: (w[0], w[1]))[:WORST]

    def merged(self, other: OfflineCounts) -> OfflineCounts:
        if other.settings != self.settings:
            diff = sorted(
                key
                for key in set(self.settings) | set(other.settings)
                if self.settings.get(key) != other.settings.get(key)
            )
            raise BadArgumentsError(
                f"partial results come from different runs (settings differ: {', '.join(diff)})"
            )
        k = self.k
        out = OfflineCounts(self.settings, sorted([*self.shards, *other.shards]))
        for name in ("files", "used", "tokens", "bytes", "slots", "greedy_agree", "out_of_draft_vocab"):
            setattr(out, name, getattr(self, name) + getattr(other, name))
        out.hits = [a + b for a, b in zip(self.hits or [0] * k, other.hits or [0] * k, strict=True)]
        out.prefix = [a + b for a, b in zip(self.prefix or [0] * k, other.prefix or [0] * k, strict=True)]
        out.along = _merge_groups(self.along, other.along, k)
        out.classes = _merge_groups(self.classes, other.classes, k)
        out.layouts = {
            key: self.layouts.get(key, 0) + other.layouts.get(key, 0)
            for key in sorted(set(self.layouts) | set(other.layouts))
        }
        out.skipped = self.skipped.merged(other.skipped)
        out.nonfinite = self.nonfinite.merged(other.nonfinite)
        out.worst = sorted([*self.worst, *other.worst], key=lambda w: (w[0], w[1]))[:WORST]
        out.seconds = self.seconds + other.seconds
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "shards": self.shards,
            **{
                n: getattr(self, n)
                for n in (
                    "files",
                    "used",
                    "tokens",
                    "bytes",
                    "slots",
                    "hits",
                    "prefix",
                    "greedy_agree",
                    "out_of_draft_vocab",
                    "along",
                    "classes",
                    "layouts",
                    "worst",
                    "seconds",
                )
            },
            "skipped": self.skipped.to_dict(),
            "nonfinite": self.nonfinite.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OfflineCounts:
        try:
            c = cls(dict(d["settings"]), [[int(a), int(b)] for a, b in d["shards"]])
            for n in ("files", "used", "tokens", "bytes", "slots", "greedy_agree", "out_of_draft_vocab"):
                setattr(c, n, int(d[n]))
            c.hits = [int(x) for x in d["hits"]]
            c.prefix = [int(x) for x in d["prefix"]]
            c.along = {
                str(key): [int(v[0]), [int(x) for x in v[1]], [int(x) for x in v[2]]]
                for key, v in d["along"].items()
            }
            c.classes = {
                str(key): [int(v[0]), [int(x) for x in v[1]], [int(x) for x in v[2]]]
                for key, v in d["classes"].items()
            }
            c.layouts = {str(key): int(v) for key, v in d["layouts"].items()}
            c.worst = [
                [float(w[0]), int(w[1]), str(w[2]), int(w[3]), int(w[4]), int(w[5])] for w in d["worst"]
            ]
            c.seconds = float(d.get("seconds", 0.0))
            c.skipped = Examples.from_dict(d["skipped"])
            c.nonfinite = Examples.from_dict(d["nonfinite"])
            if c.hits and len(c.hits) != c.k:
                raise ValueError("hit counts do not match K")
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise UnusableInputError(
                f"not a probe-offline partial result ({type(exc).__name__}: {exc})"
            ) from None
        return c


def merge_counts(parts: Sequence[OfflineCounts]) -> OfflineCounts:
    if not parts:
        raise BadArgumentsError("nothing to merge")
    out = parts[0]
    for p in parts[1:]:
        out = out.merged(p)
    check_shards(out.shards)
    return out
