"""``train_regressor --recipe v2`` and ``v3`` (issue 17): the optional feature families, the systems a judged
candidate came from, the signature naming the recipe, and score_pairs' optional constraints column."""

import io
import json

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from scoring.models import Regressor
from scoring.regressor import pairs_file_score, reference_batches, regressor_load, training_data
from scoring.similarity.embeddings import embed
from scoring.similarity.features import FAMILIES, feature_names, pair_features
from tests.scoring.test_regressor import build_campaign

pytestmark = pytest.mark.django_db

REF = "The old man walked his dog in the park."
OTHER = "She bought three red apples at the market."


def features_of(pairs, families, *, with_embeddings=False) -> list[dict]:
    fb = pair_features(pairs, with_embeddings=with_embeddings, families=families)
    return [dict(zip(fb.names, row)) for row in fb.matrix]


def test_family_names_and_order():
    base = feature_names(with_embeddings=True)
    v2 = feature_names(with_embeddings=True, families=("agree", "nll2", "group", "systems"))
    assert v2[: len(base)] == base  # appended, in FAMILIES order whatever order they are given in
    assert v2[len(base) : len(base) + 5] == ["nll_valid", "nll_total", "nll_rel_min", "nll_rank", "nll_z"]
    assert v2[-3:] == ["agree_mean", "agree_max", "agree_centroid"] and "grp_cosine_rank" in v2
    lexical = feature_names(with_embeddings=False, families=FAMILIES)
    assert "grp_cosine_rank" not in lexical and "agree_mean" not in lexical and "grp_bleu_rank" in lexical
    with pytest.raises(ValueError, match="unknown feature family 'fancy'"):
        feature_names(with_embeddings=False, families=("fancy",))


def test_nll_features_are_relative_to_the_references_other_candidates():
    pairs = [
        {"reference": REF, "paraphrase": "The old man walked the dog in the park.", "nll": 0.5},
        {"reference": REF, "paraphrase": "An old man walked his dog in a park.", "nll": 1.5},
        {"reference": REF, "paraphrase": "The elderly man took his dog to the park.", "nll": -1},  # ParaNMT's -1
        {"reference": OTHER, "paraphrase": "She bought three apples at the market.", "nll": 2.0},
    ]
    f = features_of(pairs, ("nll2",))
    assert [r["nll_valid"] for r in f] == [1, 1, 0, 1]
    assert f[0]["nll_total"] == pytest.approx(0.5 * 9) and f[2]["nll_total"] == 0
    assert f[0]["nll_rel_min"] == 0 and f[1]["nll_rel_min"] == pytest.approx(1.0)
    assert f[0]["nll_rank"] == pytest.approx(0.25) and f[1]["nll_rank"] == pytest.approx(0.75)
    assert f[0]["nll_z"] == pytest.approx(-1.0) and f[1]["nll_z"] == pytest.approx(1.0)
    assert f[3]["nll_rel_min"] == 0 and f[3]["nll_rank"] == 0.5 and f[3]["nll_z"] == 0  # alone in its group


def test_systems_features_read_the_constraints_keys():
    pairs = [
        {
            "reference": REF,
            "paraphrase": "The old man walked the dog.",
            "constraints": {"1": {"negative": [["park"]]}, "28": {}, "16": {}, "99": {}},
        },
        {"reference": REF, "paraphrase": "An old man walked a dog.", "constraints": {"33": {}}},
        {
            "reference": REF,
            "paraphrase": "A man walked.",
            "constraints": {"positive": [["man"]], "negative": [], "bos_avoid": []},
        },
    ]  # one set: no system
    f = features_of(pairs, ("systems",))
    assert f[0]["sys_n"] == 3 and f[0]["sys_baseline"] == 1  # "99" is no system
    assert (f[0]["sys_neg_high"], f[0]["sys_neg_low"], f[0]["sys_bos"], f[0]["sys_pos"]) == (1, 1, 0, 0)
    assert f[1]["sys_n"] == 1 and f[1]["sys_bos"] == 1 and f[1]["sys_baseline"] == 0
    assert f[0]["sys_n_rel"] == 1 and f[1]["sys_n_rel"] == pytest.approx(1 / 3)
    assert f[2]["sys_n"] == 0 and f[2]["cons_pos"] == 1


def test_group_features_compare_with_the_batch_pairs_of_the_same_reference():
    pairs = [
        {"reference": REF, "paraphrase": REF},
        {"reference": REF, "paraphrase": "The old man walked the cat."},
        {"reference": REF, "paraphrase": "Nobody was there."},
        {"reference": OTHER, "paraphrase": OTHER},
    ]
    f = features_of(pairs, ("group",))
    bleu = [r["bleu"] for r in f[:3]]
    assert f[0]["grp_bleu_dmax"] == 0 and f[1]["grp_bleu_dmax"] == pytest.approx(bleu[1] - bleu[0])
    assert f[1]["grp_bleu_dmean"] == pytest.approx(bleu[1] - np.mean(bleu))
    assert [r["grp_bleu_rank"] for r in f[:3]] == pytest.approx([5 / 6, 1 / 2, 1 / 6])
    assert [r["grp_lev_norm_dmax"] for r in f[:3]][0] == 0  # lev_norm: the best is the lowest
    assert [r["grp_size"] for r in f] == [3, 3, 3, 1] and f[3]["grp_bleu_dmean"] == 0


def test_agreement_features_are_cosines_with_the_other_candidates():
    paras = [
        "The old man walked his dog in the park.",
        "An old man walks his dog in a park.",
        "Stock prices fell sharply on Monday.",
    ]
    pairs = [{"reference": REF, "paraphrase": p} for p in paras] + [{"reference": OTHER, "paraphrase": paras[0]}]
    f = features_of(pairs, ("agree",), with_embeddings=True)
    v = embed(paras).astype(np.float64)
    sim = v @ v.T
    assert f[0]["agree_mean"] == pytest.approx((sim[0, 1] + sim[0, 2]) / 2, abs=1e-5)
    assert f[0]["agree_max"] == pytest.approx(sim[0, 1], abs=1e-5)
    centroid = v[1] + v[2]
    assert f[0]["agree_centroid"] == pytest.approx(v[0] @ centroid / np.linalg.norm(centroid), abs=1e-5)
    assert f[2]["agree_mean"] < f[0]["agree_mean"]  # the odd one out agrees least
    assert f[3]["agree_mean"] == f[3]["agree_max"] == f[3]["agree_centroid"] == pytest.approx(f[3]["cosine"])


def test_reference_batches_never_cut_a_reference():
    pairs = [{"reference": r} for r in "aaabbcccccd"]
    assert reference_batches(pairs, 2) == [(0, 3), (3, 5), (5, 10), (10, 11)]
    assert reference_batches(pairs, 100) == [(0, 11)] and reference_batches([], 4) == []


@pytest.fixture
def campaign(tmp_path, storage_dir):
    return build_campaign(tmp_path)


def train(*args) -> dict:
    out = io.StringIO()
    call_command("train_regressor", *args, "--json", stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


def test_training_pairs_carry_the_systems_that_produced_them(campaign):
    data = training_data(campaign, min_judgments=25)
    # build_campaign: candidate k of a reference came from system 17 + k; "0" (attention) never appears
    assert [p["constraints"] for p in data.pairs[:4]] == [{"18": {}}, {"19": {}}, {"20": {}}, {"21": {}}]
    campaign.settings = {**campaign.settings, "system_names": {**campaign.settings["system_names"], "19": "PARANMT"}}
    campaign.save()
    assert training_data(campaign, min_judgments=25).pairs[1]["constraints"] == {}  # renamed: not a decoder


@pytest.mark.slow
def test_train_regressor_recipe_v2_is_recorded_and_predicts(campaign):
    result = train("synthetic", "--name", "v2", "--recipe", "v2", "--seed", "1", "--cv-folds", "0")
    assert result["spearman_test"] > 0.5
    assert "|feats:lex28+cos+align+nll2+systems+group+agree|" in result["signature"]
    row = Regressor.objects.get(name="v2")
    sig = row.signature
    assert sig["recipe"] == "v2" and sig["families"] == ["nll2", "systems", "group", "agree"]
    assert sig["features"][-1] == "agree_centroid" and "grp_size" in sig["features"] and sig["groups"]
    assert set(sig["cv_spearman"]) == {
        "hist_gradient_boosting",
        "gradient_boosting",
        "ridge",
        "ridge_cv",
        "ridge_cv+gradient_boosting",
    }
    fitted = regressor_load("v2")
    assert fitted.families == ("nll2", "systems", "group", "agree")
    ref = "River mountain teacher window garden yellow quickly market."
    pairs = [
        {
            "reference": ref,
            "paraphrase": "River mountain teacher window garden yellow quickly zzz.",
            "constraints": {"18": {"negative": [["market"]]}},
        },
        {"reference": ref, "paraphrase": "zzz mountain zzz window zzz yellow zzz market.", "nll": 5.0},
    ]
    together = fitted.predict(pairs)
    assert 0 <= together[1] < together[0] <= 100
    alone = fitted.predict(pairs[1:])
    assert alone[0] != pytest.approx(together[1], abs=1e-9)  # compared with its sibling, or not
    default = train("synthetic", "--name", "base", "--no-embeddings", "--cv-folds", "0")
    assert Regressor.objects.get(name="base").signature["recipe"] == "base"
    assert "|feats:lex28|" in default["signature"]
    assert "ridge_cv" not in Regressor.objects.get(name="base").signature["cv_spearman"]
    with pytest.raises(CommandError, match="invalid choice: 'v9'"):
        train("synthetic", "--name", "x", "--recipe", "v9")


def test_train_regressor_recipe_v3_adds_the_svr_and_the_mean_of_three(campaign):
    result = train("synthetic", "--name", "v3", "--recipe", "v3", "--seed", "1", "--no-embeddings", "--cv-folds", "0")
    assert result["spearman_test"] > 0.5
    sig = Regressor.objects.get(name="v3").signature
    assert sig["recipe"] == "v3" and sig["families"] == ["nll2", "systems", "group", "agree"]
    assert set(sig["cv_spearman"]) == {
        "hist_gradient_boosting",
        "gradient_boosting",
        "ridge",
        "ridge_cv",
        "ridge_cv+gradient_boosting",
        "svr",
        "ridge_cv+gradient_boosting+svr",
    }
    assert "|feats:lex28+nll2+systems+group+agree|" in result["signature"]  # (agree: no columns without embeddings)
    fitted = regressor_load("v3")
    ref = "River mountain teacher window garden yellow quickly market."
    scores = fitted.predict(
        [
            {"reference": ref, "paraphrase": "River mountain teacher window garden yellow quickly zzz."},
            {"reference": ref, "paraphrase": "zzz mountain zzz window zzz yellow zzz market."},
        ]
    )
    assert 0 <= scores[1] < scores[0] <= 100


class Recorder:
    """A stand-in regressor: records each predict batch, scores a pair by its number of constraints keys."""

    name = "recorder"

    def __init__(self):
        self.batches = []

    def predict(self, pairs):
        self.batches.append([dict(p) for p in pairs])
        return np.array([float(len(p.get("constraints") or {})) for p in pairs])


def test_score_pairs_reads_an_optional_constraints_column(tmp_path):
    cons = json.dumps({"17": {"positive": [], "negative": [["park"]], "bos_avoid": []}, "28": {}})
    lines = [
        f"{REF}\tThe old man walked the dog.\t0.7\t{cons}",
        f"{REF}\tAn old man walked a dog.\t\t",  # empty constraints field: none
        f"{REF}\tA man walked.",
        f'{OTHER}\tShe bought apples.\t1.5\t{{"positive": [["apples"]]}}',
    ]
    src, dst = tmp_path / "pairs.tsv", tmp_path / "scored.tsv"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rec = Recorder()
    summary = pairs_file_score(regressor=rec, input_path=src, output_path=dst, batch_size=2)
    assert summary["scored"] == 4
    # batch size 2, but the three lines of REF are one run: never cut
    assert [len(b) for b in rec.batches] == [3, 1]
    first = rec.batches[0][0]
    assert first["nll"] == 0.7 and first["constraints"] == json.loads(cons)
    assert "constraints" not in rec.batches[0][1] and "constraints" not in rec.batches[0][2]
    out = dst.read_text(encoding="utf-8").splitlines()
    assert [line.rpartition("\t")[0] for line in out] == lines
    assert [line.rpartition("\t")[2] for line in out] == ["2.00", "0.00", "0.00", "1.00"]


def test_score_pairs_constraints_errors(campaign, tmp_path):
    train("synthetic", "--name", "syn", "--no-embeddings", "--recipe", "v2", "--cv-folds", "0")
    src, dst = tmp_path / "pairs.tsv", tmp_path / "scored.tsv"
    src.write_text(
        f'{REF}\ta\t1\t{{"17": {{}}}}\n{REF}\tb\t1\tnot json\n{REF}\tc\t\t[1, 2]\n{REF}\td\t\t{{}}\textra\n',
        encoding="utf-8",
    )
    with pytest.raises(CommandError) as err:
        call_command(
            "score_pairs", "--regressor", "syn", "--input", str(src), "--output", str(dst), stdout=io.StringIO()
        )
    message = str(err.value)
    assert "3 malformed line(s)" in message and f"{src}:1" not in message
    assert f"{src}:2: constraints are not JSON" in message
    assert f"{src}:3: constraints must be a JSON object, not list" in message
    assert f"{src}:4: expected reference<TAB>paraphrase[<TAB>nll], found 5" in message and not dst.exists()
    src.write_text(f'{REF}\tThe old man walked the dog.\t0.7\t{{"17": {{}}}}\n{REF}\tA man walked.\n', encoding="utf-8")
    out = io.StringIO()
    call_command("score_pairs", "--regressor", "syn", "--input", str(src), "--output", str(dst), stdout=out)
    assert json.loads(out.getvalue())["scored"] == 2
    assert all(0 <= float(line.rpartition("\t")[2]) <= 100 for line in dst.read_text().splitlines())


def test_recipe_goes_through_the_training_job(campaign):
    from jobs.models import Job

    out = io.StringIO()
    call_command(
        "train_regressor",
        "synthetic",
        "--name",
        "j",
        "--no-embeddings",
        "--recipe",
        "v2",
        "--cv-folds",
        "0",
        "--wait",
        "--json",
        stdout=out,
        stderr=io.StringIO(),
    )
    assert json.loads(out.getvalue())["status"] == "succeeded"
    assert Job.objects.get().params["train"]["recipe"] == "v2" and Job.objects.get().params["train"]["cv_folds"] == 0
    assert Regressor.objects.get(name="j").signature["recipe"] == "v2"
