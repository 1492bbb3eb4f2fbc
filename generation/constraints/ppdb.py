"""PPDB 2.0 lexical paraphrases (ParaBank §3.2 "PPDB Constraints", systems 35-37).

A PPDB 2.0 file (``ppdb-2.0-*-lexical``, gzip or plain, several GB) has one rule a line::

    [RB] ||| often ||| frequently ||| PPDB2.0Score=3.4 ... ||| 0-0 ||| Equivalence

(LHS ||| phrase ||| paraphrase ||| features ||| alignment ||| entailment relation). It is streamed once
into a SQLite index ``VAR_DIR/ppdb-index/<sha256 of format+path+mtime+size>.sqlite`` holding, for the
three relations the systems use, one row per phrase: its distinct paraphrases grouped by (coarse POS of
the LHS, relation) and sorted, packed into one string (a lookup is one primary-key read, grouped and
sorted once at build time instead of on every first sight of a phrase), and a Bloom filter of those
phrases (a word PPDB has no rule for, most rare words, is answered without a query). Later opens of the
same unchanged file reuse the index. Malformed lines are skipped, counted, and reported
with their line numbers (logged, and kept in the index's ``meta`` table); a file with no valid rule at
all is refused (:class:`PpdbError`) by :func:`open_ppdb`, every time it is opened. A rule whose phrase or
paraphrase holds no word (``euros ||| €``, ``often ||| ,``: PPDB has such rules) is left out of the index,
counted (``no_word``): the decoder counts words, so it is no constraint it can require or ban (a required
``€`` was an empty phrase that failed the whole generation job).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import sqlite3
import threading
from pathlib import Path

from django.conf import settings

from infra.textfiles import atomic_path, open_text

from ..words import holds_word
from .bloom import BloomFilter
from .systems import PPDB_RELATIONS

logger = logging.getLogger(__name__)

ALL_RELATIONS = frozenset(
    {"Equivalence", "ForwardEntailment", "ReverseEntailment", "Exclusion", "OtherRelated", "Independent"}
)
MAX_REPORTED = 100  # malformed lines kept with their numbers in the index (all are counted)
_BATCH = 50_000
# part of the index file's name: a new layout (v3: no rule without a word) never reads an old file
INDEX_FORMAT = "entries-v3"
_GROUP, _FIELD = "\x1e", "\x1f"  # separators of a packed row (never in a parsed rule)

SPACY_COARSE = {"NOUN": "noun", "PROPN": "noun", "VERB": "verb", "AUX": "verb", "ADJ": "adj", "ADV": "adv"}


class PpdbError(ValueError):
    pass


def coarse_pos_of_ptb(tag: str) -> str:
    """PPDB LHS / Penn Treebank tag ([NN], NNS, [VBD], JJR, RB, ...) -> noun/verb/adj/adv/other."""
    tag = tag.strip().strip("[]").upper()
    if tag.startswith("NN"):
        return "noun"
    if tag.startswith("VB"):
        return "verb"
    if tag.startswith("JJ"):
        return "adj"
    if tag.startswith("RB"):
        return "adv"
    return "other"


def coarse_pos_of_spacy(pos: str) -> str:
    """spaCy universal POS (NOUN, PROPN, VERB, AUX, ADJ, ADV, ...) -> noun/verb/adj/adv/other."""
    return SPACY_COARSE.get(pos, "other")


def parse_line(line: str) -> tuple[str, str, str, str] | str:
    """(phrase, paraphrase, coarse POS, relation) of one rule, or the reason it is malformed."""
    parts = [p.strip() for p in line.rstrip("\r\n").split("|||")]
    if len(parts) < 6:
        return f"expected 6 '|||'-separated fields, found {len(parts)}"
    lhs, phrase, paraphrase, relation = parts[0], parts[1], parts[2], parts[-1]
    if not (lhs.startswith("[") and lhs.endswith("]") and len(lhs) > 2):
        return f"LHS {lhs[:40]!r} is not a [TAG]"
    if not phrase or not paraphrase:
        return "empty phrase or paraphrase"
    if any(c in phrase or c in paraphrase for c in (_GROUP, _FIELD)):
        return "control character in phrase or paraphrase"
    if relation not in ALL_RELATIONS:
        return f"unknown entailment relation {relation[:40]!r}"
    return phrase.lower(), paraphrase.lower(), coarse_pos_of_ptb(lhs), relation


def usable_phrase(phrase: str) -> bool:
    """Whether a PPDB phrase can be a constraint: it holds a word as the decoder counts them (not ``,``,
    ``...``, ``€``); a required or banned phrase without one is empty to the decoder, which refuses it."""
    return holds_word(phrase)


def index_path_for(path: str | Path, cache_dir: str | Path | None = None) -> Path:
    path = Path(path).resolve()
    st = path.stat()
    digest = hashlib.sha256(f"{INDEX_FORMAT}\0{path}\0{st.st_mtime_ns}\0{st.st_size}".encode()).hexdigest()
    base = Path(cache_dir) if cache_dir else Path(settings.VAR_DIR) / "ppdb-index"
    return base / f"{digest}.sqlite"


def build_index(source: str | Path, target: str | Path) -> dict:
    """Stream ``source`` into a fresh SQLite index at ``target`` (rules staged in a scratch file, sorted
    and packed per phrase into a temporary file, then renamed). Returns the statistics stored in its
    ``meta`` table."""
    source, target = Path(source), Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(target) as tmp:
        stats = _build_into(source, tmp)
    if stats["malformed"]:
        logger.warning(
            "%s: %d malformed line(s) skipped (first at line %d)",
            source,
            stats["malformed"],
            stats["malformed_lines"][0]["line"],
        )
    return stats


def _build_into(source: Path, tmp: Path) -> dict:
    staging = tmp.with_name(tmp.name + ".rules")
    staging.unlink(missing_ok=True)
    stats = {
        "source": str(source),
        "lines": 0,
        "rules": 0,
        "kept": 0,
        "no_word": 0,
        "phrases": 0,
        "malformed": 0,
        "malformed_lines": [],
    }
    db = sqlite3.connect(tmp)
    try:
        db.execute("ATTACH DATABASE ? AS staging", (str(staging),))
        db.executescript(
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
            "PRAGMA staging.journal_mode=OFF; PRAGMA staging.synchronous=OFF;"
            "CREATE TABLE staging.rules (phrase TEXT NOT NULL, paraphrase TEXT NOT NULL, pos TEXT NOT NULL,"
            " relation TEXT NOT NULL);"
            "CREATE TABLE entries (phrase TEXT PRIMARY KEY, packed TEXT NOT NULL) WITHOUT ROWID;"
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
            "CREATE TABLE filter (bits BLOB NOT NULL);"
        )
        batch: list[tuple[str, str, str, str]] = []
        wanted = set(PPDB_RELATIONS)
        # Any bytes are taken (errors="replace": U+FFFD): a line with a bad byte is a malformed rule,
        # skipped and counted like any other, not the end of a several-GB file.
        with open_text(source, errors="replace") as fh:
            for number, line in enumerate(fh, 1):
                stats["lines"] = number
                if not line.strip():
                    continue
                parsed = parse_line(line)
                if isinstance(parsed, str):
                    stats["malformed"] += 1
                    if len(stats["malformed_lines"]) < MAX_REPORTED:
                        stats["malformed_lines"].append({"line": number, "reason": parsed})
                    if stats["malformed"] <= 20:
                        logger.warning("%s:%d: malformed PPDB line skipped: %s", source, number, parsed)
                    continue
                stats["rules"] += 1
                if parsed[3] not in wanted or parsed[0] == parsed[1]:
                    continue
                if not (usable_phrase(parsed[0]) and usable_phrase(parsed[1])):
                    stats["no_word"] += 1
                    continue
                batch.append(parsed)
                if len(batch) >= _BATCH:
                    db.executemany("INSERT INTO staging.rules VALUES (?, ?, ?, ?)", batch)
                    stats["kept"] += len(batch)
                    batch.clear()
        if batch:
            db.executemany("INSERT INTO staging.rules VALUES (?, ?, ?, ?)", batch)
            stats["kept"] += len(batch)
        stats["phrases"] = _pack_entries(db)
        bloom = BloomFilter.build((row[0] for row in db.execute("SELECT phrase FROM entries")), stats["phrases"])
        db.execute("INSERT INTO filter VALUES (?)", (bytes(bloom.bits),))
        db.execute("INSERT INTO meta VALUES ('stats', ?)", (json.dumps(stats),))
        db.commit()
        db.execute("DETACH DATABASE staging")
    finally:
        db.close()
        staging.unlink(missing_ok=True)
    return stats


def _pack_entries(db: sqlite3.Connection) -> int:
    """Fill ``entries`` from the staged rules, one row per phrase; returns the number of phrases.
    (SQLite's BINARY order on UTF-8 is Python's code-point order, so each group comes out sorted.)"""
    rows = db.execute(
        "SELECT DISTINCT phrase, pos, relation, paraphrase FROM staging.rules"
        " ORDER BY phrase, pos, relation, paraphrase"
    )
    packed: list[tuple[str, str]] = []
    phrases = 0
    current, groups, key, paraphrases = None, [], None, []
    for phrase, pos, relation, paraphrase in rows:
        if phrase != current or (pos, relation) != key:
            if paraphrases:
                groups.append(_FIELD.join((*key, *paraphrases)))
            if phrase != current:
                if groups:
                    packed.append((current, _GROUP.join(groups)))
                current, groups = phrase, []
            key, paraphrases = (pos, relation), []
        paraphrases.append(paraphrase)
        if len(packed) >= _BATCH:
            db.executemany("INSERT INTO entries VALUES (?, ?)", packed)
            phrases += len(packed)
            packed.clear()
    if paraphrases:
        groups.append(_FIELD.join((*key, *paraphrases)))
    if groups:
        packed.append((current, _GROUP.join(groups)))
    db.executemany("INSERT INTO entries VALUES (?, ?)", packed)
    return phrases + len(packed)


def _unpack(packed: str) -> dict[tuple[str, str], tuple[str, ...]]:
    """A packed row as {(coarse POS, relation): sorted distinct paraphrases}."""
    found = {}
    for group in packed.split(_GROUP):
        pos, relation, *paraphrases = group.split(_FIELD)
        found[(pos, relation)] = tuple(paraphrases)
    return found


class PpdbIndex:
    """Read-only lookups into a built index; safe to share between threads."""

    def __init__(self, index_path: str | Path, source: str | Path | None = None):
        self.index_path = Path(index_path)
        self.source = str(source) if source else None
        # immutable: an index file is never changed once renamed into place (a new source version gets a new
        # file), so SQLite can skip its per-query file locking and change checks (~4x faster lookups).
        self._db = sqlite3.connect(f"file:{self.index_path}?mode=ro&immutable=1", uri=True, check_same_thread=False)
        self._lock = threading.Lock()
        self._cache: dict[str, dict[tuple[str, str], tuple[str, ...]]] = {}
        row = self._db.execute("SELECT value FROM meta WHERE key = 'stats'").fetchone()
        self.stats: dict = json.loads(row[0]) if row else {}
        self._filter = BloomFilter(self._db.execute("SELECT bits FROM filter").fetchone()[0])

    def prefetch(self, phrases) -> None:
        """Load the entries of several phrases in one query (a sentence's pool, before its lookups)."""
        missing = list(dict.fromkeys(p.lower() for p in phrases if p.lower() not in self._cache))
        for start in range(0, len(missing), 500):
            part = missing[start : start + 500]
            with self._lock:
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT phrase, packed FROM entries WHERE phrase IN ({marks})", part
                ).fetchall()
            found = dict.fromkeys(part, "")
            found.update(rows)
            if len(self._cache) >= 500_000:
                self._cache.clear()
            for phrase, packed in found.items():
                self._cache[phrase] = _unpack(packed) if packed else {}

    def entries(self, phrase: str) -> dict[tuple[str, str], tuple[str, ...]]:
        """All paraphrases of a lowercase ``phrase`` by (coarse POS, relation), each tuple distinct and
        sorted; cached. For a phrase not seen yet: none but the Bloom filter's test if the index has no
        rule for it, else one primary-key read (cheaper than an ``IN`` query
        over a whole pool when selection stops at the first token that has a paraphrase)."""
        found = self._cache.get(phrase)
        if found is None:
            row = None
            if phrase in self._filter:  # (else PPDB certainly has no rule for it)
                with self._lock:
                    row = self._db.execute("SELECT packed FROM entries WHERE phrase = ?", (phrase,)).fetchone()
            found = _unpack(row[0]) if row else {}
            if len(self._cache) >= 500_000:
                self._cache.clear()
            self._cache[phrase] = found
        return found

    _entries = entries

    def lookup(self, phrase: str, coarse_pos: str, relation: str) -> tuple[str, ...]:
        """Distinct paraphrases of ``phrase`` (lowercased) under ``relation`` whose LHS has ``coarse_pos``,
        sorted (so that a seeded random choice among them is reproducible)."""
        return self.entries(phrase.lower()).get((coarse_pos, relation), ())

    def close(self) -> None:
        self._db.close()


_OPEN: dict[Path, PpdbIndex] = {}
_OPEN_LOCK = threading.Lock()


def open_ppdb(path: str | Path, *, cache_dir: str | Path | None = None) -> PpdbIndex:
    """The index of the PPDB file at ``path``, built on first use (streamed, once per file version)."""
    source = Path(path)
    try:
        if source.is_dir():
            raise PpdbError(f"PPDB file {path} is a directory, not a file")
        if not source.is_file():
            raise PpdbError(f"PPDB file {path} does not exist or is not a file")
        target = index_path_for(source, cache_dir)
    except OSError as exc:
        raise PpdbError(f"cannot read PPDB file {path}: {exc.strerror or exc}") from None
    with _OPEN_LOCK:
        index = _OPEN.get(target)
        if index is None:
            if not target.is_file():
                try:
                    build_index(source.resolve(), target)
                except (OSError, EOFError, gzip.BadGzipFile) as exc:
                    raise PpdbError(f"cannot read PPDB file {path}: {exc}") from None
                _remove_superseded(target, source)
            index = _OPEN[target] = PpdbIndex(target, source)
    _refuse_ruleless(index, path)
    return index


def _refuse_ruleless(index: PpdbIndex, path) -> None:
    """A file none of whose lines is a rule (a PPDB 1.0 pairs file, an empty file) is the wrong file:
    refused each time it is opened, its index cached or not, instead of every PPDB system quietly finding
    no paraphrase."""
    stats = index.stats
    if stats.get("rules", 1) == 0:
        first = stats.get("malformed_lines") or []
        detail = f" (line {first[0]['line']}: {first[0]['reason']})" if first else ""
        raise PpdbError(f"{path}: not a PPDB 2.0 lexical file: no valid rule in {stats.get('lines', 0)} lines{detail}")


def _remove_superseded(target: Path, source: Path) -> list[Path]:
    """Delete the other index files beside ``target`` that were built from the same PPDB file (an
    earlier version of it, or an earlier index format): an index of a large PPDB file takes GBs. A
    process still reading one keeps it until it closes it (POSIX unlink)."""
    names = {str(source), str(source.resolve())}
    removed = []
    for other in target.parent.glob("*.sqlite"):
        if other == target:
            continue
        try:
            db = sqlite3.connect(f"file:{other}?mode=ro", uri=True)
            try:
                row = db.execute("SELECT value FROM meta WHERE key = 'stats'").fetchone()
            finally:
                db.close()
            if row and json.loads(row[0]).get("source") in names:
                other.unlink()
                removed.append(other)
        except (sqlite3.Error, OSError, ValueError):
            continue  # not an index of ours, or gone already
    if removed:
        logger.info("removed %d superseded PPDB index file(s) of %s", len(removed), source)
    return removed
