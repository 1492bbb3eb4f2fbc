import gzip
import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from generation.corpus.corpora import ImportCorpusParams, corpus_import
from generation.models import Corpus, IdfTable
from jobs.execution import job_run_inline
from jobs.models import Job, JobStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client, django_user_model):
    user = django_user_model.objects.create_user("staff", password="pw", is_staff=True, is_superuser=True)
    client.force_login(user)
    return client


@pytest.fixture
def media(tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def test_upload_starts_an_import_job_with_a_progress_page(staff_client, storage_dir, media):
    page = staff_client.get(reverse("admin:generation_corpus_changelist"))
    assert page.status_code == 200 and b"Import a corpus" in page.content
    data = gzip.compress("Hallo.\tHello.\nkein Tab\nTschüss.\tBye.\n".encode())
    response = staff_client.post(
        reverse("admin:generation_corpus_import"),
        {
            "file": SimpleUploadedFile("pairs.tsv.gz", data),
            "name": "uploaded",
            "format": "bitext",
            "on_error": "skip",
        },
    )
    job = Job.objects.get(kind="import_corpus")
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:generation_corpus_import_progress", args=[job.pk])
    assert job.status == JobStatus.PENDING and not Corpus.objects.exists()  # the worker runs it, not the request
    uploaded = Path(job.params["path"])
    assert uploaded.parent == Path(media) / "uploads" and uploaded.is_file()
    waiting = staff_client.get(response["Location"])
    assert f'<progress class="job-progress" data-job="{job.pk}"'.encode() in waiting.content
    assert b"frontend/job-progress.js" in waiting.content

    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    corpus = Corpus.objects.get(name="uploaded")
    assert (corpus.n_references, corpus.n_bad_lines, corpus.import_job_id) == (2, 1, job.pk)
    assert corpus.bad_lines[0]["file"] == "pairs.tsv.gz" and corpus.bad_lines[0]["line"] == 2
    assert not uploaded.exists()  # the upload is removed once imported
    done = staff_client.get(response["Location"])
    assert reverse("admin:generation_corpus_change", args=[corpus.pk]).encode() in done.content
    change = staff_client.get(reverse("admin:generation_corpus_change", args=[corpus.pk]))
    assert change.status_code == 200
    assert f"/research/corpora/{corpus.pk}/constraints/".encode() in change.content
    assert b"pairs.tsv.gz:2: missing tab" in change.content and b"shard-00000.jsonl.gz" in change.content


def test_upload_form_rejects_a_duplicate_name(staff_client, storage_dir, media, tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("one sentence\n")
    corpus_import(ImportCorpusParams(name="taken", path=path))
    response = staff_client.post(
        reverse("admin:generation_corpus_import"),
        {"file": SimpleUploadedFile("a.txt", b"x\n"), "name": "taken", "format": "", "on_error": "skip"},
    )
    assert response.status_code == 200 and b"already exists" in response.content
    assert not Job.objects.exists()


def test_build_idf_action_and_tsv_download(staff_client, storage_dir, tmp_path, client, django_user_model):
    path = tmp_path / "m.txt"
    path.write_text("The cat sat.\nthe dog\n")
    corpus = corpus_import(ImportCorpusParams(name="m", path=path))
    response = staff_client.post(
        reverse("admin:generation_corpus_changelist"), {"action": "build_idf", "_selected_action": [corpus.pk]}
    )
    assert response.status_code == 302
    job = Job.objects.get(kind="build_idf")
    assert job_run_inline(job_id=job.pk).status == JobStatus.SUCCEEDED
    table = IdfTable.objects.get(corpus=corpus)
    listing = staff_client.get(reverse("admin:generation_idftable_changelist"))
    url = reverse("admin:generation_idftable_download", args=[table.pk])
    assert url.encode() in listing.content
    download = staff_client.get(url)
    assert download.status_code == 200
    body = b"".join(download.streaming_content).decode()
    assert "the\t0.0\n" in body and "cat\t" in body
    staff_client.logout()
    assert staff_client.get(url).status_code == 302  # to the login page: staff only
    user = django_user_model.objects.create_user("plain", password="pw")
    client.force_login(user)
    assert client.get(url).status_code == 302


@pytest.mark.slow
def test_demo_setup_prepares_the_researchers_path_once(storage_dir, capsys):
    from django.core.management import call_command

    call_command("demo_setup")
    corpus = Corpus.objects.get(name="demo")
    assert corpus.format == "mono" and corpus.n_references == 3000 and corpus.n_bad_lines == 0
    table = corpus.idf_tables.get()
    assert table.n_documents == 3000 and table.n_types > 1000
    # the researcher's path, ready to walk: a decoded sample on a published local batch, and annotators
    from django.contrib.auth import authenticate

    from annotation.models import Batch, Campaign
    from generation.models import Resource

    resource = Resource.objects.get(name="demo-sample")
    assert resource.job.status == "succeeded" and resource.n_pairs > 0
    campaign = Campaign.objects.get(job=resource.job)
    assert sorted(campaign.references.values_list("length_bucket", flat=True)) == [5] * 3 + [10] * 3 + [20] * 3
    batch = Batch.objects.get(campaign=campaign)
    assert batch.provider == "local" and batch.status == "published" and batch.hits.exists()
    first = capsys.readouterr().out
    password = re.search(r"local annotator: annotator1  password: (\S+)", first).group(1)
    assert authenticate(username="annotator1", password=password) is not None

    call_command("demo_setup")  # idempotent: nothing decoded or published twice; fresh passwords
    assert Corpus.objects.count() == 1 and IdfTable.objects.count() == 1
    assert Resource.objects.count() == 1 and Batch.objects.count() == 1
    assert authenticate(username="annotator1", password=password) is None
    second = capsys.readouterr().out
    assert "password" in second

    # what scripts/start runs in the background once the server is up: the samples, no login touched
    password = re.search(r"local annotator: annotator1  password: (\S+)", second).group(1)
    demo_password = re.search(r"demo superuser: demo  password: (\S+)", second).group(1)
    call_command("demo_setup", "--samples-only")
    assert "password" not in capsys.readouterr().out
    assert authenticate(username="annotator1", password=password) is not None
    assert authenticate(username="demo", password=demo_password) is not None
    assert Resource.objects.count() == 1 and Batch.objects.count() == 1


def test_the_import_page_says_a_running_import_is_running_not_waiting(staff_client):
    """Issue 48, item 5: the corpus import's page said "Waiting for a worker…" whatever the job was doing."""
    from jobs.models import JobChunk

    job = Job.objects.create(
        kind="import_corpus", label="import x", params={"name": "x", "display_name": "x.txt"}, status="running"
    )
    JobChunk.objects.create(job=job, index=0, status="running", done_units=1, total_units=2)
    page = staff_client.get(reverse("admin:generation_corpus_import_progress", args=[job.pk])).content.decode()
    assert "Running: 50% done" in page and "Waiting for a worker" not in page
    assert f'data-job-state="{job.pk}"' in page  # job-progress.js keeps the sentence up to date
