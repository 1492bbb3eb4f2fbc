"""The quick start printed "Recommended: pip install sacremoses." (issue 37, item 7): MarianTokenizer (the demo
model's, opus-mt's) warns so when sacremoses is missing, yet transformers never applies the Moses normaliser it
would set up to the text it encodes; loading a model says nothing about it (``generation.decoding.loading``)."""

import warnings
from pathlib import Path

from transformers import MarianTokenizer

from generation.decoding.loading import load_model

DEMO_MODEL = Path(__file__).resolve().parents[2] / "generation" / "demo" / "model"


def test_loading_the_demo_model_prints_no_sacremoses_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = load_model(str(DEMO_MODEL), device="cpu")
    assert isinstance(loaded.tokenizer, MarianTokenizer)
    assert not [w for w in caught if "sacremoses" in str(w.message)]


def test_the_normaliser_sacremoses_would_provide_is_not_applied_to_the_input():
    """Why silencing is right: an encoding does not go through ``normalize`` (a normaliser that would change the
    text changes nothing)."""
    tokenizer = MarianTokenizer.from_pretrained(str(DEMO_MODEL), local_files_only=True)
    text = "He said «hello» – twice."
    before = tokenizer(text)["input_ids"]
    tokenizer.punc_normalizer = lambda x: "completely different words"
    assert tokenizer(text)["input_ids"] == before
