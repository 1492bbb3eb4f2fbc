"""BLEU, repetition-rate and bidirectional-entailment release filters (Wieting et al. 2017; Klemen &
Robnik-Sikonja), with a tiny random BERT NLI model built in code (no network)."""

import gzip
import hashlib
import json
import math

import pytest
from django.core.management import CommandError

from scoring.diversity import tokens
from scoring.models import Release
from scoring.releases.entailment import EntailmentJudge
from scoring.releases.filters import FilterError, filter_candidates, parse_filters, repetition_rate, sentence_bleu

from . import test_releases
from .resource_data import PARAPHRASES, REFERENCES, records
from .test_releases import export, tsv_rows

scored = test_releases.scored  # the fixture, shared with test_releases.py

LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}


# --- BLEU -------------------------------------------------------------------------------------------------


def test_sentence_bleu_smooths_every_order_and_the_brevity_penalty():
    # matches/n-grams by order: 5/6, 3/5, 2/4, 1/3 -> smoothed (m+1)/(t+1): 6/7, 4/6, 3/5, 2/4; same length: BP 1
    assert sentence_bleu("the cat sat on the mat", "the cat sat on a mat") == pytest.approx(100 * (6 / 35) ** 0.25)
    # "the cat": 2/2, 1/1, 0/0, 0/0 -> 3/3, 2/2, 1/1, 1/1 (unmeasurable orders don't zero it); BP exp(1 - 7/3)
    assert sentence_bleu("The cat sat on the mat.", "the cat") == pytest.approx(100 * math.exp(-4 / 3))
    assert sentence_bleu("The cat sat on the mat.", "the cat sat on the mat") == pytest.approx(100)
    assert sentence_bleu("the cat", "") == 0.0


def test_bleu_filter_keeps_pairs_within_bounds():
    record = {
        "reference": "the cat sat on the mat",
        "length": 6,
        "candidates": [
            {"text": "the cat sat on the mat"},
            {"text": "the cat sat on a mat"},
            {"text": "the cat"},
            {"text": "a dog ran"},
        ],
    }
    # BLEU: 100, 64.3, 26.4, and "a dog ran" 21.3 (1/4, 1/3, 1/2, 1/1; BP exp(1 - 7/4))
    assert sentence_bleu("the cat sat on the mat", "a dog ran") == pytest.approx(
        100 * (1 / 24) ** 0.25 * math.exp(-3 / 4)
    )
    kept = filter_candidates(parse_filters("bleu=25-70"), record)
    assert [c["text"] for c in kept] == ["the cat sat on a mat", "the cat"]
    assert [c["text"] for c in filter_candidates(parse_filters("bleu=-25"), record)] == ["a dog ran"]
    assert parse_filters("bleu=25-70").as_dict()["bleu"] == {"min": 25.0, "max": 70.0}


# --- repetition -------------------------------------------------------------------------------------------


def test_repetition_rate_is_the_share_of_already_seen_words():
    # words of >= 3 characters: the cat saw the cat and the dog -> 3 repeats of 8
    assert repetition_rate("The cat saw the cat, and the dog.") == pytest.approx(3 / 8)
    # "a" and "is" are too short to count: cat, cat -> 1 of 2
    assert repetition_rate("a cat is a cat") == pytest.approx(1 / 2)
    # trigrams: we will go / will go and / go and we / and we will / we will go -> 1 of 5
    assert repetition_rate("we will go and we will go", 3) == pytest.approx(1 / 5)
    assert repetition_rate("a b", 1) is None and repetition_rate("a b", 3) is None


def test_repetition_filter_drops_repetitive_paraphrases():
    record = {
        "reference": "we will go there and see",
        "length": 6,
        "candidates": [
            {"text": "we will go and see"},
            {"text": "we will go and we will go"},
            {"text": "see see see"},
            {"text": "go"},
        ],
    }
    # unigram rates: 0, 2/4, 2/3, none (passes)
    assert [c["text"] for c in filter_candidates(parse_filters("repetition=-0.5"), record)] == [
        "we will go and see",
        "we will go and we will go",
        "go",
    ]
    # trigram rates: 0, 1/5, 0, none
    assert [c["text"] for c in filter_candidates(parse_filters("repetition3=-0.1"), record)] == [
        "we will go and see",
        "see see see",
        "go",
    ]
    assert parse_filters("repetition=-0.1,repetition3=-0.2").as_dict()["repetition"] == {
        "1": {"min": None, "max": 0.1},
        "3": {"min": None, "max": 0.2},
    }


@pytest.mark.parametrize(
    "spec, message",
    [
        ("bleu=10-200", "between 0 and 100"),
        ("bleu=70-10", "lower bound is above"),
        ("bleu=x", "expected a range"),
        ("repetition=-5", "fractions between 0 and 1"),
        ("repetition=-0.1,repetition1=-0.2", "given twice"),
        ("repetition2=-0.1", "unknown filter"),
        ("entailment=1.5", "argmax or a probability threshold"),
        ("entailment=maybe", "argmax or a probability threshold"),
        ("entailment=0.75", "--entailment-model DIR"),
    ],
)
def test_bad_new_filters_have_one_line_errors(spec, message):
    with pytest.raises(FilterError, match=message) as err:
        parse_filters(spec)
    assert "\n" not in str(err.value)


# --- entailment -------------------------------------------------------------------------------------------


def _write_nli_model(folder, *, id2label=LABELS, seed=0):
    """A 1-layer random BERT sequence classifier with a WordPiece vocabulary of the test sentences; the
    entailment bias is shifted so that entailment is the most probable class for about half the
    directional pairs (so argmax mode keeps some and drops some)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    folder.mkdir(parents=True)
    words = sorted({w for text in REFERENCES + sum(PARAPHRASES, []) for w in tokens(text)})
    (folder / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "?", "."] + words) + "\n"
    )
    tokenizer = BertTokenizer(vocab_file=str(folder / "vocab.txt"))
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        initializer_range=0.4,
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config).eval()
    margins = []
    for ref, paras in zip(REFERENCES, PARAPHRASES):
        for p in paras:
            for a, b in ((ref, p), (p, ref)):
                with torch.no_grad():
                    logits = model(**tokenizer(a, b, return_tensors="pt")).logits[0]
                margins.append((logits[0] - logits[1:].max()).item())
    with torch.no_grad():
        model.classifier.bias[0] -= sorted(margins)[len(margins) // 2] - 1e-3
    tokenizer.save_pretrained(folder)
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def nli_model(tmp_path_factory):
    return _write_nli_model(tmp_path_factory.mktemp("nli") / "model")


def _direct_probabilities(folder, premise, hypothesis):
    """P(classes) of one pair straight through transformers, unbatched."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(folder, local_files_only=True).eval()
    with torch.no_grad():
        return torch.softmax(model(**tokenizer(premise, hypothesis, return_tensors="pt")).logits[0], -1).tolist()


@pytest.fixture(scope="module")
def directional(nli_model):
    """(reference, paraphrase) -> (P(classes) ref->para, P(classes) para->ref), computed directly."""
    return {
        (r, p): (_direct_probabilities(nli_model, r, p), _direct_probabilities(nli_model, p, r))
        for r, paras in zip(REFERENCES, PARAPHRASES)
        for p in paras
    }


def _kept(filters):
    return {(rec["reference"], c["text"]) for rec in records() for c in filter_candidates(filters, rec)}


def _paraphrases(pairs):
    """The (reference, paraphrase) pairs that are not a copy of their reference (a release leaves copies out)."""
    return {(r, p) for r, p in pairs if r != p}


def test_threshold_needs_entailment_in_both_directions(nli_model, directional):
    # the threshold: halfway between the two directions of the pair whose directions disagree most
    pair = max(directional, key=lambda k: abs(directional[k][0][0] - directional[k][1][0]))
    fwd, bwd = directional[pair][0][0], directional[pair][1][0]
    threshold = round((fwd + bwd) / 2, 6)
    assert abs(fwd - bwd) > 0.01, "precondition: some pair's directions must disagree"
    assert all(abs(p[0] - threshold) > 1e-4 for d in directional.values() for p in d), "no value at the edge"

    filters = parse_filters(f"entailment={threshold}", entailment_model=str(nli_model))
    expected = _paraphrases(k for k, (a, b) in directional.items() if a[0] >= threshold and b[0] >= threshold)
    assert _kept(filters) == expected
    assert pair not in expected  # one direction passed, the other did not: dropped
    assert 0 < len(expected) < len(directional)
    assert filters.as_dict()["entailment"]["rule"] == threshold


def test_argmax_mode_agrees_with_the_models_argmax(nli_model, directional):
    filters = parse_filters("entailment=argmax", entailment_model=str(nli_model))

    def top(probs):
        return max(range(3), key=lambda i: probs[i])

    expected = _paraphrases(k for k, (a, b) in directional.items() if top(a) == 0 and top(b) == 0)
    one_way = {k for k, (a, b) in directional.items() if (top(a) == 0) != (top(b) == 0)}
    assert _kept(filters) == expected
    assert 0 < len(expected) < len(directional) and one_way, "precondition: mixed outcomes"


def test_judge_batches_like_single_pairs(nli_model, directional):
    judge = EntailmentJudge(nli_model, batch_size=3)
    (ref, para), (fwd, bwd) = next(iter(directional.items()))
    probs = judge.probabilities([ref, para, "x"], [para, ref, "y"])
    assert probs[0] == pytest.approx(fwd, abs=1e-5) and probs[1] == pytest.approx(bwd, abs=1e-5)


@pytest.mark.django_db
def test_export_with_entailment_records_the_model_and_is_deterministic(scored, nli_model, directional, tmp_path):
    args = ["--filters", "entailment=argmax", "--entailment-model", str(nli_model)]
    first = export("res", "--out", str(tmp_path / "a"), *args)
    again = export("res", "--out", str(tmp_path / "b"), "--version", "v2", *args)
    first["files"].pop("README.md"), again["files"].pop("README.md")  # the card names its version
    assert first["files"] == again["files"]  # same inputs, same model: byte-identical release files

    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    weights = hashlib.sha256((nli_model / "model.safetensors").read_bytes()).hexdigest()
    assert manifest["filters"]["entailment"] == {
        "rule": "argmax",
        "directions": "both",
        # the model by name, not by a path of the exporting machine
        "model": {"folder": nli_model.name, "weights_sha256": {"model.safetensors": weights}},
    }
    assert str(tmp_path) not in (tmp_path / "a" / "manifest.json").read_text()

    rows = tsv_rows(tmp_path / "a" / "pairs.tsv.gz")[1:]
    kept = {(r[1], r[4]) for r in rows}
    expected = _paraphrases(k for k, (a, b) in directional.items() if a[0] >= max(a) and b[0] >= max(b))
    assert kept == expected and first["counts"]["pairs"] == len(expected)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "problem, message",
    [
        ("missing", "no such folder"),
        ("no_label", "no single 'entailment' label"),
        ("no_filter", "without an"),
        ("no_weights", "no weight file"),
    ],
)
def test_bad_entailment_model_is_refused_before_writing(scored, nli_model, tmp_path, problem, message):
    spec = "entailment=0.75"
    if problem == "missing":
        model = tmp_path / "nowhere"
    elif problem == "no_label":
        model = _write_nli_model(tmp_path / "plain", id2label={0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})
    elif problem == "no_filter":
        model, spec = nli_model, "len=1-100"
    else:
        model = tmp_path / "empty"
        model.mkdir()
        (model / "config.json").write_text((nli_model / "config.json").read_text())
    with pytest.raises(CommandError, match=message) as err:
        export("res", "--out", str(tmp_path / "bad"), "--filters", spec, "--entailment-model", str(model))
    assert "\n" not in str(err.value)
    assert not (tmp_path / "bad").exists() and not Release.objects.exists()


@pytest.mark.django_db
def test_manifest_filters_without_new_filters_stay_null(scored, tmp_path):
    export("res", "--out", str(tmp_path / "plain"))
    filters = json.loads((tmp_path / "plain" / "manifest.json").read_text())["filters"]
    assert filters["bleu"] is None and filters["repetition"] == {} and filters["entailment"] is None
    with gzip.open(tmp_path / "plain" / "pairs.tsv.gz", "rt") as fh:
        assert len(fh.read().splitlines()) == 18  # the header and 18 pairs less the copy of its reference


@pytest.mark.django_db
def test_the_admin_exports_with_entailment_and_loads_the_model_only_in_the_job(
    client, scored, nli_model, directional, tmp_path, monkeypatch, settings
):
    from django.contrib.auth import get_user_model

    from jobs.execution import job_run_inline
    from jobs.models import Job, JobStatus

    client.force_login(get_user_model().objects.create_superuser("boss", password="pw"))
    url = f"/admin/scoring/scoredresource/{scored.pk}/export/"
    assert "entailment_model" in client.get(url).content.decode()

    def no_loading_in_the_request(self, *args, **kwargs):
        raise AssertionError("the web request loaded the NLI model")

    settings.PARAFORGE_MODEL_ROOTS = [str(nli_model.parent)]  # the form takes models under the model roots
    monkeypatch.setattr(EntailmentJudge, "__init__", no_loading_in_the_request)
    for fields, message in (
        ({"entailment_model": str(nli_model.parent / "nowhere")}, "no such folder"),
        ({"entailment_model": str(tmp_path / "nowhere")}, "not an allowed model folder"),
        ({}, "give the NLI model"),
    ):
        bad = client.post(url, {"version": "v1", "format": "tsv", "filters": "entailment=argmax", **fields})
        assert bad.status_code == 200 and message in bad.content.decode()
        assert not Job.objects.filter(kind="export_release").exists()
    response = client.post(
        url, {"version": "v1", "format": "tsv", "filters": "entailment=argmax", "entailment_model": str(nli_model)}
    )
    assert response.status_code == 302
    job = Job.objects.get(kind="export_release")
    assert job.params["entailment_model"] == str(nli_model)
    monkeypatch.undo()  # the worker's chunk loads it
    assert job_run_inline(job_id=job.pk).status == JobStatus.SUCCEEDED, job.error
    release = Release.objects.get()
    assert release.manifest["filters"]["entailment"]["model"]["folder"] == nli_model.name
    expected = _paraphrases(k for k, (a, b) in directional.items() if a[0] >= max(a) and b[0] >= max(b))
    assert release.manifest["counts"]["pairs"] == len(expected)
