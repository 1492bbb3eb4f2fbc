"""The admin's train and score forms refuse, before queuing, a job that cannot succeed, and say what is
missing (the jobs' own start checks: ``regressor_job.train_start_check``, ``scoring_job.score_start_check``)."""

import html

import pytest
from django.contrib.auth import get_user_model

from jobs.models import Job
from scoring.models import Regressor
from scoring.regressor import RegressorTrainOptions, regressor_train
from scoring.regressor.job import train_regressor_launch

from .resource_data import build_resource
from .test_regressor import build_campaign

pytestmark = pytest.mark.django_db

TRAIN = "/admin/scoring/regressor/train/"
SCORE = "/admin/scoring/scoredresource/score/"


@pytest.fixture
def boss(client):
    client.force_login(get_user_model().objects.create_superuser("boss", password="pw"))
    return client


def train_form(campaign, **changes) -> dict:
    return {
        "campaign": campaign.pk,
        "name": "r",
        "test_fraction": "0.2",
        "seed": "0",
        "min_judgments": "",
        "target": "raw",
        "recipe": "base",
        **changes,
    }


def refusal(response) -> str:
    assert response.status_code == 200, response.status_code
    return html.unescape(response.content.decode())


def test_the_train_form_refuses_too_few_judgments_per_worker_and_names_the_minimum_that_works(
    boss, tmp_path, storage_dir
):
    # three workers with 30 judgments each (6 references x 5): the campaign asks for 40
    campaign = build_campaign(tmp_path, name="small", n_refs=6)
    campaign.settings = {**(campaign.settings or {}), "min_judgments_per_worker": 40}
    campaign.save()
    text = refusal(boss.post(TRAIN, train_form(campaign)))
    assert "campaign 'small' has 0 judged candidates of 0 references (counted workers, min judgments 40)" in text
    assert "With a minimum of 30 judgments per worker (--min-judgments 30) it has 24 judged candidates of 6" in text
    assert not Job.objects.exists()
    # the figure it names works: the form queues the job
    assert boss.post(TRAIN, train_form(campaign, min_judgments="30")).status_code == 302
    assert Job.objects.filter(kind="train_regressor").count() == 1


def test_a_campaign_too_small_for_any_minimum_asks_for_more_judgments_and_queues_nothing(boss, tmp_path, storage_dir):
    campaign = build_campaign(tmp_path, name="tiny", n_refs=3)
    text = refusal(boss.post(TRAIN, train_form(campaign)))
    assert "has 0 judged candidates of 0 references (counted workers, min judgments 25)" in text
    assert "need at least 20 candidates of 5 references" in text
    assert "counting every worker (min judgments 0) it has 12 judged candidates of 3 references" in text
    assert "judge more HITs first" in text
    with pytest.raises(ValueError, match="judge more HITs first"):  # the job's own start refuses the same
        train_regressor_launch(
            campaign="tiny", name="x", options=RegressorTrainOptions(min_judgments=0, with_embeddings=False)
        )
    assert not Job.objects.exists()


def test_the_score_form_refuses_a_regressor_it_cannot_apply(boss, tmp_path, storage_dir, monkeypatch):
    page = boss.get(SCORE).content.decode()
    assert "no regressor has been trained yet: train one first" in html.unescape(page)
    resource = build_resource()
    text = refusal(boss.post(SCORE, {"resource": resource.pk, "batch_size": "4"}))
    assert "no regressor has been trained yet: train one first" in text

    # a row whose model file is gone
    lost = Regressor.objects.create(name="lost", key="regressors/lost.joblib", signature={}, metrics={})
    text = refusal(boss.post(SCORE, {"resource": resource.pk, "regressor": lost.pk, "batch_size": "4"}))
    assert "regressor 'lost': its model file is missing" in text

    # a regressor trained on features this code no longer computes
    build_campaign(tmp_path, n_refs=8)
    trained = regressor_train(campaign="synthetic", name="old", options=RegressorTrainOptions(with_embeddings=False))
    import scoring.similarity.features

    real = scoring.similarity.features.feature_names
    monkeypatch.setattr(scoring.similarity.features, "feature_names", lambda **kw: [*real(**kw), "new_feature"])
    text = refusal(boss.post(SCORE, {"resource": resource.pk, "regressor": trained.pk, "batch_size": "4"}))
    assert "regressor 'old' was trained on other features than this code computes: retrain it" in text
    assert not Job.objects.exists()
    monkeypatch.undo()
    assert boss.post(SCORE, {"resource": resource.pk, "regressor": trained.pk, "batch_size": "4"}).status_code == 302
