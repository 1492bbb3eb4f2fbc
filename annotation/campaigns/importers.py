"""Import human judgments collected elsewhere, e.g. ParaBank's released annotations.

ParaBank's release format (tab-separated, one header line, unquoted fields, UTF-8):

* references (``ref.tsv``): ``ref_id``, ``ref_sent``, ``ref_len`` (the length bucket: 5/10/20/40),
  optionally ``czeng_s`` and any other columns (kept in ``Reference.extra``);
* candidates: ``worker_id_anon``, ``ref_id``, ``ref_len`` (optional; must match the reference's),
  ``sys_id`` (space-separated systems that produced the merged candidate; ``0`` = the copied reference,
  i.e. an attention check; ``35`` = PARANMT), ``candidate``, ``NLL`` (optional, may be empty),
  ``human_score`` (integer 0-100, empty when the slider was N/A), ``gm`` (0 nonsensical, 1 meaningful
  but ungrammatical, 2 meaningful and grammatical). Each row is one judgment by one worker.

Rules:

* Candidates are merged by (reference, exact text); the systems of every row with that text are united.
* Rows of one worker on one reference form one imported ``Assignment`` (provider ``import``), like the
  HIT they came from (one reference, five candidates). Should a worker have judged the same merged
  candidate of a reference twice, the second judgment goes to a second assignment of that
  (worker, reference), and so on, in file order.
* Imported anonymised worker ids are namespaced by campaign (``Worker.external_id = "c<pk>:<id>"``).
* Every file is validated before anything is written; an error names the file and line
  (``ImportFormatError``); the whole import is one transaction.
* ``import_generic`` reads any headed CSV/TSV (quoted fields allowed) with one judgment a row, given a
  mapping of fields to its columns (worker, reference, systems, candidate, score, fluency; optional
  reference_text, length, nll), under the same rules.
* Re-importing is idempotent: references, candidates, systems, workers, assignments and judgments are
  matched by their keys; nothing is duplicated; a judgment whose score or fluency changed is updated.
  A reference already in the campaign with another text or length bucket is an error.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from django.db import transaction

from annotation.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    Candidate,
    CandidateSystem,
    Judgment,
    Provider,
    Reference,
    Worker,
    judgment_value_error,
)
from infra.textfiles import NotUtf8Error, read_lines

PARABANK_REFERENCE_COLUMNS = ("ref_id", "ref_sent", "ref_len")
PARABANK_CANDIDATE_COLUMNS = ("worker_id_anon", "ref_id", "sys_id", "candidate", "human_score", "gm")
# In ParaBank's released CzEng annotations, system 35 is PARANMT, not "PPDB equ" of Tab. 3.
PARABANK_SYSTEM_NAMES = {"35": "PARANMT"}


class ImportFormatError(ValueError):
    """A bad input file; the message names the file and (1-based, header = 1) line."""

    def __init__(self, path, line: int | None, reason: str):
        self.path, self.line, self.reason = str(path), line, reason
        super().__init__(f"{path}:{line}: {reason}" if line else f"{path}: {reason}")


class ImportArgumentError(ValueError):
    """A bad import argument (campaign name, delimiter): refused before any file is read or anything written."""


def campaign_name_check(name) -> str:
    """The campaign name to import into; an empty or blank one is refused."""
    if name is None or not str(name).strip():
        raise ImportArgumentError("the campaign name is empty: give --campaign NAME")
    return str(name)


def delimiter_check(delimiter: str | None) -> str | None:
    """A CSV field delimiter: exactly one character, not a quote or a line break (None: by file suffix)."""
    if delimiter is None:
        return None
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ImportArgumentError(
            f"the delimiter must be exactly one character, got {delimiter!r} (write \\t or tab for a tab)"
        )
    if delimiter in '"\r\n':
        raise ImportArgumentError(f"the delimiter cannot be {delimiter!r} (a quote or a line break)")
    return delimiter


@dataclasses.dataclass
class ImportSummary:
    campaign: str
    campaign_created: bool = False
    rows: int = 0
    references: int = 0
    references_created: int = 0
    candidates: int = 0
    candidates_created: int = 0
    candidate_systems_created: int = 0
    workers: int = 0
    workers_created: int = 0
    assignments: int = 0
    assignments_created: int = 0
    judgments_created: int = 0
    judgments_updated: int = 0
    judgments_unchanged: int = 0

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def user_file_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of a user's file (judgments, a batch's baseline outputs) read through
    infra.textfiles (gzip by magic bytes, BOM, strict UTF-8), line endings kept for the ``csv`` module;
    unreadable or not UTF-8 -> ImportFormatError naming the line and the byte. Close it when done."""
    try:
        lines = read_lines(path, newline="")  # newline="": the csv module splits quoted fields itself
    except OSError as exc:
        raise ImportFormatError(path, None, f"cannot open: {exc.strerror or exc}") from exc
    try:
        yield from lines
    except NotUtf8Error as exc:
        byte = f"byte 0x{exc.byte:02x} at byte {exc.offset} of the line" if exc.byte is not None else exc.reason
        raise ImportFormatError(path, exc.line, f"not UTF-8 ({byte}); save it as UTF-8") from exc
    finally:
        lines.close()


def read_tsv(path, required: tuple[str, ...]):
    """Yield (line number, {column: value}) of a headed, unquoted TSV; blank lines are skipped."""
    path = Path(path)
    lines = user_file_lines(path)
    try:
        header_line = next(lines, (1, ""))[1]
        header = [h.strip() for h in header_line.rstrip("\r\n").split("\t")]
        if not header_line.strip():
            raise ImportFormatError(path, 1, "empty file (no header line)")
        missing = [c for c in required if c not in header]
        if missing:
            raise ImportFormatError(path, 1, f"missing column(s) {', '.join(missing)} (header: {', '.join(header)})")
        for lineno, raw in lines:
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != len(header):
                raise ImportFormatError(
                    path, lineno, f"expected {len(header)} tab-separated fields, found {len(fields)}"
                )
            yield lineno, dict(zip(header, fields))
    finally:
        lines.close()


def _int(path, lineno, column, value, *, lo=None, hi=None) -> int:
    text = value.strip()
    try:
        number = int(text)
    except ValueError:
        raise ImportFormatError(path, lineno, f"{column} {value!r} is not an integer") from None
    if (lo is not None and number < lo) or (hi is not None and number > hi):
        raise ImportFormatError(path, lineno, f"{column} {number} is out of range {lo}-{hi}")
    return number


@dataclasses.dataclass
class _Row:
    lineno: int
    worker: str
    ref_id: str
    systems: list[str]
    text: str
    nll: float | None
    score: int | None
    fluency: int


def parse_parabank_references(path) -> dict[str, dict]:
    refs: dict[str, dict] = {}
    for lineno, row in read_tsv(path, PARABANK_REFERENCE_COLUMNS):
        ref_id = row["ref_id"].strip()
        if not ref_id:
            raise ImportFormatError(path, lineno, "empty ref_id")
        if ref_id in refs:
            raise ImportFormatError(
                path, lineno, f"duplicate ref_id {ref_id!r} (first on line {refs[ref_id]['lineno']})"
            )
        if not row["ref_sent"].strip():
            raise ImportFormatError(path, lineno, f"empty ref_sent for ref_id {ref_id!r}")
        bucket = _int(path, lineno, "ref_len", row["ref_len"], lo=1)
        extra = {k: v for k, v in row.items() if k not in PARABANK_REFERENCE_COLUMNS}
        refs[ref_id] = {"lineno": lineno, "text": row["ref_sent"], "length_bucket": bucket, "extra": extra}
    if not refs:
        raise ImportFormatError(path, None, "no references")
    return refs


def _judgment_row(path, lineno, row: dict, refs: dict[str, dict], col: dict[str, str]) -> _Row:
    """Validate one judgment; ``row`` has canonical keys (worker, reference, length, systems, candidate,
    nll, score, fluency), ``col`` names their columns in the file (for messages)."""
    ref_id = (row.get("reference") or "").strip()
    if ref_id not in refs:
        raise ImportFormatError(path, lineno, f"unknown {col['reference']} {ref_id!r} (not among the references)")
    if (row.get("length") or "").strip():
        ref_len = _int(path, lineno, col["length"], row["length"], lo=1)
        if ref_len != refs[ref_id]["length_bucket"]:
            raise ImportFormatError(
                path, lineno, f"{col['length']} {ref_len} differs from the reference's {refs[ref_id]['length_bucket']}"
            )
    worker = (row.get("worker") or "").strip()
    if not worker:
        raise ImportFormatError(path, lineno, f"empty {col['worker']}")
    systems = (row.get("systems") or "").split()
    if not systems:
        raise ImportFormatError(path, lineno, f"empty {col['systems']}")
    text = row.get("candidate") or ""
    if not text.strip():
        raise ImportFormatError(path, lineno, f"empty {col['candidate']}")
    fluency = _int(path, lineno, col["fluency"], row.get("fluency") or "", lo=0, hi=2)
    score = None
    if (row.get("score") or "").strip():
        score = _int(path, lineno, col["score"], row["score"], lo=0, hi=100)
    elif judgment_value_error(None, fluency):  # the N/A slider only for a nonsensical candidate
        raise ImportFormatError(
            path,
            lineno,
            f"empty {col['score']} (N/A slider) but {col['fluency']} {fluency} "
            f"(only a nonsensical candidate, {col['fluency']} 0, may have no score)",
        )
    nll = None
    nll_text = (row.get("nll") or "").strip()
    if nll_text:
        try:
            nll = float(nll_text)
        except ValueError:
            raise ImportFormatError(path, lineno, f"{col['nll']} {nll_text!r} is not a number") from None
    return _Row(lineno, worker, ref_id, systems, text, nll, score, fluency)


PARABANK_COLUMN_OF = {
    "worker": "worker_id_anon",
    "reference": "ref_id",
    "length": "ref_len",
    "systems": "sys_id",
    "candidate": "candidate",
    "nll": "NLL",
    "score": "human_score",
    "fluency": "gm",
}


def parse_parabank_candidates(path, refs: dict[str, dict]) -> list[_Row]:
    rows: list[_Row] = []
    for lineno, row in read_tsv(path, PARABANK_CANDIDATE_COLUMNS):
        canonical = {key: row.get(column, "") for key, column in PARABANK_COLUMN_OF.items()}
        rows.append(_judgment_row(path, lineno, canonical, refs, PARABANK_COLUMN_OF))
    if not rows:
        raise ImportFormatError(path, None, "no judgments")
    return rows


def import_parabank(*, campaign_name: str, references_path, candidates_path) -> ImportSummary:
    """Import ParaBank-format references and judged candidates into a campaign (created if needed)."""
    campaign_name = campaign_name_check(campaign_name)
    refs = parse_parabank_references(references_path)
    rows = parse_parabank_candidates(candidates_path, refs)
    with transaction.atomic():
        campaign, created = Campaign.objects.get_or_create(name=campaign_name)
        summary = ImportSummary(campaign=campaign.name, campaign_created=created, rows=len(rows))
        names = dict(campaign.settings.get("system_names") or {})
        if campaign.settings.get("source_format") != "parabank" or any(
            names.get(k) != v for k, v in PARABANK_SYSTEM_NAMES.items()
        ):
            campaign.settings = {
                **campaign.settings,
                "source_format": "parabank",
                "system_names": {**names, **PARABANK_SYSTEM_NAMES},
            }
            campaign.save(update_fields=["settings"])
        _write(campaign, refs, rows, summary, references_path)
    return summary


def _write(campaign: Campaign, refs: dict, rows: list[_Row], summary: ImportSummary, references_path) -> None:
    # references
    existing = {r.ref_id: r for r in Reference.objects.filter(campaign=campaign)}
    for ref_id, info in refs.items():
        have = existing.get(ref_id)
        if have is not None and (have.text != info["text"] or have.length_bucket != info["length_bucket"]):
            raise ImportFormatError(
                references_path,
                info["lineno"],
                f"ref_id {ref_id!r} is already in campaign {campaign.name!r} with another text or length bucket",
            )
    new_refs = [
        Reference(campaign=campaign, ref_id=k, text=v["text"], length_bucket=v["length_bucket"], extra=v["extra"])
        for k, v in refs.items()
        if k not in existing
    ]
    Reference.objects.bulk_create(new_refs, batch_size=500)
    summary.references, summary.references_created = len(refs), len(new_refs)
    ref_pk = dict(Reference.objects.filter(campaign=campaign).values_list("ref_id", "pk"))

    # candidates, merged by (reference, exact text)
    merged: dict[tuple[int, str], dict] = {}
    for row in rows:
        entry = merged.setdefault((ref_pk[row.ref_id], row.text), {"systems": set(), "nll": None})
        entry["systems"].update(row.systems)
        if entry["nll"] is None:
            entry["nll"] = row.nll
    cand_pk = {
        (r, t): pk
        for pk, r, t in Candidate.objects.filter(reference__campaign=campaign).values_list("pk", "reference_id", "text")
    }
    new_cands = [
        Candidate(reference_id=r, text=t, nll=e["nll"]) for (r, t), e in merged.items() if (r, t) not in cand_pk
    ]
    Candidate.objects.bulk_create(new_cands, batch_size=500)
    if new_cands:
        cand_pk = {
            (r, t): pk
            for pk, r, t in Candidate.objects.filter(reference__campaign=campaign).values_list(
                "pk", "reference_id", "text"
            )
        }
    summary.candidates, summary.candidates_created = len(merged), len(new_cands)
    have_systems = set(
        CandidateSystem.objects.filter(candidate__reference__campaign=campaign).values_list("candidate_id", "system")
    )
    new_systems = [
        CandidateSystem(candidate_id=cand_pk[key], system=s)
        for key, e in merged.items()
        for s in sorted(e["systems"])
        if (cand_pk[key], s) not in have_systems
    ]
    CandidateSystem.objects.bulk_create(new_systems, batch_size=1000)
    summary.candidate_systems_created = len(new_systems)

    # workers (namespaced by campaign)
    ext = {w: f"c{campaign.pk}:{w}" for w in {row.worker for row in rows}}
    workers_of_campaign = Worker.objects.filter(provider=Provider.IMPORT, external_id__startswith=f"c{campaign.pk}:")
    worker_pk = dict(workers_of_campaign.values_list("external_id", "pk"))
    new_workers = [Worker(provider=Provider.IMPORT, external_id=e) for e in sorted(ext.values()) if e not in worker_pk]
    Worker.objects.bulk_create(new_workers, batch_size=500)
    if new_workers:
        worker_pk = dict(workers_of_campaign.values_list("external_id", "pk"))
    summary.workers, summary.workers_created = len(ext), len(new_workers)

    # assignments: one per (worker, reference); a repeated judgment of one candidate opens the next one
    seen: dict[tuple[str, str], list[set]] = defaultdict(list)
    placed: list[tuple[_Row, str, int]] = []
    for row in rows:
        key = (row.worker, row.ref_id)
        cid = cand_pk[(ref_pk[row.ref_id], row.text)]
        groups = seen[key]
        k = next((i for i, g in enumerate(groups) if cid not in g), None)
        if k is None:
            groups.append(set())
            k = len(groups) - 1
        groups[k].add(cid)
        suffix = "" if k == 0 else f"#{k + 1}"
        placed.append((row, f"c{campaign.pk}:{row.worker}:{row.ref_id}{suffix}", cid))
    wanted = {aid: row.worker for row, aid, _ in placed}
    imported = Assignment.objects.filter(campaign=campaign, provider=Provider.IMPORT)
    assignment_pk = dict(imported.values_list("external_assignment_id", "pk"))
    new_assignments = [
        Assignment(
            campaign=campaign,
            worker_id=worker_pk[ext[w]],
            provider=Provider.IMPORT,
            external_assignment_id=aid,
            status=AssignmentStatus.IMPORTED,
        )
        for aid, w in wanted.items()
        if aid not in assignment_pk
    ]
    Assignment.objects.bulk_create(new_assignments, batch_size=500)
    if new_assignments:
        assignment_pk = dict(imported.values_list("external_assignment_id", "pk"))
    summary.assignments, summary.assignments_created = len(wanted), len(new_assignments)

    # judgments
    existing_j = {(j.assignment_id, j.candidate_id): j for j in Judgment.objects.filter(assignment__in=imported)}
    new_j, changed = [], []
    for row, aid, cid in placed:
        apk = assignment_pk[aid]
        have = existing_j.get((apk, cid))
        if have is None:
            new_j.append(
                Judgment(
                    assignment_id=apk,
                    candidate_id=cid,
                    worker_id=worker_pk[ext[row.worker]],
                    score=row.score,
                    fluency=row.fluency,
                )
            )
        elif have.score != row.score or have.fluency != row.fluency:
            have.score, have.fluency = row.score, row.fluency
            changed.append(have)
        else:
            summary.judgments_unchanged += 1
    Judgment.objects.bulk_create(new_j, batch_size=1000)
    Judgment.objects.bulk_update(changed, ["score", "fluency"], batch_size=500)
    summary.judgments_created, summary.judgments_updated = len(new_j), len(changed)


# --- generic CSV / TSV ------------------------------------------------------------------------------

GENERIC_FIELDS = ("worker", "reference", "reference_text", "length", "systems", "candidate", "nll", "score", "fluency")
GENERIC_REQUIRED = ("worker", "reference", "systems", "candidate", "score", "fluency")


def parse_mapping(spec: str) -> dict[str, str]:
    """``"worker=WorkerId,reference=Input.ref,..."`` -> {field: column}."""
    mapping = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        field, sep, column = part.partition("=")
        field, column = field.strip(), column.strip()
        if not sep or not column:
            raise ValueError(f"bad mapping {part!r}: expected field=Column")
        if field not in GENERIC_FIELDS:
            raise ValueError(f"unknown field {field!r} in mapping (fields: {', '.join(GENERIC_FIELDS)})")
        mapping[field] = column
    missing = [f for f in GENERIC_REQUIRED if f not in mapping]
    if missing:
        raise ValueError(f"the mapping lacks {', '.join(missing)} (required: {', '.join(GENERIC_REQUIRED)})")
    return mapping


def import_generic(
    *, campaign_name: str, path, mapping: dict[str, str], references_path=None, delimiter: str | None = None
) -> ImportSummary:
    """Import a headed CSV/TSV (quoted fields allowed), one judgment per row, whose columns ``mapping``
    names (fields: worker, reference, systems, candidate, score 0-100 or empty = N/A, fluency 0/1/2;
    optional reference_text, length, nll). References come from ``references_path`` (ParaBank ref.tsv
    format), else from the reference_text/length columns, else from the campaign's earlier imports. The
    delimiter is a tab for .tsv/.tab files, else a comma, unless given. Same rules as import_parabank:
    validated first, one transaction, idempotent."""
    import csv

    path = Path(path)
    campaign_name = campaign_name_check(campaign_name)
    delimiter = delimiter_check(delimiter)
    missing = [f for f in GENERIC_REQUIRED if f not in mapping]
    if missing:
        raise ValueError(f"the mapping lacks {', '.join(missing)}")
    refs: dict[str, dict] = parse_parabank_references(references_path) if references_path else {}
    existing = Campaign.objects.filter(name=campaign_name).first()
    if existing is not None:
        for ref in Reference.objects.filter(campaign=existing):
            refs.setdefault(
                ref.ref_id, {"lineno": None, "text": ref.text, "length_bucket": ref.length_bucket, "extra": ref.extra}
            )
    if delimiter is None:
        delimiter = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    col = {f: mapping.get(f, f) for f in GENERIC_FIELDS}
    rows: list[_Row] = []
    lines = user_file_lines(path)
    with contextlib.closing(lines):
        try:
            reader = csv.DictReader((line for _, line in lines), delimiter=delimiter)
            header = reader.fieldnames or []
            absent = [c for c in mapping.values() if c not in header]
            if absent:
                raise ImportFormatError(path, 1, f"missing column(s) {', '.join(absent)} (header: {', '.join(header)})")
            for record in reader:
                lineno = reader.line_num
                if None in record or any(v is None for v in record.values()):
                    raise ImportFormatError(path, lineno, f"expected {len(header)} fields")
                if not any((v or "").strip() for v in record.values()):
                    continue
                canonical = {f: record[c] for f, c in mapping.items()}
                ref_id = (canonical.get("reference") or "").strip()
                ref_text = canonical.get("reference_text")
                if ref_text is not None and ref_text.strip():
                    have = refs.get(ref_id)
                    if have is None:
                        if not (canonical.get("length") or "").strip():
                            raise ImportFormatError(path, lineno, f"new reference {ref_id!r} without a {col['length']}")
                        refs[ref_id] = {
                            "lineno": lineno,
                            "text": ref_text,
                            "length_bucket": _int(path, lineno, col["length"], canonical["length"], lo=1),
                            "extra": {},
                        }
                    elif have["text"] != ref_text:
                        raise ImportFormatError(
                            path,
                            lineno,
                            f"{col['reference_text']} differs from reference {ref_id!r}'s text {have['text']!r}",
                        )
                rows.append(_judgment_row(path, lineno, canonical, refs, col))
        except csv.Error as exc:
            raise ImportFormatError(path, reader.line_num, f"CSV error: {exc}") from exc
    if not rows:
        raise ImportFormatError(path, None, "no judgments")
    used = {row.ref_id for row in rows}
    with transaction.atomic():
        campaign, created = Campaign.objects.get_or_create(name=campaign_name)
        summary = ImportSummary(campaign=campaign.name, campaign_created=created, rows=len(rows))
        _write(
            campaign,
            {k: v for k, v in refs.items() if k in used or v["lineno"] is not None},
            rows,
            summary,
            references_path or path,
        )
    return summary
