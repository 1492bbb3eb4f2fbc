"""Start-up of a Celery worker child that runs jobs for hours (hooked up in config/celery.py; bench/constraints.py
does the same before timing, so that it measures a worker).

What the apps load once, before the pool forks, they connect themselves to Celery's ``worker_init``
(generation/worker_start.py: constraint selection's tables); then in each child, :func:`tune_garbage_collector`
(``worker_process_init``): ``gc.freeze()`` takes everything loaded so far (those tables' ~200,000 containers,
Django, spaCy if loaded) out of the collector's scans, which otherwise make each full collection take ~0.2 s;
and the young-generation threshold goes from 700 to 20,000 allocations, since selection allocates ~100
short-lived containers per reference, freed by reference counting, and the default ran the collector every few
references for nothing (measured: 3-4% of selection time).
"""

from __future__ import annotations

import gc

YOUNG_GC_THRESHOLD = 20_000  # allocations between young-generation collections (CPython's default: 700)


def tune_garbage_collector() -> None:
    """Freeze what is loaded now out of the collector's view and raise its young threshold."""
    gc.collect()
    gc.freeze()
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_GC_THRESHOLD), older, oldest)
