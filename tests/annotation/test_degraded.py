"""Degraded checks (a real candidate of the HIT with a span replaced by another reference's phrase) and the
rater test they feed (a one-sided Mann-Whitney U test per worker: degraded items below their sources)."""

from __future__ import annotations

import csv
import io
import json
import random
from collections import Counter
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.batches.easl_rounds import batch_items, easl_round_create
from annotation.batches.exports import batch_results_csv
from annotation.batches.making import BatchError, hit_batch_create, outside_donors
from annotation.batches.params import BatchParams
from annotation.hits.submissions import JudgmentInput, assignment_submit
from annotation.hits.tokens import submission_token_make
from annotation.models import (
    DEGRADED_SYSTEM,
    Batch,
    Campaign,
    Candidate,
    CandidateSystem,
    Hit,
    HitItem,
    Reference,
    Worker,
)
from annotation.quality.degraded import degraded_candidate_text, degraded_span_length, edit_runs
from annotation.quality.workers import degraded_p_value, degraded_rule_fails, degraded_test, worker_quality

from .builders import platform_confirms, published_batch

SENTENCES = [
    "The committee approved the new budget after a long debate on Tuesday.",
    "She walked her dog along the river every morning before work.",
    "Heavy rain flooded several streets in the old part of town.",
    "The museum will open a new exhibition of modern art next month.",
    "Our team finally fixed the bug that crashed the server at night.",
    "He bought fresh bread and cheese at the market on Saturday.",
    "The children built a small snowman in the garden behind the school.",
    "Scientists discovered a new species of frog in the rain forest.",
    "The train to the airport was delayed by almost an hour today.",
    "My grandmother still writes letters by hand to all her friends.",
    "The company plans to hire two hundred engineers in the coming year.",
    "A strong wind knocked down the old oak tree near the station.",
]


def campaign_of(sentences=SENTENCES, *, candidates: int = 4, name: str = "degraded", settings=None) -> Campaign:
    """One reference per sentence (bucket 10), each with ``candidates`` real paraphrases of systems 1..n."""
    campaign = Campaign.objects.create(name=name, **({"settings": settings} if settings else {}))
    for r, text in enumerate(sentences):
        ref = Reference.objects.create(campaign=campaign, ref_id=f"r{r}", length_bucket=10, text=text)
        for c in range(candidates):
            cand = Candidate.objects.create(reference=ref, text=f"Put another way ({c}): {text.lower()}")
            CandidateSystem.objects.create(candidate=cand, system=str(c + 1))
    return campaign


def degraded_items(batch: Batch) -> list[HitItem]:
    return list(
        HitItem.objects.filter(hit__batch=batch, is_degraded_check=True)
        .select_related("candidate", "hit__reference")
        .order_by("hit_id")
    )


def replaced_run(source: str, degraded: str, donors: list[str]) -> tuple[int, int, int] | None:
    """(start, tokens removed, tokens inserted) when ``degraded`` is ``source`` with one contiguous stretch
    replaced by words of one of the ``donors`` (punctuation and case aside), else None. (A phrase sharing a
    word with what it replaced shows as two runs of one stretch.)"""
    a, b = source.split(), degraded.split()
    runs = edit_runs(a, b)
    if not runs:
        return None
    i1, j1, i2, j2 = runs[0][0], runs[0][2], runs[-1][1], runs[-1][3]
    words = [t.strip(".!?;:").lower() for t in b[j1:j2]]
    if not any(all(w in d.lower() for w in words if w) for d in donors):
        return None
    return i1, i2 - i1, j2 - j1


def test_the_span_grows_with_length_as_wmts_bad_references():
    assert [degraded_span_length(n) for n in (4, 5, 8, 10, 15, 20, 28, 80)] == [2, 2, 3, 4, 4, 5, 6, 6]


@pytest.mark.parametrize("n", [4, 6, 10, 20, 40])
def test_a_check_is_one_of_the_hits_candidates_with_a_span_replaced_by_another_sentences_phrase(n):
    reference = " ".join(f"w{i}" for i in range(n))
    sources = [" ".join(f"c{k}x{i}" for i in range(n + k - 1)) for k in range(3)]
    donors = [" ".join(f"donor{j}word{i}" for i in range(12)) for j in range(3)]
    starts, sizes = set(), set()
    for seed in range(30):
        made = degraded_candidate_text(
            reference=reference, sources=sources, peers=sources, donors=donors, rng=random.Random(seed)
        )
        assert made is not None
        text, index = made
        found = replaced_run(sources[index], text, donors)
        assert found is not None, text
        start, removed, inserted = found
        assert 1 <= removed <= 7 and inserted >= 1 and text != sources[index]
        starts.add(start)
        sizes.add((removed, inserted))
    # varied place (the first and last tokens too, as real paraphrases vary them) and varied length
    assert len(starts) >= 3 and len(sizes) >= 3


def test_never_a_known_text_the_reference_a_short_source_and_none_when_impossible():
    reference = "Alpha beta gamma delta epsilon"
    sources = ["Alpha beta gamma delta zeta"]
    donors = ["dog cat horses"]
    rng = random.Random(0)
    made = {
        degraded_candidate_text(reference=reference, sources=sources, peers=[], donors=donors, rng=rng)[0]
        for _ in range(40)
    }
    assert made and not made & {reference, sources[0]}
    avoid = sorted(made)
    again = degraded_candidate_text(
        reference=reference, sources=sources, peers=[], donors=donors, avoid=avoid, rng=random.Random(1)
    )
    assert again is None or again[0] not in avoid
    assert degraded_candidate_text(reference=reference, sources=["Too short"], peers=[], donors=donors, rng=rng) is None
    assert degraded_candidate_text(reference=reference, sources=sources, peers=[], donors=[], rng=rng) is None
    # a donor phrase that brings no new content word (only words the source has) is no damage
    assert degraded_candidate_text(reference=reference, sources=sources, peers=[], donors=[sources[0]], rng=rng) is None


def test_the_text_is_deterministic_per_seed():
    donors = SENTENCES[1:]
    sources = [f"Put another way ({c}): {SENTENCES[0].lower()}" for c in range(4)]

    def made(seed):
        return degraded_candidate_text(
            reference=SENTENCES[0], sources=sources, peers=sources, donors=donors, rng=random.Random(seed)
        )

    assert len({made("s1") for _ in range(3)}) == 1
    assert len({made(seed) for seed in range(10)}) > 5


# --- in a batch ------------------------------------------------------------------------------------


def bigrams(text: str) -> set[tuple[str, str]]:
    words = [w.strip(".,;:!?").lower() for w in text.split()]
    return set(zip(words, words[1:]))


@pytest.mark.django_db
def test_a_check_never_shares_its_page_with_its_source_nor_a_phrase_with_the_batch():
    """Issue 46: a reader of whole pages found the check as the sentence that repeats another item of its page
    but for one run, and its phrase as a bigram of another reference of the batch."""
    campaign = campaign_of(candidates=8)  # two HITs per reference
    batch = hit_batch_create(
        campaign=campaign,
        params=BatchParams(provider="local", per_length=20, lengths=(10,), attention_rate=0, degraded_rate=0.5, seed=2),
    )
    checks = degraded_items(batch)
    references = list(batch.hits.values_list("reference__text", flat=True).distinct())
    assert len(checks) >= 5
    for item in checks:
        source = item.candidate.degraded_from
        assert not item.hit.items.filter(candidate=source).exists()  # on the reference's other HIT
        assert HitItem.objects.filter(hit__batch=batch, hit__reference=item.hit.reference, candidate=source).exists()
        new_bigrams = bigrams(item.candidate.text) - bigrams(source.text)
        assert new_bigrams and not new_bigrams & set().union(*map(bigrams, references)), new_bigrams


@pytest.mark.django_db
def test_batches_carry_degraded_copies_at_the_rate_and_every_real_candidate_once():
    campaign = campaign_of()
    batch = hit_batch_create(
        campaign=campaign,
        params=BatchParams(provider="local", per_length=20, lengths=(10,), attention_rate=0, degraded_rate=0.5, seed=2),
    )
    hits = list(batch.hits.order_by("id").prefetch_related("items__candidate__systems"))
    checks = degraded_items(batch)
    assert len(hits) == 12 and len(checks) == 6  # exactly rate x HITs
    assert batch.settings["degraded_rate"] == 0.5
    for item in checks:
        ref = item.hit.reference
        cand = item.candidate
        assert set(cand.systems.values_list("system", flat=True)) == {DEGRADED_SYSTEM}
        assert cand.text != ref.text
        others = set(Candidate.objects.filter(reference=ref).exclude(pk=cand.pk).values_list("text", flat=True))
        assert cand.text not in others
        # made from a real candidate of the reference (here all on its one HIT), by a phrase from outside the batch
        source = cand.degraded_from
        assert source is not None and source.reference_id == ref.pk
        assert item.hit.items.filter(candidate=source, is_degraded_check=False).exists()
        assert replaced_run(source.text, cand.text, outside_donors([])) is not None
        assert replaced_run(source.text, cand.text, [s for s in SENTENCES if s != ref.text]) is None
    for hit in hits:  # four real candidates, and in checked HITs the degraded copy as the fifth
        degraded = sum(i.is_degraded_check for i in hit.items.all())
        assert degraded <= 1 and len(hit.items.all()) == 4 + degraded
    real = HitItem.objects.filter(hit__batch=batch, is_degraded_check=False).values_list("candidate_id", flat=True)
    assert Counter(real) == Counter(
        Candidate.objects.filter(reference__campaign=campaign)
        .exclude(systems__system=DEGRADED_SYSTEM)
        .values_list("id", flat=True)
    )
    # a later batch never takes a degraded copy for a real candidate
    again = hit_batch_create(
        campaign=campaign,
        params=BatchParams(provider="local", per_length=20, lengths=(10,), attention_rate=0, degraded_rate=0, seed=5),
    )
    shown = HitItem.objects.filter(hit__batch=again)
    assert shown.count() == 48 and not shown.filter(candidate__systems__system=DEGRADED_SYSTEM).exists()


@pytest.mark.django_db
def test_checks_are_spread_over_the_batch_at_random_places_in_their_hits():
    sentences = [f"{s[:-1]} number {k}." for k in range(4) for s in SENTENCES[:10]]  # 40 references
    campaign = campaign_of(sentences)
    batch = hit_batch_create(
        campaign=campaign,
        params=BatchParams(
            provider="local", per_length=40, lengths=(10,), attention_rate=0.1, degraded_rate=0.15, seed=11
        ),
    )
    hits = list(batch.hits.order_by("id").prefetch_related("items"))
    assert len(hits) == 40
    flagged = [n for n, h in enumerate(hits) if any(i.is_attention_check or i.is_degraded_check for i in h.items.all())]
    degraded = [n for n, h in enumerate(hits) if any(i.is_degraded_check for i in h.items.all())]
    assert len(degraded) == 6 and 9 <= len(flagged) <= 10
    # every quarter of the batch holds its share of the checks, and no long stretch goes without one
    assert all(2 <= sum(q * 10 <= n < q * 10 + 10 for n in flagged) <= 3 for q in range(4))
    assert max(b - a for a, b in zip([-1, *flagged], [*flagged, 40])) <= 8
    positions = [i.position for h in hits for i in h.items.all() if i.is_degraded_check]
    assert len(set(positions)) >= 3


@pytest.mark.django_db
def test_same_seed_same_degraded_copies_and_short_references_get_none():
    campaign = campaign_of()

    def texts(seed):
        batch = hit_batch_create(
            campaign=campaign,
            params=BatchParams(
                provider="local", per_length=20, lengths=(10,), attention_rate=0, degraded_rate=1.0, seed=seed
            ),
        )
        return [(i.hit.reference.ref_id, i.position, i.candidate.text) for i in degraded_items(batch)]

    assert texts(3) == texts(3) and len(texts(3)) == 12
    assert {t for _, _, t in texts(3)} != {t for _, _, t in texts(4)}
    short = campaign_of(["Go now.", "Stop it please.", "Yes."], name="short", candidates=0)
    for ref in short.references.all():  # candidates of 3 tokens at most: none long enough to damage plainly
        Candidate.objects.create(reference=ref, text=ref.text.upper())
    batch = hit_batch_create(
        campaign=short, params=BatchParams(provider="local", per_length=5, lengths=(10,), degraded_rate=1.0)
    )
    assert batch.hits.count() == 3 and not degraded_items(batch)


# --- settings, CLI and admin ------------------------------------------------------------------------


def run_cli(*args) -> dict:
    out = StringIO()
    call_command("create_hit_batch", *args, stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.django_db
def test_cli_flag_and_batch_setting():
    campaign_of()
    result = run_cli(
        "--campaign",
        "degraded",
        "--provider",
        "local",
        "--lengths",
        "10",
        "--attention-rate",
        "0",
        "--degraded-rate",
        "0.25",
        "--seed",
        "1",
    )
    batch = Batch.objects.get(pk=result["batch"])
    assert batch.settings["degraded_rate"] == 0.25 and len(degraded_items(batch)) == 3  # 12 HITs x 0.25
    by_setting = run_cli(
        "--campaign",
        "degraded",
        "--provider",
        "local",
        "--lengths",
        "10",
        "--attention-rate",
        "0",
        "--batch-settings",
        '{"degraded_rate": "0.5"}',
    )
    batch = Batch.objects.get(pk=by_setting["batch"])
    assert batch.settings["degraded_rate"] == 0.5 and len(degraded_items(batch)) == 6
    default = Batch.objects.get(pk=run_cli("--campaign", "degraded", "--provider", "local", "--lengths", "10")["batch"])
    assert default.settings["degraded_rate"] == 0.1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "args,message",
    [
        (["--degraded-rate", "1.5"], "--degraded-rate must be between 0 and 1"),
        (["--degraded-rate", "-0.1"], "--degraded-rate must be between 0 and 1"),
        (["--batch-settings", '{"degraded_rate": "lots"}'], "'degraded_rate': expected a number"),
        (["--batch-settings", '{"degraded_rate": 2}'], "'degraded_rate': 2.0 is out of range"),
        (["--batch-settings", '{"attention_rate": -1}'], "'attention_rate': -1.0 is out of range"),
        (["--degraded-rate", "0.2", "--batch-settings", '{"degraded_rate": 0.3}'], "disagree"),
    ],
)
def test_bad_rates_are_clear_errors_and_write_nothing(args, message):
    campaign_of()
    candidates = Candidate.objects.count()
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_cli("--campaign", "degraded", "--provider", "local", "--lengths", "10", *args)
    assert not Batch.objects.exists() and not Hit.objects.exists() and Candidate.objects.count() == candidates
    with pytest.raises(BatchError):
        hit_batch_create(campaign=Campaign.objects.get(), params=BatchParams(provider="local", degraded_rate=True))


@pytest.mark.django_db
def test_admin_form_has_the_degraded_rate(admin_client):
    campaign = campaign_of()
    url = "/admin/annotation/campaign/"
    form = {
        "action": "create_hit_batch",
        "_selected_action": [campaign.pk],
        "confirm": "yes",
        "provider": "local",
        "per_length": "20",
        "lengths": "10",
        "assignments": "3",
        "attention_rate": "0",
        "seed": "1",
        "reward_usd": "0.10",
        "label": "",
    }
    page = admin_client.post(url, {"action": "create_hit_batch", "_selected_action": [campaign.pk]})
    assert 'name="degraded_rate"' in page.content.decode()
    bad = admin_client.post(url, {**form, "degraded_rate": "2"})
    assert bad.status_code == 200 and not Batch.objects.exists()
    assert admin_client.post(url, {**form, "degraded_rate": "0.5"}).status_code == 302
    assert len(degraded_items(Batch.objects.get())) == 6


# --- the results CSV and EASL ------------------------------------------------------------------------


@pytest.mark.django_db
def test_results_csv_marks_degraded_items_after_the_attention_column():
    batch = published_batch(campaign_of(), lengths=(10,), attention_rate=0, degraded_rate=1.0)
    hit = batch.hits.order_by("id").first()
    submit(hit, "W1", lambda item: 50)
    out = io.StringIO()
    batch_results_csv(batch=batch, out=out)
    header = out.getvalue().splitlines()[0].replace('"', "").split(",")
    assert header[header.index("Input.cand1_attention") + 1] == "Input.cand1_degraded"
    row = next(csv.DictReader(io.StringIO(out.getvalue())))
    marks = [row[f"Input.cand{k}_degraded"] for k in range(1, 6)]
    items = list(hit.items.order_by("position"))
    assert marks == [str(int(i.is_degraded_check)) for i in items] and marks.count("1") == 1


@pytest.mark.django_db
def test_easl_never_estimates_degraded_copies_and_adds_them_to_rounds():
    campaign = campaign_of(SENTENCES[:4], candidates=6)
    fixed = hit_batch_create(
        campaign=campaign, params=BatchParams(provider="local", lengths=(10,), attention_rate=0, degraded_rate=1.0)
    )
    assert len(degraded_items(fixed)) == 4
    easl = Batch.objects.create(
        campaign=campaign,
        provider="local",
        settings={"mode": "easl", "attention_rate": 0.0, "degraded_rate": 1.0, "easl": {"items_per_hit": 5}},
    )
    degraded = set(Candidate.objects.filter(systems__system=DEGRADED_SYSTEM).values_list("id", flat=True))
    items = {c for cands in batch_items(easl).values() for c in cands}
    assert len(items) == 24 and not items & degraded
    first = easl_round_create(batch=easl, seed=1)  # HITs of 3: room for a degraded copy in each reference's first
    shown = HitItem.objects.filter(hit_id__in=first["hit_ids"])
    checks = shown.filter(is_degraded_check=True)
    assert checks.count() == 4 and {i.hit.reference_id for i in checks} == set(
        Reference.objects.filter(campaign=campaign).values_list("id", flat=True)
    )
    assert set(shown.filter(is_degraded_check=False).values_list("candidate_id", flat=True)) == items
    assert not {c for cands in batch_items(easl).values() for c in cands} & set(
        Candidate.objects.filter(systems__system=DEGRADED_SYSTEM).values_list("id", flat=True)
    )


# --- the rater test ---------------------------------------------------------------------------------


def test_the_mann_whitney_rule_on_score_lists():
    rng = random.Random(0)
    real = [rng.randint(55, 95) for _ in range(20)]
    careful = [rng.randint(0, 30) for _ in range(5)]
    p = degraded_test(careful, real, min_checks=5)
    assert p is not None and p < 0.01 and not degraded_rule_fails(p, p_max=0.05)
    # N/A (a nonsensical verdict) counts as the lowest score
    assert degraded_p_value([None] * 5, real) < 0.01
    assert degraded_test([100] * 5, [100] * 20, min_checks=5) == 1.0  # all-100
    assert degraded_test([37] * 5, [37] * 20, min_checks=5) == 1.0  # one score for everything
    assert degraded_rule_fails(1.0, p_max=0.05)
    # copies 100 and everything else at random: degraded and real items are alike
    noise = random.Random(7)
    p = degraded_test(
        [noise.randint(0, 100) for _ in range(8)], [noise.randint(0, 100) for _ in range(30)], min_checks=5
    )
    assert p > 0.05 and degraded_rule_fails(p, p_max=0.05)
    # too few checks: not yet tested, never passed nor failed
    assert degraded_test(careful[:4], real, min_checks=5) is None and not degraded_rule_fails(None, p_max=0.05)
    assert degraded_test(careful, [], min_checks=5) is None


def submit(hit, worker: str, score, *, n: int = 0) -> str | None:
    """``worker`` submits every item of the HIT with ``score(item)``; the platform then confirms it."""
    aid = f"{worker}-{hit.pk}-{n}"
    judgments = [
        JudgmentInput(candidate=i.candidate_id, score=score(i), fluency=2) for i in hit.items.order_by("position")
    ]
    assignment_submit(
        hit=hit,
        assignment_id=aid,
        worker_id=worker,
        judgments=judgments,
        token=submission_token_make(hit_id=hit.pk, assignment_id=aid, worker_id=worker),
    )
    platform_confirms(aid)
    return Worker.objects.get(external_id=worker).disqualified_reason or None


@pytest.fixture
def rater_hits():
    """12 HITs of 12 references: each a degraded copy, an attention copy and three real candidates."""
    campaign = campaign_of(candidates=3, settings={"min_judgments_per_worker": 1})
    batch = published_batch(campaign, lengths=(10,), attention_rate=1.0, degraded_rate=1.0, assignments=5)
    hits = list(batch.hits.order_by("id"))
    assert len(hits) == 12 and all(h.items.filter(is_degraded_check=True).count() == 1 for h in hits)
    return hits


def careful(item) -> int:
    if item.is_attention_check:
        return 100
    return 15 if item.is_degraded_check else 60 + item.candidate_id % 30


@pytest.mark.django_db
@pytest.mark.parametrize(
    "kind,score",
    [
        ("all-100", lambda item: 100),
        ("constant", lambda item: 100 if item.is_attention_check else 70),
        ("copy-only careful", lambda item: 100 if item.is_attention_check else random.Random(item.pk).randint(0, 100)),
        (
            "degraded scored high",
            lambda item: 100 if item.is_attention_check else (90 if item.is_degraded_check else 40),
        ),
    ],
)
def test_raters_who_pass_every_attention_check_are_caught_by_the_degraded_test(rater_hits, kind, score):
    for hit in rater_hits[:4]:
        assert submit(hit, "W1", score) is None
    quality = worker_quality(worker=Worker.objects.get(external_id="W1"))
    assert (quality.degraded_checks, quality.degraded_p, quality.attention_failed) == (4, None, 0)  # not yet tested
    reason = None
    for hit in rater_hits[4:]:
        reason = submit(hit, "W1", score)
        if reason:
            break
    assert reason is not None, kind
    assert "Mann-Whitney" in reason and "> 0.05" in reason and "attention checks" not in reason
    worker = Worker.objects.get(external_id="W1")
    assert worker.disqualified and "degraded" in worker.disqualified_reason
    # the careful rater beside them stays, with a small p-value
    for hit in rater_hits:
        assert submit(hit, "W2", careful) is None
    good = worker_quality(worker=Worker.objects.get(external_id="W2"))
    assert good.degraded_checks == 12 and good.degraded_p < 0.001 and good.real_judged == 36
    assert not Worker.objects.get(external_id="W2").disqualified


@pytest.mark.django_db
def test_both_rules_are_named_when_both_fire(rater_hits):
    reason = None
    for hit in rater_hits[:5]:
        reason = submit(hit, "W1", lambda item: 50)
    assert "failed 5 of 5 attention checks" in reason and "(100% > 10%" in reason
    assert "Mann-Whitney" in reason and "p = 1 > 0.05" in reason and "5 degraded and 15 real" in reason


@pytest.mark.django_db
def test_unconfirmed_submissions_never_count_toward_the_test(rater_hits):
    for hit in rater_hits[:6]:
        aid = f"forged-{hit.pk}"
        assignment_submit(
            hit=hit,
            assignment_id=aid,
            worker_id="W1",
            token=submission_token_make(hit_id=hit.pk, assignment_id=aid, worker_id="W1"),
            judgments=[JudgmentInput(candidate=i.candidate_id, score=100, fluency=2) for i in hit.items.all()],
        )
    quality = worker_quality(worker=Worker.objects.get(external_id="W1"))
    assert quality.degraded_checks == 0 and quality.degraded_p is None
    assert not Worker.objects.get(external_id="W1").disqualified


@pytest.mark.django_db
def test_admin_lists_counts_and_p_value_or_not_yet_tested(admin_client, rater_hits):
    for hit in rater_hits[:3]:
        submit(hit, "W1", careful)
    for hit in rater_hits[:6]:
        submit(hit, "W2", careful)
    text = admin_client.get("/admin/annotation/worker/").content.decode()
    assert "degraded checks" in text.lower() and "mann-whitney" in text.lower()
    assert "not yet tested (3 of 5 checks)" in text
    p = worker_quality(worker=Worker.objects.get(external_id="W2")).degraded_p
    assert f"{p:.3g}" in text and "6 (vs 18 real)" in text


@pytest.mark.django_db
def test_agreement_is_over_real_candidates_only(rater_hits):
    submit(
        rater_hits[0],
        "W1",
        lambda i: 100 if i.is_attention_check else (0 if i.is_degraded_check else 10 * (i.position + 1)),
    )
    submit(
        rater_hits[0],
        "W2",
        lambda i: 100 if i.is_attention_check else (0 if i.is_degraded_check else 100 - 10 * (i.position + 1)),
    )
    # the copies' shared 100 and the degraded 0 would make them agree; on the real candidates they disagree
    assert worker_quality(worker=Worker.objects.get(external_id="W1")).agreement == pytest.approx(-1.0)


@pytest.mark.django_db
def test_an_easl_batch_with_a_bad_degraded_rate_gets_no_round():
    from annotation.batches.easl_rounds import EaslError

    campaign = campaign_of(SENTENCES[:2])
    easl = Batch.objects.create(campaign=campaign, provider="local", settings={"mode": "easl", "degraded_rate": 3})
    with pytest.raises(EaslError, match="'degraded_rate': 3.0 is out of range"):
        easl_round_create(batch=easl, seed=1)
    assert not Hit.objects.exists()
