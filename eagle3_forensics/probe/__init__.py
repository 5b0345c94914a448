"""Accept-rate probes: in process (``proposers``, ``decode``, ``teacher_forced``, ``core``) and against
live servers (``server/``). Rendering lives in :mod:`eagle3_forensics.views.probe` and ``views.server``."""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "probe": "core",
    "ProbeResult": "core",
    "read_prompts": "core",
    "compare_variants": "core",
    "TeacherForced": "teacher_forced",
    "AuxSweep": "teacher_forced",
    "CONVENTIONS": "teacher_forced",
    "probe_server": "server.core",
    "ServerProbeResult": "server.result",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
