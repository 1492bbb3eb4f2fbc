"""The MTurk provider against botocore's Stubber: every request is validated against the real API model
and compared with the parameters we expect; nothing leaves the machine."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from io import StringIO

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    Bonus,
    Campaign,
    Candidate,
    Hit,
    HitItem,
    Reference,
    Worker,
)
from annotation.providers import get_provider, mturk as mturk_module
from annotation.providers.mturk import (
    QUAL_APPROVAL_RATE,
    QUAL_APPROVED_HITS,
    QUAL_LOCALE,
    InsufficientBalance,
    MTurkConfigurationError,
    MTurkError,
    MTurkProvider,
    assignment_fee_usd,
    batch_cost_usd,
    bonus_fee_usd,
    bonus_grant,
    hit_cost_usd,
    is_transient,
    mturk_client,
)
from annotation.providers.retry import RetryPolicy, call_with_retry

pytestmark = pytest.mark.django_db

PUBLIC = "https://paraforge.example.org"
NS = "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd"
BLOCK = "3BLOCKQUALIFICATION0000000000X"
HIT_TYPE = "3HITTYPE0000000000000000000001"


def hit_id(n: int) -> str:
    return f"3HIT{n:026d}"


def asg_id(n: int) -> str:
    return f"3ASG{n:026d}"


@pytest.fixture
def client():
    return boto3.client("mturk", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")


@pytest.fixture
def stub(client):
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def provider(client, sleeps):
    return MTurkProvider(sandbox=True, client=client, retry=RetryPolicy(max_attempts=4, sleep=sleeps.append))


def make_batch(*, sandbox=True, hits=2, assignments=3, **settings) -> Batch:
    campaign = Campaign.objects.create(name=f"c{Campaign.objects.count()}")
    base = {"sandbox": sandbox, "public_url": PUBLIC, "reward_usd": "0.50"}
    batch = Batch.objects.create(
        campaign=campaign, provider="mturk", settings={**base, **settings}, provider_state={"token_nonce": "n0"}
    )
    for r in range(hits):
        ref = Reference.objects.create(
            campaign=campaign, ref_id=str(r), text=f"Reference {r} is here.", length_bucket=5
        )
        hit = Hit.objects.create(batch=batch, reference=ref, max_assignments=assignments)
        for p in range(5):
            cand = Candidate.objects.create(reference=ref, text=f"Candidate {p} of {r}.")
            HitItem.objects.create(hit=hit, candidate=cand, position=p)
    return batch


def stored_assignment(hit: Hit, ext: str, worker_id: str, verification: str = "unverified") -> Assignment:
    """An assignment as the submission API stores it (unverified until a sync confirms it)."""
    worker, _ = Worker.objects.get_or_create(provider="mturk", external_id=worker_id)
    return Assignment.objects.create(
        campaign=hit.batch.campaign,
        hit=hit,
        worker=worker,
        provider="mturk",
        external_assignment_id=ext,
        verification=verification,
    )


def stub_block_qualification(stub, *, existing=True):
    params = {
        "Query": "Paraforge: failed attention checks",
        "MustBeRequestable": False,
        "MustBeOwnedByCaller": True,
        "MaxResults": 100,
    }
    if existing:
        stub.add_response(
            "list_qualification_types",
            {
                "NumResults": 1,
                "QualificationTypes": [{"QualificationTypeId": BLOCK, "Name": "Paraforge: failed attention checks"}],
            },
            params,
        )
    else:
        stub.add_response(
            "list_qualification_types",
            {
                "NumResults": 1,
                "QualificationTypes": [
                    {"QualificationTypeId": "3OTHER", "Name": "Paraforge: failed attention checks (old)"}
                ],
            },
            params,
        )
        stub.add_response(
            "create_qualification_type",
            {"QualificationType": {"QualificationTypeId": BLOCK}},
            {
                "Name": "Paraforge: failed attention checks",
                "Keywords": ANY,
                "Description": ANY,
                "QualificationTypeStatus": "Active",
            },
        )


def question(hit: Hit) -> str:
    return (
        f'<ExternalQuestion xmlns="{NS}"><ExternalURL>{PUBLIC}/hits/{hit.pk}/</ExternalURL>'
        "<FrameHeight>0</FrameHeight></ExternalQuestion>"
    )


def stub_create_hit(stub, hit: Hit, n: int):
    stub.add_response(
        "create_hit_with_hit_type",
        {"HIT": {"HITId": hit_id(n), "HITTypeId": HIT_TYPE}},
        {
            "HITTypeId": HIT_TYPE,
            "MaxAssignments": hit.max_assignments,
            "LifetimeInSeconds": 7 * 86400,
            "Question": question(hit),
            "RequesterAnnotation": f"paraforge batch {hit.batch_id} hit {hit.pk}",
            "UniqueRequestToken": f"pf-n0-hit-{hit.pk}",
        },
    )


def throttled(stub, operation: str, code: str = "Throttling"):
    stub.add_client_error(operation, service_error_code=code, service_message="Rate exceeded", http_status_code=400)


# --- costs ------------------------------------------------------------------------------------


def test_fee_is_20_percent_and_40_percent_from_ten_assignments():
    assert assignment_fee_usd("0.50", 9) == Decimal("0.10")
    assert assignment_fee_usd("0.50", 10) == Decimal("0.20")
    assert hit_cost_usd("0.50", 3) == Decimal("1.80")  # 3 x (0.50 + 0.10)
    assert hit_cost_usd("0.50", 10) == Decimal("7.00")  # 10 x (0.50 + 0.20)
    assert batch_cost_usd("0.50", [3, 3, 10]) == Decimal("10.60")
    assert assignment_fee_usd("0.02", 3) == Decimal("0.01")  # MTurk's minimum commission
    assert bonus_fee_usd("1.00") == Decimal("0.20")
    assert bonus_fee_usd("0.03") == Decimal("0.01")


def test_cost_estimate_of_a_batch(provider):
    batch = make_batch(hits=2, assignments=3)
    assert provider.cost_estimate_usd(batch=batch) == Decimal("3.60")
    Hit.objects.filter(pk=batch.hits.first().pk).update(max_assignments=10)
    assert provider.cost_estimate_usd(batch=batch) == Decimal("8.80")  # 1.80 + 7.00
    assert isinstance(get_provider(batch).cost_estimate_usd(batch=batch), Decimal)  # no client needed


# --- publishing -------------------------------------------------------------------------------


def test_publish_creates_qualification_hit_type_and_hits(stub, client, sleeps):
    batch = make_batch(
        sandbox=False,
        hits=2,
        min_approval_rate=97,
        min_approved_hits=500,
        locales=["US"],
        keywords="paraphrase, rating",
    )
    provider = MTurkProvider(sandbox=False, client=client, retry=RetryPolicy(sleep=sleeps.append))
    hits = list(batch.hits.order_by("id"))
    stub.add_response("get_account_balance", {"AvailableBalance": "100.00"}, {})
    stub_block_qualification(stub, existing=False)
    stub.add_response(
        "create_hit_type",
        {"HITTypeId": HIT_TYPE},
        {
            "AutoApprovalDelayInSeconds": 3 * 86400,
            "AssignmentDurationInSeconds": 1800,
            "Reward": "0.50",
            "Title": ANY,
            "Keywords": "paraphrase, rating",
            "Description": ANY,
            "QualificationRequirements": [
                {
                    "QualificationTypeId": QUAL_APPROVAL_RATE,
                    "Comparator": "GreaterThanOrEqualTo",
                    "IntegerValues": [97],
                    "ActionsGuarded": "DiscoverPreviewAndAccept",
                },
                {
                    "QualificationTypeId": QUAL_APPROVED_HITS,
                    "Comparator": "GreaterThanOrEqualTo",
                    "IntegerValues": [500],
                    "ActionsGuarded": "DiscoverPreviewAndAccept",
                },
                {
                    "QualificationTypeId": QUAL_LOCALE,
                    "Comparator": "EqualTo",
                    "LocaleValues": [{"Country": "US"}],
                    "ActionsGuarded": "DiscoverPreviewAndAccept",
                },
                {
                    "QualificationTypeId": BLOCK,
                    "Comparator": "DoesNotExist",
                    "ActionsGuarded": "DiscoverPreviewAndAccept",
                },
            ],
        },
    )
    for n, hit in enumerate(hits):
        stub_create_hit(stub, hit, n)
    report = provider.publish(batch=batch)
    assert report["published"] == 2 and report["cost_usd"] == "3.60" and report["balance_usd"] == "100.00"
    assert [h.external_hit_id for h in batch.hits.order_by("id")] == [hit_id(0), hit_id(1)]
    assert all(h.expires_at is not None for h in batch.hits.all())
    batch.refresh_from_db()
    assert batch.status == BatchStatus.PUBLISHED
    assert batch.provider_state["hit_type_id"] == HIT_TYPE
    assert batch.provider_state["block_qualification_id"] == BLOCK
    # publishing again spends nothing and calls nothing (the Stubber fails on any unexpected call)
    again = provider.publish(batch=batch)
    assert again["published"] == 0 and again["already_published"] == 2


def test_sandbox_publish_drops_the_approved_hits_requirement_and_reuses_the_block(stub, provider):
    batch = make_batch(hits=1, locales=["US", "GB"])
    stub.add_response("get_account_balance", {"AvailableBalance": "10000.00"}, {})
    stub_block_qualification(stub, existing=True)
    stub.add_response(
        "create_hit_type",
        {"HITTypeId": HIT_TYPE},
        {
            "AutoApprovalDelayInSeconds": ANY,
            "AssignmentDurationInSeconds": ANY,
            "Reward": "0.50",
            "Title": ANY,
            "Keywords": ANY,
            "Description": ANY,
            "QualificationRequirements": [
                {
                    "QualificationTypeId": QUAL_APPROVAL_RATE,
                    "Comparator": "GreaterThanOrEqualTo",
                    "IntegerValues": [95],
                    "ActionsGuarded": "DiscoverPreviewAndAccept",
                },
                {
                    "QualificationTypeId": QUAL_LOCALE,
                    "Comparator": "In",
                    "LocaleValues": [{"Country": "US"}, {"Country": "GB"}],
                    "ActionsGuarded": "DiscoverPreviewAndAccept",
                },
                {
                    "QualificationTypeId": BLOCK,
                    "Comparator": "DoesNotExist",
                    "ActionsGuarded": "DiscoverPreviewAndAccept",
                },
            ],
        },
    )
    stub_create_hit(stub, batch.hits.get(), 0)
    provider.publish(batch=batch)
    assert batch.hits.get().external_hit_id == hit_id(0)


def test_a_publish_that_died_a_day_ago_has_its_hits_found_by_annotation_not_made_again(stub, provider):
    """MTurk forgets a UniqueRequestToken after 24 hours: the HITs an unfinished publish made are looked up."""
    batch = make_batch(hits=2)
    first, second = batch.hits.order_by("id")
    Batch.objects.filter(pk=batch.pk).update(
        provider_state={
            "token_nonce": "n0",
            "hit_type_id": HIT_TYPE,
            "hits_pending_since": (datetime.now(UTC) - timedelta(days=2)).isoformat(),
        }
    )
    batch.refresh_from_db()
    stub.add_response(
        "list_hits",
        {
            "NextToken": "page2",
            "NumResults": 1,
            "HITs": [{"HITId": hit_id(9), "RequesterAnnotation": "paraforge batch 999 hit 1"}],
        },
        {"MaxResults": 100},
    )
    stub.add_response(
        "list_hits",
        {
            "NumResults": 1,
            "HITs": [{"HITId": hit_id(7), "RequesterAnnotation": f"paraforge batch {batch.pk} hit {first.pk}"}],
        },
        {"MaxResults": 100, "NextToken": "page2"},
    )
    stub.add_response("get_account_balance", {"AvailableBalance": "100.00"}, {})
    stub_create_hit(stub, second, 8)  # only the HIT MTurk does not have
    report = provider.publish(batch=batch)
    assert (report["recovered"], report["published"], report["cost_usd"]) == (1, 1, "1.80")
    assert [h.external_hit_id for h in batch.hits.order_by("id")] == [hit_id(7), hit_id(8)]
    batch.refresh_from_db()
    assert batch.provider_state["hits_pending_since"] is None  # finished: the next publish looks up nothing


def test_insufficient_balance_refuses_to_publish(stub, provider):
    batch = make_batch(hits=2)
    stub.add_response("get_account_balance", {"AvailableBalance": "3.59"}, {})
    with pytest.raises(InsufficientBalance, match=r"\$3.59 available but this costs \$3.60"):
        provider.publish(batch=batch)
    assert not batch.hits.exclude(external_hit_id="").exists()
    batch.refresh_from_db()
    assert batch.status == BatchStatus.DRAFT and "hit_type_id" not in batch.provider_state


def test_publish_needs_an_https_public_url(provider, settings):
    settings.PARAFORGE_PUBLIC_URL = ""
    batch = make_batch(hits=1, public_url=None)
    with pytest.raises(MTurkConfigurationError, match="PARAFORGE_PUBLIC_URL"):
        provider.publish(batch=batch)


@pytest.mark.parametrize(
    "bad,message",
    [
        ({"lifetime_s": "x"}, "'lifetime_s': expected a whole number"),
        ({"reward_usd": "abc"}, "'reward_usd': expected an amount"),
        ({"assignment_duration_s": -5}, "'assignment_duration_s': -5 is out of range"),
    ],
)
def test_a_stored_bad_setting_is_refused_naming_the_key_before_mturk_is_called(stub, client, monkeypatch, bad, message):
    monkeypatch.setattr(mturk_module.client, "mturk_client", lambda sandbox: client)
    batch = make_batch(hits=1, **bad)  # stored by hand: create_hit_batch refuses it (test_batches)
    with pytest.raises(CommandError, match=rf"batch {batch.pk}: batch setting {message}"):
        _run("publish", str(batch.pk))
    with pytest.raises(MTurkConfigurationError, match=message):
        get_provider(batch).cost_estimate_usd(batch=batch)
    assert not batch.hits.exclude(external_hit_id="").exists()  # the stub saw no call at all


def test_throttled_hit_creation_is_retried_with_the_same_token(stub, provider, sleeps):
    batch = make_batch(hits=1)
    hit = batch.hits.get()
    batch.provider_state.update(hit_type_id=HIT_TYPE, block_qualification_id=BLOCK)
    batch.save()
    stub.add_response("get_account_balance", {"AvailableBalance": "10.00"}, {})
    throttled(stub, "create_hit_with_hit_type")
    throttled(stub, "create_hit_with_hit_type", code="ServiceUnavailable")
    stub_create_hit(stub, hit, 7)  # the same expected params, token included, on the third try
    provider.publish(batch=batch)
    assert batch.hits.get().external_hit_id == hit_id(7)
    assert len(sleeps) == 2 and all(s >= 0 for s in sleeps)


def test_a_hit_created_by_a_lost_earlier_call_is_recovered_not_duplicated(stub, provider):
    batch = make_batch(hits=1)
    batch.provider_state.update(hit_type_id=HIT_TYPE, block_qualification_id=BLOCK)
    batch.save()
    stub.add_response("get_account_balance", {"AvailableBalance": "10.00"}, {})
    stub.add_client_error(
        "create_hit_with_hit_type",
        service_error_code="RequestError",
        service_message=f"AWS.MechanicalTurk.HitAlreadyExists: HIT {hit_id(9)} already exists",
    )
    provider.publish(batch=batch)
    assert batch.hits.get().external_hit_id == hit_id(9)


def test_retry_gives_up_and_does_not_retry_invalid_requests(sleeps):
    policy = RetryPolicy(max_attempts=3, sleep=sleeps.append)
    calls = []

    def always_throttled():
        calls.append(1)
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "SendBonus")

    with pytest.raises(ClientError):
        call_with_retry(always_throttled, policy=policy, transient=is_transient)
    assert len(calls) == 3 and len(sleeps) == 2

    def invalid():
        calls.append(1)
        raise ClientError({"Error": {"Code": "RequestError", "Message": "You do not have enough funds"}}, "CreateHIT")

    calls.clear()
    with pytest.raises(ClientError):
        call_with_retry(invalid, policy=policy, transient=is_transient)
    assert len(calls) == 1


def test_backoff_grows_exponentially_and_is_capped():
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=5.0)
    policy.rng.seed(1)
    delays = [policy.delay(n) for n in range(8)]
    assert all(0 <= d <= min(5.0, 2**n) for n, d in enumerate(delays))


# --- sync -------------------------------------------------------------------------------------


def test_sync_verifies_flags_mismatches_reports_missing_and_copies_statuses(stub, provider):
    batch = make_batch(hits=1)
    hit = batch.hits.get()
    Hit.objects.filter(pk=hit.pk).update(external_hit_id=hit_id(1))
    hit.refresh_from_db()
    good = stored_assignment(hit, asg_id(1), "WGOOD")
    forged = stored_assignment(hit, asg_id(2), "WFORGED")
    pending = stored_assignment(hit, asg_id(3), "WLATE")
    accepted = datetime(2026, 1, 2, 3, 0, tzinfo=UTC)
    submitted = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    remote = [
        {
            "AssignmentId": asg_id(1),
            "WorkerId": "WGOOD",
            "HITId": hit_id(1),
            "AssignmentStatus": "Approved",
            "AcceptTime": accepted,
            "SubmitTime": submitted,
        },
        {"AssignmentId": asg_id(2), "WorkerId": "WREAL", "HITId": hit_id(1), "AssignmentStatus": "Submitted"},
        {"AssignmentId": asg_id(4), "WorkerId": "WNEVER", "HITId": hit_id(1), "AssignmentStatus": "Submitted"},
    ]
    listing = {"HITId": hit_id(1), "MaxResults": 100, "AssignmentStatuses": ["Submitted", "Approved", "Rejected"]}
    stub.add_response("list_assignments_for_hit", {"Assignments": remote[:2], "NextToken": "page2"}, listing)
    stub.add_response("list_assignments_for_hit", {"Assignments": remote[2:]}, {**listing, "NextToken": "page2"})
    stub.add_response("get_assignment", {"Assignment": remote[0]}, {"AssignmentId": asg_id(1)})
    stub.add_response("get_assignment", {"Assignment": remote[1]}, {"AssignmentId": asg_id(2)})
    stub.add_client_error(
        "get_assignment",
        service_error_code="RequestError",
        service_message="Assignment does not exist",
        expected_params={"AssignmentId": asg_id(3)},
    )
    report = provider.sync(batch=batch)
    assert report["verified"] == 1 and report["flagged"] == 1 and report["unconfirmed"] == 1
    assert report["missing"] == 1 and report["missing_ids"] == [asg_id(4)]
    assert report["flagged_ids"][asg_id(2)]["mturk_worker"] == "WREAL"
    assert report["statuses_updated"] == 1
    good.refresh_from_db(), forged.refresh_from_db(), pending.refresh_from_db()
    assert good.status == AssignmentStatus.APPROVED
    assert (good.accepted_at, good.submitted_at) == (accepted, submitted)  # for quality's time per HIT
    assert (good.verification, forged.verification, pending.verification) == ("verified", "flagged", "unverified")
    assert forged.status == AssignmentStatus.SUBMITTED  # flagged, never counted; nothing was sent to MTurk
    assert forged.verification_detail["mturk_worker"] == "WREAL"
    assert pending.status == AssignmentStatus.SUBMITTED

    # second sync: the verified one is not asked again, the flagged one stays excluded, the late one is retried
    remote[1]["AssignmentStatus"] = "Approved"  # MTurk's auto-approval must not un-flag it
    stub.add_response("list_assignments_for_hit", {"Assignments": remote}, listing)
    stub.add_response(
        "get_assignment",
        {
            "Assignment": {
                "AssignmentId": asg_id(3),
                "WorkerId": "WLATE",
                "HITId": hit_id(1),
                "AssignmentStatus": "Submitted",
            }
        },
        {"AssignmentId": asg_id(3)},
    )
    assert provider.sync(batch=batch)["verified"] == 1
    forged.refresh_from_db(), pending.refresh_from_db()
    assert (forged.verification, forged.status) == ("flagged", AssignmentStatus.SUBMITTED)
    assert pending.verification == "verified"


# --- payments ---------------------------------------------------------------------------------


def _published_assignment(ext=asg_id(1), worker="W1") -> Assignment:  # noqa: B008 - a fixed id, made once
    batch = make_batch(hits=1)
    hit = batch.hits.get()
    Hit.objects.filter(pk=hit.pk).update(external_hit_id=hit_id(1))
    hit.refresh_from_db()
    return stored_assignment(hit, ext, worker, verification="verified")


def test_approve_and_reject_with_feedback(stub, provider):
    first = _published_assignment()
    second = stored_assignment(first.hit, asg_id(2), "W2", verification="verified")
    stub.add_response("approve_assignment", {}, {"AssignmentId": asg_id(1)})
    stub.add_response(
        "reject_assignment", {}, {"AssignmentId": asg_id(2), "RequesterFeedback": "The reference copy was scored 12."}
    )
    provider.approve(assignment=first)
    with pytest.raises(MTurkError, match="feedback"):
        provider.reject(assignment=second, feedback="  ")
    provider.reject(assignment=second, feedback="The reference copy was scored 12.")
    first.refresh_from_db(), second.refresh_from_db()
    assert (first.status, second.status) == (AssignmentStatus.APPROVED, AssignmentStatus.REJECTED)
    assert second.feedback == "The reference copy was scored 12."


def test_approve_batch_skips_flagged_and_reports_errors(stub, provider):
    ok = _published_assignment()
    batch = ok.hit.batch
    stored_assignment(ok.hit, asg_id(2), "W2", verification="flagged")
    stored_assignment(ok.hit, asg_id(4), "W4")  # not yet confirmed by MTurk
    refused = stored_assignment(ok.hit, asg_id(3), "W3", verification="verified")
    stub.add_response("approve_assignment", {}, {"AssignmentId": asg_id(1)})
    stub.add_client_error(
        "approve_assignment",
        service_error_code="RequestError",
        service_message="This operation can be called with a status of: Submitted",
        expected_params={"AssignmentId": asg_id(3)},
    )
    stub.add_response(
        "get_assignment",
        {"Assignment": {"AssignmentId": asg_id(3), "AssignmentStatus": "Rejected"}},
        {"AssignmentId": asg_id(3)},
    )
    report = provider.approve_batch(batch=batch)
    assert report["approved"] == 1 and report["skipped_flagged"] == 1 and list(report["errors"]) == [asg_id(3)]
    assert report["skipped_unverified"] == 1
    refused.refresh_from_db()
    assert refused.status == AssignmentStatus.SUBMITTED


def test_retried_bonus_uses_the_same_token_and_never_pays_twice(stub, provider, sleeps):
    assignment = _published_assignment()
    params = {
        "WorkerId": "W1",
        "BonusAmount": "0.25",
        "AssignmentId": asg_id(1),
        "Reason": "Careful work",
        "UniqueRequestToken": ANY,
    }
    tokens = []
    throttled(stub, "send_bonus")
    stub.add_response("send_bonus", {}, params)
    client_send = provider.client.send_bonus

    def recording_send_bonus(**kw):
        tokens.append(kw["UniqueRequestToken"])
        return client_send(**kw)

    provider.client.send_bonus = recording_send_bonus
    bonus, paid_now = bonus_grant(assignment=assignment, amount_usd="0.25", reason="Careful work", provider=provider)
    assert paid_now and bonus.sent_at is not None and len(sleeps) == 1
    assert len(tokens) == 2 and tokens[0] == tokens[1] == bonus.unique_request_token
    # the same command again: the same Bonus row, nothing sent (the Stubber has no response queued)
    again, paid_again = bonus_grant(assignment=assignment, amount_usd="0.25", reason="Careful work", provider=provider)
    assert again.pk == bonus.pk and not paid_again and Bonus.objects.count() == 1
    provider.pay_bonus(bonus=bonus)


def test_bonus_already_paid_on_mturk_is_marked_sent(stub, provider):
    assignment = _published_assignment()
    bonus = Bonus.objects.create(
        assignment=assignment,
        worker=assignment.worker,
        amount_usd=Decimal("1.00"),
        reason="r",
        unique_request_token="tok-1",
    )
    stub.add_client_error(
        "send_bonus",
        service_error_code="RequestError",
        service_message="The UniqueRequestToken tok-1 has already been used (request 42)",
        expected_params={
            "WorkerId": "W1",
            "BonusAmount": "1.00",
            "AssignmentId": asg_id(1),
            "Reason": "r",
            "UniqueRequestToken": "tok-1",
        },
    )
    provider.pay_bonus(bonus=bonus)
    bonus.refresh_from_db()
    assert bonus.sent_at is not None


def test_bonus_refused_when_invalid(provider):
    assignment = _published_assignment()
    with pytest.raises(MTurkError, match="more than"):
        bonus_grant(assignment=assignment, amount_usd="0", reason="x", provider=provider)
    with pytest.raises(MTurkError, match="reason"):
        bonus_grant(assignment=assignment, amount_usd="1", reason=" ", provider=provider)
    assert not Bonus.objects.exists()


# --- HIT lifetime -----------------------------------------------------------------------------


def _published_batch(hits=2, assignments=3) -> Batch:
    batch = make_batch(hits=hits, assignments=assignments)
    for n, hit in enumerate(batch.hits.order_by("id")):
        Hit.objects.filter(pk=hit.pk).update(external_hit_id=hit_id(n))
    return batch


def test_expire_sets_expiration_in_the_past(stub, provider):
    batch = _published_batch()
    for n in range(2):
        stub.add_response(
            "update_expiration_for_hit", {}, {"HITId": hit_id(n), "ExpireAt": datetime.fromtimestamp(0, tz=UTC)}
        )
    assert provider.expire(batch=batch) == {"batch": batch.pk, "expired": 2}
    assert all(h.expires_at is not None for h in batch.hits.all())


def test_extend_adds_assignments_with_tokens_after_a_balance_check(stub, provider):
    batch = _published_batch()
    hits = list(batch.hits.order_by("id"))
    stub.add_response("get_account_balance", {"AvailableBalance": "5.00"}, {})
    for n, hit in enumerate(hits):
        stub.add_response(
            "create_additional_assignments_for_hit",
            {},
            {"HITId": hit_id(n), "NumberOfAdditionalAssignments": 2, "UniqueRequestToken": f"pf-n0-ext-{hit.pk}-5"},
        )
    report = provider.extend(batch=batch, assignments=2)
    assert report["assignments_added"] == 4 and report["cost_usd"] == "2.40"
    assert sorted(batch.hits.values_list("max_assignments", flat=True)) == [5, 5]


def test_extend_refuses_to_cross_ten_assignments(provider):
    batch = _published_batch(assignments=8)
    with pytest.raises(MTurkError, match="fewer than 10"):
        provider.extend(batch=batch, assignments=2)


# --- workers ----------------------------------------------------------------------------------


def test_disqualify_and_reinstate_through_the_block_qualification(stub, provider):
    worker = Worker.objects.create(provider="mturk", external_id="WBAD")
    stub_block_qualification(stub, existing=True)
    stub.add_response(
        "associate_qualification_with_worker",
        {},
        {"QualificationTypeId": BLOCK, "WorkerId": "WBAD", "IntegerValue": 1, "SendNotification": False},
    )
    stub.add_response(
        "disassociate_qualification_from_worker", {}, {"QualificationTypeId": BLOCK, "WorkerId": "WBAD", "Reason": ANY}
    )
    provider.disqualify(worker=worker, reason="failed 3 of 10 attention checks")
    provider.reinstate(worker=worker)
    assert provider.block_qualification_id() == BLOCK  # looked up once, then remembered


# --- client, checks, CLI ----------------------------------------------------------------------


def _clear_keys(monkeypatch):
    for name in (
        "MTURK_ACCESS_KEY_ID",
        "MTURK_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "MTURK_SESSION_TOKEN",
        "AWS_SESSION_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)


def test_client_takes_keys_from_the_environment_only(monkeypatch, settings):
    _clear_keys(monkeypatch)
    settings.MTURK_ENDPOINT_URL = None
    with pytest.raises(MTurkConfigurationError, match="MTURK_ACCESS_KEY_ID"):
        mturk_client(sandbox=True)
    monkeypatch.setenv("MTURK_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("MTURK_SECRET_ACCESS_KEY", "secret")
    sandbox = mturk_client(sandbox=True)
    assert sandbox.meta.endpoint_url == "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
    assert sandbox.meta.region_name == "us-east-1"
    assert mturk_client(sandbox=False).meta.endpoint_url == "https://mturk-requester.us-east-1.amazonaws.com"
    settings.MTURK_ENDPOINT_URL = "http://127.0.0.1:9999"
    assert mturk_client(sandbox=False).meta.endpoint_url == "http://127.0.0.1:9999"


def test_system_check_warns_about_production_without_credentials(monkeypatch, settings):
    from annotation.providers.checks import mturk_configuration_check

    _clear_keys(monkeypatch)
    settings.PARAFORGE_PUBLIC_URL = "https://paraforge.example.org"
    settings.PARAFORGE_HIT_PROVIDER = "local"
    assert mturk_configuration_check() == []
    settings.PARAFORGE_HIT_PROVIDER = "mturk"
    assert [m.id for m in mturk_configuration_check()] == ["annotation.W001"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "a")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "b")
    assert mturk_configuration_check() == []
    settings.PARAFORGE_PUBLIC_URL = "http://insecure.example.org"
    assert [m.id for m in mturk_configuration_check()] == ["annotation.W002"]


def _run(*args) -> dict:
    out = StringIO()
    call_command("mturk", *args, stdout=out)
    return json.loads(out.getvalue())


def test_cli_balance_publish_sync_and_bonus(stub, client, monkeypatch):
    monkeypatch.setattr(mturk_module.client, "mturk_client", lambda sandbox: client)
    stub.add_response("get_account_balance", {"AvailableBalance": "10000.00", "OnHoldBalance": "0.00"}, {})
    assert _run("balance", "--sandbox") == {
        "sandbox": True,
        "endpoint": ANY,
        "available_usd": "10000.00",
        "on_hold_usd": "0.00",
    }
    batch = make_batch(hits=1)
    batch.provider_state.update(hit_type_id=HIT_TYPE, block_qualification_id=BLOCK)
    batch.save()
    hit = batch.hits.get()
    stub.add_response("get_account_balance", {"AvailableBalance": "10000.00"}, {})
    stub_create_hit(stub, hit, 3)
    assert _run("publish", str(batch.pk), "--sandbox")["published"] == 1
    hit.refresh_from_db()
    stored_assignment(hit, asg_id(5), "W5")
    stub.add_response(
        "list_assignments_for_hit",
        {"Assignments": []},
        {"HITId": hit.external_hit_id, "MaxResults": 100, "AssignmentStatuses": ["Submitted", "Approved", "Rejected"]},
    )
    stub.add_response(
        "get_assignment",
        {
            "Assignment": {
                "AssignmentId": asg_id(5),
                "WorkerId": "W5",
                "HITId": hit.external_hit_id,
                "AssignmentStatus": "Submitted",
            }
        },
        {"AssignmentId": asg_id(5)},
    )
    assert _run("sync", str(batch.pk))["verified"] == 1
    stub.add_response(
        "send_bonus",
        {},
        {
            "WorkerId": "W5",
            "BonusAmount": "0.30",
            "AssignmentId": asg_id(5),
            "Reason": "thanks",
            "UniqueRequestToken": ANY,
        },
    )
    paid = _run("bonus", asg_id(5), "0.3", "thanks")
    assert paid["amount_usd"] == "0.30" and paid["fee_usd"] == "0.06" and paid["paid_now"] is True
    assert _run("bonus", asg_id(5), "0.30", "thanks")["paid_now"] is False


def _crowd(*args) -> dict:
    out = StringIO()
    call_command("crowd", *args, stdout=out)
    return json.loads(out.getvalue())


def test_the_crowd_cli_runs_an_mturk_batch_as_the_mturk_cli_does(stub, client, monkeypatch):
    monkeypatch.setattr(mturk_module.client, "mturk_client", lambda sandbox: client)
    batch = make_batch(hits=1)
    batch.provider_state.update(hit_type_id=HIT_TYPE, block_qualification_id=BLOCK)
    batch.save()
    hit = batch.hits.get()
    stub.add_response("get_account_balance", {"AvailableBalance": "10000.00"}, {})
    stub_create_hit(stub, hit, 3)
    assert _crowd("publish", str(batch.pk))["published"] == 1
    hit.refresh_from_db()
    stored_assignment(hit, asg_id(6), "W6")
    stub.add_response(
        "list_assignments_for_hit",
        {"Assignments": []},
        {"HITId": hit.external_hit_id, "MaxResults": 100, "AssignmentStatuses": ["Submitted", "Approved", "Rejected"]},
    )
    stub.add_response(
        "get_assignment",
        {
            "Assignment": {
                "AssignmentId": asg_id(6),
                "WorkerId": "W6",
                "HITId": hit.external_hit_id,
                "AssignmentStatus": "Submitted",
            }
        },
        {"AssignmentId": asg_id(6)},
    )
    assert _crowd("sync", str(batch.pk))["verified"] == 1
    stub.add_response("approve_assignment", {}, {"AssignmentId": asg_id(6)})
    assert _crowd("approve", str(batch.pk))["approved"] == 1
    stub.add_response(
        "send_bonus",
        {},
        {
            "WorkerId": "W6",
            "BonusAmount": "0.25",
            "AssignmentId": asg_id(6),
            "Reason": "careful work",
            "UniqueRequestToken": ANY,
        },
    )
    paid = _crowd("bonus", str(batch.pk), "0.25", "careful work")
    assert (paid["paid"], paid["fee_each"]) == (1, "0.05")
    assert _crowd("bonus", str(batch.pk), "0.25", "careful work")["already_paid"] == 1  # nothing sent again
    stub.add_response("update_expiration_for_hit", {}, {"HITId": hit.external_hit_id, "ExpireAt": ANY})
    assert _crowd("expire", str(batch.pk))["expired"] == 1
    stub.add_response("get_account_balance", {"AvailableBalance": "9999.10"}, {})
    assert _crowd("balance", str(batch.pk))["available_usd"] == "9999.10"
    stub.add_client_error(
        "get_account_balance",
        service_error_code="RequestError",
        service_message="Your account is suspended.",
        http_status_code=400,
    )
    with pytest.raises(CommandError, match="MTurk refused: RequestError: Your account is suspended"):
        _crowd("balance", "--provider", "mturk-sandbox")
    stub.assert_no_pending_responses()


def test_cli_refuses_clearly(monkeypatch):
    local = Batch.objects.create(campaign=Campaign.objects.create(name="l"), provider="local")
    with pytest.raises(CommandError, match="not mturk"):
        _run("publish", str(local.pk))
    with pytest.raises(CommandError, match="no batch"):
        _run("sync", "999999")
    production = make_batch(sandbox=False, hits=1)
    with pytest.raises(CommandError, match="production"):
        _run("expire", str(production.pk), "--sandbox")


def test_mturk_is_an_alias_of_crowd_with_its_own_spelling(stub, client, monkeypatch):
    """``mturk extend`` and ``mturk bonus ASSIGNMENT`` are crowd's ``extend`` and ``assignment-bonus``; crowd
    refuses what a batch's platform cannot do."""
    from annotation.management.commands.crowd import Command as CrowdCommand
    from annotation.management.commands.mturk import Command as MTurkCommand

    assert issubclass(MTurkCommand, CrowdCommand)
    monkeypatch.setattr(mturk_module.client, "mturk_client", lambda sandbox: client)
    for k, command in enumerate(("mturk", "crowd")):
        batch = make_batch(hits=2)
        stub.add_response("get_account_balance", {"AvailableBalance": "5.00"}, {})
        for n, hit in enumerate(batch.hits.order_by("id")):
            Hit.objects.filter(pk=hit.pk).update(external_hit_id=hit_id(10 * k + n))
            stub.add_response(
                "create_additional_assignments_for_hit",
                {},
                {"HITId": hit_id(10 * k + n), "NumberOfAdditionalAssignments": 1, "UniqueRequestToken": ANY},
            )
        out = StringIO()
        call_command(command, "extend", str(batch.pk), "1", stdout=out)
        assert json.loads(out.getvalue())["assignments_added"] == 2
    local = Batch.objects.create(campaign=Campaign.objects.create(name="local"), provider="local")
    with pytest.raises(CommandError, match="has no extend"):
        _crowd("extend", str(local.pk), "1")
    with pytest.raises(CommandError, match="no MTurk assignment"):
        _crowd("assignment-bonus", "nobody", "0.25", "thanks")


def test_periodic_sync_checks_every_published_batch_and_survives_one_failing(stub, provider):
    from annotation.providers.sync import crowd_batches_sync

    ok, broken, _draft = make_batch(hits=1), make_batch(hits=1), make_batch(hits=1)
    Batch.objects.filter(pk__in=[ok.pk, broken.pk]).update(status=BatchStatus.PUBLISHED)
    for n, batch in enumerate((ok, broken), 1):
        Hit.objects.filter(batch=batch).update(external_hit_id=hit_id(n))
    listing = {"MaxResults": 100, "AssignmentStatuses": ["Submitted", "Approved", "Rejected"]}
    stub.add_response("list_assignments_for_hit", {"Assignments": []}, {"HITId": hit_id(1), **listing})
    stub.add_client_error(
        "list_assignments_for_hit",
        service_error_code="RequestError",
        service_message="The HIT does not exist",
        expected_params={"HITId": hit_id(2), **listing},
    )
    reports = crowd_batches_sync(provider_for=lambda batch: provider)
    assert set(reports) == {ok.pk, broken.pk}  # the draft batch is not on MTurk yet
    assert reports[ok.pk]["missing"] == 0 and "error" not in reports[ok.pk]
    assert "does not exist" in reports[broken.pk]["error"]
