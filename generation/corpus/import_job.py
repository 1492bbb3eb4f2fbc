"""Job kind ``import_corpus``: one chunk that streams a file into corpus shards (progress: bytes read).

Params: ``corpora.ImportCorpusParams`` (``to_json`` of it): ``name``, ``path``, ``format``
(``bitext``/``mono``/None to detect), ``on_error`` (``skip``/``abort``), ``shard_size``, ``max_line_chars``,
``display_name`` (the file name shown in errors, e.g. an upload's original name), ``remove_file`` (delete the
file once imported: uploads), and the corpus's ``source``, ``license`` (SPDX id; none: NOASSERTION) and
``terms``. A job stored before a setting existed reads it as its default (``jobs.params.from_values``).
"""

from __future__ import annotations

import contextlib
import os

from jobs.models import Job, JobChunk
from jobs.params import from_values
from jobs.registry import JobKind, ProgressFn, register

from ..models import Corpus, CorpusStatus
from .corpora import ImportCorpusParams, corpus_discard, corpus_import


def _plan(job: Job) -> list[dict]:
    return [{}]


def _run_chunk(job: Job, chunk: JobChunk, progress: ProgressFn) -> dict:
    params = from_values(ImportCorpusParams, job.params)
    # A chunk that runs again (a redelivered message after a worker died) starts over: what its first
    # attempt left half-written is discarded, never kept.
    for stale in Corpus.objects.filter(name=params.name, import_job=job).exclude(status=CorpusStatus.READY):
        corpus_discard(stale)
    done = Corpus.objects.filter(name=params.name, import_job=job, status=CorpusStatus.READY).first()
    if done is not None:
        corpus, summary = done, {}
    else:
        corpus = corpus_import(params, progress=progress, job=job)
        summary = dict(corpus.import_report.reasons)
    return {
        "corpus": corpus.pk,
        "name": corpus.name,
        "format": corpus.format,
        "references": corpus.n_references,
        "lines_read": corpus.n_lines_read,
        "bad_lines": corpus.n_bad_lines,
        "shards": corpus.shards.count(),
        "bad_line_reasons": summary,
    }


def _finish(job: Job, chunks: list[JobChunk]) -> dict:
    params = from_values(ImportCorpusParams, job.params)
    if params.remove_file:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(params.path)
    return dict(chunks[0].result)


register(JobKind(name="import_corpus", plan=_plan, run_chunk=_run_chunk, finish=_finish, unit="bytes"))
