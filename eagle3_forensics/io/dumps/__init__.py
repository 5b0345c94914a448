"""Offline training data on disk: hidden-state dumps of every trainer, read one sample at a time.

``layouts`` describes each writer's layout as data; ``read`` finds the files, decides the layout
and normalises each sample; ``options`` says how a scan reads them (:class:`ScanOptions`); ``arrow_dataset`` reads (and, for the demo, writes) the Arrow IPC files of
speculators' datasets with pyarrow (the ``offline`` extra).
"""

from __future__ import annotations

from eagle3_forensics._lazy import lazy_exports

_EXPORTS = {
    "DumpLayout": "layouts",
    "LAYOUTS": "layouts",
    "FORMATS": "layouts",
    "DumpSet": "read",
    "Item": "read",
    "Sample": "read",
    "SampleError": "read",
    "open_dumps": "read",
    "ScanOptions": "options",
    "ArrowStream": "arrow_dataset",
    "ArrowError": "arrow_dataset",
    "write_stream": "arrow_dataset",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
