"""Morphological variants for constraints (ParaBank §3.2 "Morphological Variants"), via lemminflect.

- :func:`all_variants` ("Lex: All" negative systems): every lemma of the word under any part of speech
  and every inflection of those lemmas under any part of speech, purely alphabetic forms only
  (``mean`` -> mean, means, meaning, meant, meaner, meanest).
- :func:`verb_inflections` (positive systems 29-31): the inflections of a verb's lemma(s) other than
  the word itself (``took`` -> take, taken, takes, taking).

Results are cached per word: the same few thousand words come back all the time.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import chain


def capitalised(word: str) -> str:
    """``for`` -> ``For`` (only the first letter changes): the form negative phrases and the decoder's bans add to
    the lowercase one; a spelling that is neither is an odd case (selection.values.odd_case_forms)."""
    return word[:1].upper() + word[1:]


def _lemminflect():
    import lemminflect

    return lemminflect


@lru_cache(maxsize=1)
def _tables():
    """lemminflect's lookup dictionaries (word -> {UPOS: lemmas}, lemma -> {PTB tag: forms}, each with
    its overrides), read directly: the public getAll* functions deep-copy their result on every call,
    which costs more than everything else selection does. None if this lemminflect lays them out
    differently (then the public functions are used)."""
    li = _lemminflect()
    try:
        lemmatizer, inflections = li.Lemmatizer(), li.Inflections()
        tables = (
            lemmatizer._getLemmaDict(),
            lemmatizer._getOverridesDict(),
            inflections._getInflDict(),
            inflections._getOverridesDict(),
        )
    except AttributeError:
        return None
    if not all(isinstance(t, dict) for t in tables):
        return None
    global _TABLES
    _TABLES = tables
    return tables


_TABLES: tuple | None = None  # _tables(), once read


def _all_lemmas(word: str) -> list[tuple[str, ...]]:
    """The lemma tuples of a lowercase word under every UPOS (lemminflect.getAllLemmas(word).values())."""
    tables = _tables()
    if tables is None:
        return list(_lemminflect().getAllLemmas(word).values())
    merged = dict(tables[0].get(word, {}))
    merged.update(tables[1].get(word, {}))
    return list(merged.values())


def _all_inflections(lemma: str) -> list[tuple[str, ...]]:
    """The form tuples of a lowercase lemma under every tag (lemminflect.getAllInflections(lemma).values())."""
    if _tables() is None:
        return list(_lemminflect().getAllInflections(lemma).values())
    return list(_inflection_dict(lemma).values())


@lru_cache(maxsize=200_000)
def all_variants(word: str) -> tuple[str, ...]:
    """The word first, then its other lowercase alphabetic lemmas and inflections, sorted."""
    if _tables() is None:
        return _all_variants_public(word.lower())
    return tuple(variants_list(word))


_lower, _isalpha, _chain = str.lower, str.isalpha, chain.from_iterable


def variants_list(word: str) -> list[str]:
    """all_variants(word) as a new list, uncached (for callers that cache what they derive from it).
    Mostly C-level steps (map, filter, chain, set): a cache miss costs a couple of microseconds."""
    word = word.lower()
    tables = _TABLES or _tables()
    if tables is None:
        return list(_all_variants_public(word))
    lemma_dict, lemma_overrides, infl_dict, infl_overrides = tables
    # The word, its lemmas, then the inflections of each (lowercased) lemma; repeats are harmless.
    entry = _merged(lemma_dict, lemma_overrides, word) if word in lemma_overrides else lemma_dict.get(word)
    forms = [word, *_chain(entry.values())] if entry else [word]
    for lemma in set(map(_lower, forms)) if len(forms) > 1 else (word,):
        entry = _merged(infl_dict, infl_overrides, lemma) if lemma in infl_overrides else infl_dict.get(lemma)
        if entry:
            forms += _chain(entry.values())
    if len(forms) == 1:
        return forms
    joined = "".join(forms)
    # (lowering an ASCII form that has no capital letter changes nothing: skip it, the usual case)
    others = (
        set(filter(_isalpha, forms))
        if joined.isascii() and joined == joined.lower()
        else set(map(_lower, filter(_isalpha, forms)))
    )
    others.discard(word)
    return [word, *sorted(others)]


def in_known_form(word: str) -> bool:
    """Whether ``word`` is written as known_words() are (lowercase, alphabetic): for such a word, not being
    among them means lemminflect has no other form of it."""
    return word.islower() and word.isalpha()


def known_words() -> list[str]:
    """The lowercase words lemminflect's tables hold as words or lemmas (every other word's only variant
    is itself); empty when its tables cannot be read directly."""
    return list(_known_words())


@lru_cache(maxsize=1)
def _known_words() -> tuple[str, ...]:
    """known_words(), read once: both indexes built from lemminflect's tables walk them."""
    tables = _TABLES or _tables()
    if tables is None:
        return ()
    return tuple(sorted({key for table in tables for key in table if in_known_form(key)}))


def _merged(table: dict, overrides: dict, key: str) -> dict:
    """``table[key]`` with ``overrides[key]`` laid over it, by tag (as lemminflect merges them)."""
    found = table.get(key)
    override = overrides.get(key)
    if override is None:
        return found or {}
    return {**found, **override} if found else override


def _all_variants_public(word: str) -> tuple[str, ...]:
    """all_variants through lemminflect's public functions (for a lemminflect laid out differently)."""
    lemmas = {word}
    for found in _all_lemmas(word):
        lemmas.update(found)
    forms: set[str] = set(lemmas)
    for lemma in lemmas:
        for inflected in _all_inflections(lemma.lower()):
            forms.update(inflected)
    others = sorted(f.lower() for f in forms if f.isalpha() and f.lower() != word)
    return (word, *dict.fromkeys(others))


@lru_cache(maxsize=200_000)
def verb_inflections(word: str) -> tuple[str, ...]:
    """Alphabetic inflections (and lemma) of the verb ``word`` other than ``word`` itself, sorted."""
    index = _VERB_INDEX if _VERB_INDEX is not None else verb_inflections_index()
    if index and in_known_form(word):
        return index.get(word, ())
    return _verb_inflections_from_tables(word)


_VERB_INDEX: dict[str, tuple[str, ...]] | None = None


def verb_inflections_index() -> dict[str, tuple[str, ...]]:
    """verb_inflections of every lowercase word lemminflect knows that has some (any other lowercase
    word has none). Built once per process (about 0.2 s) because a word's first sight otherwise walks
    lemminflect's scattered tables (~10 us with the CPU caches cold, as after tagging). Empty when
    lemminflect's tables cannot be read directly."""
    global _VERB_INDEX
    if _VERB_INDEX is None:
        index = {}
        for word in known_words():
            found = _verb_inflections_from_tables(word)
            if found:
                index[word] = found
        _VERB_INDEX = index
    return _VERB_INDEX


def _verb_inflections_from_tables(word: str) -> tuple[str, ...]:
    lower = word.lower()
    tables = _TABLES or _tables()
    if tables is None:
        return _verb_inflections_public(lower)
    lemma_dict, lemma_overrides, infl_dict, infl_overrides = tables
    entry = _merged(lemma_dict, lemma_overrides, lower) if lower in lemma_overrides else lemma_dict.get(lower)
    found = entry.get("VERB") if entry else None
    lemmas = set(map(_lower, found)) if found else {lower}
    raw: list[str] = []
    for lemma in lemmas:
        entry = _merged(infl_dict, infl_overrides, lemma) if lemma in infl_overrides else infl_dict.get(lemma)
        if entry:
            for tag, inflected in entry.items():
                if tag.startswith("VB"):
                    raw += inflected
    forms = lemmas.union(map(_lower, raw))
    forms.discard(lower)
    return tuple(sorted(filter(_isalpha, forms)))


def _verb_inflections_public(lower: str) -> tuple[str, ...]:
    """verb_inflections through lemminflect's public functions."""
    li = _lemminflect()
    lemmas = {lemma.lower() for lemma in li.getAllLemmas(lower, upos="VERB").get("VERB", ())} or {lower}
    forms: set[str] = set(lemmas)
    for lemma in lemmas:
        for inflected in li.getAllInflections(lemma, upos="VERB").values():
            forms.update(f.lower() for f in inflected)
    return tuple(sorted(f for f in forms if f.isalpha() and f != lower))


def _inflection_dict(lemma: str) -> dict[str, tuple[str, ...]]:
    tables = _tables()
    merged = dict(tables[2].get(lemma, {}))
    merged.update(tables[3].get(lemma, {}))
    return merged


def random_verb_inflection(word: str, rng) -> str:
    """One random inflection of the verb ``word`` other than itself (``rng.choice``, e.g. a
    random.Random or constraints.SeededDraws); the word itself if it has none."""
    options = verb_inflections(word)
    return rng.choice(options) if options else word
