"""Start-up of a Celery worker that selects constraints for millions of references (hooked up in
config/celery.py; bench/constraints.py does the same before timing, so that it measures a worker).

- :func:`load_tables_before_fork` (``worker_init``, in the main process): load what constraint selection
  reads for every reference (lemminflect's tables, the lex-all and verb inflection indexes, about 0.6 s
  idle and several seconds on a busy host) once, before the pool forks: every child shares them, and
  none spends its start-up on them (Celery kills a child that takes more than 4 s to come up).
- :func:`tune_garbage_collector` (``worker_process_init``, in each child):
  ``gc.freeze()`` takes everything loaded so far (those tables' ~200,000 containers, Django, spaCy if
  loaded) out of the collector's scans, which otherwise make each full collection take ~0.2 s; and the
  young-generation threshold goes from 700 to 20,000 allocations, since selection allocates ~100
  short-lived containers per reference, freed by reference counting, and the default ran the collector
  every few references for nothing (measured: 3-4% of selection time).
"""

from __future__ import annotations

import gc

YOUNG_GC_THRESHOLD = 20_000  # allocations between young-generation collections (CPython's default: 700)


def load_tables_before_fork() -> None:
    """Load the constraint selection tables (a no-op once loaded)."""
    from generation.constraints import load_selection_tables

    load_selection_tables()


def tune_garbage_collector() -> None:
    """Freeze what is loaded now out of the collector's view and raise its young threshold."""
    gc.collect()
    gc.freeze()
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_GC_THRESHOLD), older, oldest)
