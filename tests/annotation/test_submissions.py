import itertools

import pytest
from hypothesis import given, settings, strategies as st

from annotation.hits.submissions import JudgmentInput, SubmissionError, assignment_submit
from annotation.hits.tokens import submission_token_make
from annotation.models import Assignment, Judgment

from .builders import platform_confirms, published_batch, sample_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def hit():
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    return published_batch(campaign, attention_rate=0, assignments=3).hits.get()


def submit(hit, n, judgments=None):
    aid, wid = f"A{n}", f"W{n}"
    judgments = (
        judgments
        if judgments is not None
        else [JudgmentInput(candidate=c, score=50, fluency=2) for c in hit.items.values_list("candidate_id", flat=True)]
    )
    return assignment_submit(
        hit=hit,
        assignment_id=aid,
        worker_id=wid,
        judgments=judgments,
        token=submission_token_make(hit_id=hit.pk, assignment_id=aid, worker_id=wid),
    )


def test_the_cap_is_never_exceeded(hit):
    results = []
    for n in range(5):
        try:
            results.append(submit(hit, n).created)
            platform_confirms(f"A{n}")  # verified assignments take the HIT's slots
        except SubmissionError as exc:
            assert exc.status == 409 and exc.code == "hit_full"
            results.append(None)
    assert results == [True, True, True, None, None]
    assert Assignment.objects.filter(hit=hit).count() == 3 and Judgment.objects.count() == 15
    # a replay of a stored assignment is still answered (it takes no new slot)
    assert submit(hit, 1).created is False


values = st.one_of(
    st.none(),
    st.integers(-5, 105),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=3),
    st.sampled_from([0, 1, 2, 100]),
)


def test_random_payloads_never_save_invalid_data(hit):
    ids = list(hit.items.values_list("candidate_id", flat=True))
    counter, saved_count = itertools.count(1000), []
    candidate = st.one_of(st.sampled_from(ids), st.integers(-1, max(ids) + 3), st.text(max_size=2), st.none())

    @settings(max_examples=50, deadline=None, database=None, derandomize=True)
    @given(data=st.data())
    def check(data):
        rows = data.draw(
            st.lists(st.builds(JudgmentInput, candidate=candidate, score=values, fluency=values), max_size=7)
        )
        mode = data.draw(st.sampled_from(["random", "complete", "valid"]))
        if mode == "complete":  # a complete set of the HIT's candidates with random values
            score = st.one_of(st.integers(-1, 101), st.integers(0, 100), st.integers(0, 100), st.none())
            rows = [
                JudgmentInput(candidate=c, score=data.draw(score), fluency=data.draw(st.sampled_from([0, 1, 2, 2, 3])))
                for c in ids
            ]
        elif mode == "valid":  # a well-formed set, in a random order: it must be saved exactly as sent
            pair = st.one_of(st.tuples(st.integers(0, 100), st.sampled_from([0, 1, 2])), st.just((None, 0)))
            rows = [
                JudgmentInput(candidate=c, score=s, fluency=f)
                for c, (s, f) in zip(data.draw(st.permutations(ids)), (data.draw(pair) for _ in ids))
            ]
        before = (Assignment.objects.count(), Judgment.objects.count())
        try:
            result = submit(hit, next(counter), rows)
        except SubmissionError:
            assert (Assignment.objects.count(), Judgment.objects.count()) == before
            return
        saved = list(
            Judgment.objects.filter(assignment=result.assignment).values_list("candidate_id", "score", "fluency")
        )
        assert sorted(c for c, _, _ in saved) == sorted(ids)
        for _, score, fluency in saved:
            assert fluency in (0, 1, 2)
            assert (score is None and fluency == 0) or (isinstance(score, int) and 0 <= score <= 100)
        assert sorted(saved, key=str) == sorted(((r.candidate, r.score, r.fluency) for r in rows), key=str)
        saved_count.append(1)
        # free the slot for the next example: the property is about validation, not the cap
        Assignment.objects.filter(pk=result.assignment.pk).delete()

    check()
    assert saved_count, "no random payload was valid: the property was never exercised on a save"
