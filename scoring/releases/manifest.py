"""A release's files written into one folder, the card and the manifest last: what the release says about itself.

``manifest.json`` holds the version, the licence (SPDX), the pairs' format and layout, the counts, ``files`` (name
-> ``{name, sha256, bytes}``), the provenance by name (never a path of this machine:
``scoring.releases.card.local_name``), the regressor (name, held-out rho with n and interval, metrics with the
calibration, signature), ``calibration`` (whether the pairs' ``score`` went through the regressor's calibration
map, fitted on how many held-out pairs of which campaign, or why not and how to get it: ``score_calibration``), the
generation settings (``Resource.settings``, paths turned into names), the screen and the filters. It is strict JSON
(no NaN or Infinity) and holds no timestamp, so the same inputs give the same bytes; the card (``README.md``) is
built from it alone.
"""

from __future__ import annotations

import json
from typing import Any

from infra.storage import LocalStorage
from scoring.models import ScoredResource
from scoring.regressor.held_out import MIN_CALIBRATION_PAIRS, held_out_rho, score_calibration_of
from scoring.releases.card import CARD_FILE, NO_LICENSE, dataset_card, local_name, without_local_paths
from scoring.releases.checks import ReleaseError, layout_check
from scoring.releases.columns import (
    JUDGMENTS_FILE,
    MANIFEST_FILE,
    PARAFORGE,
    RELEASE_FORMAT,
    card_columns,
    manifest_columns,
    pairs_file_name,
)
from scoring.releases.filters import COPY_RULE, NEAR_COPY_RULE, ReleaseFilters
from scoring.releases.rows import BY_CAMPAIGN, COUNT_KEYS, judgment_sources, pair_screen, release_campaigns
from scoring.releases.writers import gzip_lines, hashed, write_judgments, write_pairs, write_parquet


def release_files(manifest: dict[str, Any]) -> list[str]:
    """The files of a release, manifest included (the names the API serves), the manifest last."""
    return sorted(manifest.get("files") or {}) + [MANIFEST_FILE]


def release_provenance(scored: ScoredResource) -> dict[str, Any]:
    """Where the release comes from, by name (never a path of this machine: ``card.local_name``): the
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
        "model": {
            "name": local_name(generation.get("model")),
            "weights_sha256": generation.get("model_sha256"),
            # a model converted from a GGUF file: the file, its stated name and licence, its licence files
            **({"origin": generation["model_origin"]} if generation.get("model_origin") else {}),
        },
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


CALIBRATED, TOO_FEW_PAIRS, NOT_KEPT = "calibrated", "too_few_pairs", "not_kept"


def score_calibration(scored: ScoredResource) -> dict[str, Any]:
    """The manifest's ``calibration``: ``applied`` (the pairs' ``score`` is ``raw_score`` through the regressor's
    map) and ``status`` (``calibrated``; ``too_few_pairs``: its held-out part was under ``min_pairs``;
    ``not_kept``: trained before maps were kept), the ``pairs`` and ``n_references`` the map was fitted on, their
    ``campaign`` and ``target``, and a ``note`` in words (without a map: how to get one). The breakpoints are in
    ``regressor.metrics.calibration_map``."""
    regressor = scored.regressor
    metrics, campaign = regressor.metrics or {}, (regressor.signature or {}).get("campaign")
    found = score_calibration_of(metrics)
    retrain = (
        f"train_regressor {campaign or 'CAMPAIGN'} --name {regressor.name} --replace, with the settings of its "
        f"signature; then score_resource {scored.resource.name} --regressor {regressor.name} --wait"
    )
    if found is None:
        status = NOT_KEPT
        note = (
            "not calibrated: the regressor was trained before Paraforge kept a calibration map, so score is its "
            f"raw prediction (equal to raw_score), not an estimate of human similarity; train it again ({retrain}) "
            "and export again for calibrated scores"
        )
    elif not found.fitted:
        status = TOO_FEW_PAIRS
        note = (
            f"not calibrated: the regressor's held-out part had {found.pairs:,} pairs, fewer than the "
            f"{found.min_pairs} a calibration map needs, so score is its raw prediction (equal to raw_score); "
            f"judge more pairs, train it again ({retrain}) and export again for calibrated scores"
        )
    else:
        status = CALIBRATED
        note = (
            f"score is raw_score through an isotonic map fitted on {found.pairs:,} held-out pairs"
            + (f" of campaign {campaign}" if campaign else "")
            + ": the expected mean human similarity of held-out pairs predicted like this one"
        )
    return {
        "applied": status == CALIBRATED,
        "status": status,
        "method": found.method if found is not None and found.fitted else None,
        "pairs": found.pairs if found is not None else None,
        "n_references": metrics.get("n_references_test") if found is not None and found.fitted else None,
        "min_pairs": found.min_pairs if found is not None else MIN_CALIBRATION_PAIRS,
        "campaign": campaign,
        "target": metrics.get("target"),
        "note": note,
    }


def write_release_files(
    out: LocalStorage,
    scored: ScoredResource,
    version: str,
    fmt: str,
    filters: ReleaseFilters,
    license: str,
    layout: str = PARAFORGE,
) -> dict[str, Any]:
    """Write every file of the release into ``out`` (the staging folder), the manifest last; returns it.
    ``layout``: the pairs' (``columns.LAYOUTS``; parabank2 only with ``fmt`` tsv, ``checks.layout_check``)."""
    layout_check(fmt, layout)
    counts = dict.fromkeys(COUNT_KEYS, 0)
    screen = pair_screen(scored)
    files: dict[str, dict] = {}
    if fmt == "parquet":
        campaigns = release_campaigns(scored)
        write_parquet(out, scored, filters, campaigns, counts, files, screen)
    else:
        pairs_name = pairs_file_name(fmt, layout)
        files[pairs_name] = {"name": pairs_name}
        with gzip_lines(out, pairs_name, files[pairs_name]) as write:
            write_pairs(write, scored, filters, fmt, counts, screen, layout)
        campaigns = release_campaigns(scored)
        files[JUDGMENTS_FILE] = {"name": JUDGMENTS_FILE}
        with gzip_lines(out, JUDGMENTS_FILE, files[JUDGMENTS_FILE]) as write:
            write_judgments(write, campaigns, counts)
    regressor = scored.regressor
    by_campaign = counts.pop(BY_CAMPAIGN, {})
    manifest = without_local_paths(
        {
            "format": RELEASE_FORMAT,
            "resource": scored.resource.name,
            "version": version,
            "license": license,
            "pairs_format": fmt,
            "layout": layout,
            "columns": manifest_columns(fmt, layout),
            "files": files,
            "counts": {**counts, "campaigns": len(campaigns)},
            "copy_rule": COPY_RULE,
            "near_copy_rule": NEAR_COPY_RULE,
            "screen": screen.as_dict(),
            "campaigns": [c.name for c in campaigns],
            "judgment_sources": judgment_sources(scored, campaigns, by_campaign),
            "provenance": release_provenance(scored),
            "regressor": {
                "name": regressor.name,
                "spearman_test": (regressor.metrics or {}).get("spearman_test"),
                "held_out": held_out_rho(regressor.metrics).as_dict(),
                "metrics": regressor.metrics,
                "signature": regressor.signature,
            },
            "calibration": score_calibration(scored),
            "scored_shards": [
                {"index": e["index"], "n_pairs": e["n_pairs"], "sha256": e["sha256"]}
                for e in sorted(scored.shards, key=lambda e: e["index"])
            ],
            "generation": scored.resource.settings,
            "filters": filters.as_dict(),
        }
    )
    files[CARD_FILE] = {"name": CARD_FILE}
    card = dataset_card(manifest, card_columns(fmt, layout))
    with hashed(out, CARD_FILE, files[CARD_FILE]) as sink:
        sink.write(card.encode("utf-8"))
    manifest["files"] = files
    try:  # strict JSON: a NaN or an infinity would make a manifest no JSON reader takes
        text = json.dumps(manifest, ensure_ascii=False, sort_keys=True, indent=2, allow_nan=False)
    except ValueError as exc:
        raise ReleaseError(f"the release's manifest holds a number JSON cannot write ({exc})") from None
    with out.open_write(MANIFEST_FILE) as fh:
        fh.write((text + "\n").encode("utf-8"))
    return manifest
