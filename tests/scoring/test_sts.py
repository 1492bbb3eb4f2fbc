"""STS-B and SICK as development data (``scoring.similarity.sts``, ``scoring.similarity.sts_files``): gold scores on
the regressor's 0-100 scale, a file imported as a campaign, and a regressor evaluated on a file beside its single
features."""

import random

import pytest

from annotation.models import Campaign
from scoring.regressor import RegressorTrainOptions, regressor_train
from scoring.similarity.sts import sts_evaluate, sts_import, sts_read

WORDS = "river mountain teacher window garden yellow market engine silver doctor island letter winter".split()


def stsb_line(i: int, score: float, a: str, b: str) -> str:
    return f"main-captions\tMSRvid\t2012test\t{i:04d}\t{score:.3f}\t{a}\t{b}"


def test_scores_are_rescaled_to_0_100_and_a_bad_line_is_named(tmp_path):
    stsb = tmp_path / "sts.csv"
    stsb.write_text(stsb_line(1, 5.0, "A man.", "A man.") + "\n" + stsb_line(2, 1.2, "A cat.", "A dog.") + "\textra\n")
    assert [(p.sentence1, p.score) for p in sts_read(stsb, kind="stsb")] == [("A man.", 100.0), ("A cat.", 24.0)]
    sick = tmp_path / "SICK.txt"
    sick.write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\n1\tA man.\tA boy.\t3.0\n")
    assert sts_read(sick, kind="sick")[0].score == 50.0
    stsb.write_text(stsb_line(1, 5.0, "A man.", "A man.") + "\nbroken\tline\n")
    with pytest.raises(ValueError, match=r"sts.csv:2: malformed stsb line"):
        sts_read(stsb, kind="stsb")
    with pytest.raises(ValueError, match="unknown kind"):
        sts_read(stsb, kind="msrp")


@pytest.mark.slow
@pytest.mark.django_db
def test_an_imported_file_trains_a_regressor_that_evaluate_reports_beside_its_baselines(tmp_path, storage_dir):
    rng = random.Random(0)
    lines = []
    for _ in range(12):
        words = rng.sample(WORDS, 8)
        for k in range(4):  # k words replaced: similarity falls with k
            changed = [("zzz" if i < k else w) for i, w in enumerate(words)]
            lines.append(stsb_line(len(lines), 5.0 - 1.2 * k, " ".join(words) + ".", " ".join(changed) + "."))
    path = tmp_path / "sts.csv"
    path.write_text("\n".join(lines) + "\n")
    sts_import(path=path, kind="stsb", campaign_name="sts")
    sts_import(path=path, kind="stsb", campaign_name="sts")  # idempotent
    campaign = Campaign.objects.get(name="sts")
    assert campaign.references.count() == 12
    regressor_train(
        campaign="sts",
        name="sts",
        options=RegressorTrainOptions(with_embeddings=False, min_judgments=0, cv_folds=0),
    )
    result = sts_evaluate(regressor_name="sts", path=path, kind="stsb")
    assert result["n"] == 48 and result["n_skipped"] == 0 and result["spearman"] > 0.8
    lo, hi = result["spearman_ci95"]
    assert lo <= result["spearman"] <= hi
    assert set(result["baselines"]) == {"cosine", "align_f", "bleu", "char3_jaccard", "prec_1"}
