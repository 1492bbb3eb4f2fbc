"""Mechanical Turk operations on a batch; prints JSON.

``python manage.py mturk balance [--sandbox]``
``python manage.py mturk publish|sync|approve|expire BATCH``
``python manage.py mturk extend BATCH N``
``python manage.py mturk bonus ASSIGNMENT AMOUNT REASON``
A batch's own provider settings decide sandbox or production; ``--sandbox`` picks the sandbox for
``balance`` and, given with a batch command, insists that the batch is a sandbox one.
"""

import argparse
import contextlib
import json

from botocore.exceptions import BotoCoreError, ClientError
from django.core.management.base import BaseCommand, CommandError

from annotation.batches import BatchError
from annotation.models import Assignment, Batch
from annotation.providers import get_provider
from annotation.providers.mturk import MTurkError, MTurkProvider, bonus_fee_usd, bonus_grant, error_code, error_message
from annotation.publishing import batch_publish
from api.numbers import ascii_int, cli_decimal, cli_int


class Command(BaseCommand):
    help = (
        "Mechanical Turk: balance | publish BATCH | sync BATCH | approve BATCH | expire BATCH | extend BATCH N | "
        "bonus ASSIGNMENT AMOUNT REASON (JSON output)."
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
        sub = add("extend", "add N assignments to each published HIT")
        sub.add_argument("batch", type=cli_int)
        sub.add_argument("n", type=cli_int)
        sub = add("bonus", "pay a bonus once (same arguments again pay nothing)")
        sub.add_argument("assignment", help="the MTurk assignment id (or our assignment pk)")
        sub.add_argument("amount", type=cli_decimal, help="US dollars, e.g. 0.25")
        sub.add_argument("reason", help="shown to the worker")

    def handle(self, *args, action, sandbox, **options):
        try:
            result = getattr(self, f"_{action}")(sandbox=sandbox, **options)
        except (MTurkError, LookupError) as exc:
            raise CommandError(str(exc)) from exc
        except ClientError as exc:
            raise CommandError(f"MTurk refused: {error_code(exc)}: {error_message(exc)}") from exc
        except BotoCoreError as exc:
            raise CommandError(f"MTurk could not be reached: {exc}") from exc
        self.stdout.write(json.dumps(result, default=str))

    def _provider_for(self, batch_id: int, sandbox: bool) -> tuple[Batch, MTurkProvider]:
        try:
            batch = Batch.objects.get(pk=batch_id)
        except Batch.DoesNotExist as exc:
            raise CommandError(f"no batch {batch_id}") from exc
        if batch.provider != "mturk":
            raise CommandError(f"batch {batch_id} is on provider {batch.provider!r}, not mturk")
        provider = get_provider(batch)
        if sandbox and not provider.sandbox:
            raise CommandError(f"batch {batch_id} is a production batch; drop --sandbox")
        return batch, provider

    def _balance(self, *, sandbox, **_):
        balance = MTurkProvider(sandbox=sandbox).balance()
        return {key: balance[key] for key in ("sandbox", "endpoint", "available_usd", "on_hold_usd")}

    def _publish(self, *, sandbox, batch, **_):
        batch, _ = self._provider_for(batch, sandbox)
        try:
            return batch_publish(batch=batch)  # one publish of a batch at a time (annotation.publishing)
        except BatchError as exc:
            raise CommandError(str(exc)) from exc

    def _sync(self, *, sandbox, batch, **_):
        batch, provider = self._provider_for(batch, sandbox)
        return provider.sync(batch=batch)

    def _approve(self, *, sandbox, batch, **_):
        batch, provider = self._provider_for(batch, sandbox)
        return provider.approve_batch(batch=batch)

    def _expire(self, *, sandbox, batch, **_):
        batch, provider = self._provider_for(batch, sandbox)
        return provider.expire(batch=batch)

    def _extend(self, *, sandbox, batch, n, **_):
        batch, provider = self._provider_for(batch, sandbox)
        return provider.extend(batch=batch, assignments=n)

    def _bonus(self, *, sandbox, assignment, amount, reason, **_):
        mturk = Assignment.objects.filter(hit__batch__provider="mturk").select_related("hit", "worker")
        found = mturk.filter(external_assignment_id=assignment).first()
        if found is None:
            with contextlib.suppress(ValueError):  # not our pk either ("²".isdigit(), yet int("²") raises)
                found = mturk.filter(pk=ascii_int(assignment, name="an assignment", minimum=1)).first()
        if found is None or found.hit_id is None:
            raise CommandError(f"no MTurk assignment {assignment!r}")
        _, provider = self._provider_for(found.hit.batch_id, sandbox)
        bonus, paid_now = bonus_grant(assignment=found, amount_usd=amount, reason=reason, provider=provider)
        return {
            "bonus": bonus.pk,
            "assignment": found.external_assignment_id,
            "worker": bonus.worker.external_id,
            "amount_usd": str(bonus.amount_usd),
            "fee_usd": str(bonus_fee_usd(bonus.amount_usd)),
            "sent_at": bonus.sent_at.isoformat() if bonus.sent_at else None,
            "paid_now": paid_now,
        }
