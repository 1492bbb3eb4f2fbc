"""The OpenAPI description (/api/schema/, drf-spectacular) against the API itself.

schemathesis generates requests for every operation from the description (valid and invalid ones, a
fixed number per operation, derandomized) and sends them to a live server, anonymously and as staff; every
answer must be no 5xx, a documented status and content type, and a body that fits the documented schema.
Each generated request is also sent with its ids pointed at real rows (and, for submissions, a valid
token and the HIT's sentences' keys), so the success answers are checked too, not only the 403s and 404s.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest
import schemathesis
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import get_resolver
from hypothesis import HealthCheck, settings as hypothesis_settings
from schemathesis.specs.openapi.checks import negative_data_rejection

from annotation.hits.tokens import item_key, submission_token_make
from annotation.models import Hit
from jobs.models import Job, JobStatus
from scoring.models import Release
from scoring.releases.export import release_export
from scoring.releases.manifest import release_files
from scoring.releases.params import ReleaseExportParams

from .annotation.builders import published_batch, sample_campaign
from .scoring.resource_data import OverlapScorer, build_resource, make_regressor, score_with

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

EXAMPLES = 12  # per operation and mode; with 4 variants each and the checks' own requests, well under 60 s


@dataclass
class Rows:
    hit: Hit
    batch_id: int
    job_id: int
    release: Release
    corpus_id: int
    scored_resource_id: int
    staff_cookies: dict[str, str]


@pytest.fixture
def rows(live_server, storage_dir, tmp_path, settings, client) -> Rows:
    settings.ANNOTATION_SUBMISSION_RATE = settings.ANNOTATION_SUBMISSION_IP_RATE = "1000000/min"
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    batch = published_batch(campaign, attention_rate=0)
    job = Job.objects.create(kind="score_resource", status=JobStatus.SUCCEEDED, total_chunks=0, result={"pairs": 3})
    resource = build_resource()
    scored = score_with(resource, make_regressor(), OverlapScorer())
    Job.objects.create(kind="generate", status=JobStatus.RUNNING, total_chunks=0, params={"corpus": resource.corpus_id})
    release = release_export(ReleaseExportParams(resource=resource.pk), out_dir=tmp_path / "v1")
    staff = get_user_model().objects.create_superuser("staff", password="pw")
    client.force_login(staff)
    return Rows(
        hit=batch.hits.order_by("pk").first(),
        batch_id=batch.pk,
        job_id=job.pk,
        release=release,
        corpus_id=resource.corpus_id,
        scored_resource_id=scored.pk,
        staff_cookies={"sessionid": client.cookies["sessionid"].value},
    )


def _description() -> dict:
    """What GET /api/schema/ serves (test_the_description_is_public_... checks that it is)."""
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


# Loaded at collection (schemathesis' lazy ``from_fixture`` does not run on pytest 9.2: it sets
# ``Node._nodeid``, which pytest 9.2 no longer has); the requests still go to the live server.
schema = schemathesis.openapi.from_dict(_description())


def _real_ids(case, rows: Rows):
    """The same request with its ids pointed at existing rows: a submission gets a valid token for its
    assignment and worker ids and the HIT's candidates (the generated scores and fluencies kept)."""
    ids = {"hit_id": rows.hit.pk, "batch_id": rows.batch_id, "job_id": rows.job_id, "release_id": rows.release.pk}
    if case.method.upper() == "GET":  # the listings under a corpus or a scored resource (a POST there starts a job)
        ids.update(corpus_id=rows.corpus_id, scored_resource_id=rows.scored_resource_id)
    path = {k: ids.get(k, v) for k, v in (case.path_parameters or {}).items()}
    if "name" in path:  # one of the release's files (gzip or the JSON manifest), picked by the generated name
        names = release_files(rows.release.manifest)
        path["name"] = names[len(str(path["name"])) % len(names)]
    body = case.body
    if (
        isinstance(body, dict)
        and {"assignment_id", "worker_id"} <= set(body)
        and all(isinstance(body[k], str) for k in ("assignment_id", "worker_id"))
    ):
        body = dict(
            body,
            token=submission_token_make(
                hit_id=rows.hit.pk, assignment_id=body["assignment_id"], worker_id=body["worker_id"]
            ),
        )
        judgments = body.get("judgments")
        if isinstance(judgments, list) and judgments and all(isinstance(j, dict) for j in judgments):
            candidates = rows.hit.items.order_by("position").values_list("candidate_id", flat=True)
            body["judgments"] = [
                dict(judgments[k % len(judgments)], item=item_key(hit_id=rows.hit.pk, candidate_id=c))
                for k, c in enumerate(candidates)
            ]
    return case.operation.Case(
        path_parameters=path, query=case.query, headers=case.headers, body=body, media_type=case.media_type
    )


@schema.parametrize()
# deadline and health checks time the generator on a shared, loaded machine: they say nothing of the API
@hypothesis_settings(max_examples=EXAMPLES, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_answer_fits_the_description(case, rows, live_server):
    url = live_server.url
    case.call_and_validate(base_url=url)
    _real_ids(case, rows).call_and_validate(base_url=url)
    # As staff: the session cookie replaces a generated one, so a case made invalid by a missing or odd
    # cookie is no longer invalid (negative_data_rejection does not apply); ignored_auth still probes it.
    case.call_and_validate(base_url=url, cookies=rows.staff_cookies, excluded_checks=[negative_data_rejection])
    _real_ids(case, rows).call_and_validate(base_url=url, cookies=rows.staff_cookies)


def test_the_description_is_public_openapi_3_and_covers_every_api_url(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    description = json.loads(response.content)
    assert description["openapi"].startswith("3.")
    assert description == json.loads(json.dumps(_description()))  # what the schemathesis test runs on
    documented = {re.sub(r"\{\w+\}", "X", p) for p in description["paths"]}
    assert "/api/hits/X/assignments/" in documented

    def api_routes(resolver, prefix=""):
        for p in resolver.url_patterns:
            route = prefix + str(p.pattern)
            if hasattr(p, "url_patterns"):
                yield from api_routes(p, route)
            elif route.startswith("api/") and not route.startswith("api/schema/"):
                yield "/" + re.sub(r"<[^>]+>", "X", route)

    assert set(api_routes(get_resolver())) == documented


def test_the_description_validates_with_no_warning():
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")


@pytest.mark.browser
def test_swagger_ui_runs_under_the_csp_from_our_own_files_and_shows_every_operation(live_server, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    from playwright.sync_api import TimeoutError as PlaywrightTimeout, sync_playwright

    from .annotation.test_browser import CHROMIUM_ARGS

    operations = [(method.upper(), path) for path, item in _description()["paths"].items() for method in item]
    requested, violations, errors = [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.add_init_script(
                "document.addEventListener('securitypolicyviolation', e => "
                "console.error('CSP ' + e.violatedDirective + ' ' + e.blockedURI))"
            )
            page.on("request", lambda r: requested.append(r.url))
            page.on(
                "console",
                lambda m: (
                    (violations if m.text.startswith("CSP ") else errors).append(m.text) if m.type == "error" else None
                ),
            )
            page.on("pageerror", lambda e: errors.append(str(e)))
            response = page.goto(f"{live_server.url}/api/schema/ui/")
            assert "script-src 'self'" in response.headers["content-security-policy"]
            try:
                page.wait_for_selector(".opblock", timeout=20_000)
            except PlaywrightTimeout:
                pass  # nothing shown: the assertions below say why
            shown = [
                (
                    b.locator(".opblock-summary-method").inner_text().strip(),
                    b.locator(".opblock-summary-path").get_attribute("data-path"),
                )
                for b in page.locator(".opblock").all()
            ]
            title = page.locator(".info h1.title").all_inner_texts()
        finally:
            browser.close()
    assert violations == [] and errors == []
    assert title and title[0].startswith("Paraforge")
    assert sorted(shown) == sorted(operations) and ("POST", "/api/hits/{hit_id}/assignments/") in shown
    assert requested and all(url.startswith(live_server.url) for url in requested), requested  # no CDN
