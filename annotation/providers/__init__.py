"""HIT providers: one interface, two implementations (``local.py``, ``mturk.py``).

A batch's ``provider`` field names one: ``local``, ``mturk`` (its ``settings["sandbox"]`` says whether
it is the requester sandbox; the CLI's ``mturk-sandbox`` sets it). Services in ``annotation/`` call
``get_provider(batch)`` and never import boto3 themselves.
"""
from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from annotation.models import Assignment, Batch, Bonus, Worker
    from annotation.verification import Confirmation


class HitProvider(Protocol):
    name: str

    def cost_estimate_usd(self, *, batch: "Batch") -> Decimal | None:
        """What publishing the batch would cost (reward x assignments + fees); None when free (local)."""

    def publish(self, *, batch: "Batch") -> None:
        """Make the batch's HITs available to workers (idempotent: already published HITs are skipped)."""

    def sync(self, *, batch: "Batch") -> int:
        """Verify the batch's unverified submissions with the platform (``annotation.verification``, through
        ``confirm``) and copy its statuses; returns how many were verified for the first time."""

    def confirm(self, assignment: "Assignment") -> "Confirmation":
        """Crowd platforms: the platform's word on one stored, unverified assignment (same worker, same
        HIT?). Local annotators are logged in, so their assignments are verified when taken."""

    def approve(self, *, assignment: "Assignment") -> None: ...

    def reject(self, *, assignment: "Assignment", feedback: str) -> None: ...

    def pay_bonus(self, *, bonus: "Bonus") -> None:
        """Idempotent: the bonus's ``unique_request_token`` guards against paying twice."""

    def disqualify(self, *, worker: "Worker", reason: str) -> None:
        """Bar the worker from further HITs (MTurk: the block qualification; local: the account)."""

    def reinstate(self, *, worker: "Worker") -> None: ...

    def expire(self, *, batch: "Batch") -> None: ...


def get_provider(batch_or_name) -> HitProvider:
    """The provider of a batch (or by name: ``local``, ``mturk``, ``mturk-sandbox``)."""
    name = batch_or_name if isinstance(batch_or_name, str) else batch_or_name.provider
    sandbox = name == "mturk-sandbox" or (
        not isinstance(batch_or_name, str) and bool((batch_or_name.settings or {}).get("sandbox")))
    if name == "local":
        from .local import LocalProvider

        return LocalProvider()
    if name in {"mturk", "mturk-sandbox"}:
        from .mturk import MTurkProvider

        return MTurkProvider(sandbox=sandbox)
    raise LookupError(f"unknown HIT provider {name!r}: choose local, mturk-sandbox or mturk")
