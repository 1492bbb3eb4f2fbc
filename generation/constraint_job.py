"""Job kind ``select_constraints``: the constraint sets of chosen systems for every reference of a corpus.

Params: ``corpus`` (id), ``idf_table`` (id; default the corpus's latest), ``systems`` (numbers; default
all 37, or 1-34 without ``ppdb``), ``seed`` (default 0), ``ppdb`` (path of a PPDB 2.0 file, needed for
35-37), optional ``min_idf`` / ``max_idf`` and ``batch_size`` (spaCy ``nlp.pipe``, default 256).

One chunk per corpus shard. A chunk tags its references with spaCy (batched) and writes
``constraints/<job id>/shard-XXXXX.jsonl.gz``: one record per (reference, system), in reference then
system order, either ``{"i", "system", "positive", "negative", "bos_avoid"}`` or
``{"i", "system", "no_constraint_set": reason}``. The file is written atomically and keyed by
(job, shard), so a chunk that runs twice writes it once. ``finish`` sums per-system counts.
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings

from infra.shards import batched, read_jsonl_gz, write_jsonl_gz
from jobs.models import Job, JobChunk
from jobs.registry import JobKind, ProgressFn, register

from .constraints import load_selection_tables, resolve_systems, select_for_all_systems, tag_sentences
from .idf import IdfValues, idf_table_load
from .models import Corpus, IdfTable
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


def _systems(params: dict[str, Any]) -> list[int]:
    numbers = params.get("systems")
    if not numbers:
        numbers = [s.number for s in SYSTEMS if params.get("ppdb") or s.number not in PPDB_SYSTEMS]
    numbers = [get_system(n).number for n in numbers]
    if not params.get("ppdb") and any(n in PPDB_SYSTEMS for n in numbers):
        raise ValueError("PPDB systems 35-37 need a 'ppdb' file path in the job params")
    return numbers


def _plan(job: Job) -> list[dict[str, Any]]:
    params = job.params
    corpus = Corpus.objects.get(pk=params["corpus"])
    if params.get("idf_table"):
        table = IdfTable.objects.get(pk=params["idf_table"])
    else:
        table = corpus.idf_tables.order_by("-created_at", "-pk").first()
        if table is None:
            raise ValueError(f"corpus {corpus} has no IDF table")
    systems = _systems(params)
    # Record the resolved choices so that every chunk (and a resumed job) uses the same ones.
    job.params = {**params, "idf_table": table.pk, "systems": systems, "seed": int(params.get("seed", 0))}
    job.save(update_fields=["params"])
    return [{"shard": s.index, "key": s.key, "n_records": s.n_records} for s in corpus.shards.order_by("index")]


def _run_chunk(job: Job, chunk: JobChunk, progress: ProgressFn) -> dict[str, Any]:
    params = job.params
    idf = load_idf_table(IdfTable.objects.get(pk=params["idf_table"]))
    systems = resolve_systems(params["systems"])
    ppdb = None
    if params.get("ppdb"):
        from .ppdb import open_ppdb

        ppdb = open_ppdb(params["ppdb"])
    seed = int(params.get("seed", 0))
    min_idf = params.get("min_idf", settings.PARAFORGE_MIN_IDF)
    max_idf = params.get("max_idf", settings.PARAFORGE_MAX_IDF)
    batch_size = int(params.get("batch_size", 256))
    from .nlp import load_pipeline

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
