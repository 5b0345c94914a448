"""The live-server probe: ``core`` (entry point, drafter check), ``http`` (deadlines, retries), ``prometheus``,
``counters`` (the rules every server number obeys), one module per engine (``vllm``, ``sglang``), ``result``
and ``compare`` (the gap to an in-process probe)."""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "probe_server": "core",
    "server_vs_reference": "core",
    "ENGINE_PROBES": "core",
    "SERVER_ENGINES": "core",
    "ServerProbeResult": "result",
    "SERVER_CONVENTIONS": "result",
    "attach_comparison": "compare",
    "load_reference": "compare",
    "DEFAULT_TOLERANCE": "compare",
    "HttpClient": "http",
    "ServerFault": "http",
    "TOKENS_TOLERANCE": "counters",
    "normalise_url": "http",
    "parse_metrics": "prometheus",
    "VllmCounters": "vllm",
    "counter_delta": "vllm",
    "SglangRequest": "sglang",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
