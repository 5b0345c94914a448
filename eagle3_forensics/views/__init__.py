"""Everything that renders: text, HTML, tables, plots, widgets, triage. Domain code returns data; views render it."""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "render_diagnosis": "text",
    "render_inspection": "text",
    "show_table": "html",
    "verdict_html": "html",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
