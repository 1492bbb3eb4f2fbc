"""One row per limited key: the hits counted in its current window, and when that window ends.

Every web process shares the database, so a limit counted here holds across gunicorn workers and
machines; ``limits.counters.hit`` counts a hit with one atomic upsert."""

from django.db import models


class Counter(models.Model):
    key = models.CharField(max_length=255, unique=True)  # what is limited, e.g. "login:203.0.113.7/60"
    resets_at_ms = models.BigIntegerField()  # Unix time (ms) at which this window ends and n starts again at 0
    n = models.PositiveIntegerField(default=0)  # hits in the window so far

    class Meta:
        indexes = [models.Index(fields=["resets_at_ms"], name="limits_counter_resets_at")]

    def __str__(self) -> str:
        return f"{self.key}: {self.n} until {self.resets_at_ms} ms"
