"""``import_idf NAME FILE.tsv``: store a token<TAB>idf file as a new IDF table (no corpus)."""

import json

from django.core.management.base import BaseCommand, CommandError

from generation.constraints.idf import IdfFileError, idf_table_import


class Command(BaseCommand):
    help = "Import a token<TAB>idf TSV file (an optional header line 'token<TAB>idf') as a new IDF table."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("file")

    def handle(self, *args, name, file, **options):
        try:
            table = idf_table_import(name, file)
        except IdfFileError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps({"idf_table": table.pk, "name": table.name, "types": table.n_types}))
