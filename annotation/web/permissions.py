"""Who may do what with campaigns, batches and workers: one tuple per action, read by the admin's actions and
pages (``annotation.admin``) and the batch API (``annotation.web.api``) alike. Each platform operation has its own
permission (``Batch.Meta.permissions``): publishing spends money, approving pays, expiring stops work; seeing a
batch (``view_batch``) does none of them. The whole table: docs/reference/permissions.md."""

from __future__ import annotations

CREATE_BATCH_PERMS = ("annotation.view_campaign", "annotation.add_batch")
BATCH_OPERATION_PERMS = {
    operation: ("annotation.view_batch", f"annotation.{operation}_batch")
    for operation in ("publish", "sync", "approve", "expire")
}
WORKER_MANAGE_PERMS = ("annotation.view_worker", "annotation.change_worker")  # disqualify, reinstate
