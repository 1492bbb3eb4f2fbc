"""``export_idf NAME_OR_ID OUT.tsv``: write an IDF table as token<TAB>idf lines, sorted by token."""

import json

from django.core.management.base import BaseCommand, CommandError

from generation.constraints.idf import IdfFileError, idf_table_export, idf_table_get


class Command(BaseCommand):
    help = "Export an IDF table to a TSV file (token<TAB>idf, sorted by token)."

    def add_arguments(self, parser):
        parser.add_argument("table", help="IDF table name or id")
        parser.add_argument("out")

    def handle(self, *args, table, out, **options):
        try:
            found = idf_table_get(table)
            n = idf_table_export(found, out)
        except (IdfFileError, FileNotFoundError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps({"idf_table": found.pk, "name": found.name, "types": n, "file": out}))
