import pytest
from django.db import IntegrityError, transaction

from annotation.models import (
    CAMPAIGN_DEFAULTS,
    Assignment,
    Campaign,
    Candidate,
    CandidateSystem,
    Judgment,
    Reference,
    Worker,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    campaign = Campaign.objects.create(name="c")
    ref = Reference.objects.create(campaign=campaign, ref_id="1", text="It is fine now.", length_bucket=5)
    cand = Candidate.objects.create(reference=ref, text="It is okay now.")
    worker = Worker.objects.create(external_id="w1", provider="local")
    assignment = Assignment.objects.create(
        campaign=campaign, worker=worker, provider="local", external_assignment_id="a1"
    )
    return campaign, ref, cand, worker, assignment


def _judge(world, **kw):
    _, _, cand, worker, assignment = world
    with transaction.atomic():
        return Judgment.objects.create(assignment=assignment, candidate=cand, worker=worker, **kw)


@pytest.mark.parametrize("score,fluency", [(0, 0), (100, 2), (50, 1), (None, 0), (30, 0)])
def test_valid_judgments(world, score, fluency):
    assert _judge(world, score=score, fluency=fluency).pk


@pytest.mark.parametrize("score,fluency", [(101, 2), (-1, 2), (50, 3), (None, 1), (None, 2)])
def test_constraints_reject(world, score, fluency):
    with pytest.raises(IntegrityError):
        _judge(world, score=score, fluency=fluency)


def test_one_judgment_per_assignment_and_candidate(world):
    _judge(world, score=10, fluency=2)
    with pytest.raises(IntegrityError):
        _judge(world, score=20, fluency=2)


def test_candidates_unique_per_reference_text(world):
    _, ref, _, _, _ = world
    with pytest.raises(IntegrityError), transaction.atomic():
        Candidate.objects.create(reference=ref, text="It is okay now.")


def test_reference_ids_unique_per_campaign(world):
    campaign, *_ = world
    with pytest.raises(IntegrityError), transaction.atomic():
        Reference.objects.create(campaign=campaign, ref_id="1", text="x", length_bucket=5)
    other = Campaign.objects.create(name="other")
    assert Reference.objects.create(campaign=other, ref_id="1", text="x", length_bucket=5).pk


def test_workers_unique_per_provider(world):
    with pytest.raises(IntegrityError), transaction.atomic():
        Worker.objects.create(external_id="w1", provider="local")
    assert Worker.objects.create(external_id="w1", provider="mturk").pk


def test_campaign_settings_defaults():
    campaign = Campaign.objects.create(name="d")
    assert campaign.settings == CAMPAIGN_DEFAULTS
    assert campaign.min_judgments_per_worker == 25
    assert campaign.setting("redundancy") == 3
    assert campaign.setting("attention_pass_mark") == 100
    assert campaign.setting("max_attention_failure_rate") == 0.10
    assert campaign.setting("min_attention_checks") == 5
    campaign.settings = {"min_judgments_per_worker": 10}
    assert campaign.min_judgments_per_worker == 10 and campaign.setting("redundancy") == 3


def test_attention_copy(world):
    _, ref, cand, _, _ = world
    assert not cand.is_attention_copy
    copy = Candidate.objects.create(reference=ref, text=ref.text)
    assert copy.is_attention_copy
    CandidateSystem.objects.create(candidate=cand, system="0")
    assert Candidate.objects.get(pk=cand.pk).is_attention_copy
