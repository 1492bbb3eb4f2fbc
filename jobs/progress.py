"""A job's progress on stderr: what every ``--wait`` (and ``job wait`` / ``job run-here``) shows.

Read from the ``Job`` / ``JobChunk`` rows, where jobs keep their progress, so it is the same whether a
Celery worker runs the chunks (``job_wait`` polls the rows) or ``--wait`` runs them in this process (the
chunk's progress recorder calls back after each write). On a terminal it is a tqdm bar: percentage,
chunks and units done, the units' rate, time spent and time left. Anywhere else (a log file, a pipe, CI)
it is plain lines that a log keeps readable, no carriage returns::

    job 12 score_resource running: 1/3 chunks, 8/18 pairs (44%), 16 pairs/s, ~1s left

with the stage the running chunk names at the end (``..., nested cross-validation: fold 2 of 5``): one when a
chunk ends or the job's status or stage changes, one when the percentage has moved and ``PLAIN_EVERY_S`` have
passed, one every ``PLAIN_HEARTBEAT_S`` even when nothing moved, and a last
one when the job ends. stdout is left alone: the commands print their JSON there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import os
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from .execution import chunks_fraction, job_stage
from .models import TERMINAL_STATUSES, Job, JobChunk
from .registry import get_kind

logger = logging.getLogger(__name__)

PLAIN_EVERY_S = 10.0  # a line when the percentage moved and this long has passed since the last
PLAIN_HEARTBEAT_S = 300.0  # a line this often even when nothing moved (a log shows the wait is alive)
DEFAULT_SIZE = (100, 24)  # a terminal that does not tell its size (a bare pseudo-terminal says 0 x 0)


@dataclasses.dataclass(frozen=True)
class JobCounts:
    """Where a job stands, from its rows."""

    job: int
    kind: str
    status: str
    chunks: int
    chunks_done: int
    units_done: int
    units_total: int
    units_known: bool  # every chunk has reported its total (a chunk that has not started has none yet)
    fraction: float
    stage: str = ""  # what the running chunk says it is doing ("nested cross-validation: fold 2 of 5")

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


def job_counts(job_id: int) -> JobCounts:
    """Two queries: the job's row and its chunks' progress columns."""
    job = Job.objects.only("kind", "status").get(pk=job_id)
    chunks = list(JobChunk.objects.filter(job_id=job_id).values("status", "done_units", "total_units", "stage"))
    done = sum(1 for c in chunks if c["status"] == "succeeded")
    return JobCounts(
        job=job_id,
        kind=job.kind,
        status=job.status,
        chunks=len(chunks),
        chunks_done=done,
        units_done=sum(min(c["done_units"], c["total_units"] or c["done_units"]) for c in chunks),
        units_total=sum(c["total_units"] for c in chunks),
        units_known=bool(chunks) and all(c["total_units"] for c in chunks),
        fraction=chunks_fraction(job.status, chunks),
        stage=job_stage(job.status, chunks),
    )


def terminal_size(stream: TextIO) -> tuple[int, int]:
    """(columns, lines) of the stream's own terminal (stdout may be a pipe while stderr is the terminal).
    tqdm would take a size of 0 x 0 for "no room" and draw nothing, so a size that says nothing is ours."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return DEFAULT_SIZE
    return (size.columns if size.columns >= 40 else DEFAULT_SIZE[0], size.lines if size.lines >= 2 else DEFAULT_SIZE[1])


def unit_of(kind: str) -> str:
    try:
        return get_kind(kind).unit
    except LookupError:
        return "units"


def duration(seconds: float) -> str:
    """``45s``, ``2m10s``, ``3h05m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def counts_text(c: JobCounts) -> str:
    """``3/12 chunks, 4,500/18,000 pairs``: units as ``done/total`` once every chunk has reported its total."""
    unit = unit_of(c.kind)
    units = f"{c.units_done:,}/{c.units_total:,} {unit}" if c.units_known else f"{c.units_done:,} {unit} so far"
    return f"{c.chunks_done}/{c.chunks} chunks, {units}"


class JobProgressDisplay:
    """Call it with a job's id whenever the job may have moved; ``close()`` writes the last word.

    ``terminal`` (default: ``stream.isatty()``) chooses the tqdm bar or plain lines. Nothing it does
    may stop the job: a stream that fails to write turns the display off."""

    def __init__(
        self, stream: TextIO, *, terminal: bool | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stream = stream
        self.terminal = bool(stream.isatty()) if terminal is None else terminal
        self.clock = clock
        self.enabled = True
        self.job_id: int | None = None
        self._started = 0.0
        self._first: JobCounts | None = None
        self._printed: JobCounts | None = None
        self._printed_at = 0.0
        self._bar: Any = None

    # --- what is shown ----------------------------------------------------------------------------

    def _rate_and_left(self, c: JobCounts) -> tuple[float | None, float | None]:
        """Units per second and seconds left, from what moved since this display began (a resumed job's
        earlier work does not make it look fast)."""
        elapsed = self.clock() - self._started
        first = self._first or c
        if elapsed <= 0:
            return None, None
        rate = (c.units_done - first.units_done) / elapsed
        moved = c.fraction - first.fraction
        left = elapsed * (1.0 - c.fraction) / moved if moved > 0 and not c.is_terminal else None
        return (rate if rate > 0 else None), left

    def line(self, c: JobCounts) -> str:
        """One plain progress line."""
        text = f"job {c.job} {c.kind} {c.status}: {counts_text(c)} ({round(100 * c.fraction)}%)"
        if c.is_terminal:
            return f"{text} in {duration(self.clock() - self._started)}"
        rate, left = self._rate_and_left(c)
        if rate is not None:
            text += f", {rate:,.1f} {unit_of(c.kind)}/s"
        if left is not None:
            text += f", ~{duration(left)} left"
        if c.stage:
            text += f", {c.stage}"
        return text

    def _write(self, text: str) -> None:
        out = getattr(self.stream, "_out", self.stream)  # Django's OutputWrapper would end every write with \n
        out.write(text)
        out.flush()

    def _plain(self, c: JobCounts) -> None:
        now = self.clock()
        last = self._printed
        due = (
            last is None
            or c.status != last.status
            or c.chunks_done != last.chunks_done
            or c.stage != last.stage
            or (round(100 * c.fraction) != round(100 * last.fraction) and now - self._printed_at >= PLAIN_EVERY_S)
            or now - self._printed_at >= PLAIN_HEARTBEAT_S
        )
        if due:
            self._write(self.line(c) + "\n")
            self._printed, self._printed_at = c, now

    def _tqdm(self, c: JobCounts) -> None:
        from tqdm import tqdm

        if self._bar is None:
            out = getattr(self.stream, "_out", self.stream)
            ncols, nrows = terminal_size(out)
            self._bar = tqdm(
                total=max(c.chunks, 1),
                initial=c.fraction * max(c.chunks, 1),
                file=out,
                ncols=ncols,
                nrows=nrows,
                desc=f"job {c.job} {c.kind}",
                smoothing=0,
                mininterval=0,
                leave=True,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]",
            )
        rate, _ = self._rate_and_left(c)
        postfix = counts_text(c) + (f", {rate:,.1f} {unit_of(c.kind)}/s" if rate is not None else "")
        postfix += f", {c.stage}" if c.stage else ""
        self._bar.set_postfix_str(postfix, refresh=False)
        self._bar.update(c.fraction * max(c.chunks, 1) - self._bar.n)
        self._bar.refresh()
        self._printed = c

    # --- calls ------------------------------------------------------------------------------------

    def __call__(self, job_id: int) -> None:
        if not self.enabled:
            return
        try:
            if self.job_id != job_id:
                self.job_id, self._started, self._first, self._printed = job_id, self.clock(), None, None
            c = job_counts(job_id)
            if self._first is None:
                self._first = c
            if self.terminal:
                self._tqdm(c)
                if c.is_terminal:
                    self.close()
            else:
                self._plain(c)
        except (OSError, ValueError) as exc:  # stderr closed or broken: the job goes on without a display
            logger.warning("progress display off: %s", exc)
            self.enabled = False

    def close(self) -> None:
        """The last state of the job: the bar completed (or left where it stopped) and a plain last line."""
        if not self.enabled or self.job_id is None:
            return
        try:
            c = job_counts(self.job_id)
            if self.terminal:
                if self._bar is not None:
                    self._tqdm(c)
                    self._bar.close()
                    self._bar = None
                self._write(self.line(c) + "\n")
                self.enabled = False
            elif self._printed is None or self._printed != c or not c.is_terminal:
                self._write(self.line(c) + "\n")
                self._printed = c
        except (OSError, ValueError) as exc:
            logger.warning("progress display off: %s", exc)
            self.enabled = False


@contextlib.contextmanager
def job_progress_display(
    stream: TextIO, *, enabled: bool = True, terminal: bool | None = None
) -> Iterator[JobProgressDisplay | None]:
    """``with job_progress_display(self.stderr, enabled=wait) as show: job_launch(..., on_progress=show)``:
    the one way a command shows a job it waits for; None when ``enabled`` is false."""
    if not enabled:
        yield None
        return
    display = JobProgressDisplay(stream, terminal=terminal)
    try:
        yield display
    finally:
        display.close()
