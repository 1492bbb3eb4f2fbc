import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.campaigns.importers import ImportFormatError, import_parabank
from annotation.models import Assignment, Campaign, Candidate, CandidateSystem, Judgment, Reference, Worker

from .parabank_data import CAND_HEADER, CANDS, REFS, import_contract, write_parabank

pytestmark = pytest.mark.django_db


def test_import_contract_campaign(tmp_path):
    summary = import_contract(tmp_path)
    assert summary.campaign_created and summary.rows == 7
    assert (summary.references_created, summary.candidates_created, summary.workers_created) == (2, 4, 3)
    assert summary.judgments_created == 7
    campaign = Campaign.objects.get(name="contract")
    assert campaign.settings["system_names"] == {"35": "PARANMT"}
    assert campaign.min_judgments_per_worker == 25  # defaults kept
    ref = Reference.objects.get(campaign=campaign, ref_id="1")
    assert ref.length_bucket == 5 and ref.extra == {"czeng_s": "1.0"}
    # the attention copy and system 28's identical output are one candidate with both systems
    copy = Candidate.objects.get(reference=ref, text="It is fine now.")
    assert set(copy.systems.values_list("system", flat=True)) == {"0", "28"}
    assert copy.is_attention_copy and copy.judgments.count() == 2
    okay = Candidate.objects.get(reference=ref, text="It is okay now.")
    assert set(okay.systems.values_list("system", flat=True)) == {"17", "21"} and okay.nll == 0.5
    na = Judgment.objects.get(candidate__text="He left very soon.", worker__external_id=f"c{campaign.pk}:2")
    assert na.score is None and na.fluency == 0
    # one assignment per (worker, reference); workers namespaced by campaign; provider "import"
    assert Assignment.objects.filter(campaign=campaign).count() == 5
    assert set(Worker.objects.values_list("external_id", flat=True)) == {f"c{campaign.pk}:{w}" for w in "123"}
    assert set(Assignment.objects.values_list("provider", flat=True)) == {"import"}
    for j in Judgment.objects.select_related("assignment"):
        assert j.worker_id == j.assignment.worker_id


def test_reimport_is_idempotent(tmp_path):
    import_contract(tmp_path)
    counts = [
        m.objects.count() for m in (Campaign, Reference, Candidate, CandidateSystem, Worker, Assignment, Judgment)
    ]
    again = import_contract(tmp_path)
    assert not again.campaign_created
    assert again.judgments_unchanged == 7
    assert (
        again.judgments_created == again.candidates_created == again.assignments_created == again.workers_created == 0
    )
    assert counts == [
        m.objects.count() for m in (Campaign, Reference, Candidate, CandidateSystem, Worker, Assignment, Judgment)
    ]


def test_reimport_updates_a_changed_score(tmp_path):
    import_contract(tmp_path)
    cands = list(CANDS)
    cands[2] = cands[2].replace("\t80\t2", "\t85\t2")
    summary = import_contract(tmp_path, cands=cands)
    assert (summary.judgments_updated, summary.judgments_unchanged, summary.judgments_created) == (1, 6, 0)
    assert Judgment.objects.filter(score=85).count() == 1 and Judgment.objects.count() == 7


def test_same_worker_twice_on_one_candidate_gets_a_second_assignment(tmp_path):
    summary = import_contract(tmp_path, cands=CANDS + ["1\t1\t5\t17\tIt is okay now.\t0.5\t90\t2"])
    assert summary.assignments == 6 and summary.judgments_created == 8
    assert Assignment.objects.filter(external_assignment_id__endswith="#2").count() == 1


def test_another_campaign_is_separate(tmp_path):
    import_contract(tmp_path, campaign="a")
    import_contract(tmp_path, campaign="b")
    assert Worker.objects.count() == 6 and Judgment.objects.count() == 14


@pytest.mark.parametrize(
    "row,line,message",
    [
        ("1\t9\t5\t17\tHi.\t0.1\t50\t2", 9, "unknown ref_id '9'"),
        ("1\t1\t5\t17\tHi.\t0.1\t101\t2", 9, "human_score 101 is out of range 0-100"),
        ("1\t1\t5\t17\tHi.\t0.1\t-3\t2", 9, "human_score -3 is out of range"),
        ("1\t1\t5\t17\tHi.\t0.1\t55.5\t2", 9, "human_score '55.5' is not an integer"),
        ("1\t1\t5\t17\tHi.\t0.1\tabc\t2", 9, "is not an integer"),
        ("1\t1\t5\t17\tHi.\t0.1\t\t1", 9, "empty human_score (N/A slider) but gm 1"),
        ("1\t1\t5\t17\tHi.\t0.1\t\t2", 9, "empty human_score"),
        ("1\t1\t5\t17\tHi.\t0.1\t50\t3", 9, "gm 3 is out of range 0-2"),
        ("1\t1\t5\t17\tHi.\t0.1\t50\tyes", 9, "gm 'yes' is not an integer"),
        ("1\t1\t5\t17\tHi.\t0.1\t50", 9, "expected 8 tab-separated fields, found 7"),
        ("1\t1\t10\t17\tHi.\t0.1\t50\t2", 9, "ref_len 10 differs"),
        ("1\t1\t5\t\tHi.\t0.1\t50\t2", 9, "empty sys_id"),
        ("1\t1\t5\t17\tHi.\tx\t50\t2", 9, "NLL 'x' is not a number"),
    ],
)
def test_candidate_errors_name_file_and_line(tmp_path, row, line, message):
    ref_path, cand_path = write_parabank(tmp_path, cands=CANDS + [row])
    with pytest.raises(ImportFormatError) as err:
        import_parabank(campaign_name="bad", references_path=ref_path, candidates_path=cand_path)
    assert err.value.line == line and err.value.path == str(cand_path)
    assert message in str(err.value) and str(err.value).startswith(f"{cand_path}:{line}: ")
    assert not Campaign.objects.exists() and not Judgment.objects.exists()


def test_missing_candidate_columns(tmp_path):
    ref_path, cand_path = write_parabank(tmp_path, cand_header=CAND_HEADER.replace("human_score", "score"))
    with pytest.raises(ImportFormatError, match=r"cand.tsv:1: missing column\(s\) human_score"):
        import_parabank(campaign_name="bad", references_path=ref_path, candidates_path=cand_path)


@pytest.mark.parametrize(
    "refs,header,line,message",
    [
        (REFS + ["1\tAgain.\t5\t1.0"], None, 4, "duplicate ref_id '1' (first on line 2)"),
        (REFS + ["3\tShort.\tfive\t1.0"], None, 4, "ref_len 'five' is not an integer"),
        (REFS, "ref_id\tref_sent\tczeng_s", 1, "missing column(s) ref_len"),
    ],
)
def test_reference_errors(tmp_path, refs, header, line, message):
    kw = {"ref_header": header} if header else {}
    ref_path, cand_path = write_parabank(tmp_path, refs=refs, **kw)
    with pytest.raises(ImportFormatError) as err:
        import_parabank(campaign_name="bad", references_path=ref_path, candidates_path=cand_path)
    assert err.value.line == line and err.value.path == str(ref_path) and message in str(err.value)


def test_reference_conflict_with_an_earlier_import(tmp_path):
    import_contract(tmp_path)
    with pytest.raises(ImportFormatError, match="ref_id '1' is already in campaign 'contract' with another text"):
        import_contract(tmp_path, refs=["1\tIt is fine today.\t5\t1.0", REFS[1]])
    assert Reference.objects.get(ref_id="1").text == "It is fine now."


def test_import_is_one_transaction(tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(Judgment.objects, "bulk_create", boom)
    with pytest.raises(RuntimeError):
        import_contract(tmp_path)
    for model in (Campaign, Reference, Candidate, CandidateSystem, Worker, Assignment):
        assert not model.objects.exists(), model


def test_cli_prints_json_summary(tmp_path):
    ref_path, cand_path = write_parabank(tmp_path)
    out = StringIO()
    call_command(
        "import_judgments",
        "--format",
        "parabank",
        "--references",
        str(ref_path),
        str(cand_path),
        "--campaign",
        "cli",
        stdout=out,
    )
    summary = json.loads(out.getvalue())
    assert summary["campaign"] == "cli" and summary["judgments_created"] == 7


def test_cli_error_names_the_line(tmp_path):
    ref_path, cand_path = write_parabank(tmp_path, cands=CANDS + ["1\t7\t5\t17\tHi.\t0.1\t50\t2"])
    with pytest.raises(CommandError, match=r"nothing imported: .*cand.tsv:9: unknown ref_id '7'"):
        call_command(
            "import_judgments",
            "--format",
            "parabank",
            "--references",
            str(ref_path),
            str(cand_path),
            "--campaign",
            "cli",
        )
    assert not Campaign.objects.exists()


GENERIC_MAP = (
    "worker=WorkerId,reference=Input.ref,reference_text=Input.sentence,length=Input.len,"
    "systems=Input.systems,candidate=Input.candidate,score=Answer.score,fluency=Answer.gm"
)


def _generic_csv(tmp_path, rows, name="results.csv"):
    path = tmp_path / name
    head = "WorkerId,Input.ref,Input.sentence,Input.len,Input.systems,Input.candidate,Answer.score,Answer.gm"
    path.write_text("\n".join([head, *rows]) + "\n", encoding="utf-8")
    return path


GENERIC_ROWS = [
    'A1,1,"It is fine, now.",5,0,"It is fine, now.",100,2',
    'A2,1,"It is fine, now.",5,28,"It is fine, now.",96,2',
    'A1,1,"It is fine, now.",5,17 21,"It is okay, now.",80,2',
    'A2,1,"It is fine, now.",5,17,"It is okay, now.",,0',
]


def test_generic_import_with_a_mapping(tmp_path):
    from annotation.campaigns.importers import import_generic, parse_mapping

    path = _generic_csv(tmp_path, GENERIC_ROWS)
    summary = import_generic(campaign_name="g", path=path, mapping=parse_mapping(GENERIC_MAP))
    assert (summary.references_created, summary.candidates_created, summary.judgments_created) == (1, 2, 4)
    copy = Candidate.objects.get(text="It is fine, now.")
    assert set(copy.systems.values_list("system", flat=True)) == {"0", "28"}
    again = import_generic(campaign_name="g", path=path, mapping=parse_mapping(GENERIC_MAP))
    assert again.judgments_unchanged == 4 and Judgment.objects.count() == 4
    # a later file may leave the reference text out: the campaign already has the reference
    short = tmp_path / "more.tsv"
    short.write_text("w\tref\tsys\tcand\ts\tg\nA3\t1\t17\tIt is okay, now.\t70\t1\n", encoding="utf-8")
    more = import_generic(
        campaign_name="g",
        path=short,
        mapping=parse_mapping("worker=w,reference=ref,systems=sys,candidate=cand,score=s,fluency=g"),
    )
    assert more.judgments_created == 1 and Candidate.objects.count() == 2


def test_generic_errors(tmp_path):
    from annotation.campaigns.importers import import_generic, parse_mapping

    path = _generic_csv(tmp_path, GENERIC_ROWS + ['A3,1,"It is fine, now.",5,17,"Hm.",101,2'])
    with pytest.raises(ImportFormatError, match=r"results.csv:6: Answer.score 101 is out of range"):
        import_generic(campaign_name="g", path=path, mapping=parse_mapping(GENERIC_MAP))
    path = _generic_csv(tmp_path, GENERIC_ROWS + ['A3,2,,5,17,"Hm.",50,2'])
    with pytest.raises(ImportFormatError, match=r"results.csv:6: unknown Input.ref '2'"):
        import_generic(campaign_name="g", path=path, mapping=parse_mapping(GENERIC_MAP))
    with pytest.raises(ImportFormatError, match=r"results.csv:1: missing column\(s\) Nope"):
        import_generic(campaign_name="g", path=path, mapping=parse_mapping(GENERIC_MAP.replace("Answer.gm", "Nope")))
    with pytest.raises(ValueError, match="lacks fluency"):
        parse_mapping("worker=a,reference=b,systems=c,candidate=d,score=e")
    with pytest.raises(ValueError, match="unknown field 'colour'"):
        parse_mapping(GENERIC_MAP + ",colour=x")
    assert not Campaign.objects.exists()


def test_generic_cli(tmp_path):
    path = _generic_csv(tmp_path, GENERIC_ROWS)
    out = StringIO()
    call_command(
        "import_judgments", "--format", "generic", "--map", GENERIC_MAP, str(path), "--campaign", "g", stdout=out
    )
    assert json.loads(out.getvalue())["judgments_created"] == 4
    with pytest.raises(CommandError, match="--map is required"):
        call_command("import_judgments", "--format", "generic", str(path), "--campaign", "g")
    with pytest.raises(CommandError, match="--references is required"):
        call_command("import_judgments", str(path), "--campaign", "g")


# --- bad arguments and non-UTF-8 files: one-line errors, nothing imported ----------------------------


@pytest.mark.parametrize("delimiter", ["||", "", '"'])
def test_generic_cli_refuses_a_delimiter_that_is_not_one_plain_character(tmp_path, delimiter):
    path = _generic_csv(tmp_path, GENERIC_ROWS)
    with pytest.raises(CommandError, match=r"nothing imported: the delimiter"):
        call_command(
            "import_judgments",
            "--format",
            "generic",
            "--map",
            GENERIC_MAP,
            str(path),
            "--campaign",
            "g",
            "--delimiter",
            delimiter,
        )
    assert not Campaign.objects.exists()


def test_generic_cli_takes_a_tab_delimiter_by_name(tmp_path):
    path = tmp_path / "results.txt"
    path.write_text(
        "w\tref\tsys\tcand\ts\tg\tsent\tlen\nA1\t1\t17\tIt is okay.\t70\t1\tIt is fine.\t5\n", encoding="utf-8"
    )
    out = StringIO()
    call_command(
        "import_judgments",
        "--format",
        "generic",
        "--map",
        "worker=w,reference=ref,systems=sys,candidate=cand,score=s,fluency=g,reference_text=sent,length=len",
        str(path),
        "--campaign",
        "g",
        "--delimiter",
        "tab",
        stdout=out,
    )
    assert json.loads(out.getvalue())["judgments_created"] == 1


def test_a_non_utf8_candidates_file_names_the_line_not_a_byte_offset(tmp_path):
    ref_path, cand_path = write_parabank(tmp_path)
    lines = [CAND_HEADER, *CANDS, *CANDS[:1] * 300, "1\t1\t5\t9\tIt is fine, caf\u00e9.\t0.1\t50\t2"]
    cand_path.write_bytes(("\n".join(lines) + "\n").encode("latin-1"))  # past the decoder's first 8 KiB chunk
    with pytest.raises(
        CommandError,
        match=r"nothing imported: .*cand.tsv:309: not UTF-8 \(byte 0xe9 at byte 24 "
        r"of the line\); save it as UTF-8$",
    ):
        call_command("import_judgments", "--references", str(ref_path), str(cand_path), "--campaign", "c2")
    ref_path.write_bytes(
        "ref_id\tref_sent\tref_len\n1\tIt is fine now.\t5\n2\tHe left caf\u00e9.\t5\n".encode("latin-1")
    )
    with pytest.raises(ImportFormatError, match=r"ref.tsv:3: not UTF-8"):
        import_parabank(campaign_name="c2", references_path=ref_path, candidates_path=cand_path)
    assert not Campaign.objects.exists()


def test_a_non_utf8_generic_file_names_the_line(tmp_path):
    from annotation.campaigns.importers import import_generic, parse_mapping

    path = tmp_path / "results.csv"
    rows = [
        "WorkerId,Input.ref,Input.sentence,Input.len,Input.systems,Input.candidate,Answer.score,Answer.gm",
        *GENERIC_ROWS,
        'A3,1,"It is fine, now.",5,17,"Un caf\u00e9.",50,2',
    ]
    path.write_bytes(("\n".join(rows) + "\n").encode("latin-1"))
    with pytest.raises(ImportFormatError, match=r"results.csv:6: not UTF-8 \(byte 0xe9"):
        import_generic(campaign_name="g", path=path, mapping=parse_mapping(GENERIC_MAP))
    assert not Campaign.objects.exists()


@pytest.mark.parametrize("name", ["", "   "])
def test_an_empty_campaign_name_is_refused(tmp_path, name):
    ref_path, cand_path = write_parabank(tmp_path)
    with pytest.raises(CommandError, match="nothing imported: the campaign name is empty"):
        call_command("import_judgments", "--references", str(ref_path), str(cand_path), "--campaign", name)
    path = _generic_csv(tmp_path, GENERIC_ROWS)
    with pytest.raises(CommandError, match="nothing imported: the campaign name is empty"):
        call_command("import_judgments", "--format", "generic", "--map", GENERIC_MAP, str(path), "--campaign", name)
    assert not Campaign.objects.exists()
