"""Prometheus text exposition: every sample keyed by (name, labels), and sums over label sets."""

from __future__ import annotations

from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.probe.server.http import ServerFault

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

# A serving engine's /metrics has hundreds to a few thousand lines; the text parser reads about 50,000 a
# second here, so a page of many more (64 MiB of short lines would be a million) is refused before parsing
# rather than parsed for half a minute outside every deadline.
MAX_METRIC_LINES = 100_000


def parse_metrics(text: str, what: str = "GET /metrics") -> Samples:
    """Every sample of a Prometheus text exposition, keyed by (name, sorted labels)."""
    try:
        from prometheus_client.parser import (
            text_string_to_metric_families,  # optional: prometheus_client (the server extra)
        )
    except ImportError:  # pragma: no cover - the server extra is part of dev
        raise UnusableInputError(
            "probe-server needs prometheus_client: pip install 'eagle3-forensics[server]'"
        ) from None
    lines = text.count("\n") + 1
    if lines > MAX_METRIC_LINES:
        raise ServerFault(
            "SERVER_BAD_RESPONSE",
            f"{what}: {lines} lines of metrics, more than {MAX_METRIC_LINES} (a server's /metrics has thousands)",
            {"request": what, "lines": lines, "limit_lines": MAX_METRIC_LINES},
        )
    out: Samples = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    except Exception as exc:  # the parser raises ValueError/IndexError/KeyError/TypeError on bad lines
        raise ServerFault(
            "SERVER_BAD_RESPONSE",
            f"{what}: not Prometheus text ({type(exc).__name__}: {exc})",
            {"request": what},
        ) from None
    return out


def sum_samples(samples: Samples, name: str) -> float | None:
    """Sum of one metric over its label sets (engines, models); ``None`` when absent.

    Accepts the name with or without the ``_total`` suffix counters get on the text endpoint."""
    names = {name, name[:-6]} if name.endswith("_total") else {name, name + "_total"}
    vals = [v for (n, _), v in samples.items() if n in names]
    return sum(vals) if vals else None


def by_label(samples: Samples, name: str, label: str) -> dict[str, float]:
    names = {name, name[:-6]} if name.endswith("_total") else {name, name + "_total"}
    out: dict[str, float] = {}
    for (n, labels), v in samples.items():
        if n in names:
            lv = dict(labels).get(label)
            if lv is not None:
                out[lv] = out.get(lv, 0.0) + v
    return out
