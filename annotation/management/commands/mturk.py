"""``mturk``: an alias of ``crowd`` for Mechanical Turk batches, in the spelling it had before ``crowd`` served
every provider; prints JSON.

``python manage.py mturk balance [--sandbox]``             = ``crowd balance --provider mturk[-sandbox]``
``python manage.py mturk publish|sync|approve|expire BATCH`` = ``crowd publish|sync|approve|expire BATCH``
``python manage.py mturk extend BATCH N``                  = ``crowd extend BATCH N``
``python manage.py mturk bonus ASSIGNMENT AMOUNT REASON``  = ``crowd assignment-bonus ASSIGNMENT AMOUNT REASON``
Why it stays: scripts and notes of MTurk labs call it. What it adds is only its own checks: the batch must be
an MTurk one, and ``--sandbox`` picks the sandbox for ``balance`` and, given with a batch command, insists
that the batch is a sandbox one; ``balance`` prints MTurk's four keys, as it always has.
"""

import argparse
import json

from django.core.management.base import CommandError

from annotation.management.commands.crowd import (
    Command as CrowdCommand,
    assignment_bonus_arguments,
    batch_get,
    extend_arguments,
    mturk_assignment,
)
from annotation.models import Batch
from annotation.providers import get_provider
from api.numbers import cli_int

BALANCE_KEYS = ("sandbox", "endpoint", "available_usd", "on_hold_usd")
SAME_AS_CROWD = {"bonus": "assignment-bonus"}  # the mturk spelling -> crowd's, where they differ


def mturk_batch_check(batch: Batch, sandbox: bool) -> None:
    """Refuse a batch that is not on MTurk, or (``--sandbox``) on MTurk's production site."""
    if batch.provider != "mturk":
        raise CommandError(f"batch {batch.pk} is on provider {batch.provider!r}, not mturk")
    if sandbox and not get_provider(batch).sandbox:
        raise CommandError(f"batch {batch.pk} is a production batch; drop --sandbox")


class Command(CrowdCommand):
    help = (
        "Mechanical Turk: balance | publish BATCH | sync BATCH | approve BATCH | expire BATCH | extend BATCH N | "
        "bonus ASSIGNMENT AMOUNT REASON (JSON output). An alias of crowd for MTurk batches."
    )

    def add_arguments(self, parser):
        parser.add_argument("--sandbox", action="store_true", help="the requester sandbox (balance; checks batches)")
        actions = parser.add_subparsers(dest="action", required=True)

        def add(name, text):
            sub = actions.add_parser(name, help=text)
            sub.add_argument("--sandbox", action="store_true", default=argparse.SUPPRESS, help="the requester sandbox")
            return sub

        add("balance", "the account's available balance")
        for name, text in (
            ("publish", "create the batch's unpublished HITs (balance checked first)"),
            ("sync", "check stored assignments against MTurk, report missing ones, copy statuses"),
            ("approve", "approve every submitted, unflagged assignment"),
            ("expire", "take the batch's HITs off MTurk now"),
        ):
            add(name, text).add_argument("batch", type=cli_int)
        extend_arguments(add("extend", "add N assignments to each published HIT"))
        assignment_bonus_arguments(add("bonus", "pay a bonus once (same arguments again pay nothing)"))

    def handle(self, *args, action, sandbox, **options):
        if action == "balance":
            options["provider"] = "mturk-sandbox" if sandbox else "mturk"
        elif action == "bonus":
            mturk_batch_check(mturk_assignment(options["assignment"]).hit.batch, sandbox)
        else:
            mturk_batch_check(batch_get(options["batch"]), sandbox)
        result = self.operate(SAME_AS_CROWD.get(action, action), options)
        if action == "balance":
            result = {key: result[key] for key in BALANCE_KEYS}
        self.stdout.write(json.dumps(result, default=str))
