"""Issue 48, item 6: the API lists. A script finds its corpora, campaigns, regressors, scored resources, releases
and jobs (a lost job by its status and kind) without reading ids off admin URLs; each listing is paged, filters
with a 400 naming a bad value, and shows nothing to a staff user without its view permission."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from annotation.models import Campaign
from api.listing import PAGE_DEFAULT, PAGE_MAX
from generation.models import Corpus, Resource
from jobs.models import Job
from scoring.models import Regressor, Release, ScoredResource

pytestmark = pytest.mark.django_db


def staff(client, *perms: str, name: str = "lister"):
    user = get_user_model().objects.create_user(name, password=f"pw-{name}-1", is_staff=True)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    client.force_login(user)
    return client


def jobs(*specs: tuple[str, str]) -> list[Job]:
    return [Job.objects.create(kind=kind, status=status, total_chunks=0) for kind, status in specs]


def ids(answer) -> list[int]:
    assert answer.status_code == 200, answer.content
    return [row["id"] for row in answer.json()["results"]]


def test_a_lost_job_is_found_by_status_and_kind_newest_first(client):
    generate_failed, generate_running, idf_running = jobs(
        ("generate", "failed"), ("generate", "running"), ("build_idf", "running")
    )
    c = staff(client, "jobs.view_job")
    assert ids(c.get("/api/jobs/")) == [idf_running.pk, generate_running.pk, generate_failed.pk]
    assert ids(c.get("/api/jobs/?status=running")) == [idf_running.pk, generate_running.pk]
    assert ids(c.get("/api/jobs/?status=running&kind=generate")) == [generate_running.pk]
    assert ids(c.get("/api/jobs/?kind=train_regressor")) == []
    row = c.get("/api/jobs/?kind=build_idf").json()["results"][0]
    assert row["kind"] == "build_idf" and row["status"] == "running"
    assert row["url"] == f"/api/jobs/{idf_running.pk}/" and c.get(row["url"]).status_code == 200


@pytest.mark.parametrize(
    "query,name",
    [
        ("status=runing", "status"),
        ("kind=no-such-kind", "kind"),
        ("limit=0", "limit"),
        (f"limit={PAGE_MAX + 1}", "limit"),
        ("limit=1.0", "limit"),
        ("limit=%D9%A1", "limit"),  # an Arabic-Indic 1
        ("limit=", "limit"),
        ("status=", "status"),
        ("offset=-1", "offset"),
        ("offset=99999999999999999999999", "offset"),
    ],
)
def test_a_bad_filter_or_page_is_a_400_naming_it(client, query, name):
    jobs(("generate", "running"))
    answer = staff(client, "jobs.view_job").get(f"/api/jobs/?{query}")
    assert answer.status_code == 400
    body = answer.json()
    assert body["code"] == "invalid" and body["detail"] and name in body["errors"]


def test_pages_are_bounded_and_link_to_each_other(client):
    made = jobs(*[("selftest", "succeeded")] * 5)
    newest_first = [job.pk for job in reversed(made)]
    c = staff(client, "jobs.view_job")
    first = c.get("/api/jobs/?limit=2").json()
    assert first["count"] == 5 and [r["id"] for r in first["results"]] == newest_first[:2]
    assert first["previous"] is None
    second = c.get(first["next"]).json()
    assert [r["id"] for r in second["results"]] == newest_first[2:4]
    last = c.get(second["next"]).json()
    assert [r["id"] for r in last["results"]] == newest_first[4:] and last["next"] is None
    assert ids(c.get("/api/jobs/?offset=99")) == []
    jobs(*[("selftest", "succeeded")] * PAGE_DEFAULT)
    assert len(ids(c.get("/api/jobs/"))) == PAGE_DEFAULT  # no limit: the default page, not every row


LISTINGS = [
    ("/api/jobs/", "jobs.view_job"),
    ("/api/corpora/", "generation.view_corpus"),
    ("/api/campaigns/", "annotation.view_campaign"),
    ("/api/regressors/", "scoring.view_regressor"),
    ("/api/scored-resources/", "scoring.view_scoredresource"),
]


@pytest.mark.parametrize("url,perm", LISTINGS)
def test_each_listing_refuses_anonymous_and_staff_without_its_view_permission(client, url, perm):
    anonymous = client.get(url)
    assert anonymous.status_code == 403 and anonymous.json()["code"] == "not_authenticated"
    others = [p for _, p in LISTINGS if p != perm]
    refused = staff(client, *others).get(url)  # every other listing's permission, not this one's
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert "results" not in refused.json()


def test_starting_a_job_does_not_open_its_listing_nor_the_listing_starting_a_job(client):
    """GET and POST of /api/regressors/ need different permissions: the add permission does not show the
    regressors, the view permission does not train one."""
    c = staff(client, "scoring.add_regressor", "jobs.view_job")
    assert c.get("/api/regressors/").status_code == 403
    viewer = get_user_model().objects.create_user("viewer", password="pw-viewer-1", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_regressor"))
    client.force_login(viewer)
    assert client.get("/api/regressors/").status_code == 200
    answer = client.post("/api/regressors/", {"campaign": 1, "name": "x"}, content_type="application/json")
    assert answer.status_code == 403 and answer.json()["code"] == "permission_denied"
    assert not Job.objects.exists()


def test_corpora_by_status_and_a_corpus_s_generation_jobs(client):
    ready = Corpus.objects.create(name="ready", format="mono", status="ready")
    importing = Corpus.objects.create(name="importing", format="mono", status="importing")
    mine = Job.objects.create(kind="generate", status="running", params={"corpus": ready.pk}, total_chunks=0)
    Job.objects.create(kind="generate", status="running", params={"corpus": importing.pk}, total_chunks=0)
    Job.objects.create(kind="build_idf", status="running", params={"corpus": ready.pk}, total_chunks=0)
    c = staff(client, "generation.view_corpus", "jobs.view_job")
    assert ids(c.get("/api/corpora/")) == [importing.pk, ready.pk]
    assert ids(c.get("/api/corpora/?status=ready")) == [ready.pk]
    assert c.get("/api/corpora/?status=done").status_code == 400
    assert ids(c.get(f"/api/corpora/{ready.pk}/generations/")) == [mine.pk]
    assert ids(c.get(f"/api/corpora/{ready.pk}/generations/?status=failed")) == []
    missing = c.get("/api/corpora/999999/generations/")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"


def test_campaigns_regressors_and_scored_resources_list_the_ids_their_endpoints_take(client):
    first = Campaign.objects.create(name="first")
    second = Campaign.objects.create(name="second / with a slash")
    reg_a = Regressor.objects.create(name="reg-a", campaign=first, key="r/a", metrics={"spearman_test": 0.7})
    reg_b = Regressor.objects.create(name="reg-b", campaign=second, key="r/b")
    resource = Resource.objects.create(name="res", corpus=Corpus.objects.create(name="c", format="mono"))
    scored_a = ScoredResource.objects.create(resource=resource, regressor=reg_a, n_pairs=7)
    scored_b = ScoredResource.objects.create(resource=resource, regressor=reg_b)
    c = staff(client, "annotation.view_campaign", "scoring.view_regressor", "scoring.view_scoredresource")

    assert ids(c.get("/api/campaigns/")) == [second.pk, first.pk]
    assert c.get("/api/campaigns/").json()["results"][0]["name"] == "second / with a slash"

    assert ids(c.get("/api/regressors/")) == [reg_b.pk, reg_a.pk]
    assert ids(c.get(f"/api/regressors/?campaign={first.pk}")) == [reg_a.pk]
    row = c.get(f"/api/regressors/?campaign={first.pk}").json()["results"][0]
    assert row["name"] == "reg-a" and row["campaign"] == first.pk and row["metrics"] == {"spearman_test": 0.7}
    assert c.get("/api/regressors/?campaign=first").status_code == 400

    assert ids(c.get("/api/scored-resources/")) == [scored_b.pk, scored_a.pk]
    assert ids(c.get(f"/api/scored-resources/?regressor={reg_a.pk}")) == [scored_a.pk]
    assert ids(c.get(f"/api/scored-resources/?resource={resource.pk}&regressor={reg_b.pk}")) == [scored_b.pk]
    row = c.get(f"/api/scored-resources/?regressor={reg_a.pk}").json()["results"][0]
    assert (row["resource_name"], row["regressor_name"], row["n_pairs"]) == ("res", "reg-a", 7)


def test_releases_are_a_page_of_those_the_caller_may_see(client):
    resource = Resource.objects.create(name="res", corpus=Corpus.objects.create(name="c", format="mono"))
    v1, v2, v3 = (Release.objects.create(resource=resource, version=v, location="x") for v in ("v1", "v2", "v3"))
    reader = get_user_model().objects.create_user("reader", password="pw-reader-1")
    v1.allowed_users.add(reader)
    v3.allowed_users.add(reader)
    client.force_login(reader)
    page = client.get("/api/releases/?limit=1").json()
    assert page["count"] == 2 and [r["id"] for r in page["results"]] == [v3.pk]  # v2 is not theirs
    assert [r["id"] for r in client.get(page["next"]).json()["results"]] == [v1.pk]
    assert client.get("/api/releases/?limit=x").status_code == 400


def test_a_scored_resource_lists_the_releases_exported_from_it(client):
    """Two regressors scored one resource: each scoring lists only the releases its regressor made."""
    resource = Resource.objects.create(name="res", corpus=Corpus.objects.create(name="c", format="mono"))
    reg_a, reg_b = (Regressor.objects.create(name=n, key=f"r/{n}") for n in ("reg-a", "reg-b"))
    scored_a = ScoredResource.objects.create(resource=resource, regressor=reg_a)
    ScoredResource.objects.create(resource=resource, regressor=reg_b)

    def release(version: str, regressor: str) -> Release:
        manifest = {"regressor": {"name": regressor}}
        return Release.objects.create(resource=resource, version=version, location="x", manifest=manifest)

    v1, _, v3 = release("v1", "reg-a"), release("v2", "reg-b"), release("v3", "reg-a")
    c = staff(client, "scoring.view_scoredresource", "scoring.view_release")
    assert ids(c.get(f"/api/scored-resources/{scored_a.pk}/releases/")) == [v3.pk, v1.pk]
    assert c.get("/api/scored-resources/999999/releases/").status_code == 404
    without = staff(client, "scoring.view_scoredresource", name="other").get(
        f"/api/scored-resources/{scored_a.pk}/releases/"
    )
    assert without.status_code == 403 and without.json()["code"] == "permission_denied"


def test_the_description_documents_each_listing_its_filters_and_its_page():
    from drf_spectacular.generators import SchemaGenerator

    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    expected = {
        "/api/jobs/": {"limit", "offset", "status", "kind"},
        "/api/corpora/": {"limit", "offset", "status"},
        "/api/corpora/{corpus_id}/generations/": {"corpus_id", "limit", "offset", "status", "kind"},
        "/api/campaigns/": {"limit", "offset"},
        "/api/regressors/": {"limit", "offset", "campaign"},
        "/api/scored-resources/": {"limit", "offset", "resource", "regressor"},
        "/api/releases/": {"limit", "offset"},
        "/api/scored-resources/{scored_resource_id}/releases/": {"scored_resource_id", "limit", "offset"},
    }
    for path, parameters in expected.items():
        get = paths[path]["get"]
        assert {p["name"] for p in get["parameters"]} == parameters, path
        assert {"200", "400", "403"} <= set(get["responses"]), path
        page = get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        assert page.endswith("Page"), path
    assert "post" in paths["/api/scored-resources/{scored_resource_id}/releases/"]
    assert "post" in paths["/api/regressors/"] and "post" in paths["/api/corpora/{corpus_id}/generations/"]


@pytest.mark.parametrize("url", ["/api/jobs/", "/api/scored-resources/", "/api/releases/", "/api/regressors/"])
def test_a_page_costs_the_same_queries_whatever_its_rows(client, url):
    """No query a row: a page of 40 rows asks the database as often as a page of 2."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    corpus = Corpus.objects.create(name="c", format="mono")
    c = staff(client, "jobs.view_job", "scoring.view_scoredresource", "scoring.view_release", "scoring.view_regressor")

    def queries_for(n: int) -> int:
        start = Job.objects.count()
        for k in range(start, start + n):
            Job.objects.create(kind="selftest", status="succeeded", total_chunks=0)
            resource = Resource.objects.create(name=f"res-{k}", corpus=corpus)
            regressor = Regressor.objects.create(name=f"reg-{k}", key="r")
            ScoredResource.objects.create(resource=resource, regressor=regressor)
            Release.objects.create(resource=resource, version="v1", location="x", manifest={})
        with CaptureQueriesContext(connection) as captured:
            assert len(ids(c.get(url))) == start + n
        return len(captured)

    assert queries_for(2) == queries_for(38)
