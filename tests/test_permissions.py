"""docs/reference/permissions.md is the rule: for every row of its tables (admin actions, admin pages, API routes
and research pages), a staff user holding exactly the permissions named succeeds, and one lacking any single
one of them is refused and changes nothing. The tables are read from the page, and every action, admin page
and /api/ or /research/ route of the code must have its row (issue 36: ``jobs.view_job`` alone cancelled and
resumed jobs; ``generation.view_corpus`` alone imported corpora; any staff user saw any import's progress)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import RequestFactory
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "permissions.md"
SECTIONS = {"Admin actions": "action", "Admin pages": "page", "HTTP API and research pages": "route"}
PERMS_CELL = re.compile(r"`\w+\.\w+`(, `\w+\.\w+`)*")


@dataclass(frozen=True)
class Row:
    """One row of the page: ``key`` is ``"app.model action"`` for an action (``"* delete_selected"`` for Django's
    own), the route for a page or an endpoint; ``perms`` is empty where the cell names no permission list."""

    section: str
    key: str
    perms: tuple[str, ...]
    cell: str
    methods: str = ""  # a page's or a route's, as the row says them ("GET", "GET, POST")


def page_rows() -> list[Row]:
    rows, section = [], None
    for line in PAGE.read_text().splitlines():
        if line.startswith("## "):
            section = SECTIONS.get(line[3:].strip())
            continue
        if section is None or not line.startswith("| `") and not line.startswith("| every"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        perms_cell = cells[-1]
        perms = tuple(re.findall(r"`(\w+\.\w+)`", perms_cell)) if PERMS_CELL.fullmatch(perms_cell) else ()
        if section == "action":
            model = cells[0].strip("`") if cells[0].startswith("`") else "*"
            key = f"{model} {cells[1].strip('`')}"
        else:
            key = cells[0].strip("`")
        rows.append(Row(section, key, perms, perms_cell, cells[1] if section != "action" else ""))
    return rows


ROWS = page_rows()


def test_the_page_has_its_three_tables():
    assert {r.section for r in ROWS} == set(SECTIONS.values())
    assert any(r.key == "jobs.job cancel_jobs" and r.perms == ("jobs.view_job", "jobs.cancel_job") for r in ROWS)


# --- the code has no action, page or route without its row ---------------------------------------------------

DEFAULT_ADMIN_URLS = ("_changelist", "_add", "_history", "_delete", "_change")


def code_actions() -> set[str]:
    boss = get_user_model()(username="boss", is_staff=True, is_superuser=True, is_active=True)
    request = RequestFactory().get("/admin/")
    request.user = boss
    found = set()
    for model in apps.get_models():
        if not admin.site.is_registered(model):
            continue
        for name in admin.site.get_model_admin(model).get_actions(request):
            found.add("* delete_selected" if name == "delete_selected" else f"{model._meta.label_lower} {name}")
    return found


def code_admin_pages() -> set[str]:
    found = set()
    for model in apps.get_models():
        if not admin.site.is_registered(model):
            continue
        for pattern in admin.site.get_model_admin(model).get_urls():
            if isinstance(pattern, URLPattern) and pattern.name and not pattern.name.endswith(DEFAULT_ADMIN_URLS):
                found.add(f"/admin/{model._meta.app_label}/{model._meta.model_name}/{pattern.pattern}")
    return found


def routes(resolver: URLResolver, prefix: str = "") -> list[str]:
    found = []
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern)
        found += routes(entry, route) if isinstance(entry, URLResolver) else [route]
    return found


def code_routes() -> set[str]:
    return {"/" + r for r in routes(get_resolver()) if r.startswith(("api/", "research/"))}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "section,found", [("action", code_actions), ("page", code_admin_pages), ("route", code_routes)]
)
def test_every_action_page_and_route_of_the_code_has_its_row_and_no_row_is_stale(section, found):
    listed = {r.key for r in ROWS if r.section == section}
    in_code = found()
    assert in_code - listed == set(), f"not in docs/reference/permissions.md: {sorted(in_code - listed)}"
    assert listed - in_code == set(), f"listed but not in the code: {sorted(listed - in_code)}"


def test_every_api_view_states_its_permission_classes():
    """No /api/ view falls back on DRF's default (``is_staff`` alone): each names what it needs."""
    from rest_framework.views import APIView

    resolver, checked = get_resolver(), 0
    for route in sorted(code_routes()):
        if not route.startswith("/api/"):
            continue
        example = re.sub(r"<(?:id|int):\w+>", "1", route)
        example = re.sub(r"<(?:str|path):\w+>", "x", example)
        view = resolver.resolve(example).func
        cls = getattr(view, "cls", None) or getattr(view, "view_class", None)
        assert cls is not None and issubclass(cls, APIView), route
        assert cls.permission_classes is not APIView.permission_classes, f"{route} uses DRF's default permissions"
        checked += 1
    assert checked >= 15


# --- what each row's action does, and whether it was done ------------------------------------------------------


@dataclass
class Attempt:
    refused: bool  # 403, or (an action) not offered to the user
    done: bool  # what the row's action does happened


def staff(client, perms) -> None:
    user = get_user_model().objects.create_user("someone", password="pw-someone-1", is_staff=True)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    client.force_login(user)


def action(client, app_model: str, name: str, pks, done: Callable[[], bool], **extra) -> Attempt:
    """Post the admin action as its list's form does; refused when the list does not offer it."""
    url = f"/admin/{app_model.replace('.', '/')}/"
    page = client.get(url)
    offered = page.status_code == 200 and f'value="{name}"' in page.content.decode()
    client.post(url, {"action": name, "_selected_action": [str(pk) for pk in pks], **extra})
    return Attempt(refused=not offered, done=done())


def gate(response, done: bool) -> Attempt:
    return Attempt(refused=response.status_code == 403, done=done)


def post_json(client, url, body=None):
    return client.post(url, json.dumps(body or {}), content_type="application/json")


# builders (imported here, not at the top: each pulls in its area's test data)
def campaign():
    from tests.annotation.builders import sample_campaign

    return sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)


def local_batch(status="published"):
    from annotation.batches.making import hit_batch_create
    from annotation.batches.params import BatchParams
    from annotation.models import Batch

    batch = hit_batch_create(
        campaign=campaign(),
        params=BatchParams(provider="local", per_length=2, lengths=(5,), assignments=2, attention_rate=0, seed=3),
    )
    Batch.objects.filter(pk=batch.pk).update(status=status)
    batch.refresh_from_db()
    return batch


def submitted_assignment(batch):
    from annotation.models import Assignment, AssignmentStatus, Worker

    worker = Worker.objects.create(provider="local", external_id="annotator-1")
    return Assignment.objects.create(
        campaign=batch.campaign,
        hit=batch.hits.first(),
        worker=worker,
        provider="local",
        external_assignment_id="local-1",
        status=AssignmentStatus.SUBMITTED,
    )


def job(kind="build_idf", status="failed", **params):
    from jobs.models import Job, JobChunk

    made = Job.objects.create(kind=kind, status=status, params=params, total_chunks=1)
    JobChunk.objects.create(job=made, index=0, status=status)
    return made


def corpus(status="ready"):
    from generation.models import Corpus

    return Corpus.objects.create(name="corpus-1", format="mono", status=status)


def scored_resource():
    from generation.models import Resource
    from scoring.models import Regressor, ScoredResource

    resource = Resource.objects.create(name="res-1", corpus=corpus())
    regressor = Regressor.objects.create(name="reg-1", key="regressors/reg-1.joblib", signature={}, metrics={})
    scoring = job("score_resource", status="succeeded")  # a completed scoring: what an export starts from
    return ScoredResource.objects.create(resource=resource, regressor=regressor, job=scoring)


def jobs_made(kind: str) -> bool:
    from jobs.models import Job

    return Job.objects.filter(kind=kind).exists()


# -- admin actions


def resume_jobs(client):
    from jobs.models import Job

    failed = job()
    return action(client, "jobs.job", "resume_jobs", [failed.pk], lambda: Job.objects.get().status != "failed")


def cancel_jobs(client):
    from jobs.models import Job

    running = job(status="running")
    return action(client, "jobs.job", "cancel_jobs", [running.pk], lambda: Job.objects.get().status == "cancelled")


def build_idf(client):
    ready = corpus()
    return action(client, "generation.corpus", "build_idf", [ready.pk], lambda: jobs_made("build_idf"))


def create_hit_batch(client):
    from annotation.models import Batch
    from tests.annotation.test_admin_batches import FORM

    sample = campaign()
    return action(
        client,
        "annotation.campaign",
        "create_hit_batch",
        [sample.pk],
        lambda: Batch.objects.exists(),
        confirm="1",
        **FORM,
    )


def batch_action(name: str, status: str, done: Callable[[object], bool]):
    def attempt(client):
        batch = local_batch(status)
        if name == "approve_batches":
            submitted_assignment(batch)
        return action(client, "annotation.batch", name, [batch.pk], lambda: done(batch), confirm="yes")

    return attempt


def publish_done(batch) -> bool:
    batch.refresh_from_db()
    return batch.status == "published"


def sync_batches(client):
    batch = local_batch()
    url = "/admin/annotation/batch/"
    page = client.get(url)
    offered = page.status_code == 200 and 'value="sync_batches"' in page.content.decode()
    answer = client.post(url, {"action": "sync_batches", "_selected_action": [str(batch.pk)]}, follow=True)
    return Attempt(refused=not offered, done=f"batch {batch.pk} synced" in answer.content.decode().lower())


def approve_done(batch) -> bool:
    from annotation.models import Assignment

    return Assignment.objects.filter(hit__batch=batch, status="approved").exists()


def expire_done(batch) -> bool:
    return not batch.hits.filter(expires_at__isnull=True).exists()


def export_results(client):
    batch = local_batch()
    url = "/admin/annotation/batch/"
    page = client.get(url)
    offered = page.status_code == 200 and 'value="export_results"' in page.content.decode()
    answer = client.post(url, {"action": "export_results", "_selected_action": [str(batch.pk)]})
    return Attempt(refused=not offered, done=answer.get("Content-Type", "").startswith("text/csv"))


def worker_action(name: str, disqualified: bool):
    def attempt(client):
        from annotation.models import Worker

        worker = Worker.objects.create(provider="local", external_id="w-1", disqualified=disqualified)
        return action(
            client,
            "annotation.worker",
            name,
            [worker.pk],
            lambda: Worker.objects.get(pk=worker.pk).disqualified != disqualified,
        )

    return attempt


def export_default_release(client):
    scored = scored_resource()
    return action(
        client, "scoring.scoredresource", "export_default_release", [scored.pk], lambda: jobs_made("export_release")
    )


# -- admin pages


def uploads_kept() -> int:
    folder = Path(settings.MEDIA_ROOT) / "uploads"
    return len(list(folder.iterdir())) if folder.exists() else 0


def corpus_import(client):
    """The form, and an upload posted to it: imported (a job, the file kept for it) or refused with nothing kept."""
    refused = client.get("/admin/generation/corpus/import/").status_code == 403
    before = uploads_kept()
    upload = SimpleUploadedFile("pairs.txt", b"Ahoj svete.\tHello world.\nDobry den.\tGood day.\n")
    answer = client.post("/admin/generation/corpus/import/", {"file": upload, "name": "upload-1", "on_error": "skip"})
    done = jobs_made("import_corpus") or uploads_kept() > before
    return Attempt(refused=refused and answer.status_code == 403, done=done)


def get_page(url_of: Callable[[], str], ok=(200,)):
    def attempt(client):
        answer = client.get(url_of())
        return gate(answer, answer.status_code in ok)

    return attempt


def form_page(url_of: Callable[[], str]):
    """A job form: it opens, and an empty form posted to it comes back with its errors (nothing started); refused,
    both are 403."""

    def attempt(client):
        url = url_of()
        opened, posted = client.get(url), client.post(url, {})
        refused = opened.status_code == 403 and posted.status_code == 403
        return Attempt(refused=refused, done=opened.status_code == 200 and posted.status_code == 200)

    return attempt


def idf_download_url() -> str:
    from generation.models import IdfTable
    from infra.storage import get_storage

    with get_storage().open_write("idf/table-1.tsv") as fh:
        fh.write(b"hello\t1.5\n")
    table = IdfTable.objects.create(name="table-1", corpus=corpus(), key="idf/table-1.tsv")
    return f"/admin/generation/idftable/{table.pk}/download/"


def create_batch_page(client):
    from annotation.models import Batch
    from tests.annotation.test_admin_batches import FORM

    url = f"/admin/annotation/campaign/{campaign().pk}/batch/"
    refused = client.get(url).status_code == 403
    answer = client.post(url, {**FORM, "create": "1"})
    return Attempt(refused=refused and answer.status_code == 403, done=Batch.objects.exists())


# -- API routes and research pages


def api_get(url_of: Callable[[], str], ok=(200,)):
    def attempt(client):
        answer = client.get(url_of())
        if answer.status_code == 403:
            assert answer.json()["code"] in ("permission_denied", "not_authenticated")
        return gate(answer, answer.status_code in ok)

    return attempt


def batch_create_api(client):
    from annotation.models import Batch

    body = {"provider": "local", "per_length": 2, "lengths": [5], "assignments": 2, "attention_rate": 0, "seed": 3}
    answer = post_json(client, f"/api/campaigns/{campaign().pk}/batches/", body)
    return gate(answer, answer.status_code == 201 and Batch.objects.exists())


def batch_operation_api(operation: str, status: str, done: Callable[[object], bool]):
    def attempt(client):
        batch = local_batch(status)
        if operation == "approve":
            submitted_assignment(batch)
        answer = post_json(client, f"/api/batches/{batch.pk}/{operation}/")
        return gate(answer, answer.status_code == 200 and done(batch))

    return attempt


def train_api(client):
    from tests.scoring.test_regressor import build_campaign

    trained = build_campaign(Path(settings.MEDIA_ROOT), n_refs=20)
    answer = post_json(client, "/api/regressors/", {"campaign": trained.pk, "name": "api-reg"})
    return gate(answer, answer.status_code == 202 and jobs_made("train_regressor"))


def score_api(client):
    """No trained regressor here: the form answers 400 ``invalid`` naming what is missing, which only a user past
    the permission check gets to read; nothing is started either way."""
    answer = post_json(client, "/api/scored-resources/", {"resource": 999999, "regressor": 999999})
    return gate(answer, answer.status_code == 400 and answer.json()["code"] == "invalid")


def generate_api(client):
    """No model given: the form answers 400 ``invalid`` naming it, which only a user past the permission check gets
    to read; nothing is started either way."""
    answer = post_json(client, f"/api/corpora/{corpus().pk}/generations/", {"systems": "28"})
    return gate(answer, answer.status_code == 400 and answer.json()["code"] == "invalid")


def export_api(client):
    scored = scored_resource()
    answer = post_json(client, f"/api/scored-resources/{scored.pk}/releases/", {"version": "v1"})
    return gate(answer, answer.status_code == 202 and jobs_made("export_release"))


def api_list(url_of: Callable[[], str], make: Callable[[], object]):
    """A listing: done when the row made is in the page it answers."""

    def attempt(client):
        made = make()
        answer = client.get(url_of())
        if answer.status_code == 403:
            assert answer.json()["code"] in ("permission_denied", "not_authenticated")
        listed = answer.status_code == 200 and made.pk in [r["id"] for r in answer.json()["results"]]
        return gate(answer, listed)

    return attempt


def the_corpus():
    from generation.models import Corpus

    return Corpus.objects.get()


def scored_releases_api(client):
    """Done when the scored resource's release is in the page."""
    from scoring.models import Release

    scored = scored_resource()
    release = Release.objects.create(
        resource=scored.resource, version="v1", location="releases/x", manifest={"regressor": {"name": "reg-1"}}
    )
    answer = client.get(f"/api/scored-resources/{scored.pk}/releases/")
    listed = answer.status_code == 200 and [r["id"] for r in answer.json()["results"]] == [release.pk]
    return gate(answer, listed)


def regressor():
    from scoring.models import Regressor

    return Regressor.objects.create(name="reg-2", key="regressors/reg-2.joblib", signature={}, metrics={})


def dashboard_url(suffix: str = "") -> Callable[[], str]:
    return lambda: f"/research/campaigns/{campaign().pk}/{suffix}"


SCENARIOS: dict[str, Callable] = {
    "jobs.job resume_jobs": resume_jobs,
    "jobs.job cancel_jobs": cancel_jobs,
    "generation.corpus build_idf": build_idf,
    "annotation.campaign create_hit_batch": create_hit_batch,
    "annotation.batch publish_batches": batch_action("publish_batches", "draft", publish_done),
    "annotation.batch sync_batches": sync_batches,
    "annotation.batch approve_batches": batch_action("approve_batches", "published", approve_done),
    "annotation.batch expire_batches": batch_action("expire_batches", "published", expire_done),
    "annotation.batch export_results": export_results,
    "annotation.worker disqualify": worker_action("disqualify", False),
    "annotation.worker reinstate": worker_action("reinstate", True),
    "scoring.scoredresource export_default_release": export_default_release,
    "/admin/generation/corpus/import/": corpus_import,
    "/admin/generation/corpus/import/<int:job_id>/": get_page(
        lambda: f"/admin/generation/corpus/import/{job('import_corpus', name='c').pk}/"
    ),
    "/admin/generation/corpus/<int:corpus_id>/generate/": form_page(
        lambda: f"/admin/generation/corpus/{corpus().pk}/generate/"
    ),
    "/admin/generation/corpus/generate/<int:job_id>/": get_page(
        lambda: f"/admin/generation/corpus/generate/{job('generate').pk}/"
    ),
    "/admin/generation/idftable/<int:table_id>/download/": get_page(idf_download_url),
    "/admin/annotation/campaign/<path:object_id>/batch/": create_batch_page,
    "/admin/annotation/campaign/<path:object_id>/comments/": get_page(
        lambda: f"/admin/annotation/campaign/{campaign().pk}/comments/"
    ),
    "/admin/scoring/regressor/train/": form_page(lambda: "/admin/scoring/regressor/train/"),
    "/admin/scoring/regressor/train/<int:job_id>/": get_page(
        lambda: f"/admin/scoring/regressor/train/{job('train_regressor').pk}/"
    ),
    "/admin/scoring/scoredresource/score/": form_page(lambda: "/admin/scoring/scoredresource/score/"),
    "/admin/scoring/scoredresource/score/<int:job_id>/": get_page(
        lambda: f"/admin/scoring/scoredresource/score/{job('score_resource').pk}/"
    ),
    "/admin/scoring/scoredresource/<int:scored_id>/export/": form_page(
        lambda: f"/admin/scoring/scoredresource/{scored_resource().pk}/export/"
    ),
    "/admin/scoring/scoredresource/export/<int:job_id>/": get_page(
        lambda: f"/admin/scoring/scoredresource/export/{job('export_release', version='v1').pk}/"
    ),
    "/api/jobs/": api_list(lambda: "/api/jobs/?status=failed", job),
    "/api/jobs/<id:job_id>/": api_get(lambda: f"/api/jobs/{job().pk}/"),
    "/api/campaigns/": api_list(lambda: "/api/campaigns/", campaign),
    "/api/corpora/": api_list(lambda: "/api/corpora/", corpus),
    "GET /api/corpora/<id:corpus_id>/generations/": api_list(
        lambda: f"/api/corpora/{the_corpus().pk}/generations/", lambda: job("generate", corpus=corpus().pk)
    ),
    "GET /api/regressors/": api_list(lambda: "/api/regressors/", regressor),
    "GET /api/scored-resources/": api_list(lambda: "/api/scored-resources/", scored_resource),
    "GET /api/scored-resources/<id:scored_resource_id>/releases/": scored_releases_api,
    "/api/batches/<id:batch_id>/hits/": api_get(lambda: f"/api/batches/{local_batch().pk}/hits/"),
    "/api/batches/<id:batch_id>/results.csv": api_get(lambda: f"/api/batches/{local_batch().pk}/results.csv"),
    "/api/campaigns/<path:campaign>/batches/": batch_create_api,
    "/api/batches/<id:batch_id>/publish/": batch_operation_api("publish", "draft", publish_done),
    "/api/batches/<id:batch_id>/sync/": batch_operation_api("sync", "published", lambda batch: True),
    "/api/batches/<id:batch_id>/approve/": batch_operation_api("approve", "published", approve_done),
    "/api/batches/<id:batch_id>/expire/": batch_operation_api("expire", "published", expire_done),
    "/api/corpora/<id:corpus_id>/generations/": generate_api,
    "/api/regressors/": train_api,
    "/api/scored-resources/": score_api,
    "/api/scored-resources/<id:scored_resource_id>/releases/": export_api,
    "/research/constraints/": get_page(lambda: "/research/constraints/"),
    "/research/corpora/<id:corpus_id>/constraints/": get_page(lambda: f"/research/corpora/{corpus().pk}/constraints/"),
    "/research/campaigns/": get_page(lambda: "/research/campaigns/"),
    "/research/campaigns/<id:campaign_id>/": get_page(dashboard_url()),
    "/research/campaigns/<id:campaign_id>/tables/<str:table>.<str:fmt>": get_page(
        dashboard_url("tables/similarity.csv")
    ),
    "/research/campaigns/<id:campaign_id>/plots/<str:plot>.png": get_page(
        dashboard_url("plots/similarity-by-length.png")
    ),
}


def walks() -> list:
    """(row, the permission taken away or None) for every row that names permissions."""
    cases = []
    for row in ROWS:
        if not row.perms or row.key == "* delete_selected":
            continue
        for missing in (None, *row.perms):
            said = f"{row.methods} {row.key}" if row.section == "route" else row.key
            cases.append(pytest.param(row, missing, id=f"{said} without {missing or 'nothing'}"))
    return cases


@pytest.mark.django_db
@pytest.mark.parametrize("row,missing", walks())
def test_each_row_refuses_a_staff_user_lacking_one_of_its_permissions(client, storage_dir, row, missing):
    scenario = SCENARIOS.get(f"{row.methods} {row.key}") or SCENARIOS.get(row.key)  # by method where the row's own
    assert scenario, f"no scenario for the row {row.key!r}: add one to tests/test_permissions.py"
    staff(client, [p for p in row.perms if p != missing])
    attempt = scenario(client)
    if missing is None:
        assert attempt.done and not attempt.refused, f"{row.key} with {row.perms}: {attempt}"
    else:
        assert attempt.refused and not attempt.done, f"{row.key} without {missing}: {attempt}"


@pytest.mark.django_db
def test_django_delete_action_needs_each_models_delete_permission(client):
    """The ``*`` row: ``delete_selected`` is offered on a model's list only with its delete permission, and on the
    login lockout tables (``axes``) to superusers only."""
    assert any(r.key == "* delete_selected" and "`axes.*`" in r.cell for r in ROWS)
    user = get_user_model().objects.create_user("someone", password="pw-someone-1", is_staff=True)
    client.force_login(user)
    checked = 0
    for model in [m for m in apps.get_models() if admin.site.is_registered(m)]:
        meta = model._meta
        if "delete_selected" not in code_actions_of(model):
            continue
        view = Permission.objects.get(content_type__app_label=meta.app_label, codename=f"view_{meta.model_name}")
        delete = Permission.objects.get(content_type__app_label=meta.app_label, codename=f"delete_{meta.model_name}")
        user.user_permissions.set([view])
        assert "delete_selected" not in actions_for(user, model), meta.label
        user.user_permissions.set([view, delete])
        listed = client.get(f"/admin/{meta.app_label}/{meta.model_name}/").status_code
        if meta.app_label == "axes":
            assert listed == 403 and "delete_selected" not in actions_for(user, model), meta.label
        else:
            assert listed == 200 and "delete_selected" in actions_for(user, model), meta.label
        checked += 1
    assert checked >= 5


@pytest.mark.django_db
def test_superusers_only_rows_refuse_staff_holding_every_permission(client):
    """The lockout table's clean-up: a staff user holding every ``axes`` permission is not offered it."""
    from axes.models import AccessAttempt

    rows = [r for r in ROWS if r.section == "action" and r.cell.startswith("superusers only")]
    assert [r.key for r in rows] == ["axes.accessattempt cleanup_expired_attempts"]

    def expired_attempt() -> AccessAttempt:  # made after logging in: axes cleans expired attempts at each login
        old = AccessAttempt.objects.create(username="x", ip_address="127.0.0.1", failures_since_start=1)
        AccessAttempt.objects.filter(pk=old.pk).update(attempt_time=timezone.now() - timedelta(days=2))
        return old

    def cleanup(old: AccessAttempt):
        return client.post(
            "/admin/axes/accessattempt/", {"action": "cleanup_expired_attempts", "_selected_action": [str(old.pk)]}
        )

    user = get_user_model().objects.create_user("someone", password="pw-someone-1", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="axes"))
    client.force_login(user)
    old = expired_attempt()
    assert client.get("/admin/axes/accessattempt/").status_code == 403
    assert cleanup(old).status_code == 403 and AccessAttempt.objects.filter(pk=old.pk).exists()
    client.force_login(get_user_model().objects.create_superuser("boss", password="pw-boss-1"))
    old = expired_attempt()
    cleanup(old)
    assert not AccessAttempt.objects.filter(pk=old.pk).exists()


def code_actions_of(model) -> set[str]:
    return actions_for(get_user_model()(username="boss", is_staff=True, is_superuser=True, is_active=True), model)


def actions_for(user, model) -> set[str]:
    """The actions the model's admin offers ``user`` (and would run for them: Django checks the same list)."""
    user = get_user_model().objects.get(pk=user.pk) if user.pk else user  # fresh: no permission cache
    request = RequestFactory().get("/admin/")
    request.user = user
    return set(admin.site.get_model_admin(model).get_actions(request))


# --- the rows that name no permission -------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_rows_without_permissions_are_what_they_say(client):
    from scoring.models import Release

    said = {r.key: r.cell for r in ROWS if r.section == "route" and not r.perms}
    assert set(said) == {
        "/api/schema/",
        "/api/schema/ui/",
        "/api/hits/<id:hit_id>/assignments/",
        "/api/releases/",
        "/api/releases/<id:release_id>/",
        "/api/releases/<id:release_id>/files/<str:name>",
    }
    # public: anyone
    assert client.get("/api/schema/").status_code == 200 and client.get("/api/schema/ui/").status_code == 200
    # the signed token is the credential: no session needed, a forged token is the view's own refusal
    batch = local_batch()
    hit = batch.hits.first()
    forged = {"assignment_id": "A1", "worker_id": "W1", "token": "forged", "judgments": []}
    answer = post_json(client, f"/api/hits/{hit.pk}/assignments/", forged)
    assert answer.status_code in (400, 403) and answer.json()["code"] not in ("not_authenticated", "permission_denied")
    # signed in: anonymous is refused, a signed-in user without permissions sees the releases they are allowed
    assert client.get("/api/releases/").status_code == 403
    reader = get_user_model().objects.create_user("reader", password="pw-reader-1")
    client.force_login(reader)
    assert client.get("/api/releases/").json()["results"] == []
    scored = scored_resource()
    release = Release.objects.create(resource=scored.resource, version="v1", location="releases/x", manifest={})
    assert client.get(f"/api/releases/{release.pk}/").status_code == 404  # not allowed: as if it did not exist
    release.allowed_users.add(reader)
    assert client.get(f"/api/releases/{release.pk}/").status_code == 200
