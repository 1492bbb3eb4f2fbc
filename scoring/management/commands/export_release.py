"""``export_release RESOURCE [--out DIR] [--license SPDX-ID] [--min-score X] [--format tsv|jsonl|parquet]
[--layout paraforge|parabank2] [--filters ...] [--keep-copies] [--keep-non-words] [--entailment-model DIR]
[--regressor NAME] [--version V] [--upload s3://bucket/prefix]``"""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from infra.storage import storage_from_url
from jobs import params
from scoring.management.commands.score_resource import find_resource
from scoring.models import Release
from scoring.regressor.held_out import held_out_rho
from scoring.releases.card import NO_LICENSE
from scoring.releases.checks import ReleaseError, card_license, next_version, release_storage_url
from scoring.releases.export import release_export
from scoring.releases.filters import FilterError
from scoring.releases.job import release_export_to_storage
from scoring.releases.params import ReleaseExportParams


class Command(BaseCommand):
    help = (
        "Export a versioned, gzip-compressed release of a scored resource: pairs (per reference: "
        "paraphrases, systems, constraints, model score, predicted similarity; paraphrases identical to "
        "their reference left out unless --keep-copies, and those with a non-word unless --keep-non-words, "
        "as a HIT batch leaves them out), the human judgments, a README.md card (licence, "
        "held-out rho with n and interval, calibration table, limitations, provenance) and manifest.json "
        "(counts, SHA-256 of each file, regressor, generation settings, filters). --layout parabank2 writes the "
        "pairs as ParaBank 2's TSV instead (a line per reference: score, reference, up to 5 paraphrases in rank "
        "order). Same inputs -> byte-identical files."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version names the release here, replacing Django's "print Django's version" option
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("resource", help="resource name or id")
        parser.add_argument(
            "--out",
            default=None,
            help="folder to write the release into (must not hold one); default: where the admin's exports go, the "
            "configured storage's releases/RESOURCE/VERSION (var/storage/releases/RESOURCE/VERSION by default)",
        )
        parser.add_argument("--upload", default=None, help="with --out: also copy the files to s3://bucket/prefix")
        params.add_arguments(parser, ReleaseExportParams)  # what to release: --version, --format, --layout ...

    def handle(self, *args, resource: str, out: str | None, upload: str | None, **options) -> None:
        found = find_resource(resource)
        if upload and not upload.startswith("s3://"):
            raise CommandError(f"--upload {upload!r}: expected s3://bucket/prefix")
        if upload and out is None:
            raise CommandError(
                "--upload copies a release written with --out DIR; without --out the release goes into the "
                "configured storage (PARAFORGE_STORAGE_URL, which may itself be s3://bucket/prefix)"
            )
        try:
            # the version's rule and the licence are checked before the filters load an NLI model
            asked = params.from_values(ReleaseExportParams, options, resource=found.pk)
            card_license(asked.format, asked.license)
            if out is None:  # where the admin's exports go (the version decides the folder, so it is fixed here)
                version = asked.version or next_version(found)
                release = release_export_to_storage(asked, found, version)
                where = storage_from_url(release_storage_url(found, version))
                out = str(where.root) if hasattr(where, "root") else where.url
            else:
                release = release_export(asked, out_dir=out, upload=upload)
        except (FilterError, ReleaseError) as exc:
            raise CommandError(str(exc)) from None
        except params.ParamsError as exc:  # a setting outside its declared range (jobs.params.check_bounds)
            raise CommandError(exc.option_message) from None
        self._warn(release.manifest)
        self.stdout.write(json.dumps(self._summary(release, found.name, out), ensure_ascii=False))

    def _warn(self, manifest: dict[str, Any]) -> None:
        """What a person must know before publishing: no licence, a held-out rho not to be trusted, or scores
        that are the regressor's own, not calibrated (the manifest's note says how to get calibrated ones)."""
        rho = held_out_rho(manifest["regressor"].get("metrics"))
        if manifest["license"] == NO_LICENSE:
            self.stderr.write(
                f"warning: no --license given: the card and the manifest state {NO_LICENSE} (no licence), so "
                "nobody may redistribute this release; export it again with --license SPDX-ID before publishing"
            )
        if rho.warning():
            self.stderr.write(f"warning: {rho.warning()}")
        calibration = manifest.get("calibration") or {}
        if not calibration.get("applied"):
            self.stderr.write(f"warning: {calibration.get('note')}")  # the note begins "not calibrated: ..."

    @staticmethod
    def _summary(release: Release, resource: str, out: str) -> dict[str, Any]:
        """The command's output: the release, where it is, its counts, files and regressor."""
        m = release.manifest
        return {
            "release": release.pk,
            "resource": resource,
            "version": release.version,
            "location": release.location,
            "out": out,
            "counts": m["counts"],
            "files": {name: f["sha256"] for name, f in m["files"].items()},
            "regressor": m["regressor"]["name"],
            "spearman_test": m["regressor"]["spearman_test"],
            "held_out": m["regressor"]["held_out"],
            "license": m["license"],
        }
