"""Inverse document frequency over a corpus's English side: IDF = ln(N / df), a sentence a document."""
from __future__ import annotations

import math
from pathlib import Path


class IdfFileError(ValueError):
    pass


def idf_value(n_documents: int, document_frequency: int) -> float:
    return math.log(n_documents / document_frequency)


def read_idf_tsv(path: str | Path) -> dict[str, float]:
    """Read ``token<TAB>idf`` lines (a header line ``token<TAB>idf`` is allowed)."""
    table: dict[str, float] = {}
    try:
        fh = open(path, encoding="utf-8")
    except OSError as exc:
        raise IdfFileError(f"cannot read IDF file {path}: {exc.strerror or exc}") from None
    with fh:
        for number, line in enumerate(fh, 1):
            line = line.rstrip("\n\r")
            if not line.strip():
                continue
            parts = line.split("\t")
            if number == 1 and parts[:2] == ["token", "idf"]:
                continue
            if len(parts) != 2:
                raise IdfFileError(f"{path}:{number}: expected token<TAB>idf, got {line[:80]!r}")
            try:
                table[parts[0]] = float(parts[1])
            except ValueError:
                raise IdfFileError(f"{path}:{number}: IDF {parts[1][:40]!r} is not a number") from None
    if not table:
        raise IdfFileError(f"IDF file {path} holds no entries")
    return table
