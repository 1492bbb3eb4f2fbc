"""HIT batches (ParaBank §2.4, §5.3): sample references per length bucket, pool their candidates, make HITs.

A HIT shows one reference and up to ``hit_size`` (5) of its merged candidates. Every candidate of a
sampled reference (system outputs and imported baseline outputs alike) appears in exactly one HIT of the
batch, so with ``assignments`` = R different workers per HIT each candidate gets R judgments. A reference's
candidates are cut into as few HITs as hold them and the checks they will carry, of sizes differing by one
at most (7 candidates: 4 and 3, never 5 and 2; 6: 3 and 3, never 5 and a lone 1; 5 and a check: 3 and 2+1),
and a check only takes a free place: it never pushes a candidate into a HIT of its own that repeats the
reference (issue 37.7). The reference's own copy (the ``Candidate`` whose text is the reference; system
``"0"``) is the attention check: it takes a free place in a share ``attention_rate`` of the HITs (exact up
to rounding: a check owed where no place is free goes to the next HIT with one; at most one check per
reference and batch, so that no worker meets the same copy twice in one batch).

A share ``degraded_rate`` of the HITs (same rules) also shows a *degraded check*: a real candidate of the
reference (its source, ``Candidate.degraded_from``) with a span replaced by a phrase of a sentence from
outside the batch (the packaged corpus, ``outside_donors``), drawn so that its length and edge words follow
the reference's real candidates and its words' frequency the words it replaces (``annotation.quality.degraded``:
the old copy of the reference with one run swapped was found by its text alone). The source is one of the
reference's candidates on *another* HIT wherever the reference has any (a page that repeats another of its
sentences but for one run gives the check away); only a reference whose candidates all fit one HIT takes it
from the HIT itself. It is a ``Candidate`` of the pseudo-system ``"degraded"``: a careful rater scores it
below the real candidates, which ``annotation.quality.workers`` tests per worker. A HIT with no source of 4
tokens, or no phrase that makes a new text, gets none. Raters spot checks that cluster, so the HITs holding a
check are spread evenly over the batch's order (the order the local pool serves them in) and the check takes
a random place in its HIT.

Candidates with non-words (batch setting ``drop_non_words``, on by default): a candidate with a word that
is neither in the vocabulary of the corpus the campaign was generated from, nor an English word, nor in its
reference (``generation.screening``, the rule a release applies too: "reachinging", "call fors") is left out of
the HITs, not deleted; the batch's
settings record how many (``non_words``: count, examples, the vocabulary used). A campaign with no known
corpus (imported judgments, a sample built by hand) keeps every candidate and says so there; with the
setting false every candidate is kept, as ParaBank did.

Candidates that loop (batch setting ``drop_loops``, on by default): a candidate in which a run of four words comes
three times or more, more often than in its reference (``generation.copies.REPEATS_RULE``: "... Edited excerpts:
RBA delivers rate cut ... Edited excerpts: ...", what a decoder-only model writes when it runs on) is no sentence a
worker should be paid to read; it is left out of the HITs the same way, and the batch's settings record it
(``loops``: count, examples, the rule). ``--avoid-copies`` drops such outputs in the decoder; this screen catches
those of a job decoded without it.

Everything random comes from ``random.Random(seed)`` (a degraded text from its own generator seeded by
the seed and the reference's id): the same campaign, arguments and seed give the same HITs.
"""

from __future__ import annotations

import csv
import functools
import math
import random
from collections.abc import Iterable, Sequence
from decimal import Decimal
from pathlib import Path

from django.db import transaction

from annotation.batch_settings import ATTENTION_PASS_MARK_DEFAULT
from annotation.batches.params import (
    BatchError,
    BatchParams,
    provider_name_check,
)
from annotation.campaigns.importers import ImportFormatError, user_file_lines
from annotation.models import (
    ATTENTION_SYSTEM,
    DEGRADED_SYSTEM,
    Batch,
    BatchStatus,
    Campaign,
    Candidate,
    CandidateSystem,
    Hit,
    HitItem,
    Provider,
    Reference,
)
from annotation.quality.degraded import degraded_candidate_text
from generation.copies import REPEATS_RULE, repeats
from generation.demo_settings import DEMO_CORPUS_FILE
from generation.generation_job import KIND as GENERATE_KIND
from generation.models import Corpus

DEFAULT_ASSIGNMENT_DURATION_S = 3600
NON_WORD_EXAMPLES = 5  # left-out candidates recorded in the batch's settings, to show what the rule did


def attention_copy(reference: Reference) -> Candidate:
    """The reference's attention-check copy (text == reference, system "0"), created if missing."""
    copy, _ = Candidate.objects.get_or_create(reference=reference, text=reference.text)
    CandidateSystem.objects.get_or_create(candidate=copy, system=ATTENTION_SYSTEM)
    return copy


def degraded_copy(reference: Reference, text: str, source: Candidate | None = None) -> Candidate:
    """The degraded candidate with this text (system "degraded"), made from ``source``, created if missing."""
    copy, _ = Candidate.objects.get_or_create(reference=reference, text=text, defaults={"degraded_from": source})
    if source is not None and copy.degraded_from_id is None:
        Candidate.objects.filter(pk=copy.pk).update(degraded_from=source)
        copy.degraded_from = source
    CandidateSystem.objects.get_or_create(candidate=copy, system=DEGRADED_SYSTEM)
    return copy


@functools.lru_cache(maxsize=1)
def _packaged_sentences() -> tuple[str, ...]:
    return tuple(line.strip() for line in DEMO_CORPUS_FILE.read_text(encoding="utf-8").splitlines() if line.strip())


def outside_donors(exclude: Iterable[str]) -> list[str]:
    """Sentences whose phrases degrade checks: the packaged corpus (STS-B sentences, 3,000 of news, captions
    and forums) less ``exclude`` (the batch's references): a phrase shared with another reference of the batch
    was a bigram a reader of the whole batch could find (issue 46)."""
    banned = {" ".join(t.split()) for t in exclude}
    return [s for s in _packaged_sentences() if " ".join(s.split()) not in banned]


def degraded_for_hit(
    reference: Reference,
    sources: Sequence[Candidate],
    *,
    peers: Sequence[str],
    donors: Sequence[str],
    avoid: Iterable[str],
    rng: random.Random,
) -> tuple[str, Candidate] | None:
    """(text, source) of a degraded check made from one of ``sources`` (the reference's candidates on other
    HITs where it has any), or None (``annotation.quality.degraded.degraded_candidate_text``)."""
    made = degraded_candidate_text(
        reference=reference.text,
        sources=[c.text for c in sources],
        peers=peers,
        donors=[d for d in donors if d != reference.text],
        avoid=avoid,
        rng=rng,
    )
    return None if made is None else (made[0], sources[made[1]])


def balanced_chunks(items: Sequence, size: int, *, room: int = 0) -> list[list]:
    """``items`` cut into as few chunks of at most ``size`` as hold them with ``room`` places left free (for
    checks), their sizes differing by one at most, the larger first (6 items of 5: 3 and 3, never 5 and a
    lone 1 that repeats the reference in a HIT of its own; 5 items with room for 1: 3 and 2)."""
    if not items:
        return []
    count = math.ceil((len(items) + room) / size)
    base, extra = divmod(len(items), count)
    chunks, at = [], 0
    for k in range(count):
        step = base + (k < extra)
        chunks.append(list(items[at : at + step]))
        at += step
    return chunks


def spread_order(flags: Sequence[bool], rng: random.Random) -> list[int]:
    """Indices of ``flags`` in a new order where the flagged ones (HITs with a check) are spread: the order
    is cut into as many equal stretches as there are flagged ones and each stretch holds one, at a random
    place in it (raters learn to spot checks that cluster, and checks at a fixed period)."""
    checked = [i for i, flag in enumerate(flags) if flag]
    plain = [i for i, flag in enumerate(flags) if not flag]
    rng.shuffle(checked)
    rng.shuffle(plain)
    total, count = len(flags), len(checked)
    bounds = [k * total // count for k in range(count)] + [total] if count else []
    slots = {rng.randrange(bounds[k], bounds[k + 1]) for k in range(count)}
    return [checked.pop() if place in slots else plain.pop() for place in range(total)]


def baseline_candidates_import(*, campaign: Campaign, path, system: str = "35") -> int:
    """Add a baseline system's outputs (e.g. PARANMT) to the campaign's candidates; returns rows read.

    A tab-separated file with a header naming ``ref_id`` and ``candidate`` (optionally ``sys_id``, else
    ``system`` is used). Outputs are merged by exact text like every candidate; references not in the
    campaign are an error (nothing is written)."""
    path = Path(path)
    if path.is_dir():
        raise BatchError(f"{path}: is a directory, not a baseline TSV file")
    lines = user_file_lines(path)  # infra.textfiles: gzip by magic bytes, BOM, strict UTF-8 naming line and byte
    try:
        reader = csv.DictReader((line for _, line in lines), delimiter="\t", quoting=csv.QUOTE_NONE)
        missing = {"ref_id", "candidate"} - set(reader.fieldnames or ())
        if missing:
            raise BatchError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
        rows = [
            (reader.line_num, r["ref_id"], (r.get("sys_id") or system).split(), (r["candidate"] or "").strip())
            for r in reader
        ]
    except ImportFormatError as exc:
        raise BatchError(str(exc)) from exc
    finally:
        lines.close()
    refs = {r.ref_id: r for r in Reference.objects.filter(campaign=campaign, ref_id__in={row[1] for row in rows})}
    for lineno, ref_id, _, text in rows:
        if ref_id not in refs:
            raise BatchError(f"{path}:{lineno}: ref_id {ref_id!r} is not in campaign {campaign.name!r}")
        if not text:
            raise BatchError(f"{path}:{lineno}: empty candidate")
    with transaction.atomic():
        for _, ref_id, systems, text in rows:
            cand, _ = Candidate.objects.get_or_create(reference=refs[ref_id], text=text)
            for s in systems:
                CandidateSystem.objects.get_or_create(candidate=cand, system=s)
    return len(rows)


def batch_publish_check(*, provider: str, settings: dict | None = None, cost_usd: Decimal | None = None) -> None:
    """Refuse (``BatchError``) when the provider could not publish a batch with these settings now: the
    platform's credentials and https public URL (the batch's ``public_url`` or ``PARAFORGE_PUBLIC_URL``)
    and, given ``cost_usd``, the account's balance. Nothing is spent; the local provider always can. The
    CLI's ``--publish`` calls it before making the batch (and with the cost before committing it)."""
    from annotation.providers import ProviderError, get_provider

    _provider_fields(provider)
    checker = get_provider(provider)
    try:
        checker.publish_check(batch_settings=settings or {}, cost_usd=cost_usd)
    except ProviderError as exc:
        raise BatchError(f"cannot publish on {provider}: {exc}") from exc
    except checker.transport_errors as exc:
        raise BatchError(f"cannot publish on {provider}: {checker.error_text(exc)}") from exc


def _provider_fields(provider: str) -> tuple[str, dict]:
    if provider_name_check(provider) == "local":
        return Provider.LOCAL, {}
    if provider == "prolific":
        return Provider.PROLIFIC, {}
    return Provider.MTURK, {"sandbox": provider == "mturk-sandbox"}


def _sample_references(campaign: Campaign, lengths, per_length: int, rng: random.Random) -> list[Reference]:
    chosen: list[Reference] = []
    for length in lengths:
        refs = list(Reference.objects.filter(campaign=campaign, length_bucket=length).order_by("id"))
        chosen.extend(refs if len(refs) <= per_length else rng.sample(refs, per_length))
    return chosen


def _is_degraded(candidate: Candidate) -> bool:
    return any(s.system == DEGRADED_SYSTEM for s in candidate.systems.all())


def campaign_corpus(campaign: Campaign) -> Corpus | None:
    """The corpus the campaign's candidates were generated from (its ``generate`` job's), or None for a
    campaign made otherwise (imported judgments, a sample built by hand): its vocabulary is unknown."""
    job = campaign.job
    if job is None or job.kind != GENERATE_KIND or not (job.params or {}).get("corpus"):
        return None
    return Corpus.objects.filter(pk=job.params["corpus"]).first()


def non_word_screen(campaign: Campaign, references: Sequence[Reference], *, drop: bool = True) -> tuple[set[int], dict]:
    """(pks of the candidates to leave out of HITs, the record kept in ``Batch.settings["non_words"]``).

    A real candidate (not a copy of its reference, not a degraded copy) of the sampled ``references`` is left out
    when it has a non-word against the campaign's corpus and English (``generation.screening``, the rule a
    release applies too); without ``drop``, a known corpus or its IDF table, nothing is left out and the record
    says why."""
    if not drop:
        return set(), {"left_out": 0, "vocabulary": None, "note": "drop_non_words is false: every candidate kept"}
    from generation.screening import is_copy, pair_non_words, screen_vocabulary

    vocabulary, source = screen_vocabulary(campaign_corpus(campaign))
    if vocabulary is None:
        return set(), {"left_out": 0, "vocabulary": None, "note": source}
    candidates = [
        c
        for c in Candidate.objects.filter(reference__in=references)
        .select_related("reference")
        .prefetch_related("systems")
        .order_by("reference_id", "id")
        if not is_copy(c.reference.text, c.text) and not _is_degraded(c)
    ]
    left_out: set[int] = set()
    examples: list[dict] = []
    found = pair_non_words([(c.reference.text, c.text) for c in candidates], vocabulary)
    for cand, invented in zip(candidates, found):
        if invented:
            left_out.add(cand.pk)
            if len(examples) < NON_WORD_EXAMPLES:
                examples.append({"ref_id": cand.reference.ref_id, "text": cand.text, "non_words": invented})
    return left_out, {"left_out": len(left_out), "vocabulary": source, "examples": examples}


def loop_screen(references: Sequence[Reference], *, drop: bool = True) -> tuple[set[int], dict]:
    """(pks of the candidates to leave out of HITs, the record kept in ``Batch.settings["loops"]``): a real candidate
    of the sampled ``references`` that loops (``generation.copies.repeats``); without ``drop`` nothing is left
    out and the record says so."""
    if not drop:
        return set(), {"left_out": 0, "rule": REPEATS_RULE, "note": "drop_loops is false: every candidate kept"}
    left_out: set[int] = set()
    examples: list[dict] = []
    for cand in Candidate.objects.filter(reference__in=references).select_related("reference").order_by("id"):
        if repeats(cand.reference.text, cand.text) and not _is_degraded(cand):  # a query per loop only
            left_out.add(cand.pk)
            if len(examples) < NON_WORD_EXAMPLES:
                examples.append({"ref_id": cand.reference.ref_id, "text": cand.text})
    return left_out, {"left_out": len(left_out), "rule": REPEATS_RULE, "examples": examples}


PlannedHit = tuple[Reference, list[Candidate], bool, tuple[str, Candidate] | None]


def _plan(
    references: list[Reference],
    *,
    hit_size: int,
    attention_rate: float,
    rng: random.Random,
    degraded_rate: float = 0.0,
    seed: int = 0,
    left_out: set[int] | frozenset[int] = frozenset(),
) -> list[PlannedHit]:
    """(reference, real candidates, has_attention_check, (degraded text, its source) or None) per HIT, checks
    spread; the candidates in ``left_out`` (non-words) are in no HIT. A check takes a free place only (see
    the module docstring): one owed where the HIT is full waits for the next HIT with a free place."""
    pools: list[tuple[Reference, list[Candidate]]] = []
    texts: dict[int, set[str]] = {}
    for ref in references:
        every = list(ref.candidates.all().prefetch_related("systems").order_by("id"))
        cands = [c for c in every if c.text != ref.text and not _is_degraded(c) and c.pk not in left_out]
        texts[ref.pk] = {c.text for c in every if not _is_degraded(c)}  # a same-seed batch remakes its checks
        rng.shuffle(cands)
        pools.append((ref, cands))
    rng.shuffle(pools)
    donors = outside_donors(ref.text for ref in references)

    plan: list[PlannedHit] = []
    # carried shares of a check: spread exactly rate x HITs over the batch; the degraded share runs half a
    # period behind the attention one, so that the two rarely meet in one HIT
    owed = rng.random()
    owed_degraded = (owed + 0.5) % 1.0
    for ref, cands in pools:
        checked = tried = False  # one attention copy and one degraded try per reference and batch
        peers = [c.text for c in cands]
        # the checks this reference's HITs will owe, so that its cut leaves them a free place
        hits = math.ceil(len(cands) / hit_size)
        room = int(owed + hits * attention_rate >= 1.0) + int(owed_degraded + hits * degraded_rate >= 1.0)
        for chunk in balanced_chunks(cands, hit_size, room=room):
            owed += attention_rate
            owed_degraded += degraded_rate
            free = hit_size - len(chunk)
            attention = owed >= 1.0 and not checked and free > 0
            if attention:
                owed -= 1.0
                checked = True
                free -= 1
            degraded = None
            if owed_degraded >= 1.0 and not tried and free > 0:
                tried = True
                elsewhere = [c for c in cands if c not in chunk]  # on the reference's other HITs
                degraded = degraded_for_hit(
                    ref,
                    elsewhere or chunk,
                    peers=peers,
                    donors=donors,
                    avoid=texts[ref.pk],
                    rng=random.Random(f"degraded:{seed}:{ref.ref_id}"),
                )
                if degraded is not None:
                    owed_degraded -= 1.0
            plan.append((ref, chunk, attention, degraded))
    order = spread_order([attention or degraded is not None for _, _, attention, degraded in plan], rng)
    return [plan[i] for i in order]


def hit_batch_create(*, campaign: Campaign, params: BatchParams) -> Batch:
    """Build a draft batch of HITs from the campaign's sample (see the module docstring).

    ``params`` (``annotation.batches.params.BatchParams``) was checked when made, so a bad value is refused
    before anything is written. ``baseline``: an optional TSV of baseline outputs added to the candidates
    first (``baseline_candidates_import``). ``settings`` go to ``Batch.settings`` (reward, durations,
    qualifications for MTurk; ``assignment_duration_s`` for the local provider; ``mode`` and ``easl`` for EASL
    rounds). ``degraded_rate`` is the share of HITs with a degraded check (a damaged copy of a candidate).
    Candidates with non-words are left out unless the setting ``drop_non_words`` is false (``non_word_screen``),
    candidates that loop unless ``drop_loops`` is false (``loop_screen``)."""
    settings, lengths, per_length, seed = params.settings, params.lengths, params.per_length, params.seed
    provider_name, provider_settings = _provider_fields(params.provider)
    if params.baseline:
        baseline_candidates_import(campaign=campaign, path=params.baseline, system=params.baseline_system)
    rng = random.Random(seed)
    references = _sample_references(campaign, lengths, per_length, rng)
    drop_non_words = settings.get("drop_non_words") is not False
    non_word_pks, non_words = non_word_screen(campaign, references, drop=drop_non_words)
    drop_loops = settings.get("drop_loops") is not False
    loop_pks, loops = loop_screen(references, drop=drop_loops)
    left_out = non_word_pks | loop_pks
    plan = _plan(
        references,
        hit_size=params.hit_size,
        attention_rate=params.attention_rate,
        rng=rng,
        degraded_rate=params.degraded_rate,
        seed=seed,
        left_out=left_out,
    )
    if not plan:
        dropped = "".join(
            f" ({len(pks)} left out for {what}; the batch setting {setting} false keeps them)"
            for pks, what, setting in ((non_word_pks, "non-words", "drop_non_words"), (loop_pks, "loops", "drop_loops"))
            if pks
        )
        raise BatchError(
            f"campaign {campaign.name!r} has no candidates in length buckets {', '.join(map(str, lengths))}" + dropped
        )
    if provider_name == Provider.PROLIFIC:  # a session never asks for more HITs than the batch has
        from annotation.providers.prolific.study import session_size_fit  # lazily: the Prolific client loads requests

        settings = session_size_fit(settings, hits=len(plan))
    batch_settings = {
        "assignment_duration_s": DEFAULT_ASSIGNMENT_DURATION_S,
        **(settings or {}),
        **provider_settings,
        "per_length": per_length,
        "lengths": list(lengths),
        "assignments": params.assignments,
        "attention_rate": params.attention_rate,
        # stated with the batch, so that a later change of the default never re-marks its checks
        "attention_pass_mark": ATTENTION_PASS_MARK_DEFAULT
        if settings.get("attention_pass_mark") is None
        else settings["attention_pass_mark"],
        "degraded_rate": params.degraded_rate,
        "seed": seed,
        "hit_size": params.hit_size,
        "drop_non_words": drop_non_words,
        "non_words": non_words,
        "drop_loops": drop_loops,
        "loops": loops,
    }
    with transaction.atomic():
        batch = Batch.objects.create(
            campaign=campaign,
            provider=provider_name,
            label=params.label,
            settings=batch_settings,
            status=BatchStatus.DRAFT,
        )
        copies = {ref.pk: attention_copy(ref) for ref, _, attention, _ in plan if attention}
        degraded = {ref.pk: degraded_copy(ref, *made) for ref, _, _, made in plan if made is not None}
        hits = Hit.objects.bulk_create(
            [Hit(batch=batch, reference=ref, max_assignments=params.assignments) for ref, _, _, _ in plan]
        )
        items: list[HitItem] = []
        for hit, (ref, cands, attention, made) in zip(hits, plan):
            shown = list(cands)
            if attention:
                shown.insert(rng.randrange(len(shown) + 1), copies[ref.pk])
            if made is not None:
                shown.insert(rng.randrange(len(shown) + 1), degraded[ref.pk])
            items.extend(
                HitItem(
                    hit=hit,
                    candidate=c,
                    position=i,
                    is_attention_check=attention and c == copies[ref.pk],
                    is_degraded_check=made is not None and c == degraded[ref.pk],
                )
                for i, c in enumerate(shown)
            )
        HitItem.objects.bulk_create(items, batch_size=1000)
    return batch


def non_words_summary(campaign: Campaign) -> dict:
    """How many candidates the campaign's batches left out of their HITs for non-words, in all and per batch
    (each batch's ``settings["non_words"]``; a batch made before the rule kept every candidate)."""
    batches = []
    for batch in Batch.objects.filter(campaign=campaign).order_by("pk"):
        record = (batch.settings or {}).get("non_words") or {
            "left_out": 0,
            "vocabulary": None,
            "note": "made before non-word screening: every candidate kept",
        }
        batches.append({"batch": batch.pk, "label": batch.label, **record})
    return {"left_out": sum(int(b["left_out"]) for b in batches), "batches": batches}


def non_words_line(summary: dict) -> str:
    """The summary as one sentence for a report."""
    parts = [
        f"batch {b['batch']}: {b['left_out']}"
        + (f" against {b['vocabulary']}" if b.get("vocabulary") else f" ({b.get('note', 'every candidate kept')})")
        for b in summary["batches"]
    ]
    return (
        f"{summary['left_out']} candidate(s) with non-words left out of the HITs"
        + (f" ({'; '.join(parts)})" if parts else " (no batch yet)")
        + "."
    )


def batch_cost_estimate_usd(*, batch: Batch) -> Decimal | None:
    """What publishing would cost, from the batch's provider (None for the local provider)."""
    from annotation.providers import get_provider

    return get_provider(batch).cost_estimate_usd(batch=batch)
