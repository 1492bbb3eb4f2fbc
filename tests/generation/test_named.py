import pytest
from django.core.management import CommandError

from generation.constraints.idf import IdfFileError, idf_table_get
from generation.corpus.corpora import corpus_get
from generation.models import Corpus, CorpusFormat
from scoring.management.commands.score_resource import find_resource

pytestmark = pytest.mark.django_db


def test_a_corpus_is_found_by_name_first_then_by_id():
    first = Corpus.objects.create(name="news", format=CorpusFormat.MONO)
    named_like_an_id = Corpus.objects.create(name=str(first.pk), format=CorpusFormat.MONO)
    assert corpus_get("news") == first
    assert corpus_get(str(first.pk)) == named_like_an_id  # the name wins over the id
    assert corpus_get(str(named_like_an_id.pk)) == named_like_an_id
    assert corpus_get("nothing") is None and corpus_get("999999") is None


def test_unknown_idf_tables_and_resources_are_clear_errors():
    with pytest.raises(IdfFileError, match="no IDF table named or numbered 'missing'"):
        idf_table_get("missing")
    with pytest.raises(CommandError, match="no resource named or numbered '424242'"):
        find_resource("424242")
