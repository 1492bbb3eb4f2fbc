import json
from collections import Counter
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.batches import BatchError, baseline_candidates_import, hit_batch_create
from annotation.models import ATTENTION_SYSTEM, Batch, BatchStatus, Candidate, CandidateSystem, HitItem
from jobs.models import Job

from .builders import sample_campaign

pytestmark = pytest.mark.django_db


def layout(batch):
    return [(h.reference.ref_id, [(i.candidate.text, i.is_attention_check) for i in h.items.order_by("position")])
            for h in batch.hits.order_by("id").select_related("reference")]


def test_every_candidate_of_the_sampled_references_is_in_exactly_one_hit():
    campaign = sample_campaign(refs_per_bucket=4, candidates=7)
    batch = hit_batch_create(campaign=campaign, provider="local", per_length=2, lengths=(5, 10), attention_rate=0.0)
    items = HitItem.objects.filter(hit__batch=batch)
    refs = {h.reference.ref_id for h in batch.hits.all()}
    assert len([r for r in refs if r.startswith("5-")]) == 2 and len([r for r in refs if r.startswith("10-")]) == 2
    counts = Counter(items.values_list("candidate_id", flat=True))
    expected = Candidate.objects.filter(reference__ref_id__in=refs, reference__campaign=campaign)
    assert set(counts) == set(expected.values_list("id", flat=True)) and set(counts.values()) == {1}
    # 7 candidates of one reference: a HIT of 5 and one of 2; each HIT holds one reference's candidates only
    assert sorted(h.items.count() for h in batch.hits.all()) == [2, 2, 2, 2, 5, 5, 5, 5]
    for hit in batch.hits.all():
        assert {i.candidate.reference_id for i in hit.items.all()} == {hit.reference_id}
        assert hit.max_assignments == 3
    assert batch.status == BatchStatus.DRAFT and batch.provider == "local"


def test_attention_rate_is_met_and_the_check_is_the_reference_copy():
    campaign = sample_campaign(buckets=(5, 10, 20, 40), refs_per_bucket=10, candidates=4)
    batch = hit_batch_create(campaign=campaign, provider="local", per_length=10, attention_rate=0.25, seed=3)
    hits = list(batch.hits.prefetch_related("items__candidate").select_related("reference"))
    assert len(hits) == 40
    checked = [h for h in hits if any(i.is_attention_check for i in h.items.all())]
    assert len(checked) in (9, 10, 11)
    for hit in checked:
        checks = [i for i in hit.items.all() if i.is_attention_check]
        assert len(checks) == 1 and checks[0].candidate.text == hit.reference.text
        assert CandidateSystem.objects.filter(candidate=checks[0].candidate, system=ATTENTION_SYSTEM).exists()
        assert hit.items.count() <= 5
    # no reference's copy is checked twice in one batch
    assert len({h.reference_id for h in checked}) == len(checked)
    none = hit_batch_create(campaign=campaign, provider="local", per_length=10, attention_rate=0.0, seed=3)
    assert not HitItem.objects.filter(hit__batch=none, is_attention_check=True).exists()


def test_same_seed_same_batch_other_seed_other_batch():
    campaign = sample_campaign(refs_per_bucket=6, candidates=6)
    a = hit_batch_create(campaign=campaign, provider="local", per_length=3, seed=7, attention_rate=0.3)
    b = hit_batch_create(campaign=campaign, provider="local", per_length=3, seed=7, attention_rate=0.3)
    c = hit_batch_create(campaign=campaign, provider="local", per_length=3, seed=8, attention_rate=0.3)
    assert layout(a) == layout(b)
    assert layout(a) != layout(c)


def test_redundancy_and_provider_settings():
    campaign = sample_campaign(refs_per_bucket=1, candidates=5)
    batch = hit_batch_create(campaign=campaign, provider="mturk-sandbox", assignments=5, attention_rate=0)
    assert set(batch.hits.values_list("max_assignments", flat=True)) == {5}
    assert batch.provider == "mturk" and batch.settings["sandbox"] is True and batch.settings["assignments"] == 5
    with pytest.raises(BatchError, match="unknown provider"):
        hit_batch_create(campaign=campaign, provider="crowdflower")
    with pytest.raises(BatchError, match="no candidates"):
        hit_batch_create(campaign=campaign, provider="local", lengths=(40,))
    with pytest.raises(BatchError, match="attention-rate"):
        hit_batch_create(campaign=campaign, provider="local", attention_rate=1.5)


def test_baseline_outputs_join_the_pool_merged_by_text(tmp_path):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=2)
    path = tmp_path / "paranmt.tsv"
    path.write_text("ref_id\tcandidate\n5-0\tA baseline paraphrase.\n5-0\tParaphrase 0 of reference 5-0.\n")
    batch = hit_batch_create(campaign=campaign, provider="local", attention_rate=0, baseline=path)
    texts = [t for _, items in layout(batch) for t, _ in items]
    assert sorted(texts) == ["A baseline paraphrase.", "Paraphrase 0 of reference 5-0.",
                             "Paraphrase 1 of reference 5-0."]
    merged = Candidate.objects.get(text="Paraphrase 0 of reference 5-0.")
    assert set(merged.systems.values_list("system", flat=True)) == {"1", "35"}
    bad = tmp_path / "bad.tsv"
    bad.write_text("ref_id\tcandidate\nnope\tX.\n")
    with pytest.raises(BatchError, match="not in campaign"):
        baseline_candidates_import(campaign=campaign, path=bad)


def run_cli(*args) -> dict:
    out = StringIO()
    call_command("create_hit_batch", *args, stdout=out)
    return json.loads(out.getvalue())


def test_cli_prints_the_exact_summary_and_local_batches_are_live():
    job = Job.objects.create(kind="generate", label="g")
    sample_campaign(refs_per_bucket=2, candidates=5, job=job)
    result = run_cli("--job", str(job.pk), "--provider", "local", "--per-length", "2", "--lengths", "5,10",
                     "--assignments", "2", "--attention-rate", "0", "--seed", "1")
    assert list(result) == ["batch", "hits", "cost_estimate_usd"]
    batch = Batch.objects.get(pk=result["batch"])
    assert result["hits"] == batch.hits.count() == 4 and result["cost_estimate_usd"] is None
    assert batch.status == BatchStatus.PUBLISHED
    assert run_cli("--campaign", "sample", "--provider", "local", "--per-length", "1")["hits"] >= 2


def test_cli_errors_are_clear_and_create_nothing():
    with pytest.raises(CommandError, match="no evaluation sample"):
        run_cli("--job", "999", "--provider", "local")
    sample_campaign(refs_per_bucket=1, candidates=2)
    with pytest.raises(CommandError, match="--lengths"):
        run_cli("--campaign", "sample", "--provider", "local", "--lengths", "5,x")
    with pytest.raises(CommandError, match="no candidates"):
        run_cli("--campaign", "sample", "--provider", "local", "--lengths", "40")
    assert not Batch.objects.exists()


def test_cli_mturk_sandbox_gives_a_cost_estimate_and_stays_a_draft():
    sample_campaign(refs_per_bucket=1, candidates=5)
    result = run_cli("--campaign", "sample", "--provider", "mturk-sandbox", "--attention-rate", "0",
                     "--batch-settings", '{"reward_usd": "0.10"}')
    batch = Batch.objects.get(pk=result["batch"])
    assert batch.status == BatchStatus.DRAFT and result["hits"] == 2
    # 2 HITs x 3 assignments x $0.10 + MTurk's 20% fee
    assert result["cost_estimate_usd"] == pytest.approx(0.72)
