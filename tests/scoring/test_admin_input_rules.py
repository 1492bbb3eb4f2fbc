"""Issue 27 (Low): scoring's admin forms take numbers in digits 0-9 only, and a regressor name (it names a
file) is printable ASCII wherever it is typed: the train form, ``manage.py train_regressor``, the job."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from jobs.models import Job
from scoring.models import Regressor, ScoredResource
from scoring.regressor import RegressorTrainOptions
from scoring.regressor.job import train_regressor_launch

from .resource_data import build_resource
from .test_admin_jobs import SCORE, TRAIN, train_form
from .test_regressor import build_campaign

pytestmark = pytest.mark.django_db

ARABIC_12 = "\u0661\u0662"  # ١٢: int() reads 12


@pytest.fixture
def campaign(tmp_path, storage_dir):
    return build_campaign(tmp_path, n_refs=20)


@pytest.fixture
def boss(client):
    client.force_login(get_user_model().objects.create_superuser("boss", password="pw"))
    return client


def test_number_fields_take_ascii_digits_only(boss, campaign):
    for field, value, message in (
        ("seed", ARABIC_12, "Enter a whole number written in digits 0-9."),
        ("min_judgments", ARABIC_12, "Enter a whole number written in digits 0-9."),
        ("seed", "1_2", "Enter a whole number written in digits 0-9."),
        ("seed", "\u00b2", "Enter a whole number written in digits 0-9."),
        ("test_fraction", "\u0660.\u0662", "Enter a number written in digits 0-9"),
        ("test_fraction", "inf", "Enter a number written in digits 0-9"),
    ):
        response = boss.post(TRAIN, train_form(campaign, **{field: value}))
        assert response.status_code == 200 and message in response.content.decode(), (field, value)
    assert not Job.objects.exists()

    resource = build_resource()
    regressor = Regressor.objects.create(name="reg", key="regressors/reg.joblib", signature={}, metrics={})
    response = boss.post(SCORE, {"resource": resource.pk, "regressor": regressor.pk, "batch_size": ARABIC_12})
    assert response.status_code == 200 and "Enter a whole number written in digits 0-9." in response.content.decode()
    assert not Job.objects.exists()

    scored = ScoredResource.objects.create(resource=resource, regressor=regressor)
    response = boss.post(
        f"/admin/scoring/scoredresource/{scored.pk}/export/",
        {"version": "v1", "format": "tsv", "min_score": "\u0665\u0660"},
    )
    assert response.status_code == 200 and "Enter a number written in digits 0-9" in response.content.decode()
    assert not Job.objects.exists()

    # ASCII still works, spaces around it too, and the ranges still speak for themselves
    assert (
        boss.post(TRAIN, train_form(campaign, seed=" 12 ", min_judgments="+3", test_fraction="0.25")).status_code == 302
    )
    train = Job.objects.get().params["train"]
    assert (train["seed"], train["min_judgments"], train["test_fraction"]) == (12, 3, 0.25)
    response = boss.post(TRAIN, train_form(campaign, name="other", min_judgments="9" * 30))
    assert response.status_code == 200 and "less than or equal to" in response.content.decode()


BAD_NAMES = [
    "a\nb",
    "a\u200fb",
    "\u202eexe.txt",
    ".hidden",
    "-x",
    "a b",
    "a/b",
    "a\\b",
    "..",
    "r\u00e9g",
    "x" * 101,
    "a\tb",
]


def test_regressor_names_are_printable_ascii_in_the_form(boss, campaign):
    for name in BAD_NAMES:
        response = boss.post(TRAIN, train_form(campaign, name=name))
        page = response.content.decode()
        assert response.status_code == 200, name
        assert "invalid regressor name" in page or "at most 100 characters" in page, name
    assert not Job.objects.exists()
    assert boss.post(TRAIN, train_form(campaign, name="para_v2.1-base")).status_code == 302


@pytest.mark.parametrize("name", BAD_NAMES)
def test_regressor_names_are_printable_ascii_on_the_command_line_and_in_the_job(campaign, storage_dir, name):
    with pytest.raises(CommandError, match="invalid regressor name") as err:
        call_command("train_regressor", "synthetic", f"--name={name}", "--no-embeddings")
    assert "\n" not in str(err.value) and "letters, digits" in str(err.value)
    with pytest.raises(ValueError, match="invalid regressor name"):
        train_regressor_launch(campaign="synthetic", name=name, options=RegressorTrainOptions(with_embeddings=False))
    assert not Job.objects.exists() and not Regressor.objects.exists()
    assert not (storage_dir / "regressors").exists()
