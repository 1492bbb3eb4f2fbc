"""``python manage.py report CAMPAIGN --table similarity|fluency|diversity [--format json|md|csv] [--min-judgments N]``"""
import json

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Campaign
from scoring.tables import TABLES, build_table, render_csv, render_markdown


class Command(BaseCommand):
    help = ("Print a campaign's ParaBank-style table: similarity (Tab. 4 top), fluency = meaningful-and-"
            "grammatical rate (Tab. 5) or diversity = BLEU without brevity penalty (Tab. 4 bottom), by system "
            "x length bucket.")

    def add_arguments(self, parser):
        parser.add_argument("campaign", help="campaign name")
        parser.add_argument("--table", required=True, choices=list(TABLES))
        parser.add_argument("--format", choices=["json", "md", "csv"], default="json")
        parser.add_argument("--min-judgments", type=int, default=None, dest="min_judgments",
                            help="count only workers with at least N judgments in the campaign "
                                 "(default: the campaign's min_judgments_per_worker, 25)")

    def handle(self, *args, campaign, table, format, min_judgments, **options):
        try:
            obj = Campaign.objects.get(name=campaign)
        except Campaign.DoesNotExist:
            raise CommandError(f"no campaign named {campaign!r}") from None
        if min_judgments is not None and min_judgments < 0:
            raise CommandError("--min-judgments must be >= 0")
        result = build_table(obj, table, min_judgments)
        if format == "json":
            self.stdout.write(json.dumps(result, ensure_ascii=False))
        elif format == "md":
            self.stdout.write(render_markdown(result), ending="")
        else:
            self.stdout.write(render_csv(result), ending="")
