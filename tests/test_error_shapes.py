"""No 500s, one error shape: every error under /api/ is JSON ``{"detail": str, "code": str}``; a hostile
body, an id past the 64-bit range or a digit that is not 0-9 is a 4xx, never a server error."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.urls import path
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import AllowAny

from annotation.models import Assignment, AssignmentStatus, Judgment
from config.urls import handler400, handler403, handler404, handler500, urlpatterns as site_urlpatterns  # noqa: F401  (this module is a URLconf)
from tests.annotation.builders import payload, published_batch, sample_campaign

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore:No directory at:UserWarning")]

HUGE = 2**63  # one past the largest 64-bit id
UNICODE_DIGITS = ["²", "①", "١٢"]  # "²".isdigit() is True yet int("²") raises; int("١٢") == 12


# --- a URLconf for the server-error test: the site's, plus two views that crash ---------------------


@api_view(["GET"])
@permission_classes([AllowAny])
def _api_crash(request):
    raise RuntimeError("a bug")


def _page_crash(request):
    raise RuntimeError("a bug")


urlpatterns = [path("api/crash/", _api_crash), path("crash/", _page_crash), *site_urlpatterns]


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def hit():
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=4)
    return published_batch(campaign, attention_rate=0).hits.order_by("id").first()


@pytest.fixture
def boss(client):
    client.force_login(get_user_model().objects.create_superuser("boss", password="pw-boss-1"))
    return client


def submit(client, hit, body: bytes | str, content_type: str = "application/json"):
    data = body.encode() if isinstance(body, str) else body
    return client.generic("POST", f"/api/hits/{hit.pk}/assignments/", data, content_type=content_type)


def assert_error_shape(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert isinstance(body.get("detail"), str) and body["detail"], body
    assert isinstance(body.get("code"), str) and body["code"], body
    if code is not None:
        assert body["code"] == code, body
    return body


def nothing_saved() -> bool:
    return not Judgment.objects.exists() and not Assignment.objects.filter(status=AssignmentStatus.SUBMITTED).exists()


# --- hostile JSON ---------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [40, 1_000, 100_000])
def test_deeply_nested_json_is_a_400_with_a_code_not_a_500(client, hit, depth):
    client.raise_request_exception = False
    for body in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth):
        body = assert_error_shape(submit(client, hit, body), 400, "parse_error")
        assert "nested" in body["detail"]
    assert nothing_saved()
    assert submit(client, hit, json.dumps(payload(hit))).status_code == 201  # a real submission still goes in


def test_json_in_another_charset_is_refused_and_nothing_is_stored(client, hit):
    body = json.dumps(payload(hit, comment="café"), ensure_ascii=False)
    for charset, encoding in (
        ("latin-1", "latin-1"),
        ("ISO-8859-1", "latin-1"),
        ("utf-16", "utf-16"),
        ("no-such-charset", "utf-8"),
    ):
        response = submit(client, hit, body.encode(encoding), f"application/json; charset={charset}")
        assert_error_shape(response, 415, "unsupported_media_type")
    # latin-1 bytes that do not say so: not UTF-8, refused rather than guessed
    assert_error_shape(submit(client, hit, body.encode("latin-1")), 400, "parse_error")
    assert nothing_saved()
    for content_type in ("application/json; charset=utf-8", "application/json; charset=UTF8"):
        assert submit(client, hit, body.encode("utf-8"), content_type).status_code in (200, 201)
    assert Assignment.objects.get(external_assignment_id="A1").comment == "café"


@pytest.mark.parametrize("field", ["worker_id", "assignment_id", "comment", "token"])
def test_a_lone_surrogate_escape_is_a_400_not_a_500(client, hit, field):
    """``"\\ud800"`` is valid JSON syntax yet no Unicode text: the worker id went into the rate-limit key
    and the database driver could not encode it (a 500)."""
    client.raise_request_exception = False
    body = payload(hit)
    body[field] = "W\ud800" if field != "comment" else "\udfff"
    body = assert_error_shape(submit(client, hit, json.dumps(body)), 400, "parse_error")  # ASCII escapes
    assert "surrogate" in body["detail"]
    assert nothing_saved()
    pair = payload(hit, comment="\U0001f600")  # a real pair, escaped as \ud83d\ude00, is one character: fine
    assert submit(client, hit, json.dumps(pair)).status_code == 201


@pytest.mark.parametrize("worker_id", ["W\u0000", "W\u0007x", "W\u00e9\U0001f600"])
def test_control_characters_in_a_worker_id_are_a_400_not_a_500(client, hit, worker_id):
    """The worker id is part of a rate-limit counter's key, written before the body is checked: PostgreSQL
    refused a NUL byte in it (a 500, found by schemathesis on PostgreSQL)."""
    client.raise_request_exception = False
    body = payload(hit)
    body["worker_id"] = worker_id
    response = submit(client, hit, json.dumps(body))
    assert response.status_code in (400, 403) and response.json()["code"]
    assert nothing_saved()


def test_an_oversized_body_is_json_with_a_code(client, hit, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2_000
    client.raise_request_exception = False
    body = json.dumps(payload(hit, comment="x" * 3_000))
    response = submit(client, hit, body)
    assert response.status_code in (400, 413)
    assert_error_shape(response, response.status_code, "request_too_large")
    assert nothing_saved()


# --- every API error: {"detail": str, "code": str} ------------------------------------------------


def test_validation_and_parse_errors_have_a_string_detail_and_a_code(client, hit):
    invalid = assert_error_shape(submit(client, hit, json.dumps({"worker_id": "W1"})), 400, "invalid")
    assert "judgments" in invalid["errors"]  # the field errors are still there
    bad_score = payload(hit)
    bad_score["judgments"][0]["score"] = 101
    assert "score" in json.dumps(assert_error_shape(submit(client, hit, json.dumps(bad_score)), 400)["errors"])
    assert_error_shape(submit(client, hit, "{not json"), 400, "parse_error")
    assert_error_shape(submit(client, hit, '{"score": NaN}'), 400, "parse_error")
    assert_error_shape(
        submit(client, hit, "worker_id=W1", "application/x-www-form-urlencoded"), 415, "unsupported_media_type"
    )
    assert nothing_saved()


def test_a_throttled_submission_has_a_string_detail_and_a_code(client, hit, settings):
    settings.ANNOTATION_SUBMISSION_RATE = "1/min"
    body = json.dumps(payload(hit))
    responses = [submit(client, hit, body) for _ in range(3)]
    assert responses[0].status_code in (200, 201)
    assert_error_shape(responses[-1], 429, "throttled")


def test_drf_refusals_have_a_string_detail_and_a_code(client, hit):
    client.raise_request_exception = False
    assert_error_shape(client.get(f"/api/hits/{hit.pk}/assignments/"), 405, "method_not_allowed")
    assert_error_shape(submit(client, type(hit)(pk=hit.pk + 1000), json.dumps(payload(hit))), 404, "not_found")
    for url in ("/api/jobs/1/", f"/api/batches/{hit.batch_id}/hits/", "/api/releases/"):
        response = client.get(url)
        assert_error_shape(response, response.status_code)
        assert response.status_code in (401, 403)
        assert response.json()["code"] in ("not_authenticated", "permission_denied")


def test_errors_outside_drf_views_on_api_paths_are_json_too(client, hit):
    client.raise_request_exception = False
    for url in (
        "/api/nothing-here/",
        "/api/hits/abc/assignments/",
        f"/api/hits/{HUGE}/assignments/",
        f"/api/jobs/{HUGE}/",
    ):
        assert_error_shape(client.get(url), 404, "not_found")
    assert_error_shape(client.get("/api/releases/", HTTP_HOST="evil.example"), 400, "bad_request")
    # pages keep their HTML error pages
    page = client.get("/no-such-page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


@pytest.mark.urls("tests.test_error_shapes")
def test_a_server_error_on_the_api_is_json_and_a_page_stays_html(client):
    client.raise_request_exception = False
    assert_error_shape(client.get("/api/crash/"), 500, "server_error")
    page = client.get("/crash/")
    assert page.status_code == 500 and page["Content-Type"].startswith("text/html")


# --- ids past the 64-bit range: a 404, not a database overflow ----------------------------------------


def test_ids_past_the_64_bit_range_are_404_everywhere(client, boss, hit):
    client.raise_request_exception = False
    for url in (
        f"/hits/{HUGE}/",
        f"/hits/{'9' * 40}/",
        f"/research/campaigns/{HUGE}/",
        f"/research/campaigns/{HUGE}/tables/similarity.csv",
        f"/research/campaigns/{HUGE}/plots/x.png",
        f"/research/corpora/{HUGE}/constraints/",
        f"/api/batches/{HUGE}/hits/",
        f"/api/batches/{HUGE}/results.csv",
        f"/api/releases/{HUGE}/",
        f"/api/releases/{HUGE}/files/a",
    ):
        response = client.get(url)
        assert response.status_code == 404, f"{url} -> {response.status_code}"
        if url.startswith("/api/"):
            assert_error_shape(response, 404, "not_found")
    assert_error_shape(
        client.post(f"/api/hits/{HUGE}/assignments/", "{}", content_type="application/json"), 404, "not_found"
    )
    assert client.get(f"/hits/{hit.pk}/").status_code == 200  # a real id still resolves
    # the admin answers an unknown or malformed id with its own redirect to the list, not a 500
    for url in (
        f"/admin/annotation/hit/{HUGE}/change/",
        "/admin/annotation/hit/abc/change/",
        f"/admin/jobs/job/{'9' * 30}/change/",
        f"/admin/scoring/scoredresource/{HUGE}/export/",
        f"/admin/generation/corpus/import/{HUGE}/",
        f"/admin/generation/idftable/{HUGE}/download/",
    ):
        assert client.get(url).status_code in (302, 404), url


# --- staff pages: digits 0-9 only ---------------------------------------------------------------


def test_the_dashboard_refuses_min_judgments_that_are_not_ascii_digits(boss, hit):
    campaign = hit.batch.campaign
    boss.raise_request_exception = False
    base = f"/research/campaigns/{campaign.pk}"
    for url in (
        f"{base}/",
        f"{base}/tables/similarity.csv",
        f"{base}/tables/fluency.json",
        f"{base}/plots/similarity-by-length.png",
    ):
        for value in UNICODE_DIGITS:
            response = boss.get(url, {"min_judgments": value})
            assert response.status_code == 400, f"{url}?min_judgments={value} -> {response.status_code}"
            assert "digits 0-9" in response.content.decode()
        assert boss.get(url, {"min_judgments": "2"}).status_code == 200


def test_the_constraint_page_refuses_numbers_that_are_not_ascii_digits(boss):
    from generation.models import Corpus

    corpus = Corpus.objects.create(name="c", format="mono", status="ready")
    boss.raise_request_exception = False
    for url, names in (
        ("/research/constraints/", ("idf", "seed", "min_idf", "max_idf")),
        (f"/research/corpora/{corpus.pk}/constraints/", ("i", "seed")),
    ):
        for name in names:
            for value in [*UNICODE_DIGITS, "nan", "inf"] if name in ("min_idf", "max_idf") else UNICODE_DIGITS:
                response = boss.get(url, {name: value})
                assert response.status_code == 400, f"{url}?{name}={value} -> {response.status_code}"
                assert "digits 0-9" in response.content.decode(), (name, value)
    assert boss.get("/research/constraints/", {"seed": "-3", "min_idf": "1.5", "max_idf": "1e2"}).status_code == 200


def test_the_release_export_form_refuses_filters_that_are_not_ascii_digits(boss, storage_dir):
    from generation.models import Corpus, Resource
    from jobs.models import Job
    from scoring.models import ScoredResource
    from tests.scoring.resource_data import make_regressor

    corpus = Corpus.objects.create(name="c", format="mono", status="ready")
    scored = ScoredResource.objects.create(
        resource=Resource.objects.create(name="r", corpus=corpus), regressor=make_regressor()
    )
    boss.raise_request_exception = False
    url = f"/admin/scoring/scoredresource/{scored.pk}/export/"
    for filters in ("top=²", "top=①", "top=١٢", "len=١-٤٠", "score=٥٠", "entailment=٠.٥"):
        response = boss.post(url, {"version": "v1", "format": "tsv", "filters": filters})
        assert response.status_code == 200, f"{filters} -> {response.status_code}"  # the form again, with
        assert "errorlist" in response.content.decode(), filters  # the filter's error
    assert not Job.objects.filter(kind="export_release").exists()
