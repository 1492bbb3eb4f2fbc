"""Crowd operations on a batch, for every provider (local, MTurk, Prolific); prints JSON.

``python manage.py crowd publish|sync|approve|expire BATCH``
``python manage.py crowd bonus BATCH AMOUNT REASON [--workers ID,ID]``
``python manage.py crowd balance [BATCH] [--provider mturk|mturk-sandbox|prolific]``
``python manage.py crowd pause BATCH`` (Prolific: pause the study; ``publish`` starts it again)
Each is one method of the batch's provider (``annotation.providers.HitProvider``).
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from annotation.batches import PROVIDER_NAMES, BatchError
from annotation.models import Batch
from annotation.providers import ProviderError, get_provider
from annotation.publishing import batch_publish
from api.numbers import cli_decimal, cli_int


class Command(BaseCommand):
    help = "Crowd batches on any provider: publish | sync | approve | bonus | expire | balance | pause (JSON output)."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        for name, text in (
            ("publish", "publish the batch (MTurk HITs, a Prolific study; balance checked first)"),
            ("sync", "verify stored submissions with the platform, copy its statuses"),
            ("approve", "pay verified submissions (Prolific: reject failed attention checks)"),
            ("expire", "no new work: expire the HITs (MTurk) or stop the study (Prolific)"),
            ("pause", "pause the batch's Prolific study"),
        ):
            actions.add_parser(name, help=text).add_argument("batch", type=cli_int)
        bonus = actions.add_parser("bonus", help="pay AMOUNT once to each worker with verified work in the batch")
        bonus.add_argument("batch", type=cli_int)
        bonus.add_argument("amount", type=cli_decimal, help="in the account's currency, e.g. 0.25")
        bonus.add_argument("reason", help="why (MTurk shows it to the worker)")
        bonus.add_argument("--workers", help="only these worker ids, comma-separated")
        balance = actions.add_parser("balance", help="the account's balance (of the batch's provider)")
        balance.add_argument("batch", type=cli_int, nargs="?")
        balance.add_argument("--provider", choices=[p for p in PROVIDER_NAMES if p != "local"])

    def handle(self, *args, action, **options):
        provider = None
        try:
            if action == "balance":
                provider = self._balance_provider(options.get("batch"), options.get("provider"))
                result = provider.balance()
            else:
                batch = self._batch(options["batch"])
                provider = get_provider(batch)
                result = self._run(action, provider, batch, options)
        except (ProviderError, LookupError) as exc:
            raise CommandError(str(exc)) from exc
        except Exception as exc:
            if provider is not None and isinstance(exc, provider.transport_errors):
                raise CommandError(provider.error_text(exc)) from exc
            raise
        self.stdout.write(json.dumps(result, default=str))

    @staticmethod
    def _batch(batch_id: int) -> Batch:
        try:
            return Batch.objects.get(pk=batch_id)
        except Batch.DoesNotExist as exc:
            raise CommandError(f"no batch {batch_id}") from exc

    def _balance_provider(self, batch_id: int | None, name: str | None):
        if (batch_id is None) == (name is None):
            raise CommandError("balance: give a BATCH or --provider")
        return get_provider(self._batch(batch_id) if batch_id is not None else name)

    @staticmethod
    def _run(action: str, provider, batch: Batch, options: dict) -> dict | None:
        if action == "publish":
            try:
                return batch_publish(batch=batch)
            except BatchError as exc:
                raise CommandError(str(exc)) from exc
        if action == "sync":
            return provider.sync(batch=batch)
        if action == "approve":
            return provider.approve_batch(batch=batch)
        if action == "expire":
            return provider.expire(batch=batch)
        if action == "pause":
            if not hasattr(provider, "pause"):
                raise CommandError(f"batch {batch.pk} is on {provider.name}, which has no pause: use expire")
            return provider.pause(batch=batch)
        workers = [w.strip() for w in options["workers"].split(",") if w.strip()] if options.get("workers") else None
        return provider.bonus_batch(batch=batch, amount=options["amount"], reason=options["reason"], workers=workers)
