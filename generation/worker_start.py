"""What a Celery worker of generation loads at its start, before the pool forks: the tables constraint selection
reads for every reference (lemminflect's tables, the lex-all and verb inflection indexes, about 0.6 s idle and
several seconds on a busy host). Loaded once in the main process, every child shares them, and none spends its
start-up on them (Celery kills a child that takes more than 4 s to come up).

Why here and not in config/celery.py: what to load is generation's to know, and config imports no domain app
(docs/explanation/architecture.md). ``GenerationConfig.ready`` imports this module, which connects the handler to
Celery's ``worker_init`` (sent in the worker's main process once Django is set up); config/process_tuning.py
tunes each child's garbage collector, whatever its apps loaded. bench/constraints.py calls the same function
before timing, so that it measures a worker.
"""

from __future__ import annotations

from celery.signals import worker_init

from .constraints.sets import load_selection_tables


@worker_init.connect
def load_tables_before_fork(**_: object) -> None:
    """Load the constraint selection tables (a no-op once loaded)."""
    load_selection_tables()
