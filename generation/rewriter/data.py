"""Training data for the rewriter: ``sentence<TAB>paraphrase`` files, and synthetic demo pairs (public
English sentences paired with a PPDB-noised copy)."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import random
import re
from collections.abc import Iterator
from pathlib import Path

from infra.textfiles import NotUtf8Error, PairsFileError, atomic_write, open_text, read_lines, tsv_rows

# --------------------------------------------------------------------------------------------------
# Reading pairs
# --------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _text_writer(raw, *, gzipped: bool):
    """UTF-8 text onto an open binary file, gzipped if asked; the binary file stays open (its owner syncs
    and renames it)."""
    packed = gzip.GzipFile(fileobj=raw, mode="wb") if gzipped else None
    text = io.TextIOWrapper(packed or raw, encoding="utf-8")
    try:
        yield text
    finally:
        text.flush()
        text.detach()
        if packed is not None:
            packed.close()


def iter_pairs(path) -> Iterator[tuple[int, str, str]]:
    """Yield ``(line_number, sentence, paraphrase)`` from a ``sentence<TAB>paraphrase`` file.

    Blank lines and lines starting with ``#`` are skipped; columns after the second (scores, system
    names) are ignored. A line with fewer than two columns, an empty side or bytes that are not UTF-8
    raises :class:`PairsFileError` naming the file and line number."""
    path = Path(path)
    if not path.is_file():
        raise PairsFileError(f"pairs file not found: {path}")
    try:
        for lineno, line in read_lines(path):  # gzip by magic bytes, BOM dropped, strict UTF-8
            line = line.rstrip("\r\n")
            if not line.strip() or line.startswith("#"):
                continue
            cols = line.split("\t")
            if len(cols) < 2:
                raise PairsFileError(
                    f"{path}:{lineno}: expected 'sentence<TAB>paraphrase', found no tab: {line[:80]!r}"
                )
            src, tgt = cols[0].strip(), cols[1].strip()
            if not src or not tgt:
                raise PairsFileError(f"{path}:{lineno}: empty sentence or paraphrase: {line[:80]!r}")
            yield lineno, src, tgt
    except NotUtf8Error as exc:
        raise PairsFileError(f"{path}:{exc.line}: {exc.reason.replace('not UTF-8', 'not UTF-8 text', 1)}") from None
    except (OSError, EOFError) as exc:
        raise PairsFileError(f"{path}: cannot read ({exc})") from exc


def read_pairs(path) -> list[tuple[str, str]]:
    pairs = [(s, t) for _, s, t in iter_pairs(path)]
    if not pairs:
        raise PairsFileError(f"{path}: no pairs")
    return pairs


def file_sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --------------------------------------------------------------------------------------------------
# Synthetic demo pairs
# --------------------------------------------------------------------------------------------------


def read_public_sentences(data_dir) -> list[str]:
    """Unique English sentences from STS-B train/dev and SICK under ``data_dir``, in first-seen order (read as
    every user's file is, :mod:`infra.textfiles`: a byte that is not UTF-8 is a ``NotUtf8Error`` naming its
    line)."""
    data_dir = Path(data_dir)
    seen: dict[str, None] = {}

    def add(s: str) -> None:
        s = " ".join(s.split())
        if 3 <= len(s) <= 300 and s not in seen:
            seen[s] = None

    for name in ("sts-train.csv", "sts-dev.csv"):
        p = data_dir / "stsb" / name
        if not p.is_file():
            continue
        for _, cols in tsv_rows(p, newline=None):
            if len(cols) >= 7:
                add(cols[5])
                add(cols[6])
    p = data_dir / "sick" / "SICK.txt"
    if p.is_file():
        rows = tsv_rows(p, newline=None)
        header = next(rows, (0, []))[1]
        ia, ib = header.index("sentence_A"), header.index("sentence_B")
        for _, cols in rows:
            if len(cols) > max(ia, ib):
                add(cols[ia])
                add(cols[ib])
    return list(seen)


_WORD = re.compile(r"^[A-Za-z]+$")
_STOP = frozenset(
    """a an the is are was were be been being am of to in on at by for with from and or
but not no it its this that these those there here he she they we you i his her their our your my me
him them us as do does did has have had""".split()
)


def load_ppdb_synonyms(path, max_per_word: int = 20, known: set[str] | None = None) -> dict[str, list[str]]:
    """``word<TAB>paraphrase`` lines -> {lowercase word: [alphabetic single-word synonyms]}; with
    ``known``, only synonyms in that word set (PPDB XXXL is noisy: foreign words, misspellings)."""
    syn: dict[str, list[str]] = {}
    with open_text(path, errors="replace") as fh:  # any bytes, as generation.constraints.ppdb reads PPDB
        for line in fh:
            cols = line.rstrip("\r\n").split("\t")
            if len(cols) < 2:
                continue
            a, b = cols[0].strip().lower(), cols[1].strip().lower()
            if a == b or not _WORD.match(a) or not _WORD.match(b) or a in _STOP or b in _STOP:
                continue
            if known is not None and b not in known:
                continue
            lst = syn.setdefault(a, [])
            if len(lst) < max_per_word and b not in lst:
                lst.append(b)
    return syn


def noise_sentence(
    sentence: str,
    rng: random.Random,
    synonyms: dict[str, list[str]],
    *,
    p_sub: float = 0.3,
    p_drop: float = 0.04,
    p_swap: float = 0.01,
) -> str:
    """A corrupted copy: PPDB synonym substitution (keeping capitalisation and trailing punctuation),
    occasional word drops and swaps of neighbouring words."""
    tokens = sentence.split()
    out: list[str] = []
    for i, tok in enumerate(tokens):
        m = re.match(r"^([A-Za-z]+)(\W*)$", tok)
        if m:
            word, tail = m.group(1), m.group(2)
            cands = synonyms.get(word.lower())
            if cands and rng.random() < p_sub:
                new = rng.choice(cands)
                if word[0].isupper():
                    new = new[0].upper() + new[1:]
                tok = new + tail
            elif len(tokens) > 4 and i > 0 and not tail and word.lower() not in _STOP and rng.random() < p_drop:
                continue
        out.append(tok)
    if len(out) > 3 and rng.random() < p_swap * len(out):  # at most one swap of neighbours
        i = rng.randrange(1, len(out) - 2)
        if _WORD.match(out[i]) and _WORD.match(out[i + 1]):
            out[i], out[i + 1] = out[i + 1], out[i]
    return " ".join(out)


def build_synthetic_pairs(
    data_dir,
    out_path,
    *,
    seed: int = 13,
    copies: int = 2,
    p_sub: float = 0.3,
    p_drop: float = 0.04,
    p_swap: float = 0.01,
    ppdb_path=None,
) -> dict:
    """Write ``sentence<TAB>noised`` and ``noised<TAB>sentence`` pairs (``copies`` noised copies per
    sentence, identical copies dropped) for the public sentences under ``data_dir``; return a summary."""
    data_dir = Path(data_dir)
    ppdb_path = Path(ppdb_path or data_dir / "ppdb" / "ppdb-1.0-xxxl-lexical-synonym-pairs.tsv")
    sentences = read_public_sentences(data_dir)
    if not sentences:
        raise FileNotFoundError(f"no STS-B or SICK sentences under {data_dir}")
    if not ppdb_path.is_file():
        raise FileNotFoundError(f"PPDB synonym file not found: {ppdb_path}")
    counts: dict[str, int] = {}
    for sent in sentences:
        for w in re.findall(r"[A-Za-z]+", sent):
            counts[w.lower()] = counts.get(w.lower(), 0) + 1
    synonyms = load_ppdb_synonyms(ppdb_path, known={w for w, c in counts.items() if c >= 3})
    rng = random.Random(seed)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with atomic_write(out_path) as raw, _text_writer(raw, gzipped=str(out_path).endswith(".gz")) as fh:
        for s in sentences:
            made: set[str] = set()
            for _ in range(copies):
                noised = noise_sentence(s, rng, synonyms, p_sub=p_sub, p_drop=p_drop, p_swap=p_swap)
                if noised in made:
                    continue
                made.add(noised)
                # identical copies are kept once: the model must also learn to copy
                fh.write(f"{s}\t{noised}\n")
                n += 1
                if noised != s:
                    fh.write(f"{noised}\t{s}\n")
                    n += 1
    return {
        "sentences": len(sentences),
        "pairs": n,
        "out": str(out_path),
        "seed": seed,
        "copies": copies,
        "p_sub": p_sub,
        "p_drop": p_drop,
        "p_swap": p_swap,
        "ppdb_words": len(synonyms),
    }
