"""Which generated candidates are not paraphrases worth showing or releasing: the one rule that a HIT batch
(``annotation.batches.non_word_screen``) and a release (``scoring.releases.rows``) both apply.

A candidate is left out when it is

- a **copy** of its reference (``is_copy``, ``COPY_RULE``): equal after Unicode NFKC normalisation, case
  folding and whitespace collapsing. A batch shows the reference's own copy only as an attention check; a
  release leaves copies out (``export_release --keep-copies`` keeps them);
- or holds a **non-word** (``NON_WORD_RULE``): a word of the candidate (``generation.vocabulary.text_words``)
  that is neither a word of its own reference, nor a word type of the corpus it was generated from (the
  corpus's IDF table), nor an English word in ``wordfreq``'s large English list with a Zipf frequency of at
  least ``MIN_ZIPF`` (about one use in ten million words) that is not a function word with an inflection
  (``inflected_function_word``: "tos", "buts", which a web crawl holds as typos and slang; "notes", "beings"
  are words of their own); a function word glued to a determiner (``glued_word``: "tothe", "inthe", two words
  that lost their space) is a non-word even where the corpus or the crawl holds it. The rule is
  ``generation.english``'s (``non_words``, ``is_english``), the one the diverse mode's non-word filter applies.

The corpus alone is too small a dictionary: the 3,000-sentence demo corpus lacks "finding" and "harming", so a
good paraphrase ("Ryanair chief praises report finding") was left out; English alone does not know a corpus's
names and jargon. The Zipf floor keeps the decoder's inventions out even where a web crawl has seen them as
typos: "fors" (Zipf 2.0) in "call fors dialogue", "reachinging" and "foesity" (absent), while rare real words
pass ("obfuscate" 2.3, "quagmire" 2.8, "harming" 3.4).

Why wordfreq: it bundles its data (no download at run time), is kept up to date, and its large English list
(321,180 words, loaded in under a second once per process) covers rare real words that a word-list of a
spell checker or lemminflect's lexicon (73,000 forms, about ten seconds to load) misses. Its code is Apache-2.0
and its data CC BY-SA 4.0: Paraforge only looks words up in it and ships none of it (docs/reference/licences.md).

A corpus with no IDF table (or a campaign with no known corpus) is not screened for non-words: the record says
so, and every candidate is kept, in a batch and in a release alike.

A HIT batch also leaves out a candidate that loops (``generation.copies.REPEATS_RULE``; batch setting
``drop_loops``); a release bounds the same fault by its repetition filter, as a rate.
"""

from __future__ import annotations

from collections.abc import Sequence

from .copies import COPY, COPY_RULE, copy_key, is_copy  # noqa: F401 (re-exported)
from .english import MIN_ZIPF, NON_WORD, WORDLIST, Vocabulary, english_words, non_words
from .models import Corpus
from .vocabulary import corpus_vocabulary, text_words

NON_WORD_RULE = (
    "a paraphrase holds a non-word when one of its words (spaCy tokens holding a letter, lower-cased; numbers, "
    "'1990s' and '21st' too, URLs and e-mail addresses are never non-words; a contraction's piece such as ''ve' "
    "is English, and an abbreviation such as 'U.S.' is looked up without its full stops) is neither a word of its "
    "reference (with or without the marks around it: '@Cyracuz', 'Cyracuz'), nor a word type of the "
    f"corpus it was generated from, nor an English word with a Zipf frequency of at least {MIN_ZIPF} in the "
    f"{WORDLIST} that is not a function word with an inflection ('tos', 'buts'); a function word glued to a "
    "determiner ('tothe', 'inthe') is a non-word even in the corpus"
)


def screen_vocabulary(corpus: Corpus | None) -> tuple[Vocabulary | None, str]:
    """(the vocabulary of the non-word rule for candidates generated from ``corpus``, what it is); None (and
    why) when the corpus is unknown or has no IDF table yet: then nothing is a non-word."""
    if corpus is None:
        return None, "no known corpus (the campaign was not generated here): every candidate kept"
    found = corpus_vocabulary(corpus)
    if found is None:
        return None, f"corpus {corpus.name!r} has no IDF table (its vocabulary): every candidate kept"
    table, words = found
    source = (
        f"IDF table {table.name!r} of corpus {corpus.name!r} ({table.n_types} types) and the {WORDLIST} "
        f"(Zipf >= {MIN_ZIPF})"
    )
    return Vocabulary(corpus=words, english=english_words(), source=source), source


def pair_non_words(
    pairs: Sequence[tuple[str, str]], vocabulary: Vocabulary | None, *, cached: bool = True
) -> list[list[str]]:
    """For each ``(reference, candidate)`` pair, the candidate's non-words (``NON_WORD_RULE``; none without a
    vocabulary). Texts are tokenized once each (``text_words``, through the cache unless ``cached`` is false)."""
    if vocabulary is None or not pairs:
        return [[] for _ in pairs]
    texts = sorted({t for pair in pairs for t in pair})
    words = dict(zip(texts, text_words(texts, cached=cached)))
    return [non_words(words[cand], words[ref], vocabulary) for ref, cand in pairs]


def screen_verdicts(
    pairs: Sequence[tuple[str, str]], vocabulary: Vocabulary | None, *, cached: bool = True
) -> list[tuple[str | None, list[str]]]:
    """For each ``(reference, candidate)``: (``COPY``, ``NON_WORD`` or None, the non-words found). A copy is a copy
    whatever its words; the non-words of a copy are not looked for."""
    copies = [is_copy(ref, cand) for ref, cand in pairs]
    found = pair_non_words([p for p, c in zip(pairs, copies) if not c], vocabulary, cached=cached)
    it = iter(found)
    verdicts: list[tuple[str | None, list[str]]] = []
    for copy in copies:
        if copy:
            verdicts.append((COPY, []))
            continue
        invented = next(it)
        verdicts.append((NON_WORD if invented else None, invented))
    return verdicts
