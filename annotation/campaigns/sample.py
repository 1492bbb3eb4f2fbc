"""A finished generation job's evaluation sample becomes an annotation campaign.

annotation's side of the data flow generation -> annotation: generation knows nothing of campaigns, and
annotation hooks in when the app is ready (:func:`register_generation_hooks`) -- the campaign is written in
the ``generate`` job's finishing transaction (so ``generate --wait`` reports it), takes the resource's name
(so that name is refused up front), and the resource admin links to it.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

from annotation.models import Campaign, Candidate, CandidateSystem, Reference
from config.converters import MAX_ID
from generation.generation_job import KIND as GENERATE_KIND
from generation.generation_job.params import job_systems
from generation.models import Corpus, Resource
from generation.nlp import SpacyModelMissing
from generation.vocabulary import text_words
from infra.local_paths import local_name
from infra.shards import read_jsonl_gz
from jobs.models import Job, JobChunk


def campaign_from_sample(job: Job, chunks: list[JobChunk], *, name: str) -> Campaign:
    """The annotation campaign of an evaluation sample: its references and merged candidates, written once."""
    params = job.params
    buckets = {r["i"]: r["bucket"] for c in chunks for r in c.params["references"]}
    with transaction.atomic():
        campaign, _ = Campaign.objects.get_or_create(
            job=job,
            defaults={
                "name": name,
                "description": (
                    f"evaluation sample of corpus {Corpus.objects.get(pk=params['corpus']).name}: up to "
                    f"{params['sample_per_length']} references per length {params['lengths']}, systems "
                    f"{', '.join(job_systems(params))}, model {local_name(params['model'])}"
                ),
            },
        )
        records = [r for c in chunks for r in read_jsonl_gz(c.result["key"])]
        Reference.objects.bulk_create(
            [
                Reference(
                    campaign=campaign,
                    ref_id=str(r["ref_index"]),
                    text=r["reference"],
                    length_bucket=buckets[r["ref_index"]],
                    extra={"source": r["source"], "length": r["length"], "ref_index": r["ref_index"]},
                )
                for r in records
            ],
            ignore_conflicts=True,
        )
        refs = {x.ref_id: x for x in campaign.references.all()}
        Candidate.objects.bulk_create(
            [
                Candidate(reference=refs[str(r["ref_index"])], text=c["text"], nll=c["nll"])
                for r in records
                for c in r["candidates"]
            ],
            ignore_conflicts=True,
        )
        ids = {
            (ref_id, text): pk
            for pk, ref_id, text in Candidate.objects.filter(reference__campaign=campaign).values_list(
                "pk", "reference__ref_id", "text"
            )
        }
        CandidateSystem.objects.bulk_create(
            [
                CandidateSystem(candidate_id=ids[(str(r["ref_index"]), c["text"])], system=s)
                for r in records
                for c in r["candidates"]
                for s in c["systems"]
            ],
            ignore_conflicts=True,
        )
    words_warm([r["reference"] for r in records] + [c["text"] for r in records for c in r["candidates"]])
    return campaign


def words_warm(texts: list[str]) -> None:
    """Tokenize the sample's texts now, in the job's worker (which selects constraints with spaCy), so that
    the words the batch screen reads are cached (``generation.vocabulary.text_words``) and the batch form's
    first *Preview* does not load spaCy, and torch with it, in the web process. Best effort: without the
    pipeline the screen tokenizes when it runs."""
    try:
        text_words(texts)
    except SpacyModelMissing:
        pass


def campaign_from_generation_job(job: Job, chunks: list[JobChunk], result: dict[str, Any]) -> dict[str, Any]:
    """Finish hook of ``generate``: a job that drew an evaluation sample gets its campaign, named after the
    resource; the job's result records it (``campaign``: its id, None without a sample)."""
    if "sample_per_length" not in job.params:
        return {"campaign": None}
    return {"campaign": campaign_from_sample(job, chunks, name=result["name"]).pk}


def campaign_name_taken(name: str) -> str | None:
    """Name check of ``generate``: the sample's campaign will take the resource's name."""
    if Campaign.objects.filter(name=name).exists():
        return f"an annotation campaign named {name!r} already exists"
    return None


def campaign_lookup(key: str) -> Campaign | None:
    """The campaign an API path names, by id or by name as the CLI takes it: ASCII digits within the id range
    are an id first (a campaign whose name is those digits is found when no id matches); anything else is a
    name. None when neither matches."""
    if key.isascii() and key.isdigit() and len(key) <= 19 and int(key) <= MAX_ID:
        found = Campaign.objects.filter(pk=int(key)).first()
        if found is not None:
            return found
    return Campaign.objects.filter(name=key).first()


def sample_campaign_link(resource: Resource) -> str | None:
    """The resource admin's "evaluation sample": a link to the campaign made from its job."""
    campaign = Campaign.objects.filter(job_id=resource.job_id).first() if resource.job_id else None
    if campaign is None:
        return None
    try:
        return format_html(
            '<a href="{}">{}</a>', reverse("admin:annotation_campaign_change", args=[campaign.pk]), campaign.name
        )
    except NoReverseMatch:
        return campaign.name


def register_generation_hooks() -> None:
    """Called from AnnotationConfig.ready(): generation reaches annotation only through these hooks."""
    from generation.hooks import add_name_check, add_sample_link
    from jobs.registry import add_finish_hook

    add_finish_hook(GENERATE_KIND, campaign_from_generation_job)
    add_name_check(campaign_name_taken)
    add_sample_link(sample_campaign_link)
