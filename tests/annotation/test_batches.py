import json
from collections import Counter
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.batches.making import BatchError, baseline_candidates_import, hit_batch_create
from annotation.batches.params import BatchParams
from annotation.models import ATTENTION_SYSTEM, Batch, BatchStatus, Candidate, CandidateSystem, HitItem
from jobs.models import Job

from .builders import sample_campaign

pytestmark = pytest.mark.django_db


def layout(batch):
    return [
        (h.reference.ref_id, [(i.candidate.text, i.is_attention_check) for i in h.items.order_by("position")])
        for h in batch.hits.order_by("id").select_related("reference")
    ]


def test_every_candidate_of_the_sampled_references_is_in_exactly_one_hit():
    campaign = sample_campaign(refs_per_bucket=4, candidates=7)
    batch = hit_batch_create(
        campaign=campaign, params=BatchParams(provider="local", per_length=2, lengths=(5, 10), attention_rate=0.0)
    )
    items = HitItem.objects.filter(hit__batch=batch)
    refs = {h.reference.ref_id for h in batch.hits.all()}
    assert len([r for r in refs if r.startswith("5-")]) == 2 and len([r for r in refs if r.startswith("10-")]) == 2
    counts = Counter(items.values_list("candidate_id", flat=True))
    expected = Candidate.objects.filter(reference__ref_id__in=refs, reference__campaign=campaign)
    assert set(counts) == set(expected.values_list("id", flat=True)) and set(counts.values()) == {1}
    # 7 candidates of one reference: a HIT of 5 and one of 2; each HIT holds one reference's candidates only
    assert sorted(h.items.count() for h in batch.hits.all()) == [3, 3, 3, 3, 4, 4, 4, 4]  # 4 + 3, not 5 + 2
    for hit in batch.hits.all():
        assert {i.candidate.reference_id for i in hit.items.all()} == {hit.reference_id}
        assert hit.max_assignments == 3
    assert batch.status == BatchStatus.DRAFT and batch.provider == "local"


def test_attention_rate_is_met_and_the_check_is_the_reference_copy():
    campaign = sample_campaign(buckets=(5, 10, 20, 40), refs_per_bucket=10, candidates=4)
    batch = hit_batch_create(
        campaign=campaign,
        params=BatchParams(provider="local", per_length=10, attention_rate=0.25, seed=3, degraded_rate=0),
    )
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
    none = hit_batch_create(
        campaign=campaign,
        params=BatchParams(provider="local", per_length=10, attention_rate=0.0, seed=3, degraded_rate=0),
    )
    assert not HitItem.objects.filter(hit__batch=none, is_attention_check=True).exists()


def test_same_seed_same_batch_other_seed_other_batch():
    campaign = sample_campaign(refs_per_bucket=6, candidates=6)
    a = hit_batch_create(
        campaign=campaign, params=BatchParams(provider="local", per_length=3, seed=7, attention_rate=0.3)
    )
    b = hit_batch_create(
        campaign=campaign, params=BatchParams(provider="local", per_length=3, seed=7, attention_rate=0.3)
    )
    c = hit_batch_create(
        campaign=campaign, params=BatchParams(provider="local", per_length=3, seed=8, attention_rate=0.3)
    )
    assert layout(a) == layout(b)
    assert layout(a) != layout(c)


def test_redundancy_and_provider_settings():
    campaign = sample_campaign(refs_per_bucket=1, candidates=5)
    batch = hit_batch_create(
        campaign=campaign, params=BatchParams(provider="mturk-sandbox", assignments=5, attention_rate=0)
    )
    assert set(batch.hits.values_list("max_assignments", flat=True)) == {5}
    assert batch.provider == "mturk" and batch.settings["sandbox"] is True and batch.settings["assignments"] == 5
    with pytest.raises(BatchError, match="unknown provider"):
        hit_batch_create(campaign=campaign, params=BatchParams(provider="crowdflower"))
    with pytest.raises(BatchError, match="no candidates"):
        hit_batch_create(campaign=campaign, params=BatchParams(provider="local", lengths=(40,)))
    with pytest.raises(BatchError, match="attention-rate"):
        hit_batch_create(campaign=campaign, params=BatchParams(provider="local", attention_rate=1.5))


def test_baseline_outputs_join_the_pool_merged_by_text(tmp_path):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=2)
    path = tmp_path / "paranmt.tsv"
    path.write_text("ref_id\tcandidate\n5-0\tA baseline paraphrase.\n5-0\tParaphrase 0 of reference 5-0.\n")
    batch = hit_batch_create(campaign=campaign, params=BatchParams(provider="local", attention_rate=0, baseline=path))
    texts = [t for _, items in layout(batch) for t, _ in items]
    assert sorted(texts) == [
        "A baseline paraphrase.",
        "Paraphrase 0 of reference 5-0.",
        "Paraphrase 1 of reference 5-0.",
    ]
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
    result = run_cli(
        "--job",
        str(job.pk),
        "--provider",
        "local",
        "--per-length",
        "2",
        "--lengths",
        "5,10",
        "--assignments",
        "2",
        "--attention-rate",
        "0",
        "--seed",
        "1",
    )
    assert list(result) == ["batch", "hits", "cost_estimate_usd", "non_words_left_out"]
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
    result = run_cli(
        "--campaign",
        "sample",
        "--provider",
        "mturk-sandbox",
        "--attention-rate",
        "0",
        "--degraded-rate",
        "0",
        "--batch-settings",
        '{"reward_usd": "0.10"}',
    )
    batch = Batch.objects.get(pk=result["batch"])
    assert batch.status == BatchStatus.DRAFT and result["hits"] == 2
    # 2 HITs x 3 assignments x $0.10 + MTurk's 20% fee
    assert result["cost_estimate_usd"] == pytest.approx(0.72)


# --- bad input: refused in one line, nothing left behind -------------------------------------------


def test_a_baseline_that_is_not_utf8_or_is_a_directory_is_refused_naming_the_line(tmp_path):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=2)
    latin = tmp_path / "latin.tsv"
    latin.write_bytes("ref_id\tcandidate\n5-0\tA fine one.\n5-0\tUn caf\u00e9 noir.\n".encode("latin-1"))
    candidates = Candidate.objects.count()
    with pytest.raises(BatchError, match=r"latin.tsv:3: not UTF-8 \(byte 0xe9"):
        hit_batch_create(campaign=campaign, params=BatchParams(provider="local", baseline=latin))
    with pytest.raises(CommandError, match=r"no batch created: .*latin.tsv:3: not UTF-8"):
        run_cli("--campaign", "sample", "--provider", "local", "--baseline", str(latin))
    with pytest.raises(CommandError, match=r"is a directory, not a baseline TSV file"):
        run_cli("--campaign", "sample", "--provider", "local", "--baseline", str(tmp_path))
    with pytest.raises(CommandError, match=r"nope.tsv: cannot open: No such file"):
        run_cli("--campaign", "sample", "--provider", "local", "--baseline", str(tmp_path / "nope.tsv"))
    assert not Batch.objects.exists() and Candidate.objects.count() == candidates


def test_baseline_errors_name_the_file_line_even_after_a_blank_line(tmp_path):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=2)
    path = tmp_path / "b.tsv"
    path.write_text("ref_id\tcandidate\n5-0\tOne.\n\n5-9\tTwo.\n", encoding="utf-8")
    with pytest.raises(BatchError, match=r"b.tsv:4: ref_id '5-9' is not in campaign"):
        baseline_candidates_import(campaign=campaign, path=path)


BAD_SETTINGS = [
    ('{"reward_usd": "abc"}', "'reward_usd': expected an amount"),
    ('{"reward_usd": -1}', "'reward_usd': -1 is negative"),
    ('{"lifetime_s": "x"}', "'lifetime_s': expected a whole number"),
    ('{"assignment_duration_s": "abc"}', "'assignment_duration_s': expected a whole number"),
    ('{"assignment_duration_s": -5}', "'assignment_duration_s': -5 is out of range"),
    ('{"assignment_duration_s": 1.5}', "'assignment_duration_s': expected a whole number"),
    ('{"auto_approval_delay_s": true}', "'auto_approval_delay_s': expected a whole number"),
    ('{"min_approval_rate": 101}', "'min_approval_rate': 101 is out of range"),
    ('{"mode": "easl", "easl": {"items_per_hit": 0}}', "'easl.items_per_hit': 0 is out of range"),
    ('{"mode": "easl", "easl": {"g": "abc"}}', "'easl.g': expected a number"),
    ('{"mode": "easl", "easl": {"g": 0}}', "'easl.g': 0.0 is out of range"),
    ('{"mode": "easl", "easl": {"hits_per_round": -2}}', "'easl.hits_per_round': -2 is out of range"),
    ('{"mode": "easl", "easl": {"assignments_per_hit": 0}}', "'easl.assignments_per_hit': 0 is out of range"),
    ('{"mode": "easl", "easl": {"judgment_budget": "lots"}}', "'easl.judgment_budget': expected a whole number"),
    ('{"mode": "easl", "easl": 5}', "'easl': expected a JSON object"),
]


@pytest.mark.parametrize("provider", ["local", "mturk-sandbox"])
@pytest.mark.parametrize("given,message", BAD_SETTINGS)
def test_bad_batch_settings_are_refused_naming_the_key_and_nothing_is_made(provider, given, message):
    sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    with pytest.raises(CommandError, match=r"no batch created: batch setting " + message.replace("(", r"\(")):
        run_cli("--campaign", "sample", "--provider", provider, "--batch-settings", given)
    assert not Batch.objects.exists()


def test_the_admins_service_refuses_bad_settings_too_and_keeps_good_ones_as_numbers():
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    with pytest.raises(BatchError, match="'assignment_duration_s': -5 is out of range"):
        hit_batch_create(
            campaign=campaign, params=BatchParams(provider="local", settings={"assignment_duration_s": -5})
        )
    with pytest.raises(BatchError, match="'reward_usd'"):
        hit_batch_create(campaign=campaign, params=BatchParams(provider="mturk", settings={"reward_usd": "abc"}))
    assert not Batch.objects.exists()
    batch = hit_batch_create(
        campaign=campaign,
        params=BatchParams(
            provider="local", settings={"assignment_duration_s": "1800", "mode": "easl", "easl": {"g": "0.2"}}
        ),
    )
    assert batch.settings["assignment_duration_s"] == 1800 and batch.settings["easl"]["g"] == 0.2


def test_a_local_batch_with_a_string_duration_serves_hits_for_that_long():
    from django.contrib.auth import get_user_model

    from annotation.providers.local import local_hit_take

    sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    run_cli("--campaign", "sample", "--provider", "local", "--batch-settings", '{"assignment_duration_s": "600"}')
    taken = local_hit_take(user=get_user_model().objects.create_user("ann", password="pw"))
    assert (taken.expires_at - taken.accepted_at).total_seconds() == 600


def test_empty_campaign_name_is_refused():
    sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    with pytest.raises(CommandError, match="--campaign: the campaign name is empty"):
        run_cli("--campaign", "", "--provider", "local")
    assert not Batch.objects.exists()


# --- --publish checks MTurk's set-up before a batch is made --------------------------------------


@pytest.fixture
def mturk_stub(monkeypatch):
    import boto3
    from botocore.stub import Stubber

    from annotation.providers import mturk as mturk_module

    client = boto3.client("mturk", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    monkeypatch.setattr(mturk_module.client, "mturk_client", lambda sandbox: client)
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def test_publish_without_a_public_url_makes_no_draft(settings):
    settings.PARAFORGE_PUBLIC_URL = ""
    sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    for _ in range(2):  # a re-run makes no draft either
        with pytest.raises(CommandError, match=r"no batch created: cannot publish on mturk: .*PARAFORGE_PUBLIC_URL"):
            run_cli("--campaign", "sample", "--provider", "mturk", "--publish")
    assert not Batch.objects.exists()


def test_publish_without_credentials_makes_no_draft(settings, monkeypatch):
    settings.PARAFORGE_PUBLIC_URL = "https://paraforge.example.org"
    for name in ("MTURK_ACCESS_KEY_ID", "MTURK_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    with pytest.raises(CommandError, match="no batch created: cannot publish on mturk-sandbox: no MTurk credentials"):
        run_cli("--campaign", "sample", "--provider", "mturk-sandbox", "--publish")
    assert not Batch.objects.exists()


def test_publish_with_too_little_balance_makes_no_draft_and_spends_nothing(settings, mturk_stub):
    settings.PARAFORGE_PUBLIC_URL = "https://paraforge.example.org"
    sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    mturk_stub.add_response("get_account_balance", {"AvailableBalance": "0.50"}, {})
    with pytest.raises(CommandError, match=r"no batch created: .*\$0.50 available but this costs \$1.80"):
        run_cli(
            "--campaign",
            "sample",
            "--provider",
            "mturk-sandbox",
            "--attention-rate",
            "0",
            "--publish",
            "--batch-settings",
            '{"reward_usd": "0.50"}',
        )
    assert not Batch.objects.exists() and not Candidate.objects.filter(text="Reference 0 of bucket 5 is here.").exists()


def test_publish_with_a_sound_set_up_still_publishes(settings, mturk_stub):
    from botocore.stub import ANY

    settings.PARAFORGE_PUBLIC_URL = "https://paraforge.example.org"
    sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    mturk_stub.add_response("get_account_balance", {"AvailableBalance": "100.00"}, {})  # the check
    mturk_stub.add_response("get_account_balance", {"AvailableBalance": "100.00"}, {})  # publishing's own
    mturk_stub.add_response(
        "list_qualification_types",
        {
            "NumResults": 1,
            "QualificationTypes": [{"QualificationTypeId": "3BLOCK", "Name": "Paraforge: failed attention checks"}],
        },
    )
    mturk_stub.add_response(
        "create_hit_type",
        {"HITTypeId": "3HITTYPE"},
        {
            "AutoApprovalDelayInSeconds": ANY,
            "AssignmentDurationInSeconds": ANY,
            "Reward": "0.50",
            "Title": ANY,
            "Keywords": ANY,
            "Description": ANY,
            "QualificationRequirements": ANY,
        },
    )
    mturk_stub.add_response("create_hit_with_hit_type", {"HIT": {"HITId": "3HIT" + "0" * 26}})
    result = run_cli(
        "--campaign",
        "sample",
        "--provider",
        "mturk-sandbox",
        "--attention-rate",
        "0",
        "--publish",
        "--batch-settings",
        '{"reward_usd": "0.50"}',
    )
    batch = Batch.objects.get(pk=result["batch"])
    assert batch.status == BatchStatus.PUBLISHED and result["cost_estimate_usd"] == pytest.approx(1.80)
    assert batch.hits.get().external_hit_id == "3HIT" + "0" * 26


def test_a_publish_failing_after_the_checks_keeps_and_names_the_draft(settings, mturk_stub):
    settings.PARAFORGE_PUBLIC_URL = "https://paraforge.example.org"
    sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    mturk_stub.add_response("get_account_balance", {"AvailableBalance": "100.00"}, {})
    mturk_stub.add_response("get_account_balance", {"AvailableBalance": "100.00"}, {})
    mturk_stub.add_client_error(
        "list_qualification_types",
        service_error_code="RequestError",
        service_message="This account is suspended.",
        http_status_code=400,
    )
    kept = r"batch (\d+) was created but not published \(.*suspended.*\); it is a draft: .*crowd publish \1"
    with pytest.raises(CommandError, match=kept):
        run_cli("--campaign", "sample", "--provider", "mturk-sandbox", "--attention-rate", "0", "--publish")
    assert Batch.objects.get().status == BatchStatus.DRAFT


def test_the_configured_hit_provider_is_the_default_of_the_cli_and_the_admin_form(settings):
    """PARAFORGE_HIT_PROVIDER is the provider in use: a batch made without naming one goes there."""
    from annotation.admin import BatchForm

    sample_campaign(refs_per_bucket=1, candidates=5)
    settings.PARAFORGE_HIT_PROVIDER = "mturk-sandbox"
    batch = Batch.objects.get(
        pk=run_cli("--campaign", "sample", "--attention-rate", "0", "--degraded-rate", "0")["batch"]
    )
    assert batch.provider == "mturk" and batch.settings.get("sandbox") is True
    assert BatchForm()["provider"].initial == "mturk-sandbox"
    settings.PARAFORGE_HIT_PROVIDER = "local"
    assert Batch.objects.get(pk=run_cli("--campaign", "sample")["batch"]).provider == "local"


@pytest.mark.parametrize(
    "settings,message",
    [
        ({"reward_usd": "0.50", "rewrad_usd": "5"}, "unknown batch setting(s) 'rewrad_usd'"),
        ({"mturk": {"token_nonce": "x"}}, "unknown batch setting(s) 'mturk'"),  # provider state is not a setting
        ({"title": 7}, "'title': expected text"),
        ({"sandbox": "yes"}, "'sandbox': expected true or false"),
        ({"mode": "adaptive"}, "'mode': 'adaptive' is not one of fixed, easl"),
        ({"locales": [1, 2]}, "'locales': expected country codes"),
    ],
)
def test_batch_settings_follow_their_schema_and_a_typo_is_refused(settings, message):
    sample_campaign(refs_per_bucket=1, candidates=5)
    with pytest.raises(CommandError) as refused:
        run_cli("--campaign", "sample", "--provider", "mturk-sandbox", "--batch-settings", json.dumps(settings))
    assert message in str(refused.value) and not Batch.objects.exists()


def test_mturk_state_moves_out_of_the_settings_into_its_own_field():
    """Migration 0006: what MTurk set up (HIT type, nonce, ...) leaves ``settings``, which keep configuration."""
    import importlib

    from django.apps import apps

    migration = importlib.import_module("annotation.migrations.0006_batch_provider_state")
    campaign = sample_campaign(refs_per_bucket=1, candidates=5)
    old = Batch.objects.create(
        campaign=campaign,
        provider="mturk",
        settings={"reward_usd": "0.50", "sandbox": True, "mturk": {"hit_type_id": "3HT", "token_nonce": "ab"}},
    )
    migration.state_out_of_settings(apps, None)
    old.refresh_from_db()
    assert old.settings == {"reward_usd": "0.50", "sandbox": True}
    assert old.provider_state == {"hit_type_id": "3HT", "token_nonce": "ab"}


# --- candidates with non-words (issue 29) ------------------------------------------------------------------

CORPUS = [
    "The council meets today.",
    "The council gathers in the hall.",
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "A woman is playing the piano in the hall.",
]
NON_WORD_CANDIDATES = {
    "The Zorblax council meets today.": [
        "The Zorblax council gathers today.",  # "Zorblax" is the reference's own rare word
        "The zorblax council meets today, 300!",  # another case, a number, punctuation: words all
        "The Zorblax councilers meets today.",
        "SomeBA council meets today.",
    ],
    "A man is playing a guitar.": ["A woman is playing a guitar.", "A man is playinging a guitar."],
}


@pytest.fixture
def generated_campaign(tmp_path, storage_dir):
    """A campaign generated from a corpus (its generate job names it) whose IDF table build_idf counted."""
    from annotation.models import Campaign, Reference
    from generation.corpus.corpora import ImportCorpusParams, corpus_import
    from jobs.execution import job_run_inline, job_start

    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n")
    corpus = corpus_import(ImportCorpusParams(name="small", path=path, format="mono"))
    idf = job_run_inline(job_id=job_start(kind="build_idf", params={"corpus": corpus.pk}, enqueue=False).pk)
    assert idf.status == "succeeded"
    job = Job.objects.create(kind="generate", params={"corpus": corpus.pk}, status="succeeded")
    campaign = Campaign.objects.create(name="generated", job=job)
    for i, (text, outputs) in enumerate(NON_WORD_CANDIDATES.items()):
        ref = Reference.objects.create(campaign=campaign, ref_id=str(i), length_bucket=5, text=text)
        for k, output in enumerate(outputs):
            CandidateSystem.objects.create(candidate=Candidate.objects.create(reference=ref, text=output), system=k)
    return campaign


def shown(batch) -> set[str]:
    items = HitItem.objects.filter(hit__batch=batch, is_attention_check=False, is_degraded_check=False)
    return set(items.values_list("candidate__text", flat=True))


def test_candidates_with_non_words_are_left_out_of_the_hits_and_counted(generated_campaign):
    result = run_cli("--campaign", "generated", "--provider", "local", "--lengths", "5", "--attention-rate", "0")
    batch = Batch.objects.get(pk=result["batch"])
    # a word of the reference (any case), numbers and punctuation are never non-words
    assert shown(batch) == {
        "The Zorblax council gathers today.",
        "The zorblax council meets today, 300!",
        "A woman is playing a guitar.",
    }
    assert result["non_words_left_out"] == 3 and batch.settings["drop_non_words"] is True
    record = batch.settings["non_words"]
    assert record["left_out"] == 3 and "IDF table 'small' of corpus 'small'" in record["vocabulary"]
    assert {(e["text"], tuple(e["non_words"])) for e in record["examples"]} == {
        ("The Zorblax councilers meets today.", ("councilers",)),
        ("SomeBA council meets today.", ("someba",)),
        ("A man is playinging a guitar.", ("playinging",)),
    }
    assert Candidate.objects.filter(text="SomeBA council meets today.").exists()  # left out, not deleted
    out = StringIO()
    call_command("report", "generated", "--table", "similarity", "--format", "md", stdout=out)
    assert "3 candidate(s) with non-words left out of the HITs (batch" in out.getvalue()


def test_drop_non_words_false_keeps_every_candidate_as_parabank_did(generated_campaign):
    batch = hit_batch_create(
        campaign=generated_campaign,
        params=BatchParams(provider="local", lengths=(5,), attention_rate=0, settings={"drop_non_words": False}),
    )
    assert shown(batch) == {text for outputs in NON_WORD_CANDIDATES.values() for text in outputs}
    assert batch.settings["drop_non_words"] is False and batch.settings["non_words"]["left_out"] == 0
    with pytest.raises(BatchError, match="'drop_non_words': expected true or false"):
        hit_batch_create(
            campaign=generated_campaign, params=BatchParams(provider="local", settings={"drop_non_words": "no"})
        )


def test_a_campaign_with_no_known_corpus_keeps_every_candidate_and_says_so():
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=0)
    for k, text in enumerate(["Reachinging the foesity.", "SomeBA is here."]):
        cand = Candidate.objects.create(reference=campaign.references.get(), text=text)
        CandidateSystem.objects.create(candidate=cand, system=str(k + 1))
    result = run_cli("--campaign", "sample", "--provider", "local", "--attention-rate", "0", "--lengths", "5")
    batch = Batch.objects.get(pk=result["batch"])
    assert shown(batch) == {"Reachinging the foesity.", "SomeBA is here."} and result["non_words_left_out"] == 0
    assert "no known corpus" in batch.settings["non_words"]["note"]
    err = StringIO()
    call_command("report", "sample", "--table", "fluency", stdout=StringIO(), stderr=err)
    assert "0 candidate(s) with non-words left out" in err.getvalue() and "no known corpus" in err.getvalue()


def test_a_sample_of_nothing_but_non_words_says_why_it_has_no_candidates(generated_campaign):
    from annotation.models import Reference

    Reference.objects.filter(campaign=generated_campaign, ref_id="0").delete()
    Candidate.objects.filter(text="A woman is playing a guitar.").delete()
    with pytest.raises(BatchError, match="1 left out for non-words; the batch setting drop_non_words false"):
        hit_batch_create(campaign=generated_campaign, params=BatchParams(provider="local", lengths=(5,)))


# --- candidates that loop ------------------------------------------------------------------------------------------

RBA = "Reserve Bank of India delivers rate cut for 2nd time in 2016-17 cycle."
RBA_LOOP = (
    "RBI delivers a second rate cut. Edited excerpts: RBI delivers a second rate cut. Edited excerpts: RBI delivers "
    "a second rate cut. Edited excerpts: RBI delivers a second rate cut."
)


def test_candidates_that_loop_are_left_out_of_the_hits_and_every_later_round(tmp_path):
    """The quick start once showed workers this loop (system 29, decoded without --avoid-copies). It is left out even
    where no corpus is known (the non-word screen keeps everything there), recorded, and stays out of later EASL
    rounds; ``drop_loops`` false keeps it."""
    from annotation.batches.easl_rounds import batch_items

    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=0)
    ref = campaign.references.get()
    ref.text = RBA
    ref.save()
    for k, text in enumerate([RBA_LOOP, "RBI cuts its rate for the second time this cycle."]):
        CandidateSystem.objects.create(candidate=Candidate.objects.create(reference=ref, text=text), system=str(k + 1))
    result = run_cli("--campaign", "sample", "--provider", "local", "--attention-rate", "0", "--lengths", "5")
    batch = Batch.objects.get(pk=result["batch"])
    assert shown(batch) == {"RBI cuts its rate for the second time this cycle."}
    assert batch.settings["drop_loops"] is True and batch.settings["loops"]["left_out"] == 1
    assert [e["text"] for e in batch.settings["loops"]["examples"]] == [RBA_LOOP]
    loop = Candidate.objects.get(text=RBA_LOOP)  # left out, not deleted
    assert loop.pk not in {pk for pks in batch_items(batch).values() for pk in pks}

    kept = hit_batch_create(
        campaign=campaign,
        params=BatchParams(provider="local", lengths=(5,), attention_rate=0, settings={"drop_loops": False}),
    )
    assert RBA_LOOP in shown(kept) and kept.settings["loops"]["left_out"] == 0
    assert loop.pk in {pk for pks in batch_items(kept).values() for pk in pks}
    Candidate.objects.exclude(pk=loop.pk).filter(reference=ref).exclude(text=RBA).delete()
    with pytest.raises(BatchError, match="1 left out for loops; the batch setting drop_loops false keeps them"):
        hit_batch_create(campaign=campaign, params=BatchParams(provider="local", lengths=(5,), attention_rate=0))
