"""MTurk's commission and the cost of HITs and bonuses, in US dollars (pure: no client, no database)."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from ..errors import InsufficientBalance as BaseInsufficientBalance, ProviderConfigurationError, ProviderError

# MTurk's commission: 20% of rewards and bonuses, 40% for HITs with 10 or more assignments; at least $0.01
FEE_RATE = Decimal("0.20")
FEE_RATE_LARGE_HIT = Decimal("0.40")
LARGE_HIT_ASSIGNMENTS = 10
MIN_FEE_USD = Decimal("0.01")
CENT = Decimal("0.01")


class MTurkError(ProviderError):
    """An MTurk operation that cannot go ahead; the message says why and what to do."""


class MTurkConfigurationError(MTurkError, ProviderConfigurationError):
    pass


class InsufficientBalance(MTurkError, BaseInsufficientBalance):
    pass


def usd_amount(value: Any) -> Decimal:
    """``value`` as US dollars to the cent (an ``MTurkError`` for what is no amount, or a negative one)."""
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError) as exc:
        raise MTurkError(f"not an amount in US dollars: {value!r}") from exc
    if not amount.is_finite() or amount < 0:
        raise MTurkError(f"not an amount in US dollars: {value!r}")
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def fee_rate(assignments: int) -> Decimal:
    """MTurk's commission rate for a HIT with this many assignments."""
    return FEE_RATE_LARGE_HIT if assignments >= LARGE_HIT_ASSIGNMENTS else FEE_RATE


def _fee(amount: Decimal, rate: Decimal) -> Decimal:
    if amount <= 0:
        return Decimal("0.00")
    return max(MIN_FEE_USD, (amount * rate).quantize(CENT, rounding=ROUND_HALF_UP))


def assignment_fee_usd(reward_usd: Any, assignments: int) -> Decimal:
    """The fee MTurk adds to one assignment's reward."""
    return _fee(usd_amount(reward_usd), fee_rate(assignments))


def bonus_fee_usd(amount_usd: Any) -> Decimal:
    return _fee(usd_amount(amount_usd), FEE_RATE)


def hit_cost_usd(reward_usd: Any, assignments: int) -> Decimal:
    """Rewards plus fees of one HIT: assignments x (reward + fee)."""
    reward = usd_amount(reward_usd)
    return (reward + assignment_fee_usd(reward, assignments)) * int(assignments)


def batch_cost_usd(reward_usd: Any, assignments_per_hit: Iterable[int]) -> Decimal:
    return sum((hit_cost_usd(reward_usd, n) for n in assignments_per_hit), Decimal("0.00"))
