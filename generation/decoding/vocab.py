"""Per-vocabulary surface knowledge: what each subword id spells and where words begin and end.

Words are what generation/words.py says (``\\w+`` runs) on the detokenised output. Every id is described by
``lead`` (the ``\\w`` run it appends to the current word), ``has_break`` (it contains a non-word character,
so the current word ends inside it), ``inner`` (complete words strictly inside it) and ``tail`` (the word
it leaves open). Special tokens other than EOS are removed by detokenisation: they spell nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from typing import Literal, NamedTuple

import numpy as np
import torch
from tokenizers import decoders as tk_decoders, models as tk_models

from ..words import WORD_RE, holds_word, words_of

_SPLIT_RE = re.compile(f"({WORD_RE.pattern})")  # the word rule, keeping the words and what lies between


class PhraseError(ValueError):
    """A constraint phrase the vocabulary cannot spell (or an empty one)."""


def _byte_decoder() -> dict[str, int]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


# words whose pieces a vocabulary remembers (``VocabInfo.pieces_of``): about 1.4 kB a word on the demo model's
# vocabulary (glued spellings of STS-B words), so at most about 140 MB
PIECES_REMEMBERED = 100_000


class WordPieces(NamedTuple):
    """How a vocabulary spells one word, as the ban tables read it (``banned.build_negative_tables``).

    ``moves`` [M, 4]: (i, k, token, closes) per ``VocabInfo.moves_of`` move, in its order; ``closes``: the token
    breaks and ``k`` is the word's length (it completes the word). ``tails`` [T, 2]: (k, token), the token leaves
    ``word[:k]`` open. ``inner`` [I]: the ids holding the word strictly inside them."""

    moves: np.ndarray
    tails: np.ndarray
    inner: np.ndarray


@dataclass
class VocabInfo:
    size: int
    eos_id: int
    surfaces: list[str]
    lead: list[str]
    has_break: torch.Tensor  # [V] bool
    boundary: torch.Tensor  # [V] bool: has a break and an empty lead (starts a new word)
    inner: list[tuple[str, ...]]
    tail: list[str]
    by_lead_nobreak: dict[str, list[int]] = field(default_factory=dict)
    by_lead_break: dict[str, list[int]] = field(default_factory=dict)
    by_tail: dict[str, list[int]] = field(default_factory=dict)
    inner_ids: list[int] = field(default_factory=list)  # ids with at least one inner word
    eos_ids: tuple[int, ...] = ()  # every id that ends an output (eos_id first; a chat model's end-of-turn too)

    @cached_property
    def tail_open(self) -> np.ndarray:
        """[V] bool: the token leaves a word open (computed once: the ban tables of every batch need it)."""
        return np.array([bool(t) for t in self.tail], dtype=bool)

    @cached_property
    def _pieces(self) -> dict[str, list[tuple[int, bool]]]:
        """(token, whether it breaks) of every lead, by the letters it appends (both lists of ``by_lead_*``)."""
        out: dict[str, list[tuple[int, bool]]] = {}
        for lead, ids in self.by_lead_nobreak.items():
            out.setdefault(lead, []).extend((t, False) for t in ids)
        for lead, ids in self.by_lead_break.items():
            out.setdefault(lead, []).extend((t, True) for t in ids)
        return out

    @cached_property
    def _by_inner(self) -> dict[str, list[int]]:
        """The ids holding each word strictly inside them (the inverse of ``inner``)."""
        out: dict[str, list[int]] = {}
        for t in self.inner_ids:
            for w in dict.fromkeys(self.inner[t]):
                out.setdefault(w, []).append(t)
        return out

    @cached_property
    def _pieces_by_word(self) -> dict[str, WordPieces]:
        return {}

    @cached_property
    def run_on_blocks(self) -> dict:
        """A banned word's run-on states on this vocabulary, by word (``banned.run_on_block``, which keeps this
        bounded): built once, shared by every batch that bans the word."""
        return {}

    def moves_of(self, word: str) -> tuple[tuple[int, int, int, bool], ...]:
        """(i, k, token, breaks): the token appends ``word[i:k]`` to the open word ``word[:i]`` (and ends the word
        when it breaks), for every piece of ``word``."""
        pieces = self._pieces
        return tuple(
            (i, k, t, breaks)
            for i in range(len(word))
            for k in range(i + 1, len(word) + 1)
            for t, breaks in pieces.get(word[i:k], ())
        )

    def pieces_of(self, word: str) -> WordPieces:
        """``word``'s moves (``moves_of``), the ids whose tail is a prefix of it and those holding it inside, as
        arrays. Remembered per word (at most ``PIECES_REMEMBERED``): a job bans the same words (and their glued
        spellings, 34 a word) again and again, and looking their pieces up again for every sentence was most of
        the cost of building a batch's ban tables."""
        got = self._pieces_by_word.get(word)
        if got is None:
            moves = self.moves_of(word)
            got = WordPieces(
                moves=np.fromiter(chain.from_iterable(moves), dtype=np.int64, count=4 * len(moves)).reshape(-1, 4),
                tails=np.array(
                    [(k, t) for k in range(1, len(word) + 1) for t in self.by_tail.get(word[:k], ())], dtype=np.int64
                ).reshape(-1, 2),
                inner=np.array(self._by_inner.get(word, ()), dtype=np.int64),
            )
            got.moves[:, 3] &= got.moves[:, 1] == len(word)  # a break that completes the word
            for array in got:  # shared by every batch that bans the word
                array.flags.writeable = False
            if len(self._pieces_by_word) >= PIECES_REMEMBERED:  # a bound on a long job's memory: start afresh
                self._pieces_by_word.clear()
            self._pieces_by_word[word] = got
        return got

    @cached_property
    def lead_empty(self) -> torch.Tensor:
        """[V] bool: the token appends no letters to the open word."""
        return torch.tensor([not x for x in self.lead], dtype=torch.bool)

    @cached_property
    def has_inner(self) -> torch.Tensor:
        """[V] bool: the token holds a complete word strictly inside it."""
        return torch.tensor([bool(x) for x in self.inner], dtype=torch.bool)


@dataclass(frozen=True)
class WordScheme:
    """How a tokenizer's tokens spell words, as far as where a word starts goes.

    ``marks``: a mark inside a token starts a word (SentencePiece's "▁"; byte-level BPE's "Ġ", whose pieces
    spell bytes: ``byte_level``). ``continuation``: every token starts a word except those that begin with
    ``prefix`` (WordPiece's "##"), which continue the word before. ``whole_words``: every token is a word of
    its own (a WordLevel vocabulary split on whitespace)."""

    kind: Literal["marks", "continuation", "whole_words"]
    prefix: str = ""
    byte_level: bool = False


def word_scheme(tokenizer, pieces: list[str | None]) -> WordScheme:
    """The word scheme of ``tokenizer`` (``pieces``: its tokens by id), read from the tokenizer itself, never
    from a model's name. Why from its detokeniser: outputs are checked on ``tokenizer.decode``'s text, so the
    decoder's idea of where words start must be the one decode applies. A Hugging Face fast tokenizer says it
    in its backend: a WordPiece decoder glues a token that begins with its prefix to the one before and puts
    a space before any other; with no decoder at all the backend joins tokens with spaces, so each token is
    a whole word (a WordLevel or WordPiece model; a vocabulary without marks). Any other tokenizer marks word
    starts inside its tokens, "Ġ" (byte-level) or "▁", whichever the vocabulary holds more of; one without
    a backend, with no such marks and with "##" pieces, is a WordPiece one (a Python BertTokenizer)."""
    real = [p for p in pieces if p]
    n_byte, n_meta = sum("Ġ" in p for p in real), sum("▁" in p for p in real)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        if isinstance(backend.decoder, tk_decoders.WordPiece):
            return WordScheme("continuation", prefix=backend.decoder.prefix)
        if backend.decoder is None and (
            isinstance(backend.model, (tk_models.WordLevel, tk_models.WordPiece)) or not (n_byte or n_meta)
        ):
            return WordScheme("whole_words")
    elif not (n_byte or n_meta) and any(p.startswith("##") and len(p) > 2 for p in real):
        return WordScheme("continuation", prefix="##")
    return WordScheme("marks", byte_level=n_byte > n_meta)


def _continuation_surface(tokenizer, piece: str, prefix: str) -> str:
    """What ``piece`` appends to an output under a WordPiece detokeniser: asked of the backend's decoder
    after a word (it then applies its own clean-up too: "." and "n't" join the word before), else the rule."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and backend.decoder is not None:
        out = backend.decoder.decode(["a", piece])
        if out.startswith("a"):
            return out[1:]
    return piece[len(prefix) :] if piece.startswith(prefix) else " " + piece


def surface_strings(tokenizer, size: int) -> tuple[list[str], set[int]]:
    """What each id spells in a detokenised output ("" for special tokens and ids past the tokenizer), with
    a leading space where the token starts a word (``word_scheme``)."""
    ids = list(range(size))
    n_tok = len(tokenizer)
    pieces = [tokenizer.convert_ids_to_tokens(i) if i < n_tok else None for i in ids]
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    scheme = word_scheme(tokenizer, pieces)
    byte_level = scheme.byte_level
    dec = _byte_decoder() if byte_level else None
    out = []
    for i, p in enumerate(pieces):
        if p is None or i in special:
            out.append("")
            continue
        if scheme.kind == "whole_words":
            s = " " + p
        elif scheme.kind == "continuation":
            s = _continuation_surface(tokenizer, p, scheme.prefix)
        elif byte_level:
            try:
                s = bytes(dec[c] for c in p).decode("utf-8", errors="replace")
            except KeyError:
                s = p
        else:
            s = p.replace("▁", " ")
            if re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", p):  # SentencePiece byte fallback
                s = bytes([int(p[3:5], 16)]).decode("latin-1")
        out.append(s)
    return out, special


def build_vocab_info(tokenizer, size: int, eos_id: int, more_eos: tuple[int, ...] = ()) -> VocabInfo:
    """``more_eos``: further ids that end an output (a decoder-only model's end-of-turn tokens); like EOS,
    each is a word boundary."""
    surfaces, _ = surface_strings(tokenizer, size)
    lead, inner, tail, brk = [], [], [], []
    eos_ids = (eos_id, *(i for i in more_eos if i != eos_id))
    info = VocabInfo(
        size=size, eos_id=eos_id, surfaces=surfaces, lead=lead, has_break=None, boundary=None, inner=inner, tail=tail
    )
    info.eos_ids = eos_ids
    for i, s in enumerate(surfaces):
        parts = _SPLIT_RE.split(s)  # alternating non-word / word, starting with non-word (maybe "")
        if len(parts) == 1:
            lead.append("")
            inner.append(())
            tail.append("")
            brk.append(bool(s))
        else:
            if parts[0] == "":
                ld, rest = parts[1], parts[2:]
            else:
                ld, rest = "", parts
            if rest == [""] or not rest:
                lead.append(ld)
                inner.append(())
                tail.append("")
                brk.append(False)
            else:
                # rest = nonword, word, nonword, word, ..., last (word or "" after nonword)
                words = [w for k, w in enumerate(rest) if k % 2 == 1]
                last_nonword = rest[-1]
                if last_nonword == "":
                    tl, inn = (words[-1], words[:-1]) if words else ("", [])
                else:
                    tl, inn = "", words
                lead.append(ld)
                inner.append(tuple(inn))
                tail.append(tl)
                brk.append(True)
        if i in eos_ids:
            brk[-1] = True
        if brk[-1]:
            info.by_lead_break.setdefault(lead[-1], []).append(i)
            if tail[-1]:
                info.by_tail.setdefault(tail[-1], []).append(i)
        elif lead[-1]:
            info.by_lead_nobreak.setdefault(lead[-1], []).append(i)
        if inner[-1]:
            info.inner_ids.append(i)
    info.has_break = torch.tensor(brk, dtype=torch.bool)
    info.boundary = info.has_break & info.lead_empty
    return info


def spell_words(info: VocabInfo, ids: list[int]) -> tuple[list[str], bool, bool]:
    """The words a token sequence spells (the last one possibly open), whether it starts with a boundary."""
    text = "".join(info.surfaces[i] for i in ids)
    starts = bool(ids) and bool(info.boundary[ids[0]])
    return words_of(text), starts, bool(text) and not holds_word(text[-1])


def encode_phrase(tokenizer, info: VocabInfo, words: list[str], written: str | None = None) -> list[int]:
    """Subword ids of a phrase as a sequence of whole words preceded by a word boundary (the leading-space
    variant: "▁word" / "Ġword"). ``written``: the phrase as the user wrote it, punctuation included
    ("guitar."); it is decoded as written when the vocabulary spells it as the same words (a user who asks
    for "guitar." gets "guitar.", and a word-level vocabulary that holds "flute." but no "flute" can meet
    it), else as its words. Raises PhraseError when the vocabulary cannot spell it either way."""
    if written is not None and written.strip() != " ".join(words):
        try:
            return _encode_words(tokenizer, info, words, " " + written.strip())
        except PhraseError:
            pass
    return _encode_words(tokenizer, info, words, " " + " ".join(words))


def _encode_words(tokenizer, info: VocabInfo, words: list[str], text: str) -> list[int]:
    try:
        ids = tokenizer(text_target=text, add_special_tokens=False)["input_ids"]
    except (TypeError, ValueError):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    ids = [i for i in ids if i < info.size and info.surfaces[i] != ""] if ids else []
    spelled, starts, _ = spell_words(info, ids)
    if not ids or spelled != list(words) or not starts:
        raise PhraseError(
            f"the model's vocabulary cannot spell {' '.join(words)!r} as whole words "
            f"(got {[info.surfaces[i] for i in ids]})"
        )
    return ids
