"""``python manage.py report CAMPAIGN --table similarity|fluency|diversity|pairwise|reliability|raters
[--format json|md|csv] [--min-judgments N] [--estimate raw|zscore]``

The tables are the dashboard's, from the same cache (``scoring.dashboard.tables.CampaignTables``)."""

import json

from django.core.management.base import BaseCommand, CommandError

from annotation.batches.making import non_words_line, non_words_summary
from annotation.models import Campaign
from api.numbers import cli_int
from scoring.aggregation import ESTIMATES
from scoring.dashboard.tables import (
    REPORT_TABLES,
    EstimateError,
    build_table,
    check_estimate,
    render_csv,
    render_markdown,
)


class Command(BaseCommand):
    help = (
        "Print a campaign's ParaBank-style table: similarity (Tab. 4 top), fluency = meaningful-and-"
        "grammatical rate (Tab. 5) or diversity = BLEU without brevity penalty (Tab. 4 bottom), by system "
        "x length bucket; pairwise = ParaBank 2's diversity view per system: 1-BLEU and token "
        "intersection/union against the reference, and 1-BLEU between two systems' outputs for the same "
        "reference; reliability = split-half reliability of the raw and z-score similarity "
        "estimates and Krippendorff's alpha; or raters = each rater's attention checks, degraded-copy test "
        "and mean scores, by the name the admin and the dashboard use."
    )

    def add_arguments(self, parser):
        parser.add_argument("campaign", help="campaign name")
        parser.add_argument("--table", required=True, choices=list(REPORT_TABLES))
        parser.add_argument("--format", choices=["json", "md", "csv"], default="json")
        parser.add_argument(
            "--min-judgments",
            type=cli_int,
            default=None,
            dest="min_judgments",
            help="count only workers with at least N judgments in the campaign "
            "(default: the campaign's min_judgments_per_worker, 25)",
        )
        parser.add_argument(
            "--estimate",
            choices=list(ESTIMATES),
            default=None,
            help="similarity table only: raw = mean score (ParaBank's, the default) or zscore = "
            "worker-standardised scores mapped back to 0-100",
        )

    def handle(self, *args, campaign, table, format, min_judgments, estimate, **options):
        try:
            check_estimate(table, estimate)
        except EstimateError as exc:
            raise CommandError(f"--estimate: {exc}") from None
        try:
            obj = Campaign.objects.get(name=campaign)
        except Campaign.DoesNotExist:
            raise CommandError(f"no campaign named {campaign!r}") from None
        if min_judgments is not None and min_judgments < 0:
            raise CommandError("--min-judgments must be >= 0")
        result = build_table(obj, table, min_judgments, estimate)
        left_out = non_words_line(non_words_summary(obj))  # what the judged HITs never showed
        if format == "json":
            self.stdout.write(json.dumps(result, ensure_ascii=False))
            self.stderr.write(left_out)
        elif format == "md":
            self.stdout.write(render_markdown(result) + "\n" + left_out + "\n", ending="")
        else:
            self.stderr.write(left_out)
            self.stdout.write(render_csv(result), ending="")
            if result.get("estimate") == "zscore":  # the CSV has no room for it; the researcher should know
                self.stderr.write(f"{result['workers_sd0']} worker(s) with SD 0 left out of the z-score estimate")
