"""Fast constraint selection: what jobs run, tuned for bench/constraints.py (selection >= 20x faster
than spaCy tagging). It must return exactly what :mod:`.reference` returns for every input
(tests/generation/test_constraints_property.py, and the snapshot derived from the reference); read the
reference for *what* is selected, this module only for *how* it is made cheap:

- **Pool**: one pass, one dict lookup per token: for a loaded :class:`~generation.constraints.idf.IdfValues` table
  (read-only, what jobs use) the token texts that join the pool are remembered per IDF window.
- **Per-word caches** of negative phrases (plain dicts, cheaper than ``lru_cache``), with the
  "Lex: All" phrases read from an index of every word lemminflect knows, built once per process
  (:func:`load_selection_tables`).
- **Plans**: a system list is compiled once (:class:`SystemList`) into steps; runs of consecutive rows
  of the same shape (1-7, 8-14, 15-21; 22-24, 25-27; 32-34) become blocks written out per pool size,
  sharing the ranked phrases of the first three pool tokens.
- **Draws**: the seeded draw table is hashed once per sentence and read at each system's own slot.

Process-wide tuning (gc.freeze, GC thresholds) is not done here: see config/process_tuning.py, run at a
Celery worker's start-up.

**One module, over 600 lines, on purpose.** It is the reference's rules made cheap, held equal to it rule
by rule and read beside it. Its parts are not separable concerns but one hot loop: the routines read the
per-word caches directly (a dict ``get``, not a call: the saving this module exists for) and unpack the
member tuples :func:`_plan` builds for them. Split, those caches and tuple shapes would become an API
between modules that nothing else should use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter

from ..constraints.idf import IdfValues
from ..constraints.ppdb import ALL_RELATIONS, SPACY_COARSE, coarse_pos_of_spacy
from ..constraints.systems import SYSTEMS, System, get_system
from ..morphology import (
    all_variants,
    capitalised,
    in_known_form,
    known_words,
    random_verb_inflection,
    variants_list,
    verb_inflections,
    verb_inflections_index,
)
from ..words import holds_word
from .values import (
    DRAWS_0,
    DRAWS_1,
    NO_PPDB_FILE,
    NO_WORD_REASON,
    PREPOSITIONS,
    SLOTS,
    UNPACK_HALF,
    ConstraintSet,
    NoConstraintSet,
    Phrases,
    PoolToken,
    SeededDraws,
    Selected,
    TaggedSentence,
    as_tagged,
    draw_table,
    no_ppdb_match_reason,
    odd_case_forms,
    pool_too_small_reason,
    positional_phrase,
    reference_too_short_reason,
    resolve_ppdb,
    settings_idf_window,
    with_surface_forms,
)

# ------------------------------------------------------------------------------------------ pool


_IDF = itemgetter(1)
_FIRST = itemgetter(0)
Member = tuple  # (word, idf, position, pos): a PoolToken's fields as a plain tuple (cheaper to build)


_CACHE_LIMIT = 200_000  # entries of each per-word cache below; a full cache is emptied and refills
_NOT_IN_POOL = ()  # a token text's entry when it never joins the pool (falsy)
_POOL_TEXTS: dict[tuple[int, float, float], tuple[IdfValues, dict]] = {}  # (id, window) -> (table, entries)


def _pool_texts(idf: Mapping[str, float], lo: float, hi: float) -> dict:
    """Token text -> (word, IDF) if it joins the pool, else _NOT_IN_POOL, remembered per IdfValues table
    and IDF window: one lookup per token then replaces isalpha, lower and two hashed lookups. Any other
    mapping may change between calls, so it gets a fresh dict (nothing carried over)."""
    if type(idf) is not IdfValues:
        return {}
    found = _POOL_TEXTS.get((id(idf), lo, hi))  # (the table is held below: its id cannot be reused)
    if found is None:
        if len(_POOL_TEXTS) >= 2:  # (a job uses one table and window; two keeps an alternation cheap)
            _POOL_TEXTS.clear()
        found = _POOL_TEXTS[(id(idf), lo, hi)] = (idf, {})
    return found[1]


def _pool_entry(text: str, idf: Mapping[str, float], lo: float, hi: float, texts: dict, odd: list | None) -> tuple:
    """A token text's entry in ``texts`` (computed on a miss, and remembered unless the text is an
    odd-case form: those are appended to ``odd`` at each occurrence, see values.odd_case_forms)."""
    low = text.lower()
    entry = _NOT_IN_POOL
    if text.isalpha():
        value = idf.get(low)
        if value is not None and lo <= value <= hi:
            entry = (low, value)
        elif low in PREPOSITIONS:
            entry = (low, 0.0 if value is None else value)
    if text == low or text == capitalised(low):
        if len(texts) >= _CACHE_LIMIT:
            texts.clear()
        texts[text] = entry
    elif odd is not None:
        odd.append(text)
    return entry


def _pool_in_order(
    tokens: Sequence[tuple[str, str]], idf: Mapping[str, float], lo: float, hi: float, odd: list | None = None
) -> list[Member]:
    """The pool's members in reference order; the odd-case token texts are appended to ``odd``, in order."""
    texts = _pool_texts(idf, lo, hi)
    entry_of = texts.get
    seen: set[str] = set()
    pool: list[Member] = []
    for position, (text, pos) in enumerate(tokens):
        entry = entry_of(text)
        if entry is None:
            entry = _pool_entry(text, idf, lo, hi, texts, odd)
        if entry:
            word = entry[0]
            if word not in seen:
                seen.add(word)
                pool.append((word, entry[1], position, pos))
    return pool


def _by_idf(in_order: list[Member]) -> list[Member]:
    """Highest IDF first; a stable sort keeps ties in reference order (earlier token first)."""
    return sorted(in_order, key=_IDF, reverse=True) if len(in_order) > 1 else in_order


def build_pool(
    tokens: Sequence[tuple[str, str]],
    idf: Mapping[str, float],
    *,
    min_idf: float | None = None,
    max_idf: float | None = None,
) -> list[PoolToken]:
    """The candidate pool, highest IDF first (ties: earlier token first)."""
    lo, hi = settings_idf_window(min_idf, max_idf)
    return list(map(PoolToken._make, _by_idf(_pool_in_order(tokens, idf, lo, hi))))


# ------------------------------------------------------------------------------------- selection


# Per-word negative phrases, cached in plain dicts (a dict hit costs a third of an lru_cache hit, and
# selection makes a dozen per reference); emptied when they reach _CACHE_LIMIT words.
_NEGATIVES: dict[str, Phrases] = {}
_NEGATIVES_ALL: dict[str, Phrases] = {}
_FORMS_ALL: dict[str, dict[str, None]] = {}  # word -> the tokens of its lex-all negative phrases, as keys


def _negatives(word: str) -> Phrases:
    """negative_phrases(word) on a cache miss."""
    cap = capitalised(word)
    found = ((word,), (cap,)) if cap != word else ((word,),)
    if len(_NEGATIVES) >= _CACHE_LIMIT:
        _NEGATIVES.clear()
    _NEGATIVES[word] = found
    return found


def _with_capitals(variants: list[str]) -> list[str]:
    """Each form, then capitalised(form): the tokens of lex-all negative phrases (repeats possible)."""
    forms: list[str] = []
    for form in variants:
        forms += (form, capitalised(form))
    return forms


_LEX_ALL_INDEX: dict[str, str] | None = None


def lex_all_index() -> dict[str, str]:
    """Every word lemminflect knows whose variants are more than itself -> the tokens of its lex-all
    negative phrases, space-separated. Built once per process (about 0.4 s, a few MB) because a
    word's first sight otherwise costs a walk over lemminflect's scattered tables (~7 us with the
    caches cold, as after tagging), and most pool words are first sights in a job's early chunks.
    Empty when lemminflect's tables cannot be read directly (every miss then takes the slow path)."""
    global _LEX_ALL_INDEX
    if _LEX_ALL_INDEX is None:
        index: dict[str, str] = {}
        for word in known_words():
            variants = variants_list(word)
            if len(variants) > 1:
                index[word] = " ".join(dict.fromkeys(_with_capitals(variants)))
        _LEX_ALL_INDEX = index
    return _LEX_ALL_INDEX


_TABLES_LOADED = False


def load_selection_tables() -> None:
    """Load what selection reads for every reference -- lemminflect's tables, the lex-all and verb
    inflection indexes built from them -- once per process (about 0.6 s). Jobs call it before their first
    reference, a worker at its start-up (config/process_tuning.py); a second call does nothing."""
    global _TABLES_LOADED
    if _TABLES_LOADED:
        return
    lex_all_index()
    verb_inflections_index()
    _TABLES_LOADED = True


def _negatives_all(word: str) -> Phrases:
    """negative_phrases(word, lex_all=True) on a cache miss."""
    joined = (_LEX_ALL_INDEX if _LEX_ALL_INDEX is not None else lex_all_index()).get(word)
    if joined is not None:
        unique = dict.fromkeys(joined.split(" "))
    elif _LEX_ALL_INDEX and in_known_form(word):  # a lowercase word lemminflect has no
        unique = dict.fromkeys((word, capitalised(word)))  # other forms of: itself, capitalised
    else:
        # (all_variants(word), uncached: its result is cached here, as phrases; a dict of strings only
        # is not tracked by the garbage collector)
        unique = dict.fromkeys(_with_capitals(variants_list(word)))
    found = tuple(zip(unique))  # (one-token phrases)
    if len(_NEGATIVES_ALL) >= _CACHE_LIMIT:
        _NEGATIVES_ALL.clear()
        _FORMS_ALL.clear()
    _FORMS_ALL[word] = unique
    _NEGATIVES_ALL[word] = found
    return found


def _distinct_all(words: Sequence[str]) -> bool:
    """Whether the lex-all negative phrases of these words are pairwise distinct, so that concatenating
    them needs no de-duplication (the usual case; False when unsure)."""
    if len(words) == 2:
        first, second = _FORMS_ALL.get(words[0]), _FORMS_ALL.get(words[1])
        return first is not None and second is not None and first.keys().isdisjoint(second)
    if len(words) == 3:
        first, second, third = map(_FORMS_ALL.get, words)
        return (
            first is not None
            and second is not None
            and third is not None
            and first.keys().isdisjoint(second)
            and first.keys().isdisjoint(third)
            and second.keys().isdisjoint(third)
        )
    forms = [_FORMS_ALL.get(word) for word in words]
    for i, these in enumerate(forms):
        if these is None:
            return False
        for others in forms[i + 1 :]:
            if others is None or not these.keys().isdisjoint(others):
                return False
    return True


def negative_phrases(word: str, lex_all: bool = False) -> Phrases:
    """Single-token negative phrases for ``word``: its lowercase and capitalised forms, and with
    ``lex_all`` those of every morphological variant."""
    if lex_all:
        return _NEGATIVES_ALL.get(word) or _negatives_all(word)
    return _NEGATIVES.get(word) or _negatives(word)


def clear_caches() -> None:
    """Forget every per-word result of selection (token texts' pool entries, negative phrases,
    morphological variants), as in a fresh process; the tables load_selection_tables() loads stay. For
    benchmarks and tests; a job never needs it."""
    _POOL_TEXTS.clear()
    _NEGATIVES.clear()
    _NEGATIVES_ALL.clear()
    _FORMS_ALL.clear()
    all_variants.cache_clear()
    verb_inflections.cache_clear()


_EMPTY_POOL: dict[int, str] = {}  # needed -> the reason for an empty pool


class _Sentence:
    """Everything the systems share for one reference, each piece computed once and only if needed."""

    __slots__ = (
        "text",
        "tokens",
        "seed",
        "ppdb",
        "pool",
        "in_order",
        "_ascending",
        "_table",
        "ranked",
        "overlap",
        "_too_small",
        "_high",
    )

    def __init__(self, sentence: TaggedSentence, in_order: list[Member], seed: int, ppdb) -> None:
        self.text = sentence.text
        self.tokens = sentence.tokens
        self.seed = seed
        self.ppdb = ppdb
        self.in_order = in_order
        self.pool = _by_idf(in_order)  # highest IDF first
        self._ascending: list[Member] | None = None
        self._table: tuple[int, ...] | None = None
        self._high: tuple[int, ...] | None = None
        self.ranked: list[list[Phrases] | None] = [None, None, None, None]
        self.overlap = [False, False, False, False]  # lex-all phrases of the ranked words may repeat
        self._too_small: dict[int, str] = {}

    @property
    def ascending(self) -> list[Member]:
        """Lowest IDF first (ties: earlier token first)."""
        if self._ascending is None:
            self._ascending = sorted(self.in_order, key=_IDF) if len(self.in_order) > 1 else self.in_order
        return self._ascending

    @property
    def table(self) -> tuple[int, ...]:
        """The first 16 words of draw_table (one digest of its two): all but the PPDB systems' slots."""
        if self._table is None:
            first = DRAWS_0.copy()
            first.update(f"{self.seed}\x1f{self.text}".encode())
            self._table = UNPACK_HALF(first.digest())
        return self._table

    def table_word(self, slot: int) -> int:
        """Word ``slot`` of draw_table, the second digest computed only if a slot past 15 is read."""
        if slot < 16:
            return (self._table or self.table)[slot]
        if self._high is None:
            second = DRAWS_1.copy()
            second.update(f"{self.seed}\x1f{self.text}".encode())
            self._high = UNPACK_HALF(second.digest())
        return self._high[slot - 16]

    def draws(self, system: int) -> SeededDraws:
        return SeededDraws(self.seed, system, self.text, draw_table(self.seed, self.text))

    def rank(self, code: int) -> list[Phrases]:
        """Negative phrases of the first three pool tokens in highest (code 0, 1) or lowest (2, 3) IDF
        order, without (even code) or with (odd) every morphological variant."""
        if code > 1 and len(self.pool) < 2 and self.ranked[code - 2] is not None:
            found = self.ranked[code] = self.ranked[code - 2]  # one token (or none): the same either way
            return found
        words = list(map(_FIRST, (self.pool if code < 2 else self.ascending)[:3]))
        if code & 1:
            found = list(map(_NEGATIVES_ALL.get, words))
            if None in found:  # (first sight of a word)
                found = [_NEGATIVES_ALL.get(word) or _negatives_all(word) for word in words]
            self.overlap[code] = len(words) > 1 and not _distinct_all(words)
        else:
            found = list(map(_NEGATIVES.get, words))
            if None in found:
                found = [_NEGATIVES.get(word) or _negatives(word) for word in words]
        self.ranked[code] = found
        return found

    def too_small(self, needed: int) -> str:
        """The reason a system that needs ``needed`` pool tokens has no constraint set."""
        reason = self._too_small.get(needed)
        if reason is None:
            if not self.pool:
                reason = _EMPTY_POOL.get(needed)
                if reason is None:
                    reason = _EMPTY_POOL[needed] = pool_too_small_reason((), needed)
            else:
                prefix = self._too_small.get(-1)  # (the words part, kept under -1)
                if prefix is None:  # (once per reference)
                    words = ", ".join([t[0] for t in self.pool])
                    prefix = self._too_small[-1] = f"pool too small: {len(self.pool)} token(s) ({words}), system needs "
                reason = prefix + str(needed)
            self._too_small[needed] = reason
        return reason


# One routine per *selection* (and kind) of a System row. A routine runs a run of consecutive systems that
# share it (e.g. systems 1-21 in one call), appending each one's result to ``out``; a member is
# (number, name, pool tokens needed, *the arguments :func:`_plan` derived from its row once*).


def _run_none(s: _Sentence, members, out: list) -> None:
    for number, name, _ in members:
        out.append(ConstraintSet(number, name))


def _run_position_blocks(s: _Sentence, blocks, out: list) -> None:
    """Blocks of three positional systems banning the first 1, 2, 3 tokens (as 32-34), with the results
    _run_position gives them."""
    tokens = s.tokens
    if len(tokens) < 3:
        for members in blocks:
            _run_position(s, members, out)
        return
    first = (tokens[0][0], tokens[1][0], tokens[2][0])
    if not holds_word(first[0]):  # (punctuation first: each system's own phrase, positional_phrase)
        for members in blocks:
            _run_position(s, members, out)
        return
    one, two = (first[:1],), (first[:2],)
    for (n1, m1, _, _), (n2, m2, _, _), (n3, m3, _, _) in blocks:
        out += (
            ConstraintSet(n1, m1, (), (), one),
            ConstraintSet(n2, m2, (), (), two),
            ConstraintSet(n3, m3, (), (), (first,)),
        )


def _run_position(s: _Sentence, members, out: list) -> None:
    tokens = s.tokens
    for number, name, _, n in members:
        if len(tokens) < n:
            out.append(NoConstraintSet(number, name, reference_too_short_reason(len(tokens), n)))
            continue
        phrase = positional_phrase([t[0] for t in tokens[:n]], n) or positional_phrase([t[0] for t in tokens], n)
        if phrase is None:
            out.append(NoConstraintSet(number, name, NO_WORD_REASON))
        else:
            out.append(ConstraintSet(number, name, (), (), (phrase,)))


def _run_ranked_negative(s: _Sentence, members, out: list) -> None:
    size, ranked, overlap, append = len(s.pool), s.ranked, s.overlap, out.append
    for number, name, needed, code, first, second, third in members:
        if size < needed:
            append(NoConstraintSet(number, name, s._too_small.get(needed) or s.too_small(needed)))
            continue
        found = ranked[code] or s.rank(code)
        if second is None:
            negative = found[first]
        else:
            negative = found[first] + found[second] if third is None else found[first] + found[second] + found[third]
            if overlap[code]:  # lex all: a variant shared by two words is banned once
                negative = tuple(dict.fromkeys(negative))
        append(ConstraintSet(number, name, (), negative, ()))


_BLOCK = (
    (0, None, None),
    (1, None, None),
    (2, None, None),
    (0, 1, None),
    (1, 2, None),
    (0, 2, None),
    (0, 1, 2),
)  # the ranks of a block of seven negative systems (as 1-7, 8-14, 15-21)
_NO_PHRASES_7 = ((),) * 7


def _run_negative_blocks(s: _Sentence, blocks, out: list) -> None:
    """Blocks of seven ranked negative systems (1st, 2nd, 3rd, (1st,2nd), (2nd,3rd), (1st,3rd),
    (1st,2nd,3rd), see _BLOCK), with the results _run_ranked_negative gives them, written out per pool
    size (most pools have fewer than the three tokens all seven need)."""
    size = len(s.pool)
    if size >= 3:
        ranked, overlap = s.ranked, s.overlap
        for code, numbers, names in blocks:
            a, b, c = ranked[code] or s.rank(code)
            if overlap[code]:  # lex all: a variant shared by two words is banned once
                negatives = (
                    a,
                    b,
                    c,
                    tuple(dict.fromkeys(a + b)),
                    tuple(dict.fromkeys(b + c)),
                    tuple(dict.fromkeys(a + c)),
                    tuple(dict.fromkeys(a + b + c)),
                )
            else:
                negatives = (a, b, c, a + b, b + c, a + c, a + b + c)
            out += map(ConstraintSet, numbers, names, _NO_PHRASES_7, negatives)
        return
    no, yes = NoConstraintSet, ConstraintSet
    need3 = s.too_small(3)
    if size == 2:
        for code, (n1, n2, n3, n4, n5, n6, n7), (m1, m2, m3, m4, m5, m6, m7) in blocks:
            a, b = s.ranked[code] or s.rank(code)
            ab = tuple(dict.fromkeys(a + b)) if s.overlap[code] else a + b
            out += (
                yes(n1, m1, (), a),
                yes(n2, m2, (), b),
                no(n3, m3, need3),
                yes(n4, m4, (), ab),
                no(n5, m5, need3),
                no(n6, m6, need3),
                no(n7, m7, need3),
            )
        return
    need2 = s.too_small(2)
    for code, (n1, n2, n3, n4, n5, n6, n7), (m1, m2, m3, m4, m5, m6, m7) in blocks:
        first = yes(n1, m1, (), (s.ranked[code] or s.rank(code))[0]) if size else no(n1, m1, s.too_small(1))
        out += (
            first,
            no(n2, m2, need2),
            no(n3, m3, need3),
            no(n4, m4, need2),
            no(n5, m5, need3),
            no(n6, m6, need3),
            no(n7, m7, need3),
        )


def _run_ranked_positive(s: _Sentence, members, out: list) -> None:
    size = len(s.pool)
    for number, name, needed, highest, index, verb, slot in members:
        if size < needed:
            out.append(NoConstraintSet(number, name, s._too_small.get(needed) or s.too_small(needed)))
            continue
        word, _, _, pos = (s.pool if highest else s.ascending)[index]
        form = word
        if verb and pos == "VERB":
            if slot is None:
                form = random_verb_inflection(word, s.draws(number))
            else:  # SeededDraws.choice on the system's own word of the draw table
                options = verb_inflections(word)
                if options:
                    form = options[(s._table or s.table)[slot] % len(options)]
        out.append(ConstraintSet(number, name, ((form,),), (), ()))


def _run_random(s: _Sentence, members, out: list) -> None:
    pool = s.pool
    size = len(pool)
    for number, name, needed, start, k, lex_all, cache, miss in members:
        if size < needed:
            out.append(NoConstraintSet(number, name, s._too_small.get(needed) or s.too_small(needed)))
            continue
        if start is None:
            chosen = s.draws(number).sample(pool, k)
        elif k == 1:  # SeededDraws.sample(pool, 1) on the system's own word of the draw table
            word = pool[(s._table or s.table)[start] % size][0]
            out.append(ConstraintSet(number, name, (), cache.get(word) or miss(word), ()))
            continue
        else:  # SeededDraws.sample (partial Fisher-Yates) on the system's own words of the draw table
            table, chosen = s._table or s.table, pool[:]
            for j in range(k):
                r = j + table[start + j] % (size - j)
                chosen[j], chosen[r] = chosen[r], chosen[j]
            del chosen[k:]
        negative: Phrases = ()
        for token in chosen:
            negative += cache.get(token[0]) or miss(token[0])
        if lex_all and k > 1 and not _distinct_all([token[0] for token in chosen]):
            negative = tuple(dict.fromkeys(negative))
        out.append(ConstraintSet(number, name, (), negative, ()))


def _run_random_blocks(s: _Sentence, blocks, out: list) -> None:
    """Blocks of three random negative systems (1, 2, 3 random pool tokens, same Lex, each drawing from
    its own words of the draw table), with the results _run_random gives them. The phrases of the first
    three pool tokens are those _Sentence.rank already looks up (most pools have at most three)."""
    pool = s.pool
    size = len(pool)
    no, yes = NoConstraintSet, ConstraintSet
    if size < 2:
        for code, (n1, n2, n3), (m1, m2, m3), _start, _, _ in blocks:
            if size:  # a draw from one token always gives it
                first = yes(n1, m1, (), (s.ranked[code] or s.rank(code))[0])
            else:
                first = no(n1, m1, s.too_small(1))
            out += (first, no(n2, m2, s.too_small(2)), no(n3, m3, s.too_small(3)))
        return
    table = s._table or s.table
    for code, (n1, n2, n3), (m1, m2, m3), start1, start2, start3 in blocks:
        phrases = s.ranked[code] or s.rank(code)
        if size > 3:  # the others' phrases, as _run_random looks them up
            cache, miss = (_NEGATIVES_ALL, _negatives_all) if code & 1 else (_NEGATIVES, _negatives)
            phrases = [*phrases, *[cache.get(t[0]) or miss(t[0]) for t in pool[3:]]]
        # SeededDraws.sample (partial Fisher-Yates over the pool) on each system's own table words
        one = phrases[table[start1] % size]
        pair = list(range(size))
        r = table[start2] % size
        pair[0], pair[r] = pair[r], pair[0]
        r = 1 + table[start2 + 1] % (size - 1)
        pair[1], pair[r] = pair[r], pair[1]
        two = phrases[pair[0]] + phrases[pair[1]]
        if size == 2:
            three = None
        else:
            order = list(range(size))
            for j in range(3):
                r = j + table[start3 + j] % (size - j)
                order[j], order[r] = order[r], order[j]
            three = phrases[order[0]] + phrases[order[1]] + phrases[order[2]]
        if code & 1:  # lex all: a variant shared by two of the tokens is banned once
            if size > 3:
                if not _distinct_all([pool[pair[0]][0], pool[pair[1]][0]]):
                    two = tuple(dict.fromkeys(two))
                if not _distinct_all([pool[i][0] for i in order[:3]]):
                    three = tuple(dict.fromkeys(three))
            elif s.overlap[code]:  # the (at most three) tokens' phrases are not all distinct
                two = tuple(dict.fromkeys(two))
                three = three and tuple(dict.fromkeys(three))
        out += (
            yes(n1, m1, (), one),
            yes(n2, m2, (), two),
            yes(n3, m3, (), three) if three is not None else no(n3, m3, s.too_small(3)),
        )


def _run_ppdb(s: _Sentence, members, out: list) -> None:
    index = s.ppdb
    entries = getattr(index, "entries", None)
    size = len(s.pool)
    matches = None
    for number, name, needed, relation, slot, relations in members:
        if size < needed:
            out.append(NoConstraintSet(number, name, s._too_small.get(needed) or s.too_small(needed)))
        elif index is None:
            out.append(NoConstraintSet(number, name, NO_PPDB_FILE))
        elif entries is None:  # any object with lookup(phrase, coarse POS, relation)
            out.append(_select_ppdb_by_lookup(number, name, s, relation))
        else:
            if matches is None:
                matches = _ppdb_matches(s.pool, relations, entries)
            match = matches.get(relation)
            if match is None:
                out.append(NoConstraintSet(number, name, _NO_PPDB_MATCH[relation]))
                continue
            word, options = match
            if slot is None:
                paraphrase = s.draws(number).choice(options)
            else:  # (one option: no draw needed, as SeededDraws.choice would take it whatever the word)
                paraphrase = options[s.table_word(slot) % len(options)] if len(options) > 1 else options[0]
            out.append(
                ConstraintSet(number, name, (tuple(paraphrase.split()),), _NEGATIVES.get(word) or _negatives(word), ())
            )


_NO_PPDB_MATCH = {relation: no_ppdb_match_reason(relation) for relation in ALL_RELATIONS}


def _ppdb_matches(pool: list[Member], relations: frozenset[str], entries) -> dict[str, tuple[str, tuple[str, ...]]]:
    """For each relation, the first pool token (highest IDF first) with paraphrases of that relation
    whose coarse POS matches its own, and those paraphrases; one pass for all the relations."""
    found: dict[str, tuple[str, tuple[str, ...]]] = {}
    for word, _, _, pos in pool:
        paraphrases = entries(word)  # all of the word's paraphrases by (coarse POS, relation)
        if paraphrases:
            coarse = SPACY_COARSE.get(pos, "other")
            for relation in relations:
                if relation not in found:
                    options = paraphrases.get((coarse, relation))
                    if options:
                        found[relation] = (word, options)
            if len(found) == len(relations):
                break
    return found


def _select_ppdb_by_lookup(number: int, name: str, s: _Sentence, relation: str) -> Selected:
    prefetch = getattr(s.ppdb, "prefetch", None)
    if prefetch is not None:
        prefetch([t[0] for t in s.pool])
    for word, _, _, pos in s.pool:
        options = s.ppdb.lookup(word, coarse_pos_of_spacy(pos), relation)
        if options:
            paraphrase = s.draws(number).choice(options)
            return ConstraintSet(number, name, positive=(tuple(paraphrase.split()),), negative=negative_phrases(word))
    return NoConstraintSet(number, name, _NO_PPDB_MATCH[relation])


def _slot(system: System, draws: int) -> int | None:
    """Start of the system's draw-table words if they hold ``draws`` draws (else None: SeededDraws)."""
    start, size = SLOTS.get(system.number, (0, 0))
    return start if size >= draws else None


def _plan(system: System) -> tuple:
    """(routine, its arguments) for a system row."""
    if system.selection in ("highest", "lowest"):
        highest = system.selection == "highest"
        if system.kind == "positive":
            verb = system.lex == "verb"
            return _run_ranked_positive, (highest, system.ranks[0] - 1, verb, _slot(system, 1) if verb else None)
        code = (0 if highest else 2) + (system.lex == "all")  # see _Sentence.rank
        ranks = [r - 1 for r in system.ranks] + [None, None]  # (first, second or None, third or None)
        return _run_ranked_negative, (code, *ranks[:3])
    if system.selection == "random":
        lex_all = system.lex == "all"  # (the cache dicts are emptied in place, never replaced)
        return _run_random, (
            _slot(system, system.count),
            system.count,
            lex_all,
            *((_NEGATIVES_ALL, _negatives_all) if lex_all else (_NEGATIVES, _negatives)),
        )
    if system.selection == "ppdb":
        return _run_ppdb, (system.ppdb_relation, _slot(system, 1))
    if system.selection == "position":
        return _run_position, (system.count,)
    return _run_none, ()


def _steps(systems: Sequence[System]) -> tuple:
    """The systems as runs of consecutive rows that share a routine: ((routine, members), ...)."""
    steps: list[tuple] = []
    for system in systems:
        routine, args = _plan(system)
        member = (system.number, system.name, system.pool_needed, *args)
        if steps and steps[-1][0] is routine:
            steps[-1][1].append(member)
        else:
            steps.append((routine, [member]))
    return tuple(_with_blocks(steps))


def _random_blocks(members: list[tuple]) -> Iterable[tuple]:
    """Random systems as steps: runs of three that draw 1, 2, 3 tokens from their own table words with
    the same Lex (as 22-24, 25-27) by _run_random_blocks, the others by _run_random."""
    return _in_blocks(
        members,
        3,
        lambda run: (
            [m[4] for m in run] == [1, 2, 3]
            and all(m[3] is not None for m in run)
            and all(m[5] == run[0][5] for m in run)
        ),
        lambda run: (int(run[0][5]), tuple(m[0] for m in run), tuple(m[1] for m in run), *(m[3] for m in run)),
        _run_random_blocks,
        _run_random,
    )


def _in_blocks(members, size: int, is_block, block_of, block_routine, single_routine) -> Iterable[tuple]:
    """Consecutive members as steps, in order: each run of ``size`` that ``is_block`` becomes one
    ``block_of(run)`` for ``block_routine``; the others go, as runs, to ``single_routine``."""
    blocks: list[tuple] = []
    rest: list[tuple] = []
    i = 0
    while i < len(members):
        run = members[i : i + size]
        if len(run) == size and is_block(run):
            if rest:
                yield single_routine, tuple(rest)
                rest = []
            blocks.append(block_of(run))
            i += size
        else:
            if blocks:
                yield block_routine, tuple(blocks)
                blocks = []
            rest.append(members[i])
            i += 1
    if blocks:
        yield block_routine, tuple(blocks)
    if rest:
        yield single_routine, tuple(rest)


def _with_blocks(steps: list[tuple]) -> Iterable[tuple]:
    """The steps, with every run of seven ranked negative systems that form a block (see _BLOCK, same
    kind of ranking) run by _run_negative_blocks, of three random ones by _run_random_blocks, and of
    the three positional ones banning 1, 2, 3 tokens by _run_position_blocks."""
    for routine, members in steps:
        if routine is _run_random:
            yield from _random_blocks(members)
        elif routine is _run_ranked_negative:
            yield from _in_blocks(
                members,
                7,
                lambda run: all(m[3] == run[0][3] and tuple(m[4:]) == ranks for m, ranks in zip(run, _BLOCK)),
                lambda run: (run[0][3], tuple(m[0] for m in run), tuple(m[1] for m in run)),
                _run_negative_blocks,
                _run_ranked_negative,
            )
        elif routine is _run_position:
            yield from _in_blocks(
                members, 3, lambda run: [m[3] for m in run] == [1, 2, 3], tuple, _run_position_blocks, _run_position
            )
        elif routine is _run_ppdb:  # each member also gets the relations the run looks for
            relations = frozenset(m[3] for m in members)
            yield routine, tuple((*m, relations) for m in members)
        else:
            yield routine, tuple(members)


# -------------------------------------------------------------------------------------- entry point


class SystemList(tuple):
    """Systems resolved once (see resolve_systems), each with its selection routine; passing one to
    select_for_all_systems skips the per-call lookup."""

    steps: tuple  # see _steps

    def __new__(cls, rows: Iterable[System]):
        self = super().__new__(cls, rows)
        self.steps = _steps(self)
        return self


def resolve_systems(systems: Iterable[int | str | System] | None) -> SystemList:
    """System rows for numbers (or rows); None -> all 37. Raises UnknownSystem for a bad number."""
    if systems is None:
        return _ALL
    if type(systems) is SystemList:
        return systems
    return SystemList(s if isinstance(s, System) else get_system(s) for s in systems)


_ALL = SystemList(SYSTEMS)


def select_for_all_systems(
    sentence: str | TaggedSentence | Sequence[tuple[str, str]],
    idf: Mapping[str, float],
    *,
    seed: int = 0,
    ppdb=None,
    systems: Iterable[int | System] | None = None,
    min_idf: float | None = None,
    max_idf: float | None = None,
    nlp=None,
) -> list[Selected]:
    """The constraint set (or "no constraint set") of each system, in system order.

    ``sentence``: raw text (tagged here with spaCy), a :class:`TaggedSentence`, or (text, POS) pairs.
    ``ppdb``: a :class:`generation.constraints.ppdb.PpdbIndex` or the path of a PPDB 2.0 file; without it the PPDB
    systems report NO_PPDB_FILE. ``systems``: numbers or System rows (default: all 37).
    """
    tagged = sentence if type(sentence) is TaggedSentence else as_tagged(sentence, nlp=nlp)
    rows = systems if type(systems) is SystemList else resolve_systems(systems)
    lo, hi = (
        (min_idf, max_idf) if min_idf is not None and max_idf is not None else settings_idf_window(min_idf, max_idf)
    )
    odd_texts: list[str] = []  # gets the reference's odd-case token texts (usually none)
    s = _Sentence(
        tagged,
        _pool_in_order(tagged.tokens, idf, lo, hi, odd_texts),
        int(seed),
        ppdb if ppdb is None else resolve_ppdb(ppdb),
    )
    out: list[Selected] = []
    for routine, members in rows.steps:
        routine(s, members, out)
    if odd_texts:
        odd = odd_case_forms(odd_texts)
        # only results that ban one of those words alone change (isdisjoint: a C-level scan)
        banned = {(word,) for word in odd}
        out = [
            with_surface_forms(c, odd) if c.is_constraint_set and not banned.isdisjoint(c.negative) else c for c in out
        ]
    return out
