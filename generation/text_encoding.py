"""Which byte of a text line is not UTF-8.

Files are read with ``errors="surrogateescape"``: an undecodable byte reaches the reader as a lone
surrogate instead of failing a whole read-ahead block, so the error can name its line and column (a
strict decoder reports a byte offset into its buffer). Used by every line-by-line reader of user files:
pairs files (rewriter, score_pairs) and IDF files.
"""
from __future__ import annotations


def undecodable_byte(line: str) -> str | None:
    """For a line read with ``surrogateescape``: None if it was UTF-8, else e.g. ``"byte 0xe9 at column 4"``."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(line[exc.start])
        what = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "a surrogate"
        return f"{what} at column {exc.start + 1}"
    return None
