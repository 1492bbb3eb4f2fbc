"""The yardstick for issue 47's hand count (bench/paraphraser_vs_parabank.py): ParaBank's raters' verdicts per
system by the recipe's rule, and the tally of a blind judgement, on a made-up parabank-eval folder."""

import pytest

from bench import paraphraser_vs_parabank as vs
from bench.paraphraser_recipe import judged_candidates, parabank_pairs

REFS = "ref_id\tref_sent\tref_len\tczeng_s\n1\tThe cat sat on the mat.\t5\tx\n2\tA man plays the guitar.\t5\tx\n"
HEADER = "worker_id_anon\tref_id\tref_len\tsys_id\tcandidate\tNLL\thuman_score\tgm\n"
JUDGMENTS = [
    # ref 1 (held out: 1 % 4 == 1): system 15's output a paraphrase by every rater, system 22's not
    ("w1", "1", "15", "A cat was sitting on the mat.", "90", "2"),
    ("w2", "1", "15", "A cat was sitting on the mat.", "80", "2"),
    ("w1", "1", "22", "The dog sat on the mat.", "30", "2"),
    ("w1", "1", "0", "The cat sat on the mat.", "100", "2"),  # the attention check: not a candidate
    # ref 2: a high slider with one grammar mark 1 is not a paraphrase; "nonsensical" counts as 0
    ("w1", "2", "15", "A man is playing guitar.", "95", "1"),
    ("w1", "2", "22", "Guitar man play.", "", "0"),
    ("w2", "2", "22", "Guitar man play.", "100", "2"),
]


@pytest.fixture()
def data(tmp_path):
    folder = tmp_path / "parabank-eval"
    folder.mkdir()
    (folder / "ref.tsv").write_text(REFS, encoding="utf-8")
    rows = "".join(f"{w}\t{r}\t5\t{s}\t{c}\t1.0\t{h}\t{g}\n" for w, r, s, c, h, g in JUDGMENTS)
    (folder / "candidates.tsv").write_text(HEADER + rows, encoding="utf-8")
    return tmp_path


def test_the_recipes_rule_pools_raters_and_counts_nonsensical_as_zero(data):
    judged = {(j.ref_id, j.candidate): j for j in judged_candidates(data / "parabank-eval")}
    assert set(judged) == {
        ("1", "A cat was sitting on the mat."),
        ("1", "The dog sat on the mat."),
        ("2", "A man is playing guitar."),
        ("2", "Guitar man play."),
    }
    assert judged[("1", "A cat was sitting on the mat.")].is_paraphrase()
    assert not judged[("2", "A man is playing guitar.")].is_paraphrase()  # one grammar mark 1
    assert judged[("2", "Guitar man play.")].mean_score == 50.0
    # the held-out reference (ref_id % 4 == 1) never becomes a training pair
    assert parabank_pairs(data / "parabank-eval", min_score=0) == []


def test_raters_prints_each_systems_share(data, capsys):
    vs.main(["raters", "--data", str(data)])
    lines = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines() if line[:1] == " "}
    assert lines["15"][:2] == ["2", "50%"]  # all references: ref 1's output yes, ref 2's no
    assert lines["15"][2:] == ["1", "100%"]  # held out: ref 1 only
    assert lines["22"][:2] == ["2", "0%"]


def write(path, header, rows):
    vs.write_tsv(path, header, rows)
    return path


def test_tally_counts_each_side_blind_and_compares_with_the_raters(data, capsys):
    judged = write(
        data / "judged.tsv",
        ["i", "system", "reference", "A", "B", "label_A", "label_B"],
        [
            [
                0,
                "15",
                "The cat sat on the mat.",
                "The cat is on the mat.",
                "A cat was sitting on the mat.",
                "slip",
                "real",
            ],
            [
                1,
                "22",
                "The cat sat on the mat.",
                "The dog sat on the mat.",
                "A cat sat on a mat.",
                "meaning change",
                "real",
            ],
        ],
    )
    key = write(
        data / "key.tsv",
        ["i", "ref_id", "system", "A_is", "B_is", "constrained"],
        [[0, "1", "15", "ours", "parabank", "yes"], [1, "1", "22", "parabank", "ours", "no"]],
    )
    vs.main(["tally", "--data", str(data), "--judged", str(judged), "--key", str(key)])
    out = capsys.readouterr().out
    assert "ours         all: 1/2 real (50%); 1 real, 1 slip" in out
    assert "parabank     all: 1/2 real (50%); 1 real, 1 meaning change" in out
    assert "ours      banned: 0/1 real (0%); 1 slip" in out  # only row 0 was decoded under a ban
    assert "{'parabank better': 1, 'ours better': 1}" in out
    assert "real:   1  median slider  85.0  rule 1" in out
    assert "meaning change:   1  median slider  30.0  rule 0" in out


def test_tally_refuses_a_label_outside_the_rubric(data):
    judged = write(
        data / "judged.tsv",
        ["i", "system", "reference", "A", "B", "label_A", "label_B"],
        [[0, "15", "The cat sat on the mat.", "x", "A cat was sitting on the mat.", "good", "real"]],
    )
    key = write(
        data / "key.tsv",
        ["i", "ref_id", "system", "A_is", "B_is", "constrained"],
        [[0, "1", "15", "ours", "parabank", "yes"]],
    )
    with pytest.raises(SystemExit, match="row 0: label 'good' is not one of real"):
        vs.main(["tally", "--data", str(data), "--judged", str(judged), "--key", str(key)])
