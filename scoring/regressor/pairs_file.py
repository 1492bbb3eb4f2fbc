"""Scoring a file of pairs (``manage.py score_pairs``): ``reference<TAB>paraphrase[<TAB>nll[<TAB>constraints]]``
lines in, each line with its score out, in order, validated before anything is written and written atomically.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from infra.textfiles import PairsFileError, atomic_write, open_text, undecodable_byte
from scoring.regressor.model import FittedRegressor
from scoring.similarity.features import PairError, constraint_phrases


def _parse_constraints(text: str) -> dict | str:
    """The constraints column: a JSON object, one constraint set ``{"positive": [[w, ...]], "negative": [...],
    "bos_avoid": [...]}`` or a resource candidate's ``{system: set}``; the reason when it is not one."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"constraints are not JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(value, dict):
        return f"constraints must be a JSON object, not {type(value).__name__}"
    try:
        constraint_phrases(value)
    except PairError as exc:
        return f"constraints: {exc}"
    return value


def _parse_pair_line(line: str) -> dict | str | None:
    """The pair of one ``reference<TAB>paraphrase[<TAB>nll[<TAB>constraints]]`` line, None for a blank line,
    or why it is malformed."""
    if isinstance(line, _NotUtf8):
        return str(line)
    if not line.strip():
        return None
    fields = line.split("\t")
    if len(fields) not in (2, 3, 4):
        return (
            f"expected reference<TAB>paraphrase[<TAB>nll], found {len(fields)} tab-separated field(s) "
            f"(a 4th, the constraints as a JSON object, is optional)"
        )
    if not fields[0].strip() or not fields[1].strip():
        return "empty reference or paraphrase"
    nll = None
    if len(fields) >= 3 and fields[2].strip():
        try:
            nll = float(fields[2])
        except ValueError:
            return f"nll {fields[2]!r} is not a number"
        if not math.isfinite(nll):
            return f"nll {fields[2]!r} is not finite"
    pair = {"reference": fields[0], "paraphrase": fields[1], "nll": nll}
    if len(fields) == 4 and fields[3].strip():
        constraints = _parse_constraints(fields[3])
        if isinstance(constraints, str):
            return constraints
        pair["constraints"] = constraints
    return pair


class _NotUtf8(str):
    """A line that did not decode: its text is the reason, reported with the line's number."""


def _lines(path):
    """(line number, line without its end) of a UTF-8 file (a leading BOM dropped), lines split at LF
    only; an undecodable line comes as a ``_NotUtf8`` reason naming the byte and column."""
    with open_text(path) as fh:  # the one way to open a user's file (gzip by magic bytes, BOM dropped)
        for lineno, text in enumerate(fh, start=1):
            where = undecodable_byte(text)  # every bad line is reported, so no strict reader here
            if where is not None:
                yield lineno, _NotUtf8(f"not UTF-8 ({where})")
                continue
            yield lineno, text.rstrip("\n").rstrip("\r")


def pairs_file_score(
    *, regressor: FittedRegressor, input_path, output_path, batch_size: int = 256, max_errors: int = 20
) -> dict:
    """Score a ``reference<TAB>paraphrase[<TAB>nll[<TAB>constraints]]`` file line by line into ``output_path``
    (constraints: a JSON object, see ``_parse_constraints``; empty = none).

    Each output line is the input line, a TAB and the predicted score (2 decimals; empty for a pair
    skipped for its over-long reference), in input order; a blank input line stays a blank output line. The file
    is validated in a first streaming pass: any malformed line aborts with every bad line named (up to
    ``max_errors``) and nothing written.
    Scoring streams in batches into a temporary file renamed over ``output_path`` at the end, so memory
    stays flat and a failure never leaves a partial output.
    """
    input_path, output_path = Path(input_path), Path(output_path)
    if output_path.is_dir():
        raise PairsFileError(f"{output_path} is a folder: give the output file's path")
    if any(p.exists() and not p.is_dir() for p in output_path.parents):
        raise PairsFileError(f"{output_path}: a part of that path is a file, not a folder")
    try:
        errors, n_lines = [], 0
        for lineno, line in _lines(input_path):
            n_lines = lineno
            parsed = _parse_pair_line(line)
            if isinstance(parsed, str):
                errors.append(f"{input_path}:{lineno}: {parsed}")
                if len(errors) >= max_errors:
                    break
    except OSError as exc:
        raise PairsFileError(f"{input_path}: cannot read: {exc.strerror or exc}") from None
    if errors:
        more = f" (stopped at the first {max_errors})" if len(errors) >= max_errors else ""
        raise PairsFileError(f"{len(errors)} malformed line(s){more}, nothing written:\n" + "\n".join(errors))
    output_path.parent.mkdir(parents=True, exist_ok=True)
    scored = skipped = 0
    with atomic_write(output_path, "w", encoding="utf-8", newline="") as out:
        batch: list[tuple[str, dict]] = []

        def flush():
            nonlocal scored, skipped
            if not batch:
                return
            scores = regressor.predict([p for _, p in batch])
            for (line, _), score in zip(batch, scores):
                if math.isnan(score):
                    skipped += 1
                    out.write(f"{line}\t\n")
                else:
                    scored += 1
                    out.write(f"{line}\t{score:.2f}\n")
            batch.clear()

        for _, line in _lines(input_path):
            pair = _parse_pair_line(line)
            if pair is None:  # blank: kept in place, so output line N is still input line N
                flush()
                out.write("\n")
                continue
            # a batch ends only where the reference changes: the group features (recipe v2) compare a pair
            # with the batch's other pairs of its reference, so a run of lines with one reference stays whole
            if len(batch) >= batch_size and pair["reference"] != batch[-1][1]["reference"]:
                flush()
            batch.append((line, pair))
        flush()
    return {
        "regressor": regressor.name,
        "lines": n_lines,
        "scored": scored,
        "skipped_long_reference": skipped,
        "output": str(output_path),
    }
