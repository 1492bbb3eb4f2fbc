"""The generate job from a web page: the admin's "Generate" page of a corpus and ``POST /api/corpora/<id>/generations/``
start the job ``manage.py generate`` starts for the same settings, in the plain mode and the diverse mode; a model,
backward model or PPDB file outside the server's model folders is refused with nothing created and nothing told of
the server; a user without the permissions gets 403; bad input is a 400 naming the field, never a 500."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.urls import reverse

from generation.corpus.corpora import ImportCorpusParams, corpus_import
from generation.generation_job import KIND
from generation.models import Corpus, IdfTable, Resource
from generation.web.forms import GENERATE_PERMS, GenerateForm
from infra.storage import get_storage
from jobs.models import Job

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
DEMO = Path(os.path.realpath(ROOT / "generation" / "demo"))  # the model root of these tests; its model is "model"
DEMO_MODEL = DEMO / "model"
SENTENCES = [
    "The committee approved the new budget on Monday.",
    "She walked to the car.",
    "The red sun was in the sky over the house.",
    "He ran with the small dog to the blue house in the morning.",
    "We talk with people in the green world.",
]


@pytest.fixture
def corpus(tmp_path, storage_dir, settings) -> Corpus:
    settings.PARAFORGE_MODEL_ROOTS = [str(DEMO)]
    path = tmp_path / "refs.txt"
    path.write_text("\n".join(SENTENCES) + "\n")
    corpus = corpus_import(ImportCorpusParams(name="web-gen", path=path, format="mono", shard_size=3))
    words = sorted({w.strip(".").lower() for s in SENTENCES for w in s.split()})
    key = f"idf/web-gen-{corpus.pk}.tsv"
    with get_storage().open_write(key) as fh:
        fh.write(("token\tidf\n" + "".join(f"{w}\t{7.0 + len(w) / 2}\n" for w in words)).encode())
    IdfTable.objects.create(corpus=corpus, name="web-gen", key=key, n_documents=len(SENTENCES), n_types=len(words))
    return corpus


def staff(client, perms=GENERATE_PERMS):
    user = get_user_model().objects.create_user("researcher", password="pw-researcher-1", is_staff=True)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    client.force_login(user)
    return user


def post_json(client, corpus_id, body):
    return client.post(
        f"/api/corpora/{corpus_id}/generations/",
        body if isinstance(body, str) else json.dumps(body),
        content_type="application/json",
    )


def command_params(corpus, *args) -> dict:
    """The params of the job ``manage.py generate`` starts (queued, not run)."""
    before = set(Job.objects.values_list("pk", flat=True))
    call_command("generate", corpus.name, "--model", str(DEMO_MODEL), *args, stdout=open(os.devnull, "w"))
    return Job.objects.exclude(pk__in=before).get().params


def same_job(web: dict, command: dict) -> None:
    """Two jobs' params are the same settings (each has its own name and resource)."""
    strip = ("name", "resource")
    assert {k: v for k, v in web.items() if k not in strip} == {k: v for k, v in command.items() if k not in strip}


def browser_form(corpus, **changes) -> dict:
    """What a browser posts: the form's initial values (a box unticked is left out), with ``changes``."""
    data = {}
    for name, field in GenerateForm(corpus=corpus).fields.items():
        initial = field.initial
        if initial is not None and initial is not False:
            data[name] = str(initial)
    data.update({k: str(v) for k, v in changes.items()})
    return {k: v for k, v in data.items() if v != "False"}


# --- the admin -----------------------------------------------------------------------------------------------


def test_admin_page_starts_a_plain_job_and_leads_to_its_progress(corpus, client):
    staff(client)
    page = client.get(reverse("admin:generation_corpus_changelist")).content.decode()
    url = reverse("admin:generation_corpus_generate", args=[corpus.pk])
    assert f'href="{url}"' in page  # the corpus's "generate…" link
    form_page = client.get(url)
    assert form_page.status_code == 200 and 'name="diverse"' in form_page.content.decode()
    answer = client.post(
        url,
        browser_form(
            corpus, model="model", systems="28,31", sample_per_length=1, lengths="5,10", beam=4, nbest=2, seed=3
        ),
    )
    job = Job.objects.get(kind=KIND)
    assert answer.status_code == 302, answer.content.decode()[:2000]
    assert answer["Location"] == reverse("admin:generation_corpus_generate_progress", args=[job.pk])
    progress = client.get(answer["Location"])
    assert progress.status_code == 200 and f'data-job="{job.pk}"' in progress.content.decode()
    assert job.params["model"] == str(DEMO_MODEL) and job.params["systems"] == [28, 31]
    same_job(
        job.params,
        command_params(
            corpus, "--systems", "28,31", "--sample-per-length", "1", "--lengths", "5,10", "--beam", "4", "--nbest",
            "2", "--seed", "3",
        ),
    )  # fmt: skip


def test_admin_page_starts_a_diverse_job(corpus, client):
    staff(client)
    url = reverse("admin:generation_corpus_generate", args=[corpus.pk])
    answer = client.post(
        url,
        browser_form(corpus, model="model", diverse="on", sample_per_length=1, negative_sets=2, samples=3, seed=1),
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    job = Job.objects.get(kind=KIND)
    assert job.params["diverse"] is True and "systems" not in job.params and job.params["negative_sets"] == 2
    same_job(
        job.params,
        command_params(
            corpus, "--diverse", "--sample-per-length", "1", "--negative-sets", "2", "--samples", "3", "--seed", "1"
        ),
    )
    assert Resource.objects.get(job=job).corpus == corpus


def test_admin_page_refuses_what_the_command_refuses_with_the_form_again(corpus, client):
    staff(client)
    url = reverse("admin:generation_corpus_generate", args=[corpus.pk])
    for changes, field in (
        ({"model": "model", "systems": "28", "beam": "x"}, "beam"),
        ({"model": "model", "systems": "28", "beam": "2", "nbest": "3"}, None),
        ({"model": "model", "systems": "99"}, "systems"),
        ({"model": "model"}, "systems"),  # a plain job needs systems
        ({"model": "model", "diverse": "on", "systems": "28"}, "systems"),
        ({"model": str(Path(os.path.realpath(ROOT / "generation")))}, "model"),  # outside the roots
        ({"model": "model", "systems": "35"}, "ppdb"),  # (each check's error under the setting it names)
        ({"model": "model", "systems": "28", "sample_per_length": "2", "lengths": "5,x"}, "lengths"),
    ):
        answer = client.post(url, browser_form(corpus, **changes))
        assert answer.status_code == 200, changes
        form = answer.context["form"]
        assert form.errors and (field is None or field in form.errors), (changes, form.errors)
    assert not Job.objects.exists() and not Resource.objects.exists()


def test_admin_page_and_link_need_the_permissions(corpus, client):
    staff(client, ("generation.view_corpus", "jobs.view_job"))
    url = reverse("admin:generation_corpus_generate", args=[corpus.pk])
    assert f'href="{url}"' not in client.get(reverse("admin:generation_corpus_changelist")).content.decode()
    assert client.get(url).status_code == 403
    assert client.post(url, browser_form(corpus, model="model", systems="28")).status_code == 403
    assert not Job.objects.exists() and not Resource.objects.exists()


# --- the API -------------------------------------------------------------------------------------------------


def test_api_starts_a_plain_job_as_the_command_does(corpus, client):
    staff(client)
    body = {"model": "model", "systems": "17,28", "sample_per_length": 1, "lengths": "5,10", "nbest": 2, "seed": 2}
    answer = post_json(client, corpus.pk, body)
    assert answer.status_code == 202, answer.content
    job = Job.objects.get(pk=answer.json()["job"])
    assert answer.json() == {"job": job.pk, "kind": KIND, "status": job.status, "url": f"/api/jobs/{job.pk}/"}
    same_job(
        job.params,
        command_params(
            corpus, "--systems", "17,28", "--sample-per-length", "1", "--lengths", "5,10", "--nbest", "2", "--seed", "2"
        ),
    )


@pytest.mark.parametrize(
    ("setting", "flag", "diverse_status"),
    [
        ("keep_facts", "--keep-facts", 202),  # generation.facts: a setting of either mode
        ("avoid_copies", "--avoid-copies", 400),  # generation.copies: it orders a beam, so the diverse mode refuses it
    ],
)
def test_an_ordering_of_the_outputs_is_a_jobs_setting_the_api_and_the_command_store_alike(
    corpus, client, setting, flag, diverse_status
):
    """Stored only when on, so the jobs stored before it read the same."""
    staff(client)
    answer = post_json(client, corpus.pk, {"model": "model", "systems": "28", setting: True})
    assert answer.status_code == 202, answer.content
    job = Job.objects.get(pk=answer.json()["job"])
    assert job.params[setting] is True
    same_job(job.params, command_params(corpus, "--systems", "28", flag))
    assert setting not in command_params(corpus, "--systems", "28")
    diverse = post_json(client, corpus.pk, {"model": "model", "diverse": True, setting: True})
    assert diverse.status_code == diverse_status, diverse.content
    if diverse_status == 202:
        same_job(Job.objects.get(pk=diverse.json()["job"]).params, command_params(corpus, "--diverse", flag))
    else:
        assert setting in json.dumps(diverse.json())


def test_a_beam_search_job_with_a_backward_model_runs_and_its_card_says_so(corpus, client):
    """``backward_model`` is either mode's: a beam search job orders each beam by forward plus backward NLL
    (``generation.decoding.decode``) and its resource's card names the backward model and its weights' hash."""
    from jobs.execution import job_run_inline
    from jobs.models import JobStatus

    staff(client)
    body = {"model": "model", "systems": "15,28", "sample_per_length": 1, "lengths": "10", "backward_model": "model"}
    answer = post_json(client, corpus.pk, {**body, "keep_facts": True})
    assert answer.status_code == 202, answer.content
    job = job_run_inline(job_id=answer.json()["job"])
    assert job.status == JobStatus.SUCCEEDED, job.error
    card = Resource.objects.get(job=job).settings
    assert card["backward_model"] == str(DEMO_MODEL) and card["keep_facts"] is True
    assert card["backward_model_sha256"] == card["model_sha256"] == job.params["backward_model_sha256"]
    assert sum(v["outputs"] for v in job.result["per_system"].values()) > 0


def test_api_starts_a_diverse_job_as_the_command_does(corpus, client):
    staff(client)
    body = {"model": str(DEMO_MODEL), "diverse": True, "keep": 3, "clusters": 4, "max_nll": 4.5, "seed": 7}
    answer = post_json(client, corpus.pk, body)
    assert answer.status_code == 202, answer.content
    job = Job.objects.get(pk=answer.json()["job"])
    assert job.params["diverse"] is True and job.params["keep"] == 3
    same_job(
        job.params,
        command_params(corpus, "--diverse", "--keep", "3", "--clusters", "4", "--max-nll", "4.5", "--seed", "7"),
    )


@pytest.mark.parametrize(
    "field, value",
    [
        ("model", "{outside}"),  # a real model folder, outside the model folders
        ("model", "../demo/model"),  # out of the root and back in elsewhere
        ("model", "/etc"),
        ("model", "model/../../demo"),  # resolves to the root's parent
        ("model", "generation/demo"),  # shaped like a hub id, but a path of the project: not the hub's
        ("model", "no such\x00model"),
        ("model", "   "),
        ("model", "link"),  # a symbolic link in the root to a folder outside it
        ("backward_model", "{outside}"),
        ("ppdb", "/etc/hostname"),
        ("ppdb", "../../pyproject.toml"),
        ("prompt_template", "/etc/hostname"),  # a built-in's name only: never a file on the server
    ],
)
def test_api_refuses_paths_outside_the_model_folders_and_creates_nothing(
    corpus, client, tmp_path, settings, tiny_marian_dir, field, value
):
    root = tmp_path / "models"
    (root / "model").mkdir(parents=True)
    (root / "link").symlink_to(tiny_marian_dir, target_is_directory=True)
    for name in DEMO_MODEL.iterdir():
        (root / "model" / name.name).symlink_to(name)  # (files linked: the folder itself is the root's)
    settings.PARAFORGE_MODEL_ROOTS = [str(root)]
    staff(client)
    body = {"model": "model", "diverse": field == "backward_model"}
    if field == "ppdb":
        body["systems"] = "35"
    elif not body["diverse"]:
        body["systems"] = "28"
    body[field] = value.format(outside=tiny_marian_dir)
    answer = post_json(client, corpus.pk, body)
    assert answer.status_code == 400, answer.content
    assert answer.json()["code"] == "invalid" and field in answer.json()["errors"], answer.json()
    text = answer.content.decode()
    assert str(root) not in text  # the server's folders are not told (what was typed is)
    if value == "link":
        assert str(tiny_marian_dir) not in text
    assert not Job.objects.exists() and not Resource.objects.exists()


def test_a_beam_search_jobs_backward_model_is_checked_as_its_model_is(corpus, client, tmp_path, tiny_marian_dir):
    """A backward model is either mode's: outside the model folders, or a folder the decoder cannot load, it is
    refused before anything is created, over HTTP and from the command alike."""
    staff(client)
    outside = post_json(client, corpus.pk, {"model": "model", "systems": "28", "backward_model": str(tiny_marian_dir)})
    assert outside.status_code == 400 and "backward_model" in outside.json()["errors"], outside.content
    (tmp_path / "empty").mkdir()
    unloadable = ("--systems", "28", "--backward-model", str(tmp_path / "empty"))
    with pytest.raises(CommandError, match="--backward-model: .*config.json"):
        call_command("generate", corpus.name, "--model", str(DEMO_MODEL), *unloadable)
    assert not Job.objects.exists() and not Resource.objects.exists()


def test_api_takes_a_folder_of_the_model_folders_by_absolute_path_or_name(corpus, client):
    staff(client)
    for model in ("model", str(DEMO_MODEL), "model/."):
        answer = post_json(client, corpus.pk, {"model": model, "systems": "28", "name": f"web-{len(model)}"})
        assert answer.status_code == 202, (model, answer.content)
        assert Job.objects.get(pk=answer.json()["job"]).params["model"] == str(DEMO_MODEL)


def test_api_refusals_name_the_field(corpus, client):
    staff(client)
    for body, field in (
        ({"model": "model", "systems": "28", "beam": 2, "nbest": 3}, "nbest"),
        ({"model": "model", "diverse": True, "systems": "28"}, "systems"),
        ({"model": "model", "diverse": True, "beam": 8}, "beam"),
        ({"model": "model", "samples": 3}, "samples"),
        ({"model": "model", "systems": "35"}, "ppdb"),
        ({"model": "model", "systems": "28,99"}, "systems"),
    ):
        answer = post_json(client, corpus.pk, body)
        assert answer.status_code == 400 and list(answer.json()["errors"]) == [field], (body, answer.json())


def test_api_refusal_messages_name_what_was_typed_not_the_servers_folder(corpus, client, tmp_path, settings):
    settings.PARAFORGE_MODEL_ROOTS = [str(tmp_path / "models")]
    (tmp_path / "models" / "empty").mkdir(parents=True)
    staff(client)
    answer = post_json(client, corpus.pk, {"model": "empty", "systems": "28"})
    assert answer.status_code == 400
    message = answer.json()["errors"]["model"][0]
    assert "'empty'" in message and "config.json" in message and str(tmp_path) not in message


@pytest.mark.parametrize(
    "body",
    [
        {"model": "model", "systems": "28", "beam": "5"},  # a string for a number
        {"model": "model", "systems": "28", "beam": 0},
        {"model": "model", "systems": "28", "beam": 10**30},
        {"model": "model", "systems": "28", "beam": 2, "nbest": 3},
        {"model": "model", "systems": "28", "length_penalty": True},
        {"model": "model", "systems": "28", "sample_per_length": -1},
        {"model": "model", "systems": "28", "lengths": "5,x", "sample_per_length": 2},
        {"model": "model", "systems": "28", "max_length": 1},
        {"model": "model", "diverse": True, "temperature": -1},
        {"model": "model", "diverse": True, "ban_fraction": 2.0},
        {"model": "model", "diverse": True, "clusters": 1},
        {"model": "model", "diverse": True, "beam": 8},  # beam search's, not the diverse mode's
        {"model": "model", "samples": 3},  # a diverse option without diverse
        {"model": "model", "systems": "28", "device": "tpu"},
        {"model": "model", "systems": "28", "idf_table": 999999},
        {"model": 5, "systems": "28"},
        {"model": "m" * 5000, "systems": "28"},
        {"model": "model", "systems": "28", "name": "n" * 201},
        {"systems": "28"},
        {},
    ],
)
def test_api_bad_settings_are_400_json_not_500(corpus, client, body):
    staff(client)
    answer = post_json(client, corpus.pk, body)
    assert answer.status_code == 400, answer.content
    assert answer.json()["code"] == "invalid" and answer.json()["errors"], answer.json()
    assert not Job.objects.exists() and not Resource.objects.exists()


@pytest.mark.parametrize("raw", ["[]", '"x"', "{", '{"model": NaN}', "null"])
def test_api_bodies_that_are_no_object_are_400_json(corpus, client, raw):
    staff(client)
    answer = post_json(client, corpus.pk, raw)
    assert answer.status_code == 400 and set(answer.json()) >= {"detail", "code"}
    assert not Job.objects.exists()


def test_api_needs_the_permissions_and_answers_404_for_no_corpus(corpus, client):
    body = {"model": "model", "systems": "28"}
    assert post_json(client, corpus.pk, body).status_code == 403  # no session
    staff(client, ("generation.view_corpus", "generation.add_resource"))  # without jobs.view_job
    answer = post_json(client, corpus.pk, body)
    assert answer.status_code == 403 and answer.json()["code"] == "permission_denied"
    assert not Job.objects.exists() and not Resource.objects.exists()
    client.logout()
    get_user_model().objects.all().delete()
    staff(client)
    answer = post_json(client, 999999, body)
    assert answer.status_code == 404 and answer.json()["code"] == "not_found"


def test_a_corpus_that_is_not_ready_is_refused(corpus, client):
    Corpus.objects.filter(pk=corpus.pk).update(status="importing")
    staff(client)
    answer = post_json(client, corpus.pk, {"model": "model", "systems": "28"})
    assert answer.status_code == 400 and "not ready" in json.dumps(answer.json())
    assert not Job.objects.exists()


def test_a_hub_id_the_cache_lacks_is_refused_and_never_fetched_during_a_request(corpus, client, tmp_path, monkeypatch):
    """The command may fetch a hub model into the cache; a web request must not make the server download one
    (minutes, gigabytes), even where the server is online: the form resolves hub ids from the cache only."""
    import huggingface_hub

    asked = []
    real = huggingface_hub.snapshot_download

    def watched(*args, **kwargs):
        asked.append(kwargs.get("local_files_only"))
        return real(*args, **kwargs)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", watched)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    staff(client)
    answer = post_json(client, corpus.pk, {"model": "some-org/some-model", "systems": "28"})
    assert answer.status_code == 400 and answer.json()["code"] == "invalid", answer.content
    assert "some-org/some-model" in str(answer.json()["errors"]["model"])
    assert asked == [True]  # looked up in the cache only
    assert not Job.objects.filter(kind=KIND).exists()
