"""``export_release RESOURCE [--out DIR] [--license SPDX-ID] [--min-score X] [--format tsv|jsonl|parquet]
[--filters ...] [--keep-copies] [--keep-non-words] [--entailment-model DIR] [--regressor NAME] [--version V]
[--upload s3://bucket/prefix]``"""

import json

from django.core.management.base import BaseCommand, CommandError

from api.numbers import cli_float
from scoring.held_out import held_out_rho
from scoring.release_card import LICENSE_HELP, NO_LICENSE
from scoring.release_filters import FilterError, parse_filters
from scoring.releases import (
    FORMATS,
    ReleaseError,
    card_license,
    default_release_dir,
    next_version,
    release_export,
    release_version_check,
)

from .score_resource import find_resource


class Command(BaseCommand):
    help = (
        "Export a versioned, gzip-compressed release of a scored resource: pairs (per reference: "
        "paraphrases, systems, constraints, model score, predicted similarity; paraphrases identical to "
        "their reference left out unless --keep-copies, and those with a non-word unless --keep-non-words, "
        "as a HIT batch leaves them out), the human judgments, a README.md card (licence, "
        "held-out rho with n and interval, calibration table, limitations, provenance) and manifest.json "
        "(counts, SHA-256 of each file, regressor, generation settings, filters). Same inputs -> "
        "byte-identical files."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version names the release here, replacing Django's "print Django's version" option
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("resource", help="resource name or id")
        parser.add_argument(
            "--out",
            default=None,
            help="folder to write the release into (must not hold one; default var/releases/RESOURCE/VERSION)",
        )
        parser.add_argument(
            "--min-score",
            type=cli_float,
            default=None,
            dest="min_score",
            help="keep only pairs with a predicted similarity >= X (0-100)",
        )
        parser.add_argument(
            "--format",
            choices=FORMATS,
            default="tsv",
            help="pairs file format (default tsv); parquet writes typed pairs.parquet and "
            "judgments.parquet and a README.md dataset card for the Hugging Face hub",
        )
        parser.add_argument(
            "--filters",
            nargs="+",
            default=None,
            help="key=value items, comma- or space-separated: len=LO-HI (reference tokens), "
            "plen=LO-HI (paraphrase words), overlap[1-3]=LO-HI (n-gram overlap fraction), "
            "bleu=LO-HI (smoothed sentence BLEU 0-100), repetition[1|3]=LO-HI (repetition rate "
            "fraction), entailment=argmax|P (both directions; needs --entailment-model), "
            "score=X, rerank=dissimilar|score, top=K, copies=keep|drop; e.g. "
            "len=5-40,overlap=0.2-0.8,rerank=dissimilar",
        )
        parser.add_argument(
            "--entailment-model",
            default=None,
            dest="entailment_model",
            help="local Hugging Face NLI sequence-classification folder for entailment=...",
        )
        parser.add_argument(
            "--regressor", default=None, help="which scoring to release (default: the latest completed one)"
        )
        parser.add_argument("--version", default=None, help="release version (default: v1, v2, ...)")
        parser.add_argument("--upload", default=None, help="also copy the files to s3://bucket/prefix")
        parser.add_argument("--license", default=None, help=LICENSE_HELP)
        parser.add_argument(
            "--keep-copies",
            action="store_true",
            dest="keep_copies",
            help="keep paraphrases identical to their reference (after Unicode NFKC, case folding and whitespace "
            "collapsing), which are left out by default; counted in the manifest either way",
        )
        parser.add_argument(
            "--keep-non-words",
            action="store_true",
            dest="keep_non_words",
            help="keep paraphrases holding a non-word (a word neither English, nor in the corpus, nor in the "
            "reference: what a HIT batch leaves out), which are left out by default; kept, each has an empty "
            "score and the caveat non_words; counted in the manifest either way",
        )

    def handle(
        self,
        *args,
        resource,
        out,
        min_score,
        format,
        filters,
        regressor,
        version,
        upload,
        entailment_model=None,
        license=None,
        keep_copies=False,
        keep_non_words=False,
        **options,
    ):
        found = find_resource(resource)
        if upload and not upload.startswith("s3://"):
            raise CommandError(f"--upload {upload!r}: expected s3://bucket/prefix")
        try:
            if version is not None:  # before the filters load an NLI model
                release_version_check(version)
            license = card_license(format, license)
            if out is None:  # the version decides the folder, so it is fixed here
                version = version or next_version(found)
                out = str(default_release_dir(found, version))
            parsed = parse_filters(
                filters,
                min_score=min_score,
                entailment_model=entailment_model,
                keep_copies=keep_copies,
                keep_non_words=keep_non_words,
            )
            release = release_export(
                resource=found,
                out_dir=out,
                version=version,
                fmt=format,
                filters=parsed,
                regressor=regressor,
                upload=upload,
                license=license,
            )
        except (FilterError, ReleaseError) as exc:
            raise CommandError(str(exc)) from None
        m = release.manifest
        rho = held_out_rho(m["regressor"].get("metrics"))
        if m["license"] == NO_LICENSE:
            self.stderr.write(
                f"warning: no --license given: the card and the manifest state {NO_LICENSE} (no licence), so "
                "nobody may redistribute this release; export it again with --license SPDX-ID before publishing"
            )
        if rho.warning():
            self.stderr.write(f"warning: {rho.warning()}")
        self.stdout.write(
            json.dumps(
                {
                    "release": release.pk,
                    "resource": found.name,
                    "version": release.version,
                    "location": release.location,
                    "out": out,
                    "counts": m["counts"],
                    "files": {name: f["sha256"] for name, f in m["files"].items()},
                    "regressor": m["regressor"]["name"],
                    "spearman_test": m["regressor"]["spearman_test"],
                    "held_out": m["regressor"]["held_out"],
                    "license": m["license"],
                },
                ensure_ascii=False,
            )
        )
