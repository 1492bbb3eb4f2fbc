"""The constraints page (/research/constraints/) explains itself (issue 37, item 7): it opens on an example, shows
each word's IDF and whether it joins the pool, and says why systems find the pool too small and what to change."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from generation.models import Corpus, CorpusShard, IdfTable
from generation.web.views_constraints import EXAMPLE_SENTENCE
from infra.shards import write_jsonl_gz
from infra.storage import get_storage

pytestmark = pytest.mark.django_db

# IDF values as a 3,000-sentence corpus like the demo's gives them: ln(3000) = 8.0 at most, so only a word seen
# in one or two of its sentences reaches ParaBank's window (7-17)
SMALL_CORPUS_IDF = {
    **{"i": 0.9, "told": 5.5, "her": 3.1, "was": 1.2, "proud": 7.6, "to": 0.4, "work": 4.6, "for": 1.3},
    **{"friends": 5.9, "that": 0.8, "the": 0.1, "done": 4.0},
}
COMMON_WORDS = "Her friends told her that the work was done."  # no word of it reaches 7 on a small corpus


def small_corpus_table(references=("The committee told them to wait.",)) -> tuple[Corpus, IdfTable]:
    corpus = Corpus.objects.create(name="small", format="mono", status="ready", n_references=len(references))
    key = f"corpora/{corpus.pk}/shard-00000.jsonl.gz"
    meta = write_jsonl_gz(key, [{"i": i, "line": i + 1, "reference": r} for i, r in enumerate(references)])
    CorpusShard.objects.create(
        corpus=corpus,
        index=0,
        key=key,
        n_records=len(references),
        first_record=0,
        sha256=meta["sha256"],
        bytes=meta["bytes"],
    )
    with get_storage().open_write("idf/small.tsv") as fh:
        fh.write(("token\tidf\n" + "".join(f"{k}\t{v}\n" for k, v in SMALL_CORPUS_IDF.items())).encode())
    table = IdfTable.objects.create(
        corpus=corpus, name="small", key="idf/small.tsv", n_documents=3000, n_types=len(SMALL_CORPUS_IDF)
    )
    return corpus, table


@pytest.fixture
def researcher(client, django_user_model):
    user = django_user_model.objects.create_user("researcher", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_corpus"))
    client.force_login(user)
    return client


def systems_without_a_set(html: str, reason: str) -> int:
    return len(re.findall(rf"no constraint set: {reason}", html))


def test_the_page_opens_on_an_example(researcher, storage_dir):
    corpus, _ = small_corpus_table()
    html = researcher.get(reverse("constraint_systems")).content.decode()
    assert EXAMPLE_SENTENCE in html and 'id="example-note"' in html
    assert html.count("<tr class=") == 37  # every system's row, for the example
    assert f'value="{EXAMPLE_SENTENCE}"' in html  # in the box, to edit
    # a corpus's page opens on its first reference
    html = researcher.get(reverse("corpus_constraint_systems", args=[corpus.pk])).content.decode()
    assert "The committee told them to wait." in html and html.count("<tr class=") == 37
    # asked for something, the page shows that and no example note
    html = researcher.get(reverse("constraint_systems"), {"sentence": "Her work was good."}).content.decode()
    assert 'id="example-note"' not in html and "Her work was good." in html


def test_each_word_shows_its_idf_and_whether_it_joins_the_pool(researcher, storage_dir):
    small_corpus_table()
    html = researcher.get(reverse("constraint_systems"), {"sentence": EXAMPLE_SENTENCE}).content.decode()
    table = html.split('id="word-idf"', 1)[1].split("</table>", 1)[0]
    row = lambda word: re.search(rf'<th scope="row">{word}</th><td>([^<]*)</td><td[^>]*>([^<]*)</td>', table).groups()  # noqa: E731
    assert row("proud") == ("7.60", "in the pool")
    assert row("told") == ("5.50", "below the window (a common word)")
    assert row("for") == ("1.30", "in the pool (preposition)")
    assert row("them") == ("-", "not in the IDF table")
    assert row(r"\.") == ("-", "not a word")


def test_a_too_small_pool_is_explained_with_what_to_change(researcher, storage_dir):
    small_corpus_table()
    url = reverse("constraint_systems")
    html = researcher.get(url, {"sentence": COMMON_WORDS}).content.decode()
    too_small = systems_without_a_set(html, "pool too small")
    assert too_small > 10
    hint = html.split('id="pool-hint"', 1)[1].split("</div>", 1)[0]
    assert f"{too_small} of 37 systems find the pool too small" in hint
    assert "built from 3000 documents" in hint and "ln(3000) = 8.0" in hint and "a small corpus" in hint
    assert "import_idf" in hint and "build_idf" in hint
    # the suggested window lets more systems work, and the hint goes once none is short of words
    suggested = re.search(r'href="([^"]+)" id="pool-hint-try"', hint).group(1).replace("&amp;", "&")
    assert "min_idf=5" in suggested
    wider = researcher.get(url + suggested).content.decode()
    assert systems_without_a_set(wider, "pool too small") < too_small
    widest = researcher.get(url, {"sentence": COMMON_WORDS, "min_idf": "0"}).content.decode()
    assert systems_without_a_set(widest, "pool too small") == 0 and 'id="pool-hint"' not in widest
