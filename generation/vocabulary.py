"""A corpus's vocabulary, and the non-words of a generated sentence.

Decoding under negative constraints with a subword model can invent words ("reachinging", "foesity",
"SomeBA") when a banned word's pieces are continued; such a candidate is not worth a rater's time, and
``annotation.batches`` leaves it out of HITs (batch setting ``drop_non_words``).

- **Vocabulary**: the token column of the corpus's own IDF table, i.e. every lower-cased spaCy token of its
  sentences as ``build_idf`` counted them. Nothing re-reads the corpus: the table is loaded once per
  process (``generation.constraint_job.load_idf_table``). A corpus with no IDF table has no known
  vocabulary (and then nothing is judged a non-word).
- **Words of a text**: its spaCy tokens (the tokenizer the IDF table was counted with), lower-cased, that
  hold a letter and are not number-, URL- or e-mail-like: punctuation and numbers are never non-words.
- **Non-word**: a word of the candidate that is neither in the vocabulary nor a word of its own reference
  (a reference's rare word, a name, is always allowed back).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence

from .models import Corpus, IdfTable


def corpus_vocabulary_table(corpus: Corpus) -> IdfTable | None:
    """The corpus's latest stored IDF table: built by ``build_idf`` from its own sentences (an imported table
    has no corpus), so its tokens are the corpus's word types."""
    return corpus.idf_tables.exclude(key="").order_by("-created_at", "-pk").first()


def corpus_vocabulary(corpus: Corpus) -> tuple[IdfTable, Container[str]] | None:
    """(the IDF table, the corpus's word types: lower-cased spaCy tokens), or None when it has no table yet."""
    from .constraint_job import load_idf_table

    table = corpus_vocabulary_table(corpus)
    return None if table is None else (table, load_idf_table(table))


def _is_word(token) -> bool:
    return any(ch.isalpha() for ch in token.text) and not token.like_num and not token.like_url and not token.like_email


def text_words(texts: Iterable[str]) -> list[list[str]]:
    """The words of each text (see the module docstring), in order, lower-cased."""
    from .nlp import load_pipeline

    nlp = load_pipeline(tagger=False)
    return [[tok.lower_ for tok in doc if not tok.is_space and _is_word(tok)] for doc in nlp.pipe(texts)]


def non_words(words: Sequence[str], reference_words: Iterable[str], vocabulary: Container[str]) -> list[str]:
    """The candidate's ``words`` found neither in the ``vocabulary`` nor among its reference's words."""
    allowed = set(reference_words)
    return [w for w in words if w not in allowed and w not in vocabulary]
