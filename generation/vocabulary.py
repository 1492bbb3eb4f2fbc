"""A corpus's vocabulary, and the non-words of a generated sentence.

Decoding under negative constraints with a subword model can invent words ("reachinging", "foesity",
"SomeBA") when a banned word's pieces are continued; such a candidate is not worth a rater's time, and
``annotation.batches`` leaves it out of HITs (batch setting ``drop_non_words``).

- **Vocabulary**: the token column of the corpus's own IDF table, i.e. every lower-cased spaCy token of its
  sentences as ``build_idf`` counted them. Nothing re-reads the corpus: the table is loaded once per
  process (``generation.constraints.constraint_job.load_idf_table``). A corpus with no IDF table has no known
  vocabulary (and then nothing is judged a non-word).
- **Words of a text**: its spaCy tokens (the tokenizer the IDF table was counted with), lower-cased, that
  hold a letter and are not number-, URL- or e-mail-like: punctuation and numbers are never non-words.
- **Non-word**: a word of the candidate that is neither in the vocabulary (or English) nor a word of its own
  reference (a reference's rare word, a name, is always allowed back): ``generation.english.non_words``, the
  rule the screen (``generation.screening``) and the diverse mode share.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Container, Iterable

from django.conf import settings
from django.core.cache import cache

from .models import Corpus, IdfTable

log = logging.getLogger(__name__)
WORDS_CACHE_VERSION = 1  # bump when the words of a text change (the rule of _is_word)
WORDS_CACHE_SECONDS = 90 * 24 * 3600  # a campaign's texts are screened again for each batch over months


def corpus_vocabulary_table(corpus: Corpus) -> IdfTable | None:
    """The corpus's latest stored IDF table: built by ``build_idf`` from its own sentences (an imported table
    has no corpus), so its tokens are the corpus's word types."""
    return corpus.idf_tables.exclude(key="").order_by("-created_at", "-pk").first()


def corpus_vocabulary(corpus: Corpus) -> tuple[IdfTable, Container[str]] | None:
    """(the IDF table, the corpus's word types: lower-cased spaCy tokens), or None when it has no table yet."""
    from .constraints.constraint_job import load_idf_table

    table = corpus_vocabulary_table(corpus)
    return None if table is None else (table, load_idf_table(table))


def _is_word(token) -> bool:
    return any(ch.isalpha() for ch in token.text) and not token.like_num and not token.like_url and not token.like_email


def _words_key(text: str) -> str:
    digest = hashlib.sha256(f"{settings.SPACY_MODEL}\0{text}".encode()).hexdigest()[:32]
    return f"generation:words:v{WORDS_CACHE_VERSION}:{digest}"


def text_words(texts: Iterable[str], *, cached: bool = True) -> list[list[str]]:
    """The words of each text (see the module docstring), in order, lower-cased.

    ``cached=False`` (a release streaming a whole resource: millions of texts read once) tokenizes without the
    cache, which would only fill up.

    Each text's words are kept in the shared cache (by ``SPACY_MODEL`` and the text), so that a web process
    that screens a batch's candidates (the batch form's first *Preview*) finds the words its campaign's
    generation already tokenized and never has to load spaCy, which imports torch (10-15 s, issue 37.7)."""
    texts = list(texts)
    if not cached:
        from .nlp import load_pipeline

        nlp = load_pipeline(tagger=False)
        return [[tok.lower_ for tok in doc if not tok.is_space and _is_word(tok)] for doc in nlp.pipe(texts)]
    keys = [_words_key(t) for t in texts]
    try:
        found = cache.get_many(keys)
    except Exception:  # a cache that is down slows the screen, it does not break it
        log.warning("cache unavailable, tokenizing %d texts", len(texts), exc_info=True)
        found = {}
    missing = sorted({t for t, k in zip(texts, keys) if k not in found})
    if missing:
        from .nlp import load_pipeline

        nlp = load_pipeline(tagger=False)
        made = {
            _words_key(t): [tok.lower_ for tok in doc if not tok.is_space and _is_word(tok)]
            for t, doc in zip(missing, nlp.pipe(missing))
        }
        try:
            cache.set_many(made, WORDS_CACHE_SECONDS)
        except Exception:
            log.warning("cache unavailable, not keeping the words of %d texts", len(made), exc_info=True)
        found.update(made)
    return [list(found[k]) for k in keys]
