"""Job kind ``build_idf``: document frequencies per corpus shard (one chunk each), merged into an IdfTable.

Params: :class:`BuildIdfParams`: ``corpus`` (id), ``name`` (the table's name, stored only when given;
default: the corpus's name, or ``<corpus>-idf-<job>`` when that is taken). Each chunk writes
``idf/<job_id>/df-<chunk>.tsv.gz`` once: a chunk that runs again finds its file and does not count again.
The finishing step merges the files into ``idf/<idf_table_id>.tsv`` (``token<TAB>idf`` sorted by token) and
creates the IdfTable row.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from django.db import transaction

from api.numbers import MAX_INT
from infra.storage import get_storage
from jobs.models import Job, JobChunk
from jobs.params import check_bounds, fail, from_values, int_at_least, param
from jobs.registry import JobKind, ProgressFn, register

from ..corpus.corpora import corpus_records, delete_folder
from ..models import Corpus, CorpusShard, CorpusStatus, IdfTable
from ..nlp import load_pipeline, pipeline_signature
from .idf import IdfFileError, count_document_frequencies, idf_table_key, merge_df_files, read_df_header, write_df_file


@dataclass(frozen=True)
class BuildIdfParams:
    """The settings of a ``build_idf`` job (``build_idf CORPUS [--name NAME]``, the admin's action). Checked when
    made: a corpus id, and a name that is not blank when one is given (None: the corpus's own)."""

    corpus: int = field(metadata=param(help="the corpus (id)", cli=False, minimum=1, maximum=MAX_INT))
    name: str | None = field(
        default=None, metadata=param(help="the IDF table's name (default: the corpus's name)", stored="if_set")
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "corpus", int_at_least("corpus", self.corpus, 1))
        if self.name is not None and not str(self.name).strip():
            raise fail("{0} must not be blank (leave it out for the corpus's name)", "name")
        check_bounds(self)


def df_key(job_id: int, chunk_index: int) -> str:
    return f"idf/{job_id}/df-{chunk_index:05d}.tsv.gz"


def default_table_name(corpus: Corpus, job_id: int | None = None) -> str:
    if not IdfTable.objects.filter(name=corpus.name).exists():
        return corpus.name
    return f"{corpus.name}-idf-{job_id}" if job_id else f"{corpus.name}-idf"


def _plan(job: Job) -> list[dict]:
    corpus = Corpus.objects.get(pk=from_values(BuildIdfParams, job.params).corpus)
    if corpus.status != CorpusStatus.READY:
        raise ValueError(f"corpus {corpus.name!r} is {corpus.status}, not ready")
    return [{"shard": s.pk, "key": s.key, "n_records": s.n_records} for s in corpus.shards.order_by("index")]


def _run_chunk(job: Job, chunk: JobChunk, progress: ProgressFn) -> dict:
    storage = get_storage()
    key = df_key(job.pk, chunk.index)
    if storage.exists(key):  # written by an earlier run of this chunk: counted once, never twice
        return {"key": key, "documents": read_df_header(key, storage=storage), "reused": True}
    shard = CorpusShard.objects.select_related("corpus").get(pk=chunk.params["shard"])
    total = shard.n_records
    progress(0, total)
    texts = (r["reference"] for r in corpus_records(shard.corpus, shard=shard))
    n, df = count_document_frequencies(
        texts, nlp=load_pipeline(tagger=False), progress=lambda done: progress(done, total)
    )
    write_df_file(key, n, df, storage=storage)
    return {"key": key, "documents": n, "types": len(df)}


def _finish(job: Job, chunks: list[JobChunk]) -> dict:
    params = from_values(BuildIdfParams, job.params)
    corpus = Corpus.objects.get(pk=params.corpus)
    name = params.name or default_table_name(corpus, job.pk)
    if IdfTable.objects.filter(name=name).exists():
        raise IdfFileError(f"an IDF table named {name!r} already exists")
    n_documents = sum(c.result["documents"] for c in chunks)
    storage = get_storage()
    with transaction.atomic():  # a failure leaves no table row behind
        table = IdfTable.objects.create(
            corpus=corpus, name=name, job=job, n_documents=n_documents, tokenizer=pipeline_signature()
        )
        table.key = idf_table_key(table.pk)
        try:
            table.n_types = merge_df_files([c.result["key"] for c in chunks], table.key, n_documents, storage=storage)
        except BaseException:
            storage.delete(table.key)
            raise
        table.save(update_fields=["key", "n_types"])
    with contextlib.suppress(Exception):  # the per-shard counts are merged in; the table is the artifact
        delete_folder(storage, f"idf/{job.pk}")
    return {
        "idf_table": table.pk,
        "name": table.name,
        "corpus": corpus.pk,
        "documents": n_documents,
        "types": table.n_types,
    }


register(JobKind(name="build_idf", plan=_plan, run_chunk=_run_chunk, finish=_finish, unit="sentences"))
