"""The quick start's candidates (issue 29): what ``scripts/start`` decodes with the demo model and puts on HITs
is worth a rater's time: at least two thirds of the non-check candidates are real-word sentences that differ
from their reference, and enough of them for the tutorial's regressor (``generation.demo_settings``)."""

from io import StringIO

import pytest
from django.core.management import call_command

from annotation.models import Batch, HitItem
from generation.demo_settings import DEMO_CORPUS, DEMO_SAMPLE
from generation.english import non_words
from generation.models import Corpus
from generation.vocabulary import corpus_vocabulary, text_words
from scoring.regressor import MIN_CANDIDATES, MIN_REFERENCES

pytestmark = pytest.mark.django_db


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


def test_the_quick_starts_hits_show_real_word_paraphrases(storage_dir):
    out = StringIO()
    call_command("demo_setup", stdout=out)
    batch = Batch.objects.get(campaign__name=DEMO_SAMPLE)
    items = list(
        HitItem.objects.filter(hit__batch=batch, is_attention_check=False, is_degraded_check=False).select_related(
            "candidate", "hit__reference"
        )
    )
    _, vocabulary = corpus_vocabulary(Corpus.objects.get(name=DEMO_CORPUS))
    candidates = text_words(i.candidate.text for i in items)
    references = text_words(i.hit.reference.text for i in items)
    real = [
        item
        for item, words, ref_words in zip(items, candidates, references)
        if not non_words(words, ref_words, vocabulary)
        and _normal(item.candidate.text) != _normal(item.hit.reference.text)
    ]
    assert len(real) * 3 >= len(items) * 2, [i.candidate.text for i in items if i not in real]
    # the tutorial trains a regressor on these HITs' judgments
    assert len(real) >= MIN_CANDIDATES and len({i.hit.reference_id for i in real}) >= MIN_REFERENCES
    texts = " ".join(i.candidate.text for i in items)
    assert not any(word in texts for word in ("reachinging", "foesity", "SomeBA"))  # the issue's own examples
    left_out = batch.settings["non_words"]["left_out"]
    assert left_out > 0 and f"({left_out} candidates with non-words left out)" in out.getvalue()
