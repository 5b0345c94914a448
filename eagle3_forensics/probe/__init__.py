"""Accept-rate probes: the in-process reference probe and live servers."""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "probe": "core",
    "ProbeResult": "core",
    "read_prompts": "core",
    "probe_server": "server",
    "ServerProbeResult": "server",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
