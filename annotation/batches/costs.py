"""What each HIT batch of a campaign has cost so far, against what it was estimated to cost (the dashboard's
cost figure).

Rules (the README's dashboard section states the same):

* The estimate is the provider's own (``batch_cost_estimate_usd``: every assignment slot of every HIT paid,
  rewards plus the platform's fees and taxes); a provider that costs nothing (local annotators, paid
  outside the system) has none, and one whose settings cannot be read shows none, with the reason.
* Spent so far is the estimate's share of the slots whose work was paid: the batch's approved
  assignments. Awaiting payment: submitted assignments not flagged by the platform (crowd platforms
  pay them on approval, or automatically). So the pricing rules stay in the providers, in one place; the
  share is exact when every HIT of the batch has the same number of assignments (the usual case), an
  average of the HITs' per-assignment costs otherwise.
* Bonuses are their recorded amounts (``Bonus``), sent (confirmed by the provider) or not yet, without
  the platform's fee on them.
"""

from __future__ import annotations

import dataclasses
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import Count, Q, Sum

from annotation.models import Assignment, AssignmentStatus, Batch, Bonus, Campaign, Hit, Verification

CENT = Decimal("0.01")
ZERO = Decimal("0.00")


@dataclasses.dataclass
class BatchCost:
    batch: int
    label: str
    provider: str
    status: str
    currency: str
    slots: int  # assignment slots of all its HITs
    approved: int  # assignments paid
    awaiting: int  # submitted, not yet paid (nor rejected, nor flagged)
    estimate: Decimal | None  # the provider's estimate of the whole batch; None: free, or not known (note)
    spent: Decimal  # the estimate's share of the approved slots (0 without an estimate)
    awaiting_cost: Decimal  # the estimate's share of the slots awaiting payment
    bonuses_sent: Decimal
    bonuses_pending: Decimal
    note: str = ""

    @property
    def spent_total(self) -> Decimal:
        """Rewards and fees paid so far plus the bonuses sent."""
        return self.spent + self.bonuses_sent

    def as_dict(self) -> dict:
        """JSON-able, amounts as strings of cents (what the dashboard's download gives)."""
        data = dataclasses.asdict(self)
        for key, value in data.items():
            if isinstance(value, Decimal):
                data[key] = str(value)
        data["spent_total"] = str(self.spent_total)
        return data


def _share(estimate: Decimal | None, part: int, slots: int) -> Decimal:
    if estimate is None or slots <= 0 or part <= 0:
        return ZERO
    return (estimate * part / slots).quantize(CENT, rounding=ROUND_HALF_UP)


def _estimate(batch: Batch) -> tuple[Decimal | None, str, str]:
    """(estimate, currency, note) from the batch's provider; a provider that cannot say gives (None, .., why)."""
    from annotation.batches.making import batch_cost_estimate_usd
    from annotation.providers import ProviderError, get_provider

    try:
        provider = get_provider(batch)
        currency = str(getattr(provider, "currency", "USD"))
        estimate = batch_cost_estimate_usd(batch=batch)
    except (ProviderError, LookupError) as exc:  # e.g. settings a provider cannot read: a figure, not a 500
        return None, "USD", f"no estimate: {exc}"
    if estimate is None:
        return None, currency, "free (paid outside the system)"
    return Decimal(estimate).quantize(CENT, rounding=ROUND_HALF_UP), currency, ""


def campaign_batch_costs(campaign: Campaign) -> list[BatchCost]:
    """Every batch of the campaign, oldest first, with its cost so far (rules in the module docstring)."""
    rows = []
    for batch in Batch.objects.filter(campaign=campaign).order_by("id"):
        slots = Hit.objects.filter(batch=batch).aggregate(n=Sum("max_assignments"))["n"] or 0
        counts = batch_assignment_counts(batch)
        estimate, currency, note = _estimate(batch)
        bonuses = Bonus.objects.filter(assignment__hit__batch=batch).aggregate(
            sent=Sum("amount_usd", filter=Q(sent_at__isnull=False)),
            pending=Sum("amount_usd", filter=Q(sent_at__isnull=True)),
        )
        rows.append(
            BatchCost(
                batch=batch.pk,
                label=batch.label or f"batch {batch.pk}",
                provider=batch.provider + (" sandbox" if (batch.settings or {}).get("sandbox") else ""),
                status=batch.status,
                currency=currency,
                slots=slots,
                approved=counts["approved"],
                awaiting=counts["awaiting"],
                estimate=estimate,
                spent=_share(estimate, counts["approved"], slots),
                awaiting_cost=_share(estimate, counts["awaiting"], slots),
                bonuses_sent=(bonuses["sent"] or ZERO).quantize(CENT),
                bonuses_pending=(bonuses["pending"] or ZERO).quantize(CENT),
                note=note,
            )
        )
    return rows


def batch_assignment_counts(batch: Batch) -> dict[str, int]:
    """{"approved", "awaiting"}: the batch's paid assignments, and those submitted and not flagged."""
    return Assignment.objects.filter(hit__batch=batch).aggregate(
        approved=Count("id", filter=Q(status=AssignmentStatus.APPROVED)),
        awaiting=Count("id", filter=Q(status=AssignmentStatus.SUBMITTED) & ~Q(verification=Verification.FLAGGED)),
    )
