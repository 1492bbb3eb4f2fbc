"""The result pages of the researcher's path (``jobs.results``): what a finished generate, train, score or export
job made, the figures that matter, and where to go next.

Why one module: the four steps follow one another, so each page links the next step and the campaign dashboard,
and states the held-out rho the same way (``scoring.regressor.held_out``). The generate job is described here too (it is
generation/'s kind, but its next steps are annotation's and scoring's pages; generation/ imports neither).
Every link is offered only to a user who may open it; what a job made and was since deleted shows as text.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from annotation.models import Campaign
from api.permissions import staff_has_perms
from generation.constraints.systems import system_display_name, system_rank
from generation.generation_job import KIND as GENERATE_KIND
from generation.models import Resource
from jobs.models import Job
from jobs.results import FileLink, JobOutcome, Link, Table, register_outcome, url_or_none
from scoring.models import Regressor, Release, ScoredResource
from scoring.permissions import EXPORT_PERMS, RESEARCH_PERMS, SCORE_PERMS
from scoring.regressor.held_out import (
    calibration_note,
    calibration_of,
    calibration_status,
    calibration_table_cells,
    calibration_title,
    cv_rho,
    held_out_rho,
    score_calibration_of,
)
from scoring.regressor.job import KIND as TRAIN_KIND
from scoring.releases.access import releases_visible_to
from scoring.releases.card import NO_LICENSE
from scoring.releases.job import KIND as EXPORT_KIND
from scoring.releases.manifest import release_files
from scoring.scored.job import KIND as SCORE_KIND


def _dashboards(user: Any, campaigns: list[Campaign]) -> list[Link]:
    if not staff_has_perms(user, RESEARCH_PERMS):
        return []
    return [Link(f"dashboard of campaign {c.name}", reverse("campaign_dashboard", args=[c.pk])) for c in campaigns]


def _admin_link(user: Any, text: str, obj: Any) -> Link | str:
    """A link to ``obj``'s admin page when the user may view it, else its name as text."""
    meta = obj._meta
    if not (user.is_active and user.is_staff and user.has_perm(f"{meta.app_label}.view_{meta.model_name}")):
        return text
    return Link(text, reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk]))


def _rho_figures(metrics: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The held-out rho and, beside it, the nested cross-validation's (over every reference) when it was kept."""
    cv = cv_rho(metrics)
    figures = [("held-out Spearman's rho", held_out_rho(metrics).text())]
    if cv is not None:
        folds = (metrics or {}).get("cv_folds")
        figures.append((f"cross-validated Spearman's rho ({folds} folds by reference, nested)", cv.text()))
    if metrics and "calibration_map" in metrics:  # a regressor trained before maps were kept: its table says so
        figures.append(("calibration map", calibration_status(score_calibration_of(metrics))))
    return figures


def _calibration_table(metrics: dict[str, Any] | None) -> list[Table]:
    calibration = calibration_of(metrics)
    if calibration is None:
        return []
    score_map = score_calibration_of(metrics)
    header, rows = calibration_table_cells(calibration, score_map)
    return [
        Table(
            title=calibration_title(score_map),
            header=header,
            rows=rows,
            note=calibration_note(calibration, score_map),
        )
    ]


def train_outcome(job: Job, user: Any) -> JobOutcome | None:
    """The regressor: its held-out rho with n and interval (warned when n is small), its calibration, and on to
    scoring a resource with it."""
    result = job.result or {}
    row = Regressor.objects.select_related("campaign").filter(name=result.get("name")).first()
    same = row is not None and (row.signature or {}).get("string") == result.get("signature")
    metrics = (row.metrics or {}) if same else {k: result.get(k) for k in ("spearman_test", "n_test", "n_train")}
    if not same:
        metrics.update(
            {
                k: result[k]
                for k in ("spearman_test_ci95", "spearman_cv", "spearman_cv_ci95", "cv_folds")
                if result.get(k) is not None
            }
        )
    rho = held_out_rho(metrics)
    outcome = JobOutcome(made=_admin_link(user, f"regressor {result.get('name')}", row) if row else result.get("name"))
    if row is not None and staff_has_perms(user, SCORE_PERMS):
        outcome.next.append(
            Link("score a resource with it…", f"{reverse('admin:scoring_scoredresource_score')}?regressor={row.pk}")
        )
    if row is None:
        outcome.warnings.append(f"Regressor {result.get('name')!r} no longer exists (deleted since).")
    elif not same:
        outcome.warnings.append("The regressor was trained again since this job: its page shows the newer training.")
    outcome.warnings += [w for w in (rho.warning(),) if w]
    outcome.figures += _rho_figures(metrics)
    outcome.figures += [
        ("training pairs", f"{metrics.get('n_train', 0) or 0:,}"),
        ("estimator", str(result.get("estimator") or "")),
        ("signature", str(result.get("signature") or "")),
    ]
    outcome.tables += _calibration_table(metrics if same else None)
    if row is not None and row.campaign is not None:
        outcome.links += _dashboards(user, [row.campaign])
    return outcome


def score_outcome(job: Job, user: Any) -> JobOutcome | None:
    """The scored resource: pairs scored and skipped, the regressor's held-out rho, and on to exporting a release."""
    result = job.result or {}
    scored = (
        ScoredResource.objects.select_related("resource", "regressor__campaign")
        .filter(pk=result.get("scored_resource"))
        .first()
    )
    n_pairs, skipped = int(result.get("n_pairs") or 0), int(result.get("n_skipped") or 0)
    text = f"{result.get('resource')} scored ({n_pairs} pairs)"
    outcome = JobOutcome(made=_admin_link(user, text, scored) if scored else text)
    if scored is None:
        outcome.warnings.append("This scoring no longer exists (deleted since).")
        return outcome
    if staff_has_perms(user, EXPORT_PERMS):
        outcome.next.append(Link("export a release…", reverse("admin:scoring_scoredresource_export", args=[scored.pk])))
    rho = held_out_rho(scored.regressor.metrics)
    outcome.figures += [
        ("pairs scored", f"{n_pairs - skipped:,} of {n_pairs:,}"),
        ("pairs skipped", f"{skipped:,} (reference over 100 subword tokens: no score)"),
        ("shards", f"{int(result.get('shards') or 0):,}"),
        ("regressor", scored.regressor.name),
        *_rho_figures(scored.regressor.metrics),
    ]
    outcome.warnings += [w for w in (rho.warning(),) if w]
    if scored.regressor.campaign is not None:
        outcome.links += _dashboards(user, [scored.regressor.campaign])
    return outcome


def export_outcome(job: Job, user: Any) -> JobOutcome | None:
    """The release: its files to download (for a user who may), what it holds (pairs, copies left out, licence,
    held-out rho with n), its calibration, the dashboards of its campaigns, and on to sharing it."""
    result = job.result or {}
    release = Release.objects.select_related("resource").filter(pk=result.get("release")).first()
    text = f"release {result.get('version')} of {release.resource.name if release else 'a deleted resource'}"
    if release is None:
        return JobOutcome(made=text, warnings=["This release no longer exists (deleted since)."])
    manifest = release.manifest or {}
    counts, regressor = manifest.get("counts") or {}, manifest.get("regressor") or {}
    outcome = JobOutcome(made=_admin_link(user, text, release))
    if isinstance(outcome.made, Link) and user.has_perm("scoring.change_release"):
        outcome.next.append(Link("choose who else may download it…", outcome.made.url + "#id_allowed_users"))
    if releases_visible_to(user).filter(pk=release.pk).exists():
        files = manifest.get("files") or {}
        outcome.files = [
            FileLink(
                name=name,
                url=reverse("release-file", args=[release.pk, name]),
                bytes=(files.get(name) or {}).get("bytes"),
                sha256=(files.get(name) or {}).get("sha256"),
            )
            for name in release_files(manifest)
        ]
    copies = counts.get("copies_read", 0)
    kept_copies = (manifest.get("filters") or {}).get("keep_copies")
    license = manifest.get("license") or NO_LICENSE
    rho = held_out_rho(regressor.get("metrics"))
    outcome.figures += [
        ("pairs released", f"{counts.get('pairs', 0):,} of {counts.get('pairs_read', 0):,} read"),
        ("references", f"{counts.get('references', 0):,} of {counts.get('references_read', 0):,}"),
        (
            "paraphrases identical to their reference",
            f"{copies:,} " + ("kept (keep copies)" if kept_copies else "left out"),
        ),
        *(
            [
                (
                    "near-copies of their reference",
                    f"{counts['near_copies_read']:,} " + ("kept" if kept_copies else "left out"),
                )
            ]
            if "near_copies_read" in counts
            else []
        ),
        (
            "paraphrases with a non-word",
            f"{counts.get('non_words_read', 0):,} "
            + (
                "kept, unscored (keep non-words)"
                if (manifest.get("filters") or {}).get("keep_non_words")
                else "left out"
            ),
        ),
        ("unscored pairs released", f"{counts.get('pairs_unscored', 0):,}"),
        ("judgments", f"{counts.get('judgments', 0):,} from {counts.get('campaigns', 0):,} campaign(s)"),
        ("format", str(manifest.get("pairs_format") or "")),
        ("licence", license + (" (none given)" if license == NO_LICENSE else "")),
        ("regressor", str(regressor.get("name") or "")),
        *_rho_figures(regressor.get("metrics")),
        ("location", release.location),
    ]
    if license == NO_LICENSE:
        outcome.warnings.append(
            f"No licence was given: the card and the manifest state {NO_LICENSE}, so nobody may redistribute "
            "this release. Export it again with a licence (an SPDX id such as CC-BY-4.0) before you publish it."
        )
    if counts.get("pairs", 0) == 0:
        outcome.warnings.append("The release holds no pairs: its filters left none.")
    outcome.warnings += [w for w in (rho.warning(),) if w]
    outcome.tables += _calibration_table(regressor.get("metrics"))
    campaigns = list(Campaign.objects.filter(name__in=manifest.get("campaigns") or []).order_by("name"))
    outcome.links += _dashboards(user, campaigns)
    api = url_or_none("release-detail", release.pk)
    if api and outcome.files:
        outcome.links.append(Link("the release in the API", api))
    return outcome


def generate_outcome(job: Job, user: Any) -> JobOutcome | None:
    """The resource: references and pairs, pairs per system, and on to the evaluation campaign (a HIT batch, its
    dashboard) or to scoring the resource."""
    result = job.result or {}
    resource = Resource.objects.filter(pk=result.get("resource")).first()
    text = f"resource {result.get('name')}"
    outcome = JobOutcome(made=_admin_link(user, text, resource) if resource else text)
    if resource is None:
        outcome.warnings.append("This resource no longer exists (deleted since).")
        return outcome
    outcome.figures += [
        ("references", f"{int(result.get('references') or 0):,}"),
        ("pairs", f"{int(result.get('pairs') or 0):,}"),
        ("shards", f"{len(result.get('shards') or []):,}"),
    ]
    per_system = result.get("per_system") or {}
    if per_system:
        keys = sorted({k for counts in per_system.values() for k in counts})
        ranks = all(system_rank(system) for system in per_system)  # a diverse job's outputs: "r1" is "rank 1"
        outcome.tables.append(
            Table(
                title="Per rank" if ranks else "Per constraint system",
                header=("rank" if ranks else "system", *keys),
                rows=[
                    (system_display_name(system) if ranks else system, *(f"{counts.get(k, 0):,}" for k in keys))
                    for system, counts in per_system.items()
                ],
            )
        )
    campaign = Campaign.objects.filter(pk=result.get("campaign")).first() if result.get("campaign") else None
    if campaign is not None:
        if user.has_perm("annotation.add_batch") and user.is_staff:
            batch = url_or_none("admin:annotation_campaign_create_batch", campaign.pk)
            if batch:
                outcome.next.append(Link(f"create a HIT batch for campaign {campaign.name}…", batch))
        outcome.links += _dashboards(user, [campaign])
    elif staff_has_perms(user, SCORE_PERMS):
        outcome.next.append(
            Link(
                "score it with a regressor…", f"{reverse('admin:scoring_scoredresource_score')}?resource={resource.pk}"
            )
        )
    return outcome


register_outcome(TRAIN_KIND, train_outcome)
register_outcome(SCORE_KIND, score_outcome)
register_outcome(EXPORT_KIND, export_outcome)
register_outcome(GENERATE_KIND, generate_outcome)
