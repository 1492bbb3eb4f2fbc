"""Prolific: the provider against a local API stub that checks every request against Prolific's API
description (``prolific_stub.py``), a participant's session through the start URL, and the ``crowd`` CLI."""

from __future__ import annotations

import html
import io
import json
import math
import re
from decimal import Decimal
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from pyrolific.models import CreateStudy

from annotation.batches.making import hit_batch_create
from annotation.batches.params import BatchParams
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    Bonus,
    Judgment,
    ProlificSession,
    Verification,
    Worker,
)
from annotation.providers import InsufficientBalance, ProviderConfigurationError, ProviderError, get_provider
from annotation.providers.prolific import ProlificClient, ProlificProvider
from annotation.providers.retry import RetryPolicy

from .builders import items_by_key, payload, published_batch, sample_campaign
from .prolific_stub import TOKEN, ProlificStub, check_model, serve

pytestmark = pytest.mark.django_db

PUBLIC = "https://paraforge.example.org"
ALICE, BOB = "5f0a1b2c3d4e5f6a7b8c9d01", "5f0a1b2c3d4e5f6a7b8c9d02"


KNOWN: dict = {}  # the running test's stub, for ``start`` (set by the ``stub`` fixture)


@pytest.fixture
def stub(settings):
    stub = ProlificStub()
    KNOWN["stub"] = stub
    server = serve(stub)
    settings.PROLIFIC_API_URL, settings.PROLIFIC_API_TOKEN = stub.url, TOKEN
    settings.PARAFORGE_PUBLIC_URL = PUBLIC
    settings.PROLIFIC_SERVICE_FEE_RATE, settings.PROLIFIC_VAT_RATE = "0.3333", "0"
    settings.PROLIFIC_MAX_ATTEMPTS = 3
    yield stub
    server.shutdown()
    server.server_close()
    assert stub.errors == [], f"requests that break Prolific's API description: {stub.errors}"


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def provider(stub, sleeps):
    return ProlificProvider(client=ProlificClient(retry=RetryPolicy(max_attempts=3, sleep=sleeps.append)))


def prolific_batch(
    *,
    hits_per_session: int = 2,
    assignments: int = 2,
    campaign_settings: dict | None = None,
    publish: bool = False,
    attention_rate: float = 1.0,
    degraded_rate: float = 0.0,
    **settings,
) -> Batch:
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=3, candidates=4, settings=campaign_settings)
    make = published_batch if publish else (lambda c, **kw: hit_batch_create(campaign=c, params=BatchParams(**kw)))
    return make(
        campaign,
        provider="prolific",
        assignments=assignments,
        attention_rate=attention_rate,
        degraded_rate=degraded_rate,
        settings={
            "hits_per_session": hits_per_session,
            "reward_per_session": "1.20",
            "first_languages": ["English"],
            **settings,
        },
    )


def start(client, batch, participant, session, study="S1", *, known=True, **extra):
    """Open the start URL as Prolific sends a participant there. ``known``: Prolific has the session as a
    running submission of this participant in this study (the stub is told, unless it already has the
    session); else the session is made up. ``extra``: the request's WSGI environ (``REMOTE_ADDR``)."""
    if known and session not in KNOWN["stub"].submissions:
        KNOWN["stub"].add_submission(study=study, session=session, participant=participant, status="ACTIVE")
    return client.get(
        f"/prolific/{batch.pk}/start/",
        {"PROLIFIC_PID": participant, "STUDY_ID": study, "SESSION_ID": session},
        **extra,
    )


def do_hit(client, response, *, copy_score=100):
    """Follow a start-URL redirect to the slider page, submit the HIT as the page would, then go where the
    page goes after a save (its data-continue: the start URL, which ends a session whose HITs are done)."""
    assert response.status_code == 302, response.content[:300]
    query = parse_qs(urlsplit(response["Location"]).query)
    page = client.get(response["Location"])
    assert page.status_code == 200 and b'name="submission-token"' in page.content
    assignment = Assignment.objects.get(external_assignment_id=query["assignmentId"][0])
    body = payload(
        assignment.hit, assignment_id=assignment.external_assignment_id, worker_id=query["workerId"][0], score=60
    )
    items = items_by_key(assignment.hit)
    for judgment in body["judgments"]:
        if items[judgment["item"]].is_attention_check:
            judgment["score"] = copy_score
    saved = client.post(
        f"/api/hits/{assignment.hit_id}/assignments/", json.dumps(body), content_type="application/json"
    )
    assert saved.status_code == 201, saved.content
    client.get(html.unescape(re.search(r'data-continue="([^"]+)"', page.content.decode()).group(1)))
    return assignment


def code_of(response) -> str:
    assert response.status_code == 302
    location = urlsplit(response["Location"])
    assert (location.scheme, location.netloc, location.path) == ("https", "app.prolific.com", "/submissions/complete")
    return parse_qs(location.query)["cc"][0]


# --- publishing ------------------------------------------------------------------------------------


def test_publish_creates_the_study_prolific_describes_and_publishes_it_once(stub, provider):
    batch = prolific_batch(hits_per_session=2, assignments=2)
    hits = batch.hits.count()
    report = provider.publish(batch=batch)

    (study,) = stub.studies.values()
    assert study["status"] == "ACTIVE" and report["study"] == study["id"]
    assert study["total_available_places"] == math.ceil(hits * 2 / 2) == report["places"]
    assert study["reward"] == 120 and study["prolific_id_option"] == "url_parameters"
    assert study["external_study_url"] == (
        f"{PUBLIC}/prolific/{batch.pk}/start/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
        "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )
    ((group_id, group),) = stub.groups.items()
    completed, failed = study["completion_codes"]
    batch.refresh_from_db()
    assert (completed["code"], completed["code_type"]) == (batch.provider_state["completion_code"], "COMPLETED")
    assert completed["actions"] == [{"action": "MANUALLY_REVIEW"}]  # paid only after our checks
    assert failed["code"] == batch.provider_state["failed_code"] != completed["code"]
    assert {"action": "ADD_TO_PARTICIPANT_GROUP", "participant_group": group_id} in failed["actions"]
    filters = {f["filter_id"]: f for f in study["filters"]}
    assert filters["first-language"]["selected_values"] == ["19"]  # "English" resolved to Prolific's choice id
    assert filters["participant_group_blocklist"]["selected_values"] == [group_id]
    assert filters["approval_rate"]["selected_range"]["lower"] == 95
    assert batch.status == BatchStatus.PUBLISHED
    # the cost: places x reward + Prolific's fee
    assert Decimal(report["cost_total"]) == Decimal("1.20") * hits + (
        Decimal("1.20") * hits * Decimal("0.3333")
    ).quantize(Decimal("0.01"))
    assert len(stub.calls_to("POST", "/transition/")) == 1

    again = provider.publish(batch=batch)  # idempotent: no second study, no second transition
    assert len(stub.studies) == 1 and again["study_status"] == "ACTIVE"
    assert len(stub.calls_to("POST", "/transition/")) == 1


def test_a_lost_creation_answer_reuses_the_draft_instead_of_creating_a_second_study(stub, provider):
    batch = prolific_batch()
    provider.publish(batch=batch)
    study_id = batch.provider_state["studies"]["0"]
    stub.studies[study_id]["status"] = "UNPUBLISHED"  # as if the answer to the creation was lost
    Batch.objects.filter(pk=batch.pk).update(
        provider_state={k: v for k, v in batch.provider_state.items() if k != "studies"}
    )
    batch.refresh_from_db()
    provider.publish(batch=batch)
    assert len(stub.studies) == 1 and stub.studies[study_id]["status"] == "ACTIVE"


def test_publishing_without_the_funds_is_refused_before_anything_is_published(stub, provider):
    stub.balance_cents = 100
    batch = prolific_batch()
    with pytest.raises(InsufficientBalance, match="available"):
        provider.publish(batch=batch)
    assert not stub.calls_to("POST", "/transition/")
    assert all(s["status"] == "UNPUBLISHED" for s in stub.studies.values())


def test_the_cost_estimate_adds_the_fee_and_vat_on_it(stub, settings):
    settings.PROLIFIC_VAT_RATE = "0.20"
    batch = prolific_batch(hits_per_session=2, assignments=3)
    places = math.ceil(batch.hits.count() * 3 / 2)
    rewards = Decimal("1.20") * places
    fee = (rewards * Decimal("0.3333")).quantize(Decimal("0.01"))
    assert get_provider(batch).cost_estimate_usd(batch=batch) == rewards + fee + (fee * Decimal("0.20")).quantize(
        Decimal("0.01")
    )


def test_an_unknown_country_name_is_a_clear_error(stub, provider):
    batch = prolific_batch(countries=["Atlantis"])
    with pytest.raises(ProviderConfigurationError, match="no choice 'Atlantis'"):
        provider.publish(batch=batch)
    assert not stub.studies


def test_the_stub_refuses_a_request_that_breaks_the_description(stub):
    client = ProlificClient(retry=RetryPolicy(max_attempts=1))
    with pytest.raises(Exception, match="requires 'action'"):
        client.request("POST", "/api/v1/studies/abc/transition/", json={"act": "PUBLISH"})
    assert check_model({"reward": "ten"}, CreateStudy) == ["body.reward: expected a number, got 'ten'"]
    stub.errors.clear()


def test_throttled_calls_are_retried_with_backoff(stub, provider, sleeps):
    stub.fail_next = [429, 503]
    assert provider.balance()["available"] == "1000.00"
    assert len(sleeps) == 2


# --- a participant's session -----------------------------------------------------------------------


def test_a_participant_does_hits_per_session_hits_then_goes_back_with_the_completion_code(stub, provider, client):
    batch = prolific_batch(hits_per_session=2)
    provider.publish(batch=batch)
    study = batch.provider_state["studies"]["0"]
    first = start(client, batch, ALICE, "SESSION1", study)
    # the same URL again (a reload) gives the same open HIT
    assert start(client, batch, ALICE, "SESSION1", study)["Location"] == first["Location"]
    a1 = do_hit(client, first)
    a2 = do_hit(client, start(client, batch, ALICE, "SESSION1", study))
    assert a1.hit_id != a2.hit_id
    done = start(client, batch, ALICE, "SESSION1", study)
    assert code_of(done) == batch.provider_state["completion_code"]
    assert code_of(start(client, batch, ALICE, "SESSION1", study)) == batch.provider_state["completion_code"]
    # stored, but nothing counts until Prolific confirms the participant and session
    assert set(Assignment.objects.filter(worker__external_id=ALICE).values_list("verification", flat=True)) == {
        Verification.UNVERIFIED
    }
    assert not Judgment.objects.counted().exists()

    stub.add_submission(study=study, session="SESSION1", participant=ALICE)
    report = provider.sync(batch=batch)
    assert report["verified"] == 2 and report["flagged"] == 0
    assert Judgment.objects.counted().count() == Judgment.objects.count() > 0


def test_the_start_url_refuses_what_cannot_lead_anywhere(stub, client):
    batch = prolific_batch(publish=True)
    assert start(client, batch, "", "S").status_code == 400
    assert start(client, batch, "bad id!", "S").status_code == 400
    assert (
        client.get(
            f"/prolific/{batch.pk + 99}/start/", {"PROLIFIC_PID": ALICE, "STUDY_ID": "S1", "SESSION_ID": "S"}
        ).status_code
        == 404
    )
    assert start(client, batch, ALICE, "SESS").status_code == 302
    other = start(client, batch, BOB, "SESS")  # Alice's session under Bob's id
    assert other.status_code == 403 and b"another participant" in other.content
    Batch.objects.filter(pk=batch.pk).update(provider_state={"studies": {"0": "REALSTUDY"}})
    assert start(client, batch, ALICE, "SESS2", "S1").status_code == 400


def test_a_hit_slot_held_by_one_participant_is_not_given_to_another(stub, client):
    batch = prolific_batch(publish=True, assignments=1, hits_per_session=5)
    taken = {
        Assignment.objects.get(
            external_assignment_id=parse_qs(urlsplit(start(client, batch, f"P{n:023d}", f"SESS{n}")["Location"]).query)[
                "assignmentId"
            ][0]
        ).hit_id
        for n in range(batch.hits.count())
    }
    assert len(taken) == batch.hits.count()  # every participant got a different HIT
    late = start(client, batch, "P" + "9" * 23, "SESS-LATE")  # none left, and they did nothing: no code
    assert late.status_code == 200 and b"return the study on Prolific" in late.content


def test_failing_the_attention_checks_ends_the_session_with_the_other_code_and_sync_disqualifies(
    stub, provider, client
):
    batch = prolific_batch(
        hits_per_session=3,
        campaign_settings={
            "min_attention_checks": 2,
            "max_attention_failure_rate": 0.4,
            "min_judgments_per_worker": 1,
            "redundancy": 1,
            "attention_pass_mark": 100,
            "min_degraded_checks": 5,
            "degraded_p_max": 0.05,
        },
    )
    provider.publish(batch=batch)
    study = batch.provider_state["studies"]["0"]
    do_hit(client, start(client, batch, BOB, "SESSB", study), copy_score=10)
    do_hit(client, start(client, batch, BOB, "SESSB", study), copy_score=10)
    ended = start(client, batch, BOB, "SESSB", study)
    assert code_of(ended) == batch.provider_state["failed_code"]
    session = ProlificSession.objects.get(session_id="SESSB")
    assert session.outcome == "failed" and "attention checks" in session.reason
    # a forged session could have done this: Bob is not disqualified until Prolific confirms it
    bob = Worker.objects.get(external_id=BOB)
    assert not bob.disqualified and not stub.calls_to("POST", "/participants/")

    stub.add_submission(study=study, session="SESSB", participant=BOB)
    provider.sync(batch=batch)
    bob.refresh_from_db()
    assert bob.disqualified
    group = stub.groups[batch.provider_state["blocklist_group_id"]]
    assert BOB in group["participants"]

    report = provider.approve_batch(batch=batch)  # an instructed attention check failed: rejected, with why
    assert report["rejected"] == 1 and report["approved"] == 0
    (reject,) = [c for c in stub.calls_to("POST", "/transition/") if c[3].get("action") == "REJECT"]
    assert reject[3]["rejection_category"] == "FAILED_CHECK" and len(reject[3]["message"]) >= 100
    assert "attention checks" in reject[3]["message"] and "degraded" not in reject[3]["message"]
    assert stub.submissions["SESSB"]["status"] == "REJECTED"


def test_sync_counts_only_what_prolific_confirms(stub, provider, client):
    batch = prolific_batch(hits_per_session=1)
    provider.publish(batch=batch)
    study = batch.provider_state["studies"]["0"]
    for who, session in (
        (ALICE, "OK"),
        (BOB, "RETURNED"),
        ("5f0a1b2c3d4e5f6a7b8c9d03", "FORGED"),
        ("5f0a1b2c3d4e5f6a7b8c9d04", "RUNNING"),
    ):
        do_hit(client, start(client, batch, who, session, study))
    stub.add_submission(study=study, session="OK", participant=ALICE)
    stub.add_submission(study=study, session="RETURNED", participant=BOB, status="RETURNED")
    stub.add_submission(study=study, session="FORGED", participant=ALICE)  # Prolific says: another participant
    stub.add_submission(study=study, session="RUNNING", participant="5f0a1b2c3d4e5f6a7b8c9d04", status="ACTIVE")
    report = provider.sync(batch=batch)
    assert (report["verified"], report["flagged"], report["unconfirmed"]) == (1, 2, 1)
    verification = dict(Assignment.objects.values_list("worker__external_id", "verification"))
    assert verification == {
        ALICE: "verified",
        BOB: "flagged",
        "5f0a1b2c3d4e5f6a7b8c9d03": "flagged",
        "5f0a1b2c3d4e5f6a7b8c9d04": "unverified",
    }

    approved = provider.approve_batch(batch=batch)
    assert (approved["approved"], approved["skipped_flagged"], approved["skipped_unverified"]) == (1, 2, 1)
    assert stub.submissions["OK"]["status"] == "APPROVED"
    assert Assignment.objects.get(worker__external_id=ALICE).status == AssignmentStatus.APPROVED


def test_bonuses_are_one_bulk_payment_paid_once_even_when_paying_failed_the_first_time(stub, provider, client):
    batch = prolific_batch(hits_per_session=1)
    provider.publish(batch=batch)
    study = batch.provider_state["studies"]["0"]
    for who, session in ((ALICE, "SA"), (BOB, "SB")):
        do_hit(client, start(client, batch, who, session, study))
        stub.add_submission(study=study, session=session, participant=who)
    provider.sync(batch=batch)
    # the bulk bonus is created, then paying it keeps failing
    original = stub._pay_bonus_payments
    stub._pay_bonus_payments = lambda **kw: (503, {"error": {"detail": "busy"}})
    with pytest.raises(Exception, match="503"):
        provider.bonus_batch(batch=batch, amount="0.50", reason="thanks for careful work")
    assert len(stub.bulk_bonuses) == 1 and not Bonus.objects.filter(sent_at__isnull=False).exists()
    stub._pay_bonus_payments = original
    report = provider.bonus_batch(batch=batch, amount="0.50", reason="thanks for careful work")
    assert report["paid"] == 2 and len(stub.bulk_bonuses) == 1  # the same bulk payment, now paid
    (bulk,) = stub.bulk_bonuses.values()
    assert bulk["paid"] and sorted(bulk["rows"]) == sorted([[ALICE, "0.50"], [BOB, "0.50"]])
    again = provider.bonus_batch(batch=batch, amount="0.50", reason="thanks for careful work")
    assert (again["paid"], again["already_paid"]) == (0, 2) and len(stub.bulk_bonuses) == 1


def test_pause_stop_and_start_again_are_study_transitions(stub, provider):
    batch = prolific_batch()
    provider.publish(batch=batch)
    study = stub.studies[batch.provider_state["studies"]["0"]]
    assert provider.pause(batch=batch)["study_status"] == "PAUSED" and study["status"] == "PAUSED"
    provider.publish(batch=batch)
    assert study["status"] == "ACTIVE"
    assert [c[3]["action"] for c in stub.calls_to("POST", "/transition/")] == ["PUBLISH", "PAUSE", "START"]
    provider.expire(batch=batch)
    assert stub.calls_to("POST", "/transition/")[-1][3] == {"action": "STOP"}


# --- the crowd CLI, the same for every provider ----------------------------------------------------


def crowd(*args) -> dict:
    out = io.StringIO()
    call_command("crowd", *args, stdout=out)
    return json.loads(out.getvalue())


def test_crowd_cli_runs_the_whole_prolific_path(stub, client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=3, candidates=4)
    out = io.StringIO()
    call_command(
        "create_hit_batch",
        "--campaign",
        campaign.name,
        "--provider",
        "prolific",
        "--per-length",
        "3",
        "--lengths",
        "5",
        "--assignments",
        "2",
        "--attention-rate",
        "0",
        "--degraded-rate",
        "0",
        "--batch-settings",
        json.dumps({"hits_per_session": 2, "reward_per_session": "2.00"}),
        stdout=out,
    )
    made = json.loads(out.getvalue())
    batch = Batch.objects.get(pk=made["batch"])
    places = math.ceil(batch.hits.count() * 2 / 2)
    assert Decimal(str(made["cost_estimate_usd"])) == Decimal("2.00") * places + (
        Decimal("2.00") * places * Decimal("0.3333")
    ).quantize(Decimal("0.01"))
    assert batch.status == BatchStatus.DRAFT  # nothing spent without --publish

    published = crowd("publish", str(batch.pk))
    study = published["study"]
    assert published["places"] == places and stub.studies[study]["status"] == "ACTIVE"
    assert crowd("balance", str(batch.pk))["available"] == "1000.00"
    assert crowd("balance", "--provider", "prolific")["currency"] == "USD"
    for _ in range(2):  # the session's two HITs
        do_hit(client, start(client, batch, ALICE, "S-A", study))
    stub.add_submission(study=study, session="S-A", participant=ALICE)
    assert crowd("sync", str(batch.pk))["verified"] == 2
    assert crowd("approve", str(batch.pk))["approved"] == 1
    assert crowd("bonus", str(batch.pk), "0.25", "a bonus")["paid"] == 1
    assert crowd("pause", str(batch.pk))["study_status"] == "PAUSED"
    assert crowd("expire", str(batch.pk))["action"] == "STOP"


def test_crowd_cli_works_for_local_batches_and_says_what_is_wrong(stub):
    batch = published_batch(sample_campaign(), provider="local")
    assert crowd("sync", str(batch.pk))["verified"] == 0
    assert crowd("expire", str(batch.pk))["expired"] == batch.hits.count()
    with pytest.raises(CommandError, match="no batch 999"):
        crowd("sync", "999")
    with pytest.raises(CommandError, match="no pause"):
        crowd("pause", str(batch.pk))
    with pytest.raises(CommandError, match="give a BATCH or --provider"):
        crowd("balance")


def test_without_a_token_nothing_is_sent_and_the_error_says_what_to_set(stub, settings):
    settings.PROLIFIC_API_TOKEN = ""
    batch = prolific_batch()
    with pytest.raises(CommandError, match="PROLIFIC_API_TOKEN"):
        crowd("publish", str(batch.pk))
    assert not stub.calls


# --- the admin, the same actions for every provider ------------------------------------------------


def test_the_admin_suggests_a_session_time_makes_publishes_syncs_and_approves_a_prolific_batch(
    stub, admin_client, client
):
    from datetime import timedelta

    from django.utils import timezone

    # 90 s per HIT measured on earlier verified work: 10 HITs -> 15 minutes suggested
    earlier = published_batch(sample_campaign("earlier"), provider="local")
    worker = Worker.objects.create(provider="local", external_id="user-x")
    now = timezone.now()
    for n, hit in enumerate(earlier.hits.all()[:3]):
        Assignment.objects.create(
            campaign=earlier.campaign,
            hit=hit,
            worker=worker,
            provider="local",
            external_assignment_id=f"L{n}",
            accepted_at=now - timedelta(seconds=90),
            submitted_at=now,
        )
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=3, candidates=4)
    url = "/admin/annotation/campaign/"
    form = admin_client.post(url, {"action": "create_hit_batch", "_selected_action": [campaign.pk]}).content.decode()
    assert "suggested 15 min for 10 HITs from the median of 90 s per HIT" in form
    admin_client.post(
        url,
        {
            "action": "create_hit_batch",
            "_selected_action": [campaign.pk],
            "confirm": "yes",
            "provider": "prolific",
            "per_length": "3",
            "lengths": "5",
            "assignments": "2",
            "attention_rate": "0",
            "degraded_rate": "0",
            "seed": "0",
            "reward_per_session": "2.40",
            "hits_per_session": "2",
            "estimated_minutes": "4",
            "countries": "United Kingdom",
        },
    )
    batch = Batch.objects.get(provider="prolific")
    assert batch.settings["reward_per_session"] == "2.40" and batch.settings["countries"] == "United Kingdom"
    preview = admin_client.post(
        "/admin/annotation/batch/", {"action": "publish_batches", "_selected_action": [batch.pk]}
    ).content.decode()
    places = math.ceil(batch.hits.count() * 2 / 2)
    assert f"<td>{places}</td>" in preview and "USD" in preview and not stub.studies  # a preview spends nothing
    admin_client.post(
        "/admin/annotation/batch/", {"action": "publish_batches", "_selected_action": [batch.pk], "confirm": "yes"}
    )
    (study,) = stub.studies.values()
    assert study["status"] == "ACTIVE" and study["estimated_completion_time"] == 4
    assert {"filter_id": "current-country-of-residence", "selected_values": ["0"]} in study["filters"]
    for _ in range(2):  # the session's two HITs
        do_hit(client, start(client, batch, ALICE, "S-ADMIN", study["id"]))
    stub.add_submission(study=study["id"], session="S-ADMIN", participant=ALICE)
    admin_client.post("/admin/annotation/batch/", {"action": "sync_batches", "_selected_action": [batch.pk]})
    assert set(Assignment.objects.filter(worker__external_id=ALICE).values_list("verification", flat=True)) == {
        Verification.VERIFIED
    }
    admin_client.post("/admin/annotation/batch/", {"action": "approve_batches", "_selected_action": [batch.pk]})
    assert stub.submissions["S-ADMIN"]["status"] == "APPROVED"
    admin_client.post("/admin/annotation/batch/", {"action": "expire_batches", "_selected_action": [batch.pk]})
    assert study["status"] == "AWAITING REVIEW"  # stopped


def test_each_easl_round_is_its_own_study_serving_only_its_hits(stub, provider, client):
    from annotation.batches.easl_rounds import easl_round_create

    batch = prolific_batch(hits_per_session=1, mode="easl", easl={"items_per_hit": 4, "assignments_per_hit": 1})
    provider.publish(batch=batch)
    first = batch.provider_state["studies"]["0"]
    made = easl_round_create(batch=batch, force=True)
    assert made["round"] == 1
    report = provider.publish(batch=batch)
    second = report["studies"][1]["study"]
    assert second != first and len(stub.studies) == 2
    assert stub.studies[second]["total_available_places"] == made["hits"]  # 1 assignment, 1 HIT per session
    assert stub.studies[first]["status"] == stub.studies[second]["status"] == "ACTIVE"
    taken = do_hit(client, start(client, batch, ALICE, "ROUND1", second))
    assert taken.hit.round == 1
    assert do_hit(client, start(client, batch, BOB, "ROUND0", first)).hit.round == 0


def test_sessions_prolific_does_not_know_hold_nothing_and_a_real_participant_gets_work(stub, client):
    batch = prolific_batch(publish=True, hits_per_session=1, assignments=1)
    slots = batch.hits.count()
    # more made-up sessions than the study has places, some under a real participant's id
    for n in range(slots + 6):
        made_up = start(client, batch, ALICE if n % 2 else f"{n:024d}", f"MADEUP{n}", known=False)
        assert made_up.status_code == 403 and b"does not know this session" in made_up.content
    assert not (Worker.objects.exists() or ProlificSession.objects.exists() or Assignment.objects.exists())
    first = start(client, batch, ALICE, "REAL")  # Alice's real session still gets a HIT
    assert first.status_code == 302 and "/hits/" in first["Location"]
    # someone who knows her id cannot give back her open HIT with a session of their own
    assert start(client, batch, ALICE, "NEWMADEUP", known=False).status_code == 403
    assert Assignment.objects.get(worker__external_id=ALICE).status == AssignmentStatus.ACCEPTED


def test_a_session_prolific_reports_as_another_participants_or_studys_or_ended_takes_nothing(stub, client):
    batch = prolific_batch(publish=True)
    stub.add_submission(study="S1", session="BOBS", participant=BOB, status="ACTIVE")
    stub.add_submission(study="OTHER", session="ELSEWHERE", participant=ALICE, status="ACTIVE")
    stub.add_submission(study="S1", session="GONE", participant=ALICE, status="RETURNED")
    assert start(client, batch, ALICE, "BOBS").status_code == 403
    assert start(client, batch, ALICE, "ELSEWHERE").status_code == 403
    gone = start(client, batch, ALICE, "GONE")
    assert gone.status_code == 410 and b"has ended" in gone.content
    assert not ProlificSession.objects.exists() and not Assignment.objects.exists()


def test_when_prolific_cannot_be_reached_the_participant_is_asked_to_reload_and_nothing_is_held(stub, client):
    batch = prolific_batch(publish=True)
    stub.fail_next = [503, 503]  # both tries of the start URL's short confirmation
    down = start(client, batch, ALICE, "S-DOWN")
    assert down.status_code == 503 and down["Retry-After"] and b"reload" in down.content
    assert not ProlificSession.objects.exists() and not Assignment.objects.exists()
    assert start(client, batch, ALICE, "S-DOWN").status_code == 302  # a moment later it works
    # a confirmed session is not asked about again on every page
    asked = len(stub.calls_to("GET", "/submissions/S-DOWN/"))
    start(client, batch, ALICE, "S-DOWN")
    assert len(stub.calls_to("GET", "/submissions/S-DOWN/")) == asked


def test_a_draft_studys_start_url_writes_nothing(stub, client):
    batch = prolific_batch(publish=False)
    assert start(client, batch, ALICE, "EARLY").status_code == 410
    assert not (Worker.objects.exists() or ProlificSession.objects.exists())


def test_a_participant_arriving_at_a_full_study_is_asked_to_return_it_and_is_never_paid(stub, provider, client):
    batch = prolific_batch(hits_per_session=1, assignments=1)
    provider.publish(batch=batch)
    study = batch.provider_state["studies"]["0"]
    for n in range(batch.hits.count()):  # every slot held by a participant working on it
        assert start(client, batch, f"P{n:023d}", f"HOLD{n}", study).status_code == 302
    late = start(client, batch, BOB, "LATE", study)
    assert late.status_code == 200 and b"return the study on Prolific" in late.content
    assert (
        "completion_code" not in late.content.decode()
        and batch.provider_state["completion_code"].encode() not in late.content
    )
    assert ProlificSession.objects.get(session_id="LATE").outcome == "open"
    # had Bob typed a code he found elsewhere, his session would still not be paid
    stub.submissions["LATE"]["status"] = "AWAITING REVIEW"
    provider.sync(batch=batch)
    assert provider.approve_batch(batch=batch)["approved"] == 0 and stub.submissions["LATE"]["status"] != "APPROVED"


def test_approval_pays_a_session_only_once_it_has_done_its_hits(stub, provider, client):
    batch = prolific_batch(hits_per_session=2)
    provider.publish(batch=batch)
    study = batch.provider_state["studies"]["0"]
    first = do_hit(client, start(client, batch, ALICE, "HALF", study))
    # Alice submits on Prolific with the study's completion code after 1 of 2 HITs; sync verifies her HIT
    stub.submissions["HALF"]["status"] = "AWAITING REVIEW"
    assert provider.sync(batch=batch)["verified"] == 1
    report = provider.approve_batch(batch=batch)
    assert (report["approved"], report["skipped_incomplete"]) == (0, 1)
    assert report["incomplete_sessions"] == {"HALF": "1 of 2 HITs done; the session is still open"}
    assert stub.submissions["HALF"]["status"] == "AWAITING REVIEW"
    first.refresh_from_db()
    with pytest.raises(ProviderError, match="still open"):
        provider.approve(assignment=first)
    assert not stub.calls_to("POST", "/submissions/HALF/transition/") and not stub.calls_to("POST", "/bulk-approve/")
    # she does the second HIT and is sent back with the code: now the session is paid
    do_hit(client, start(client, batch, ALICE, "HALF", study))
    assert code_of(start(client, batch, ALICE, "HALF", study)) == batch.provider_state["completion_code"]
    provider.sync(batch=batch)
    assert provider.approve_batch(batch=batch)["approved"] == 1
    assert stub.submissions["HALF"]["status"] == "APPROVED"


def test_system_check_warns_about_prolific_without_a_token(settings):
    from annotation.providers.checks import mturk_configuration_check

    settings.PARAFORGE_HIT_PROVIDER, settings.PARAFORGE_PUBLIC_URL = "prolific", PUBLIC
    settings.PROLIFIC_API_TOKEN = ""
    assert [m.id for m in mturk_configuration_check()] == ["annotation.W003"]
    settings.PROLIFIC_API_TOKEN = "t"
    assert mturk_configuration_check() == []


def test_a_session_failing_only_the_degraded_test_is_paid_but_the_participant_is_blocklisted(stub, provider, client):
    batch = prolific_batch(
        hits_per_session=3,
        attention_rate=0.0,
        degraded_rate=1.0,
        campaign_settings={"min_degraded_checks": 2, "degraded_p_max": 0.05, "min_attention_checks": 5},
    )
    provider.publish(batch=batch)
    study = batch.provider_state["studies"]["0"]
    # degraded copies scored like the real candidates (60): the rank test fails them, no attention check did
    do_hit(client, start(client, batch, BOB, "SESSD", study))
    do_hit(client, start(client, batch, BOB, "SESSD", study))
    assert code_of(start(client, batch, BOB, "SESSD", study)) == batch.provider_state["failed_code"]
    session = ProlificSession.objects.get(session_id="SESSD")
    assert "degraded copies" in session.reason and not session.failed_attention
    stub.add_submission(study=study, session="SESSD", participant=BOB)
    provider.sync(batch=batch)
    assert Worker.objects.get(external_id=BOB).disqualified
    report = provider.approve_batch(batch=batch)
    assert (report["approved"], report["rejected"]) == (1, 0)  # a statistical test is no instructed check
    assert stub.submissions["SESSD"]["status"] == "APPROVED"


# --- the start URL's questions to Prolific: cached and bounded ---------------------------------------


def test_a_flood_of_made_up_sessions_from_one_address_spends_its_own_budget_and_real_participants_get_in(
    stub, client, settings
):
    settings.PROLIFIC_CHECK_ADDRESS_RATE = "5/10m"
    batch = prolific_batch(publish=True, hits_per_session=1, assignments=1)
    asked = lambda: len(stub.calls_to("GET", "/api/v1/submissions/"))  # noqa: E731
    answers = [
        start(client, batch, f"{n:024d}", f"MADEUP{n}", known=False, REMOTE_ADDR="198.51.100.7").status_code
        for n in range(40)
    ]
    assert asked() == 5  # was one call on the researcher's token per made-up session: 40
    assert answers[:5] == [403] * 5 and set(answers[5:]) == {503}  # past its budget: asked to reload, not asked
    assert not (Worker.objects.exists() or ProlificSession.objects.exists() or Assignment.objects.exists())
    # the same made-up session again, from anywhere: Prolific's answer is remembered, no call
    again = start(client, batch, "0" * 24, "MADEUP0", known=False, REMOTE_ADDR="203.0.113.9")
    assert again.status_code == 403 and asked() == 5
    # a real participant from another address is asked about and gets a HIT
    real = start(client, batch, ALICE, "REAL", REMOTE_ADDR="203.0.113.10")
    assert real.status_code == 302 and "/hits/" in real["Location"] and asked() == 6


def test_a_flood_from_many_addresses_is_bounded_per_study_and_real_participants_get_in_after_the_window(
    stub, client, settings
):
    import time

    settings.PROLIFIC_CHECK_STUDY_RATE = "8/2s"
    batch = prolific_batch(publish=True, hits_per_session=1, assignments=1)
    asked = lambda: len(stub.calls_to("GET", "/api/v1/submissions/"))  # noqa: E731
    answers = [
        start(client, batch, f"{n:024d}", f"SPREAD{n}", known=False, REMOTE_ADDR=f"10.0.{n // 250}.{n % 250}")
        for n in range(30)
    ]
    assert asked() == 8 and [a.status_code for a in answers].count(403) == 8
    busy = start(client, batch, ALICE, "REAL-SPREAD", REMOTE_ADDR="203.0.113.20")
    assert busy.status_code == 503 and busy["Retry-After"] and b"reload" in busy.content
    assert not ProlificSession.objects.exists()
    time.sleep(2.1)  # the study's window ends
    real = start(client, batch, ALICE, "REAL-SPREAD", REMOTE_ADDR="203.0.113.20")
    assert real.status_code == 302 and "/hits/" in real["Location"]


def test_a_prolific_hits_items_show_only_behind_the_assignment_its_start_url_issued(stub, provider, client):
    """Issue 46: made-up ids on a published Prolific HIT read the reference and every item."""
    batch = prolific_batch(hits_per_session=2)
    provider.publish(batch=batch)
    issued = start(client, batch, ALICE, "SESSION1", batch.provider_state["studies"]["0"])
    query = parse_qs(urlsplit(issued["Location"]).query)
    assignment = Assignment.objects.get(external_assignment_id=query["assignmentId"][0])
    texts = [assignment.hit.reference.text] + [item.candidate.text for item in assignment.hit.items.all()]
    made_up = (
        {"assignmentId": f"SESSION9:{assignment.hit_id}:0badc0de", "workerId": BOB},  # nothing issued it
        {"assignmentId": f"SESSION9:{assignment.hit_id}:0badc0de", "workerId": ALICE},
        {"assignmentId": assignment.external_assignment_id, "workerId": BOB},  # issued, to someone else
    )
    for ids in made_up:
        page = client.get(f"/hits/{assignment.hit_id}/", {**ids, "hitId": str(assignment.hit_id)})
        body = page.content.decode()
        assert page.status_code == 403 and "not opened from your Prolific study" in body, ids
        assert not any(text in body for text in texts), ids
    page = client.get(issued["Location"])
    assert page.status_code == 200 and all(text in page.content.decode() for text in texts)
