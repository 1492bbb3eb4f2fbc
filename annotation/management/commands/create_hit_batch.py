"""Build a HIT batch from a generation job's evaluation sample; prints a JSON summary.

``python manage.py create_hit_batch --job JOB --provider local|mturk-sandbox|mturk [--per-length 100]
[--lengths 5,10,20,40] [--assignments 3] [--attention-rate 0.1] [--degraded-rate 0.1] [--seed S]`` prints
``{"batch": <id>, "hits": <n>, "cost_estimate_usd": <x or null>, "non_words_left_out": <n>}`` (the
candidates with non-words left out of the HITs; ``--batch-settings '{"drop_non_words": false}'`` keeps
them). Local batches are live at once (nothing is spent); MTurk batches stay drafts until ``--publish`` or
the admin's Publish action.
"""

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from annotation.batch_settings import BatchSettingsError, length_buckets
from annotation.batches.making import batch_cost_estimate_usd, batch_publish_check, hit_batch_create
from annotation.batches.params import PROVIDER_NAMES, BatchError, BatchParams
from annotation.models import Campaign
from annotation.providers import ProviderError, get_provider
from annotation.publishing import batch_publish
from api.numbers import cli_int
from jobs.params import add_arguments, from_values


def _lengths(value: str) -> tuple[int, ...]:
    try:
        return length_buckets(value)
    except BatchSettingsError as exc:
        raise CommandError(f"--{exc}") from None


class Command(BaseCommand):
    help = (
        "Build a HIT batch (one reference + five candidates per HIT, attention checks at a rate) from a "
        'job\'s evaluation sample; prints {"batch", "hits", "cost_estimate_usd", "non_words_left_out"}.'
    )

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--job", type=cli_int, help="the generation job whose evaluation sample is the campaign")
        which.add_argument("--campaign", help="the campaign's name (instead of --job)")
        parser.add_argument(
            "--provider", choices=PROVIDER_NAMES, help="default: the PARAFORGE_HIT_PROVIDER setting (local unless set)"
        )
        add_arguments(  # --per-length ... --label: BatchParams' fields, in its order
            parser,
            BatchParams,
            lengths="length buckets, comma-separated (default 5,10,20,40)",
            degraded_rate="share of HITs with a degraded check (a damaged copy of a candidate) (default 0.1, or the "
            "--batch-settings degraded_rate)",
        )
        parser.add_argument(
            "--batch-settings",
            dest="batch_settings",
            default="{}",
            help="JSON batch settings (reward_usd, assignment_duration_s, ...)",
        )
        parser.add_argument("--publish", action="store_true", help="publish MTurk batches now (spends money)")

    def handle(self, *args, job, campaign, provider, batch_settings, publish, **options):
        provider = provider or settings.PARAFORGE_HIT_PROVIDER
        try:
            extra = json.loads(batch_settings)
        except json.JSONDecodeError as exc:
            raise CommandError(f"--batch-settings is not JSON: {exc}") from exc
        if not isinstance(extra, dict):
            raise CommandError("--batch-settings must be a JSON object")
        target = self._campaign(job, campaign)
        try:
            get_provider(provider)
        except ImportError as exc:
            raise CommandError(f"the {provider} provider is not available ({exc})") from exc
        paid = publish and provider != "local"
        try:
            with transaction.atomic():  # any refusal below leaves nothing behind (no draft, no baseline rows)
                lengths = options["lengths"]
                params = from_values(
                    BatchParams,
                    options,
                    provider=provider,
                    settings=extra,
                    **({} if lengths is None else {"lengths": _lengths(lengths)}),
                )
                if paid:
                    batch_publish_check(provider=provider, settings=params.settings)
                batch = hit_batch_create(campaign=target, params=params)
                cost = batch_cost_estimate_usd(batch=batch)
                if paid and cost is not None:
                    batch_publish_check(provider=provider, settings=batch.settings, cost_usd=cost)
        except (BatchError, OSError) as exc:
            raise CommandError(f"no batch created: {exc}") from exc
        if provider == "local" or publish:
            self._publish(batch)
        self.stdout.write(
            json.dumps(
                {
                    "batch": batch.pk,
                    "hits": batch.hits.count(),
                    "cost_estimate_usd": None if cost is None else float(cost),
                    "non_words_left_out": batch.settings["non_words"]["left_out"],
                }
            )
        )

    @staticmethod
    def _publish(batch) -> None:
        """Publish the new batch; should the provider fail now (after the checks), the draft is kept and named."""
        provider = get_provider(batch)
        try:
            batch_publish(batch=batch)
        except (BatchError, ProviderError, *provider.transport_errors) as exc:
            text = provider.error_text(exc) if isinstance(exc, provider.transport_errors) else str(exc)
            raise CommandError(
                f"batch {batch.pk} was created but not published ({text}); it is a draft: publish it "
                f"with `python manage.py crowd publish {batch.pk}`"
            ) from exc

    @staticmethod
    def _campaign(job, name) -> Campaign:
        if name is not None:
            if not name.strip():
                raise CommandError("--campaign: the campaign name is empty")
            try:
                return Campaign.objects.get(name=name)
            except Campaign.DoesNotExist:
                raise CommandError(f"no campaign named {name!r}") from None
        found = list(Campaign.objects.filter(job_id=job).order_by("id")[:2])
        if not found:
            raise CommandError(
                f"job {job} has no evaluation sample (no campaign with job_id={job}): run "
                "generate with --sample-per-length first, or give --campaign NAME"
            )
        if len(found) > 1:
            raise CommandError(f"job {job} has several campaigns: choose one with --campaign NAME")
        return found[0]
