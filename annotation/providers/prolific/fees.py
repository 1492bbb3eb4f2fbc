"""What a Prolific study costs (pure: no client, no database).

A batch is one study; a participant's session is ``hits_per_session`` HITs in a row, so the study needs
``ceil(HITs x assignments / hits_per_session)`` places. Each place is paid the session's reward; Prolific
adds its service fee (``PROLIFIC_SERVICE_FEE_RATE`` of rewards and bonuses) and, for accounts that pay
it, VAT on that fee (``PROLIFIC_VAT_RATE``). Amounts are in the account's currency, to the cent.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def _cents(amount: Decimal) -> Decimal:
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def study_places(assignments_per_hit: Iterable[int], hits_per_session: int) -> int:
    """Places a study needs so that every HIT gets its assignments: ceil(sum of assignments / session size)."""
    total = sum(int(n) for n in assignments_per_hit)
    return math.ceil(total / max(1, int(hits_per_session))) if total else 0


def prolific_cost(*, reward: Decimal, places: int, fee_rate: Decimal, vat_rate: Decimal) -> dict[str, Decimal]:
    """{"rewards", "fee", "vat", "total"} of paying ``reward`` to ``places`` participants."""
    rewards = _cents(Decimal(reward) * int(places))
    fee = _cents(rewards * Decimal(fee_rate))
    vat = _cents(fee * Decimal(vat_rate))
    return {"rewards": rewards, "fee": fee, "vat": vat, "total": rewards + fee + vat}


def to_cents(amount: Decimal) -> int:
    """Prolific takes money as whole cents of the account's currency."""
    return int(_cents(Decimal(amount)) * 100)
