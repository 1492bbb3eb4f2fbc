"""CSV files that a person opens in a spreadsheet: text cells can never become formulas (CSV injection).

OWASP's advice (https://owasp.org/www-community/attacks/CSV_Injection), in one place for every such
export (a batch's ``results.csv``, the result tables):

* a text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading
  single quote, so that Excel, LibreOffice and Google Sheets show it as text instead of evaluating it
  (``=HYPERLINK(...)`` is written ``'=HYPERLINK(...)``);
* every text cell is written in double quotes (embedded quotes doubled, as the ``csv`` module does), so that
  a separator inside the text (``,``, or ``;`` / a tab for a spreadsheet set up with another separator)
  cannot start a new cell that begins with one of those characters.

Numbers (``int``, ``float``, numpy numbers: anything not a ``str``) are written as they are, unquoted:
a score of -0.5 stays the number -0.5. Only text is touched, so a comment ``-1`` becomes ``'-1`` (it is
text). Files read by programs (release TSVs, import files) must not use this: the quote would become part
of the data.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import Any, TextIO

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_safe_cell(value: Any) -> Any:
    """``value`` with a leading ``'`` when it is text a spreadsheet would read as a formula; else as is."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


class SpreadsheetCsvWriter:
    """``csv.writer`` for files opened in a spreadsheet: cells through ``csv_safe_cell``, text quoted."""

    def __init__(self, out: TextIO, **fmtparams: Any) -> None:
        fmtparams.setdefault("quoting", csv.QUOTE_NONNUMERIC)
        self._writer = csv.writer(out, **fmtparams)

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._writer.writerow([csv_safe_cell(cell) for cell in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def spreadsheet_csv_writer(out: TextIO, **fmtparams: Any) -> SpreadsheetCsvWriter:
    return SpreadsheetCsvWriter(out, **fmtparams)
