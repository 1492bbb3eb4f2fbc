"""Scored releases: a resource's pairs with their predicted similarity, the human judgments behind the
regressor, a card and a manifest, as versioned, gzip-compressed, reproducible files.

A release folder holds:

* ``pairs.tsv.gz`` (one line per pair, grouped by reference, header first: ``PAIR_COLUMNS``; tabs and
  newlines inside a text become spaces) or ``pairs.jsonl.gz`` (one JSON object per reference:
  ``JSONL_REFERENCE_KEYS``, its ``paraphrases`` a list of ``JSONL_PARAPHRASE_KEYS`` objects);
* ``judgments.tsv.gz``: every verified judgment (a crowd submission the platform never confirmed is
  left out) of the campaigns linked to the resource (those whose ``job``
  is the resource's generation job, and the regressor's training campaign), one row per judgment
  (``JUDGMENT_COLUMNS``: the pairs' names for what both files hold, ParaBank's for the rest; workers
  anonymised as 1, 2, ... per campaign in order of appearance);
* ``README.md``: the card (``scoring.release_card``): licence, files and columns, the held-out rho with its n
  and interval, the calibration table, counts, limitations, provenance;
* ``manifest.json``: version, licence (SPDX), counts, ``files`` (name -> ``{name, sha256, bytes}``), provenance
  by name, the regressor (name, held-out rho with n and interval, metrics with the calibration, signature),
  the generation settings (``Resource.settings``, paths turned into names), the filters.

A release leaves out what a HIT batch leaves out, by the one rule of ``generation.screening``: a paraphrase
identical to its reference (``is_copy``) unless the filters keep copies, and one with a non-word unless they keep
non-words (``--keep-non-words``: kept, its score is emptied and its ``caveat`` is ``non_words``); the manifest
counts both either way (``copies_read``, ``copies``, ``non_words_read``, ``non_words``). Every pair without an
honest score has a ``caveat`` and a null score (``PairScreen``: also ``long_reference``, a reference longer than
any the regressor was trained on, and ``unscored``). The licence asked for is checked against the corpus's terms
(``release_license_check``: ``infra.licences``) before anything is written. Files are 0644 and the folder 0755:
a release is for others to read (storage writes its own files owner-only).

Format ``parquet`` (``scoring.release_parquet``) writes the same rows as typed ``pairs.parquet`` and
``judgments.parquet`` instead of the two gzip files (texts exact, lists for systems, structs for the
constraints); its card's YAML header declares them as the Hugging Face hub's configurations.

Streaming: pairs are read from the scored shards one record at a time and written as they go, and
judgments come from a database cursor, so memory stays flat whatever the resource's size.
Deterministic: same inputs give byte-identical files (gzip mtime 0 and no file name, fixed column and
key order, shard order, no timestamps in the manifest).

All or nothing: the files are written into a staging folder beside ``out_dir`` and moved into it only once
all of them, the manifest last, are complete (the manifest is strict JSON: no NaN or Infinity); an export that
fails for any reason (a filter, the disk, the upload, the release's row) removes what it wrote, here and at
the upload's place, so no orphan files and no manifest of a release that does not exist are left behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max

from annotation.models import LENGTH_BUCKETS, Campaign, CandidateSystem, Judgment, Reference
from api.permissions import staff_has_perms
from generation.models import Resource
from generation.screening import NON_WORD, NON_WORD_RULE, Vocabulary, screen_verdicts, screen_vocabulary
from infra.shards import HashingWriter, read_jsonl_gz
from infra.storage import LocalStorage, S3Storage, get_storage, storage_from_url
from jobs.models import JobStatus

from .aggregation import counted_workers, system_sort_key
from .held_out import held_out_rho
from .models import Release, ScoredResource
from .release_card import (
    CARD_FILE,
    NO_LICENSE,
    dataset_card,
    license_check,
    license_conflict,
    local_name,
    without_local_paths,
)
from .release_filters import COPY_RULE, ReleaseFilters, filter_candidates, is_copy
from .release_parquet import (
    JUDGMENT_MEANINGS,
    JUDGMENTS_PARQUET,
    PAIR_MEANINGS,
    PAIRS_PARQUET,
    ParquetRows,
    pair_row,
    schema_columns,
)
from .scoring_job import regressor_version

# 2: one vocabulary (the judgments' ref_sent/candidate/sys_id/NLL/ref_len became reference/paraphrase/systems/
# nll/length_bucket, the JSONL paraphrases' text became paraphrase), a card in every format, copies left out
# 3: non-words left out as in a HIT batch, a caveat column for every pair without an honest score
RELEASE_FORMAT = "paraforge-release/3"
FORMATS = ("tsv", "jsonl", "parquet")
PAIR_COLUMNS = (
    "ref_index",
    "reference",
    "source",
    "length",
    "paraphrase",
    "systems",
    "nll",
    "score",
    "constraints",
    "caveat",
)
JUDGMENT_COLUMNS = (
    "campaign",
    "worker_id_anon",
    "counted",
    "ref_id",
    "length_bucket",
    "reference",
    "systems",
    "paraphrase",
    "nll",
    "human_score",
    "gm",
)
JSONL_REFERENCE_KEYS = ("ref_index", "reference", "source", "length", "paraphrases")
JSONL_PARAPHRASE_KEYS = ("paraphrase", "systems", "constraints", "nll", "score", "caveat")
# a pair's caveat (release_parquet.PAIR_MEANINGS): why its score is null
NON_WORDS, LONG_REFERENCE, UNSCORED = "non_words", "long_reference", "unscored"
FILE_MODE, FOLDER_MODE = 0o644, 0o755
JUDGMENTS_FILE = "judgments.tsv.gz"
MANIFEST_FILE = "manifest.json"
# a version names a folder (releases/<resource id>/<version>/): no separators, no "." or "..", no newline
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
VERSION_RULE = "letters, digits, '.', '_' or '-', starting with a letter or digit, at most 64 characters"
# who sees every release, in the admin's release pages and in the release API and its downloads alike
RELEASE_VIEW_PERMS = ("scoring.view_release",)


class ReleaseError(ValueError):
    """A release that cannot be made as asked (nothing is written)."""


class LicenseConflictError(ReleaseError):
    """A release licence that grants more than the corpus's terms allow (bad input, not a conflict of state)."""


def release_version_check(version: Any) -> str:
    """``version`` if it may name a release (``VERSION_RULE``), else a ReleaseError: the one rule of the
    admin's export form, ``manage.py export_release --version`` and the ``export_release`` job."""
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise ReleaseError(f"version {version!r}: use {VERSION_RULE}")
    return version


def release_version_free(resource: Resource, version: str) -> None:
    """ReleaseError if ``resource`` already has a release ``version``."""
    if Release.objects.filter(resource=resource, version=version).exists():
        raise ReleaseError(f"release {version!r} of {resource.name!r} already exists: choose another version")


def pairs_file_name(fmt: str) -> str:
    return PAIRS_PARQUET if fmt == "parquet" else f"pairs.{fmt}.gz"


@contextlib.contextmanager
def _gzip_lines(storage: LocalStorage, name: str, info: dict) -> Iterator[Callable[[str], None]]:
    """Yield a ``write(text)`` into ``name`` gzip-compressed (mtime 0, no name: reproducible bytes);
    ``info`` gets ``sha256`` and ``bytes`` of the compressed file once it is closed."""
    with storage.open_write(name) as raw:
        hashing = HashingWriter(raw)
        with gzip.GzipFile(filename="", mode="wb", fileobj=hashing, mtime=0, compresslevel=6) as gz:
            buffered = io.BufferedWriter(gz, buffer_size=1 << 20)
            yield lambda text: buffered.write(text.encode("utf-8"))
            buffered.flush()
    info.update(sha256=hashing.sha256.hexdigest(), bytes=hashing.size)


@contextlib.contextmanager
def _hashed(storage: LocalStorage, name: str, info: dict) -> Iterator[HashingWriter]:
    """Yield a binary sink into ``name``; ``info`` gets ``sha256`` and ``bytes`` once it is closed."""
    with storage.open_write(name) as raw:
        hashing = HashingWriter(raw)
        yield hashing
    info.update(sha256=hashing.sha256.hexdigest(), bytes=hashing.size)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        value = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return str(value).replace("\t", " ").replace("\r", " ").replace("\n", " ")


def _tsv(values) -> str:
    return "\t".join(_cell(v) for v in values) + "\n"


def scoring_for(resource: Resource, regressor: str | None = None) -> ScoredResource:
    """The completed scoring of ``resource`` by the named regressor (default: the latest completed one)."""
    done = resource.scorings.select_related("regressor", "job").filter(job__status=JobStatus.SUCCEEDED)
    if regressor:
        found = done.filter(regressor__name=regressor).first()
        if found is None:
            raise ReleaseError(
                f"resource {resource.name!r} has no completed scoring by regressor {regressor!r}: "
                f"run manage.py score_resource {resource.name} --regressor {regressor} --wait"
            )
    else:
        found = done.order_by("-created_at", "-pk").first()
        if found is None:
            raise ReleaseError(
                f"resource {resource.name!r} has no completed scoring: run manage.py score_resource "
                f"{resource.name} --regressor NAME --wait first"
            )
    if _scored_by_an_earlier_training(found):
        raise ReleaseError(
            f"resource {resource.name!r} was scored by an earlier training of regressor "
            f"{found.regressor.name!r} (retrained since with --replace), so its scores and the "
            f"regressor's signature disagree: run manage.py score_resource {resource.name} "
            f"--regressor {found.regressor.name} --wait again"
        )
    return found


def _scored_by_an_earlier_training(scored: ScoredResource) -> bool:
    """Scorings from before the version was recorded (no ``regressor_trained_at``) are taken as they are."""
    result = scored.job.result or {}
    return "regressor_trained_at" in result and result["regressor_trained_at"] != regressor_version(
        scored.regressor.signature
    )


def release_campaigns(scored: ScoredResource) -> list[Campaign]:
    """The campaigns whose judgments go with the release: those that evaluated a sample of the resource's
    generation job, and the campaign the regressor was trained on."""
    ids = set()
    if scored.resource.job_id:
        ids |= set(Campaign.objects.filter(job_id=scored.resource.job_id).values_list("pk", flat=True))
    if scored.regressor.campaign_id:
        ids.add(scored.regressor.campaign_id)
    return list(Campaign.objects.filter(pk__in=ids).order_by("name"))


@dataclasses.dataclass(frozen=True)
class PairScreen:
    """What a release checks in each pair besides the filters: the non-word vocabulary of the resource's corpus
    (``generation.screening``, as a HIT batch; None: not screened, ``note`` says why) and the longest reference
    the regressor was trained on (``length_limit`` tokens: past it no judgment backs a score)."""

    vocabulary: Vocabulary | None
    note: str
    length_limit: int

    def as_dict(self) -> dict[str, Any]:
        """The manifest's record of the screen."""
        return {
            "copy_rule": COPY_RULE,
            "non_word_rule": NON_WORD_RULE,
            "vocabulary": self.vocabulary.source if self.vocabulary is not None else None,
            "note": None if self.vocabulary is not None else self.note,
            "length_limit": self.length_limit,
        }


def pair_screen(scored: ScoredResource) -> PairScreen:
    """The screen of ``scored``'s release: its corpus's vocabulary and its regressor's training lengths (the
    longest reference bucket judged in its campaign; without a campaign, the longest bucket a batch samples)."""
    vocabulary, note = screen_vocabulary(scored.resource.corpus)
    campaign = scored.regressor.campaign_id
    longest = (
        Reference.objects.filter(campaign_id=campaign).aggregate(m=Max("length_bucket"))["m"] if campaign else None
    )
    return PairScreen(vocabulary=vocabulary, note=note, length_limit=longest or max(LENGTH_BUCKETS))


def _marked(record: dict[str, Any], screen: PairScreen, filters: ReleaseFilters, counts: dict[str, int]) -> list[dict]:
    """The record's candidates less its non-words (unless ``filters.keep_non_words``), each pair without an
    honest score given a null score and its ``caveat``; counts the non-words and the long references."""
    candidates = record.get("candidates") or []
    pairs = [(record["reference"], c["text"]) for c in candidates]
    verdicts = screen_verdicts(pairs, screen.vocabulary, cached=False)  # a whole resource: read once
    long_reference = (record.get("length") or 0) > screen.length_limit
    kept = []
    for c, (verdict, _) in zip(candidates, verdicts):
        if verdict == NON_WORD:
            counts["non_words_read"] += 1
            if not filters.keep_non_words:
                continue
            c = {**c, "score": None, "caveat": NON_WORDS}
        elif long_reference:
            c = {**c, "score": None, "caveat": LONG_REFERENCE}
        elif c.get("score") is None:
            c = {**c, "caveat": UNSCORED}
        kept.append(c)
    return kept


def _kept_records(
    scored: ScoredResource, filters: ReleaseFilters, counts: dict[str, int], screen: PairScreen
) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each scored record (shard order, one at a time) with its candidates that pass the screen and ``filters``,
    marked (``_marked``); counts as it goes."""
    storage = get_storage()
    for entry in sorted(scored.shards, key=lambda e: e["index"]):
        for record in read_jsonl_gz(entry["key"], storage=storage):
            candidates = record.get("candidates") or []
            counts["references_read"] += 1
            counts["pairs_read"] += len(candidates)
            counts["copies_read"] += sum(is_copy(record["reference"], c["text"]) for c in candidates)
            kept = filter_candidates(filters, {**record, "candidates": _marked(record, screen, filters, counts)})
            if not kept:
                continue
            counts["references"] += 1
            counts["pairs"] += len(kept)
            counts["pairs_unscored"] += sum(c.get("score") is None for c in kept)
            counts["non_words"] += sum(c.get("caveat") == NON_WORDS for c in kept)
            counts["long_reference_pairs"] += sum(c.get("caveat") == LONG_REFERENCE for c in kept)
            if filters.keep_copies:
                counts["copies"] += sum(is_copy(record["reference"], c["text"]) for c in kept)
            yield record, kept


def _write_pairs(
    write: Callable[[str], None],
    scored: ScoredResource,
    filters: ReleaseFilters,
    fmt: str,
    counts: dict[str, int],
    screen: PairScreen,
) -> None:
    if fmt == "tsv":
        write(_tsv(PAIR_COLUMNS))
    for record, kept in _kept_records(scored, filters, counts, screen):
        if fmt == "jsonl":
            paraphrases = [
                {
                    "paraphrase": c["text"],
                    "systems": c.get("systems") or [],
                    "constraints": c.get("constraints") or {},
                    "nll": c.get("nll"),
                    "score": c.get("score"),
                    "caveat": c.get("caveat"),
                }
                for c in kept
            ]
            write(
                json.dumps(
                    {
                        "ref_index": record.get("ref_index"),
                        "reference": record["reference"],
                        "source": record.get("source", ""),
                        "length": record.get("length"),
                        "paraphrases": paraphrases,
                    },
                    ensure_ascii=False,
                    sort_keys=True,
                )
                + "\n"
            )
        else:
            for c in kept:
                write(
                    _tsv(
                        (
                            record.get("ref_index"),
                            record["reference"],
                            record.get("source", ""),
                            record.get("length"),
                            c["text"],
                            " ".join(c.get("systems") or []),
                            c.get("nll"),
                            c.get("score"),
                            c.get("constraints") or {},
                            c.get("caveat"),
                        )
                    )
                )


def _judgment_rows(campaigns: list[Campaign], counts: dict[str, int]) -> Iterator[tuple]:
    """The release's judgments in ``JUDGMENT_COLUMNS`` order, ``sys_id`` as a list (database cursor)."""
    for campaign in campaigns:
        counted = counted_workers(campaign)
        systems: dict[int, list[str]] = {}
        for cid, system in (
            CandidateSystem.objects.filter(candidate__reference__campaign=campaign)
            .values_list("candidate_id", "system")
            .order_by("candidate_id", "system")
        ):
            systems.setdefault(cid, []).append(system)
        anonymous: dict[int, int] = {}
        rows = (
            Judgment.objects.counted()
            .filter(candidate__reference__campaign=campaign)
            .order_by("candidate__reference__length_bucket", "candidate__reference_id", "candidate_id", "pk")
            .values_list(
                "worker_id",
                "candidate_id",
                "candidate__reference__ref_id",
                "candidate__reference__length_bucket",
                "candidate__reference__text",
                "candidate__text",
                "candidate__nll",
                "score",
                "fluency",
            )
        )
        for worker, cid, ref_id, bucket, ref_text, text, nll, score, fluency in rows.iterator(chunk_size=2000):
            anon = anonymous.setdefault(worker, len(anonymous) + 1)
            sys_ids = sorted(systems.get(cid, []), key=system_sort_key)
            counts["judgments"] += 1
            yield (campaign.name, anon, worker in counted, ref_id, bucket, ref_text, sys_ids, text, nll, score, fluency)


def _write_judgments(write: Callable[[str], None], campaigns: list[Campaign], counts: dict[str, int]) -> None:
    write(_tsv(JUDGMENT_COLUMNS))
    for row in _judgment_rows(campaigns, counts):
        campaign, anon, counted, ref_id, bucket, ref_text, sys_ids, text, nll, score, fluency = row
        write(
            _tsv((campaign, anon, int(counted), ref_id, bucket, ref_text, " ".join(sys_ids), text, nll, score, fluency))
        )


def _write_parquet(
    out: LocalStorage,
    scored: ScoredResource,
    filters: ReleaseFilters,
    campaigns: list[Campaign],
    counts: dict[str, int],
    files: dict[str, dict],
    screen: PairScreen,
) -> None:
    """``pairs.parquet`` and ``judgments.parquet``: the rows of the TSV files, typed, a row group at a time."""
    from .release_parquet import JUDGMENTS_SCHEMA, PAIRS_SCHEMA  # pyarrow: loaded when used, not with the app

    files[PAIRS_PARQUET] = {"name": PAIRS_PARQUET}
    with _hashed(out, PAIRS_PARQUET, files[PAIRS_PARQUET]) as sink:
        rows = ParquetRows(sink, PAIRS_SCHEMA)
        for record, kept in _kept_records(scored, filters, counts, screen):
            for c in kept:
                rows.append(pair_row(record, c))
        rows.close()
    files[JUDGMENTS_PARQUET] = {"name": JUDGMENTS_PARQUET}
    with _hashed(out, JUDGMENTS_PARQUET, files[JUDGMENTS_PARQUET]) as sink:
        rows = ParquetRows(sink, JUDGMENTS_SCHEMA)
        for row in _judgment_rows(campaigns, counts):
            rows.append(row)
        rows.close()


def card_license(fmt: str, license: str | None) -> str:
    """The format checked, and the release's licence as its SPDX id (``release_card.license_check``; none given:
    ``NOASSERTION``, stated as such on the card and in the manifest), for every format: the one check of the
    command, the admin's form and the job."""
    if fmt not in FORMATS:
        raise ReleaseError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    try:
        return license_check(license)
    except ValueError as exc:
        raise ReleaseError(str(exc)) from None


def release_license_check(scored: ScoredResource, license: str) -> None:
    """ReleaseError when ``license`` (an SPDX id) grants more than the terms of the resource's corpus allow
    (``infra.licences.license_conflict``): the message says why and what to give instead."""
    corpus = scored.resource.corpus
    conflict = license_conflict(corpus.license or NO_LICENSE, license)
    if conflict is not None:
        terms = f" ({corpus.terms})" if corpus.terms else ""
        raise LicenseConflictError(
            f"--license {license} is refused for a release of corpus {corpus.name!r}, under {corpus.license}{terms}: "
            f"{conflict}"
        )


def release_provenance(scored: ScoredResource) -> dict[str, Any]:
    """Where the release comes from, by name (never a path of this machine: ``release_card.local_name``): the
    corpus and the file it was imported from, the paraphrase model and its weights' SHA-256, the IDF table, the
    PPDB file, the regressor and its training campaign."""
    resource, regressor = scored.resource, scored.regressor
    generation, signature = resource.settings or {}, regressor.signature or {}
    corpus = resource.corpus
    return {
        "corpus": {
            "name": corpus.name,
            "source": local_name(corpus.source_name) or None,
            "origin": corpus.source or None,
            "license": corpus.license or NO_LICENSE,
            "terms": corpus.terms or None,
            "format": corpus.format,
            "references": corpus.n_references,
        },
        "model": {"name": local_name(generation.get("model")), "weights_sha256": generation.get("model_sha256")},
        "idf_table": generation.get("idf_table_name"),
        "ppdb": local_name(generation.get("ppdb")),
        "regressor": {
            "name": regressor.name,
            "campaign": signature.get("campaign"),
            "estimator": signature.get("estimator"),
            "encoder": signature.get("encoder"),
            "signature": signature.get("string"),
        },
    }


def _text_kind(field: Any, *, jsonl: bool = False) -> str:
    """How a column's Arrow type is written in a TSV cell (or a JSONL value)."""
    import pyarrow.types as pa_types  # loaded when used, not with the app

    kind = field.type
    if pa_types.is_integer(kind):
        return "integer"
    if pa_types.is_floating(kind):
        return "number or null" if jsonl else "number (empty: null)"
    if pa_types.is_boolean(kind):
        return "true/false" if jsonl else "0 or 1"
    if field.name == "constraints":
        return "object" if jsonl else "JSON object"
    if pa_types.is_list(kind):
        return "list of strings" if jsonl else "space-separated"
    return "string" if jsonl else "text"


def _card_columns(fmt: str, names: dict[str, str]) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Per file, its ``(column, type, meaning)`` rows for the card: the Arrow types for parquet, how the text writes
    them else (one schema, ``release_parquet``, for every format)."""
    from .release_parquet import JUDGMENTS_SCHEMA, PAIRS_SCHEMA  # pyarrow: loaded when used, not with the app

    pairs_fields = {f.name: f for f in PAIRS_SCHEMA}
    if fmt == "parquet":
        return [
            (names["pairs"], [(f.name, str(f.type), PAIR_MEANINGS[f.name]) for f in PAIRS_SCHEMA]),
            (names["judgments"], [(f.name, str(f.type), JUDGMENT_MEANINGS[f.name]) for f in JUDGMENTS_SCHEMA]),
        ]
    judgments = [(f.name, _text_kind(f), JUDGMENT_MEANINGS[f.name]) for f in JUDGMENTS_SCHEMA]
    if fmt == "jsonl":
        pairs = [
            (k, _text_kind(pairs_fields[k], jsonl=True), PAIR_MEANINGS[k])
            if k in pairs_fields
            else (k, "list of objects", "the reference's paraphrases, each an object with the keys below")
            for k in JSONL_REFERENCE_KEYS
        ]
        pairs += [
            (f"paraphrases[].{k}", _text_kind(pairs_fields[k], jsonl=True), PAIR_MEANINGS[k])
            for k in JSONL_PARAPHRASE_KEYS
        ]
        return [(names["pairs"], pairs), (names["judgments"], judgments)]
    return [
        (names["pairs"], [(f.name, _text_kind(f), PAIR_MEANINGS[f.name]) for f in PAIRS_SCHEMA]),
        (names["judgments"], judgments),
    ]


def _make_readable(folder: Path, names: list[str], *, up_to: Path | None = None) -> None:
    """The release's files 0644 and its folder 0755 (and, with ``up_to``, the folders between ``up_to`` and it):
    a release is for others to read, while storage creates its files owner-only."""
    for name in names:
        os.chmod(folder / name, FILE_MODE)
    os.chmod(folder, FOLDER_MODE)
    if up_to is not None:
        for parent in folder.parents:
            if parent == up_to or up_to not in parent.parents:
                break
            os.chmod(parent, FOLDER_MODE)


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, deepest first (what a failed export removes)."""
    return [p for p in (folder, *folder.parents) if not p.exists()]


def _remove_folders(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first) where they are empty: those a failed export created."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _move_into_place(staging: Path, out_dir: Path, names: list[str], moved: list[Path]) -> None:
    """The complete release's files from ``staging`` into ``out_dir``: the whole folder in one rename when
    ``out_dir`` does not exist, else file by file with the manifest last (``moved`` gets each one moved)."""
    if not out_dir.exists():
        staging.rename(out_dir)
        return
    if (out_dir / MANIFEST_FILE).exists():  # made meanwhile
        raise ReleaseError(f"{out_dir} already holds a release ({MANIFEST_FILE}); choose an empty folder")
    for name in names:  # release_files: the manifest comes last
        os.replace(staging / name, out_dir / name)
        moved.append(out_dir / name)


def release_write(
    *,
    scored: ScoredResource,
    out_dir: str | Path,
    version: str,
    fmt: str = "tsv",
    filters: ReleaseFilters | None = None,
    license: str | None = None,
) -> dict[str, Any]:
    """Write a release's files into ``out_dir`` (which must not hold a release yet); returns the manifest.
    ``license``: an SPDX id (``card_license``), stated on the card and in the manifest. All or nothing: the
    files are made in a staging folder beside ``out_dir`` and moved in once complete; on any failure nothing
    is left (the staging folder and any folder made for ``out_dir`` are removed)."""
    license = card_license(fmt, license)
    release_license_check(scored, license)
    release_version_check(version)
    filters = filters or ReleaseFilters()
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ReleaseError(f"{out_dir} is a file, not a folder")
    if any(p.exists() and not p.is_dir() for p in out_dir.parents):
        raise ReleaseError(f"{out_dir}: a part of that path is a file, not a folder")
    if (out_dir / MANIFEST_FILE).exists():
        raise ReleaseError(f"{out_dir} already holds a release ({MANIFEST_FILE}); choose an empty folder")
    created = _missing_folders(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
    moved: list[Path] = []
    try:
        manifest = _write_release_files(LocalStorage(staging), scored, version, fmt, filters, license)
        _move_into_place(staging, out_dir, release_files(manifest), moved)
    except BaseException:
        for path in moved:
            path.unlink(missing_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
        _remove_folders(created)
        raise
    shutil.rmtree(staging, ignore_errors=True)  # renamed into out_dir (gone), or emptied file by file
    _make_readable(out_dir, release_files(manifest))
    return manifest


def _write_release_files(
    out: LocalStorage, scored: ScoredResource, version: str, fmt: str, filters: ReleaseFilters, license: str
) -> dict[str, Any]:
    """Write every file of the release into ``out`` (the staging folder), the manifest last; returns it."""
    from .release_parquet import JUDGMENTS_SCHEMA, PAIRS_SCHEMA  # pyarrow: loaded when used, not with the app

    counts = dict.fromkeys(
        (
            "references_read",
            "pairs_read",
            "references",
            "pairs",
            "pairs_unscored",
            "copies_read",
            "copies",
            "non_words_read",
            "non_words",
            "long_reference_pairs",
            "judgments",
        ),
        0,
    )
    screen = pair_screen(scored)
    files: dict[str, dict] = {}
    pairs_name = pairs_file_name(fmt)
    if fmt == "parquet":
        campaigns = release_campaigns(scored)
        _write_parquet(out, scored, filters, campaigns, counts, files, screen)
        columns = {PAIRS_PARQUET: schema_columns(PAIRS_SCHEMA), JUDGMENTS_PARQUET: schema_columns(JUDGMENTS_SCHEMA)}
    else:
        files[pairs_name] = {"name": pairs_name}
        with _gzip_lines(out, pairs_name, files[pairs_name]) as write:
            _write_pairs(write, scored, filters, fmt, counts, screen)
        campaigns = release_campaigns(scored)
        files[JUDGMENTS_FILE] = {"name": JUDGMENTS_FILE}
        with _gzip_lines(out, JUDGMENTS_FILE, files[JUDGMENTS_FILE]) as write:
            _write_judgments(write, campaigns, counts)
        columns = {
            pairs_name: list(PAIR_COLUMNS)
            if fmt == "tsv"
            else {"object": list(JSONL_REFERENCE_KEYS), "paraphrases": list(JSONL_PARAPHRASE_KEYS)},
            JUDGMENTS_FILE: list(JUDGMENT_COLUMNS),
        }
    regressor = scored.regressor
    judgments_name = JUDGMENTS_PARQUET if fmt == "parquet" else JUDGMENTS_FILE
    manifest = without_local_paths(
        {
            "format": RELEASE_FORMAT,
            "resource": scored.resource.name,
            "version": version,
            "license": license,
            "pairs_format": fmt,
            "columns": columns,
            "files": files,
            "counts": {**counts, "campaigns": len(campaigns)},
            "copy_rule": COPY_RULE,
            "screen": screen.as_dict(),
            "campaigns": [c.name for c in campaigns],
            "provenance": release_provenance(scored),
            "regressor": {
                "name": regressor.name,
                "spearman_test": (regressor.metrics or {}).get("spearman_test"),
                "held_out": held_out_rho(regressor.metrics).as_dict(),
                "metrics": regressor.metrics,
                "signature": regressor.signature,
            },
            "scored_shards": [
                {"index": e["index"], "n_pairs": e["n_pairs"], "sha256": e["sha256"]}
                for e in sorted(scored.shards, key=lambda e: e["index"])
            ],
            "generation": scored.resource.settings,
            "filters": filters.as_dict(),
        }
    )
    files[CARD_FILE] = {"name": CARD_FILE}
    card = dataset_card(manifest, _card_columns(fmt, {"pairs": pairs_name, "judgments": judgments_name}))
    with _hashed(out, CARD_FILE, files[CARD_FILE]) as sink:
        sink.write(card.encode("utf-8"))
    manifest["files"] = files
    try:  # strict JSON: a NaN or an infinity would make a manifest no JSON reader takes
        text = json.dumps(manifest, ensure_ascii=False, sort_keys=True, indent=2, allow_nan=False)
    except ValueError as exc:
        raise ReleaseError(f"the release's manifest holds a number JSON cannot write ({exc})") from None
    with out.open_write(MANIFEST_FILE) as fh:
        fh.write((text + "\n").encode("utf-8"))
    return manifest


def next_version(resource: Resource) -> str:
    numbers = [
        int(m.group(1))
        for v in resource.releases.values_list("version", flat=True)
        if (m := re.fullmatch(r"v(\d+)", v))
    ]
    return f"v{max(numbers, default=0) + 1}"


def default_release_dir(resource: Resource, version: str) -> Path:
    """Where ``export_release`` writes when no ``--out`` is given: ``<var>/releases/<resource>/<version>``, one
    folder per version, so a second export (the next version) never meets the first one's files."""
    name = resource.name if re.fullmatch(r"[\w][\w.-]*", resource.name) else str(resource.pk)
    return Path(settings.VAR_DIR) / "releases" / name / version


def release_files(manifest: dict[str, Any]) -> list[str]:
    """The files of a release, manifest included (the names the API serves)."""
    return sorted(manifest.get("files") or {}) + [MANIFEST_FILE]


def _upload(out_dir: Path, names: list[str], target: LocalStorage | S3Storage) -> None:
    for name in names:
        with open(out_dir / name, "rb") as src, target.open_write(name) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    if isinstance(target, LocalStorage):  # readable by others there too, up to the configured storage's root
        storage = get_storage()
        _make_readable(target.root, names, up_to=storage.root if isinstance(storage, LocalStorage) else None)


def release_export(
    *,
    resource: Resource,
    out_dir: str | Path,
    version: str | None = None,
    fmt: str = "tsv",
    filters: ReleaseFilters | None = None,
    regressor: str | None = None,
    upload: str | None = None,
    license: str | None = None,
    job: Any = None,
) -> Release:
    """Export a release of ``resource`` into ``out_dir`` (optionally uploaded to ``upload``, e.g.
    ``s3://bucket/prefix``) and record it as a ``Release`` row (``job``: the export job making it, if
    any); its location is the upload URL if any, else the folder. Of two exports of one version at once,
    the second to finish fails with a ReleaseError (the row's unique constraint)."""
    version = release_version_check(version) if version is not None else next_version(resource)
    scored = scoring_for(resource, regressor)
    release_version_free(resource, version)
    target = storage_from_url(upload) if upload else None
    if target is not None and target.exists(MANIFEST_FILE):
        raise ReleaseError(f"{target.url} already holds a release ({MANIFEST_FILE})")
    out_dir = Path(out_dir).resolve()
    created = _missing_folders(out_dir)
    manifest = release_write(scored=scored, out_dir=out_dir, version=version, fmt=fmt, filters=filters, license=license)
    names = release_files(manifest)
    try:
        if target is not None:
            _upload(out_dir, names, target)
        try:
            with transaction.atomic():
                return Release.objects.create(
                    resource=resource,
                    version=version,
                    manifest=manifest,
                    job=job,
                    location=target.url if target is not None else str(out_dir),
                )
        except IntegrityError:
            if not Release.objects.filter(resource=resource, version=version).exists():
                raise  # not the version's uniqueness: say what it was, not "another export"
            raise ReleaseError(
                f"release {version!r} of {resource.name!r} was made by another export meanwhile: choose another version"
            ) from None
    except BaseException:
        _discard(out_dir, names, created, target)
        raise


def _discard(out_dir: Path, names: list[str], created: list[Path], target: LocalStorage | S3Storage | None) -> None:
    """Undo a failed export: its files in ``out_dir`` and at the upload's place, and the folders it made; but
    never files a recorded release stands on (an export of the same version that finished first, there)."""
    recorded = set(
        Release.objects.filter(location__in=[str(out_dir), getattr(target, "url", "")]).values_list(
            "location", flat=True
        )
    )
    for name in reversed(names):  # the manifest first: what is left is never taken for a release
        if str(out_dir) not in recorded:
            (out_dir / name).unlink(missing_ok=True)
        if target is not None and target.url not in recorded:
            with contextlib.suppress(Exception):  # the export's own error is the one to report
                target.delete(name)
    _remove_folders(created)


def release_storage(release: Release) -> LocalStorage | S3Storage:
    return storage_from_url(release.location)


def release_open(release: Release, name: str) -> BinaryIO:
    """A readable stream of one of the release's files; LookupError for a name it does not have."""
    if name not in release_files(release.manifest):
        raise LookupError(f"release {release} has no file {name!r}")
    return release_storage(release).open_read(name)


def sees_every_release(user) -> bool:
    """Active staff holding ``RELEASE_VIEW_PERMS``: the admin's release pages and the release API ask this."""
    return staff_has_perms(user, RELEASE_VIEW_PERMS)


def releases_visible_to(user) -> Any:
    """Every release for ``sees_every_release``; other signed-in users (staff without the permission
    too) those they were given; anonymous none."""
    if not getattr(user, "is_authenticated", False):
        return Release.objects.none()
    qs = Release.objects.select_related("resource")
    return qs if sees_every_release(user) else qs.filter(allowed_users=user)
