import gzip

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from generation.constraints.constraint_job import KIND, SelectConstraintsParams, output_key
from generation.constraints.sets import select_for_all_systems
from generation.models import Corpus, CorpusShard, IdfTable
from infra.shards import read_jsonl_gz, write_jsonl_gz
from infra.storage import get_storage
from jobs.execution import job_run_inline, job_start
from jobs.models import JobStatus
from jobs.params import ParamsError, from_values

pytestmark = pytest.mark.django_db

TAB2 = {
    "proud": 11.1,
    "told": 7.9,
    "work": 7.4,
    "them": 6.2,
    "her": 5.8,
    "was": 4.3,
    "for": 3.6,
    "to": 2.3,
    "earthquakes": 12.0,
    "occur": 9.0,
    "often": 7.5,
}
REFERENCES = [
    "I told her I was proud to work for them.",
    "How often do earthquakes occur ?",
    "Hi .",
    "<script>alert('x')</script> was proud",
]


def _corpus(references, shard_size=2):
    corpus = Corpus.objects.create(name="tiny", format="mono", status="ready", n_references=len(references))
    for index, start in enumerate(range(0, len(references), shard_size)):
        key = f"corpora/{corpus.pk}/shard-{index:05d}.jsonl.gz"
        records = [
            {"i": i, "line": i + 1, "reference": references[i]}
            for i in range(start, min(len(references), start + shard_size))
        ]
        meta = write_jsonl_gz(key, records)
        CorpusShard.objects.create(
            corpus=corpus,
            index=index,
            key=key,
            n_records=len(records),
            first_record=start,
            sha256=meta["sha256"],
            bytes=meta["bytes"],
        )
    with get_storage().open_write(f"idf/tiny-{corpus.pk}.tsv") as fh:
        fh.write(("token\tidf\n" + "".join(f"{k}\t{v}\n" for k, v in TAB2.items())).encode())
    table = IdfTable.objects.create(
        corpus=corpus, name=f"tiny-{corpus.pk}", key=f"idf/tiny-{corpus.pk}.tsv", n_documents=10, n_types=len(TAB2)
    )
    return corpus, table


def test_job_writes_one_record_per_reference_and_system(storage_dir):
    corpus, table = _corpus(REFERENCES)
    job = job_start(kind=KIND, params={"corpus": corpus.pk, "seed": 3, "systems": [18, 7, 24, 32, 34]}, enqueue=False)
    assert job.total_chunks == 2 and job.params["idf_table"] == table.pk
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    records = [r for shard in (0, 1) for r in read_jsonl_gz(output_key(job.pk, shard))]
    assert len(records) == 4 * 5
    assert [(r["i"], r["system"]) for r in records[:5]] == [(0, 18), (0, 7), (0, 24), (0, 32), (0, 34)]
    first = records[0]
    assert first == {
        "i": 0,
        "system": 18,
        "positive": [],
        "negative": [["to"], ["To"], ["for"], ["For"]],
        "bos_avoid": [],
    }
    short = [r for r in records if r["i"] == 2 and r["system"] == 34][0]
    assert set(short) == {"i", "system", "no_constraint_set"}
    # same as the function (the seed is per sentence, not per batch)
    expected = select_for_all_systems(REFERENCES[1], TAB2, seed=3, systems=[18, 7, 24, 32, 34])
    got = [r for r in records if r["i"] == 1]
    for e, g in zip(expected, got):
        data = e.to_json()
        data.pop("name")
        if "no_constraint_set" in data:
            data = {"no_constraint_set": data["no_constraint_set"]}
        assert {k: v for k, v in g.items() if k != "i"} == {"system": e.system, **data}
    per = job.result["per_system"]
    assert job.result["references"] == 4 and job.result["records"] == 20
    assert per["32"] == {"sets": 4, "none": 0} and per["34"] == {"sets": 3, "none": 1}
    assert sum(v["sets"] + v["none"] for v in per.values()) == 20


def test_rerunning_a_chunk_writes_the_same_file(storage_dir):
    from generation.constraints.constraint_job import _run_chunk

    corpus, _ = _corpus(REFERENCES)
    job = job_start(kind=KIND, params={"corpus": corpus.pk, "systems": [1, 22]}, enqueue=False)
    job = job_run_inline(job_id=job.pk)
    chunk = job.chunks.get(index=0)
    before = (storage_dir / output_key(job.pk, 0)).read_bytes()
    _run_chunk(job, chunk, lambda done, total: None)
    assert (storage_dir / output_key(job.pk, 0)).read_bytes() == before
    assert gzip.decompress(before).count(b"\n") == 4


def test_default_systems_and_ppdb_requirement(storage_dir):
    corpus, _ = _corpus(REFERENCES[:1])
    job = job_start(kind=KIND, params={"corpus": corpus.pk}, enqueue=False)
    assert job.params["systems"] == list(range(1, 35))
    with pytest.raises(ValueError, match="PPDB"):
        job_start(kind=KIND, params={"corpus": corpus.pk, "systems": [35]}, enqueue=False)


# --- the research page ----------------------------------------------------------------------------


@pytest.fixture
def staff_client(client, django_user_model):
    user = django_user_model.objects.create_user("staff-c", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_corpus"))  # what the admin asks to list corpora
    client.force_login(user)
    return client


def test_page_shows_all_37_systems_for_a_corpus_reference(staff_client, storage_dir):
    corpus, table = _corpus(REFERENCES)
    url = reverse("corpus_constraint_systems", args=[corpus.pk])
    page = staff_client.get(url, {"i": 0})
    assert page.status_code == 200
    html = page.content.decode()
    assert "I told her I was proud to work for them." in html
    assert html.count("<tr class=") == 37
    assert "neg (1st,2nd) lowest IDF" in html and "to, To, for, For" in html
    assert "no constraint set" in html  # PPDB systems without a PPDB file
    assert staff_client.get(url, {"i": 99}).status_code == 200


def test_free_form_page_escapes_the_sentence(staff_client, storage_dir):
    _corpus(REFERENCES)
    page = staff_client.get(reverse("constraint_systems"), {"sentence": "<script>alert('x')</script> was proud"})
    html = page.content.decode()
    assert page.status_code == 200 and "<script>alert" not in html
    assert "&lt;script&gt;" in html and html.count("<tr class=") == 37


def test_corpus_reference_with_script_is_escaped(staff_client, storage_dir):
    corpus, _ = _corpus(REFERENCES)
    html = staff_client.get(reverse("corpus_constraint_systems", args=[corpus.pk]), {"i": 3}).content.decode()
    assert "<script>alert" not in html and "&lt;script&gt;" in html


def test_page_is_refused_to_anonymous_and_non_staff(client, django_user_model, storage_dir):
    corpus, _ = _corpus(REFERENCES[:1])
    for url in (reverse("constraint_systems"), reverse("corpus_constraint_systems", args=[corpus.pk])):
        response = client.get(url, {"sentence": "x"})
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
    client.force_login(django_user_model.objects.create_user("plain-c", password="pw"))
    assert client.get(reverse("constraint_systems")).status_code == 302


def test_a_job_with_only_a_corpus_runs_and_the_plan_records_what_it_chose(storage_dir):
    """The oldest shape: no idf_table, systems, seed, window or batch size; the plan adds the three it resolves."""
    corpus, table = _corpus(REFERENCES[:2])
    job = job_start(kind=KIND, params={"corpus": corpus.pk}, enqueue=False)
    assert list(job.params.items()) == [
        ("corpus", corpus.pk),
        ("idf_table", table.pk),
        ("systems", list(range(1, 35))),
        ("seed", 0),
    ]
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.result["records"] == 2 * 34
    params = from_values(SelectConstraintsParams, job.params)
    assert (params.batch_size, params.options.idf_window()) == (256, (7.0, 17.0))


def test_an_idf_window_that_leaves_every_pool_empty_is_refused_when_the_job_is_made(storage_dir):
    corpus, _ = _corpus(REFERENCES[:1])
    with pytest.raises(ParamsError, match=r"min-idf \(12\) > max-idf \(8\)"):
        job_start(kind=KIND, params={"corpus": corpus.pk, "min_idf": 12, "max_idf": 8}, enqueue=False)
    with pytest.raises(ParamsError, match="batch_size must be at least 1"):
        SelectConstraintsParams(corpus=corpus.pk, batch_size=0)
