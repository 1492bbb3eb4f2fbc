"""Chunked background jobs: one Job, many JobChunks, each chunk one Celery task.

Shared by corpus import, IDF, generation and scoring. Chunks record their own state so a job can be
resumed after a worker dies (only unfinished chunks run again) and a redelivered message does nothing.
"""

from django.db import models


class JobStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_STATUSES = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED}


class Job(models.Model):
    kind = models.CharField(max_length=64, db_index=True)
    label = models.CharField(max_length=255, blank=True)
    params = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.PENDING, db_index=True)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    total_chunks = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        # the admin's job actions, each behind its own permission (view_job only shows jobs);
        # docs/reference/permissions.md lists who may do what
        permissions = [("cancel_job", "Can cancel jobs"), ("resume_job", "Can resume jobs")]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class JobChunk(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    params = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.PENDING, db_index=True)
    done_units = models.PositiveBigIntegerField(default=0)
    total_units = models.PositiveBigIntegerField(default=0)
    stage = models.CharField(
        max_length=200,
        blank=True,
        help_text='what a running chunk is doing now, in words ("cross-validation fold 2 of 5"); its kind reports '
        "it with its progress",
    )
    attempts = models.PositiveIntegerField(default=0)
    ran_on = models.CharField(max_length=255, blank=True, help_text="host:pid of the process that last ran it")
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="a running chunk's worker renews this while it works; past it, the worker is taken for lost and "
        "the chunk is queued again (jobs.execution.chunks_requeue_lost)",
    )

    class Meta:
        ordering = ["job_id", "index"]
        constraints = [models.UniqueConstraint(fields=["job", "index"], name="unique_chunk_index_per_job")]

    def __str__(self) -> str:
        return f"chunk {self.index} of job {self.job_id} ({self.status})"


class WorkerHeartbeat(models.Model):
    """A Celery worker's sign of life: a thread of the worker process writes ``seen_at`` every
    ``JOBS_HEARTBEAT_S`` (``jobs.heartbeat``), busy or not, so that a command waiting for a job can tell a busy
    worker (a solo pool does not answer pings while it runs a chunk) from none at all."""

    node = models.CharField(max_length=255, unique=True, help_text="the worker's node name, name@host")
    queues = models.CharField(max_length=255, blank=True, help_text="the queues it takes, comma-separated")
    pid = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"worker {self.node}"
