"""``import_corpus NAME FILE [--format bitext|mono] [--on-error skip|abort] [--shard-size N] [--max-line-chars N]
[--source TEXT] [--license SPDX-ID] [--terms TEXT]``"""

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from api.numbers import cli_int
from generation.corpora import CorpusImportError, _Input, corpus_terms, detect_format
from generation.models import Corpus
from jobs.execution import job_launch


class Command(BaseCommand):
    help = (
        "Import a corpus from a file (plain or .gz): a bitext (source<TAB>reference a line) or English "
        "sentences one a line. Prints a JSON summary; bad lines go to stderr as FILE:LINE: reason."
    )

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("file")
        parser.add_argument(
            "--format",
            choices=["bitext", "mono"],
            default=None,
            help="default: bitext if the first non-empty line holds a tab, else mono",
        )
        parser.add_argument(
            "--on-error",
            choices=["skip", "abort"],
            default="skip",
            help="skip bad lines (reported) or abort, keeping nothing (default: skip)",
        )
        parser.add_argument(
            "--shard-size",
            type=cli_int,
            default=None,
            help=f"references per shard (default PARAFORGE_SHARD_SIZE={settings.PARAFORGE_SHARD_SIZE})",
        )
        parser.add_argument(
            "--max-line-chars",
            type=cli_int,
            default=None,
            help=f"longer lines are bad (default PARAFORGE_MAX_LINE_CHARS={settings.PARAFORGE_MAX_LINE_CHARS})",
        )
        parser.add_argument(
            "--source", default=None, help="where the sentences come from (a dataset's name, a URL, a citation)"
        )
        parser.add_argument(
            "--license",
            default=None,
            help="the sentences' licence as an SPDX id (CC-BY-4.0, CC-BY-SA-4.0, CC-BY-NC-4.0, ...; LicenseRef-NAME "
            "for terms of their own; default NOASSERTION: not stated); a release may not grant more than it allows",
        )
        parser.add_argument("--terms", default=None, help="the terms in words, for the release card")

    def handle(self, *args, name, file, format, on_error, shard_size, max_line_chars, **options):
        try:
            terms = corpus_terms(options.get("source"), options.get("license"), options.get("terms"))
        except CorpusImportError as exc:
            raise CommandError(str(exc)) from None
        if shard_size is not None and shard_size < 1:
            raise CommandError("--shard-size must be at least 1")
        if max_line_chars is not None and max_line_chars < 1:
            raise CommandError("--max-line-chars must be at least 1")
        try:
            with _Input(file):
                pass
            fmt = format or detect_format(file, max_line_chars=max_line_chars)
        except CorpusImportError as exc:
            raise CommandError(str(exc)) from None
        if Corpus.objects.filter(name=name).exists():
            raise CommandError(f"a corpus named {name!r} already exists")
        job = job_launch(
            kind="import_corpus",
            label=f"import {name}",
            wait=True,
            params={
                "name": name,
                "path": str(Path(file).resolve()),
                "format": fmt,
                "on_error": on_error,
                "shard_size": shard_size,
                "max_line_chars": max_line_chars,
                "display_name": str(file),
                **terms.as_params(),
            },
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
