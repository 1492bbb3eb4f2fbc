"""``manage.py generate``: start a generation job (``gpu`` queue) and print ``{"job": <id>, ...}``.

    python manage.py generate CORPUS --model DIR|ORG/NAME --systems 17,21,28,31,34 [--sample-per-length N]
        [--lengths 5,10,20,40] [--beam K] [--wait] [--nbest N] [--stop auto|beam|nbest]
        [--name NAME] [--device cpu|cuda] [--dtype float32|float16|bfloat16] [--seed S]
        [--ppdb FILE] [--batch-size B] [--max-length L] [--length-penalty LP] [--idf TABLE]
        [--sample-chunk-size R] [--pause-per-batch SECONDS]
        [--prompt-template paraphrase-chat|paraphrase-plain|FILE]

Every setting is checked before anything is created (see generation/generation_job.py; the decoding ones as
one ``generation.decode_options.DecodeOptions``, the rules ``paraphrase`` follows); a bad one is a one-line
error and a non-zero exit. ``--batch-size`` left out: each chunk takes the device's batch (32 on the CPU,
from the free memory on a GPU) and its result says which. With ``--wait`` it blocks until the job ends and
exits non-zero if it failed.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from api.numbers import cli_float, cli_int
from generation.corpora import corpus_get
from generation.decode_options import add_arguments
from generation.generation_job import DEFAULT_LENGTHS, KIND, GenerationSettingsError, generation_params
from generation.idf import IdfFileError, idf_table_get
from generation.model_source import MODEL_HELP
from generation.models import Resource
from generation.prompts import PROMPT_TEMPLATE_HELP
from jobs.execution import job_launch
from jobs.progress import job_progress_display


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
        "systems into a paraphrase resource, as a chunked job on the gpu queue."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("corpus", help="corpus name or id")
        parser.add_argument("--model", required=True, help=MODEL_HELP)
        parser.add_argument("--prompt-template", help=PROMPT_TEMPLATE_HELP)
        parser.add_argument("--systems", required=True, help="comma-separated system numbers (1-37, Tab. 3)")
        parser.add_argument(
            "--sample-per-length",
            type=cli_int,
            default=None,
            help="decode only this many references per length bucket (the evaluation sample)",
        )
        parser.add_argument(
            "--lengths",
            default=None,
            help="length buckets of the sample (spaCy tokens; default 5,10,20,40); used with --sample-per-length",
        )
        add_arguments(parser, device_help="default: CUDA where the worker has it, else CPU")
        parser.add_argument("--seed", type=cli_int, default=0)
        parser.add_argument("--ppdb", default=None, help="PPDB 2.0 lexical file (systems 35-37)")
        parser.add_argument("--idf", default=None, help="IDF table name or id (default: the corpus's latest)")
        parser.add_argument("--name", default=None, help="the resource's name (default: <corpus>-job<id>)")
        parser.add_argument("--sample-chunk-size", type=cli_int, default=50, help="sampled references per chunk")
        parser.add_argument(
            "--pause-per-batch",
            type=cli_float,
            default=0.0,
            help="seconds to sleep after each decoded batch (throttles a shared GPU)",
        )
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
        lengths = _int_list(o["lengths"], "--lengths") if o["lengths"] is not None else list(DEFAULT_LENGTHS)
        try:
            params = generation_params(
                corpus=corpus,
                model=o["model"],
                systems=_int_list(o["systems"], "--systems"),
                idf_table=table,
                beam=o["beam"],
                nbest=o["nbest"],
                stop=o["stop"],
                max_length=o["max_length"],
                length_penalty=o["length_penalty"],
                batch_size=o["batch_size"],
                device=o["device"],
                dtype=o["dtype"],
                seed=o["seed"],
                ppdb=o["ppdb"],
                sample_per_length=o["sample_per_length"],
                lengths=lengths,
                name=o["name"],
                sample_chunk_size=o["sample_chunk_size"],
                pause_per_batch=o["pause_per_batch"],
                prompt_template=o["prompt_template"],
            )
            with job_progress_display(self.stderr, enabled=o["wait"]) as show:
                job = job_launch(
                    kind=KIND, params=params, label=f"generate {corpus.name}", wait=o["wait"], on_progress=show
                )
        except (GenerationSettingsError, ValueError) as exc:
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
