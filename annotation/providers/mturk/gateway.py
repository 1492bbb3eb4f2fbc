"""The MTurk gateway: ``MTurkProvider`` (the ``HitProvider`` on MTurk: block qualification, HIT type, publishing
ExternalQuestion HITs, sync with verification, payments -- approve, reject, bonus -- expiry, extension, worker
blocks) and bonus grants; what a batch's HITs are made of is ``hit_config``, MTurk's fee ``fees``.

Why one module of over 600 lines: the class mirrors MTurk's requester API operation by operation, each method
one ``HitProvider`` operation over the same client, retry policy, request tokens and provider state; cut in
two, each half would need the other's private helpers (``_call``, the token and state helpers).

Workers submit their judgments to our API first (the slider page then posts to ``turkSubmitTo``), where
they are stored as unverified. ``sync`` does not parse answers: it confirms every unverified assignment
with ``get_assignment`` (``confirm``, the provider step of ``annotation.quality.verification``: the worker and HIT
must match; a mismatch is flagged and never counted), reports the assignments MTurk has that we never
received, and copies MTurk's statuses to the verified ones.

Everything that costs money carries a ``UniqueRequestToken`` (HIT creation, extra assignments,
bonuses), so a retried call -- by ``mturk_retry`` or by a person re-running a command -- never spends
twice within MTurk's 24-hour token window.

Provider state lives in ``Batch.provider_state`` (hit type, block qualification, token nonce,
missing assignment ids, last sync; an assignment's verification is its own field); batch configuration is
the top level of ``Batch.settings`` (see ``BATCH_SETTING_KEYS``), defaults from the ``MTURK_*`` Django settings.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings
from django.utils import timezone

from annotation.quality.verification import Confirmation, submissions_verify

from ..common import bonus_recipients, provider_state as _state, provider_state_save as _save_state, public_url_check
from ..retry import RetryPolicy, call_with_retry
from . import client as mturk_client_module
from .client import error_code, error_message, is_transient, mturk_endpoint
from .fees import (
    LARGE_HIT_ASSIGNMENTS,
    InsufficientBalance,
    MTurkConfigurationError,
    MTurkError,
    batch_cost_usd,
    bonus_fee_usd,
    hit_cost_usd,
    usd_amount,
)
from .hit_config import (
    batch_mturk_config,
    external_question_xml,
    hit_page_url,
    qualification_requirements,
)

if TYPE_CHECKING:
    from annotation.models import Assignment, Batch, Bonus, Hit, Worker

ASSIGNMENT_STATUSES = ["Submitted", "Approved", "Rejected"]
_HIT_ID = re.compile(r"\b[A-Z0-9]{30}\b")
# MTurk remembers a UniqueRequestToken for 24 hours; an unfinished publish older than this is looked up instead
TOKEN_WINDOW = timedelta(hours=23)
_DUPLICATE_TURK_CODES = {"AWS.MechanicalTurk.HitAlreadyExists", "AWS.MechanicalTurk.DuplicateRequest"}


def _is_duplicate_request(error: ClientError) -> bool:
    """MTurk's answer to a UniqueRequestToken it has already seen: the first call went through."""
    turk_code = str(error.response.get("TurkErrorCode") or "")
    message = error_message(error)
    if turk_code in _DUPLICATE_TURK_CODES or any(code in message for code in _DUPLICATE_TURK_CODES):
        return True
    lowered = message.lower()
    return "uniquerequesttoken" in lowered or "unique request token" in lowered or "already exists" in lowered


def _fill_times(assignment: Assignment, remote: dict) -> None:
    """MTurk's accept and submit times where ours are missing (quality's time per HIT uses them)."""
    changed = []
    for field, key in (("accepted_at", "AcceptTime"), ("submitted_at", "SubmitTime")):
        if getattr(assignment, field) is None and isinstance(remote.get(key), datetime):
            setattr(assignment, field, remote[key])
            changed.append(field)
    if changed:
        assignment.save(update_fields=changed)


def _require_mturk_batch(batch: Batch, sandbox: bool) -> None:
    if batch.provider != "mturk":
        raise MTurkError(f"batch {batch.pk} is on provider {batch.provider!r}, not mturk")
    if bool((batch.settings or {}).get("sandbox")) != sandbox:
        where = "the sandbox" if (batch.settings or {}).get("sandbox") else "production MTurk"
        raise MTurkError(f"batch {batch.pk} belongs to {where}; use that provider for it")


@dataclass
class SyncReport:
    batch: int
    hits_checked: int = 0
    on_mturk: int = 0
    stored: int = 0
    verified: int = 0
    unconfirmed: int = 0
    flagged: int = 0
    missing: int = 0
    statuses_updated: int = 0

    def as_dict(self, *, flagged_ids: dict, missing_ids: list, unconfirmed_ids: list) -> dict:
        out = dict(self.__dict__)
        out.update(flagged_ids=flagged_ids, missing_ids=missing_ids, unconfirmed_ids=unconfirmed_ids)
        return out


class MTurkProvider:
    """``HitProvider`` on MTurk (``sandbox`` picks the requester sandbox). ``client`` may be given
    (tests pass a stubbed one); otherwise one is made on first use from the environment's keys."""

    transport_errors = (ClientError, BotoCoreError)

    @staticmethod
    def error_text(exc: BaseException) -> str:
        """What a researcher needs to read of a boto error."""
        if isinstance(exc, ClientError):
            return f"MTurk refused: {error_code(exc)}: {error_message(exc)}"
        return f"MTurk could not be reached: {exc}"

    def __init__(self, sandbox: bool, client=None, *, retry: RetryPolicy | None = None):
        self.sandbox = bool(sandbox)
        self.name = "mturk-sandbox" if self.sandbox else "mturk"
        self.currency = "USD"
        self._client = client
        self.retry = retry or RetryPolicy(max_attempts=settings.MTURK_MAX_ATTEMPTS)
        self._block_qualification_id: str | None = None

    @property
    def client(self):
        if self._client is None:
            self._client = mturk_client_module.mturk_client(sandbox=self.sandbox)
        return self._client

    def _call(self, operation: str, **params):
        return call_with_retry(
            lambda: getattr(self.client, operation)(**params), policy=self.retry, transient=is_transient
        )

    # --- account and set-up --------------------------------------------------------------------

    def balance(self) -> dict:
        """{"provider", "sandbox", "endpoint", "currency", "available_usd", "on_hold_usd"} as MTurk reports it."""
        response = self._call("get_account_balance")
        return {
            "provider": self.name,
            "sandbox": self.sandbox,
            "endpoint": mturk_endpoint(sandbox=self.sandbox),
            "currency": self.currency,
            "available_usd": response.get("AvailableBalance"),
            "on_hold_usd": response.get("OnHoldBalance"),
        }

    def balance_usd(self) -> Decimal:
        return Decimal(str(self.balance()["available_usd"] or "0"))

    def check_balance(self, *, cost_usd: Decimal) -> Decimal:
        """Refuse (``InsufficientBalance``) before anything is spent when the account cannot pay."""
        available = self.balance_usd()
        if available < cost_usd:
            raise InsufficientBalance(
                f"the MTurk account has ${available} available but this costs ${cost_usd} (rewards plus MTurk's "
                "fee); add funds or publish fewer HITs"
            )
        return available

    def block_qualification_id(self) -> str:
        """Find (by name, among the caller's own types) or create the qualification that blocks workers."""
        if self._block_qualification_id:
            return self._block_qualification_id
        name = settings.MTURK_BLOCK_QUALIFICATION_NAME
        params: dict = {"Query": name, "MustBeRequestable": False, "MustBeOwnedByCaller": True, "MaxResults": 100}
        while True:
            response = self._call("list_qualification_types", **params)
            for qual in response.get("QualificationTypes", []):
                if qual.get("Name") == name:
                    self._block_qualification_id = qual["QualificationTypeId"]
                    return self._block_qualification_id
            if not response.get("NextToken"):
                break
            params["NextToken"] = response["NextToken"]
        response = self._call(
            "create_qualification_type",
            Name=name,
            Keywords="paraforge, block, attention",
            Description=(
                "Workers who failed too many attention checks on Paraforge paraphrase-rating HITs; "
                "they may not take further HITs."
            ),
            QualificationTypeStatus="Active",
        )
        self._block_qualification_id = response["QualificationType"]["QualificationTypeId"]
        return self._block_qualification_id

    def hit_type_id(self, *, batch: Batch, config: dict) -> str:
        state = _state(batch)
        if state.get("hit_type_id"):
            return state["hit_type_id"]
        block = state.get("block_qualification_id") or self.block_qualification_id()
        response = self._call(
            "create_hit_type",
            AutoApprovalDelayInSeconds=config["auto_approval_delay_s"],
            AssignmentDurationInSeconds=config["assignment_duration_s"],
            Reward=str(config["reward_usd"]),
            Title=config["title"],
            Keywords=config["keywords"],
            Description=config["description"],
            QualificationRequirements=qualification_requirements(config, block_qualification_id=block),
        )
        _save_state(batch, hit_type_id=response["HITTypeId"], block_qualification_id=block)
        return response["HITTypeId"]

    def publish_check(self, *, batch_settings: dict, cost_usd: Decimal | None = None) -> None:
        """Could a batch with these batch settings be published now? The https public URL and the
        credentials (a client is made; nothing is sent), and given ``cost_usd`` the balance (one read-only
        call). Raises ``MTurkConfigurationError`` / ``InsufficientBalance``; nothing is spent."""
        public_url_check(
            (batch_settings or {}).get("public_url") or settings.PARAFORGE_PUBLIC_URL,
            platform="MTurk",
            error=MTurkConfigurationError,
        )
        self.client  # noqa: B018 - makes the client: no credentials -> MTurkConfigurationError
        if cost_usd is not None:
            self.check_balance(cost_usd=cost_usd)

    # --- costs ---------------------------------------------------------------------------------

    def cost_estimate_usd(self, *, batch: Batch) -> Decimal:
        config = batch_mturk_config(batch, sandbox=self.sandbox)
        return batch_cost_usd(config["reward_usd"], batch.hits.values_list("max_assignments", flat=True))

    # --- publishing ----------------------------------------------------------------------------

    def publish(self, *, batch: Batch, renew: Callable[[], None] | None = None) -> dict:
        """Create the batch's unpublished HITs on MTurk; HITs with an ``external_hit_id`` are skipped. The token
        nonce is stored before the first HIT is asked for, so each HIT's ``UniqueRequestToken`` is the same in
        every later publish: a HIT that a request which died had created is answered as a duplicate that
        names it, and is recorded instead of made twice (within MTurk's 24-hour token window). Past that
        window, a publish that finds an earlier one unfinished (``hits_pending_since``, kept until every HIT
        is recorded) first looks for its HITs by their ``RequesterAnnotation`` (``list_hits``). ``renew``:
        called after each HIT (the publish claim's lease, ``annotation.publishing``)."""
        from annotation.models import BatchStatus

        _require_mturk_batch(batch, self.sandbox)
        config = batch_mturk_config(batch, sandbox=self.sandbox)
        pending = list(batch.hits.filter(external_hit_id="").order_by("id"))
        unfinished = _state(batch).get("hits_pending_since")
        recovered = 0
        if pending and unfinished and timezone.now() - datetime.fromisoformat(unfinished) > TOKEN_WINDOW:
            recovered = self._recover_hits(batch, pending, config)
            pending = [hit for hit in pending if not hit.external_hit_id]
        report = {
            "batch": batch.pk,
            "sandbox": self.sandbox,
            "published": 0,
            "already_published": batch.hits.exclude(external_hit_id="").count(),
            "cost_usd": "0.00",
            "balance_usd": None,
            "hit_type_id": _state(batch).get("hit_type_id"),
            "recovered": recovered,
        }
        if not pending:
            if unfinished:
                _save_state(batch, hits_pending_since=None)
            return report
        public_url = public_url_check(config["public_url"], platform="MTurk", error=MTurkConfigurationError)
        cost = batch_cost_usd(config["reward_usd"], [hit.max_assignments for hit in pending])
        report["cost_usd"] = str(cost)
        report["balance_usd"] = str(self.check_balance(cost_usd=cost))
        hit_type = self.hit_type_id(batch=batch, config=config)
        report["hit_type_id"] = hit_type
        nonce = _state(batch).get("token_nonce") or _save_state(batch, token_nonce=secrets.token_hex(6))["token_nonce"]
        _save_state(batch, hits_pending_since=unfinished or timezone.now().isoformat())  # the intent, first
        for hit in pending:
            self._create_hit(
                hit=hit,
                hit_type=hit_type,
                config=config,
                token=f"pf-{nonce}-hit-{hit.pk}",
                url=hit_page_url(public_url, hit),
            )
            report["published"] += 1
            if renew is not None:
                renew()
        _save_state(batch, hits_pending_since=None)
        if batch.status != BatchStatus.PUBLISHED:
            batch.status = BatchStatus.PUBLISHED
            batch.save(update_fields=["status"])
        return report

    def _recover_hits(self, batch: Batch, pending: list[Hit], config: dict) -> int:
        """Record the pending HITs that MTurk already has (an unfinished publish made them, and their tokens'
        window is over), found by ``RequesterAnnotation`` among the account's HITs; how many were found."""
        wanted = {f"paraforge batch {batch.pk} hit {hit.pk}": hit for hit in pending}
        lifetime = timedelta(seconds=config["lifetime_s"])
        found = 0
        params: dict = {"MaxResults": 100}
        while wanted:
            response = self._call("list_hits", **params)
            for remote in response.get("HITs", []):
                hit = wanted.pop(remote.get("RequesterAnnotation") or "", None)
                if hit is not None:
                    hit.external_hit_id = remote["HITId"]
                    hit.expires_at = remote.get("Expiration") or timezone.now() + lifetime
                    hit.save(update_fields=["external_hit_id", "expires_at"])
                    found += 1
            if not response.get("NextToken"):
                break
            params["NextToken"] = response["NextToken"]
        return found

    def _create_hit(self, *, hit: Hit, hit_type: str, config: dict, token: str, url: str) -> None:
        try:
            response = self._call(
                "create_hit_with_hit_type",
                HITTypeId=hit_type,
                MaxAssignments=hit.max_assignments,
                LifetimeInSeconds=config["lifetime_s"],
                Question=external_question_xml(url, frame_height=config["frame_height"]),
                RequesterAnnotation=f"paraforge batch {hit.batch_id} hit {hit.pk}",
                UniqueRequestToken=token,
            )
            hit_id = response["HIT"]["HITId"]
            expiration = response["HIT"].get("Expiration")
        except ClientError as exc:
            # An earlier try created it (the answer was lost): MTurk names the HIT in its message.
            found = _HIT_ID.search(error_message(exc)) if _is_duplicate_request(exc) else None
            if not found:
                raise
            hit_id, expiration = found.group(0), None
        hit.external_hit_id = hit_id
        hit.expires_at = expiration or timezone.now() + timedelta(seconds=config["lifetime_s"])
        hit.save(update_fields=["external_hit_id", "expires_at"])

    # --- results -------------------------------------------------------------------------------

    def _remote_assignments(self, hit_id: str) -> list[dict]:
        params: dict = {"HITId": hit_id, "MaxResults": 100, "AssignmentStatuses": list(ASSIGNMENT_STATUSES)}
        found: list[dict] = []
        while True:
            response = self._call("list_assignments_for_hit", **params)
            found.extend(response.get("Assignments", []))
            if not response.get("NextToken") or not response.get("Assignments"):
                return found
            params["NextToken"] = response["NextToken"]

    def confirm(self, assignment: Assignment) -> Confirmation:
        """MTurk's word on a stored assignment (``get_assignment``): the verification step of ``sync``."""
        try:
            response = self._call("get_assignment", AssignmentId=assignment.external_assignment_id)
        except ClientError as exc:
            if error_code(exc) == "RequestError":
                return Confirmation("pending")  # not (yet) submitted on MTurk, or unknown there
            raise
        remote = response.get("Assignment", {})
        hit = assignment.hit
        if remote.get("WorkerId") != assignment.worker.external_id or remote.get("HITId") != hit.external_hit_id:
            return Confirmation(
                "denied",
                {
                    "hit": hit.pk,
                    "stored_worker": assignment.worker.external_id,
                    "mturk_worker": remote.get("WorkerId"),
                    "mturk_hit": remote.get("HITId"),
                },
            )
        _fill_times(assignment, remote)
        return Confirmation("confirmed", {"AssignmentStatus": remote.get("AssignmentStatus")})

    def sync(self, *, batch: Batch) -> dict:
        """Verify the batch's unverified assignments with MTurk (``annotation.quality.verification``), copy MTurk's
        statuses to the verified ones, and list the assignments MTurk has that we never received."""
        from annotation.models import Assignment, AssignmentStatus, Verification

        _require_mturk_batch(batch, self.sandbox)
        status_of = {
            "Submitted": AssignmentStatus.SUBMITTED,
            "Approved": AssignmentStatus.APPROVED,
            "Rejected": AssignmentStatus.REJECTED,
        }
        # a worker who saved on our page has at most the assignment's time left to submit it on MTurk
        deadline = timedelta(seconds=batch_mturk_config(batch, sandbox=self.sandbox)["assignment_duration_s"])
        missing: list[str] = []
        report = SyncReport(batch=batch.pk)
        remote: dict[str, dict] = {}
        stored: list[Assignment] = []
        for hit in batch.hits.exclude(external_hit_id="").order_by("id"):
            report.hits_checked += 1
            on_mturk = {a["AssignmentId"]: a for a in self._remote_assignments(hit.external_hit_id)}
            ours = list(hit.assignments.select_related("worker", "hit", "campaign").order_by("id"))
            report.on_mturk, report.stored = report.on_mturk + len(on_mturk), report.stored + len(ours)
            missing.extend(sorted(set(on_mturk) - {a.external_assignment_id for a in ours}))
            remote.update(on_mturk)
            stored += ours
        verification = submissions_verify(assignments=stored, confirm=self.confirm, deadline=deadline)
        for assignment in stored:
            if assignment.verification != Verification.VERIFIED:
                continue
            new_status = status_of.get((remote.get(assignment.external_assignment_id) or {}).get("AssignmentStatus"))
            if new_status and new_status != assignment.status:
                assignment.status = new_status
                assignment.save(update_fields=["status"])
                report.statuses_updated += 1
        report.verified, report.flagged = len(verification.verified), len(verification.flagged)
        report.missing, report.unconfirmed = len(missing), len(verification.pending)
        _save_state(batch, missing=missing, last_sync=timezone.now().isoformat())
        flagged_ids = dict(
            Assignment.objects.filter(hit__batch=batch, verification=Verification.FLAGGED)
            .order_by("id")
            .values_list("external_assignment_id", "verification_detail")
        )
        return report.as_dict(flagged_ids=flagged_ids, missing_ids=missing, unconfirmed_ids=verification.pending)

    # --- payments ------------------------------------------------------------------------------

    def approve(self, *, assignment: Assignment) -> None:
        from annotation.models import AssignmentStatus

        try:
            self._call("approve_assignment", AssignmentId=assignment.external_assignment_id)
        except ClientError as exc:
            # Already approved (by hand, or MTurk's auto-approval): that is what was wanted.
            if error_code(exc) != "RequestError" or self._remote_status(assignment) != "Approved":
                raise
        assignment.status = AssignmentStatus.APPROVED
        assignment.save(update_fields=["status"])

    def _remote_status(self, assignment: Assignment) -> str | None:
        try:
            response = self._call("get_assignment", AssignmentId=assignment.external_assignment_id)
        except ClientError:
            return None
        return response.get("Assignment", {}).get("AssignmentStatus")

    def approve_batch(self, *, batch: Batch) -> dict:
        """Approve every submitted, verified assignment of the batch (a flagged one is not the worker's, an
        unverified one not yet confirmed: run sync); errors are reported, not fatal."""
        from annotation.models import Assignment, AssignmentStatus, Verification

        _require_mturk_batch(batch, self.sandbox)
        todo = (
            Assignment.objects.filter(hit__batch=batch, status=AssignmentStatus.SUBMITTED)
            .exclude(hit__external_hit_id="")
            .select_related("worker")
            .order_by("id")
        )
        report = {"batch": batch.pk, "approved": 0, "skipped_flagged": 0, "skipped_unverified": 0, "errors": {}}
        for assignment in todo:
            if assignment.verification != Verification.VERIFIED:
                report[
                    "skipped_flagged" if assignment.verification == Verification.FLAGGED else "skipped_unverified"
                ] += 1
                continue
            try:
                self.approve(assignment=assignment)
                report["approved"] += 1
            except ClientError as exc:
                report["errors"][assignment.external_assignment_id] = f"{error_code(exc)}: {error_message(exc)}"
        return report

    def reject(self, *, assignment: Assignment, feedback: str) -> None:
        from annotation.models import AssignmentStatus

        feedback = (feedback or "").strip()
        if not feedback:
            raise MTurkError("a rejection needs feedback that tells the worker why")
        self._call(
            "reject_assignment", AssignmentId=assignment.external_assignment_id, RequesterFeedback=feedback[:1024]
        )
        assignment.status, assignment.feedback = AssignmentStatus.REJECTED, feedback[:1024]
        assignment.save(update_fields=["status", "feedback"])

    def pay_bonus(self, *, bonus: Bonus) -> None:
        """Send the bonus once: a sent bonus is skipped, and MTurk refuses a token it has already paid."""
        from annotation.models import Bonus

        bonus = Bonus.objects.select_related("assignment", "worker").get(pk=bonus.pk)
        if bonus.sent_at is not None:
            return
        try:
            self._call(
                "send_bonus",
                WorkerId=bonus.worker.external_id,
                BonusAmount=str(usd_amount(bonus.amount_usd)),
                AssignmentId=bonus.assignment.external_assignment_id,
                Reason=bonus.reason,
                UniqueRequestToken=bonus.unique_request_token,
            )
        except ClientError as exc:
            if not _is_duplicate_request(exc):
                raise
        Bonus.objects.filter(pk=bonus.pk, sent_at__isnull=True).update(sent_at=timezone.now())

    def bonus_batch(self, *, batch: Batch, amount: Any, reason: str, workers: Iterable[str] | None = None) -> dict:
        """Pay ``amount`` once to each worker (all with a verified assignment in the batch, or those named),
        on their latest verified assignment; the same command again pays nobody twice (``bonus_grant``)."""
        _require_mturk_batch(batch, self.sandbox)
        report = {
            "batch": batch.pk,
            "provider": self.name,
            "currency": self.currency,
            "amount": str(usd_amount(amount)),
            "fee_each": str(bonus_fee_usd(amount)),
            "paid": 0,
            "already_paid": 0,
            "errors": {},
        }
        for assignment in bonus_recipients(batch, workers):
            try:
                _, paid_now = bonus_grant(assignment=assignment, amount_usd=amount, reason=reason, provider=self)
            except ClientError as exc:
                report["errors"][assignment.worker.external_id] = self.error_text(exc)
                continue
            report["paid" if paid_now else "already_paid"] += 1
        return report

    # --- HIT lifetime --------------------------------------------------------------------------

    def expire(self, *, batch: Batch) -> dict:
        """Take the batch's HITs off MTurk now (ExpireAt in the past); submitted work is kept."""
        _require_mturk_batch(batch, self.sandbox)
        now = timezone.now()
        expired = 0
        for hit in batch.hits.exclude(external_hit_id="").order_by("id"):
            self._call(
                "update_expiration_for_hit", HITId=hit.external_hit_id, ExpireAt=datetime.fromtimestamp(0, tz=UTC)
            )
            hit.expires_at = now
            hit.save(update_fields=["expires_at"])
            expired += 1
        return {"batch": batch.pk, "expired": expired}

    def extend(self, *, batch: Batch, assignments: int) -> dict:
        """Add ``assignments`` to each published HIT (balance checked first; one token per HIT and target)."""
        _require_mturk_batch(batch, self.sandbox)
        if assignments < 1:
            raise MTurkError("extend by at least one assignment")
        hits = list(batch.hits.exclude(external_hit_id="").order_by("id"))
        crossing = [h.pk for h in hits if h.max_assignments < LARGE_HIT_ASSIGNMENTS <= h.max_assignments + assignments]
        if crossing:
            raise MTurkError(
                f"MTurk cannot extend a HIT created with fewer than {LARGE_HIT_ASSIGNMENTS} assignments "
                f"to {LARGE_HIT_ASSIGNMENTS} or more (HITs {crossing[:5]}); publish a new batch instead"
            )
        config = batch_mturk_config(batch, sandbox=self.sandbox)
        cost = sum(
            (
                hit_cost_usd(config["reward_usd"], h.max_assignments + assignments)
                - hit_cost_usd(config["reward_usd"], h.max_assignments)
                for h in hits
            ),
            Decimal("0.00"),
        )
        report = {"batch": batch.pk, "extended": 0, "assignments_added": 0, "cost_usd": str(cost)}
        if not hits:
            return report
        self.check_balance(cost_usd=cost)
        nonce = _state(batch).get("token_nonce") or _save_state(batch, token_nonce=secrets.token_hex(6))["token_nonce"]
        for hit in hits:
            target = hit.max_assignments + assignments
            try:
                self._call(
                    "create_additional_assignments_for_hit",
                    HITId=hit.external_hit_id,
                    NumberOfAdditionalAssignments=assignments,
                    UniqueRequestToken=f"pf-{nonce}-ext-{hit.pk}-{target}",
                )
            except ClientError as exc:
                if not _is_duplicate_request(exc):
                    raise
            hit.max_assignments = target
            hit.save(update_fields=["max_assignments"])
            report["extended"] += 1
            report["assignments_added"] += assignments
        return report

    # --- workers -------------------------------------------------------------------------------

    def disqualify(self, *, worker: Worker, reason: str) -> None:
        """Associate the block qualification (silently). ``Worker.disqualified`` is ``annotation.quality.workers``'s."""
        self._call(
            "associate_qualification_with_worker",
            QualificationTypeId=self.block_qualification_id(),
            WorkerId=worker.external_id,
            IntegerValue=1,
            SendNotification=False,
        )

    def reinstate(self, *, worker: Worker) -> None:
        self._call(
            "disassociate_qualification_from_worker",
            QualificationTypeId=self.block_qualification_id(),
            WorkerId=worker.external_id,
            Reason="reinstated after review",
        )


def bonus_token(*, assignment: Assignment, amount_usd: Decimal, reason: str) -> str:
    """The same bonus (assignment, amount, reason) always gets the same token: re-running never pays twice."""
    digest = hashlib.sha256(f"{assignment.pk}|{usd_amount(amount_usd)}|{reason.strip()}".encode()).hexdigest()[:24]
    return f"pf-bonus-{assignment.pk}-{digest}"


def bonus_grant(*, assignment: Assignment, amount_usd: Any, reason: str, provider: MTurkProvider) -> tuple[Bonus, bool]:
    """Record and pay a bonus; returns (bonus, paid now). Running it again with the same arguments pays nothing."""
    from annotation.models import Bonus

    amount = usd_amount(amount_usd)
    reason = (reason or "").strip()
    if amount <= 0:
        raise MTurkError("a bonus must be more than $0.00")
    if not reason:
        raise MTurkError("a bonus needs a reason (the worker sees it)")
    if assignment.hit_id is None or assignment.hit.batch.provider != "mturk":
        raise MTurkError(f"assignment {assignment.external_assignment_id} is not an MTurk assignment")
    if assignment.verification != "verified":
        raise MTurkError(
            f"assignment {assignment.external_assignment_id} is {assignment.verification}: only an "
            "assignment MTurk confirmed (run `mturk sync`) can get a bonus"
        )
    bonus, _ = Bonus.objects.get_or_create(
        unique_request_token=bonus_token(assignment=assignment, amount_usd=amount, reason=reason),
        defaults={"assignment": assignment, "worker": assignment.worker, "amount_usd": amount, "reason": reason},
    )
    already = bonus.sent_at is not None
    provider.pay_bonus(bonus=bonus)
    bonus.refresh_from_db()
    return bonus, not already
