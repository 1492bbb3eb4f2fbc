"""The API's only request parser: JSON in UTF-8, at most ``MAX_DEPTH`` levels deep, or a 4xx with a code.

DRF's ``JSONParser`` lets a ``RecursionError`` through (JSON nested ~1,000 deep: a 500, and the submission
throttle reads the body before the view runs), and decodes the body in whatever charset the
``Content-Type`` names, so a client's mislabelled bytes could be stored garbled. This one:

* refuses a declared charset other than UTF-8 (or its ASCII subset) with 415 ``unsupported_media_type``:
  JSON exchanged between systems is UTF-8 (RFC 8259 §8.1) and the slider page sends nothing else;
* refuses bytes that are not valid UTF-8, malformed JSON, ``NaN``/``Infinity``, too-deep nesting and a
  string holding a lone surrogate (the escape ``"\\ud800"`` is valid JSON syntax but no Unicode text: UTF-8
  cannot encode it, so the database driver failed on it, a 500) with 400 ``parse_error``: nothing reaches
  a view, so nothing is stored.
"""

from __future__ import annotations

import codecs
import json
import re

from django.utils.http import parse_header_parameters
from rest_framework.exceptions import ParseError, UnsupportedMediaType
from rest_framework.parsers import JSONParser
from rest_framework.utils.json import strict_constant

MAX_DEPTH = 32  # a submission is 3 deep ({"judgments": [{...}]}); nothing legitimate comes near this
_UTF8 = frozenset({"utf-8", "ascii"})  # codec names after codecs.lookup: utf8, UTF-8, us-ascii, ...
_SURROGATE = re.compile("[\ud800-\udfff]")


def _charset_ok(media_type: str | None) -> bool:
    _, params = parse_header_parameters(media_type or "")
    charset = params.get("charset")
    if charset is None:
        return True
    try:
        return codecs.lookup(charset.strip()).name in _UTF8
    except LookupError:
        return False


def _too_deep(data, limit: int = MAX_DEPTH) -> bool:
    """Whether ``data`` nests lists/dicts more than ``limit`` deep (iterative: a deep input cannot recurse)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _lone_surrogate(data) -> bool:
    """Whether a string of ``data`` (a key or a value, at any depth) holds a UTF-16 surrogate: only a
    ``\\uD8xx``-style escape puts one there (a valid pair decodes to one character), and no UTF-8 text can
    hold it."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return True
        elif isinstance(value, dict):
            stack.extend(value)
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return False


class StrictJSONParser(JSONParser):
    """``application/json`` in UTF-8, nested at most ``MAX_DEPTH`` deep; every refusal is a DRF error."""

    def parse(self, stream, media_type=None, parser_context=None):
        if not _charset_ok(media_type):
            raise UnsupportedMediaType(
                media_type,
                detail=f"request bodies must be JSON in UTF-8 (Content-Type: {self.media_type}; charset=utf-8)",
            )
        raw = stream.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ParseError("JSON parse error - the body is not valid UTF-8") from None
        try:
            data = json.loads(text, parse_constant=strict_constant if self.strict else None)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested more than {MAX_DEPTH} levels deep") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        if _too_deep(data):
            raise ParseError(f"JSON parse error - nested more than {MAX_DEPTH} levels deep")
        if _lone_surrogate(data):
            raise ParseError(
                "JSON parse error - a string holds a lone surrogate escape (\\ud800-\\udfff), which is not Unicode text"
            )
        return data
