"""``manage.py constraints``: the constraint set one ParaBank system (Tab. 3) selects for one sentence.

    python manage.py constraints --idf IDF.tsv --system N [--seed S] [--ppdb FILE]
                                 [--min-idf X] [--max-idf Y] "SENTENCE"

prints one JSON object and exits 0::

    {"system": N, "name": "...", "positive": [["word", ...], ...], "negative": [[...], ...],
     "bos_avoid": [[...], ...]}

When the system yields "no constraint set" for the sentence (pool too small, sentence too short, no
PPDB paraphrase) the lists are empty and a ``"no_constraint_set": "<reason>"`` key says why; the exit
status is still 0. A bad system number, an unreadable IDF file, ``--min-idf`` above ``--max-idf``, a
PPDB system (35-37) without ``--ppdb``, or a ``--ppdb`` file with no valid PPDB 2.0 rule exits non-zero
with a one-line error on stderr.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from api.numbers import cli_float, cli_int


def _one_line(message: object) -> str:
    return " ".join(str(message).split())


class Command(BaseCommand):
    help = "Print the constraint set (JSON) that ParaBank system N selects for SENTENCE."

    def add_arguments(self, parser) -> None:
        parser.add_argument("sentence", help="the reference sentence")
        parser.add_argument("--idf", required=True, help="IDF table: token<TAB>idf lines")
        parser.add_argument("--system", required=True, help="system number, 1-37 (ParaBank Tab. 3)")
        parser.add_argument("--seed", type=cli_int, default=0, help="seed of the random systems (default 0)")
        parser.add_argument("--ppdb", help="PPDB 2.0 lexical file (gzip or plain), for systems 35-37")
        parser.add_argument("--min-idf", type=cli_float, default=None, help="pool's lower IDF bound (default 7.0)")
        parser.add_argument("--max-idf", type=cli_float, default=None, help="pool's upper IDF bound (default 17.0)")

    def handle(self, *args, **options) -> None:
        from generation.constraints import checked_idf_window, select_constraints
        from generation.idf import read_idf_tsv
        from generation.systems import UnknownSystem, get_system

        try:
            system = get_system(options["system"])
        except UnknownSystem as exc:
            raise CommandError(_one_line(exc)) from None
        try:
            min_idf, max_idf = checked_idf_window(options["min_idf"], options["max_idf"])
        except ValueError as exc:
            raise CommandError(_one_line(exc)) from None
        if system.kind == "ppdb" and not options.get("ppdb"):
            raise CommandError(f"system {system.number} ({system.name}) needs --ppdb FILE (a PPDB 2.0 lexical file)")
        try:
            idf = read_idf_tsv(options["idf"])
        except (OSError, ValueError) as exc:
            raise CommandError(_one_line(f"unreadable IDF file: {exc}")) from None
        ppdb = None
        if options.get("ppdb"):
            from generation.ppdb import PpdbError, open_ppdb

            try:
                ppdb = open_ppdb(options["ppdb"])
            except (PpdbError, OSError) as exc:
                raise CommandError(_one_line(exc)) from None
        result = select_constraints(
            system, options["sentence"], idf, seed=options["seed"], ppdb=ppdb, min_idf=min_idf, max_idf=max_idf
        )
        self.stdout.write(json.dumps(result.to_json(), ensure_ascii=False))
