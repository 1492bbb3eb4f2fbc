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

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from generation.constraints.constraint_job import ConstraintOptions
from jobs.params import ParamsError, add_arguments, from_values


def _one_line(message: object) -> str:
    return " ".join(str(message).split())


class Command(BaseCommand):
    help = "Print the constraint set (JSON) that ParaBank system N selects for SENTENCE."

    def add_arguments(self, parser) -> None:
        parser.add_argument("sentence", help="the reference sentence")
        parser.add_argument("--idf", required=True, help="IDF table: token<TAB>idf lines")
        parser.add_argument("--system", required=True, help="system number, 1-37 (ParaBank Tab. 3)")
        add_arguments(
            parser,
            ConstraintOptions,
            min_idf=f"pool's lower IDF bound (default {settings.PARAFORGE_MIN_IDF})",
            max_idf=f"pool's upper IDF bound (default {settings.PARAFORGE_MAX_IDF})",
        )

    def handle(self, *args, **options) -> None:
        from generation.constraints.idf import read_idf_tsv
        from generation.constraints.sets import select_constraints
        from generation.constraints.systems import UnknownSystem, get_system

        try:
            system = get_system(options["system"])
        except UnknownSystem as exc:
            raise CommandError(_one_line(exc)) from None
        try:
            chosen = from_values(ConstraintOptions, options)
        except ParamsError as exc:
            raise CommandError(_one_line(exc.option_message)) from None
        min_idf, max_idf = chosen.idf_window()
        if system.kind == "ppdb" and not chosen.ppdb:
            raise CommandError(f"system {system.number} ({system.name}) needs --ppdb FILE (a PPDB 2.0 lexical file)")
        try:
            idf = read_idf_tsv(options["idf"])
        except (OSError, ValueError) as exc:
            raise CommandError(_one_line(f"unreadable IDF file: {exc}")) from None
        ppdb = None
        if chosen.ppdb:
            from generation.constraints.ppdb import PpdbError, open_ppdb

            try:
                ppdb = open_ppdb(chosen.ppdb)
            except (PpdbError, OSError) as exc:
                raise CommandError(_one_line(exc)) from None
        result = select_constraints(
            system, options["sentence"], idf, seed=chosen.seed, ppdb=ppdb, min_idf=min_idf, max_idf=max_idf
        )
        self.stdout.write(json.dumps(result.to_json(), ensure_ascii=False))
