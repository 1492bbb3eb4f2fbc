"""HIT providers: one interface (``HitProvider``), three implementations (``local.py``, ``mturk/``, ``prolific/``).

A batch's ``provider`` field names one: ``local``, ``mturk`` (its ``settings["sandbox"]`` says whether
it is the requester sandbox; the CLI's ``mturk-sandbox`` sets it) or ``prolific``. Everything outside
``providers/`` -- the ``crowd`` and ``mturk`` commands, the admin's batch actions, the periodic sync,
quality's disqualification -- calls ``get_provider(batch)`` and only the methods below, and never
imports boto3 or an HTTP client itself. Operations on a batch return a JSON-able report (what the
commands print); a provider raises ``ProviderError`` (``errors.py``) for what cannot go ahead, and
its ``transport_errors`` (with ``error_text``) for what the platform answered or failed to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from .errors import InsufficientBalance, ProviderConfigurationError, ProviderError

if TYPE_CHECKING:
    from annotation.models import Assignment, Batch, Bonus, Worker
    from annotation.quality.verification import Confirmation

__all__ = ["HitProvider", "get_provider", "ProviderError", "ProviderConfigurationError", "InsufficientBalance"]


class HitProvider(Protocol):
    name: str
    currency: str  # of every amount the provider reports (the platform account's currency)
    transport_errors: tuple[type[BaseException], ...]  # what the platform's client raises besides ProviderError

    def error_text(self, exc: BaseException) -> str:
        """One line a researcher can act on, for one of ``transport_errors``."""

    def cost_estimate_usd(self, *, batch: Batch) -> Decimal | None:
        """What publishing the batch would cost (rewards + the platform's fees and taxes); None when free."""

    def publish_check(self, *, batch_settings: dict, cost_usd: Decimal | None = None) -> None:
        """Could a batch with these settings be published now (credentials, public URL, and given the cost,
        the balance)? Raises ``ProviderError``; nothing is spent."""

    def publish(self, *, batch: Batch, renew: Callable[[], None] | None = None) -> dict:
        """Make the batch's HITs available to workers (idempotent: what is already published is skipped).
        Called under the batch's publish claim (``annotation.publishing.batch_publish``, the one way in):
        it records what it is about to create before creating it, looks for what a request that died had
        created, and calls ``renew`` after each thing it creates (the claim's lease)."""

    def sync(self, *, batch: Batch) -> dict:
        """Verify the batch's unverified submissions with the platform (``annotation.quality.verification``, through
        ``confirm``) and copy its statuses; the report counts ``verified`` (for the first time), ``flagged``..."""

    def confirm(self, assignment: Assignment) -> Confirmation:
        """Crowd platforms: the platform's word on one stored, unverified assignment (same worker, same
        HIT or session?). Local annotators are logged in, so their assignments are verified when taken."""

    def approve(self, *, assignment: Assignment) -> None: ...

    def reject(self, *, assignment: Assignment, feedback: str) -> None: ...

    def approve_batch(self, *, batch: Batch) -> dict:
        """Pay the batch's verified submissions (and, where the platform allows it, reject the ones that failed
        the quality checks, with the reason); unverified and flagged ones are skipped and counted."""

    def pay_bonus(self, *, bonus: Bonus) -> None:
        """Idempotent: the bonus's ``unique_request_token`` guards against paying twice."""

    def bonus_batch(self, *, batch: Batch, amount: Any, reason: str, workers: Iterable[str] | None = None) -> dict:
        """Pay ``amount`` once to each worker of the batch with verified work (or those named); idempotent."""

    def expire(self, *, batch: Batch) -> dict:
        """No new work on the batch from now on (MTurk: expire the HITs; Prolific: stop the study)."""

    def balance(self) -> dict | None:
        """The account's balance as the platform reports it; None where there is none (local)."""

    def disqualify(self, *, worker: Worker, reason: str) -> None:
        """Bar the worker from further HITs (MTurk: the block qualification; Prolific: the blocklist group;
        local: the account)."""

    def reinstate(self, *, worker: Worker) -> None: ...


def get_provider(batch_or_name) -> HitProvider:
    """The provider of a batch (or by name: ``local``, ``mturk``, ``mturk-sandbox``, ``prolific``)."""
    name = batch_or_name if isinstance(batch_or_name, str) else batch_or_name.provider
    sandbox = name == "mturk-sandbox" or (
        not isinstance(batch_or_name, str) and bool((batch_or_name.settings or {}).get("sandbox"))
    )
    if name == "local":
        from .local import LocalProvider

        return LocalProvider()
    if name in {"mturk", "mturk-sandbox"}:
        from .mturk import MTurkProvider

        return MTurkProvider(sandbox=sandbox)
    if name == "prolific":
        from .prolific import ProlificProvider

        return ProlificProvider()
    raise LookupError(f"unknown HIT provider {name!r}: choose local, mturk-sandbox, mturk or prolific")
