"""Import human judgments into a campaign (created if needed); prints a JSON summary.

``python manage.py import_judgments --format parabank --references REF.tsv CANDIDATES.tsv --campaign NAME``
``python manage.py import_judgments --format generic --map worker=WorkerId,reference=Input.ref,... FILE \
--campaign NAME``
"""

import json

from django.core.management.base import BaseCommand, CommandError

from annotation.campaigns.importers import (
    ImportArgumentError,
    ImportFormatError,
    import_generic,
    import_parabank,
    parse_mapping,
)


class Command(BaseCommand):
    help = (
        "Import human judgments into a campaign (created if needed); prints a JSON summary. parabank: "
        "ParaBank's release (--references ref.tsv + the candidates TSV). generic: a CSV/TSV, one judgment a "
        "row, with --map field=Column,... (fields worker, reference, systems, candidate, score, fluency; "
        "optional reference_text, length, nll). Re-importing the same files duplicates nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("candidates", help="the judged candidates (one judgment per line)")
        parser.add_argument("--format", choices=["parabank", "generic"], default="parabank")
        parser.add_argument("--references", help="the references file (ParaBank ref.tsv format); required for parabank")
        parser.add_argument("--campaign", required=True, help="campaign name (created if it does not exist)")
        parser.add_argument("--map", dest="mapping", help="generic: field=Column,... ")
        parser.add_argument("--delimiter", help="generic: the field delimiter (default: tab for .tsv, else comma)")

    def handle(self, *args, candidates, format, references, campaign, mapping, delimiter, **options):
        try:
            if format == "parabank":
                if not references:
                    raise CommandError("--references is required with --format parabank")
                summary = import_parabank(
                    campaign_name=campaign, references_path=references, candidates_path=candidates
                )
            else:
                if not mapping:
                    raise CommandError("--map is required with --format generic")
                try:
                    fields = parse_mapping(mapping)
                except ValueError as exc:
                    raise CommandError(f"--map: {exc}") from exc
                delimiter = {"\\t": "\t", "tab": "\t"}.get(delimiter, delimiter)
                summary = import_generic(
                    campaign_name=campaign,
                    path=candidates,
                    mapping=fields,
                    references_path=references,
                    delimiter=delimiter,
                )
        except (ImportArgumentError, ImportFormatError) as exc:
            raise CommandError(f"nothing imported: {exc}") from exc
        self.stdout.write(json.dumps(summary.as_dict()))
