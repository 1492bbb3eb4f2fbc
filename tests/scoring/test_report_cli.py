import csv
import io
import json

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Campaign
from scoring.dashboard.tables import system_name
from tests.annotation.parabank_data import CANDS, import_contract

pytestmark = pytest.mark.django_db


@pytest.fixture
def campaign(tmp_path):
    import_contract(tmp_path, cands=CANDS + ["3\t1\t5\t35\tIt's fine now.\t\t90\t2"])
    return Campaign.objects.get(name="contract")


def report(*args):
    out = io.StringIO()
    call_command("report", *args, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize("table", ["similarity", "fluency", "diversity"])
def test_json_shape(campaign, table):
    result = json.loads(report("contract", "--table", table, "--format", "json", "--min-judgments", "0"))
    assert result["table"] == table
    systems = [r["system"] for r in result["rows"]]
    assert systems == ["17", "21", "28", "35"]
    for row in result["rows"]:
        assert {"system", "name", "by_length", "avg", "std", "n"} <= set(row)
        assert set(row["by_length"]) == {"5", "10", "20", "40"}
        assert isinstance(row["system"], str) and isinstance(row["n"], int)
    if table == "diversity":
        assert {"unigram_precision", "pinc", "levenshtein_bins"} <= set(result["rows"][0])
        assert set(result["rows"][0]["levenshtein_bins"]) >= {"1", "2", "3", "4", "5+"}


def test_json_values_unrounded_and_default_format(campaign):
    result = json.loads(report("contract", "--table", "similarity", "--min-judgments", "0"))
    rows = {r["system"]: r for r in result["rows"]}
    assert rows["28"]["by_length"]["5"] == pytest.approx(79.5)
    assert rows["35"]["name"] == "PARANMT" and rows["35"]["avg"] == 90.0
    assert result["min_judgments"] == 0 and result["counted_workers"] == 3


def test_min_judgments_default_is_the_campaigns(campaign):
    result = json.loads(report("contract", "--table", "similarity"))
    assert result["min_judgments"] == 25 and all(r["avg"] is None for r in result["rows"])


def test_markdown(campaign):
    md = report("contract", "--table", "fluency", "--format", "md", "--min-judgments", "0")
    lines = [line for line in md.splitlines() if line.startswith("|")]
    assert lines[0] == "| # | System | 5 | Avg. |"  # only 5-token references are judged: no empty columns
    assert len(lines) == 2 + 4
    assert lines[2].startswith("| 17 | ") and lines[2].endswith("| 50.00 | 50.00 |")
    assert "| 35 | PARANMT | 100.00 |" in md


def test_csv(campaign):
    text = report("contract", "--table", "similarity", "--format", "csv", "--min-judgments", "0")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["system", "name", "5", "avg", "std", "n"]  # the lengths with a figure
    by = {r["system"]: r for r in rows}
    assert float(by["28"]["5"]) == pytest.approx(79.5) and "10" not in by["28"] and by["28"]["n"] == "2"


def test_unknown_campaign():
    with pytest.raises(CommandError, match="no campaign named 'nope'"):
        report("nope", "--table", "similarity")


def test_system_names_fall_back_to_the_number(campaign):
    assert system_name(campaign, "35") == "PARANMT"
    assert system_name(campaign, "not-a-system") == "not-a-system"
    other = Campaign.objects.create(name="generated")
    assert system_name(other, "35") != "PARANMT"  # 35 is PARANMT only in imported ParaBank campaigns
