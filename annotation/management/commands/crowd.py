"""Crowd operations on a batch, for every provider (local, MTurk, Prolific); prints JSON.

``python manage.py crowd publish|sync|approve|expire BATCH``
``python manage.py crowd bonus BATCH AMOUNT REASON [--workers ID,ID]``
``python manage.py crowd balance [BATCH] [--provider mturk|mturk-sandbox|prolific]``
``python manage.py crowd pause BATCH`` (Prolific: pause the study; ``publish`` starts it again)
``python manage.py crowd extend BATCH N`` (MTurk: N more assignments on each published HIT)
``python manage.py crowd assignment-bonus ASSIGNMENT AMOUNT REASON`` (MTurk: one assignment's worker, once)
Each is one method of the batch's provider (``annotation.providers.HitProvider``). The ``mturk`` command is an
alias of this one for MTurk batches, in its older spelling (``annotation/management/commands/mturk.py``).
"""

from __future__ import annotations

import contextlib
import json

from django.core.management.base import BaseCommand, CommandError

from annotation.batches.params import PROVIDER_NAMES, BatchError
from annotation.models import Assignment, Batch
from annotation.providers import ProviderError, get_provider
from annotation.providers.mturk import bonus_fee_usd, bonus_grant
from annotation.publishing import batch_publish
from api.numbers import ascii_int, cli_decimal, cli_int


def batch_get(batch_id: int) -> Batch:
    """The batch, or a ``CommandError`` naming the id."""
    try:
        return Batch.objects.get(pk=batch_id)
    except Batch.DoesNotExist as exc:
        raise CommandError(f"no batch {batch_id}") from exc


def mturk_assignment(assignment: str) -> Assignment:
    """An MTurk assignment named by its MTurk id or by our pk, or a ``CommandError``."""
    mturk = Assignment.objects.filter(hit__batch__provider="mturk").select_related("hit", "worker")
    found = mturk.filter(external_assignment_id=assignment).first()
    if found is None:
        with contextlib.suppress(ValueError):  # not our pk either ("²".isdigit(), yet int("²") raises)
            found = mturk.filter(pk=ascii_int(assignment, name="an assignment", minimum=1)).first()
    if found is None or found.hit_id is None:
        raise CommandError(f"no MTurk assignment {assignment!r}")
    return found


def extend_arguments(parser) -> None:
    """``extend``'s arguments (here and in the ``mturk`` alias)."""
    parser.add_argument("batch", type=cli_int)
    parser.add_argument("n", type=cli_int)


def assignment_bonus_arguments(parser) -> None:
    """``assignment-bonus``'s arguments (the ``mturk`` alias's ``bonus``)."""
    parser.add_argument("assignment", help="the MTurk assignment id (or our assignment pk)")
    parser.add_argument("amount", type=cli_decimal, help="US dollars, e.g. 0.25")
    parser.add_argument("reason", help="shown to the worker")


class Command(BaseCommand):
    help = (
        "Crowd batches on any provider: publish | sync | approve | bonus | expire | balance | pause | extend | "
        "assignment-bonus (JSON output)."
    )

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
        extend_arguments(actions.add_parser("extend", help="add N assignments to each published HIT (MTurk)"))
        assignment_bonus_arguments(
            actions.add_parser(
                "assignment-bonus",
                help="pay a bonus once to one assignment's worker (MTurk; same arguments again pay nothing)",
            )
        )

    def handle(self, *args, action, **options):
        self.stdout.write(json.dumps(self.operate(action, options), default=str))

    def operate(self, action: str, options: dict) -> dict | None:
        """The action's JSON report; a provider's refusal or transport error as a one-line ``CommandError``."""
        provider = None
        try:
            if action == "balance":
                provider = self._balance_provider(options.get("batch"), options.get("provider"))
                return provider.balance()
            if action == "assignment-bonus":
                found = mturk_assignment(options["assignment"])
                provider = get_provider(found.hit.batch)
                return self._assignment_bonus(found, provider, options)
            batch = batch_get(options["batch"])
            provider = get_provider(batch)
            return self._run(action, provider, batch, options)
        except (ProviderError, LookupError) as exc:
            raise CommandError(str(exc)) from exc
        except Exception as exc:
            if provider is not None and isinstance(exc, provider.transport_errors):
                raise CommandError(provider.error_text(exc)) from exc
            raise

    def _balance_provider(self, batch_id: int | None, name: str | None):
        if (batch_id is None) == (name is None):
            raise CommandError("balance: give a BATCH or --provider")
        return get_provider(batch_get(batch_id) if batch_id is not None else name)

    @staticmethod
    def _assignment_bonus(found: Assignment, provider, options: dict) -> dict:
        bonus, paid_now = bonus_grant(
            assignment=found, amount_usd=options["amount"], reason=options["reason"], provider=provider
        )
        return {
            "bonus": bonus.pk,
            "assignment": found.external_assignment_id,
            "worker": bonus.worker.external_id,
            "amount_usd": str(bonus.amount_usd),
            "fee_usd": str(bonus_fee_usd(bonus.amount_usd)),
            "sent_at": bonus.sent_at.isoformat() if bonus.sent_at else None,
            "paid_now": paid_now,
        }

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
        if action in ("pause", "extend"):
            if not hasattr(provider, action):
                other = "use expire" if action == "pause" else "publish a new batch"
                raise CommandError(f"batch {batch.pk} is on {provider.name}, which has no {action}: {other}")
            if action == "pause":
                return provider.pause(batch=batch)
            return provider.extend(batch=batch, assignments=options["n"])
        workers = [w.strip() for w in options["workers"].split(",") if w.strip()] if options.get("workers") else None
        return provider.bonus_batch(batch=batch, amount=options["amount"], reason=options["reason"], workers=workers)
