"""The ``generate`` job's evaluation sample (``sample_per_length``), drawn by the plan.

A reference belongs to the bucket whose length is nearest to its spaCy token count (ties go to the shorter
bucket); within a bucket references are taken by distance to the bucket length first (exact lengths first,
as ParaBank sampled them), then in an order fixed by a hash of (seed, corpus index): deterministic by seed, a
uniform random sample among equally near references. The plan streams the corpus once through spaCy's
tokenizer to draw it. The sample and its merged candidates become an annotation ``Campaign`` linked to the
job in the same transaction as ``finish``: annotation does that in a finish hook it registers
(``annotation/campaigns/sample.py``), which fills in the result's ``campaign``.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Sequence
from typing import Any

from infra.shards import batched

from ..corpus.corpora import corpus_records
from ..models import Corpus
from ..nlp import load_pipeline


def length_bucket(n_tokens: int, lengths: Sequence[int]) -> int:
    """The bucket length nearest to ``n_tokens`` (ties: the shorter bucket)."""
    return min(lengths, key=lambda L: (abs(n_tokens - L), L))


def _sample_order(seed: int, ref_index: int) -> int:
    return int.from_bytes(
        hashlib.blake2b(f"{seed}\x1f{ref_index}".encode(), digest_size=8, person=b"eval-sample").digest(), "big"
    )


def sample_references(
    corpus: Corpus, *, per_length: int, lengths: Sequence[int], seed: int, batch_size: int = 1000
) -> list[dict[str, Any]]:
    """Up to ``per_length`` references per bucket (the module docstring's rule), bucket by bucket.

    One pass over the corpus with spaCy's tokenizer; memory holds ``per_length`` records per bucket."""
    nlp = load_pipeline(tagger=False)
    heaps: dict[int, list] = {L: [] for L in lengths}

    def consider(batch: list[dict]) -> None:
        for record, doc in zip(batch, nlp.pipe([r["reference"] for r in batch], batch_size=batch_size)):
            n = sum(1 for t in doc if not t.is_space)
            bucket = length_bucket(n, lengths)
            key = (-abs(n - bucket), -_sample_order(seed, record["i"]))  # max-heap on (distance, order)
            item = (
                key,
                record["i"],
                {
                    "i": record["i"],
                    "reference": record["reference"],
                    "source": record.get("source", ""),
                    "length": n,
                    "bucket": bucket,
                },
            )
            heap = heaps[bucket]
            if len(heap) < per_length:
                heapq.heappush(heap, item)
            elif item[:2] > heap[0][:2]:
                heapq.heapreplace(heap, item)

    for batch in batched(corpus_records(corpus), batch_size):
        consider(batch)
    out: list[dict[str, Any]] = []
    for L in lengths:
        out += [item[2] for item in sorted(heaps[L], key=lambda it: it[:2], reverse=True)]
    return out
