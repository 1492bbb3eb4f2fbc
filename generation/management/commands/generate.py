"""``manage.py generate``: start a generation job (``gpu`` queue) and print ``{"job": <id>, ...}``.

    python manage.py generate CORPUS --model DIR|ORG/NAME --systems 17,21,28,31,34 [--sample-per-length N]
        [--lengths 5,10,20,40] [--beam K] [--wait] [--nbest N] [--stop auto|beam|nbest]
        [--name NAME] [--device cpu|cuda] [--dtype float32|float16|bfloat16] [--seed S]
        [--ppdb FILE] [--batch-size B] [--max-length L] [--length-penalty LP] [--keep-facts] [--idf TABLE]
        [--sample-chunk-size R] [--pause-per-batch SECONDS]
        [--prompt-template paraphrase-chat|paraphrase-plain|FILE]
    python manage.py generate CORPUS --model DIR|ORG/NAME --diverse [--negative-sets 5] [--samples 30]
        [--top-k 10] [--temperature 1] [--ban-fraction X] [--ban-spread 0] [--ban-function-words] [--allow-non-words]
        [--discourage PENALTY] [--clusters 8] [--keep 5] [--max-nll 3.5] [--backward-model M2] [--seed S]
        [--sample-per-length N] [--lengths ...] [--max-length L] [--batch-size INPUTS] [--keep-facts] [--device ...]
        [--wait] ...

The options are ``generation.generation_job.params.GenerateParams``' fields (the decoding ones
``generation.decode_options.DecodeOptions``', the rules ``paraphrase`` follows), ``--idf`` (a table's name or
id) aside. Every setting is checked before anything is created (``generate_params_checked``); a bad one is a
one-line error and a non-zero exit. ``--batch-size`` left out: each chunk takes the device's batch (32 on the CPU,
from the free memory on a GPU) and its result says which. With ``--wait`` it blocks until the job ends and
exits non-zero if it failed.

``--diverse`` decodes with ParaBank 2's diverse mode (``generation.decoding.diverse``, the options of
``paraphrase --diverse``): each reference's kept outputs become systems ``r1`` .. ``r<keep>`` by rank. It takes
no ``--systems`` (nor ``--idf``, ``--ppdb``, ``--prompt-template``, or beam search's ``--beam``, ``--nbest``,
``--stop``, ``--length-penalty``): giving one is an error, as is a diverse option without ``--diverse``.
``--seed``, ``--max-length`` and ``--batch-size`` (inputs per batch there) are the job's one value each.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from generation.constraints.idf import IdfFileError, idf_table_get
from generation.corpus.corpora import corpus_get
from generation.generation_job import KIND
from generation.generation_job.params import GenerateParams, generation_params
from generation.models import Resource
from jobs.execution import job_launch
from jobs.params import add_arguments, field_names, from_values
from jobs.progress import job_progress_display

# DecodeOptions' knobs of a single process (paraphrase's), not a job's
NOT_OFFERED = ("int8", "rerank_dissimilar")
DEVICE_HELP = "default: CUDA where the worker has it, else CPU"


def _one_line(message: object) -> str:
    return " ".join(str(message).split())


def _int_list(value: str, what: str) -> list[str]:
    items = [x.strip() for x in value.split(",") if x.strip()]
    if not items:
        raise CommandError(f"{what}: give a comma-separated list, e.g. 17,21,28")
    return items


class Command(BaseCommand):
    help = (
        "Decode a corpus (or, with --sample-per-length, its evaluation sample) under ParaBank constraint "
        "systems (or, with --diverse, ParaBank 2's diverse mode) into a paraphrase resource, as a chunked job "
        "on the gpu queue."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("corpus", help="corpus name or id")
        names = field_names(GenerateParams)
        before, after = names[: names.index("idf_table")], names[names.index("idf_table") + 1 :]
        add_arguments(parser, GenerateParams, only=before, exclude=NOT_OFFERED, device=DEVICE_HELP)
        parser.add_argument("--idf", default=None, help="IDF table name or id (default: the corpus's latest)")
        add_arguments(parser, GenerateParams, only=after)
        parser.add_argument("--wait", action="store_true", help="block until the job ends; non-zero exit on failure")

    def handle(self, *args, **o) -> None:
        corpus = corpus_get(o["corpus"])
        if corpus is None:
            raise CommandError(f"no corpus named or numbered {o['corpus']!r}")
        table = None
        if o["idf"]:
            try:
                table = idf_table_get(o["idf"])
            except IdfFileError as exc:
                raise CommandError(_one_line(exc)) from None
        if o["lengths"] is not None and o["sample_per_length"] is None:
            self.stderr.write(
                "note: --lengths only sets the evaluation sample's buckets; without "
                "--sample-per-length the whole corpus is decoded"
            )
        values = {**o, "idf_table": table.pk if table else None}
        if o["systems"] is not None:
            values["systems"] = _int_list(o["systems"], "--systems")
        if o["lengths"] is not None:
            values["lengths"] = _int_list(o["lengths"], "--lengths")
        try:
            params = generation_params(from_values(GenerateParams, values, corpus=corpus.pk))
            with job_progress_display(self.stderr, enabled=o["wait"]) as show:
                job = job_launch(
                    kind=KIND, params=params, label=f"generate {corpus.name}", wait=o["wait"], on_progress=show
                )
        except ValueError as exc:  # (GenerationSettingsError, DecodeOptionsError: the settings' own words)
            raise CommandError(_one_line(exc)) from None
        resource = Resource.objects.filter(job=job).first()
        out = {
            "job": job.pk,
            "status": job.status,
            "corpus": corpus.pk,
            "resource": resource.pk if resource else None,
            "name": resource.name if resource else None,
            "campaign": job.result.get("campaign"),
            "chunks": job.total_chunks,
            "references": job.result.get("references"),
            "pairs": job.result.get("pairs"),
        }
        if "sample" in job.params:
            out["sample"] = job.params["sample"]
        self.stdout.write(json.dumps(out))
        if o["wait"] and job.status != "succeeded":
            raise CommandError(_one_line(f"generation job {job.pk} ended {job.status}: {job.error}"))
