"""Job kind ``select_constraints``: the constraint sets of chosen systems for every reference of a corpus.

Params: :class:`SelectConstraintsParams`: ``corpus`` (id), ``idf_table`` (id; default the corpus's latest),
``systems`` (numbers; default all 37, or 1-34 without ``ppdb``), then :class:`ConstraintOptions`, which the
``constraints`` command takes too: ``seed`` (default 0), ``ppdb`` (path of a PPDB 2.0 file, needed for
35-37), optional ``min_idf`` / ``max_idf``; and ``batch_size`` (spaCy ``nlp.pipe``, default 256). The plan
records the resolved ``idf_table``, ``systems`` and ``seed`` in the job's params.

One chunk per corpus shard. A chunk tags its references with spaCy (batched) and writes
``constraints/<job id>/shard-XXXXX.jsonl.gz``: one record per (reference, system), in reference then
system order, either ``{"i", "system", "positive", "negative", "bos_avoid"}`` or
``{"i", "system", "no_constraint_set": reason}``. The file is written atomically and keyed by
(job, shard), so a chunk that runs twice writes it once. ``finish`` sums per-system counts.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from api.numbers import MAX_INT
from infra.shards import batched, read_jsonl_gz, write_jsonl_gz
from jobs.models import Job, JobChunk
from jobs.params import ParamsError, check_bounds, finite, from_values, int_at_least, param
from jobs.registry import JobKind, ProgressFn, register

from ..models import Corpus, IdfTable
from .idf import IdfValues, idf_table_load
from .sets import (
    checked_idf_window,
    load_selection_tables,
    resolve_systems,
    select_for_all_systems,
    tag_sentences,
)
from .systems import PPDB_SYSTEMS, SYSTEMS, get_system

KIND = "select_constraints"

_IDF_CACHE: dict[tuple, IdfValues] = {}
_IDF_LOCK = threading.Lock()


def load_idf_table(table: IdfTable) -> IdfValues:
    """The IDF values of a stored table (read once per process and cached; keyed by its creation time too,
    so a reused id -- a test database rolled back, a table rebuilt under the same key -- is read afresh)."""
    key = (table.pk, table.key, table.created_at)
    with _IDF_LOCK:
        cached = _IDF_CACHE.get(key)
    if cached is not None:
        return cached
    if not table.key:
        raise ValueError(f"IDF table {table} has no stored TSV yet")
    values = idf_table_load(table)
    with _IDF_LOCK:
        if len(_IDF_CACHE) > 8:
            _IDF_CACHE.clear()
        _IDF_CACHE[key] = values
    return values


def output_key(job_id: int, shard_index: int) -> str:
    return f"constraints/{job_id}/shard-{shard_index:05d}.jsonl.gz"


@dataclass(frozen=True)
class ConstraintOptions:
    """How a system selects a sentence's constraints, whoever gives the sentences: the ``constraints`` command
    (one) and the ``select_constraints`` job (a corpus's). Checked when made: a whole seed, finite IDF bounds
    with the lower not above the upper (None: the settings' PARAFORGE_MIN_IDF / PARAFORGE_MAX_IDF)."""

    # (a seed below 0 has always been taken: stored jobs keep reading; IDF is log(N/df), at most ~30 for any corpus)
    seed: int = field(default=0, metadata=param(help="seed of the random systems", minimum=-MAX_INT, maximum=MAX_INT))
    ppdb: str | None = field(
        default=None, metadata=param(help="PPDB 2.0 lexical file (gzip or plain), for systems 35-37", stored="if_set")
    )
    min_idf: float | None = field(
        default=None,
        metadata=param(
            help="pool's lower IDF bound (default PARAFORGE_MIN_IDF)", stored="if_set", minimum=0, maximum=1000
        ),
    )
    max_idf: float | None = field(
        default=None,
        metadata=param(
            help="pool's upper IDF bound (default PARAFORGE_MAX_IDF)", stored="if_set", minimum=0, maximum=1000
        ),
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "seed", int_at_least("seed", self.seed, -MAX_INT))
        for name in ("min_idf", "max_idf"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, finite(name, getattr(self, name)))
        check_bounds(self)
        self.idf_window()

    def idf_window(self) -> tuple[float, float]:
        """The pool's IDF bounds, the settings' for None (``min-idf (8) > max-idf (7)``: a ParamsError)."""
        try:
            return checked_idf_window(self.min_idf, self.max_idf)
        except ValueError as exc:
            raise ParamsError(str(exc)) from None


@dataclass(frozen=True)
class SelectConstraintsParams:
    """The settings of a ``select_constraints`` job. Checked when made: known system numbers, and a PPDB file
    for the PPDB systems (35-37)."""

    corpus: int = field(metadata=param(help="the corpus (id)", cli=False, minimum=1, maximum=MAX_INT))
    idf_table: int | None = field(
        default=None,
        metadata=param(help="the IDF table (id); default: the corpus's latest", cli=False, minimum=1, maximum=MAX_INT),
    )
    systems: tuple[int, ...] | None = field(
        default=None,
        metadata=param(
            help="system numbers; default: all 37, or 1-34 without ppdb", cli=False, form=False, minimum=1, maximum=37
        ),
    )
    options: ConstraintOptions = field(default=ConstraintOptions(), metadata=param(flatten=True))
    batch_size: int = field(
        default=256,
        metadata=param(
            help="sentences per spaCy batch (nlp.pipe)", cli=False, stored="non_default", minimum=1, maximum=100_000
        ),
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "corpus", int_at_least("corpus", self.corpus, 1))
        object.__setattr__(self, "batch_size", int_at_least("batch_size", self.batch_size, 1))
        if self.systems:  # UnknownSystem for a number that is not one
            object.__setattr__(self, "systems", tuple(get_system(n).number for n in self.systems))
        if not self.options.ppdb and any(n in PPDB_SYSTEMS for n in self.systems or ()):
            raise ParamsError("PPDB systems 35-37 need a 'ppdb' file path in the job params")
        check_bounds(self)

    def system_numbers(self) -> list[int]:
        """The systems' numbers: those given, else all 37 (1-34 without a PPDB file)."""
        if self.systems:
            return list(self.systems)
        return [s.number for s in SYSTEMS if self.options.ppdb or s.number not in PPDB_SYSTEMS]


def _plan(job: Job) -> list[dict[str, Any]]:
    params = from_values(SelectConstraintsParams, job.params)
    corpus = Corpus.objects.get(pk=params.corpus)
    if params.idf_table:
        table = IdfTable.objects.get(pk=params.idf_table)
    else:
        table = corpus.idf_tables.order_by("-created_at", "-pk").first()
        if table is None:
            raise ValueError(f"corpus {corpus} has no IDF table")
    # Record the resolved choices so that every chunk (and a resumed job) uses the same ones.
    resolved = {"idf_table": table.pk, "systems": params.system_numbers(), "seed": params.options.seed}
    job.params = {**job.params, **resolved}
    job.save(update_fields=["params"])
    return [{"shard": s.index, "key": s.key, "n_records": s.n_records} for s in corpus.shards.order_by("index")]


def _run_chunk(job: Job, chunk: JobChunk, progress: ProgressFn) -> dict[str, Any]:
    params = from_values(SelectConstraintsParams, job.params)
    options = params.options
    idf = load_idf_table(IdfTable.objects.get(pk=params.idf_table))
    systems = resolve_systems(params.system_numbers())
    ppdb = None
    if options.ppdb:
        from .ppdb import open_ppdb

        ppdb = open_ppdb(options.ppdb)
    seed = options.seed
    min_idf, max_idf = options.idf_window()
    batch_size = params.batch_size
    from ..nlp import load_pipeline

    nlp = load_pipeline(tagger=True)
    load_selection_tables()
    total = int(chunk.params.get("n_records") or 0)
    counts = {str(s.number): {"sets": 0, "none": 0} for s in systems}
    done = [0]

    def records():
        progress(0, total)
        for batch in batched(read_jsonl_gz(chunk.params["key"]), batch_size):
            tagged = tag_sentences([r["reference"] for r in batch], nlp=nlp, batch_size=batch_size)
            for record, sentence in zip(batch, tagged):
                for result in select_for_all_systems(
                    sentence, idf, seed=seed, ppdb=ppdb, systems=systems, min_idf=min_idf, max_idf=max_idf
                ):
                    out = result.to_json()
                    out.pop("name")
                    out["i"] = record["i"]
                    if "no_constraint_set" in out:
                        del out["positive"], out["negative"], out["bos_avoid"]
                        counts[str(result.system)]["none"] += 1
                    else:
                        counts[str(result.system)]["sets"] += 1
                    yield out
            done[0] += len(batch)
            progress(done[0], max(total, done[0]))

    written = write_jsonl_gz(output_key(job.pk, chunk.params["shard"]), records())
    return {
        "key": written["key"],
        "sha256": written["sha256"],
        "records": written["records"],
        "references": done[0],
        "per_system": counts,
    }


def _finish(job: Job, chunks: list[JobChunk]) -> dict[str, Any]:
    per_system: dict[str, dict[str, int]] = {}
    for c in chunks:
        for system, n in c.result["per_system"].items():
            row = per_system.setdefault(system, {"sets": 0, "none": 0})
            row["sets"] += n["sets"]
            row["none"] += n["none"]
    return {
        "references": sum(c.result["references"] for c in chunks),
        "records": sum(c.result["records"] for c in chunks),
        "shards": [c.result["key"] for c in chunks],
        "per_system": dict(sorted(per_system.items(), key=lambda kv: int(kv[0]))),
    }


register(JobKind(name=KIND, plan=_plan, run_chunk=_run_chunk, finish=_finish, unit="references"))
