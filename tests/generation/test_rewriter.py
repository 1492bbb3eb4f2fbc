"""The monolingual rewriter: tiny training runs (loss falls, checkpoints, resumption, export that
loads with the Auto classes), pairs-file errors, the CLI, the synthetic demo pairs and the shipped
demo model."""

from __future__ import annotations

import gzip
import json
import random
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command, load_command_class

from generation import rewriter

ROOT = Path(__file__).resolve().parents[2]
DEMO_MODEL = ROOT / "generation" / "demo" / "model"

SUBJECTS = [
    "A man",
    "A woman",
    "The boy",
    "A girl",
    "Two dogs",
    "The cat",
    "A child",
    "An old man",
    "The chef",
    "A musician",
]
VERBS = [
    ("is playing", "is strumming"),
    ("is cutting", "is slicing"),
    ("is eating", "is consuming"),
    ("is holding", "is carrying"),
    ("is watching", "is looking at"),
]
OBJECTS = ["a guitar", "an onion", "a ball", "some bread", "a red apple"]

TINY = {
    "config": {"d_model": 32, "layers": 1, "ffn_dim": 64, "heads": 2},
    "vocab_size": 200,
    "batch_size": 16,
    "lr": 3e-3,
    "warmup": 2,
    "threads": 1,
    "valid_size": 8,
    "seed": 3,
}


def _made_up_pairs(n=100, seed=0):
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        s, (v1, v2), o = rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS)
        out.append((f"{s} {v1} {o}.", f"{s} {v2} {o}."))
    return out


@pytest.fixture
def pairs_file(tmp_path):
    p = tmp_path / "pairs.tsv"
    p.write_text("".join(f"{a}\t{b}\n" for a, b in _made_up_pairs()), encoding="utf-8")
    return p


def test_tiny_training_checkpoints_resumes_and_exports(tmp_path, pairs_file):
    out = tmp_path / "run"
    seen = []
    first = rewriter.train(pairs_file, out, steps=20, stop_after=10, checkpoint_every=5, progress=seen.append, **TINY)
    # stopped like a kill after 10 steps: checkpointed, nothing exported yet
    assert first.step == 10 and first.start_step == 0 and not first.exported
    ckpts = sorted(p.name for p in (out / "checkpoints").iterdir() if not p.name.startswith("."))
    assert ckpts[-1] == "step-0000010"
    assert not (out / "model.safetensors").exists()

    second = rewriter.train(pairs_file, out, steps=20, checkpoint_every=5, progress=seen.append, **TINY)
    assert second.start_step == 10 and second.step == 20 and second.exported
    steps = [i["step"] for i in seen]
    assert steps == list(range(1, 21))  # continued, not restarted
    losses = [i["loss"] for i in seen]
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 - 0.2

    info = json.loads((out / "paraforge_training.json").read_text())
    assert info["training"]["steps"] == 20 and info["data"]["pairs"] == 100
    assert info["data"]["pairs_sha256"] and info["command"]

    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(out), local_files_only=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(str(out), local_files_only=True)
    assert model.config.model_type == "marian"
    assert model.config.decoder_start_token_id == tok.pad_token_id
    enc = tok(["A man is playing a guitar."], return_tensors="pt")
    gen = model.generate(**enc, num_beams=2, max_new_tokens=12)
    assert gen.shape[0] == 1
    assert isinstance(tok.batch_decode(gen, skip_special_tokens=True)[0], str)


def test_export_only_and_fp16_export(tmp_path, pairs_file):
    out = tmp_path / "run"
    rewriter.train(pairs_file, out, steps=6, stop_after=3, checkpoint_every=3, **TINY)
    dest = tmp_path / "export"
    dest.mkdir()
    (dest / "README.md").write_text("kept")
    res = rewriter.train(None, out, export_only=True, export=dest, fp16=True, **TINY)
    assert res.exported and res.step == 3
    assert (dest / "README.md").read_text() == "kept"
    model, tok = rewriter.load_rewriter(dest)
    assert next(model.parameters()).dtype.is_floating_point
    assert str(next(model.parameters()).dtype) == "torch.float32"
    assert len(rewriter.rewrite(model, tok, ["A dog is eating bread."], max_new_tokens=8)) == 1


def test_malformed_pairs_name_the_line(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("a b\tc d\n# comment\n\nno tab here\n", encoding="utf-8")
    with pytest.raises(rewriter.PairsFileError, match=r"bad\.tsv:4:"):
        rewriter.read_pairs(bad)
    empty_side = tmp_path / "empty.tsv.gz"
    with gzip.open(empty_side, "wt", encoding="utf-8") as fh:
        fh.write("a\tb\n\tc\n")
    with pytest.raises(rewriter.PairsFileError, match=r":2: empty"):
        rewriter.read_pairs(empty_side)
    with pytest.raises(CommandError, match=r"bad\.tsv:4:"):
        call_command(
            "train_rewriter", "--pairs", str(bad), "--out", str(tmp_path / "o"), stdout=StringIO(), stderr=StringIO()
        )
    with pytest.raises(CommandError, match="not found"):
        call_command(
            "train_rewriter",
            "--pairs",
            str(tmp_path / "missing.tsv"),
            "--out",
            str(tmp_path / "o"),
            stdout=StringIO(),
            stderr=StringIO(),
        )


def test_gz_pairs_are_read(tmp_path):
    p = tmp_path / "p.tsv.gz"
    with gzip.open(p, "wt", encoding="utf-8") as fh:
        fh.write("A man runs.\tA man is running.\textra\t0.9\n")
    assert rewriter.read_pairs(p) == [("A man runs.", "A man is running.")]


def test_cli_trains_resumes_and_prints_json(tmp_path, pairs_file):
    out = tmp_path / "cli"
    args = [
        "--pairs",
        str(pairs_file),
        "--out",
        str(out),
        "--d-model",
        "32",
        "--layers",
        "1",
        "--heads",
        "2",
        "--vocab-size",
        "200",
        "--batch-size",
        "16",
        "--warmup",
        "2",
        "--threads",
        "1",
        "--checkpoint-every",
        "2",
        "--steps",
        "6",
    ]
    stdout, stderr = StringIO(), StringIO()
    call_command("train_rewriter", *args, "--stop-after", "4", stdout=stdout, stderr=stderr)
    first = json.loads(stdout.getvalue().strip().splitlines()[-1])
    assert first["step"] == 4 and not first["exported"]
    assert "steps/s" in stderr.getvalue() and "ETA" in stderr.getvalue()
    stdout = StringIO()
    call_command("train_rewriter", *args, stdout=stdout, stderr=StringIO())
    second = json.loads(stdout.getvalue().strip().splitlines()[-1])
    assert second["start_step"] == 4 and second["step"] == 6 and second["exported"]
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    assert (out / "checkpoints").is_dir()  # exporting into the training folder keeps the checkpoints


def test_synthetic_pairs_from_a_small_data_dir(tmp_path):
    d = tmp_path / "data"
    (d / "stsb").mkdir(parents=True)
    (d / "sick").mkdir()
    (d / "ppdb").mkdir()
    (d / "stsb" / "sts-train.csv").write_text(
        "main-captions\tMSRvid\t2012test\t0001\t5.000\tA man is playing a guitar.\tA man plays a guitar.\n"
        "main-news\tx\t2014\t0002\t1.0\tThe big dog runs fast.\tA small cat sleeps.\textra\tcols\n"
    )
    (d / "sick" / "SICK.txt").write_text(
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
        "1\tA woman is slicing an onion\tA man is playing a guitar.\t1.0\tNEUTRAL\n"
    )
    (d / "ppdb" / "ppdb-1.0-xxxl-lexical-synonym-pairs.tsv").write_text(
        "man\tguy\nguitar\tbanjo\ndog\tpuppy\nbig\tlarge\nslicing\tcutting\n12\t13\nthe\ta\n"
    )
    # the synonyms must be attested words of the corpus (PPDB XXXL is noisy): add them
    (d / "stsb" / "sts-dev.csv").write_text(
        "".join(
            f"g\tf\t2012\t{i}\t1.0\tA guy and a banjo and a puppy {i}.\tIt is large and cutting {i}.\n"
            for i in range(3)
        )
    )
    out = tmp_path / "pairs.tsv"
    summary = rewriter.build_synthetic_pairs(d, out, seed=1, copies=2, p_sub=1.0)
    assert summary["sentences"] == 11
    pairs = rewriter.read_pairs(out)
    assert ("A man is playing a guitar.", "A guy is playing a banjo.") in pairs
    assert ("A guy is playing a banjo.", "A man is playing a guitar.") in pairs  # both directions
    again = tmp_path / "again.tsv"
    rewriter.build_synthetic_pairs(d, again, seed=1, copies=2, p_sub=1.0)
    assert again.read_text() == out.read_text()  # seeded
    stdout = StringIO()
    call_command("train_rewriter", "--make-demo-pairs", str(tmp_path / "cli.tsv"), "--data-dir", str(d), stdout=stdout)
    assert json.loads(stdout.getvalue())["pairs"] > 0


def test_noise_keeps_capitalisation_and_punctuation():
    rng = random.Random(0)
    out = rewriter.noise_sentence(
        "Dogs run fast.", rng, {"dogs": ["hounds"], "fast": ["quickly"]}, p_sub=1.0, p_drop=0.0, p_swap=0.0
    )
    assert out == "Hounds run quickly."


@pytest.mark.skipif(not (DEMO_MODEL / "config.json").is_file(), reason="demo model not built")
def test_shipped_demo_model_loads_and_rewrites():
    size = sum(p.stat().st_size for p in DEMO_MODEL.rglob("*") if p.is_file())
    assert size < 40 * 1024 * 1024
    assert not (DEMO_MODEL / "checkpoints").exists()
    assert json.loads((DEMO_MODEL / "config.json").read_text())["model_type"] == "marian"
    assert (DEMO_MODEL / "paraforge_training.json").is_file() and (DEMO_MODEL / "README.md").is_file()
    model, tok = rewriter.load_rewriter(DEMO_MODEL)
    out = rewriter.rewrite(model, tok, ["A man is playing a guitar."], num_beams=4, max_new_tokens=32)[0]
    assert out.strip() and any(c.isalpha() for c in out)
    assert {"man", "guitar"} & set(out.lower().replace(".", " ").split())


def _trained_folder(tmp_path, pairs_file):
    out = tmp_path / "run"
    rewriter.train(pairs_file, out, steps=2, checkpoint_every=1, keep_checkpoints=1, **TINY)
    return out


def _cli(*args):
    call_command("train_rewriter", *args, stdout=StringIO(), stderr=StringIO())


def test_no_resume_with_bad_pairs_or_settings_keeps_the_previous_run(tmp_path, pairs_file):
    """--no-resume deletes checkpoints/ and tokenizer/ only once the new run's inputs are known good."""
    out = _trained_folder(tmp_path, pairs_file)
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    assert (out / "checkpoints" / "step-0000002").is_dir() and (out / "tokenizer" / "vocab.json").is_file()
    bad = tmp_path / "bad.tsv"
    bad.write_text("a b\tc d\nno tab here\n", encoding="utf-8")
    with pytest.raises(CommandError, match=r"bad\.tsv:2: expected 'sentence<TAB>paraphrase'"):
        _cli("--pairs", str(bad), "--out", str(out), "--no-resume")
    # a vocabulary too small for the pairs' characters fails in SentencePiece, after the pairs are read
    with pytest.raises(CommandError, match=r"--vocab-size 20 is too small for these pairs: .* at least \d+"):
        _cli("--pairs", str(pairs_file), "--out", str(out), "--no-resume", "--vocab-size", "20")
    with pytest.raises(CommandError, match="--batch-size must be at least 1"):
        _cli("--pairs", str(pairs_file), "--out", str(out), "--no-resume", "--batch-size", "0")
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    assert rewriter.latest_checkpoint(out).name == "step-0000002"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--batch-size", "0"], "--batch-size must be at least 1, not 0"),
        (["--checkpoint-every", "0"], "--checkpoint-every must be at least 1, not 0"),
        (["--steps", "0"], "--steps must be at least 1, not 0"),
        (["--steps", "-5"], "--steps must be at least 1, not -5"),
        (["--max-len", "0"], "--max-len must be at least 2, not 0"),
        (["--vocab-size", "0"], "--vocab-size must be at least 1, not 0"),
        (["--lr", "-1"], "--lr must be a positive number, not -1.0"),
        (["--lr", "nan"], r"--lr: the value must be a number written in digits 0-9 .*, not 'nan'"),
        (["--device", "bogus"], "--device 'bogus' is not a device"),
        (["--stop-after", "0"], "--stop-after must be at least 1, not 0"),
        (["--d-model", "0"], "--d-model must be at least 1, not 0"),
    ],
)
def test_cli_refuses_settings_that_cannot_train(tmp_path, pairs_file, args, message):
    out = tmp_path / "o"
    with pytest.raises(CommandError, match=message):
        _cli("--pairs", str(pairs_file), "--out", str(out), *args)
    assert not out.exists()  # nothing created, and in particular no untrained model exported


def test_cli_out_that_is_a_file_is_refused_and_kept(tmp_path, pairs_file):
    out = tmp_path / "notes.txt"
    out.write_text("keep me")
    with pytest.raises(CommandError, match=r"--out .*notes\.txt is a file, not a folder"):
        _cli("--pairs", str(pairs_file), "--out", str(out))
    assert out.read_text() == "keep me"


@pytest.mark.parametrize("gz", [False, True])
def test_non_utf8_pairs_name_the_line(tmp_path, gz):
    data = b"A man runs.\tA man is running.\n" * 3 + "Caf\xe9 noir.\tA black coffee.\n".encode("latin-1")
    path = tmp_path / ("latin1.tsv.gz" if gz else "latin1.tsv")
    path.write_bytes(gzip.compress(data) if gz else data)
    with pytest.raises(
        rewriter.PairsFileError, match=r"latin1\.tsv(\.gz)?:4: not UTF-8 text \(byte 0xe9 at column 4\)"
    ):
        rewriter.read_pairs(path)
    with pytest.raises(CommandError, match=r":4: not UTF-8"):
        _cli("--pairs", str(path), "--out", str(tmp_path / "o"))


def test_a_gzipped_pairs_file_is_read_whatever_its_name(tmp_path):
    """One way to read a user's file (infra.textfiles): gzip by its magic bytes, not by a .gz suffix."""
    packed = tmp_path / "pairs.tsv"  # gzipped, but not named so
    packed.write_bytes(gzip.compress("\ufeffA cat sat.\tThe cat sat.\nDogs run.\tDogs are running.\n".encode()))
    assert rewriter.read_pairs(packed) == [("A cat sat.", "The cat sat."), ("Dogs run.", "Dogs are running.")]


def test_train_config_is_the_commands_options_and_refuses_what_cannot_train(tmp_path):
    """One frozen class: its fields are the command's options (``--batch-size``), its ``__post_init__`` the
    checks, naming a setting as a keyword and, in ``option_message``, as the command spells it."""
    from jobs.params import field_names

    parser = load_command_class("generation", "train_rewriter").create_parser("manage.py", "train_rewriter")
    flags = {flag for action in parser._actions for flag in action.option_strings}
    assert {"--pairs", "--out", "--export", "--fp16", "--no-resume", "--batch-size", "--d-model"} <= flags
    assert not {"--weight-decay", "--clip", "--valid-size", "--command"} & flags  # set by code, not a person
    assert "pairs" in field_names(rewriter.TrainConfig)
    with pytest.raises(rewriter.TrainOptionsError) as caught:
        rewriter.TrainConfig(None, tmp_path / "o", batch_size=0)
    assert str(caught.value) == "batch_size must be at least 1, not 0"
    assert caught.value.option_message == "--batch-size must be at least 1, not 0"
    with pytest.raises(rewriter.TrainOptionsError, match="out is required"):
        rewriter.TrainConfig(None, None)
    with pytest.raises(rewriter.TrainOptionsError, match="label_smoothing must be in"):
        rewriter.TrainConfig(None, tmp_path / "o", label_smoothing=1.0)
    # the width alone sets the feed-forward width (4 x) and, when 4 does not divide it, one head
    assert rewriter.TrainConfig(None, tmp_path, d_model=30).architecture == {
        "layers": None,
        "d_model": 30,
        "heads": 1,
        "ffn_dim": 120,
    }
    assert not tmp_path.joinpath("o").exists()


def test_demo_sentences_that_are_not_utf8_name_the_line(tmp_path):
    d = tmp_path / "data"
    (d / "stsb").mkdir(parents=True)
    (d / "stsb" / "sts-train.csv").write_bytes("g\tf\t2012\t1\t1.0\tCaf\xe9.\tA cafe.\n".encode("latin-1"))
    with pytest.raises(CommandError, match=r"sts-train\.csv:1: not UTF-8 \(byte 0xe9 at column 19\)"):
        call_command("train_rewriter", "--make-demo-pairs", str(tmp_path / "p.tsv"), "--data-dir", str(d))
