"""Issue 36 items 3 and 4 as the probe found them: a staff user with only ``jobs.view_job`` cancelled and resumed
jobs from the admin's actions; ``generation.view_corpus`` alone uploaded and imported a corpus; a staff user with
no permission opened any import's progress page. (tests/test_permissions.py walks every row of the permission
tables; these are the reported cases, spelt out.) Also: the migrations that split permissions off keep them for
whoever held the permission that covered them."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.files.uploadedfile import SimpleUploadedFile

from api.permissions import permissions_grant_to_holders
from generation.models import Corpus
from jobs.models import Job, JobChunk, JobStatus

pytestmark = pytest.mark.django_db


def staff_with(client, *codenames: str):
    user = get_user_model().objects.create_user("intern", password="pw-intern-1", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return user


def failed_job() -> Job:
    job = Job.objects.create(kind="build_idf", status=JobStatus.FAILED, total_chunks=1, error="worker lost")
    JobChunk.objects.create(job=job, index=0, status=JobStatus.FAILED)
    return job


def test_view_job_alone_neither_cancels_nor_resumes_a_job(client):
    running = Job.objects.create(kind="build_idf", status=JobStatus.RUNNING, total_chunks=1)
    failed = failed_job()
    staff_with(client, "view_job")
    listing = client.get("/admin/jobs/job/").content.decode()
    assert 'value="cancel_jobs"' not in listing and 'value="resume_jobs"' not in listing
    client.post("/admin/jobs/job/", {"action": "cancel_jobs", "_selected_action": [running.pk]})
    client.post("/admin/jobs/job/", {"action": "resume_jobs", "_selected_action": [failed.pk]})
    assert Job.objects.get(pk=running.pk).status == JobStatus.RUNNING
    assert Job.objects.get(pk=failed.pk).status == JobStatus.FAILED and Job.objects.get(pk=failed.pk).error


def test_cancel_and_resume_each_need_their_own_permission(client):
    running, failed = Job.objects.create(kind="build_idf", status=JobStatus.RUNNING), failed_job()
    staff_with(client, "view_job", "cancel_job")  # may cancel, not resume
    listing = client.get("/admin/jobs/job/").content.decode()
    assert 'value="cancel_jobs"' in listing and 'value="resume_jobs"' not in listing
    client.post("/admin/jobs/job/", {"action": "resume_jobs", "_selected_action": [failed.pk]})
    client.post("/admin/jobs/job/", {"action": "cancel_jobs", "_selected_action": [running.pk]})
    assert Job.objects.get(pk=failed.pk).status == JobStatus.FAILED
    assert Job.objects.get(pk=running.pk).status == JobStatus.CANCELLED


def uploads() -> list[Path]:
    folder = Path(settings.MEDIA_ROOT) / "uploads"
    return sorted(folder.iterdir()) if folder.exists() else []


def test_view_corpus_alone_cannot_upload_or_import_a_corpus(client):
    staff_with(client, "view_corpus", "view_job")
    before = uploads()
    listing = client.get("/admin/generation/corpus/")
    assert listing.status_code == 200 and b"Import a corpus" not in listing.content  # no button leading to a 403
    assert client.get("/admin/generation/corpus/import/").status_code == 403
    upload = SimpleUploadedFile("pairs.txt", b"Hallo.\tHello.\nTschuss.\tBye.\n")
    answer = client.post("/admin/generation/corpus/import/", {"file": upload, "name": "sneaky", "on_error": "skip"})
    assert answer.status_code == 403
    assert not Job.objects.filter(kind="import_corpus").exists() and not Corpus.objects.exists()
    assert uploads() == before  # the file was not kept either


def test_add_corpus_imports(client):
    staff_with(client, "view_corpus", "add_corpus", "view_job")
    assert b"Import a corpus" in client.get("/admin/generation/corpus/").content
    upload = SimpleUploadedFile("pairs.txt", b"Hallo.\tHello.\nTschuss.\tBye.\n")
    answer = client.post("/admin/generation/corpus/import/", {"file": upload, "name": "mine", "on_error": "skip"})
    job = Job.objects.get(kind="import_corpus")
    assert answer.status_code == 302 and answer["Location"] == f"/admin/generation/corpus/import/{job.pk}/"
    assert client.get(answer["Location"]).status_code == 200


@pytest.mark.parametrize("held", [(), ("view_job",), ("view_corpus",)])
def test_an_import_progress_page_needs_view_permission_on_corpora_and_jobs(client, held):
    job = Job.objects.create(kind="import_corpus", params={"name": "corpus-of-another-team"})
    staff_with(client, *held)
    page = client.get(f"/admin/generation/corpus/import/{job.pk}/")
    assert page.status_code == 403 and b"corpus-of-another-team" not in page.content


@pytest.mark.parametrize(
    "app_label,model,new,held",
    [
        ("jobs", "job", ["cancel_job", "resume_job"], "change_job"),
        ("annotation", "batch", ["publish_batch", "sync_batch", "approve_batch", "expire_batch"], "change_batch"),
    ],
)
def test_splitting_a_permission_off_keeps_it_for_whoever_held_the_old_one(app_label, model, new, held):
    """The migrations' step (``permissions_grant_to_holders``): users and groups holding ``held`` get the new
    permissions; nobody else does."""
    old = Permission.objects.get(content_type__app_label=app_label, codename=held)
    keeper = get_user_model().objects.create_user("keeper", is_staff=True)
    keeper.user_permissions.add(old)
    group = Group.objects.create(name="operators")
    group.permissions.add(old)
    member = get_user_model().objects.create_user("member", is_staff=True)
    member.groups.add(group)
    viewer = get_user_model().objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=f"view_{model}"))
    Permission.objects.filter(content_type__app_label=app_label, codename__in=new).delete()  # as before migrating

    permissions_grant_to_holders(apps, app_label=app_label, model=model, new=[(c, f"Can {c}") for c in new], held=held)

    wanted = {f"{app_label}.{c}" for c in new}
    for user, expected in ((keeper, True), (member, True), (viewer, False)):
        user = get_user_model().objects.get(pk=user.pk)  # no permission cache
        assert user.has_perms(wanted) is expected, user.username
