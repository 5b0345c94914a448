"""Everything that renders: text, HTML, tables, plots, widgets, triage, and one module per result
(``probe``, ``server``, ``repair``). Domain code returns data; views render it."""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "render_diagnosis": "text",
    "render_inspection": "text",
    "render_probe": "probe",
    "render_server_probe": "server",
    "render_plan": "repair",
    "render_repair": "repair",
    "repair_table": "repair",
    "show_table": "html",
    "verdict_html": "html",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
