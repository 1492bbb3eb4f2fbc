import math

import numpy as np
import pytest

from scoring.similarity.embeddings import pair_cosines, subword_lengths
from scoring.similarity.features import (
    LEXICAL_FEATURES,
    PairError,
    RowSideData,
    family_matrix,
    feature_names,
    lexical_row,
    pair_features,
)


def row(ref, para, nll=None, constraints=None) -> dict:
    return dict(zip(LEXICAL_FEATURES, lexical_row(ref, para, nll, constraints)))


def test_identical_pair():
    fb = pair_features(
        [{"reference": "The cat sat on the mat.", "paraphrase": "The cat sat on the mat."}], with_embeddings=True
    )
    f = dict(zip(fb.names, fb.matrix[0]))
    assert fb.keep.tolist() == [True]
    assert f["pinc"] == 0.0 and f["bleu"] == pytest.approx(100.0)
    assert f["cosine"] == pytest.approx(1.0, abs=1e-5)
    assert f["align_p"] == f["align_r"] == pytest.approx(1.0, abs=1e-5) and f["align_f"] == pytest.approx(1.0, abs=1e-5)
    assert f["identical"] == 1.0 and f["lev"] == 0 and f["char_sim"] == 1.0 and f["len_ratio"] == 1.0
    assert all(f[f"prec_{n}"] == 1.0 and f[f"rec_{n}"] == 1.0 for n in range(1, 5))


def test_disjoint_pair():
    f = row("The cat sat on the mat.", "Dogs bark loudly")
    assert f["bleu"] == 0.0 and f["pinc"] == 100.0 and f["prec_1"] == 0.0 and f["identical"] == 0.0
    assert f["ref_len"] == 6 and f["para_len"] == 3 and f["len_ratio"] == 0.5 and f["len_diff"] == 3
    assert f["lev"] == 6 and f["lev_norm"] == 1.0


def test_overlaps_are_clipped_and_normalised():
    # casing and punctuation are ignored; "the" twice in the paraphrase matches the reference's two
    f = row("The cat sat on the mat.", "the cat sat on a mat")
    assert f["prec_1"] == pytest.approx(5 / 6) and f["rec_1"] == pytest.approx(5 / 6)
    assert f["prec_2"] == pytest.approx(3 / 5) and f["prec_4"] == pytest.approx(1 / 3)
    assert f["lev"] == 1 and f["lev_norm"] == pytest.approx(1 / 6)
    assert 0 < f["bleu"] < 100 and 0 < f["pinc"] < 100 and f["identical"] == 0.0
    clipped = row("a cat", "a a a a")
    assert clipped["prec_1"] == pytest.approx(1 / 4)


def test_nll_and_missing_indicator():
    known, unknown = row("a b c", "a b d", nll=3.0), row("a b c", "a b d")
    assert known["nll"] == 3.0 and known["nll_per_word"] == 1.0 and known["nll_missing"] == 0.0
    assert unknown["nll"] == 0.0 and unknown["nll_missing"] == 1.0
    fb = pair_features([{"reference": "a b", "paraphrase": "a c", "nll": float("nan")}], with_embeddings=False)
    assert fb.matrix[0, fb.names.index("nll_missing")] == 1.0


def test_constraints_counts_one_set_and_per_system():
    one = {"positive": [["sat", "down"], ["mat"]], "negative": [["cat"]], "bos_avoid": [["the"]]}
    f = row("The cat sat on the mat.", "A cat sat down on the mat.", constraints=one)
    assert (f["cons_pos"], f["cons_pos_obeyed"]) == (2, 2)
    assert (f["cons_neg"], f["cons_neg_obeyed"]) == (1, 0)
    assert (f["cons_bos"], f["cons_bos_obeyed"]) == (1, 1)
    per_system = {"17": {"positive": [["Mat"]], "negative": []}, "21": {"negative": [["dog"]], "positive": [["mat"]]}}
    g = row("The cat sat on the mat.", "A cat sat on the mat.", constraints=per_system)
    assert (g["cons_pos"], g["cons_pos_obeyed"], g["cons_neg"], g["cons_neg_obeyed"]) == (1, 1, 1, 1)
    none = row("The cat.", "A cat.")
    assert none["cons_pos"] == none["cons_neg"] == none["cons_bos"] == 0


def test_references_over_100_subwords_are_skipped():
    at_limit, over = "hello " * 100, "hello " * 101
    assert subword_lengths([at_limit, over]).tolist() == [100, 101]
    pairs = [
        {"reference": at_limit, "paraphrase": "hello"},
        {"reference": over, "paraphrase": "hello"},
        {"reference": "short", "paraphrase": "hello " * 150},
    ]  # only the reference's length counts
    fb = pair_features(pairs, with_embeddings=True)
    assert fb.keep.tolist() == [True, False, True]
    assert np.isnan(fb.matrix[1]).all() and not np.isnan(fb.matrix[[0, 2]]).any()


def test_batch_equals_one_by_one_and_shares_references():
    pairs = [
        ("A man is playing a guitar.", "A man plays the guitar."),
        ("A man is playing a guitar.", "A woman is slicing an onion."),
        ("Kids run in a park.", "Children are running in a park."),
    ]
    batch = pair_cosines([a for a, _ in pairs], [b for _, b in pairs])
    single = [pair_cosines([a], [b])[0] for a, b in pairs]
    assert batch == pytest.approx(single, abs=1e-5)
    assert batch[0] > 0.7 and batch[1] < 0.4 and batch[2] > 0.7
    fb = pair_features([{"reference": a, "paraphrase": b} for a, b in pairs], with_embeddings=True)
    assert fb.names == feature_names(with_embeddings=True) and fb.matrix.shape == (3, len(fb.names))
    assert fb.matrix[:, fb.names.index("cosine")] == pytest.approx(batch, abs=1e-5)
    # token alignment: the close paraphrase aligns better than the unrelated sentence
    align_f = fb.matrix[:, fb.names.index("align_f")]
    assert align_f[0] > align_f[1] and (0 < align_f).all() and (align_f <= 1 + 1e-6).all()


def test_without_embeddings_has_no_cosine():
    fb = pair_features([{"reference": "a b", "paraphrase": "a b"}], with_embeddings=False)
    assert "cosine" not in fb.names and fb.matrix.shape == (1, len(LEXICAL_FEATURES))


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"reference": "a"}, "pair 0: 'reference' and 'paraphrase'"),
        ({"reference": "a", "paraphrase": "b", "nll": "x"}, "pair 0: nll 'x' is not a number"),
        (("a", "b"), "pair 0: expected a dict"),
    ],
)
def test_bad_pairs_are_named(bad, message):
    with pytest.raises(PairError, match=message):
        pair_features([bad], with_embeddings=False)


def test_empty_paraphrase_is_defined():
    f = row("A cat.", "...")
    assert f["para_len"] == 0 and f["bleu"] == 0.0 and f["pinc"] == 100.0
    assert all(not math.isnan(v) for v in f.values())


def test_the_families_columns_come_from_the_rows_side_data_as_pair_features_appends_them():
    pairs = [
        {"reference": "A cat sleeps.", "paraphrase": "A cat is sleeping.", "nll": 0.4, "constraints": {"28": {}}},
        {"reference": "A cat sleeps.", "paraphrase": "The cat naps.", "nll": 0.9, "constraints": {"1": {}, "28": {}}},
        {"reference": "Kids run.", "paraphrase": "Children run.", "nll": None, "constraints": None},
    ]
    families = ("nll2", "systems", "group")
    fb = pair_features(pairs, with_embeddings=False, families=families)
    n_base = len(LEXICAL_FEATURES)
    side = RowSideData(
        references=[p["reference"] for p in pairs],
        nlls=[p["nll"] for p in pairs],
        constraints=[p["constraints"] for p in pairs],
    )
    extra = family_matrix(fb.matrix[:, :n_base], fb.names[:n_base], side, families=families, with_embeddings=False)
    np.testing.assert_array_equal(extra, fb.matrix[:, n_base:])
    with pytest.raises(ValueError, match="nlls, vectors: not one row per reference"):
        RowSideData(references=["a", "b"], nlls=[None], constraints=[None, None], vectors=np.zeros((3, 384)))
