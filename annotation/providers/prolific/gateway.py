"""``ProlificProvider``: the ``HitProvider`` on Prolific (API v1).

A batch is one study (an EASL round's batch too). Its external study URL is
``PARAFORGE_PUBLIC_URL/prolific/<batch id>/start/`` with Prolific's ``PROLIFIC_PID``, ``STUDY_ID`` and
``SESSION_ID`` URL parameters; a participant does ``hits_per_session`` HITs there in a row
(``sessions.py``) and is sent back with one of two completion codes, both made here before the study is
created and kept in ``Batch.provider_state``:

* ``completion_code`` (code type ``COMPLETED``, action ``MANUALLY_REVIEW``): the work is done; ``approve``
  pays it once ``sync`` has verified it (Prolific's own auto-approval would pay before our checks);
* ``failed_code`` (``FAILED_ATTENTION_CHECK``, actions ``ADD_TO_PARTICIPANT_GROUP`` -- the blocklist group
  -- and ``MANUALLY_REVIEW``): the participant failed the quality checks mid-session; Prolific itself puts
  them in the blocklist group, which every study this provider creates excludes
  (``participant_group_blocklist``), and ``approve`` rejects the session (``FAILED_CHECK``) when it was
  ParaBank's instructed attention check that failed -- the kind of check Prolific's policy lets a
  researcher reject for -- and pays it otherwise.

``sync`` reads the study's submissions and counts a stored assignment only when Prolific reports its
session (the submission id) for the same participant, finished; a returned or timed-out session, or one
Prolific has never heard of once the study's maximum time has passed, is flagged and never counted.

Prolific has no idempotency tokens. A batch is published under its publish claim (``annotation.publishing``:
one publish of a batch at a time); before a study is created its internal name (batch, round and the
completion code, kept first) is recorded in ``provider_state["study_requests"]``, and a publish that finds
such a request without its study looks for a draft of that name (the study a request that died had created)
before creating one. A bonus batch is created once and its id stored before it is paid, so a re-run pays the
same one.

Why one module of over 600 lines: ``ProlificProvider`` mirrors Prolific's API v1 operation by operation, each
method one ``HitProvider`` operation over the same client, workspace, blocklist group and provider state; what
is not a call already lives beside it (``study``: a batch's study settings and session size, ``sessions``: a
participant's session, ``approval``: which sessions are paid or rejected, ``fees``: Prolific's service fee).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.utils import timezone

from annotation.batch_settings import BatchSettingsError, reward_usd_check
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    Bonus,
    ProlificSession,
    Verification,
    Worker,
)
from annotation.quality.verification import Confirmation, submissions_verify

from ..common import bonus_recipients, provider_state, provider_state_save, public_url_check
from ..errors import InsufficientBalance, ProviderConfigurationError, ProviderError
from .approval import ATTENTION_REJECTION, REJECT_MESSAGE_MIN, approval_plan, session_payable
from .client import ProlificClient, ProlificError
from .fees import prolific_cost, study_places, to_cents
from .study import (
    FINISHED,
    RUNNING,
    batch_prolific_config,
    batch_studies,
    prolific_batch_required,
    session_assignments,
    session_id,
    session_of,
    start_url,
    studies_required,
    study_codes,
)


class ProlificProvider:
    """``HitProvider`` on Prolific; ``client`` may be given (tests pass one aimed at the stub)."""

    name = "prolific"
    transport_errors: tuple[type[BaseException], ...] = ()  # the client raises ProlificError (a ProviderError)

    def __init__(self, client: ProlificClient | None = None):
        self.client = client or ProlificClient()
        self.currency = settings.PROLIFIC_CURRENCY
        self._submissions: dict[str, dict] | None = None
        self._workspace_id: str | None = None
        self._blocklist_group_id: str | None = None

    @staticmethod
    def error_text(exc: BaseException) -> str:
        return str(exc)

    # --- account -------------------------------------------------------------------------------

    def workspace_id(self) -> str:
        """``PROLIFIC_WORKSPACE_ID``, else the account's only workspace."""
        if self._workspace_id:
            return self._workspace_id
        if settings.PROLIFIC_WORKSPACE_ID:
            self._workspace_id = settings.PROLIFIC_WORKSPACE_ID
            return self._workspace_id
        found = (self.client.request("GET", "/api/v1/workspaces/") or {}).get("results") or []
        if len(found) != 1:
            raise ProviderConfigurationError(
                f"the Prolific account has {len(found)} workspaces: set PROLIFIC_WORKSPACE_ID to the one to use"
            )
        self._workspace_id = found[0]["id"]
        return self._workspace_id

    def balance(self) -> dict:
        """{"provider", "currency", "available", "total"} (major units) as Prolific reports the workspace's."""
        answer = self.client.request("GET", f"/api/v1/workspaces/{self.workspace_id()}/balance/") or {}
        currency = answer.get("currency_code") or self.currency

        def major(cents):
            return None if cents is None else str((Decimal(cents) / 100).quantize(Decimal("0.01")))

        return {
            "provider": self.name,
            "workspace": self.workspace_id(),
            "currency": currency,
            "available": major(answer.get("available_balance")),
            "total": major(answer.get("total_balance")),
        }

    def check_balance(self, *, cost: Decimal) -> Decimal:
        available = Decimal(self.balance()["available"] or "0")
        if available < cost:
            raise InsufficientBalance(
                f"the Prolific workspace has {available} {self.currency} available but this study costs {cost} "
                f"{self.currency} (rewards, Prolific's fee and VAT); add funds or publish fewer HITs"
            )
        return available

    def blocklist_group_id(self) -> str:
        """Find (by name, in the workspace) or create the participant group that later studies exclude."""
        if self._blocklist_group_id:
            return self._blocklist_group_id
        name = settings.PROLIFIC_BLOCKLIST_GROUP_NAME
        workspace = self.workspace_id()
        groups = (
            self.client.request("GET", "/api/v1/participant-groups/", params={"workspace_id": workspace}) or {}
        ).get("results") or []
        for group in groups:
            if group.get("name") == name and not group.get("is_deleted"):
                self._blocklist_group_id = group["id"]
                return self._blocklist_group_id
        created = self.client.request(
            "POST",
            "/api/v1/participant-groups/",
            json={
                "name": name,
                "workspace_id": workspace,
                "description": "Participants who failed Paraforge's quality checks; Paraforge's studies exclude them.",
            },
        )
        self._blocklist_group_id = created["id"]
        return self._blocklist_group_id

    # --- costs and checks ------------------------------------------------------------------------

    def places(self, *, batch: Batch, config: dict | None = None, rounds: Iterable[int] | None = None) -> int:
        """Places of the batch's studies (one per EASL round; ``rounds``: only those)."""
        config = config or batch_prolific_config(batch.settings)
        hits = batch.hits.all() if rounds is None else batch.hits.filter(round__in=list(rounds))
        by_round: dict[int, list[int]] = {}
        for round_number, assignments in hits.values_list("round", "max_assignments"):
            by_round.setdefault(round_number, []).append(assignments)
        return sum(study_places(n, config["hits_per_session"]) for n in by_round.values())

    def cost(self, *, batch: Batch, rounds: Iterable[int] | None = None) -> dict[str, Decimal]:
        config = batch_prolific_config(batch.settings)
        return prolific_cost(
            reward=config["reward_per_session"],
            places=self.places(batch=batch, config=config, rounds=rounds),
            fee_rate=Decimal(settings.PROLIFIC_SERVICE_FEE_RATE),
            vat_rate=Decimal(settings.PROLIFIC_VAT_RATE),
        )

    def cost_estimate_usd(self, *, batch: Batch) -> Decimal:
        """The study's total in the account's currency (``currency``): rewards + Prolific's fee + VAT."""
        return self.cost(batch=batch)["total"]

    def publish_check(self, *, batch_settings: dict, cost_usd: Decimal | None = None) -> None:
        """The token, the https public URL, the settings and, given the cost, the balance; nothing is spent."""
        config = batch_prolific_config(batch_settings)
        public_url_check(config["public_url"], platform="Prolific")
        self.client.check()
        if cost_usd is not None:
            self.check_balance(cost=cost_usd)

    # --- the study -------------------------------------------------------------------------------

    def _filters(self, config: dict, blocklist: str) -> list[dict]:
        """Prolific filters: approval rate and count (ranges), first language and country of residence (choices,
        given by Prolific's name or id and resolved against its filter list), the blocklist group."""
        filters: list[dict] = []
        if config["min_approval_rate"] > 0:
            filters.append(
                {"filter_id": "approval_rate", "selected_range": {"lower": config["min_approval_rate"], "upper": 100}}
            )
        if config["min_approved_submissions"] > 0:
            filters.append(
                {"filter_id": "approval_numbers", "selected_range": {"lower": config["min_approved_submissions"]}}
            )
        wanted = {"first-language": config["first_languages"], "current-country-of-residence": config["countries"]}
        if any(wanted.values()):
            listing = (
                self.client.request("GET", "/api/v1/filters/", params={"workspace_id": self.workspace_id()}) or {}
            ).get("results") or []
            choices = {f.get("filter_id"): f.get("choices") or {} for f in listing}
            for filter_id, names in wanted.items():
                if names:
                    filters.append(
                        {
                            "filter_id": filter_id,
                            "selected_values": self._choice_ids(filter_id, names, choices.get(filter_id, {})),
                        }
                    )
        filters.append({"filter_id": "participant_group_blocklist", "selected_values": [blocklist]})
        return filters

    @staticmethod
    def _choice_ids(filter_id: str, names: list[str], choices: dict) -> list[str]:
        by_label = {str(label).casefold(): str(key) for key, label in choices.items()}
        ids = []
        for name in names:
            key = name if name in choices else by_label.get(name.casefold())
            if key is None:
                close = sorted(
                    label for label in map(str, choices.values()) if label.casefold().startswith(name[:3].casefold())
                )[:5]
                raise ProviderConfigurationError(
                    f"Prolific's filter {filter_id!r} has no choice {name!r}"
                    + (f" (did you mean {close}?)" if close else "")
                )
            ids.append(key)
        return ids

    def _internal_name(self, batch: Batch, round_number: int) -> str:
        return f"paraforge batch {batch.pk} round {round_number} ({provider_state(batch).get('completion_code')})"

    def _study_payload(self, *, batch: Batch, round_number: int, config: dict, places: int, group: str) -> dict:
        state = provider_state(batch)
        return {
            "name": config["title"],
            "internal_name": self._internal_name(batch, round_number),
            "description": config["description"],
            "external_study_url": start_url(public_url_check(config["public_url"], platform="Prolific"), batch.pk),
            "prolific_id_option": "url_parameters",
            "completion_codes": [
                {
                    "code": state["completion_code"],
                    "code_type": "COMPLETED",
                    "actions": [{"action": "MANUALLY_REVIEW"}],
                },
                {
                    "code": state["failed_code"],
                    "code_type": "FAILED_ATTENTION_CHECK",
                    "actions": [
                        {"action": "ADD_TO_PARTICIPANT_GROUP", "participant_group": group},
                        {"action": "MANUALLY_REVIEW"},
                    ],
                },
            ],
            "total_available_places": places,
            "estimated_completion_time": config["estimated_minutes"],
            "maximum_allowed_time": config["max_minutes"],
            "reward": to_cents(config["reward_per_session"]),
            "device_compatibility": ["desktop", "tablet"],
            "filters": self._filters(config, group),
        }

    def _find_draft(self, batch: Batch, round_number: int) -> dict | None:
        listing = self.client.request("GET", "/api/v1/studies/", params={"state": "UNPUBLISHED"}) or {}
        name = self._internal_name(batch, round_number)
        return next((s for s in listing.get("results") or [] if s.get("internal_name") == name), None)

    def publish(self, *, batch: Batch, renew: Callable[[], None] | None = None) -> dict:
        """Create a study for each round that has none (once: its name is recorded first, and a draft of that
        name is taken instead of a new one), check the balance, then publish them (or start them again when
        paused). A fixed batch is one study; each EASL round's new HITs make one more. ``renew``: called after
        each study created or published (the publish claim's lease, ``annotation.publishing``)."""
        prolific_batch_required(batch)
        config = batch_prolific_config(batch.settings)
        state = study_codes(batch)
        public_url = public_url_check(config["public_url"], platform="Prolific")
        rounds = sorted(set(batch.hits.values_list("round", flat=True)))
        studies = batch_studies(batch)
        for round_number in rounds:
            if round_number in studies:
                continue
            group = self.blocklist_group_id()
            places = self.places(batch=batch, config=config, rounds=[round_number])
            requests = dict(provider_state(batch).get("study_requests") or {})
            name = self._internal_name(batch, round_number)
            study = self._find_draft(batch, round_number) if requests.get(str(round_number)) == name else None
            if study is None:
                provider_state_save(batch, study_requests={**requests, str(round_number): name})
                study = self.client.request(
                    "POST",
                    "/api/v1/studies/",
                    json=self._study_payload(
                        batch=batch, round_number=round_number, config=config, places=places, group=group
                    ),
                )
            studies[round_number] = study["id"]
            state = provider_state_save(
                batch, studies={str(r): sid for r, sid in studies.items()}, blocklist_group_id=group
            )
            if renew is not None:
                renew()
        report = {
            "batch": batch.pk,
            "provider": self.name,
            "places": self.places(batch=batch, config=config),
            "hits_per_session": config["hits_per_session"],
            "reward_per_session": str(config["reward_per_session"]),
            "estimated_minutes": config["estimated_minutes"],
            "currency": self.currency,
            **{f"cost_{k}": str(v) for k, v in self.cost(batch=batch).items()},
            "completion_code": state["completion_code"],
            "external_study_url": start_url(public_url, batch.pk),
            "studies": {},
        }
        for round_number, study_id in sorted(studies.items()):
            status = (self.client.request("GET", f"/api/v1/studies/{study_id}/") or {}).get("status")
            if status in ("UNPUBLISHED", "PAUSED"):
                places = self.places(batch=batch, config=config, rounds=[round_number])
                quote = (
                    self.client.request(
                        "POST",
                        "/api/v1/study-cost-calculator/",
                        json={"reward": to_cents(config["reward_per_session"]), "total_available_places": places},
                    )
                    or {}
                )
                if quote.get("total_cost") is not None:
                    report["cost_prolific_quote"] = str((Decimal(quote["total_cost"]) / 100).quantize(Decimal("0.01")))
                round_cost = self.cost(batch=batch, rounds=[round_number])["total"]
                report["balance"] = str(self.check_balance(cost=round_cost if status == "UNPUBLISHED" else Decimal(0)))
                self.client.request(
                    "POST",
                    f"/api/v1/studies/{study_id}/transition/",
                    json={"action": "PUBLISH" if status == "UNPUBLISHED" else "START"},
                )
                status = "ACTIVE"
                if renew is not None:
                    renew()
            report["studies"][round_number] = {"study": study_id, "study_status": status}
        report["study"], report["study_status"] = (
            (report["studies"][max(studies)]["study"], report["studies"][max(studies)]["study_status"])
            if studies
            else (None, None)
        )
        if batch.status == BatchStatus.DRAFT:
            batch.status = BatchStatus.PUBLISHED
            batch.save(update_fields=["status"])
        return report

    def _transition(self, batch: Batch, action: str) -> dict:
        """The same transition of every study of the batch (a study already there is left alone)."""
        prolific_batch_required(batch)
        report = {"batch": batch.pk, "provider": self.name, "action": action, "studies": {}}
        for round_number, study in sorted(studies_required(batch).items()):
            current = (self.client.request("GET", f"/api/v1/studies/{study}/") or {}).get("status")
            done = {"PAUSE": {"PAUSED", "AWAITING REVIEW", "COMPLETED"}, "STOP": {"AWAITING REVIEW", "COMPLETED"}}
            if current not in done.get(action, set()):
                current = (
                    self.client.request("POST", f"/api/v1/studies/{study}/transition/", json={"action": action}) or {}
                ).get("status")
            report["studies"][round_number] = {"study": study, "study_status": current}
        report["study_status"] = report["studies"][max(report["studies"])]["study_status"]
        return report

    def pause(self, *, batch: Batch) -> dict:
        return self._transition(batch, "PAUSE")

    def expire(self, *, batch: Batch) -> dict:
        """Stop the study: no new participants; sessions under way may still finish and be paid."""
        return self._transition(batch, "STOP")

    # --- results ---------------------------------------------------------------------------------

    def study_submissions(self, batch: Batch) -> dict[str, dict]:
        """The submissions of the batch's studies by id (Prolific's SESSION_ID; each with its ``study``),
        following the listings' next links."""
        found: dict[str, dict] = {}
        for study in studies_required(batch).values():
            url: str | None = f"/api/v1/studies/{study}/submissions/"
            while url:
                page = self.client.request("GET", url) or {}
                for submission in page.get("results") or []:
                    found[submission["id"]] = {**submission, "study": study}
                url = ((page.get("_links") or {}).get("next") or {}).get("href")
        return found

    def confirm(self, assignment: Assignment) -> Confirmation:
        """Prolific's word on a stored assignment: its session must be a finished submission of the same
        participant in this study."""
        session = session_of(assignment)
        if self._submissions is not None:
            remote = self._submissions.get(session)
        else:
            try:
                remote = self.client.request("GET", f"/api/v1/submissions/{session}/")
            except ProlificError as exc:
                if exc.status != 404:
                    raise
                remote = None
        if remote is None:
            return Confirmation("pending")
        participant = remote.get("participant_id") or remote.get("participant")
        status = remote.get("status")
        if participant != assignment.worker.external_id:
            return Confirmation(
                "denied",
                {
                    "session": session,
                    "stored_participant": assignment.worker.external_id,
                    "prolific_participant": participant,
                },
            )
        if status in FINISHED:
            return Confirmation("confirmed", {"status": status})
        if status in RUNNING:
            return Confirmation("pending")
        return Confirmation(
            "denied",
            {
                "session": session,
                "prolific_status": status,
                "reason": "the participant withdrew from the study on Prolific",
            },
        )

    def session_live(self, *, participant: str, study: str, session_id: str) -> str:
        """What Prolific says of a session a participant arrives with: ``live`` (a running submission of this
        participant in this study), ``ended`` (theirs, but returned, timed out or already submitted) or
        ``unknown`` (no such submission, or another participant's or study's). One GET; a ``ProlificError``
        (``ProlificUnavailable`` when Prolific cannot be reached) is raised for the caller to refuse on."""
        try:
            remote = self.client.request("GET", f"/api/v1/submissions/{session_id}/") or {}
        except ProlificError as exc:
            if exc.status in (400, 404):
                return "unknown"
            raise
        if (remote.get("participant_id") or remote.get("participant")) != participant or remote.get(
            "study_id"
        ) != study:
            return "unknown"
        return "live" if remote.get("status") in RUNNING else "ended"

    def sync(self, *, batch: Batch) -> dict:
        """Verify the batch's unverified assignments against the study's submissions, copy Prolific's approvals
        and rejections to the verified ones, and list the sessions Prolific has that sent us nothing."""
        prolific_batch_required(batch)
        config = batch_prolific_config(batch.settings)
        self._submissions = submissions = self.study_submissions(batch)
        on_prolific = len(submissions)
        try:
            stored = list(
                Assignment.objects.filter(hit__batch=batch)
                .exclude(status=AssignmentStatus.ACCEPTED)
                .exclude(status=AssignmentStatus.EXPIRED)
                .select_related("worker", "hit", "campaign")
                .order_by("id")
            )
            result = submissions_verify(
                assignments=stored, confirm=self.confirm, deadline=timedelta(minutes=config["max_minutes"])
            )
            updated = 0
            status_of = {"APPROVED": AssignmentStatus.APPROVED, "REJECTED": AssignmentStatus.REJECTED}
            for assignment in stored:
                remote = self._submissions.get(session_of(assignment)) or {}
                new = status_of.get(remote.get("status"))
                if assignment.verification == Verification.VERIFIED and new and new != assignment.status:
                    Assignment.objects.filter(pk=assignment.pk).update(status=new)
                    updated += 1
            ours = {
                session_id(ext)
                for ext in Assignment.objects.filter(hit__batch=batch).values_list("external_assignment_id", flat=True)
            }
            missing = sorted(sid for sid, s in submissions.items() if sid not in ours and s.get("status") in FINISHED)
        finally:
            self._submissions = None
        provider_state_save(batch, missing=missing, last_sync=timezone.now().isoformat())
        flagged = dict(
            Assignment.objects.filter(hit__batch=batch, verification=Verification.FLAGGED)
            .order_by("id")
            .values_list("external_assignment_id", "verification_detail")
        )
        by_study: dict[str, list[str]] = {}
        for submission in submissions.values():
            by_study.setdefault(submission["study"], []).append(submission["id"])
        for study, sessions in by_study.items():  # the study Prolific has each session in, not the URL's
            ProlificSession.objects.filter(batch=batch, session_id__in=sessions).exclude(study_id=study).update(
                study_id=study
            )
        return {
            "batch": batch.pk,
            "provider": self.name,
            "studies": sorted(studies_required(batch).values()),
            "submissions_on_prolific": on_prolific,
            "stored": len(stored),
            "verified": len(result.verified),
            "flagged": len(result.flagged),
            "unconfirmed": len(result.pending),
            "missing": len(missing),
            "statuses_updated": updated,
            "flagged_ids": flagged,
            "missing_ids": missing,
            "unconfirmed_ids": result.pending,
        }

    # --- payments --------------------------------------------------------------------------------

    def approve(self, *, assignment: Assignment) -> None:
        """Approve the assignment's session (Prolific pays per session, so every HIT of it is approved); refused
        while Paraforge still has the session open (``approve_batch``'s rule)."""
        if not session_payable(assignment):
            raise ProviderError(
                f"Prolific session {session_of(assignment)} is still open here: it is paid once it "
                "has done its HITs (see `crowd approve`'s incomplete_sessions)"
            )
        self.client.request(
            "POST", f"/api/v1/submissions/{session_of(assignment)}/transition/", json={"action": "APPROVE"}
        )
        session_assignments(assignment).update(status=AssignmentStatus.APPROVED)

    def reject(self, *, assignment: Assignment, feedback: str) -> None:
        """Reject the assignment's session for failed checks, with the reason (Prolific's ``FAILED_CHECK``)."""
        feedback = " ".join((feedback or "").split())
        if not feedback:
            raise ProviderError("a rejection needs a reason that tells the participant why")
        if len(feedback) < REJECT_MESSAGE_MIN:
            feedback += (
                " The study's instructions asked for a score of 100 on a sentence identical to the "
                "reference; these checks were failed."
            )
        self.client.request(
            "POST",
            f"/api/v1/submissions/{session_of(assignment)}/transition/",
            json={"action": "REJECT", "message": feedback[:2000], "rejection_category": "FAILED_CHECK"},
        )
        session_assignments(assignment).update(status=AssignmentStatus.REJECTED, feedback=feedback[:1024])

    def approve_batch(self, *, batch: Batch) -> dict:
        """Approve in bulk the verified sessions ``approval.approval_plan`` pays, reject those that failed the
        instructed attention check, and list the sessions still open here (never paid: ``approval``)."""
        prolific_batch_required(batch)
        studies_required(batch)
        plan = approval_plan(
            Assignment.objects.filter(hit__batch=batch, status=AssignmentStatus.SUBMITTED)
            .select_related("worker", "hit")
            .order_by("id"),
            sessions=ProlificSession.objects.filter(batch=batch),
        )
        hits = int(batch_prolific_config(batch.settings)["hits_per_session"])
        report = {
            "batch": batch.pk,
            "provider": self.name,
            "approved": 0,
            "rejected": 0,
            "skipped_flagged": plan.skipped_flagged,
            "skipped_unverified": plan.skipped_unverified,
            "skipped_incomplete": len(plan.open_sessions),
            "incomplete_sessions": plan.incomplete(hits),
            "errors": {},
        }
        sessions = sorted(plan.approve)
        for start in range(0, len(sessions), 500):
            chunk = sessions[start : start + 500]
            self.client.request("POST", "/api/v1/submissions/bulk-approve/", json={"submission_ids": chunk})
            Assignment.objects.filter(pk__in=[pk for s in chunk for pk in plan.approve[s]]).update(
                status=AssignmentStatus.APPROVED
            )
            report["approved"] += len(chunk)
        for session, assignment in plan.reject.items():
            try:
                self.reject(assignment=assignment, feedback=ATTENTION_REJECTION)
                report["rejected"] += 1
            except ProlificError as exc:
                report["errors"][session] = str(exc)
        return report

    def _bonus_bulk(self, batch: Batch, study: str, bonuses: list[Bonus]) -> None:
        """Create (once: its id is kept) and pay one Prolific bulk bonus of one study for these unsent bonuses."""
        key = hashlib.sha256("|".join(sorted(b.unique_request_token for b in bonuses)).encode()).hexdigest()[:16]
        state = provider_state(batch)
        bulk_id = (state.get("bonus_payments") or {}).get(key)
        if bulk_id is None:
            csv_rows = "\n".join(f"{b.worker.external_id},{Decimal(b.amount_usd):.2f}" for b in bonuses)
            created = self.client.request(
                "POST", "/api/v1/submissions/bonus-payments/", json={"study_id": study, "csv_bonuses": csv_rows}
            )
            bulk_id = created["id"]
            provider_state_save(batch, bonus_payments={**(state.get("bonus_payments") or {}), key: bulk_id})
        self.client.request("POST", f"/api/v1/bulk-bonus-payments/{bulk_id}/pay/")
        Bonus.objects.filter(pk__in=[b.pk for b in bonuses], sent_at__isnull=True).update(sent_at=timezone.now())

    def _pay(self, batch: Batch, bonuses: list[Bonus]) -> None:
        """Pay unsent bonuses, one bulk payment per study (the study each participant's session was in)."""
        sessions = {session_of(b.assignment) for b in bonuses}
        study_of = dict(
            ProlificSession.objects.filter(batch=batch, session_id__in=sessions).values_list("session_id", "study_id")
        )
        fallback = max(studies_required(batch).items())[1]
        by_study: dict[str, list] = {}
        for bonus in bonuses:
            by_study.setdefault(study_of.get(session_of(bonus.assignment)) or fallback, []).append(bonus)
        for study, group in sorted(by_study.items()):
            self._bonus_bulk(batch, study, group)

    def pay_bonus(self, *, bonus: Bonus) -> None:
        bonus = Bonus.objects.select_related("assignment__hit__batch", "worker").get(pk=bonus.pk)
        if bonus.sent_at is None:
            self._pay(bonus.assignment.hit.batch, [bonus])

    def bonus_batch(self, *, batch: Batch, amount: Any, reason: str, workers: Iterable[str] | None = None) -> dict:
        """Pay ``amount`` once to each participant with verified work in the batch (or those named), as one
        Prolific bulk bonus per study; running it again with the same arguments pays nobody twice."""
        prolific_batch_required(batch)
        studies_required(batch)
        try:
            amount = reward_usd_check(amount, key="amount").quantize(Decimal("0.01"))
        except BatchSettingsError as exc:
            raise ProviderError(str(exc)) from exc
        reason = (reason or "").strip()
        if amount <= 0:
            raise ProviderError("a bonus must be more than 0.00")
        if not reason:
            raise ProviderError("a bonus needs a reason (kept with the payment)")
        digest = hashlib.sha256(f"{amount}|{reason}".encode()).hexdigest()[:16]
        bonuses = [
            Bonus.objects.get_or_create(
                unique_request_token=f"pf-prolific-{batch.pk}-{a.worker_id}-{digest}",
                defaults={"assignment": a, "worker": a.worker, "amount_usd": amount, "reason": reason},
            )[0]
            for a in bonus_recipients(batch, workers)
        ]
        unsent = [
            b
            for b in Bonus.objects.filter(pk__in=[b.pk for b in bonuses], sent_at__isnull=True)
            .select_related("assignment", "worker")
            .order_by("id")
        ]
        fee = prolific_cost(
            reward=amount,
            places=len(unsent),
            fee_rate=Decimal(settings.PROLIFIC_SERVICE_FEE_RATE),
            vat_rate=Decimal(settings.PROLIFIC_VAT_RATE),
        )
        if unsent:
            self._pay(batch, unsent)
        return {
            "batch": batch.pk,
            "provider": self.name,
            "currency": self.currency,
            "amount": str(amount),
            "paid": len(unsent),
            "already_paid": len(bonuses) - len(unsent),
            **{f"cost_{k}": str(v) for k, v in fee.items()},
        }

    # --- participants ----------------------------------------------------------------------------

    def disqualify(self, *, worker: Worker, reason: str) -> None:
        """Put the participant in the blocklist group every Paraforge study excludes."""
        self.client.request(
            "POST",
            f"/api/v1/participant-groups/{self.blocklist_group_id()}/participants/",
            json={"participant_ids": [worker.external_id]},
        )

    def reinstate(self, *, worker: Worker) -> None:
        self.client.request(
            "DELETE",
            f"/api/v1/participant-groups/{self.blocklist_group_id()}/participants/",
            json={"participant_ids": [worker.external_id]},
        )
