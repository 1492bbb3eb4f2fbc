"""Issue 41, the release: a corpus carries its source and licence from import (``import_corpus --source --license
--terms``), the release card names them, and a release licence that grants more than the corpus's terms allow is
refused with a message that says why, on the command line, in the admin's form and on the API alike."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from generation.demo_settings import DEMO_CORPUS_TERMS
from generation.models import Corpus
from infra.licences import license_conflict
from jobs.models import Job
from scoring.models import Release
from tests.scoring.resource_data import OverlapScorer, build_resource, make_regressor, score_with

pytestmark = pytest.mark.django_db


def run(*args) -> dict:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


@pytest.fixture
def sentences(tmp_path):
    path = tmp_path / "sentences.txt"
    path.write_text("The cat sat on the mat.\nA dog barked at the mailman.\n")
    return path


def scored_from(corpus: Corpus):
    return score_with(build_resource(name=f"{corpus.name}-res", corpus=corpus), make_regressor(), OverlapScorer())


def test_import_corpus_keeps_the_source_and_licence_and_refuses_a_licence_it_cannot_read(storage_dir, sentences):
    result = run(
        "import_corpus",
        "wiki",
        str(sentences),
        "--source",
        "Wikipedia dump 2024-01",
        "--license",
        "cc-by-sa-4.0",
        "--terms",
        "attribute the Wikipedia authors",
    )
    corpus = Corpus.objects.get(name="wiki")
    assert (corpus.source, corpus.license, corpus.terms) == (
        "Wikipedia dump 2024-01",
        "CC-BY-SA-4.0",  # SPDX's case
        "attribute the Wikipedia authors",
    )
    assert result["license"] == "CC-BY-SA-4.0" and result["source"] == "Wikipedia dump 2024-01"
    assert run("import_corpus", "plain", str(sentences))["license"] == "NOASSERTION"
    with pytest.raises(CommandError, match="--license: licence 'CC BY SA' is not an SPDX id"):
        call_command("import_corpus", "bad", str(sentences), "--license", "CC BY SA", stdout=io.StringIO())
    assert not Corpus.objects.filter(name="bad").exists() and not Job.objects.filter(label="import bad").exists()


@pytest.mark.parametrize(
    ("corpus_licence", "release", "why"),
    [
        ("CC-BY-NC-SA-4.0", "cc-by-4.0", "NonCommercial"),
        ("CC-BY-NC-4.0", "CC0-1.0", "NonCommercial"),
        ("CC-BY-SA-4.0", "cc-by-4.0", "ShareAlike"),
        ("CC-BY-SA-4.0", "CC-BY-NC-SA-4.0", "ShareAlike"),
        ("CC-BY-ND-4.0", "CC-BY-ND-4.0-x", None),  # not an SPDX id at all: refused before (card_license)
        ("CC-BY-NC-ND-4.0", "CC-BY-NC-4.0", "no derivatives"),
        ("ODbL-1.0", "CC-BY-4.0", "share-alike"),
        ("LicenseRef-lab", "CC-BY-4.0", "its own terms"),
    ],
)
def test_a_release_licence_the_corpus_terms_do_not_allow_is_refused_with_why(
    storage_dir, tmp_path, corpus_licence, release, why
):
    corpus = Corpus.objects.create(name="c", format="mono", status="ready", license=corpus_licence)
    scored_from(corpus)
    with pytest.raises(CommandError) as err:
        call_command("export_release", "c-res", "--out", str(tmp_path / "r"), "--license", release)
    message = str(err.value)
    if why is None:
        assert "not an SPDX id" in message
    else:
        assert why in message and f"corpus 'c', under {corpus_licence}" in message, message
    assert not (tmp_path / "r").exists() and not Release.objects.exists()


def test_what_the_corpus_terms_allow_is_exported_and_the_card_names_the_source_and_licence(storage_dir, tmp_path):
    corpus = Corpus.objects.create(
        name="c", format="mono", status="ready", source="Example news 2020", license="CC-BY-SA-3.0", terms="credit X"
    )
    scored_from(corpus)
    run("export_release", "c-res", "--out", str(tmp_path / "sa"), "--license", "cc-by-sa-4.0")  # a later version
    card = (tmp_path / "sa" / "README.md").read_text()
    assert "| corpus | `c` | Example news 2020; licence `CC-BY-SA-3.0`; credit X |" in card
    assert "corpus `c` (Example news 2020), under `CC-BY-SA-3.0` (credit X): its terms bind the release" in card
    manifest = json.loads((tmp_path / "sa" / "manifest.json").read_text())
    corpus_said = manifest["provenance"]["corpus"]
    assert (corpus_said["origin"], corpus_said["license"], corpus_said["terms"]) == (
        "Example news 2020",
        "CC-BY-SA-3.0",
        "credit X",
    )
    assert license_conflict("CC-BY-4.0", "CC0-1.0") is None  # a permissive corpus allows any licence
    assert license_conflict("NOASSERTION", "CC-BY-4.0") is None  # unknown terms: the exporter answers for them


def test_the_demo_corpus_is_marked_as_sts_b_and_unknown_works_as_the_tutorial_says(storage_dir, tmp_path):
    from generation.demo_settings import DEMO_CORPUS_FILE
    from jobs.execution import job_run_inline, job_start

    job = job_start(
        kind="import_corpus",
        enqueue=False,
        params={"name": "demo", "path": str(DEMO_CORPUS_FILE), "format": "mono", **DEMO_CORPUS_TERMS},
    )
    assert job_run_inline(job_id=job.pk).status == "succeeded"
    corpus = Corpus.objects.get(name="demo")
    assert corpus.license == "LicenseRef-STSB-sources" and "STS Benchmark" in corpus.source
    scored_from(corpus)
    with pytest.raises(CommandError, match="may carry only the same terms"):
        call_command("export_release", "demo-res", "--out", str(tmp_path / "by"), "--license", "cc-by-4.0")
    result = run("export_release", "demo-res", "--out", str(tmp_path / "unknown"), "--license", "unknown")
    assert result["license"] == "NOASSERTION"
    card = (tmp_path / "unknown" / "README.md").read_text()
    assert "license: unknown" in card and "**No licence was given**" in card and "STS Benchmark" in card


def test_the_admin_form_and_the_api_refuse_it_too_before_queuing(storage_dir, client):
    corpus = Corpus.objects.create(name="c", format="mono", status="ready", license="CC-BY-NC-4.0")
    scored = scored_from(corpus)
    client.force_login(get_user_model().objects.create_superuser("boss", password="pw"))
    answer = client.post(
        f"/api/scored-resources/{scored.pk}/releases/", {"version": "v1", "license": "cc-by-4.0"}, "application/json"
    )
    assert answer.status_code == 400 and answer.json()["code"] == "invalid"
    assert "NonCommercial" in answer.json()["detail"]
    page = client.post(
        f"/admin/scoring/scoredresource/{scored.pk}/export/", {"version": "v1", "format": "tsv", "license": "MIT"}
    )
    assert page.status_code == 200 and "NonCommercial" in page.content.decode()
    assert not Job.objects.filter(kind="export_release").exists()
    ok = client.post(
        f"/api/scored-resources/{scored.pk}/releases/",
        {"version": "v1", "license": "CC-BY-NC-4.0"},
        "application/json",
    )
    assert ok.status_code == 202, ok.content


def test_the_admin_upload_keeps_the_terms_and_refuses_a_licence_it_cannot_read(storage_dir, client, tmp_path, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    from jobs.execution import job_run_inline

    settings.MEDIA_ROOT = tmp_path / "media"
    client.force_login(get_user_model().objects.create_superuser("boss", password="pw"))
    url = reverse("admin:generation_corpus_import")
    form = {"name": "up", "format": "mono", "on_error": "skip", "source": "My lab's notes", "terms": "ask us"}
    bad = client.post(url, {**form, "file": SimpleUploadedFile("a.txt", b"A cat.\n"), "license": "CC BY"})
    assert bad.status_code == 200 and "is not an SPDX id" in bad.content.decode()
    assert not Job.objects.filter(kind="import_corpus").exists()
    good = client.post(url, {**form, "file": SimpleUploadedFile("a.txt", b"A cat.\n"), "license": "cc-by-nc-4.0"})
    assert good.status_code == 302
    job_run_inline(job_id=Job.objects.get(kind="import_corpus").pk)
    corpus = Corpus.objects.get(name="up")
    assert (corpus.source, corpus.license, corpus.terms) == ("My lab's notes", "CC-BY-NC-4.0", "ask us")
