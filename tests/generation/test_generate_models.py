"""Issue 48, item 4: generation from the web out of the box. ``manage.py demo_setup`` (what ``scripts/start``
runs) installs the shipped models under the model root ``var/models`` (hard links, else copies; never a symbolic
link, which the model roots refuse when it leaves them), and the admin's generate form and
``POST /api/corpora/<id>/generations/`` take them by name: ``{"model": "demo"}``. The form offers the installed
models in a picker and the API's schema lists them in an enum; a typed path inside a model root still works. The
form is in groups (common, constraint systems, diverse) with each field's help said for a form, and the settings
of the other mode are refused by the form and the API with the job's own message (``GenerateParams``' rule, what
``manage.py generate`` refuses)."""

from __future__ import annotations

import json
import os
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from generation import demo_settings
from generation.demo_settings import SHIPPED_MARK, install_shipped_models
from generation.generation_job import KIND
from generation.web.forms import FIELDSETS, GenerateForm, installed_models
from jobs.models import Job

from .test_generate_admin_api import (  # noqa: F401 (the corpus fixture's helpers)
    SENTENCES,
    corpus as demo_corpus,
    post_json,
    staff,
)

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def var_models(tmp_path, monkeypatch, settings) -> Path:
    """A fresh var/models, the server's only model root (as in the quick start: PARAFORGE_VAR_DIR/models)."""
    var = tmp_path / "var"
    monkeypatch.setenv("PARAFORGE_VAR_DIR", str(var))
    settings.PARAFORGE_MODEL_ROOTS = [str(var / "models")]
    return var / "models"


@pytest.fixture
def corpus(demo_corpus, var_models, settings):  # noqa: F811
    settings.PARAFORGE_MODEL_ROOTS = [str(var_models)]  # (demo_corpus set its own root)
    return demo_corpus


def plain(model: str, **more) -> dict:
    return {"model": model, "systems": "28", "sample_per_length": 1, "lengths": "5,10", "seed": 1, **more}


def test_the_api_takes_the_demo_model_by_name_after_demo_setup(corpus, client, var_models):
    staff(client)
    assert post_json(client, corpus.pk, plain("demo")).status_code == 400  # nothing installed yet
    printed = StringIO()
    call_command("demo_setup", "--no-data", stdout=printed)
    assert "model demo (the generate form and the API name it demo): installed" in printed.getvalue()
    answer = post_json(client, corpus.pk, plain("demo"))
    assert answer.status_code == 202, answer.content.decode()
    job = Job.objects.get(kind=KIND)
    assert job.params["model"] == os.path.realpath(var_models / "demo")
    # the model root holds the files themselves (no symbolic link), the shipped ones
    for shipped in (ROOT / "generation" / "demo" / "model").iterdir():
        installed = var_models / "demo" / shipped.name
        assert installed.is_file() and not installed.is_symlink()
        assert installed.stat().st_size == shipped.stat().st_size
    # a typed path inside the model root still works, by its absolute path too
    for typed in ("demo", str(var_models / "demo")):
        assert post_json(client, corpus.pk, plain(typed, name=f"n-{len(typed)}")).status_code == 202


def test_install_is_kept_up_to_date_and_leaves_a_foreign_folder_alone(var_models):
    assert install_shipped_models() == {"demo": "installed"}
    assert install_shipped_models() == {"demo": "up to date"}
    (var_models / "demo" / "config.json").unlink()
    assert install_shipped_models() == {"demo": "installed"}
    assert (var_models / "demo" / "config.json").is_file() and (var_models / "demo" / SHIPPED_MARK).is_file()
    own = var_models.parent / "own"
    (own / "demo").mkdir(parents=True)
    assert install_shipped_models(own)["demo"].startswith("kept: ")
    assert not any((own / "demo").iterdir())


def test_the_paraphraser_is_installed_with_its_base_but_not_offered_until_a_job_can_load_it(var_models, monkeypatch):
    monkeypatch.setattr(demo_settings, "is_installed", lambda item: True)
    assert install_shipped_models() == {"demo": "installed", "paraphraser": "installed"}
    assert (var_models / "paraphraser" / "adapter_model.safetensors").is_file()
    assert installed_models() == ["demo"]  # an adapter folder: the generate job's check needs a config.json


def test_the_picker_offers_installed_models_and_never_an_escaping_link(corpus, var_models, tmp_path):
    assert installed_models() == []
    install_shipped_models()
    outside = tmp_path / "outside"
    outside.mkdir()
    (var_models / "escape").symlink_to(ROOT / "generation" / "demo" / "model")  # a link out of the root
    (var_models / "notes").mkdir()  # not a model
    assert installed_models() == ["demo"]
    html = str(GenerateForm(corpus=corpus)["model"])
    assert '<select name="model"' in html and '<option value="demo" selected>demo</option>' in html
    assert 'name="model_path"' in html and "another model" in html
    # the picker's "another model" takes the box's folder or hub id, checked as before
    form = GenerateForm({**plain(""), "model_path": "demo"}, corpus=corpus)
    assert form.is_valid(), form.errors
    form = GenerateForm({**plain(""), "model_path": "escape"}, corpus=corpus)
    assert not form.is_valid() and "not a model folder in the server's model folders" in form.errors["model"][0]


def test_the_schema_lists_the_installed_model_names(client, var_models):
    install_shipped_models()
    schema = json.loads(client.get("/api/schema/", HTTP_ACCEPT="application/json").content)
    model = schema["components"]["schemas"]["GenerateInRequest"]["properties"]["model"]
    names, other = model["anyOf"]
    assert names["enum"] == ["demo"] and other["type"] == "string"
    assert "installed model" in model["description"]


def test_the_form_is_in_groups_with_real_help(corpus):
    form = GenerateForm(corpus=corpus)
    groups = form.fieldsets()
    assert [key for key, *_ in groups] == [key for key, *_ in FIELDSETS] == ["common", "constraints", "diverse"]
    placed = [field.name for *_, fields in groups for field in fields]
    assert sorted(placed) == sorted(form.fields)  # every field once
    by_group = {key: {f.name for f in fields} for key, _, _, fields in groups}
    assert {"beam", "nbest", "length_penalty", "stop", "systems", "idf_table", "ppdb"} <= by_group["constraints"]
    assert {"negative_sets", "samples", "top_k", "temperature", "clusters", "keep", "max_nll"} <= by_group["diverse"]
    assert {"model", "diverse", "name", "seed", "max_length"} <= by_group["common"]
    for name, field in form.fields.items():
        text = str(field.help_text)
        assert len(text) > 25 and "--" not in text, (name, text)


BEAM_OR_CONSTRAINTS = [
    {"beam": 8},
    {"nbest": 2},
    {"length_penalty": 0.5},
    {"stop": "beam"},
    {"systems": "28"},
    {"idf_table": "the corpus's"},
]


@pytest.mark.parametrize("setting", BEAM_OR_CONSTRAINTS)
def test_beam_and_constraint_settings_with_diverse_are_refused_by_form_and_api(corpus, client, setting):
    install_shipped_models()
    staff(client)
    name, value = next(iter(setting.items()))
    if name == "idf_table":
        setting = {name: corpus.idf_tables.get().pk}
    body = {"model": "demo", "diverse": True, "seed": 1, **setting}
    answer = post_json(client, corpus.pk, body)
    assert answer.status_code == 400, answer.content.decode()
    errors = answer.json()["errors"]
    message = " ".join(errors[name])
    assert "diverse" in message and "leave" in message and name in message, errors
    form = GenerateForm({k: str(v) for k, v in body.items()}, corpus=corpus)
    assert not form.is_valid() and form.errors[name] == errors[name]
    assert not Job.objects.exists()


def test_diverse_settings_without_diverse_are_refused(corpus, client):
    install_shipped_models()
    staff(client)
    answer = post_json(client, corpus.pk, plain("demo", negative_sets=7))
    assert answer.status_code == 400 and "needs diverse" in json.dumps(answer.json()), answer.content.decode()


def test_the_paraphraser_demo_needs_its_base_and_says_how_to_install_it(var_models):
    """Issue 47, item 5: ``scripts/start`` runs ``demo_setup --paraphraser --samples-only`` after installing Gemma 3
    270M; without that base the command stops with what to run, before decoding anything with the paraphraser."""
    from django.core.management.base import CommandError

    from generation.models import Resource

    for args in (["--paraphraser"], ["--paraphraser", "--samples-only"]):  # the second: what scripts/start runs
        with pytest.raises(CommandError, match="scripts/setup --model gemma3-270m"):
            call_command("demo_setup", *args, stdout=StringIO())
    assert not Resource.objects.filter(name__startswith="demo-sample-paraphraser").exists()
