"""The batch form of a campaign (*Create a HIT batch*): ``BatchParams``' fields, the settings each provider
reads, and the preview's own."""

from decimal import Decimal

from django import forms
from django.conf import settings

from api.forms import AsciiDecimalField, AsciiIntegerField
from jobs.forms import form_fields
from jobs.params import from_values

from ..batch_settings import ATTENTION_PASS_MARK_DEFAULT, BatchSettingsError, batch_label_check, length_buckets
from ..batches.params import BatchParams
from ..models import Campaign

# BatchParams' fields as a form (provider, per_length, lengths, ... label): its class says what they are
BatchParamsForm = type(forms.Form)(
    "BatchParamsForm", (forms.Form,), {"__module__": __name__, **form_fields(BatchParams)}
)


class BatchForm(BatchParamsForm):
    """The batch the researcher designs: ``BatchParams``' fields, the settings a provider reads and the
    preview's own; ``FIELDSETS`` group them by the provider that reads them (the page shows only the chosen
    provider's, and all of them without JavaScript)."""

    attention_pass_mark = AsciiIntegerField(
        min_value=0,
        max_value=100,
        initial=ATTENTION_PASS_MARK_DEFAULT,
        required=False,
        help_text=f"an attention copy passes when its slider reached at least this score (empty: "
        f"{ATTENTION_PASS_MARK_DEFAULT}; 100 passes only an exact 100, as ParaBank, which a tap on a phone misses)",
    )
    reward_usd = AsciiDecimalField(
        min_value=0, decimal_places=2, initial="0.10", required=False, help_text="MTurk: reward per assignment"
    )
    reward_per_session = AsciiDecimalField(
        min_value=0,
        decimal_places=2,
        required=False,
        initial=lambda: settings.PROLIFIC_REWARD_PER_SESSION,
        help_text="Prolific: reward per session (the account's currency)",
    )
    hits_per_session = AsciiIntegerField(
        min_value=1, max_value=1000, required=False, help_text="Prolific: HITs a participant does in one session"
    )
    estimated_minutes = AsciiIntegerField(
        min_value=1, max_value=1440, required=False, help_text="Prolific: a session's estimated time"
    )
    countries = forms.CharField(required=False, help_text="Prolific: countries of residence, comma-separated")
    first_languages = forms.CharField(required=False, help_text="Prolific: first languages, comma-separated")
    raters_at_once = AsciiIntegerField(
        min_value=1,
        max_value=100_000,
        required=False,
        help_text="preview only: people working at the same time, for the time to finish (empty: as many as "
        "have done this campaign's HITs, else the assignments per HIT)",
    )

    # (legend, the providers that read them or "" for every provider, fields)
    FIELDSETS = (
        (
            "The batch",
            "",
            (
                "provider",
                "per_length",
                "lengths",
                "assignments",
                "attention_rate",
                "attention_pass_mark",
                "degraded_rate",
            ),
        ),
        ("", "", ("seed", "label")),
        ("Mechanical Turk", "mturk-sandbox mturk", ("reward_usd",)),
        (
            "Prolific",
            "prolific",
            ("reward_per_session", "hits_per_session", "estimated_minutes", "countries", "first_languages"),
        ),
        ("Preview", "", ("raters_at_once",)),
    )
    field_order = [name for _, _, names in FIELDSETS for name in names]

    def __init__(self, *args, campaign: Campaign | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        from ..batches.preview import hourly_pay, pace_seconds_per_hit, prolific_minimum_hourly
        from ..providers.prolific.study import suggested_minutes

        per_hit, source = pace_seconds_per_hit(campaign)
        hits = settings.PROLIFIC_HITS_PER_SESSION
        minutes = suggested_minutes(hits_per_session=hits, seconds_per_hit=per_hit)
        self.fields["hits_per_session"].initial = hits
        self.fields["estimated_minutes"].initial = minutes
        currency = settings.PROLIFIC_CURRENCY
        pay = hourly_pay(Decimal(str(settings.PROLIFIC_REWARD_PER_SESSION)), minutes)
        self.fields["estimated_minutes"].help_text = (
            f"Prolific: a session's estimated time; suggested {minutes} min for {hits} HITs from {source}. The "
            f"default reward then pays {pay} {currency} an hour (Prolific's minimum: {prolific_minimum_hourly()} "
            f"{currency}); Preview shows the pay of what you enter"
        )

    def fieldsets(self) -> list[dict]:
        """``FIELDSETS`` with their bound fields, for the template."""
        return [
            {"legend": legend, "providers": providers, "fields": [self[name] for name in names]}
            for legend, providers, names in self.FIELDSETS
        ]

    def provider_settings(self) -> dict:
        """The batch settings from the fields given: the attention pass mark, and those the chosen provider reads."""
        data = self.cleaned_data
        chosen: dict = {}
        if data.get("attention_pass_mark") is not None:
            chosen["attention_pass_mark"] = data["attention_pass_mark"]
        if data["provider"].startswith("mturk") and data.get("reward_usd") is not None:
            chosen["reward_usd"] = str(data["reward_usd"])
        if data["provider"] == "prolific":
            if data.get("reward_per_session") is not None:
                chosen["reward_per_session"] = str(data["reward_per_session"])
            for key in ("hits_per_session", "estimated_minutes", "countries", "first_languages"):
                if data.get(key) not in (None, ""):
                    chosen[key] = data[key]
        return chosen

    def batch_params(self) -> BatchParams:
        """What ``hit_batch_create`` makes, from the cleaned form (raises ``BatchError`` as it does)."""
        return from_values(BatchParams, self.cleaned_data, settings=self.provider_settings())

    def clean_lengths(self):
        try:  # int() takes "١٨٠٠" and "1_800": the one ASCII-number rule
            return length_buckets(self.cleaned_data["lengths"])
        except BatchSettingsError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_label(self):
        try:
            return batch_label_check(self.cleaned_data["label"])
        except BatchSettingsError as exc:
            raise forms.ValidationError(str(exc)) from None
