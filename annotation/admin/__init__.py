"""Read-only admin views of the evaluation data (editing goes through imports, batches and providers), one
module per concern: ``campaigns`` (a campaign's page and its batch form, ``batch_form``), ``batches`` (publish
after a cost preview, sync, approve, export a batch's results CSV, expire), ``workers`` (quality figures;
disqualify or reinstate) and ``records`` (references, candidates, HITs, assignments, judgments). Importing
this package registers them all (Django's admin autodiscovery imports ``annotation.admin``).
"""

from . import batches, campaigns, records, workers
from .base import ReadOnlyAdmin, ReadOnlyInline
from .batch_form import BatchForm, BatchParamsForm

__all__ = [
    "BatchForm",
    "BatchParamsForm",
    "ReadOnlyAdmin",
    "ReadOnlyInline",
    "batches",
    "campaigns",
    "records",
    "workers",
]
