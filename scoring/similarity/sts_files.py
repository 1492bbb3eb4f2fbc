"""Reading STS-B and SICK files: pairs and gold scores on the regressor's 0-100 scale.

STS-B (tab-separated; genre, file, year, id, score 0-5, sentence1, sentence2, sometimes extra columns: only the
first seven are read): score x 20. SICK (headed TSV; relatedness 1-5): (score - 1) x 25.

Its own module, with no Django and nothing of the regressor, so that the encoder head's training
(``scoring.similarity.encoder_head``) can read STS-B without importing ``scoring.similarity.sts`` (which evaluates
regressors).
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

from infra.textfiles import tsv_rows

KINDS = ("stsb", "sick")


@dataclasses.dataclass(frozen=True)
class StsPair:
    sentence1: str
    sentence2: str
    score: float  # 0-100


def sts_read(path, *, kind: str) -> list[StsPair]:
    """Pairs of an STS-B or SICK file, scores rescaled to 0-100; errors name the line."""
    path = Path(path)
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")
    pairs = []
    rows = tsv_rows(path, newline=None)  # strict UTF-8: a bad byte is a ValueError naming its line
    with contextlib.closing(rows):
        if kind == "sick":
            header = next(rows, (1, [""]))[1]
            try:
                ia, ib, isc = (header.index(c) for c in ("sentence_A", "sentence_B", "relatedness_score"))
            except ValueError:
                raise ValueError(f"{path}:1: not a SICK header: {header}") from None
        for lineno, fields in rows:
            try:
                if kind == "stsb":
                    a, b, score = fields[5], fields[6], float(fields[4]) * 20.0
                else:
                    a, b, score = fields[ia], fields[ib], (float(fields[isc]) - 1.0) * 25.0
            except (IndexError, ValueError):
                raise ValueError(f"{path}:{lineno}: malformed {kind} line") from None
            pairs.append(StsPair(a, b, min(max(score, 0.0), 100.0)))
    return pairs
