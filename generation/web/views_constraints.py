"""Staff page: the constraint sets of all 37 ParaBank systems for one reference, side by side.

``/research/corpora/<corpus_id>/constraints/?i=N`` reads reference N of the corpus from its shards;
``/research/constraints/?sentence=...`` takes a typed sentence. Both accept ``idf`` (IdfTable id;
default the corpus's latest, else the latest table), ``seed``, ``ppdb`` (a PPDB 2.0 file path on the
server) and ``min_idf`` / ``max_idf``.

The page is never blank: with nothing asked it shows an example (reference 0 of the corpus, else ParaBank §3.2's
worked sentence), every word of the sentence with its IDF and whether it joins the pool, and, when systems find
the pool too small, why (the IDF window against what the table's corpus can give) and what to change.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from django.conf import settings
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from api.numbers import ascii_float, ascii_int
from infra.shards import read_jsonl_gz

from ..constraints.sets import PREPOSITIONS, build_pool, select_for_all_systems, tag_sentences
from ..constraints.systems import SYSTEMS
from ..models import Corpus, CorpusShard, IdfTable

# ParaBank §3.2's worked example: the page shows it when it is opened with nothing to show
EXAMPLE_SENTENCE = "I told her I was proud to work for them."
POOL_TOO_SMALL = "pool too small"


def word_idfs(
    tokens: Sequence[tuple[str, str]], idf: Mapping[str, float], pool_words: set[str], min_idf: float
) -> list[dict]:
    """Every token of the sentence with its IDF (None: not in the table) and why it is in the pool or not."""
    out = []
    for text, _pos in tokens:
        word = text.lower()
        value = idf.get(word) if text.isalpha() else None
        if not text.isalpha():
            why = "not a word"
        elif word in pool_words:
            why = "in the pool" + (" (preposition)" if word in PREPOSITIONS else "")
        elif value is None:
            why = "not in the IDF table"
        elif value < min_idf:
            why = "below the window (a common word)"
        else:
            why = "above the window"
        out.append({"word": text, "idf": value, "why": why, "pool": word in pool_words})
    return out


def pool_hint(rows: list[dict], table: IdfTable, min_idf: float) -> dict | None:
    """Why systems found the pool too small, and what to change: None when none did. A table's IDF is
    ln(documents / documents with the word), so no word of a corpus of N documents goes above ln(N); a small
    corpus leaves few words inside ParaBank's 7-17 window (built for millions of sentences)."""
    small = sum(1 for r in rows if not r["ok"] and str(r["reason"]).startswith(POOL_TOO_SMALL))
    if not small:
        return None
    n_documents = getattr(table, "n_documents", None) or 0
    highest = math.log(n_documents) if n_documents > 1 else None
    suggested = max(0.0, math.floor(highest) - 3.0) if highest is not None else None
    return {
        "systems": small,
        "of": len(rows),
        "n_documents": n_documents,
        "highest": highest,
        "small_corpus": highest is not None and highest < min_idf + 3,
        "suggested_min_idf": suggested if suggested is not None and suggested < min_idf else None,
    }


def reference_at(corpus: Corpus, index: int) -> dict | None:
    """Record ``index`` (corpus-wide) of the corpus, streamed from the shard that holds it."""
    for shard in CorpusShard.objects.filter(corpus=corpus, first_record__lte=index).order_by("-first_record")[:1]:
        if index >= shard.first_record + shard.n_records:
            return None
        for offset, record in enumerate(read_jsonl_gz(shard.key)):
            if record.get("i") == index or (record.get("i") is None and offset == index - shard.first_record):
                return record
    return None


def _phrases(phrases) -> list[str]:
    return [" ".join(p) for p in phrases]


def _float(value: str | None, default: float, name: str, bad: list[str]) -> float:
    """``value`` as a finite ASCII number (``default`` when absent); a bad one is reported in ``bad``."""
    if value in (None, ""):
        return default
    try:
        return ascii_float(value, name=name)
    except ValueError as exc:
        bad.append(str(exc))
        return default


@staff_member_required
@permission_required("generation.view_corpus", raise_exception=True)
def constraint_systems(request: HttpRequest, corpus_id: int | None = None) -> HttpResponse:
    corpus = get_object_or_404(Corpus, pk=corpus_id) if corpus_id is not None else None
    q = request.GET
    errors: list[str] = []
    bad: list[str] = []  # malformed numbers in the query (ASCII digits only): the page answers 400
    tables = list(IdfTable.objects.order_by("-created_at", "-pk")[:200])
    default_table = None
    if corpus is not None:
        default_table = corpus.idf_tables.order_by("-created_at", "-pk").first()
    default_table = default_table or (tables[0] if tables else None)
    table = default_table
    if q.get("idf"):
        try:
            table = IdfTable.objects.filter(pk=ascii_int(q["idf"], name="the IDF table id", minimum=0)).first()
        except ValueError as exc:
            table = None
            bad.append(str(exc))
        else:
            if table is None:
                errors.append(f"no IDF table {q['idf']}")
    try:
        seed = ascii_int(q.get("seed") or "0", name="the seed")
    except ValueError as exc:
        bad.append(str(exc))
        seed = 0
    min_idf = _float(q.get("min_idf"), settings.PARAFORGE_MIN_IDF, "min_idf", bad)
    max_idf = _float(q.get("max_idf"), settings.PARAFORGE_MAX_IDF, "max_idf", bad)
    ppdb_path = (q.get("ppdb") or "").strip()

    sentence = (q.get("sentence") or "").strip()
    index = q.get("i", "")
    example = not sentence and index == ""  # nothing asked: show an example rather than a blank page
    if example and corpus is not None:
        index = "0"
    elif example:
        sentence = EXAMPLE_SENTENCE
    record = None
    if not sentence and corpus is not None and index != "":
        try:
            number = ascii_int(index, name="the reference index", minimum=0)
        except ValueError as exc:
            bad.append(str(exc))
        else:
            record = reference_at(corpus, number)
            if record is None:
                errors.append(f"corpus {corpus} has no reference {index}")
            else:
                sentence = record.get("reference", "")

    errors = bad + errors
    rows, pool, words = [], [], []
    if sentence and table is not None and not errors:
        from ..constraints.constraint_job import load_idf_table

        ppdb = None
        if ppdb_path:
            from ..constraints.ppdb import PpdbError, open_ppdb

            try:
                ppdb = open_ppdb(ppdb_path)
            except PpdbError as exc:
                errors.append(str(exc))
        try:
            idf = load_idf_table(table)
        except (OSError, ValueError) as exc:
            errors.append(f"cannot read IDF table {table}: {exc}")
            idf = None
        if idf is not None:
            tagged = tag_sentences([sentence])[0]
            pool = [
                {"word": t.word, "idf": t.idf, "pos": t.pos, "preposition": t.word in PREPOSITIONS}
                for t in build_pool(tagged.tokens, idf, min_idf=min_idf, max_idf=max_idf)
            ]
            words = word_idfs(tagged.tokens, idf, {t["word"] for t in pool}, min_idf)
            results = select_for_all_systems(tagged, idf, seed=seed, ppdb=ppdb, min_idf=min_idf, max_idf=max_idf)
            for system, result in zip(SYSTEMS, results):
                rows.append(
                    {
                        "system": system,
                        "ok": result.is_constraint_set,
                        "reason": getattr(result, "reason", ""),
                        "negative": _phrases(result.negative),
                        "positive": _phrases(result.positive),
                        "bos_avoid": _phrases(result.bos_avoid),
                    }
                )
    elif sentence and table is None:
        errors.append("no IDF table: build or import one first")

    return render(
        request,
        "generation/constraint_systems.html",
        {
            "corpus": corpus,
            "tables": tables,
            "table": table,
            "seed": seed,
            "ppdb": ppdb_path,
            "min_idf": min_idf,
            "max_idf": max_idf,
            "sentence": sentence,
            "index": index,
            "record": record,
            "typed": bool(q.get("sentence")) or (example and corpus is None),
            "example": example,
            "errors": errors,
            "rows": rows,
            "pool": pool,
            "words": words,
            "hint": pool_hint(rows, table, min_idf) if rows else None,
            "n_references": corpus.n_references if corpus else None,
        },
        status=400 if bad else 200,
    )
