"""``import_corpus NAME FILE [--format bitext|mono] [--on-error skip|abort] [--shard-size N] [--max-line-chars N]
[--source TEXT] [--license SPDX-ID] [--terms TEXT]``"""

import json
from dataclasses import replace
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from generation.corpus.corpora import CorpusImportError, ImportCorpusParams, check_corpus_file, detect_format
from generation.models import Corpus
from jobs.execution import job_launch
from jobs.params import ParamsError, add_arguments, from_values, to_json


class Command(BaseCommand):
    help = (
        "Import a corpus from a file (plain or .gz): a bitext (source<TAB>reference a line) or English "
        "sentences one a line. Prints a JSON summary; bad lines go to stderr as FILE:LINE: reason."
    )

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("file")
        add_arguments(
            parser,
            ImportCorpusParams,
            shard_size=f"references per shard (default PARAFORGE_SHARD_SIZE={settings.PARAFORGE_SHARD_SIZE})",
            max_line_chars="longer lines are bad "
            f"(default PARAFORGE_MAX_LINE_CHARS={settings.PARAFORGE_MAX_LINE_CHARS})",
        )

    def handle(self, *args, name, file, **options):
        try:
            params = from_values(
                ImportCorpusParams, options, name=name, path=str(Path(file).resolve()), display_name=str(file)
            )
        except ParamsError as exc:
            raise CommandError(exc.option_message) from None
        try:
            check_corpus_file(file)
            fmt = params.format or detect_format(file, max_line_chars=params.max_line_chars)
        except CorpusImportError as exc:
            raise CommandError(str(exc)) from None
        if Corpus.objects.filter(name=name).exists():
            raise CommandError(f"a corpus named {name!r} already exists")
        terms = params.terms
        job = job_launch(
            kind="import_corpus", label=f"import {name}", wait=True, params=to_json(replace(params, format=fmt))
        )
        corpus = Corpus.objects.filter(name=name, import_job=job).first()
        if corpus is not None:
            for error in corpus.bad_lines:
                self.stderr.write(f"{error['file']}:{error['line']}: {error['reason']}")
            if corpus.n_bad_lines > len(corpus.bad_lines):
                self.stderr.write(f"... and {corpus.n_bad_lines - len(corpus.bad_lines)} more bad line(s)")
            if corpus.n_bad_lines:
                reasons = ", ".join(
                    f"{n} {reason}" for reason, n in sorted((job.result or {}).get("bad_line_reasons", {}).items())
                )
                self.stderr.write(
                    f"{file}: skipped {corpus.n_bad_lines} bad line(s) of {corpus.n_lines_read}"
                    + (f" ({reasons})" if reasons else "")
                )
        if job.status != "succeeded":
            message = job.error.split(": ", 1)[-1] if job.error.startswith("chunk ") else job.error
            if message.startswith("CorpusImportError: "):
                message = message[len("CorpusImportError: ") :]
            raise CommandError(f"import failed (job {job.pk}): {message}")
        result = job.result
        self.stdout.write(
            json.dumps(
                {
                    "corpus": result["corpus"],
                    "name": result["name"],
                    "format": result["format"],
                    "references": result["references"],
                    "source": terms.source,
                    "license": terms.license,
                    "bad_lines": result["bad_lines"],
                    "shards": result["shards"],
                    "lines_read": result["lines_read"],
                    "bad_line_reasons": result.get("bad_line_reasons", {}),
                    "job": job.pk,
                }
            )
        )
